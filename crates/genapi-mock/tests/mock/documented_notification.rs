//! The notification the mock sends is the one `openapi.json` describes (the
//! `task_finished` callback of the submissions): its body, for every way a
//! task ends, fits `WebhookNotification` and carries no field the document
//! leaves out; its status maps to polling's as the document says; its
//! headers are the ones the callback lists, sent with a secret and only then.

use std::collections::BTreeMap;
use std::time::Duration;

use genapi::validate::Document;
use genapi_mock::MockConfig;
use serde_json::{json, Value};

use crate::common;
use crate::webhooks::{settle, start, Receiver, SECRET};

/// The prompts that end a task each way the mock knows, with the status
/// polling then says.
const ENDINGS: [(&str, &str); 4] = [
    ("a hook", "Ready"),
    ("a hook [mock:error]", "Error"),
    ("a hook [mock:request-moderated]", "Request Moderated"),
    ("a hook [mock:content-moderated]", "Content Moderated"),
];

/// The callback's POST as `gen-2-pro` declares it.
fn callback(doc: &Value) -> Value {
    doc.pointer("/paths/~1v1~1gen-2-pro/post/callbacks/task_finished/{$request.body#~1webhook_url}/post")
        .cloned()
        .expect("gen-2-pro declares the task_finished callback")
}

/// The header names the callback lists, lowercase.
fn documented_headers(doc: &Value) -> Vec<String> {
    let parameters = callback(doc)["parameters"].as_array().cloned().unwrap_or_default();
    parameters
        .iter()
        .map(|p| genapi_document::resolve(doc, p).unwrap())
        .inspect(|p| assert_eq!(p["in"], "header", "{p}"))
        .map(|p| p["name"].as_str().unwrap().to_ascii_lowercase())
        .collect()
}

/// Every key of `value` is a property `schema` names.
fn assert_described(doc: &Value, schema: &str, value: &Value) {
    let properties = &genapi_document::schema(doc, schema).unwrap()["properties"];
    for key in value.as_object().unwrap().keys() {
        assert!(
            properties.get(key).is_some(),
            "{schema} does not describe `{key}`: {value}"
        );
    }
}

/// The JSON a request is answered with.
async fn answer(request: reqwest::RequestBuilder) -> Value {
    request.send().await.unwrap().json().await.unwrap()
}

/// Submits to gen-2-pro: the task's id. A submission naming a webhook is
/// answered without `polling_url`.
async fn submit(http: &reqwest::Client, base_url: &str, key: &str, body: Value) -> String {
    let request = http
        .post(format!("{base_url}/v1/gen-2-pro"))
        .header("x-key", key)
        .json(&body);
    let answer = answer(request).await;
    assert!(answer.get("polling_url").is_none(), "{answer}");
    answer["id"].as_str().unwrap().to_string()
}

/// What polling says of the task, by the fallback address.
async fn poll_status(http: &reqwest::Client, base_url: &str, key: &str, id: &str) -> String {
    let request = http
        .get(format!("{base_url}/v1/get_result?id={id}"))
        .header("x-key", key);
    answer(request).await["status"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_notification_the_mock_sends_is_the_one_the_document_describes() {
    let doc = common::document();
    let http = common::http();
    let receiver = Receiver::start().await;
    let config = MockConfig::default()
        .webhook_target(&receiver.origin)
        .default_duration(Duration::ZERO);
    let mock = start(config).await;
    let hook = format!("{}/hooks", receiver.origin);

    let mut expected = BTreeMap::new();
    for (prompt, polled) in ENDINGS {
        let body = json!({"prompt": prompt, "width": 64, "height": 64, "webhook_url": hook, "webhook_secret": SECRET});
        expected.insert(submit(&http, mock.base_url(), mock.key(), body).await, (polled, true));
    }
    let unsigned = json!({"prompt": "a hook", "width": 64, "height": 64, "webhook_url": hook});
    expected.insert(
        submit(&http, mock.base_url(), mock.key(), unsigned).await,
        ("Ready", false),
    );
    settle(|| receiver.count() == expected.len()).await;
    let seen = receiver.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), expected.len());

    let headers = documented_headers(&doc);
    let failures = &genapi_document::schema(&doc, "TaskStatus").unwrap()["x-final-failure"];
    let verifier = genapi::webhook::Verifier::new(SECRET).unwrap().require_signature(true);
    for (sent_headers, body) in seen {
        let notification: Value = serde_json::from_slice(&body).unwrap();
        let errors = Document::embedded().validate("WebhookNotification", &notification);
        assert!(errors.is_empty(), "{errors:?}: {notification}");
        assert_described(&doc, "WebhookNotification", &notification);

        let id = notification["task_id"].as_str().unwrap();
        assert_eq!(notification["id"], id, "{notification}");
        let (polled, signed) = expected[id];
        assert_eq!(poll_status(&http, mock.base_url(), mock.key(), id).await, polled);
        if polled == "Ready" {
            assert_eq!(notification["status"], "SUCCESS", "{notification}");
            assert!(notification["result"]["sample"].is_string(), "{notification}");
            assert!(notification["error"].is_null(), "{notification}");
        } else {
            assert_eq!(notification["status"], "FAILED", "{notification}");
            assert!(notification["result"].is_null(), "{notification}");
            assert_eq!(notification["error"]["status"], polled, "{notification}");
            assert!(failures.as_array().unwrap().contains(&json!(polled)), "{failures}");
            assert_described(&doc, "WebhookFailure", &notification["error"]);
        }

        let webhook_header = |name: &str| name.starts_with("webhook-") || name.starts_with("x-webhook-");
        for name in sent_headers
            .keys()
            .map(|name| name.as_str())
            .filter(|name| webhook_header(name))
        {
            assert!(headers.iter().any(|h| h == name), "{name} is sent but not described");
        }
        for name in &headers {
            assert_eq!(
                sent_headers.contains_key(name.as_str()),
                signed,
                "{name}, signed: {signed}"
            );
        }
        if signed {
            let header = |name: &str| sent_headers.get(name).and_then(|v| v.to_str().ok());
            let event = verifier.verify_lookup(header, &body).unwrap();
            assert_eq!(event.task_id, id);
        }
    }
}
