//! Signed result addresses expire after 10 minutes (mock clock); the client
//! polls again for a fresh one before giving up.

use std::time::Duration;

use genapi::api::types;
use genapi::Error;
use genapi_mock::MockService;

/// A refusal `error` that leaves the task open: never called expired (which
/// tells the user to pay again), worth a wait more.
fn assert_left_open(error: &Error) {
    assert!(!matches!(error, Error::ResultExpired { .. }), "{error}");
    assert!(
        error.is_worth_waiting_again() && !error.class().ends_the_task(),
        "{error}"
    );
    assert!(!error.to_string().contains("submit the task again"), "{error}");
}

/// Waits again for the task `output` came from, as the error advises.
async fn waited_again(client: &genapi::Client, output: &genapi::Output) -> genapi::Result<genapi::Output> {
    client.task(output.reference().polling_url.as_str())?.wait().await
}

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

/// One "not found" after a refused download is not taken for the result's
/// end (a load balancer's passing 404 says the same): the download says
/// to wait again, and the wait, which polls the task itself, says it is
/// gone.
#[tokio::test(start_paused = true)]
async fn once_the_task_itself_has_expired_the_wait_that_follows_says_it_is_gone() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let output = client.run(types::Gen2ProRequest::builder().prompt("x")).await.unwrap();
    mock.advance(Duration::from_secs(60 * 60));
    let error = output.bytes().await.unwrap_err();
    assert_left_open(&error);
    assert!(error.to_string().contains("Task not found"), "{error}");
    let waited = waited_again(&client, &output).await.unwrap_err();
    assert!(matches!(waited, Error::TaskNotFound { .. }), "{waited}");
    assert!(waited.class().ends_the_task(), "{waited}");
}

/// A fresh address the delivery host refuses as well says nothing of the
/// result's end: the task is left to be waited for again, never called
/// expired (which would tell the user to pay for it again).
#[tokio::test(start_paused = true)]
async fn a_fresh_address_refused_as_well_leaves_the_task_to_wait_for_again() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let output = client.run(types::Gen2ProRequest::builder().prompt("x")).await.unwrap();
    mock.advance(Duration::from_secs(10 * 60 + 1));
    mock.inject(genapi_mock::Fault::status("/mock/results/", 403).times(2));
    let error = output.bytes().await.unwrap_err();
    assert_left_open(&error);
    let again = waited_again(&client, &output).await.unwrap();
    assert!(
        !again.bytes().await.unwrap().is_empty(),
        "the result was the service's still"
    );
}

/// The service offering the same address again, which states it is valid
/// for minutes yet, and the delivery host refusing it twice: a passing
/// refusal, not the result's expiry.
#[tokio::test(start_paused = true)]
async fn an_address_refused_though_it_states_it_is_valid_is_not_called_expired() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let output = client.run(types::Gen2ProRequest::builder().prompt("x")).await.unwrap();
    mock.inject(genapi_mock::Fault::status("/mock/results/", 403).times(2));
    let error = output.bytes().await.unwrap_err();
    assert_left_open(&error);
    let again = waited_again(&client, &output).await.unwrap();
    assert!(!again.bytes().await.unwrap().is_empty());
}

/// A refusal, then a service that answers once that the task it called
/// Ready is running: a passing glitch, not the result's end.
#[tokio::test(start_paused = true)]
async fn a_refusal_then_a_passing_wrong_answer_is_not_called_expired() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let output = client.run(types::Gen2ProRequest::builder().prompt("x")).await.unwrap();
    mock.inject(genapi_mock::Fault::status("/mock/results/", 403));
    mock.inject(genapi_mock::Fault::status("/v1/get_result", 202));
    let error = output.bytes().await.unwrap_err();
    assert_left_open(&error);
    assert!(
        error.to_string().contains(&output.reference().id),
        "names the task: {error}"
    );
    let again = waited_again(&client, &output).await.unwrap();
    assert!(
        !again.bytes().await.unwrap().is_empty(),
        "the result was the service's still"
    );
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
