//! Two `genapi batch --ledger` workers on one batch while something goes
//! wrong, against the mock in another process and a throwaway PostgreSQL
//! cluster; counted where the service and the database count.
//!
//! The faults, each in a cell of its own, once the workers are under way
//! (a fifth of the lines ended):
//! - **kill**: one worker SIGKILLed; the other goes on alone;
//! - **pause**: one worker SIGSTOPped past its lease, then resumed;
//! - **backend kill**: `pg_terminate_backend` of every worker's connection,
//!   twice a second for five seconds;
//! - **restart**: the server stopped at once (`pg_ctl stop -m immediate`),
//!   down three seconds, and started again.
//!
//! Each with lines of 100–300 ms and, apart, of 2–5 s (256 × 256: the mock
//! bills them a few hundredths of a credit, a price the cap counts), a
//! credit cap in force (`--max-credits`, far above what the lines cost:
//! every line ends), 8
//! seats and a lease of 5 s. Per cell: lines not ended, jobs the service
//! made two tasks of, credits past the cap (each must be 0); for a kill or a
//! pause the **time to rescue**: from the signal until no line the worker
//! held and had not ended is still its (another worker claimed it); wall
//! time; and, per line, the database's commits, WAL bytes and dead tuples
//! left. Kills repeat `CHAOS_BENCH_RUNS` times (5 by default), the others
//! once each run too; the summary gives median and 95th percentile.
//!
//! `cargo bench -p genapi-cli --bench chaos`

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use genapi_test_common::pg;
mod support;

const KEY: &str = "chaos-bench-key";
const SEATS: usize = 8;
const LEASE_SECONDS: u64 = 5;
/// Far above what the lines cost: in force, never reached.
const CAP: &str = "100000";

#[derive(Clone, Copy, PartialEq, Debug)]
enum Fault {
    Kill,
    Pause,
    BackendKill,
    Restart,
}

impl Fault {
    const ALL: [Fault; 4] = [Fault::Kill, Fault::Pause, Fault::BackendKill, Fault::Restart];

    fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::BackendKill => "backend kill",
            Fault::Restart => "restart",
        }
    }
}

/// Lines of one cell: durations in milliseconds.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Lines {
    Short,
    Long,
}

impl Lines {
    fn durations(self, rng: &mut fastrand::Rng) -> Vec<u64> {
        match self {
            Lines::Short => (0..160).map(|_| rng.u64(100..=300)).collect(),
            Lines::Long => (0..48).map(|_| rng.u64(2000..=5000)).collect(),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Lines::Short => "0.1–0.3 s",
            Lines::Long => "2–5 s",
        }
    }
}

/// What one cell's run came to.
struct Outcome {
    not_ended: u64,
    twice: u64,
    past_cap: f64,
    rescue: Option<f64>,
    wall: f64,
    commits_per_line: f64,
    wal_per_line: f64,
    dead_per_line: f64,
}

fn number(text: &str) -> f64 {
    text.trim().parse().unwrap_or(f64::NAN)
}

/// The lines worker `name` holds and has not ended.
fn held_by(cluster: &pg::Postgres, batch: &str, name: &str) -> f64 {
    number(&cluster.sql(&format!(
        "SELECT count(*) FROM genapi_lines WHERE batch = '{batch}' AND NOT done AND worker = '{name}'"
    )))
}

fn done(cluster: &pg::Postgres, batch: &str) -> f64 {
    number(&cluster.sql(&format!(
        "SELECT count(*) FROM genapi_lines WHERE batch = '{batch}' AND done"
    )))
}

/// Commits, WAL position (bytes) and dead tuples of the ledger's tables.
fn database_counters(cluster: &pg::Postgres) -> (f64, f64, f64) {
    let commits = number(&cluster.sql("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"));
    let wal = number(&cluster.sql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn"));
    let dead = number(
        &cluster.sql("SELECT coalesce(sum(n_dead_tup), 0) FROM pg_stat_user_tables WHERE relname LIKE 'genapi_%'"),
    );
    (commits, wal, dead)
}

/// Waits until `ready`, at most `limit`; says whether it came.
fn until(limit: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn signal(child: &Child, signal: libc::c_int) {
    // SAFETY: signals our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
}

/// The tasks the mock made of each prompt of `batch`, and how many prompts
/// it made more than one of.
fn made_twice(mock: &support::MockProcess, batch: &str) -> u64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime to read the mock");
    genapi_test_common::install_tls_provider();
    let tasks = runtime.block_on(mock.tasks(&reqwest::Client::new()));
    let mut by_prompt = std::collections::HashMap::<String, u64>::new();
    for task in tasks["tasks"].as_array().into_iter().flatten() {
        let prompt = task["prompt"].as_str().unwrap_or_default();
        if prompt.starts_with(&format!("{batch} ")) {
            *by_prompt.entry(prompt.to_string()).or_default() += 1;
        }
    }
    by_prompt.values().filter(|count| **count > 1).count() as u64
}

/// What the workers said they were charged, from their summaries (`--json`
/// is not asked: the survivor's summary counts every line of the batch).
fn charged(dir: &Path) -> f64 {
    let results = std::fs::read_to_string(dir.join("out/results.jsonl")).unwrap_or_default();
    results
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|line| line["cost"].as_f64())
        .sum()
}

