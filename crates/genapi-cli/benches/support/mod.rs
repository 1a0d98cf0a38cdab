//! Shared by the benches that need the mock in a separate process, so that
//! only client work is measured in the bench's own process.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A `genapi mock` child process; killed when dropped.
pub struct MockProcess {
    child: Child,
    /// Its base URL.
    pub base_url: String,
    /// The origin of its regional polling host, which a client must trust.
    pub regional_origin: String,
    /// The key it accepts.
    key: String,
}

impl MockProcess {
    /// Starts `genapi mock` with this key and task duration.
    pub fn start(key: &str, duration_ms: u64) -> MockProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_genapi"))
            .args(["mock", "--key", key, "--duration-ms", &duration_ms.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the mock");
        // Read `export NAME='VALUE'` lines until the ready marker (or the
        // end), in whatever order and number they come; then stop reading:
        // the mock keeps serving without anyone on its stdout.
        let (mut base_url, mut regional_origin) = (None, None);
        for line in BufReader::new(child.stdout.take().expect("stdout")).lines() {
            let Ok(line) = line else { break };
            match genapi_test_common::mock_variable(&line) {
                Some((name, value)) if name == "GENAPI_BASE_URL" => base_url = Some(value),
                Some((name, value)) if name == "GENAPI_TRUSTED_ORIGINS" => regional_origin = Some(value),
                _ => {}
            }
            if line.starts_with("# genapi mock ready") {
                break;
            }
        }
        MockProcess {
            child,
            base_url: base_url.expect("the mock prints its base URL"),
            regional_origin: regional_origin.expect("the mock prints the origins a client must trust"),
            key: key.to_string(),
        }
    }
}

impl MockProcess {
    /// The mock's counters (`GET /mock/stats`): what the service saw.
    #[allow(dead_code)] // not every bench counts
    pub async fn stats(&self, http: &reqwest::Client) -> serde_json::Value {
        http.get(format!("{}/mock/stats", self.base_url))
            .header("x-key", &self.key)
            .send()
            .await
            .expect("stats")
            .json()
            .await
            .expect("stats JSON")
    }
}

impl MockProcess {
    /// The tasks the mock made (`GET /mock/tasks`): what the service saw.
    #[allow(dead_code)] // not every bench counts tasks
    pub async fn tasks(&self, http: &reqwest::Client) -> serde_json::Value {
        http.get(format!("{}/mock/tasks", self.base_url))
            .header("x-key", &self.key)
            .send()
            .await
            .expect("tasks")
            .json()
            .await
            .expect("tasks JSON")
    }

    /// Polls the mock has answered so far, read from its counters.
    #[allow(dead_code)] // not every bench counts polls
    pub fn polls_so_far(&self) -> u64 {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime to read the counters");
        genapi_test_common::install_tls_provider();
        let stats = runtime.block_on(self.stats(&reqwest::Client::new()));
        stats["polls"].as_u64().expect("the mock counts polls")
    }
}

/// The machine's one-minute load average, as the kernel reports it: printed
/// beside every figure, since a busy machine moves them.
#[allow(dead_code)]
pub fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}

impl Drop for MockProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The median of `values` (sorted in place).
#[allow(dead_code)]
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    }
}

/// `genapi ARGS` against `mock` with `key`, in `dir`, its stdout dropped.
#[allow(dead_code)]
pub fn genapi_command(mock: &MockProcess, key: &str, dir: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_genapi"));
    command
        .env("GENAPI_BASE_URL", &mock.base_url)
        .env("GENAPI_API_KEY", key)
        .env("GENAPI_TRUSTED_ORIGINS", &mock.regional_origin)
        .env_remove("GENAPI_LOG")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    command
}

/// What one `genapi batch` process took, as the kernel counted it.
#[allow(dead_code)]
pub struct Measured {
    /// From start to exit.
    pub wall: std::time::Duration,
    /// User and system CPU time, in seconds.
    pub cpu: f64,
    /// Peak resident memory, in MiB.
    pub peak_rss_mib: f64,
}

/// Runs `genapi batch jobs.jsonl --out out --quiet ARGS` in `dir` (made
/// afresh, with `lines` small gen-2-pro lines) against `mock`, and reaps it
/// with `wait4`, which also gives its resource usage. Every line must end
/// in the results.
#[allow(dead_code)]
// The child is reaped by `wait4`.
#[allow(clippy::zombie_processes)]
pub fn run_batch(mock: &MockProcess, key: &str, dir: &std::path::Path, lines: usize, args: &[&str]) -> Measured {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("bench directory");
    let jobs: Vec<String> = (1..=lines)
        .map(|n| {
            serde_json::json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("bench {n}"),
                "width": 64, "height": 64})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), jobs.join("\n")).expect("job file");
    let started = std::time::Instant::now();
    let child = genapi_command(mock, key, dir)
        .args(["batch", "jobs.jsonl", "--out", "out", "--quiet"])
        .args(args)
        .spawn()
        .expect("start the batch");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, and both pointers are valid for the call.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let wall = started.elapsed();
    assert_eq!(waited, pid, "wait for the batch");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the batch failed ({status})"
    );
    let results = std::fs::read_to_string(dir.join("out/results.jsonl")).expect("results");
    assert_eq!(results.lines().count(), lines);
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    Measured {
        wall,
        cpu: seconds(usage.ru_utime) + seconds(usage.ru_stime),
        // Linux reports ru_maxrss in KiB.
        peak_rss_mib: usage.ru_maxrss as f64 / 1024.0,
    }
}
