//! Client CPU time per task (submit + wait + download of a 1 MP image on
//! loopback): genapi against a minimal hand-written reqwest loop making the
//! same calls (one POST, polls every 10 ms, one download). genapi's fixed
//! interval carries up to 2 % of jitter, so on the mixed workload it polls a
//! little less; the CPU per request the mocks answered is printed beside the
//! CPU per task, so the comparison does not rest on equal poll counts.
//!
//! Each client has its own mock in a child process (`genapi mock`), so only
//! client work is counted, and each mock's counters tell what that client
//! sent without a request between tasks (which would warm one side's
//! connection just before it is measured). The two clients take turns task
//! by task (who goes first alternates), so both see the same machine: drift
//! and bursts of load fall on both sides alike. CPU time is the process's
//! user + system time from getrusage, read around each phase of each task.
//!
//! Two workloads, five rounds of 100 task pairs each:
//! - **constant**: every task takes 20 ms (about two polls);
//! - **mixed**: durations uniform in 10–60 ms (seeded), one task in twenty an
//!   outlier of 300 ms; both clients get the same sequence.
//!
//! Polls and requests are counted by each client's mock (what the service
//! saw).
//!
//! A third figure, **submissions back to back**, sends only submissions,
//! one right after another (five rounds of 200 pairs, tasks of no
//! duration), so each runs with the code and data of the one before still
//! in the caches. Against the workloads above, where every request follows
//! a 10 ms sleep, it tells what the client's own work per request costs
//! from what a cold start of that work costs. genapi's client for it has no
//! active-task limit: with one, the tasks nobody waits for would be polled
//! to free their seats, which the loop does not do.
//!
//! `cargo bench -p genapi-cli --bench client_overhead`

use std::time::Duration;

use serde_json::{json, Value};

mod support;

const TASKS_PER_ROUND: usize = 100;
const ROUNDS: usize = 5;
const POLL: Duration = Duration::from_millis(10);

/// User + system CPU seconds of this process (microsecond resolution).
fn cpu_seconds() -> f64 {
    let (user, system) = user_system();
    user + system
}

/// CPU seconds spent in submit, wait and download.
type Phases = [f64; 3];

