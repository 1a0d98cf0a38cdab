//! `record`: every relayed exchange in a HAR file, as the client records
//! its own, without the key, a webhook's secret or a result's signature.

use std::time::Duration;

use genapi_mock::MockService;
use genapi_proxy::Proxy;
use serde_json::Value;

use crate::common::{http, memory_file, post, PATH};

#[tokio::test]
async fn a_task_relayed_is_recorded_redacted_under_the_documents_names() {
    let mock = MockService::start().await.unwrap();
    let har = memory_file("recording").with_file_name("relayed.har");
    let proxy = Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .record(&har, genapi::RecordOptions::default())
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    const SECRET: &str = "whsec_c2VjcmV0LW9mLXRoZS1yZWNlaXZlcg==";
    let job = serde_json::json!({
        "prompt": "a heron",
        "webhook_url": "http://127.0.0.1:9/hook",
        "webhook_secret": SECRET,
    });
    let accepted: Value = post(&proxy, PATH, &job.to_string(), &[]).await.json().await.unwrap();
    mock.advance(Duration::from_secs(600));
    // With a webhook, the acceptance names the task alone: polled by id.
    let id = accepted["id"].as_str().unwrap().to_string();
    let poll: Value = http()
        .get(format!("{}/v1/get_result?id={id}", proxy.base_url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let sample = poll["result"]["sample"].as_str().unwrap().to_string();
    let image = http().get(&sample).send().await.unwrap().bytes().await.unwrap();
    assert!(!image.is_empty());
    proxy.stop().await;

    let text = std::fs::read_to_string(&har).unwrap();
    let recorded: Value = serde_json::from_str(&text).unwrap();
    let operations: Vec<&str> = recorded["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            entry["_genapi"]["operation"]
                .as_str()
                .or(entry["comment"].as_str())
                .unwrap_or_default()
        })
        .collect();
    assert!(
        text.contains("gen_2_pro") && text.contains("get_result") && text.contains("download"),
        "{operations:?}"
    );
    assert!(!text.contains(mock.key()), "the key");
    assert!(!text.contains("c2VjcmV0LW9mLXRoZS1yZWNlaXZlcg"), "the webhook's secret");
    let signature = sample.split("signature=").nth(1).unwrap().split('&').next().unwrap();
    assert!(!text.contains(signature), "the result's signature");
    assert!(
        text.contains(&format!("results/{id}")),
        "the task's id is no secret: kept in its result's path"
    );
}
