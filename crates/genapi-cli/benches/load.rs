//! 1,000 tasks through the mock with the active-task limit at 24 (the mock's
//! limit too), started at once, five runs: none lost, none duplicated (the
//! mock's own counters: submissions must equal tasks), 429s seen by the
//! mock, wall time against the ideal (waves × task time = ⌈1000 / 24⌉ × 1 s),
//! and the client's peak memory.
//!
//! `cargo bench -p genapi-cli --bench load`

use std::collections::HashSet;
use std::time::{Duration, Instant};

mod support;

const TASKS: usize = 1000;
const LIMIT: usize = 24;
const TASK_MS: u64 = 1000;
const RUNS: usize = 5;

/// Peak resident memory of this process, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// One run against a fresh mock: (wall seconds, submissions seen, 429s seen).
fn run() -> (f64, u64, u64) {
    let mock = support::MockProcess::start("load-key", TASK_MS);
    let base = mock.base_url.clone();
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (elapsed, outcomes, seen) = runtime.block_on(async {
        let client = genapi::Client::builder()
            .api_key("load-key")
            .base_url(&base)
            .trust_origin(&mock.regional_origin)
            .max_active_tasks(LIMIT)
            .build()
            .expect("client");
        let started = Instant::now();
        let runs = (0..TASKS).map(|i| {
            let client = client.clone();
            async move {
                client
                    .run(genapi::api::types::Gen2ProRequest::builder().prompt(format!("task {i}")))
                    .await
            }
        });
        let outcomes = futures::future::join_all(runs).await;
        let elapsed = started.elapsed();
        genapi_test_common::install_tls_provider();
        (elapsed, outcomes, mock.stats(&reqwest::Client::new()).await)
    });
    drop(mock);
    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().err().map(ToString::to_string))
        .collect();
    let ids: HashSet<String> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok().map(|out| out.id().to_string()))
        .collect();
    if let Some(first) = failures.first() {
        println!("  first failure: {first}");
    }
    assert!(
        failures.is_empty() && ids.len() == TASKS,
        "tasks were lost or duplicated"
    );
    let submissions = seen["submissions"]["/v1/gen-2-pro"].as_u64().unwrap_or(0);
    let refused = seen["too_many_requests"].as_u64().unwrap_or(0);
    (elapsed.as_secs_f64(), submissions, refused)
}

fn median(values: &[f64]) -> (f64, f64, f64) {
    let mut sorted = values.to_vec();
    sorted.sort_by(f64::total_cmp);
    (sorted[sorted.len() / 2], sorted[0], sorted[sorted.len() - 1])
}

fn main() {
    let waves = TASKS.div_ceil(LIMIT) as f64;
    let ideal = waves * Duration::from_millis(TASK_MS).as_secs_f64();
    println!("{TASKS} tasks of {TASK_MS} ms, active-task limit {LIMIT}, {RUNS} runs (ideal {ideal:.1} s):");
    let mut ratios = Vec::new();
    for index in 1..=RUNS {
        let (wall, submissions, refused) = run();
        ratios.push(wall / ideal);
        println!(
            "  run {index}: {wall:.1} s ({:.3}x ideal); the mock saw {submissions} submissions, {refused} refused with 429",
            wall / ideal
        );
        assert_eq!(submissions as usize, TASKS, "each task submitted exactly once");
    }
    let (median, low, high) = median(&ratios);
    println!("  ratio to ideal: median {median:.3}x (range {low:.3}–{high:.3})");
    println!("  peak memory: {:.1} MiB (client process, all runs)", peak_rss_mib());
}
