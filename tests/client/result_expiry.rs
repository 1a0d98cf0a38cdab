//! Signed result addresses expire after 10 minutes (mock clock); the client
//! polls again for a fresh one before giving up.

use std::time::Duration;

use genapi::api::types;
use genapi::Error;
use genapi_mock::MockService;

#[tokio::test(start_paused = true)]
async fn an_expired_address_is_refused_and_the_client_fetches_a_fresh_one() {
    let mock = MockService::start().await.unwrap();
    let output = mock
        .client()
        .unwrap()
        .run(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    let http = genapi_http();
    assert_eq!(http.get(output.sample()).send().await.unwrap().status(), 200);
    mock.advance(Duration::from_secs(10 * 60 + 1));
    assert_eq!(
        http.get(output.sample()).send().await.unwrap().status(),
        403,
        "expired after 10 minutes"
    );
    let polls = mock.count("GET", "/v1/get_result");
    let bytes = output.bytes().await.unwrap();
    assert!(!bytes.is_empty());
    assert_eq!(
        mock.count("GET", "/v1/get_result"),
        polls + 1,
        "one extra poll for a fresh address"
    );
}

#[tokio::test(start_paused = true)]
async fn once_the_task_itself_has_expired_the_error_is_result_expired() {
    let mock = MockService::start().await.unwrap();
    let output = mock
        .client()
        .unwrap()
        .run(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    mock.advance(Duration::from_secs(60 * 60));
    let error = output.bytes().await.unwrap_err();
    assert!(matches!(error, Error::ResultExpired { .. }), "{error}");
    assert!(error.to_string().contains("submit the task again"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_tampered_address_is_refused() {
    let mock = MockService::start().await.unwrap();
    let output = mock
        .client()
        .unwrap()
        .run(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    let tampered = output.sample().replace("expires=", "expires=9");
    assert_eq!(genapi_http().get(&tampered).send().await.unwrap().status(), 403);
}

fn genapi_http() -> reqwest::Client {
    crate::common::install_tls_provider();
    reqwest::Client::new()
}
