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

/// What a request's addresses say that is no secret (another address, a
/// setting, the id of a task it follows up on) is never learned, so the
/// answers that spell it (the polling and result addresses the service
/// makes on this same host) reach the client whole and the paid result is
/// saved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn a_webhook_address_naming_other_addresses_settings_and_tasks_leaves_the_results_whole() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let parent = client
        .submit(
            types::Gen2ProRequest::builder()
                .prompt("a parent fox")
                .width(64)
                .height(64),
        )
        .await
        .unwrap();
    let parent_id = parent.id().to_string();
    let first = parent.wait().await.unwrap();
    first.bytes().await.unwrap();
    // The hosts the service answers and delivers from.
    let host = mock.base_url().trim_end_matches('/').to_string();
    let delivery = url::Url::parse(first.sample()).unwrap();
    let delivery = delivery.origin().ascii_serialization();
    let hook = format!(
        "http://127.0.0.1:9/in?next={host}&origin={delivery}/mock&region=us-east-1&model=gen-2-pro\
         &seed=12345678901234567890&parent={parent_id}"
    );
    let child = client
        .submit(
            types::Gen2ProRequest::builder()
                .prompt("a child fox")
                .width(64)
                .height(64)
                .webhook_url(hook.as_str()),
        )
        .await
        .unwrap();
    let output = child.wait().await.unwrap();
    assert!(output.sample().starts_with(&delivery), "{}", output.sample());
    assert!(!output.sample().contains("redacted"), "{}", output.sample());
    let bytes = output.bytes().await.unwrap();
    assert_eq!(common::dimensions(&bytes), Some((64, 64)));
    // The parent is read whole again too.
    let again = client.task(&parent_id).unwrap().wait().await.unwrap();
    assert_eq!(again.id(), parent_id);
    again.bytes().await.unwrap();

    // A short token after pieces of the service's own paths, cut from them
    // by `&` and `=` as a form's values would be: the tasks that follow,
    // with no webhook at all, are polled and fetched whole.
    // So are the service's own hosts and paths, and JSON's syntax, sent as
    // a fragment, a password or a webhook secret.
    for (hook, secret) in [
        (
            "http://127.0.0.1:9/mock/results&/ab12cd34/=zz".to_string(),
            "whsec-fox-0001",
        ),
        (
            "http://127.0.0.1:9/v1/get_result&/ab12cd34/=zz".to_string(),
            "whsec-fox-0002",
        ),
        (format!("{delivery}/&ab12cd34"), "whsec-fox-0003"),
        (
            "http://127.0.0.1:9/in#%22,%22input_mp%22:".to_string(),
            "whsec-fox-0004",
        ),
        (
            "http://u:get_result@127.0.0.1:9/in#127.0.0.1".to_string(),
            "/v1/get_result",
        ),
        ("http://127.0.0.1:9/in".to_string(), "\",\"status\":\""),
        ("http://127.0.0.1:9/in".to_string(), "get_result?id="),
        ("http://127.0.0.1:9/in".to_string(), "/mock/results/"),
        ("http://127.0.0.1:9/in".to_string(), "\",\"sample\":\"http"),
    ] {
        client
            .submit(
                types::Gen2ProRequest::builder()
                    .prompt("a hooked fox")
                    .width(64)
                    .height(64)
                    .webhook_url(hook.as_str())
                    .webhook_secret(secret),
            )
            .await
            .unwrap();
    }
    let plain = client
        .submit(
            types::Gen2ProRequest::builder()
                .prompt("a plain fox")
                .width(64)
                .height(64),
        )
        .await
        .unwrap();
    assert!(
        !plain.polling_url().as_str().contains("redacted"),
        "{}",
        plain.polling_url()
    );
    let output = plain.wait().await.unwrap();
    assert!(!output.sample().contains("redacted"), "{}", output.sample());
    assert_eq!(common::dimensions(&output.bytes().await.unwrap()), Some((64, 64)));
}
