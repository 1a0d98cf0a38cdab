//! `genapi batch` on 1,000 lines of 1 s tasks at a limit of 24, against the
//! mock in another process: wall time against the ideal (waves × task time)
//! and the batch process's peak memory, over several runs; then the same at
//! another size, to show memory does not grow with the number of lines.
//!
//! `cargo bench -p genapi-cli --bench batch`
//! (`BATCH_BENCH_RUNS=N` sets the number of runs, 5 by default.)

mod support;

const LIMIT: usize = 24;
const TASK_MS: u64 = 1000;
const KEY: &str = "batch-bench-key";

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
            let measured = support::run_batch(&mock, KEY, &dir, lines, &["--limit", &LIMIT.to_string()]);
            let (wall, rss) = (measured.wall.as_secs_f64(), measured.peak_rss_mib);
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
