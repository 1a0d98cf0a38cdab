//! Soak of the mock: 100,000 tasks driven by 2,000 concurrent pollers over
//! loopback, with the mock clock moved ahead as an hour of live traffic
//! would, printing resident memory and what the mock keeps. Ignored by
//! default (it takes minutes); run it with
//! `cargo test --all-features --test mock_soak -- --ignored --nocapture`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;

const TASKS: usize = 100_000;
const POLLERS: usize = 2_000;
/// The mock clock moves ahead this much every `CHECKPOINT` tasks (so the
/// results of earlier tasks expire, as they would in an hour of traffic).
const CHECKPOINT: usize = 10_000;
const CLOCK_STEP: Duration = Duration::from_secs(6 * 60);
/// The soak gives up (and fails) after this long.
const DEADLINE: Duration = Duration::from_secs(20 * 60);

/// Resident memory of this process now and at its peak, in MiB.
fn rss_mib() -> (f64, f64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
            .map_or(0.0, |kb| kb / 1024.0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a soak of several minutes; run explicitly"]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn a_hundred_thousand_tasks_with_two_thousand_concurrent_polls_keep_memory_bounded() {
    let mock = Arc::new(
        MockService::start_with(
            MockConfig::default()
                .default_duration(Duration::from_millis(100))
                .max_active_tasks(POLLERS),
            "127.0.0.1:0".parse().unwrap(),
        )
        .await
        .unwrap(),
    );
    let http = common::http();
    let next = Arc::new(AtomicUsize::new(0));
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let (rss_start, _) = rss_mib();
    println!("start: rss {rss_start:.1} MiB");

    let workers: Vec<_> = (0..POLLERS)
        .map(|_| {
            let (mock, http, next, done) = (mock.clone(), http.clone(), next.clone(), done.clone());
            tokio::spawn(async move {
                loop {
                    let n = next.fetch_add(1, Ordering::SeqCst);
                    if n >= TASKS || started.elapsed() > DEADLINE {
                        return;
                    }
                    let submitted: Value = loop {
                        let response = http
                            .post(format!("{}/v1/gen-2-pro", mock.base_url()))
                            .header("x-key", mock.key())
                            .json(&json!({"prompt": format!("soak {n}"), "width": 64, "height": 64, "seed": n}))
                            .send()
                            .await
                            .unwrap();
                        if response.status() == 429 {
                            tokio::time::sleep(Duration::from_millis(50)).await;
                            continue;
                        }
                        assert_eq!(response.status(), 200);
                        break response.json().await.unwrap();
                    };
                    let url = submitted["polling_url"].as_str().unwrap().to_string();
                    let result = loop {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let poll: Value = http
                            .get(&url)
                            .header("x-key", mock.key())
                            .send()
                            .await
                            .unwrap()
                            .json()
                            .await
                            .unwrap();
                        match poll["status"].as_str() {
                            Some("Pending") => continue,
                            _ => break poll,
                        }
                    };
                    assert!(
                        matches!(result["status"].as_str(), Some("Ready" | "Task not found")),
                        "{result}"
                    );
                    if n % 100 == 0 && result["status"] == "Ready" {
                        let sample = result["result"]["sample"].as_str().unwrap();
                        let status = http.get(sample).send().await.unwrap().status().as_u16();
                        assert!(status == 200 || status == 403 || status == 404, "{status}");
                    }
                    let finished = done.fetch_add(1, Ordering::SeqCst) + 1;
                    if finished % CHECKPOINT == 0 {
                        mock.advance(CLOCK_STEP);
                        let stats = mock.stats();
                        let (rss, peak) = rss_mib();
                        println!(
                            "{finished:>6} tasks, {:>5.1} s: rss {rss:.1} MiB (peak {peak:.1}), tasks kept {}, active {}, log {}",
                            started.elapsed().as_secs_f64(),
                            stats.tasks_kept,
                            stats.active_tasks,
                            mock.requests().len(),
                        );
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.await.unwrap();
    }
    let stats = mock.stats();
    let (rss, peak) = rss_mib();
    let elapsed = started.elapsed().as_secs_f64();
    println!(
        "done: {} tasks in {elapsed:.1} s; {} polls, {} downloads, {} 429s; rss {rss:.1} MiB, peak {peak:.1} MiB; tasks kept {}",
        done.load(Ordering::SeqCst),
        stats.polls,
        stats.downloads,
        stats.too_many_requests,
        stats.tasks_kept,
    );
    assert_eq!(done.load(Ordering::SeqCst), TASKS, "finished within the deadline");
    // An hour of live traffic keeps at most the tasks of the last ~30 minutes.
    assert!(stats.tasks_kept < 60_000, "{}", stats.tasks_kept);
    assert!(mock.requests().len() <= 1024);
}
