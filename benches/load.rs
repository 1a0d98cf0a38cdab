//! 1,000 tasks through the mock with the active-task limit at 24 (the mock's
//! limit too): none lost, none duplicated, wall time against the ideal
//! (1000 / 24 × task time), and the client's peak memory.
//!
//! `cargo bench --bench load --features cli`

use std::collections::HashSet;
use std::time::{Duration, Instant};

mod support;

const TASKS: usize = 1000;
const LIMIT: usize = 24;
const TASK_MS: u64 = 1000;

/// Peak resident memory of this process, in MiB.
fn peak_rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() {
    let mock = support::MockProcess::start("load-key", TASK_MS);
    let base = mock.base_url.clone();

    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let (elapsed, outcomes) = runtime.block_on(async {
        let client = genapi::Client::builder()
            .api_key("load-key")
            .base_url(&base)
            .trust_origin(&mock.regional_origin)
            .max_active_tasks(Some(LIMIT))
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
        (started.elapsed(), outcomes)
    });
    drop(mock);

    let failures: Vec<String> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().err().map(ToString::to_string))
        .collect();
    let ids: HashSet<String> = outcomes
        .iter()
        .filter_map(|o| o.as_ref().ok().map(|out| out.id.clone()))
        .collect();
    let ideal = Duration::from_millis(TASK_MS).as_secs_f64() * (TASKS as f64 / LIMIT as f64);
    println!("{TASKS} tasks of {TASK_MS} ms, active-task limit {LIMIT}:");
    println!(
        "  succeeded:   {} (failed {}, distinct ids {})",
        TASKS - failures.len(),
        failures.len(),
        ids.len()
    );
    println!(
        "  wall time:   {:.1} s (ideal {:.1} s, ratio {:.2}x)",
        elapsed.as_secs_f64(),
        ideal,
        elapsed.as_secs_f64() / ideal
    );
    println!("  peak memory: {:.1} MiB (client process)", peak_rss_mib());
    if let Some(first) = failures.first() {
        println!("  first failure: {first}");
    }
    assert!(
        failures.is_empty() && ids.len() == TASKS,
        "tasks were lost or duplicated"
    );
}