#[expect(clippy::too_many_lines, reason = "one cell, told from start to end")]
fn run_cell(
    mock: &support::MockProcess,
    cluster: &mut pg::Postgres,
    fault: Fault,
    batch: &str,
    durations: &[u64],
    dir: &Path,
) -> Outcome {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("bench directory");
    let jobs: Vec<String> = durations
        .iter()
        .enumerate()
        .map(|(n, ms)| {
            serde_json::json!({"model": "gen-2-pro", "name": format!("img-{n}"),
                "prompt": format!("{batch} line {n} [mock:duration_ms={ms}]"), "width": 256, "height": 256})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), jobs.join("\n") + "\n").expect("job file");
    let total = durations.len() as f64;
    std::thread::sleep(Duration::from_millis(1200));
    let before = database_counters(cluster);
    let started = Instant::now();
    let mut workers: Vec<Child> = (0..2)
        .map(|n| {
            let mut command = support::genapi_command(mock, KEY, dir);
            command
                .args(["batch", "jobs.jsonl", "--out", "out", "--quiet", "--max-active"])
                .arg(SEATS.to_string())
                .args(["--max-credits", CAP, "--ledger-lease"])
                .arg(LEASE_SECONDS.to_string())
                .args(["--worker-name", &format!("w{n}")])
                .args(["--batch-name", batch, "--seats-pool", batch, "--ledger"])
                .arg(cluster.url())
                .stderr(std::process::Stdio::null());
            command.spawn().expect("start a worker")
        })
        .collect();
    let warm = until(Duration::from_secs(300), || {
        done(cluster, batch) >= total / 5.0 && held_by(cluster, batch, "w0") > 0.0
    });
    assert!(warm, "{batch}: the workers never got going");
    let victim = "w0";
    let mut rescue = None;
    let faulted = Instant::now();
    match fault {
        Fault::Kill => {
            signal(&workers[0], libc::SIGKILL);
            let _ = workers[0].wait();
            if until(Duration::from_secs(120), || held_by(cluster, batch, victim) == 0.0) {
                rescue = Some(faulted.elapsed().as_secs_f64());
            }
        }
        Fault::Pause => {
            signal(&workers[0], libc::SIGSTOP);
            if until(Duration::from_secs(120), || held_by(cluster, batch, victim) == 0.0) {
                rescue = Some(faulted.elapsed().as_secs_f64());
            }
            std::thread::sleep(Duration::from_secs(LEASE_SECONDS + 2).saturating_sub(faulted.elapsed()));
            signal(&workers[0], libc::SIGCONT);
        }
        Fault::BackendKill => {
            while faulted.elapsed() < Duration::from_secs(5) {
                cluster.sql(
                    "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
                     WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() \
                       AND application_name NOT LIKE 'psql%'",
                );
                std::thread::sleep(Duration::from_millis(500));
            }
        }
        Fault::Restart => {
            cluster.stop_immediately();
            std::thread::sleep(Duration::from_secs(3));
            cluster.start_again();
        }
    }
    for worker in &mut workers {
        let deadline = Instant::now() + Duration::from_secs(600);
        loop {
            match worker.try_wait() {
                Ok(Some(_)) | Err(_) => break,
                Ok(None) if Instant::now() > deadline => {
                    let _ = worker.kill();
                    let _ = worker.wait();
                    break;
                }
                Ok(None) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
    let wall = started.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(1200));
    let after = database_counters(cluster);
    let cap: f64 = CAP.parse().unwrap_or(f64::MAX);
    Outcome {
        not_ended: (total - done(cluster, batch)).max(0.0) as u64,
        twice: made_twice(mock, batch),
        past_cap: (charged(dir) - cap).max(0.0),
        rescue,
        wall,
        // A crash resets the server's statistics: not counted then.
        commits_per_line: if after.0 >= before.0 {
            (after.0 - before.0) / total
        } else {
            f64::NAN
        },
        wal_per_line: (after.1 - before.1) / total,
        dead_per_line: (after.2 - before.2).max(0.0) / total,
    }
}

/// The value at `share` (0–1) of `values`, sorted in place.
fn percentile(values: &mut [f64], share: f64) -> f64 {
    values.sort_by(f64::total_cmp);
    let at = ((values.len() as f64 - 1.0) * share).round() as usize;
    values.get(at).copied().unwrap_or(f64::NAN)
}

#[expect(clippy::too_many_lines, reason = "one bench, told from start to end")]
fn main() {
    let runs = std::env::var("CHAOS_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5usize)
        .max(1);
    // Commits acknowledged only once written, as any server a ledger is
    // trusted to (a crash of one that acknowledges earlier loses intents
    // it said were stored, and their lines are sent again).
    let setup = pg::Setup {
        durable_commits: true,
        ..pg::Setup::default()
    };
    let mut cluster =
        pg::Postgres::start_with("chaos-bench", setup).expect("PostgreSQL's server binaries (Debian's postgresql)");
    let mock = support::MockProcess::start(KEY, 200);
    // The ledger's tables, made as a first worker would make them, so the
    // bench can read them from the start.
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime")
        .block_on(genapi_ledger::Ledger::open(&cluster.url(), "tables", "none"))
        .expect("the ledger's tables");
    // A worker gone is known by its session's end only once the server
    // has run longer than the grace after a start: the cells come after.
    let grace = genapi_ledger::DEFAULT_RESCUE_GRACE + Duration::from_secs(1);
    let uptime =
        |cluster: &pg::Postgres| number(&cluster.sql("SELECT extract(epoch FROM now() - pg_postmaster_start_time())"));
    let mut rng = fastrand::Rng::with_seed(76);
    let dir = std::env::temp_dir().join(format!("genapi-chaos-bench-{}", std::process::id()));
    let cells: Vec<(Fault, Lines)> = Fault::ALL
        .into_iter()
        .flat_map(|fault| [Lines::Short, Lines::Long].map(|lines| (fault, lines)))
        .collect();
    let mut outcomes: Vec<((Fault, Lines), Vec<Outcome>)> = cells.iter().map(|cell| (*cell, Vec::new())).collect();
    for run in 1..=runs {
        for (cell, results) in &mut outcomes {
            while uptime(&cluster) < grace.as_secs_f64() {
                std::thread::sleep(Duration::from_millis(500));
            }
            let batch = format!("chaos-{}-{:?}-{run}", cell.0.name().replace(' ', "-"), cell.1);
            let durations = cell.1.durations(&mut rng);
            let outcome = run_cell(&mock, &mut cluster, cell.0, &batch, &durations, &dir);
            println!(
                "{} with lines of {}, run {run}: {} not ended, {} made twice, {:.2} credits past the cap; rescue \
                 {}; {:.1} s; per line {:.1} commits, {:.0} WAL bytes, {:.2} dead tuples; load {:.1}",
                cell.0.name(),
                cell.1.name(),
                outcome.not_ended,
                outcome.twice,
                outcome.past_cap,
                outcome.rescue.map_or("-".into(), |s| format!("{s:.2} s")),
                outcome.wall,
                outcome.commits_per_line,
                outcome.wal_per_line,
                outcome.dead_per_line,
                support::load_average()
            );
            results.push(outcome);
        }
    }
    println!("| fault | lines | not ended | made twice | past the cap | rescue median | rescue p95 | wall median | commits/line | WAL bytes/line | dead tuples/line |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for ((fault, lines), results) in &outcomes {
        let mut rescues: Vec<f64> = results.iter().filter_map(|o| o.rescue).collect();
        let rescue = |share: f64, values: &mut Vec<f64>| {
            if values.is_empty() {
                "-".to_string()
            } else {
                format!("{:.2} s", percentile(values, share))
            }
        };
        let median = |pick: fn(&Outcome) -> f64| support::median(&mut results.iter().map(pick).collect::<Vec<_>>());
        println!(
            "| {} | {} | {} | {} | {:.2} | {} | {} | {:.1} s | {:.1} | {:.0} | {:.2} |",
            fault.name(),
            lines.name(),
            results.iter().map(|o| o.not_ended).sum::<u64>(),
            results.iter().map(|o| o.twice).sum::<u64>(),
            results.iter().map(|o| o.past_cap).fold(0.0, f64::max),
            rescue(0.5, &mut rescues),
            rescue(0.95, &mut rescues),
            median(|o| o.wall),
            median(|o| o.commits_per_line),
            median(|o| o.wal_per_line),
            median(|o| o.dead_per_line),
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
