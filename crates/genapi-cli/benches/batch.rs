//! `genapi batch` on 1,000 lines of 1 s tasks at a limit of 24, against the
//! mock in another process: wall time against the ideal (waves × task time)
//! and the batch process's peak memory, over several runs; then the same at
//! another size, to show memory does not grow with the number of lines.
//!
//! `cargo bench -p genapi-cli --bench batch`
//! (`BATCH_BENCH_RUNS=N` sets the number of runs, 5 by default.)

use std::path::Path;
use std::time::{Duration, Instant};

mod support;

const LIMIT: usize = 24;
const TASK_MS: u64 = 1000;
const KEY: &str = "batch-bench-key";

/// One batch run: wall time and peak RSS (MiB) of the batch process.
// The child is reaped by `wait4`, which also gives its resource usage.
#[allow(clippy::zombie_processes)]
fn run_once(mock: &support::MockProcess, lines: usize, dir: &Path) -> (Duration, f64) {
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
    let started = Instant::now();
    let child = support::genapi_command(mock, KEY, dir)
        .args([
            "batch",
            "jobs.jsonl",
            "--out",
            "out",
            "--quiet",
            "--limit",
            &LIMIT.to_string(),
        ])
        .spawn()
        .expect("start the batch");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: an all-zero rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `pid` is our own child, and both pointers are valid for the call.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let elapsed = started.elapsed();
    assert_eq!(waited, pid, "wait for the batch");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "the batch failed ({status})"
    );
    let results = std::fs::read_to_string(dir.join("out/results.jsonl")).expect("results");
    assert_eq!(results.lines().count(), lines);
    // Linux reports ru_maxrss in KiB.
    (elapsed, usage.ru_maxrss as f64 / 1024.0)
}

fn main() {
    let runs: usize = std::env::var("BATCH_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let dir = std::env::temp_dir().join(format!("genapi-batch-bench-{}", std::process::id()));
    for (lines, runs) in [(1000usize, runs), (250, runs.min(3))] {
        // A fresh mock for each size, so no task of one size counts against the other.
        let mock = support::MockProcess::start(KEY, TASK_MS);
        let waves = lines.div_ceil(LIMIT);
        let ideal = waves as f64 * TASK_MS as f64 / 1000.0;
        let mut walls = Vec::new();
        let mut memory = Vec::new();
        for run in 1..=runs {
            let (elapsed, rss) = run_once(&mock, lines, &dir);
            let wall = elapsed.as_secs_f64();
            println!(
                "{lines} lines, run {run}: {wall:.2} s (ideal {ideal:.0} s = {waves} waves x 1 s; {:.3}x), peak RSS {rss:.1} MiB",
                wall / ideal
            );
            walls.push(wall);
            memory.push(rss);
        }
        let (low, high) = (
            walls.iter().copied().fold(f64::MAX, f64::min),
            walls.iter().copied().fold(0.0, f64::max),
        );
        let wall = support::median(&mut walls);
        println!(
            "{lines} lines: median {wall:.2} s = {:.3}x ideal (range {:.3}x to {:.3}x over {runs} runs); median peak RSS {:.1} MiB",
            wall / ideal,
            low / ideal,
            high / ideal,
            support::median(&mut memory)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
