//! `genapi batch --ledger` with 1 and with 4 workers on 2,000 short lines
//! through 24 shared seats, against the mock in another process and a
//! throwaway PostgreSQL cluster: wall time against the 24-slot ideal, and
//! what the database did per line (transactions, which are the round trips
//! of autocommit statements, and its busy time), and the polls the mock
//! answered per line (what the service saw), with the load average seen.
//!
//! The lines are mixed: durations uniform in 100–300 ms, and one in a
//! hundred an outlier of 2 s (seeded). The ideal is the sum of the durations
//! over 24 seats. Runs are interleaved (the file journal, 1 worker, 4
//! workers, and again): the file journal, one process with no database, is
//! the baseline the ledger is compared with.
//!
//! Each is run twice: polling alone, and with a receiver of the service's
//! notifications per process (`--webhook-url`, `--webhook-listen` on a free
//! loopback port), which wakes a task's wait when it ends.
//!
//! `cargo bench -p genapi-cli --bench ledger`
//! (`LEDGER_BENCH_RUNS=N` sets the runs of each, 5 by default;
//! `LEDGER_BENCH_LINES=N` the lines, 2,000 by default.)

use std::path::Path;
use std::time::{Duration, Instant};

use genapi_test_common::pg;
mod support;

const SEATS: usize = 24;
const KEY: &str = "ledger-bench-key";

struct Figures {
    wall: f64,
    polls_per_line: f64,
    load: f64,
    transactions_per_line: f64,
    db_ms_per_line: f64,
}

/// The database's committed transactions and busy milliseconds so far.
fn db_counters(cluster: &pg::Postgres) -> (f64, f64) {
    let text = cluster.sql("SELECT xact_commit, active_time FROM pg_stat_database WHERE datname = 'postgres'");
    let mut parts = text.split('|').map(|p| p.trim().parse::<f64>().unwrap_or(0.0));
    (parts.next().unwrap_or(0.0), parts.next().unwrap_or(0.0))
}

/// How a run is set up: its workers (0 for the file journal), and whether
/// each process receives the service's notifications.
#[derive(Clone, Copy, PartialEq)]
struct Setup {
    workers: usize,
    notified: bool,
}

fn run_once(
    mock: &support::MockProcess,
    cluster: &pg::Postgres,
    setup: Setup,
    name: &str,
    jobs: &str,
    dir: &Path,
) -> Figures {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("bench directory");
    std::fs::write(dir.join("jobs.jsonl"), jobs).expect("job file");
    let lines = jobs.lines().count() as f64;
    // Statistics reach pg_stat_database when a backend reports them; give
    // the previous run's a moment.
    std::thread::sleep(Duration::from_millis(1200));
    let (transactions_before, busy_before) = db_counters(cluster);
    let polls_before = mock.polls_so_far();
    let started = Instant::now();
    let workers = setup.workers;
    let children: Vec<_> = (0..workers.max(1))
        .map(|_| {
            let mut command = support::genapi_command(mock, KEY, dir);
            command.args([
                "batch",
                "jobs.jsonl",
                "--out",
                "out",
                "--quiet",
                "--max-active",
                &SEATS.to_string(),
            ]);
            if setup.notified {
                let port = genapi_test_common::free_ports(1);
                command
                    .arg("--webhook-url")
                    .arg(format!("http://127.0.0.1:{port}/hooks"))
                    .arg("--webhook-listen")
                    .arg(format!("127.0.0.1:{port}"));
            }
            if workers > 0 {
                command
                    .args(["--batch-name", name, "--seats-pool", name, "--ledger"])
                    .arg(cluster.url());
            }
            command.spawn().expect("start a worker")
        })
        .collect();
    for mut child in children {
        let status = child.wait().expect("wait for a worker");
        assert!(status.success(), "a worker failed ({status})");
    }
    let wall = started.elapsed().as_secs_f64();
    let load = support::load_average();
    let polls = mock.polls_so_far() - polls_before;
    std::thread::sleep(Duration::from_millis(1200));
    let (transactions_after, busy_after) = db_counters(cluster);
    Figures {
        wall,
        polls_per_line: polls as f64 / lines,
        load,
        transactions_per_line: (transactions_after - transactions_before) / lines,
        db_ms_per_line: (busy_after - busy_before) / lines,
    }
}

