//! Client CPU time per task (submit + wait + download of a 1 MP image on
//! loopback): genapi against a minimal hand-written reqwest loop making the
//! same calls (one POST, polls every 10 ms, one download).
//!
//! The mock runs in a child process (`genapi mock`), so only client work is
//! counted. Rounds alternate between the two to cancel drift; CPU time is the
//! process's user + system time from getrusage.
//!
//! `cargo bench --bench client_overhead --features cli`

use std::time::Duration;

use serde_json::{json, Value};

mod support;

const TASKS_PER_ROUND: usize = 100;
const ROUNDS: usize = 5;
const POLL: Duration = Duration::from_millis(10);

/// User + system CPU seconds of this process (microsecond resolution).
fn cpu_seconds() -> f64 {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

/// CPU seconds spent in submit, wait and download.
type Phases = [f64; 3];

async fn genapi_task(client: &genapi::Client, phases: &mut Phases) -> bytes::Bytes {
    let t0 = cpu_seconds();
    let request = genapi::api::types::Gen2ProRequest::builder().prompt("bench");
    let task = client.submit(request).await.expect("submit");
    let t1 = cpu_seconds();
    let output = task
        .wait_with(genapi::WaitOptions::default().fixed_interval(POLL))
        .await
        .expect("wait");
    let t2 = cpu_seconds();
    let bytes = output.bytes().await.expect("download");
    let t3 = cpu_seconds();
    add(phases, [t1 - t0, t2 - t1, t3 - t2]);
    bytes
}

fn add(phases: &mut Phases, more: Phases) {
    for (total, part) in phases.iter_mut().zip(more) {
        *total += part;
    }
}

async fn hand_written_task(http: &reqwest::Client, base: &str, key: &str, phases: &mut Phases) -> usize {
    let t0 = cpu_seconds();
    let accepted: Value = http
        .post(format!("{base}/v1/gen-2-pro"))
        .header("x-key", key)
        .json(&json!({"prompt": "bench"}))
        .send()
        .await
        .expect("submit")
        .json()
        .await
        .expect("json");
    let polling_url = accepted["polling_url"].as_str().expect("polling_url").to_string();
    let t1 = cpu_seconds();
    let sample = loop {
        tokio::time::sleep(POLL).await;
        let state: Value = http
            .get(&polling_url)
            .header("x-key", key)
            .send()
            .await
            .expect("poll")
            .json()
            .await
            .expect("json");
        if state["status"] == "Ready" {
            break state["result"]["sample"].as_str().expect("sample").to_string();
        }
    };
    let t2 = cpu_seconds();
    let length = http
        .get(sample)
        .send()
        .await
        .expect("download")
        .bytes()
        .await
        .expect("bytes")
        .len();
    add(phases, [t1 - t0, t2 - t1, cpu_seconds() - t2]);
    length
}

fn main() {
    let mock = support::MockProcess::start("bench-key", 20);
    let base = mock.base_url.clone();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (mut ours, mut theirs) = (0.0, 0.0);
    let (mut our_phases, mut their_phases) = ([0.0; 3], [0.0; 3]);
    let mut ratios = Vec::new();
    let (mut our_polls, mut their_polls) = (0, 0);
    runtime.block_on(async {
        genapi::ensure_tls_provider();
        let client = genapi::Client::builder()
            .api_key("bench-key")
            .base_url(&base)
            .trust_origin(&mock.regional_origin)
            .build()
            .expect("client");
        let http = reqwest::Client::new();
        // Warm both up (connections, the embedded document).
        let mut warm = [0.0; 3];
        assert_eq!(
            genapi::dimensions(&genapi_task(&client, &mut warm).await),
            Some((1024, 1024)),
            "a 1 MP image"
        );
        hand_written_task(&http, &base, "bench-key", &mut warm).await;
        // Polls as the mock counted them, so both sides are seen to make
        // the same calls.
        let polls = || async { mock.stats(&http).await["polls"].as_u64().unwrap_or(0) };
        for _ in 0..ROUNDS {
            let (start, before) = (cpu_seconds(), polls().await);
            for _ in 0..TASKS_PER_ROUND {
                genapi_task(&client, &mut our_phases).await;
            }
            let mine = cpu_seconds() - start;
            our_polls += polls().await - before;
            let (start, before) = (cpu_seconds(), polls().await);
            for _ in 0..TASKS_PER_ROUND {
                hand_written_task(&http, &base, "bench-key", &mut their_phases).await;
            }
            let other = cpu_seconds() - start;
            their_polls += polls().await - before;
            ours += mine;
            theirs += other;
            ratios.push(mine / other);
        }
    });
    drop(mock);
    let tasks = (ROUNDS * TASKS_PER_ROUND) as f64;
    println!(
        "client CPU per task (submit + wait + download of 1 MP), {} tasks each:",
        tasks
    );
    println!("  genapi:             {:.3} ms", ours / tasks * 1000.0);
    println!("  hand-written loop:  {:.3} ms", theirs / tasks * 1000.0);
    ratios.sort_by(f64::total_cmp);
    println!(
        "  ratio:              median {:.2}x of {ROUNDS} interleaved rounds (range {:.2}–{:.2}); overall {:.2}x",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
        ours / theirs
    );
    println!("  polls seen by the mock: genapi {our_polls}, hand-written {their_polls}");
    let per = |p: Phases| p.map(|s| format!("{:.3}", s / tasks * 1000.0)).join(" / ");
    println!(
        "  by phase, ms (submit / wait / download): genapi {}; hand-written {}",
        per(our_phases),
        per(their_phases)
    );
}
