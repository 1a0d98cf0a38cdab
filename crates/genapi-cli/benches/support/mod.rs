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
