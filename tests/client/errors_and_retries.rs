//! Typed errors, and retries that never create a second task.

use std::time::Duration;

use genapi::api::types;
use genapi::{Error, RetryPolicy};
use genapi_mock::{Fault, FaultKind, MockConfig, MockService};

fn fast_retries() -> RetryPolicy {
    RetryPolicy::default()
        .initial_backoff(Duration::from_millis(10))
        .max_backoff(Duration::from_millis(50))
}

fn request() -> types::builder::Gen2ProRequest {
    types::Gen2ProRequest::builder().prompt("x")
}

/// Makes the mock answer its next ten submissions 429 (`Retry-After: 0`):
/// more than any client retries.
fn refuse_ten_submissions(mock: &MockService) {
    mock.inject(
        Fault::on(
            "/v1/gen-2-pro",
            FaultKind::Status {
                status: 429,
                retry_after: Some("0".into()),
                body: "{}".into(),
            },
        )
        .times(10),
    );
}

#[tokio::test(start_paused = true)]
async fn a_wrong_key_is_forbidden() {
    let mock = MockService::start().await.unwrap();
    let client = genapi::Client::builder()
        .api_key("wrong")
        .base_url(mock.base_url())
        .build()
        .unwrap();
    let error = client.submit(request()).await.unwrap_err();
    assert!(matches!(error, Error::Forbidden { .. }), "{error}");
    assert!(
        error
            .to_string()
            .contains("check the API key the client was built with"),
        "says what to check: {error}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_key_limited_to_some_endpoints_is_forbidden_elsewhere() {
    let config = MockConfig::default()
        .keys(Vec::new())
        .limited_key("dev-only", &["gen_dev", "get_result"]);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = mock.client().unwrap();
    client
        .run(types::GenDevRequest::builder().prompt("x".to_string()))
        .await
        .unwrap();
    assert!(matches!(
        client.submit(request()).await.unwrap_err(),
        Error::Forbidden { .. }
    ));
}

#[tokio::test(start_paused = true)]
async fn spent_credits_give_insufficient_credits() {
    let mock = MockService::start().await.unwrap();
    mock.set_credits(Some(0.5));
    let error = mock.client().unwrap().submit(request()).await.unwrap_err();
    assert!(matches!(error, Error::InsufficientCredits { .. }), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_429_then_success_makes_exactly_two_submissions() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on(
        "/v1/gen-2-pro",
        FaultKind::Status {
            status: 429,
            retry_after: Some("0".into()),
            body: "{}".into(),
        },
    ));
    let client = mock.client_builder().retry_policy(fast_retries()).build().unwrap();
    client.submit(request()).await.unwrap();
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_persistent_429_is_typed_with_its_retry_after() {
    let mock = MockService::start().await.unwrap();
    refuse_ten_submissions(&mock);
    let client = mock.client_builder().retry_policy(fast_retries()).build().unwrap();
    let error = client.submit(request()).await.unwrap_err();
    assert!(
        matches!(error, Error::RateLimited { retry_after: Some(d), .. } if d.is_zero()),
        "{error}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 4, "max_attempts in all");
}

/// A submission its caller records is one request under one record: its
/// 429 comes back to the caller, which records it and sends again itself.
#[tokio::test(start_paused = true)]
async fn a_recorded_submission_answered_429_is_sent_once() {
    let mock = MockService::start().await.unwrap();
    refuse_ten_submissions(&mock);
    let client = mock.client_builder().retry_policy(fast_retries()).build().unwrap();
    let recorded = std::sync::atomic::AtomicUsize::new(0);
    let sent = client
        .submit_raw_recorded("/v1/gen-2-pro", serde_json::json!({"prompt": "x"}), || async {
            recorded.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<(), ()>(())
        })
        .await;
    let error = match sent {
        Err(genapi::Unsent::Failed(error)) => error,
        other => panic!("a 429 comes back as the submission's error: {other:?}"),
    };
    assert!(error.is_safe_to_resubmit(), "{error}");
    assert_eq!(recorded.into_inner(), 1);
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "one record, one request");
}

#[tokio::test(start_paused = true)]
async fn a_500_on_submit_is_not_retried() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::status("/v1/gen-2-pro", 500).times(3));
    let client = mock.client_builder().retry_policy(fast_retries()).build().unwrap();
    let error = client.submit(request()).await.unwrap_err();
    assert!(matches!(error, Error::Server { status: 500, .. }), "{error}");
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        1,
        "the task may exist: never sent twice"
    );
}

