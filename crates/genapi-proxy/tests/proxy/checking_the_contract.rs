//! The traffic is checked against `openapi.json` both ways and passed on
//! unchanged.

use std::sync::{Arc, Mutex};

use genapi_mock::{Fault, FaultKind, MockService};
use genapi_proxy::{Mismatch, Proxy};

use crate::common::{post, PATH};

async fn watched(mock: &MockService) -> (Proxy, Arc<Mutex<Vec<Mismatch>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let told = seen.clone();
    let proxy = Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .on_mismatch(move |mismatch| told.lock().unwrap().push(mismatch.clone()))
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    (proxy, seen)
}

#[tokio::test]
async fn a_request_the_document_refuses_is_reported_and_still_sent() {
    let mock = MockService::start().await.unwrap();
    let (proxy, seen) = watched(&mock).await;
    let answer = post(&proxy, PATH, r#"{"prompt":"x","width":99999}"#, &[]).await;
    assert_eq!(answer.status(), 422, "the service's own answer");
    assert_eq!(mock.count("POST", PATH), 1, "sent as it was");
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter()
            .any(|m| m.operation == "gen_2_pro" && m.direction == "request" && m.field == "body.width"),
        "{seen:?}"
    );
    assert!(proxy.summary().contract_mismatches >= 1);
}

#[tokio::test]
async fn an_answer_the_document_does_not_describe_is_reported_and_passed_on() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on(
        PATH,
        FaultKind::Status {
            status: 200,
            retry_after: None,
            body: r#"{"id":"t-1","polling_url":7}"#.into(),
        },
    ));
    let (proxy, seen) = watched(&mock).await;
    let answer = post(&proxy, PATH, r#"{"prompt":"x"}"#, &[]).await;
    assert_eq!(answer.status(), 200);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["polling_url"], 7, "passed on as it came");
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter()
            .any(|m| m.direction == "answer 200" && m.field.starts_with("body")),
        "{seen:?}"
    );
}
