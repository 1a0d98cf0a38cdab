//! Polls and downloads pass through the proxy, the key only where the
//! client's trust rule sends it.

use std::time::Duration;

use genapi_mock::MockService;
use genapi_proxy::PROXY_HEADER;
use serde_json::Value;

use crate::common::{http, job, post, proxy, PATH};

#[tokio::test]
async fn an_sdk_that_sends_no_key_polls_and_downloads_through_the_proxy() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    let accepted: Value = post(&proxy, PATH, &job("heron"), &[]).await.json().await.unwrap();
    let polling_url = accepted["polling_url"].as_str().unwrap();
    assert!(polling_url.starts_with(&proxy.base_url()), "{polling_url}");
    mock.advance(Duration::from_secs(600));
    let result: Value = http().get(polling_url).send().await.unwrap().json().await.unwrap();
    assert_eq!(result["status"], "Ready", "{result}");
    let sample = result["result"]["sample"].as_str().unwrap();
    assert!(
        sample.starts_with(&proxy.base_url()),
        "the result passes through the proxy: {sample}"
    );
    let image = http().get(sample).send().await.unwrap();
    assert_eq!(image.status(), 200);
    assert!(!image.bytes().await.unwrap().is_empty());
    let stats = mock.stats();
    assert_eq!(stats.downloads, 1);
    assert_eq!(stats.keys_sent_to_delivery, 0, "the delivery host never gets the key");
    let polls_with_key = mock
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/get_result" && r.header("x-key").is_some())
        .count();
    assert!(polls_with_key >= 1, "the polling host got the proxy's key");
    assert_eq!(
        proxy.summary().contract_mismatches,
        0,
        "the mock's answers are the document's"
    );
}

#[tokio::test]
async fn the_rust_client_runs_a_task_through_the_proxy_unmodified() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    let client = genapi::Client::builder()
        .base_url(proxy.base_url())
        .api_key(mock.key())
        .build()
        .unwrap();
    let request = genapi::api::types::Gen2ProRequest::builder()
        .prompt("a crane")
        .width(512)
        .height(512);
    let task = client.submit(request).await.unwrap();
    mock.advance(Duration::from_secs(600));
    let output = task.wait().await.unwrap();
    assert!(!output.bytes().await.unwrap().is_empty());
    assert_eq!(mock.created_tasks().len(), 1);
    assert_eq!(proxy.summary().contract_mismatches, 0);
}

#[tokio::test]
async fn an_origin_the_service_never_handed_out_is_refused() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    use base64::Engine;
    let elsewhere = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode("http://127.0.0.1:9");
    let response = http()
        .get(format!("{}/_genapi/origin/{elsewhere}/x", proxy.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 403);
    assert_eq!(response.headers()[PROXY_HEADER], "refused");
}

/// A proxy reached by another name (listening beyond loopback, behind a
/// name of its own) hands out addresses under that name.
#[tokio::test]
async fn addresses_are_handed_out_under_the_name_the_caller_used() {
    let mock = MockService::start().await.unwrap();
    const OWN: &str = "the-proxys-own-key-0b1c";
    let proxy = genapi_proxy::Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .allow_remote(OWN)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let headers = [("host", "proxy.example:8790"), ("x-key", OWN)];
    let accepted: Value = post(&proxy, PATH, &job("named"), &headers).await.json().await.unwrap();
    let polling_url = accepted["polling_url"].as_str().unwrap();
    assert!(polling_url.starts_with("http://proxy.example:8790/"), "{polling_url}");
}

/// On loopback the proxy serves the programs of its machine: a web page the
/// user's browser shows (another site's `Origin`, a cross-site fetch, a
/// name rebound to 127.0.0.1) cannot spend the configured key through it.
#[tokio::test]
async fn a_web_page_cannot_send_through_a_proxy_on_loopback() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    for headers in [
        vec![("host", "attacker.example:8790")],
        vec![("origin", "http://evil.example")],
        vec![("sec-fetch-site", "cross-site")],
    ] {
        let answer = post(&proxy, PATH, &job("from a page"), &headers).await;
        assert_eq!(answer.status(), 403, "{headers:?}");
    }
    assert_eq!(mock.count("POST", PATH), 0);
    let local = post(&proxy, PATH, &job("local"), &[("origin", "http://localhost:3000")]).await;
    assert_eq!(local.status(), 200, "a page of this machine's own");
}

/// A delivery host the trust rule would give the key to (the real
/// service's lies in its own domain) still gets no key and no credential:
/// downloads never carry them, as the client's own never do.
#[tokio::test]
async fn a_trusted_delivery_host_gets_no_key_and_no_credential() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().trust_origin(mock.delivery_url()).build().unwrap();
    let proxy = genapi_proxy::Proxy::builder(client)
        .key(mock.key())
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let accepted: Value = post(&proxy, PATH, &job("trusted delivery"), &[])
        .await
        .json()
        .await
        .unwrap();
    mock.advance(Duration::from_secs(600));
    let poll: Value = http()
        .get(accepted["polling_url"].as_str().unwrap())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sample = poll["result"]["sample"].as_str().unwrap();
    let image = http()
        .get(sample)
        .header("authorization", "Bearer SECRET-BEARER")
        .header("cookie", "session=SECRET-COOKIE")
        .send()
        .await
        .unwrap();
    assert_eq!(image.status(), 200);
    assert_eq!(mock.stats().keys_sent_to_delivery, 0);
    let download = mock.requests().into_iter().find(|r| r.origin == "delivery").unwrap();
    assert!(download.header("authorization").is_none() && download.header("cookie").is_none());
}
