//! A canary key and webhook secret, run through every public path at TRACE
//! logging: they never appear in logs, Debug output or error text.

use genapi::api::types;
use genapi::webhook::Verifier;
use genapi_mock::{Fault, FaultKind, MockConfig, MockService};

const KEY: &str = "canary-key-7f3a9c";
const SECRET: &str = "canary-secret-b81d";

use crate::common;
use common::LogCapture;

#[tokio::test(start_paused = true)]
async fn the_canaries_never_leak() {
    let capture = LogCapture::default();
    let writer = capture.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = common::log_into(subscriber);

    let config = MockConfig::default().key(KEY);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = mock.client().unwrap();
    let mut texts = vec![format!("{client:?}"), format!("{mock:?}")];

    // Success, with a webhook secret on the request.
    let request = types::Gen2ProRequest::builder()
        .prompt("a cat")
        .webhook_url(types::WebhookUrl::try_from("http://127.0.0.1:9/hook").unwrap())
        .webhook_secret(genapi::WebhookSecret::new(SECRET));
    texts.push(format!("{request:?}"));
    let task = client.submit(request).await.unwrap();
    texts.push(format!("{task:?}"));
    let output = task.wait().await.unwrap();
    texts.push(format!("{output:?}"));
    output.bytes().await.unwrap();

    // Failures of every kind.
    let failures = [
        client
            .submit(types::Gen2ProRequest::builder().prompt("x").safety_tolerance(9u8))
            .await
            .unwrap_err(),
        client
            .run(types::Gen2ProRequest::builder().prompt("[mock:error]"))
            .await
            .unwrap_err(),
        genapi::Client::builder()
            .api_key("wrong")
            .base_url(mock.base_url())
            .build()
            .unwrap()
            .submit(types::Gen2ProRequest::builder().prompt("x"))
            .await
            .unwrap_err(),
        genapi::Client::builder().base_url("http://x").build().unwrap_err(),
    ];
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::MalformedBody));
    let decode = client
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap_err();
    for error in failures.iter().chain([&decode]) {
        texts.push(format!("{error:?}"));
        texts.push(error.to_string());
    }

    // Webhook verification, accepted and rejected.
    let verifier = Verifier::new(SECRET).unwrap();
    texts.push(format!("{verifier:?}"));
    let mut headers = http::HeaderMap::new();
    headers.insert("x-webhook-secret", http::HeaderValue::from_static("wrong"));
    texts.push(format!(
        "{:?}",
        verifier.verify(&headers, br#"{"id":"a","status":"SUCCESS"}"#)
    ));
    texts.push(format!("{:?}", mock.requests()));

    let logs = capture.text();
    assert!(logs.contains("genapi.request"), "TRACE logging was captured");
    for text in texts.iter().chain([&logs]) {
        assert!(!text.contains(KEY), "the key leaked: {text}");
        assert!(!text.contains(SECRET), "the webhook secret leaked: {text}");
    }
}