#[tokio::test(start_paused = true)]
async fn a_connection_dropped_after_sending_is_not_retried() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::DropConnection));
    let client = mock.client_builder().retry_policy(fast_retries()).build().unwrap();
    let error = client.submit(request()).await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_refused_connection_is_a_transport_error() {
    let client = genapi::Client::builder()
        .api_key("k")
        .base_url("http://127.0.0.1:9")
        .retry_policy(fast_retries())
        .build()
        .unwrap();
    let error = client.submit(request()).await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_503_with_retry_after_while_polling_is_ridden_out() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::unavailable("/v1/get_result", 1).times(2));
    let client = mock.client_builder().retry_policy(fast_retries()).build().unwrap();
    let started = tokio::time::Instant::now();
    client.run(request()).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(2), "Retry-After was honoured");
}

#[tokio::test(start_paused = true)]
async fn not_found_and_202_right_after_submission_are_ridden_out() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::status("/v1/get_result", 404).times(2));
    mock.inject(Fault::status("/v1/get_result", 202));
    mock.client().unwrap().run(request()).await.unwrap();
    assert!(mock.count("GET", "/v1/get_result") >= 4);
}

#[tokio::test(start_paused = true)]
async fn malformed_json_keeps_the_raw_body() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::MalformedBody));
    let error = mock.client().unwrap().submit(request()).await.unwrap_err();
    let Error::Decode { body, .. } = &error else {
        panic!("{error}")
    };
    assert_eq!(body, "{\"id\": \"trunc");

    // While waiting, one malformed poll answer does not lose the accepted
    // task: the next poll reads it.
    mock.inject(Fault::on("/v1/get_result", FaultKind::MalformedBody));
    let polls = mock.count("GET", "/v1/get_result");
    mock.client().unwrap().run(request()).await.unwrap();
    assert!(
        mock.count("GET", "/v1/get_result") >= polls + 2,
        "polled again after the bad answer"
    );
}

/// A service that keeps answering polls with what is no task's state is
/// polled five times, not until the deadline; the error names the task, so
/// it can be waited for again.
#[tokio::test(start_paused = true)]
async fn poll_answers_that_stay_unreadable_end_the_wait_naming_the_task() {
    let mock = MockService::start().await.unwrap();
    let task = mock.client().unwrap().submit(request()).await.unwrap();
    let id = task.id().to_string();
    mock.inject(Fault::on("/v1/get_result", FaultKind::MalformedBody).times(1000));
    let error = task.wait().await.unwrap_err();
    assert!(matches!(error, Error::Decode { .. }), "{error}");
    assert_eq!(error.task().map(|t| t.id.as_str()), Some(id.as_str()));
    assert!(error.is_worth_waiting_again(), "{error}");
    assert_eq!(mock.count("GET", "/v1/get_result"), 5, "polls the service saw");
}

#[tokio::test(start_paused = true)]
async fn a_redirect_from_the_api_is_not_followed() {
    let mock = MockService::start().await.unwrap();
    let elsewhere = MockService::start().await.unwrap();
    mock.inject(Fault::on(
        "/v1/gen-2-pro",
        FaultKind::Redirect(format!("{}/v1/gen-2-pro", elsewhere.base_url())),
    ));
    let error = mock.client().unwrap().submit(request()).await.unwrap_err();
    assert!(matches!(error, Error::Redirected { .. }), "{error}");
    assert!(
        elsewhere.requests().is_empty(),
        "the key never reached the other origin"
    );
}

#[tokio::test(start_paused = true)]
async fn configuration_errors_say_what_is_missing() {
    let error = genapi::Client::builder()
        .base_url("http://127.0.0.1:1")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("GENAPI_API_KEY"), "{error}");
    let error = genapi::Client::builder().api_key("k").build().unwrap_err();
    assert!(error.to_string().contains("GENAPI_BASE_URL"), "{error}");
    let error = genapi::Client::builder()
        .api_key("k")
        .base_url("ftp://x")
        .build()
        .unwrap_err();
    assert!(error.to_string().contains("http(s)"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn the_mock_refuses_tasks_beyond_its_active_limit() {
    let config = MockConfig::default()
        .max_active_tasks(2)
        .default_duration(Duration::from_secs(30));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = mock
        .client_builder()
        .unlimited_active_tasks()
        .retry_policy(RetryPolicy::never())
        .build()
        .unwrap();
    let _first = client.submit(request()).await.unwrap();
    let _second = client.submit(request()).await.unwrap();
    let error = client.submit(request()).await.unwrap_err();
    assert!(
        matches!(
            error,
            Error::RateLimited {
                retry_after: Some(_),
                ..
            }
        ),
        "{error}"
    );
}
