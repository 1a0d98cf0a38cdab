//! One road to the service: every operation of the document is sent by the
//! generated client, and one call sends at most `max_attempts` requests.

use std::time::Duration;

use genapi::api::types;
use genapi::{Error, RetryPolicy};
use genapi_mock::{Fault, FaultKind, MockService};

use crate::common;

fn fast_retries(attempts: u32) -> RetryPolicy {
    RetryPolicy::default()
        .max_attempts(attempts)
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(20))
}

/// The `api-version` header is written by the generated operation methods
/// only: a request without it was built by hand.
#[tokio::test(start_paused = true)]
async fn every_operation_is_sent_by_the_generated_client() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let typed = client
        .submit(types::Gen2ProRequest::builder().prompt("a typed request"))
        .await
        .unwrap();
    let raw = client
        .submit_raw(
            "/v1/gen-2-pro",
            serde_json::json!({"prompt": "a raw request", "user": "u-1"}),
        )
        .await
        .unwrap();
    let found = client.task(raw.id()).unwrap();
    typed.wait().await.unwrap();
    found.wait().await.unwrap().bytes().await.unwrap();

    let api_requests: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.origin != "delivery" && r.path.starts_with("/v1/"))
        .collect();
    assert!(api_requests.iter().any(|r| r.method == "POST"));
    assert!(api_requests.iter().any(|r| r.path == "/v1/get_result"));
    for request in &api_requests {
        assert_eq!(
            request.header("api-version"),
            Some("0.0.1"),
            "{} {} was not sent by the generated client",
            request.method,
            request.path
        );
    }
    // The raw body went on the wire as written, unknown field included.
    let posted = api_requests
        .iter()
        .find(|r| r.method == "POST" && r.body.contains("a raw request"))
        .unwrap();
    assert!(posted.body.contains("\"user\":\"u-1\""), "{}", posted.body);
}

/// Before the retry loops were one, an answer that broke off restarted the
/// status retries: a poll meeting one broken answer and then 503s sent
/// `max_attempts + 1` requests.
#[tokio::test(start_paused = true)]
async fn one_poll_sends_at_most_max_attempts_requests() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().retry_policy(fast_retries(4)).build().unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    mock.inject(Fault::on("/v1/get_result", FaultKind::DropConnection).times(1));
    mock.inject(Fault::status("/v1/get_result", 503).times(50));
    let error = task.poll().await.unwrap_err();
    assert!(matches!(error, Error::Server { status: 503, .. }), "{error}");
    assert_eq!(mock.count("GET", "/v1/get_result"), 4, "max_attempts in all");
}

#[tokio::test(start_paused = true)]
async fn one_submission_sends_at_most_max_attempts_requests() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().retry_policy(fast_retries(3)).build().unwrap();
    mock.inject(
        Fault::on(
            "/v1/gen-2-pro",
            FaultKind::Status {
                status: 429,
                retry_after: None,
                body: "{}".into(),
            },
        )
        .times(50),
    );
    let error = client
        .submit_raw("/v1/gen-2-pro", serde_json::json!({"prompt": "x"}))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::RateLimited { .. }), "{error}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "max_attempts in all");
}

/// The document counts `1024.0` as an integer, so `submit_raw` sends it (as
/// written), though the generated type wants a `u32`.
#[tokio::test(start_paused = true)]
async fn raw_bodies_with_whole_floats_are_sent_as_written() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let body =
        serde_json::json!({"prompt": "a", "width": 1024.0, "height": 1024.0, "seed": 42.0, "safety_tolerance": 2.0});
    assert!(genapi::validate::Document::embedded()
        .validate("Gen2ProRequest", &body)
        .is_empty());
    client.submit_raw("/v1/gen-2-pro", body).await.unwrap();
    let posted = mock.requests().into_iter().find(|r| r.method == "POST").unwrap();
    assert!(posted.body.contains("1024.0"), "{}", posted.body);
}

/// The generated `get_result` builds `{origin}/v1/get_result?id=…`; a polling
/// URL that says more (another parameter, another order) is still polled
/// exactly as the service gave it.
#[tokio::test(start_paused = true)]
async fn a_polling_url_is_polled_exactly_as_the_service_gave_it() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let accepted = client
        .submit(types::Gen2ProRequest::builder().prompt("a fox"))
        .await
        .unwrap();
    let id = accepted.id().to_string();
    let given = format!(
        "{}/v1/get_result?shard=7&id={id}",
        mock.regional_url().trim_end_matches('/')
    );
    common::answer_next_submission(&mock, serde_json::json!({"id": id, "polling_url": given}).to_string());
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("a fox"))
        .await
        .unwrap();
    assert_eq!(task.polling_url().as_str(), given);
    task.wait().await.unwrap();
    let polls: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/get_result")
        .collect();
    assert!(!polls.is_empty());
    let expected = format!("shard=7&id={id}");
    assert!(
        polls.iter().all(|r| r.query.as_deref() == Some(expected.as_str())),
        "every poll carries the given query: {:?}",
        polls.iter().map(|r| r.query.clone()).collect::<Vec<_>>()
    );
}
