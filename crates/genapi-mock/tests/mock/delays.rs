//! A delayed answer waits on the mock clock: as long as the fault says, or
//! until the clock is moved past it (in Rust or over HTTP), so a test can
//! hold a request for an hour and release it when it chooses.

use std::time::Duration;

use genapi_mock::{Fault, FaultKind, MockService};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

use crate::common;

const SUBMISSION: &str = "/v1/gen-2-pro";

/// Submits a small task in the background: its status and body once
/// answered.
fn submit(mock: &MockService) -> JoinHandle<(u16, Value)> {
    let request = common::http()
        .post(format!("{}{SUBMISSION}", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "held", "width": 64, "height": 64}));
    tokio::spawn(async move {
        let response = request.send().await.unwrap();
        (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
    })
}

/// Waits until the mock has seen `count` submissions (a request is logged
/// before its delay starts).
async fn seen(mock: &MockService, count: usize) {
    while mock.count("POST", SUBMISSION) < count {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// On the real clock an hour's delay would outlast the test by far: only
/// the advance answers it, and the guard merely keeps a broken mock from
/// hanging the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_hours_delay_is_answered_once_the_mock_clock_is_moved_past_it() {
    const HOUR: Duration = Duration::from_secs(3600);
    const GUARD: Duration = Duration::from_secs(60);
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on(SUBMISSION, FaultKind::Delay(HOUR)).method("POST").times(2));

    let held = submit(&mock);
    seen(&mock, 1).await;
    assert!(!held.is_finished(), "held until the clock moves");
    mock.advance(HOUR);
    let (status, body) = tokio::time::timeout(GUARD, held).await.expect("released").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body["id"].is_string(), "then handled as usual: {body}");

    // The same over HTTP, as a test in another language moves the clock.
    let held = submit(&mock);
    seen(&mock, 2).await;
    assert!(!held.is_finished(), "held until the clock moves");
    let advanced = common::http()
        .post(format!("{}/mock/clock/advance", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"seconds": HOUR.as_secs()}))
        .send()
        .await
        .unwrap();
    assert_eq!(advanced.status(), 200);
    let (status, body) = tokio::time::timeout(GUARD, held).await.expect("released").unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body["id"].is_string(), "{body}");
}

/// Nobody moves the mock clock: the answer comes no sooner than the delay,
/// on a paused runtime clock too (whose time passes as the runtime idles).
#[tokio::test(start_paused = true)]
async fn a_delay_nobody_cuts_short_holds_the_answer_as_long_as_it_says() {
    let delay = Duration::from_secs(2);
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on(SUBMISSION, FaultKind::Delay(delay)).method("POST"));
    let started = tokio::time::Instant::now();
    let (status, body) = submit(&mock).await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(started.elapsed() >= delay, "answered after {:?}", started.elapsed());
}
