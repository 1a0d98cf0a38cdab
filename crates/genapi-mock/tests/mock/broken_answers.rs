//! Answers that break in flight after the service acted: a truncated answer
//! and a stalled one each create their task, announce the whole body's
//! length, and send half of it; then the connection breaks, or the rest
//! waits on the mock clock.

use std::time::Duration;

use genapi_mock::{Fault, FaultKind, MockService};
use serde_json::json;

use crate::common;

const SUBMISSION: &str = "/v1/gen-2-pro";

fn submission(mock: &MockService) -> reqwest::RequestBuilder {
    common::http()
        .post(format!("{}{SUBMISSION}", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "cut", "width": 64, "height": 64}))
}

#[tokio::test(start_paused = true)]
async fn a_truncated_answer_creates_its_task_and_breaks_after_half_its_body() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on(SUBMISSION, FaultKind::TruncatedAnswer));
    let mut response = submission(&mock).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let announced = response.content_length().expect("the whole length is announced");
    let mut got = Vec::new();
    let broke = loop {
        match response.chunk().await {
            Ok(Some(chunk)) => got.extend_from_slice(&chunk),
            Ok(None) => break false,
            Err(_) => break true,
        }
    };
    assert!(broke, "the connection breaks before the end");
    assert_eq!(got.len() as u64, announced / 2, "half the body came");
    assert_eq!(mock.created_tasks().len(), 1, "the service acted");
}

#[tokio::test(start_paused = true)]
async fn a_stalled_answer_sends_the_rest_once_the_mock_clock_passes_the_stall() {
    const STALL: Duration = Duration::from_secs(3600);
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on(SUBMISSION, FaultKind::StalledAnswer(STALL)));
    let mut response = submission(&mock).send().await.unwrap();
    let announced = response.content_length().expect("the whole length is announced");
    let first = response.chunk().await.unwrap().expect("the first half");
    assert_eq!(first.len() as u64, announced / 2);
    assert_eq!(mock.created_tasks().len(), 1, "the service acted before it stalled");
    let rest = tokio::spawn(async move {
        let mut rest = Vec::new();
        while let Some(chunk) = response.chunk().await.unwrap() {
            rest.extend_from_slice(&chunk);
        }
        rest
    });
    mock.advance(STALL);
    let rest = rest.await.unwrap();
    let mut whole = first.to_vec();
    whole.extend_from_slice(&rest);
    let answer: serde_json::Value = serde_json::from_slice(&whole).unwrap();
    assert!(answer["polling_url"].is_string(), "{answer}");
}

#[tokio::test(start_paused = true)]
async fn both_faults_can_be_injected_over_http() {
    let mock = MockService::start().await.unwrap();
    for (fault, sane) in [
        (json!({"path_prefix": SUBMISSION, "truncated_answer": true}), true),
        (json!({"path_prefix": SUBMISSION, "stall_ms": 2000}), true),
        (json!({"path_prefix": SUBMISSION, "stall_ms": 3_600_000}), false),
    ] {
        let status = common::http()
            .post(format!("{}/mock/faults", mock.base_url()))
            .header("x-key", mock.key())
            .json(&fault)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status.is_success(), sane, "{fault}: {status}");
    }
}