async fn genapi_task(client: &genapi::Client, prompt: &str, phases: &mut Phases) -> bytes::Bytes {
    let t0 = cpu_seconds();
    let request = genapi::api::types::Gen2ProRequest::builder().prompt(prompt);
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

async fn hand_written_task(http: &reqwest::Client, base: &str, key: &str, prompt: &str, phases: &mut Phases) -> usize {
    let t0 = cpu_seconds();
    let accepted: Value = http
        .post(format!("{base}/v1/gen-2-pro"))
        .header("x-key", key)
        .json(&json!({ "prompt": prompt }))
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

/// The duration of each task of a workload, in milliseconds.
fn durations(workload: &str, tasks: usize) -> Vec<u64> {
    match workload {
        "constant" => vec![20; tasks],
        _ => {
            let mut draw = fastrand::Rng::with_seed(0x9e37_79b9);
            (0..tasks)
                .map(|i| if i % 20 == 19 { 300 } else { draw.u64(10..=60) })
                .collect()
        }
    }
}

/// Polls and requests in all (submissions, polls, downloads) the mock has
/// answered so far.
async fn counted(mock: &support::MockProcess, counter: &reqwest::Client) -> [u64; 2] {
    let stats = mock.stats(counter).await;
    let number = |name: &str| stats[name].as_u64().unwrap_or(0);
    let submissions: u64 = stats["submissions"]
        .as_object()
        .map(|by_operation| by_operation.values().filter_map(Value::as_u64).sum())
        .unwrap_or(0);
    [number("polls"), submissions + number("polls") + number("downloads")]
}

/// What one side spent in one workload.
#[derive(Default)]
struct Side {
    cpu: f64,
    user: f64,
    system: f64,
    phases: Phases,
    polls: u64,
    requests: u64,
}

/// User and system CPU seconds of this process.
fn user_system() -> (f64, f64) {
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage writes into the struct we own.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let seconds = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (seconds(usage.ru_utime), seconds(usage.ru_stime))
}

fn main() {
    let ours_mock = support::MockProcess::start("bench-key", 20);
    let theirs_mock = support::MockProcess::start("bench-key", 20);
    let base = theirs_mock.base_url.clone();

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        genapi_test_common::install_tls_provider();
        let client = genapi::Client::builder()
            .api_key("bench-key")
            .base_url(&ours_mock.base_url)
            .trust_origin(&ours_mock.regional_origin)
            .build()
            .expect("client");
        let http = reqwest::Client::new();
        // Warm both up (connections, the embedded document).
        let mut warm = [0.0; 3];
        assert_eq!(
            genapi_test_common::dimensions(&genapi_task(&client, "bench", &mut warm).await),
            Some((1024, 1024)),
            "a 1 MP image"
        );
        hand_written_task(&http, &base, "bench-key", "bench", &mut warm).await;
        // The counters are read between rounds, with a client of their own.
        let counter = reqwest::Client::new();

        for workload in ["constant", "mixed"] {
            let (mut ours, mut theirs) = (Side::default(), Side::default());
            let mut ratios = Vec::new();
            let plan = durations(workload, ROUNDS * TASKS_PER_ROUND);
            for round in plan.chunks(TASKS_PER_ROUND) {
                let (mut mine, mut other) = (0.0, 0.0);
                let (our_start, their_start) = (
                    counted(&ours_mock, &counter).await,
                    counted(&theirs_mock, &counter).await,
                );
                for (i, &ms) in round.iter().enumerate() {
                    let prompt = format!("bench [mock:duration_ms={ms}]");
                    for turn in 0..2 {
                        let genapi_turn = (i + turn) % 2 == 0;
                        let side = if genapi_turn { &mut ours } else { &mut theirs };
                        let (user, system) = user_system();
                        if genapi_turn {
                            genapi_task(&client, &prompt, &mut side.phases).await;
                        } else {
                            hand_written_task(&http, &base, "bench-key", &prompt, &mut side.phases).await;
                        }
                        let (user_after, system_after) = user_system();
                        let spent = (user_after - user) + (system_after - system);
                        side.cpu += spent;
                        side.user += user_after - user;
                        side.system += system_after - system;
                        if genapi_turn {
                            mine += spent;
                        } else {
                            other += spent;
                        }
                    }
                }
                let (our_end, their_end) = (
                    counted(&ours_mock, &counter).await,
                    counted(&theirs_mock, &counter).await,
                );
                ours.polls += our_end[0] - our_start[0];
                ours.requests += our_end[1] - our_start[1];
                theirs.polls += their_end[0] - their_start[0];
                theirs.requests += their_end[1] - their_start[1];
                ratios.push(mine / other);
            }
            report(workload, &ours, &theirs, &mut ratios);
        }
        let unlimited = genapi::Client::builder()
            .api_key("bench-key")
            .base_url(&ours_mock.base_url)
            .trust_origin(&ours_mock.regional_origin)
            .unlimited_active_tasks()
            .build()
            .expect("client");
        back_to_back(&unlimited, &http, [&ours_mock, &theirs_mock], &counter).await;
    });
    drop((ours_mock, theirs_mock));
}

