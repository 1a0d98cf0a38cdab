//! `genapi batch` on 1,000 lines of 1 s tasks at a limit of 24, against the
//! mock in another process: wall time against the ideal (waves × task time)
//! and the batch process's peak memory, with the polls the mock answered
//! per line and the load average seen, over several runs; then the same at
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
        let mut polls = Vec::new();
        for run in 1..=runs {
            let polls_before = mock.polls_so_far();
            let measured = support::run_batch(&mock, KEY, &dir, lines, &["--limit", &LIMIT.to_string()]);
            let load = support::load_average();
            let per_line = (mock.polls_so_far() - polls_before) as f64 / lines as f64;
            let (wall, rss) = (measured.wall.as_secs_f64(), measured.peak_rss_mib);
            println!(
                "{lines} lines, run {run}: {wall:.2} s (ideal {ideal:.0} s = {waves} waves x 1 s; {:.3}x), \
                 {per_line:.2} polls per line, peak RSS {rss:.1} MiB; load {load:.1}",
                wall / ideal
            );
            walls.push(wall);
            memory.push(rss);
            polls.push(per_line);
        }
        let (low, high) = (
            walls.iter().copied().fold(f64::MAX, f64::min),
            walls.iter().copied().fold(0.0, f64::max),
        );
        let wall = support::median(&mut walls);
        println!(
            "{lines} lines: median {wall:.2} s = {:.3}x ideal (range {:.3}x to {:.3}x over {runs} runs); median {:.2} \
             polls per line; median peak RSS {:.1} MiB",
            wall / ideal,
            low / ideal,
            high / ideal,
            support::median(&mut polls),
            support::median(&mut memory)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
