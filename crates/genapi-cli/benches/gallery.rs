//! What keeping a batch's gallery costs the batch.
//!
//! 1. Real batches: `genapi batch` of 2,000 lines against the mock in
//!    another process, with its gallery and with `--no-gallery`, five
//!    interleaved pairs. The gallery's share is the difference in the batch
//!    process's CPU time (user + system, from `wait4`), over the CPU time
//!    with it: everything included, thumbnails too.
//! 2. Upkeep by size: the gallery alone, in this process, fed 10,000 and
//!    100,000 results in line order, thumbnails already made, and written
//!    as a batch writes it, every 2 s: at the rate the batches of part 1
//!    ran, and every 5 lines (a batch of 2.5 lines a second: 10 s tasks at
//!    24 seats). Its CPU time per line at both sizes shows whether the
//!    upkeep grows with the batch (a gallery rewritten whole does: each
//!    write renders every line so far), and its share of a batch's CPU is
//!    that time over part 1's CPU time a line (a conservative denominator:
//!    a slower batch polls more a line).
//!
//! `cargo bench -p genapi-cli --bench gallery` (`GALLERY_BENCH_RUNS=N` sets
//! the number of pairs, 5 by default).

mod support;

use genapi_test_common::results as fixtures;

const KEY: &str = "gallery-bench-key";
const LINES: usize = 2_000;
const TASK_MS: u64 = 100;
/// Results between two writes of a slow batch's gallery.
const SLOW_WRITE_EVERY: u64 = 5;

/// This process's CPU time so far, in seconds.
fn cpu_now() -> f64 {
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is valid for the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// The gallery's CPU time per line (µs) for `lines` results, and how long
/// one page write took at the end (ms).
fn upkeep(dir: &std::path::Path, lines: u64, write_every: u64) -> (f64, f64) {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir).expect("bench directory");
    fixtures::image(dir, "shared.png", 512, 384);
    let mut gallery = genapi_gallery::Gallery::new(dir);
    // The one thumbnail is made before the clock starts.
    gallery.add(fixtures::saved(1, "shared.png"));
    let started = cpu_now();
    let mut last_write = 0.0;
    for line in 1..=lines {
        let result = match line % 97 {
            0 => fixtures::ended(line, "task_failed"),
            _ => fixtures::saved(line, "shared.png"),
        };
        gallery.add(result);
        if line % write_every == 0 || line == lines {
            let before = std::time::Instant::now();
            gallery.write().expect("write the gallery");
            last_write = before.elapsed().as_secs_f64() * 1000.0;
        }
    }
    ((cpu_now() - started) / lines as f64 * 1e6, last_write)
}

fn main() {
    let runs: usize = std::env::var("GALLERY_BENCH_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5)
        .max(1);
    let dir = std::env::temp_dir().join(format!("genapi-gallery-bench-{}", std::process::id()));
    let mock = support::MockProcess::start(KEY, TASK_MS);
    let (mut shares, mut per_line, mut batch_per_line, mut walls) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for run in 1..=runs {
        let with = support::run_batch(&mock, KEY, &dir, LINES, &[]);
        let without = support::run_batch(&mock, KEY, &dir, LINES, &["--no-gallery"]);
        let share = (with.cpu - without.cpu) / with.cpu;
        println!(
            "{LINES} lines, pair {run}: CPU {:.2} s with the gallery, {:.2} s without: the gallery's share {:.1} % \
             ({:.0} µs a line); wall {:.1} s and {:.1} s",
            with.cpu,
            without.cpu,
            share * 100.0,
            (with.cpu - without.cpu) / LINES as f64 * 1e6,
            with.wall.as_secs_f64(),
            without.wall.as_secs_f64()
        );
        shares.push(share * 100.0);
        per_line.push((with.cpu - without.cpu) / LINES as f64 * 1e6);
        batch_per_line.push(with.cpu / LINES as f64 * 1e6);
        walls.push(with.wall.as_secs_f64());
    }
    let (low, high) = (
        shares.iter().copied().fold(f64::MAX, f64::min),
        shares.iter().copied().fold(f64::MIN, f64::max),
    );
    println!(
        "the gallery's share of a {LINES}-line batch's CPU: median {:.1} % (range {low:.1} % to {high:.1} % over {runs} \
         pairs), median {:.0} µs a line",
        support::median(&mut shares),
        support::median(&mut per_line)
    );
    drop(mock);
    let batch_micros = support::median(&mut batch_per_line);
    let rate = LINES as f64 / support::median(&mut walls);
    let at_this_rate = ((rate * 2.0).round() as u64).max(1);
    for write_every in [at_this_rate, SLOW_WRITE_EVERY] {
        for lines in [10_000, 100_000] {
            let (micros, write_ms) = upkeep(&dir, lines, write_every);
            println!(
                "upkeep alone, {lines} results, written every {write_every}: {micros:.1} µs of CPU a line, {:.2} % of \
                 the batch's {batch_micros:.0} µs a line; the last write took {write_ms:.1} ms",
                micros / batch_micros * 100.0
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
