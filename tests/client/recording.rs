//! Recording (`ClientBuilder::record`): every attempt of every exchange is
//! an entry of a HAR file, valid after each one, without secrets or image
//! bytes; a recording of the mock, which follows the document, shows no
//! drift when `cargo xtask drift` reads it.

use std::time::Duration;

use genapi::api::types;
use genapi::{RecordOptions, RetryPolicy};
use genapi_mock::{Fault, MockConfig, MockService};
use serde_json::Value;

use crate::common::{self, Dir, LogCapture};

fn read(path: &std::path::Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap();
    xtask::drift::read("recording", &text).unwrap()
}

fn entries(har: &Value) -> &Vec<Value> {
    har["log"]["entries"].as_array().unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_recording_of_every_operation_against_the_mock_has_no_drift() {
    let dir = Dir::new("record-every-operation");
    let path = dir.join("every.har");
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().record(&path).build().unwrap();
    let doc = common::document();
    let catalog = genapi::validate::Document::embedded().catalog();
    for model in catalog.models() {
        let schema = model.operation.request_schema.as_deref().unwrap();
        let body = common::body(&doc, schema, false);
        let task = client
            .submit_raw(&model.operation.path, body)
            .await
            .unwrap_or_else(|e| panic!("{}: {e}", model.name));
        task.wait().await.unwrap().bytes().await.unwrap();
    }
    // An answer of 422, which the document declares.
    client
        .submit_raw("/v1/gen-2-pro", serde_json::json!({}))
        .await
        .unwrap_err();

    let har = read(&path);
    let operations: std::collections::BTreeSet<&str> = entries(&har)
        .iter()
        .filter_map(|e| e["_genapi"]["operation"].as_str())
        .collect();
    for model in catalog.models() {
        assert!(
            operations.contains(model.operation.id.as_str()),
            "{} recorded",
            model.name
        );
    }
    assert!(operations.contains("get_result") && operations.contains("download"));
    // Polling addresses are kept whole: a task id is no secret.
    for entry in entries(&har)
        .iter()
        .filter(|e| e["_genapi"]["operation"] == "get_result")
    {
        let url = entry["request"]["url"].as_str().unwrap();
        assert!(url.contains("/v1/get_result?id="), "{url}");
    }
    let report = xtask::drift::check(&doc, &[har]);
    assert!(!report.drifted(), "{}", report.render());
    assert_eq!(report.unanswered, 0);
}

/// The key, a webhook secret and the signed address of a result, planted in
/// a run at each log level, are in neither the recording nor the logs.
#[tokio::test(start_paused = true)]
async fn the_canaries_stay_out_of_the_recording_at_every_log_level() {
    const KEY: &str = "canary-key-4d1e77";
    const SECRET: &str = "canary-webhook-secret-90ab";
    let dir = Dir::new("record-canary");
    for level in [
        tracing::Level::ERROR,
        tracing::Level::WARN,
        tracing::Level::INFO,
        tracing::Level::DEBUG,
        tracing::Level::TRACE,
    ] {
        let capture = LogCapture::default();
        let writer = capture.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(level)
            .with_writer(move || writer.clone())
            .finish();
        let _guard = common::log_into(subscriber);
        let path = dir.join(&format!("canary-{level}.har"));
        let mock = MockService::start_with(MockConfig::default().key(KEY), "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let client = mock
            .client_builder()
            .retry_policy(RetryPolicy::default().initial_backoff(Duration::from_millis(1)))
            .record(&path)
            .build()
            .unwrap();
        let request = types::Gen2ProRequest::builder()
            .prompt("a canary")
            .webhook_url(types::WebhookUrl::try_from("http://127.0.0.1:9/hook").unwrap())
            .webhook_secret(genapi::WebhookSecret::new(SECRET));
        let task = client.submit(request).await.unwrap();
        // A poll that is retried, and one answered with the task.
        mock.inject(Fault::unavailable("/v1/get_result", 0));
        let output = task.wait().await.unwrap();
        let signed = output.sample().to_string();
        let signature = signed.split("signature=").nth(1).unwrap().to_string();
        assert!(signature.len() >= 16, "{signed}");
        output.bytes().await.unwrap();
        // An error answer, from a key that is refused.
        let refused = genapi::Client::builder()
            .api_key(format!("{KEY}-refused"))
            .base_url(mock.base_url())
            .record(dir.join(&format!("refused-{level}.har")))
            .build()
            .unwrap();
        refused
            .submit(types::Gen2ProRequest::builder().prompt("x"))
            .await
            .unwrap_err();

        let text = std::fs::read_to_string(&path).unwrap();
        let refused_text = std::fs::read_to_string(dir.join(&format!("refused-{level}.har"))).unwrap();
        let logs = capture.text();
        for (what, text) in [
            ("recording", &text),
            ("refused recording", &refused_text),
            ("logs", &logs),
        ] {
            assert!(!text.contains(KEY), "{level}: the key is in the {what}: {text}");
            assert!(!text.contains(SECRET), "{level}: the secret is in the {what}: {text}");
            assert!(
                !text.contains(&signature),
                "{level}: the signature is in the {what}: {text}"
            );
        }
        // What was redacted is still there as a place, so drift can be checked.
        let har = read(&path);
        let sent = &entries(&har)[0]["request"];
        let key_header = sent["headers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|h| h["name"] == "x-key")
            .unwrap();
        assert_eq!(key_header["value"], "[redacted]");
        let body: Value = serde_json::from_str(sent["postData"]["text"].as_str().unwrap()).unwrap();
        assert_eq!(body["webhook_secret"], "[redacted]");
        assert!(
            text.contains("signature=%5Bredacted%5D"),
            "the signed address keeps its shape"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn retries_are_entries_with_their_attempt_numbers() {
    let dir = Dir::new("record-retries");
    let path = dir.join("retries.har");
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().record(&path).build().unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("retried"))
        .await
        .unwrap();
    mock.inject(Fault::unavailable("/v1/get_result", 1).times(2));
    task.wait().await.unwrap();

    let har = read(&path);
    let polls: Vec<(u64, u64)> = entries(&har)
        .iter()
        .filter(|e| e["_genapi"]["operation"] == "get_result")
        .map(|e| {
            (
                e["_genapi"]["attempt"].as_u64().unwrap(),
                e["response"]["status"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(polls[..3], [(1, 503), (2, 503), (3, 200)], "{polls:?}");
    let report = xtask::drift::check(&common::document(), &[har]);
    let groups = report.groups();
    assert!(
        groups.iter().any(|g| g.first.place == "response 503" && g.count == 2),
        "a 503 is not in the document: {}",
        report.render()
    );
}

#[tokio::test(start_paused = true)]
async fn image_bytes_are_summarised_unless_kept() {
    let dir = Dir::new("record-images");
    let mock = MockService::start().await.unwrap();
    let png = common::PNG_1X1;
    for keep in [false, true] {
        let path = dir.join(&format!("images-{keep}.har"));
        let client = mock
            .client_builder()
            .record_with(&path, RecordOptions::default().keep_images(keep))
            .build()
            .unwrap();
        let request = types::GenKontextProRequest::builder().prompt("edit").input_image(png);
        let bytes = client.run(request).await.unwrap().bytes().await.unwrap();
        let har = read(&path);
        let all = entries(&har);
        let sent = all[0]["request"]["postData"]["text"].as_str().unwrap();
        let download = all.iter().find(|e| e["_genapi"]["operation"] == "download").unwrap();
        let content = &download["response"]["content"];
        let summary = content["comment"].as_str().unwrap();
        assert!(summary.starts_with("[image "), "{summary}");
        assert!(
            summary.contains(&format!("{} bytes, sha256:", bytes.len())),
            "{summary}"
        );
        assert_eq!(content["size"].as_u64(), Some(bytes.len() as u64));
        if keep {
            assert!(sent.contains(png), "{sent}");
            assert_eq!(content["encoding"], "base64");
        } else {
            assert!(!sent.contains(png), "{sent}");
            assert!(sent.contains("[image png 1x1, "), "{sent}");
            assert!(content["text"].is_null());
        }
    }
}

#[test]
fn a_recording_that_cannot_be_created_is_refused_when_the_client_is_built() {
    let error = genapi::Client::builder()
        .api_key("k")
        .base_url("http://127.0.0.1:9")
        .record("/nonexistent-directory/run.har")
        .build()
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("cannot write the recording /nonexistent-directory/run.har"),
        "{text}"
    );
}

/// An attempt that got no answer is an entry too: status 0, why, and its
/// attempt number; the drift check counts it apart.
#[tokio::test(start_paused = true)]
async fn attempts_without_an_answer_are_entries_with_the_reason() {
    let dir = Dir::new("record-no-answer");
    let path = dir.join("refused.har");
    // A port nothing listens on: every connection is refused.
    let refusing = genapi_test_common::RefusingPort::new();
    let address = format!("http://{}", refusing.address);
    let client = genapi::Client::builder()
        .api_key("k-no-answer")
        .base_url(&address)
        .retry_policy(
            RetryPolicy::default()
                .max_attempts(3)
                .initial_backoff(Duration::from_millis(1)),
        )
        .record(&path)
        .build()
        .unwrap();
    client
        .submit(types::Gen2ProRequest::builder().prompt("nobody"))
        .await
        .unwrap_err();

    let har = read(&path);
    let seen: Vec<(u64, u64)> = entries(&har)
        .iter()
        .map(|e| {
            (
                e["_genapi"]["attempt"].as_u64().unwrap(),
                e["response"]["status"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [(1, 0), (2, 0), (3, 0)],
        "a refused connection is retried, each attempt recorded"
    );
    let why = entries(&har)[0]["_genapi"]["error"].as_str().unwrap();
    assert!(!why.is_empty());
    let report = xtask::drift::check(&common::document(), &[har]);
    assert_eq!((report.unanswered, report.drifted()), (3, false));
}

/// A service that echoes nothing back, answers with a signed result behind a
/// user name, a password and a fragment, and a webhook secret that reads
/// like JSON: the recording stays valid HAR and holds none of them.
#[tokio::test]
async fn secrets_that_read_like_json_or_hide_in_addresses_stay_out_and_the_file_stays_har() {
    use common::hostile::{self, json};
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => json(200, serde_json::json!({"id": "t1", "polling_url": format!("{base}/v1/get_result?id=t1")})),
        _ => json(
            200,
            serde_json::json!({"id": "t1", "status": "Ready", "result": {
                "sample": format!("{}/r.png?sig=%22%3A%7B%22#frag-token=FRAGSECRET", base.replace("http://", "http://user:PASSWORDINURL@"))
            }}),
        ),
    })
    .await;
    let dir = Dir::new("record-hostile-secrets");
    let path = dir.join("run.har");
    let client = service.client_builder().record(&path).build().unwrap();
    let request = types::Gen2ProRequest::builder()
        .prompt("a cat")
        .webhook_url("https://hook.example.com/x?token=HOOKTOKEN55")
        .webhook_secret(genapi::WebhookSecret::new("status"));
    let task = client.submit(request).await.unwrap();
    let _ = task.wait().await;
    let text = std::fs::read_to_string(&path).unwrap();
    let har = read(&path);
    assert!(!entries(&har).is_empty(), "still HAR: {text}");
    for secret in ["HOOKTOKEN55", "PASSWORDINURL", "FRAGSECRET", "%22%3A%7B%22"] {
        assert!(!text.contains(secret), "{secret} is in the recording: {text}");
    }
    // One writer per file, even one told to replace it.
    let replacing = genapi::RecordOptions::default().replace_existing(true);
    let second = service
        .client_builder()
        .record_with(&path, replacing)
        .build()
        .unwrap_err();
    assert!(second.to_string().contains("another client"), "{second}");
}

/// An address the service quotes in its words (an input image it could not
/// fetch), with a password and a signature the client never sent, is kept
/// in the recording as the address rule shows it.
#[tokio::test(start_paused = true)]
async fn an_address_the_service_quotes_is_recorded_without_its_secrets() {
    use common::hostile::{self, json};
    let dir = Dir::new("record-quoted-address");
    let path = dir.join("quoted.har");
    let quoted = "could not fetch https://ana:correcthorse@files.example.com/in.png?X-Amz-Signature=SIGSECRET";
    let service = hostile::serve(move |_, _, _| {
        json(
            422,
            serde_json::json!({"detail": [{"loc": ["body", "input_image"], "msg": quoted, "type": "value_error"}]}),
        )
    })
    .await;
    let client = genapi::Client::builder()
        .api_key("k")
        .base_url(&service.base)
        .record(&path)
        .build()
        .unwrap();
    client
        .submit(types::Gen2ProRequest::builder().prompt("a fox"))
        .await
        .unwrap_err();
    drop(client);
    let har = std::fs::read_to_string(&path).unwrap();
    assert!(har.contains("files.example.com"), "{har}");
    assert!(!har.contains("correcthorse") && !har.contains("SIGSECRET"), "{har}");
}
