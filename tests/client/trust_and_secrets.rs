//! The key goes only to trusted origins and is never printed; result
//! addresses are fetched without it.

use genapi::api::types;
use genapi::Error;
use genapi_mock::MockService;

use crate::common;

fn request() -> types::builder::Gen2ProRequest {
    types::Gen2ProRequest::builder().prompt("x")
}

/// Makes `front` answer its next submission with a polling_url on `other`.
async fn answer_with_polling_url_on(front: &MockService, other: &MockService) -> String {
    let task = other.client().unwrap().submit(request()).await.unwrap();
    let body = serde_json::json!({"id": task.id(), "polling_url": task.polling_url().as_str()}).to_string();
    common::answer_next_submission(front, body);
    task.id().to_string()
}

#[tokio::test(start_paused = true)]
async fn an_untrusted_polling_host_is_polled_without_the_key_and_its_refusal_names_the_remedy() {
    let (front, other) = (MockService::start().await.unwrap(), MockService::start().await.unwrap());
    let id = answer_with_polling_url_on(&front, &other).await;
    let polls_before = other.count("GET", "/v1/get_result");
    let error = front.client().unwrap().run(request()).await.unwrap_err();
    let Error::UntrustedOrigin { origin, task } = &error else {
        panic!("{error}")
    };
    assert_eq!(format!("{origin}/"), format!("{}/", other.regional_url()));
    assert_eq!(task.id, id, "the paid task is named");
    assert!(task.polling_url.starts_with(other.regional_url()));
    let message = error.to_string();
    for needed in [id.as_str(), origin.as_str(), "GENAPI_TRUSTED_ORIGINS", "trust it"] {
        assert!(message.contains(needed), "the message names {needed}: {message}");
    }
    assert_eq!(error.task().map(|t| t.id.as_str()), Some(id.as_str()));
    let polls: Vec<_> = other
        .requests()
        .into_iter()
        .filter(|r| r.path == "/v1/get_result")
        .skip(polls_before)
        .collect();
    assert!(!polls.is_empty(), "the untrusted host was polled");
    assert!(polls.iter().all(|r| r.header("x-key").is_none()), "never with the key");
}

#[tokio::test(start_paused = true)]
async fn a_trusted_regional_polling_host_is_polled_with_the_key() {
    let (front, other) = (MockService::start().await.unwrap(), MockService::start().await.unwrap());
    let id = answer_with_polling_url_on(&front, &other).await;
    let client = front
        .client_builder()
        .trust_origin(other.regional_url())
        .build()
        .unwrap();
    let output = client.run(request()).await.unwrap();
    assert_eq!(output.id(), id);
    let poll = other
        .requests()
        .into_iter()
        .rev()
        .find(|r| r.path == "/v1/get_result")
        .unwrap();
    assert_eq!(
        poll.header("x-key"),
        Some("[redacted]"),
        "the key was sent (the log redacts it)"
    );
}

#[tokio::test(start_paused = true)]
async fn downloads_carry_no_key() {
    let mock = MockService::start().await.unwrap();
    let output = mock.client().unwrap().run(request()).await.unwrap();
    output.bytes().await.unwrap();
    let download = mock
        .requests()
        .into_iter()
        .find(|r| r.path.starts_with("/mock/results/"))
        .unwrap();
    assert_eq!(download.header("x-key"), None);
    let submit = mock.requests().into_iter().find(|r| r.path == "/v1/gen-2-pro").unwrap();
    assert_eq!(submit.header("x-key"), Some("[redacted]"));
}

#[tokio::test(start_paused = true)]
async fn no_debug_output_or_error_shows_the_key_or_the_webhook_secret() {
    const KEY: &str = "canary-key-0042";
    const SECRET: &str = "canary-secret-0042";
    let builder = genapi::Client::builder().api_key(KEY).base_url("http://127.0.0.1:9");
    let builder_text = format!("{builder:?}");
    let client = builder.build().unwrap();
    let request: types::Gen2ProRequest = request()
        .webhook_secret(genapi::WebhookSecret::new(SECRET))
        .try_into()
        .unwrap();
    let verifier = genapi::webhook::Verifier::new(SECRET).unwrap();
    let error = client.submit(request.clone()).await.unwrap_err();
    for text in [
        builder_text,
        format!("{client:?}"),
        format!("{request:?}"),
        format!("{verifier:?}"),
        format!("{error:?}"),
        error.to_string(),
    ] {
        assert!(!text.contains(KEY) && !text.contains(SECRET), "secret leaked in {text}");
    }
    // The secret still reaches the wire, where it belongs.
    assert!(serde_json::to_string(&request).unwrap().contains(SECRET));
}