/// Submissions in a row, nothing between them: the client's work per
/// request with warm caches.
async fn back_to_back(
    client: &genapi::Client,
    http: &reqwest::Client,
    mocks: [&support::MockProcess; 2],
    counter: &reqwest::Client,
) {
    const PAIRS: usize = 200;
    let prompt = "bench [mock:duration_ms=0]";
    let base = mocks[1].base_url.clone();
    let mut spent = [0.0; 2];
    let mut ratios = Vec::new();
    let before = [mocks[0].stats(counter).await, mocks[1].stats(counter).await];
    for _ in 0..ROUNDS {
        let mut round = [0.0; 2];
        for i in 0..PAIRS {
            for turn in 0..2 {
                let side = (i + turn) % 2;
                let start = cpu_seconds();
                if side == 0 {
                    let request = genapi::api::types::Gen2ProRequest::builder().prompt(prompt);
                    client.submit(request).await.expect("submit");
                } else {
                    let answer = http
                        .post(format!("{base}/v1/gen-2-pro"))
                        .header("x-key", "bench-key")
                        .json(&json!({ "prompt": prompt }))
                        .send()
                        .await
                        .expect("submit");
                    let accepted: Value = answer.json().await.expect("json");
                    std::hint::black_box(accepted["polling_url"].as_str().map(str::to_string));
                }
                round[side] += cpu_seconds() - start;
            }
        }
        spent[0] += round[0];
        spent[1] += round[1];
        ratios.push(round[0] / round[1]);
    }
    let after = [mocks[0].stats(counter).await, mocks[1].stats(counter).await];
    let seen = |i: usize, name: &str| {
        let count = |stats: &Value| match name {
            "submissions" => stats[name]["/v1/gen-2-pro"].as_u64().unwrap_or(0),
            _ => stats[name].as_u64().unwrap_or(0),
        };
        count(&after[i]) - count(&before[i])
    };
    let each = |seconds: f64| seconds / (ROUNDS * PAIRS) as f64 * 1e6;
    ratios.sort_by(f64::total_cmp);
    println!(
        "submissions back to back (warm): client CPU per submission, {} each",
        ROUNDS * PAIRS
    );
    println!(
        "  genapi {:.1} µs, hand-written {:.1} µs",
        each(spent[0]),
        each(spent[1])
    );
    println!(
        "  ratio:              median {:.2}x of {ROUNDS} interleaved rounds (range {:.2}–{:.2}); overall {:.2}x",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
        spent[0] / spent[1]
    );
    println!(
        "  accepted by the mock: genapi {}, hand-written {}; refused (429): genapi {}, hand-written {}",
        seen(0, "submissions"),
        seen(1, "submissions"),
        seen(0, "too_many_requests"),
        seen(1, "too_many_requests")
    );
}

fn report(workload: &str, ours: &Side, theirs: &Side, ratios: &mut [f64]) {
    let tasks = (ROUNDS * TASKS_PER_ROUND) as f64;
    let ms = |seconds: f64| seconds / tasks * 1000.0;
    println!("{workload}: client CPU per task (submit + wait + download of 1 MP), {tasks} tasks each");
    println!(
        "  genapi:             {:.3} ms (user {:.3}, system {:.3})",
        ms(ours.cpu),
        ms(ours.user),
        ms(ours.system)
    );
    println!(
        "  hand-written loop:  {:.3} ms (user {:.3}, system {:.3})",
        ms(theirs.cpu),
        ms(theirs.user),
        ms(theirs.system)
    );
    ratios.sort_by(f64::total_cmp);
    println!(
        "  ratio:              median {:.2}x of {ROUNDS} interleaved rounds (range {:.2}–{:.2}); overall {:.2}x",
        ratios[ratios.len() / 2],
        ratios[0],
        ratios[ratios.len() - 1],
        ours.cpu / theirs.cpu
    );
    println!(
        "  polls seen by the mock: genapi {}, hand-written {}",
        ours.polls, theirs.polls
    );
    let per_request = |side: &Side| side.cpu / side.requests.max(1) as f64 * 1e6;
    println!(
        "  CPU per request the mock answered: genapi {:.1} µs ({} requests), hand-written {:.1} µs ({}); ratio {:.2}x",
        per_request(ours),
        ours.requests,
        per_request(theirs),
        theirs.requests,
        per_request(ours) / per_request(theirs)
    );
    let per = |p: Phases| p.map(|s| format!("{:.3}", ms(s))).join(" / ");
    println!(
        "  by phase, ms (submit / wait / download): genapi {}; hand-written {}",
        per(ours.phases),
        per(theirs.phases)
    );
}
