//! What the logs say about each request: its operation, whether the key went
//! with it, the status it ended in and how many attempts it took.

use std::time::Duration;

use genapi::api::types;
use genapi::RetryPolicy;
use genapi_mock::{Fault, MockService};
use tracing_subscriber::fmt::format::FmtSpan;

use crate::common;
use common::LogCapture;

/// The closing line of each `genapi.request` span, with the fields recorded
/// while it ran.
fn closed_requests(capture: &LogCapture) -> Vec<String> {
    capture
        .text()
        .lines()
        .filter(|line| line.contains("genapi.request{") && line.ends_with("close"))
        .map(str::to_string)
        .collect()
}

#[tokio::test(start_paused = true)]
async fn each_request_is_traced_with_its_key_status_and_attempts() {
    let capture = LogCapture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_span_events(FmtSpan::CLOSE)
        .without_time()
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let mock = MockService::start().await.unwrap();
    let retries = RetryPolicy::default()
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(20));
    let client = mock.client_builder().retry_policy(retries).build().unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("a fox"))
        .await
        .unwrap();
    mock.inject(Fault::status("/v1/get_result", 503).times(1));
    let output = task.wait().await.unwrap();
    output.bytes().await.unwrap();

    let closed = closed_requests(&capture);
    let submission = closed
        .iter()
        .find(|line| line.contains("operation=\"gen_2_pro\""))
        .unwrap_or_else(|| panic!("no submission span in {closed:#?}"));
    for field in ["keyed=true", "status=200", "attempts=1"] {
        assert!(submission.contains(field), "{field} in {submission}");
    }
    assert!(
        closed.iter().any(|line| line.contains("operation=\"get_result\"")
            && line.contains("keyed=true")
            && line.contains("status=")
            && line.contains("attempts=2")),
        "the poll that met a 503 took two attempts: {closed:#?}"
    );
    // The wait counts polls, not requests: the 503 was asked again inside
    // one poll.
    let polls = mock.count("GET", "/v1/get_result") - 1;
    let text = capture.text();
    let wait = text
        .lines()
        .find(|line| line.contains("genapi.wait{") && !line.contains("genapi.request{") && line.ends_with("close"))
        .unwrap_or_else(|| panic!("no wait span in {text}"));
    assert!(wait.contains(&format!("polls={polls}")), "{polls} polls in {wait}");
    let download = closed
        .iter()
        .find(|line| line.contains("operation=\"download\""))
        .unwrap_or_else(|| panic!("no download span in {closed:#?}"));
    assert!(
        download.contains("keyed=false"),
        "downloads go without the key: {download}"
    );
}
