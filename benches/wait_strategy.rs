//! How quickly `wait()` notices `Ready`, and at what cost in polls.
//!
//! Runs tasks of known durations (0.8 s, 1.6 s, 2.4 s) on the mock, in four
//! waves of six, for the adaptive schedule and for fixed polling every 0.5 s
//! and 1 s, with and without `progress` in the poll results. Prints polls per
//! task and the mean and 95th-percentile delay between the moment the task
//! became Ready and the moment `wait()` returned.
//!
//! `cargo bench --bench wait_strategy --features mock`

use std::time::{Duration, Instant};

use genapi::api::types;
use genapi::mock::{MockConfig, MockService};
use genapi::WaitOptions;

const DURATIONS: [(&str, u64); 3] = [("gen_2_pro", 800), ("gen_2_flex", 1600), ("gen_2_klein_9b", 2400)];
const WAVES: usize = 4;

async fn submit_and_wait(client: &genapi::Client, operation: &str, options: WaitOptions) -> Duration {
    let prompt = "bench";
    let started = Instant::now();
    let task = match operation {
        "gen_2_pro" => client.submit(types::Gen2ProRequest::builder().prompt(prompt)).await,
        "gen_2_flex" => client.submit(types::Gen2FlexRequest::builder().prompt(prompt)).await,
        _ => client.submit(types::Gen2Klein9bRequest::builder().prompt(prompt)).await,
    }
    .expect("submit");
    let submitted = started.elapsed();
    task.wait_with(options).await.expect("wait");
    // The mock created the task during the submission round trip; count from
    // its midpoint.
    started.elapsed().saturating_sub(submitted / 2)
}

struct Figures {
    polls_per_task: f64,
    mean: f64,
    p95: f64,
}

async fn measure(fixed: Option<Duration>, progress: bool) -> Figures {
    let mut config = MockConfig::default().report_progress(progress).max_active_tasks(100);
    for (operation, ms) in DURATIONS {
        config
            .durations
            .insert(operation.to_string(), Duration::from_millis(ms));
    }
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = mock.client().unwrap();
    let options = match fixed {
        Some(interval) => WaitOptions::default().fixed_interval(interval),
        None => WaitOptions::default(),
    };
    let mut delays = Vec::new();
    for _ in 0..WAVES {
        let wave = DURATIONS.iter().flat_map(|d| [d, d]).map(|(operation, ms)| {
            let (client, options) = (client.clone(), options.clone());
            async move { submit_and_wait(&client, operation, options).await.as_secs_f64() - *ms as f64 / 1000.0 }
        });
        delays.extend(futures::future::join_all(wave).await);
    }
    delays.sort_by(f64::total_cmp);
    let tasks = delays.len() as f64;
    Figures {
        polls_per_task: mock.count("GET", "/v1/get_result") as f64 / tasks,
        mean: delays.iter().sum::<f64>() / tasks,
        p95: delays[((delays.len() as f64 * 0.95).ceil() as usize).min(delays.len()) - 1],
    }
}

#[tokio::main]
async fn main() {
    println!(
        "{:<14} {:>9} {:>11} {:>11} {:>10}",
        "strategy", "progress", "polls/task", "mean delay", "p95 delay"
    );
    for progress in [true, false] {
        for (name, fixed) in [
            ("adaptive", None),
            ("fixed 0.5 s", Some(Duration::from_millis(500))),
            ("fixed 1 s", Some(Duration::from_secs(1))),
        ] {
            let f = measure(fixed, progress).await;
            println!(
                "{name:<14} {:>9} {:>11.2} {:>10.3}s {:>9.3}s",
                if progress { "yes" } else { "no" },
                f.polls_per_task,
                f.mean,
                f.p95
            );
        }
    }
}
