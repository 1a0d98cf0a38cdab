//! How long a batch of short tasks holds its seats, and how many polls it
//! spends: 2,000 tasks through a client with 24 seats, against an in-process
//! mock, on a paused runtime clock.
//!
//! A seat stays taken until the poll that sees its task end, so every
//! millisecond a poll lands after the end is a millisecond the next task
//! waits. The figure that shows it is the batch's wall time against the
//! ideal (the sum of the durations over the seats, as if every end were
//! seen at once).
//!
//! Durations are uniform in 100–300 ms with one task in a hundred of 2 s
//! (seeded), the mix the ledger bench runs. The runtime's clock is paused
//! (it moves on when nothing is left to do) and the jitter's draws come from
//! a seeded generator, so a run gives the same figures every time; wall time
//! is virtual time. Polls are counted by the mock (what the service saw).
//! The schedule runs with `progress` in the poll results (the mock reports it
//! by default, as the service does on most models) and without; a third run
//! polls every 10 ms (the shortest fixed interval), which sees every end
//! within 10 ms at a great cost in polls: its wall time is what the batch
//! takes however well its polls are aimed (the first tasks' submissions, the
//! last 2 s tasks finishing alone).
//!
//! `cargo bench --bench poll_schedule`

use std::time::Duration;

use genapi::api::types;
use genapi::WaitOptions;
use genapi_mock::{MockConfig, MockService};

const TASKS: usize = 2000;
const SEATS: usize = 24;

/// The durations of the tasks, in milliseconds.
fn durations() -> Vec<u64> {
    let mut rng = fastrand::Rng::with_seed(5);
    (0..TASKS)
        .map(|_| if rng.u32(0..100) == 0 { 2000 } else { rng.u64(100..=300) })
        .collect()
}

/// Wall time over ideal, and polls per task, of one batch.
async fn batch(durations: &[u64], progress: bool, options: WaitOptions) -> (f64, f64) {
    let config = MockConfig::default().max_active_tasks(SEATS).report_progress(progress);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().expect("an address"))
        .await
        .expect("mock");
    let client = mock
        .client_builder()
        .max_active_tasks(SEATS)
        .wait_options(options)
        .build()
        .expect("client");
    let started = tokio::time::Instant::now();
    let runs: Vec<_> = durations
        .iter()
        .enumerate()
        .map(|(n, ms)| {
            let client = client.clone();
            let request = types::Gen2ProRequest::builder().prompt(format!("line {n} [mock:duration_ms={ms}]"));
            tokio::spawn(async move { client.run(request).await.map(drop) })
        })
        .collect();
    for run in runs {
        run.await.expect("a task's run").expect("a task");
    }
    let wall = started.elapsed().as_secs_f64();
    let ideal = Duration::from_millis(durations.iter().sum::<u64>()).as_secs_f64() / SEATS as f64;
    let polls = mock.stats().polls as f64 / durations.len() as f64;
    mock.stop().await;
    (wall / ideal, polls)
}

fn main() {
    // The jitter's draws (the client's, on this one thread).
    fastrand::seed(5);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .build()
        .expect("runtime");
    let durations = durations();
    println!("{TASKS} tasks, {SEATS} seats, 100-300 ms (1 in 100: 2 s), virtual time");
    println!("{:<26} {:>12} {:>15}", "polls", "wall / ideal", "polls per task");
    let runs = [
        ("scheduled, progress", true, WaitOptions::default()),
        ("scheduled, no progress", false, WaitOptions::default()),
        (
            "every 10 ms (reference)",
            true,
            WaitOptions::default().fixed_interval(WaitOptions::MIN_INTERVAL),
        ),
    ];
    for (name, progress, options) in runs {
        let (ratio, polls) = runtime.block_on(batch(&durations, progress, options));
        println!("{name:<26} {ratio:>12.3} {polls:>15.2}");
    }
}