fn shown(setup: Setup) -> String {
    let by = match setup.workers {
        0 => "file journal".into(),
        n => format!("{n} worker(s) on the ledger"),
    };
    if setup.notified {
        format!("{by}, notified")
    } else {
        by
    }
}

#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
fn main() {
    let setting = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
            .max(1)
    };
    let runs = setting("LEDGER_BENCH_RUNS", 5);
    let lines = setting("LEDGER_BENCH_LINES", 2000);
    let cluster = pg::Postgres::start("ledger-bench").expect("PostgreSQL's server binaries (Debian's postgresql)");
    let mock = support::MockProcess::start(KEY, 200);
    let mut rng = fastrand::Rng::with_seed(5);
    let durations: Vec<u64> = (0..lines)
        .map(|_| if rng.u32(0..100) == 0 { 2000 } else { rng.u64(100..=300) })
        .collect();
    let ideal = durations.iter().sum::<u64>() as f64 / 1000.0 / SEATS as f64;
    let dir = std::env::temp_dir().join(format!("genapi-ledger-bench-{}", std::process::id()));
    let mut figures: Vec<(Setup, Vec<Figures>)> = [false, true]
        .into_iter()
        .flat_map(|notified| [0, 1, 4].map(|workers| (Setup { workers, notified }, Vec::new())))
        .collect();
    for run in 1..=runs {
        for (setup, results) in &mut figures {
            let name = format!(
                "bench-{}-{}-{run}",
                setup.workers,
                if setup.notified { "n" } else { "p" }
            );
            // Prompts differ per run: every run's lines are new tasks.
            let jobs: Vec<String> = durations
                .iter()
                .enumerate()
                .map(|(n, ms)| {
                    serde_json::json!({"model": "gen-2-pro", "name": format!("img-{n}"),
                        "prompt": format!("{name} line {n} [mock:duration_ms={ms}]"), "width": 64, "height": 64})
                    .to_string()
                })
                .collect();
            let result = run_once(&mock, &cluster, *setup, &name, &(jobs.join("\n") + "\n"), &dir);
            println!(
                "{}, run {run}: {:.2} s ({:.3}x the ideal {ideal:.2} s); {:.2} polls, {:.1} transactions and \
                 {:.2} ms of database time per line; load {:.1}",
                shown(*setup),
                result.wall,
                result.wall / ideal,
                result.polls_per_line,
                result.transactions_per_line,
                result.db_ms_per_line,
                result.load
            );
            results.push(result);
        }
    }
    let mut medians = Vec::new();
    for (setup, results) in &figures {
        let mut ratios: Vec<f64> = results.iter().map(|f| f.wall / ideal).collect();
        let (low, high) = (
            ratios.iter().copied().fold(f64::MAX, f64::min),
            ratios.iter().copied().fold(0.0, f64::max),
        );
        let mut transactions: Vec<f64> = results.iter().map(|f| f.transactions_per_line).collect();
        let mut busy: Vec<f64> = results.iter().map(|f| f.db_ms_per_line).collect();
        let mut polls: Vec<f64> = results.iter().map(|f| f.polls_per_line).collect();
        let mut load: Vec<f64> = results.iter().map(|f| f.load).collect();
        println!(
            "{}, {lines} lines, {SEATS} seats: median {:.3}x the ideal (range {low:.3}x to {high:.3}x \
             over {runs} runs); median {:.2} polls, {:.1} transactions and {:.2} ms of database time per \
             line; median load {:.1}",
            shown(*setup),
            support::median(&mut ratios),
            support::median(&mut polls),
            support::median(&mut transactions),
            support::median(&mut busy),
            support::median(&mut load)
        );
        medians.push((
            *setup,
            support::median(&mut results.iter().map(|f| f.wall).collect::<Vec<_>>()),
        ));
    }
    for notified in [false, true] {
        let wall_of = |workers: usize| {
            medians
                .iter()
                .find(|(setup, _)| *setup == Setup { workers, notified })
                .map(|(_, wall)| *wall)
        };
        if let (Some(one), Some(four)) = (wall_of(1), wall_of(4)) {
            let how = if notified { ", notified" } else { "" };
            println!("4 workers / 1 worker{how} (median walls): {:.3}", four / one);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
