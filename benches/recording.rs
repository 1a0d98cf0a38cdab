//! What recording (`ClientBuilder::record`) costs: the same tasks run by a
//! client that records and one that does not, against one in-process mock.
//!
//! Each task is a submit, a wait with polls every 10 ms and a download of a
//! 256x256 result (20 ms tasks, so about two polls: four exchanges, four
//! entries). The two clients take turns task by task, who goes first
//! alternating, so drift and bursts of load on the machine fall on both
//! alike. Five rounds of 60 task pairs; each round's median per task and per
//! submission is a figure, and the report gives the median of the five
//! rounds and their spread (lowest–highest).
//!
//! `cargo bench --bench recording`

use std::time::{Duration, Instant};

use genapi::api::types;
use genapi::WaitOptions;
use genapi_mock::{MockConfig, MockService};

mod figures;
use figures::median;

/// A figure of milliseconds.
fn line(name: &str, rounds: &mut [f64]) -> String {
    figures::line(name, rounds, "ms", 3)
}

const ROUNDS: usize = 5;
const TASKS: usize = 60;

/// Milliseconds of one task's submission and of the whole task.
async fn task(client: &genapi::Client, n: usize) -> (f64, f64) {
    let start = Instant::now();
    let request = types::Gen2ProRequest::builder()
        .prompt(format!("bench {n}"))
        .width(256u32)
        .height(256u32);
    let task = client.submit(request).await.expect("submit");
    let submitted = start.elapsed();
    let output = task
        .wait_with(WaitOptions::default().fixed_interval(Duration::from_millis(10)))
        .await
        .expect("wait");
    output.bytes().await.expect("download");
    (submitted.as_secs_f64() * 1e3, start.elapsed().as_secs_f64() * 1e3)
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let config = MockConfig::default().default_duration(Duration::from_millis(20));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .expect("mock");
    let dir = std::env::temp_dir().join(format!("genapi-bench-recording-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temporary directory");
    let file = dir.join("bench.har");
    let plain = mock.client_builder().unlimited_active_tasks().build().expect("client");
    let recording = mock
        .client_builder()
        .unlimited_active_tasks()
        .record(&file)
        .build()
        .expect("client");
    // One task each first, so connections and the document are warm.
    task(&plain, 0).await;
    task(&recording, 0).await;

    let [mut plain_task, mut plain_submit, mut rec_task, mut rec_submit] = [(); 4].map(|_| Vec::new());
    for round in 0..ROUNDS {
        let (mut pt, mut ps, mut rt, mut rs) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for n in 0..TASKS {
            let recorder_first = (round * TASKS + n).is_multiple_of(2);
            let order = if recorder_first { [true, false] } else { [false, true] };
            for records in order {
                let (submit, whole) = task(if records { &recording } else { &plain }, n).await;
                if records {
                    rs.push(submit);
                    rt.push(whole);
                } else {
                    ps.push(submit);
                    pt.push(whole);
                }
            }
        }
        plain_task.push(median(&mut pt));
        plain_submit.push(median(&mut ps));
        rec_task.push(median(&mut rt));
        rec_submit.push(median(&mut rs));
    }
    let entries = std::fs::read_to_string(&file)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|har| har["log"]["entries"].as_array().map(Vec::len))
        .unwrap_or(0);
    let size = std::fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    println!("recording: {ROUNDS} rounds of {TASKS} task pairs, interleaved (round medians)");
    println!("{}", line("task, not recording", &mut plain_task));
    println!("{}", line("task, recording", &mut rec_task));
    println!("{}", line("submission, not recording", &mut plain_submit));
    println!("{}", line("submission, recording", &mut rec_submit));
    println!(
        "recorded {entries} entries, {} bytes ({} bytes per entry)",
        size,
        size / entries.max(1) as u64
    );
    let _ = std::fs::remove_dir_all(&dir);
}
