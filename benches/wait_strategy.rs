//! How quickly `wait()` notices `Ready`, and at what cost in polls: the
//! adaptive schedule against fixed polling every second, on realistic
//! workloads, five interleaved runs, polls counted by the mock (what the
//! service saw).
//!
//! Workloads (task durations set per task with `[mock:duration_ms=N]`):
//! - **constant**: 24 tasks of 1.5 s, in waves of 4 (the client learns as
//!   waves finish);
//! - **mixed**: 24 tasks uniform in 0.75–2.25 s (±50 %, seeded), waves of 4;
//!   with and without `progress` in the poll results;
//! - **outlier**: 8 tasks of 1.5 s, one of 15 s (10x), then 3 of 1.5 s, one at
//!   a time; reports the delay of the 3 tasks after the outlier;
//! - **cold**: nothing learned, no `progress`: tasks of 2, 5 and 9 s at once,
//!   each with a fresh client.
//!
//! Delay is the time between the moment a task became Ready at the mock and
//! the moment `wait()` returned.
//!
//! `cargo bench --bench wait_strategy --features mock`

use std::time::{Duration, Instant};

use genapi::api::types;
use genapi::WaitOptions;
use genapi_mock::{MockConfig, MockService};

const RUNS: usize = 5;

#[derive(Clone, Copy, PartialEq)]
enum Strategy {
    Adaptive,
    FixedOneSecond,
}

impl Strategy {
    fn options(self) -> WaitOptions {
        match self {
            Strategy::Adaptive => WaitOptions::default(),
            Strategy::FixedOneSecond => WaitOptions::default().fixed_interval(Duration::from_secs(1)),
        }
    }
    fn name(self) -> &'static str {
        match self {
            Strategy::Adaptive => "adaptive",
            Strategy::FixedOneSecond => "fixed 1 s",
        }
    }
}

/// One measurement: mean delay, polls per task, and (outlier only) the
/// delays of the tasks after the outlier.
struct Figures {
    mean_delay: f64,
    polls_per_task: f64,
    after_outlier: Vec<f64>,
}

async fn mock(progress: bool) -> MockService {
    let config = MockConfig::default().report_progress(progress).max_active_tasks(100);
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Submits a task of `ms` and waits; returns the delay after Ready.
async fn one(client: &genapi::Client, ms: u64, options: WaitOptions) -> f64 {
    let started = Instant::now();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt(format!("[mock:duration_ms={ms}] bench")))
        .await
        .expect("submit");
    let submitted = started.elapsed();
    task.wait_with(options).await.expect("wait");
    // The mock created the task during the submission round trip; count
    // from its midpoint.
    started.elapsed().saturating_sub(submitted / 2).as_secs_f64() - ms as f64 / 1000.0
}

async fn waves(durations: &[u64], width: usize, progress: bool, strategy: Strategy) -> Figures {
    let mock = mock(progress).await;
    let client = mock.client().unwrap();
    let mut delays = Vec::new();
    for wave in durations.chunks(width) {
        let runs = wave.iter().map(|ms| one(&client, *ms, strategy.options()));
        delays.extend(futures::future::join_all(runs).await);
    }
    figures(&mock, &delays, Vec::new())
}

async fn outlier(strategy: Strategy) -> Figures {
    let mock = mock(true).await;
    let client = mock.client().unwrap();
    let mut delays = Vec::new();
    for _ in 0..8 {
        delays.push(one(&client, 1500, strategy.options()).await);
    }
    delays.push(one(&client, 15_000, strategy.options()).await);
    let mut after = Vec::new();
    for _ in 0..3 {
        after.push(one(&client, 1500, strategy.options()).await);
    }
    delays.extend(&after);
    figures(&mock, &delays, after)
}

async fn cold(strategy: Strategy) -> Figures {
    let mock = mock(false).await;
    let runs = [2000, 5000, 9000].map(|ms| {
        let client = mock.client().unwrap();
        async move { one(&client, ms, strategy.options()).await }
    });
    let delays = futures::future::join_all(runs).await;
    figures(&mock, &delays, Vec::new())
}

fn figures(mock: &MockService, delays: &[f64], after_outlier: Vec<f64>) -> Figures {
    let tasks = delays.len() as f64;
    Figures {
        mean_delay: delays.iter().sum::<f64>() / tasks,
        polls_per_task: mock.stats().polls as f64 / tasks,
        after_outlier,
    }
}

/// Median and range of a set of runs.
fn summary(values: &[f64], digits: usize) -> String {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    format!(
        "{median:.digits$} ({:.digits$}–{:.digits$})",
        sorted[0],
        sorted[sorted.len() - 1]
    )
}

#[tokio::main]
async fn main() {
    // Seeded ±50 % durations around 1.5 s.
    let mut rng = fastrand::Rng::with_seed(7);
    let mixed: Vec<u64> = (0..24).map(|_| 750 + rng.u64(0..=1500)).collect();
    let constant = vec![1500u64; 24];
    let workloads = ["constant", "mixed", "mixed, no progress", "outlier", "cold"];
    let strategies = [Strategy::Adaptive, Strategy::FixedOneSecond];
    // results[workload][strategy] = figures of each run
    let mut results: Vec<Vec<Vec<Figures>>> = workloads.iter().map(|_| vec![Vec::new(), Vec::new()]).collect();
    for run in 1..=RUNS {
        eprintln!("run {run} of {RUNS}");
        for (w, workload) in workloads.iter().enumerate() {
            for (s, strategy) in strategies.iter().enumerate() {
                let figures = match *workload {
                    "constant" => waves(&constant, 4, true, *strategy).await,
                    "mixed" => waves(&mixed, 4, true, *strategy).await,
                    "mixed, no progress" => waves(&mixed, 4, false, *strategy).await,
                    "outlier" => outlier(*strategy).await,
                    _ => cold(*strategy).await,
                };
                results[w][s].push(figures);
            }
        }
    }
    println!("median (min–max) of {RUNS} interleaved runs; polls counted by the mock");
    println!(
        "{:<20} {:<10} {:>22} {:>22} {:>26}",
        "workload", "strategy", "mean delay (s)", "polls per task", "after outlier, worst (s)"
    );
    for (w, workload) in workloads.iter().enumerate() {
        for (s, strategy) in strategies.iter().enumerate() {
            let runs = &results[w][s];
            let delay: Vec<f64> = runs.iter().map(|f| f.mean_delay).collect();
            let polls: Vec<f64> = runs.iter().map(|f| f.polls_per_task).collect();
            let after: Vec<f64> = runs
                .iter()
                .filter_map(|f| f.after_outlier.iter().copied().reduce(f64::max))
                .collect();
            let after = if after.is_empty() {
                "-".to_string()
            } else {
                summary(&after, 3)
            };
            println!(
                "{workload:<20} {:<10} {:>22} {:>22} {:>26}",
                strategy.name(),
                summary(&delay, 3),
                summary(&polls, 2),
                after
            );
        }
    }
}
