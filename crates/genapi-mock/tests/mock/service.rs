//! The mock as a user of it sees it: every operation answers success, 422 and
//! 403 over real HTTP; the request log; the standalone command.

use genapi::api::OPERATIONS;
use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;

#[tokio::test(start_paused = true)]
async fn every_operation_succeeds_rejects_invalid_bodies_and_refuses_a_missing_key() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let http = common::http();
    let doc = common::document();
    let checks = OPERATIONS.iter().filter(|op| op.method == "POST").map(|op| {
        let (client, http, doc, mock) = (&client, &http, &doc, &mock);
        async move {
            let schema = op.request_schema.unwrap();
            let url = format!("{}{}", mock.base_url(), op.path);

            let body = common::body(doc, schema, false);
            let output = client
                .submit_raw(op.path, body.clone())
                .await
                .unwrap()
                .wait()
                .await
                .unwrap();
            let bytes = output.bytes().await.unwrap();
            if op.path == "/v1/gen-3-video" {
                assert_eq!(&bytes[4..8], b"ftyp", "{}: output is an MP4 video", op.path);
            } else {
                assert!(
                    crate::common::dimensions(&bytes).is_some(),
                    "{}: output is an image",
                    op.path
                );
            }

            let invalid = http
                .post(&url)
                .header("x-key", mock.key())
                .json(&json!({"seed": "not a number"}))
                .send()
                .await
                .unwrap();
            assert_eq!(invalid.status(), 422, "{}", op.path);
            let detail: Value = invalid.json().await.unwrap();
            assert!(
                detail["detail"].as_array().is_some_and(|d| !d.is_empty()),
                "{}: {detail}",
                op.path
            );

            let forbidden = http.post(&url).json(&body).send().await.unwrap();
            assert_eq!(forbidden.status(), 403, "{}", op.path);
            assert!(forbidden.json::<Value>().await.unwrap()["detail"].is_string());
        }
    });
    futures::future::join_all(checks).await;
    let get = http
        .get(format!("{}/v1/get_result?id=x", mock.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(get.status(), 403, "polling needs the key too");
    let missing_id = http
        .get(format!("{}/v1/get_result", mock.base_url()))
        .header("x-key", mock.key())
        .send()
        .await
        .unwrap();
    assert_eq!(missing_id.status(), 422);
}

#[tokio::test(start_paused = true)]
async fn answers_say_they_come_from_the_mock_and_the_log_records_requests() {
    let mock = MockService::start().await.unwrap();
    let response = common::http()
        .post(format!("{}/v1/gen-2-pro", mock.base_url()))
        .header("X-KEY", mock.key())
        .json(&json!({"prompt": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "header names are case-insensitive");
    assert_eq!(response.headers()["x-genapi-mock"], "true");
    let body: Value = response.json().await.unwrap();
    assert!(uuid_like(body["id"].as_str().unwrap()));
    assert_eq!(
        body["polling_url"],
        format!(
            "{}/v1/get_result?id={}",
            mock.regional_url(),
            body["id"].as_str().unwrap()
        )
    );
    let logged = &mock.requests()[0];
    assert_eq!(
        (logged.method.as_str(), logged.path.as_str()),
        ("POST", "/v1/gen-2-pro")
    );
    assert_eq!(logged.body, r#"{"prompt":"hello"}"#);
    assert_eq!(logged.header("x-key"), Some("[redacted]"));
}

fn uuid_like(id: &str) -> bool {
    id.len() == 36 && id.chars().filter(|c| *c == '-').count() == 4
}

#[tokio::test(start_paused = true)]
async fn results_are_deterministic_for_seed_prompt_and_size() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let run = |seed: i128| {
        let client = client.clone();
        async move {
            let request = genapi::api::types::Gen2ProRequest::builder()
                .prompt("same")
                .seed(seed)
                .width(256)
                .height(256);
            client.run(request).await.unwrap().bytes().await.unwrap()
        }
    };
    assert_eq!(run(7).await, run(7).await);
    assert_ne!(run(7).await, run(8).await);
}

#[tokio::test(start_paused = true)]
async fn faults_and_the_clock_can_be_scripted_over_http() {
    let mock = MockService::start().await.unwrap();
    let http = common::http();
    let control = |path: &str, body: Value| {
        http.post(format!("{}{path}", mock.base_url()))
            .header("x-key", mock.key())
            .json(&body)
            .send()
    };
    let fault = json!({"path_prefix": "/v1/gen-2-pro", "method": "POST", "status": 503, "retry_after": 7, "times": 1});
    assert_eq!(control("/mock/faults", fault).await.unwrap().status(), 200);
    let refused = http
        .post(format!("{}/v1/gen-2-pro", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"prompt": "x"}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        (
            refused.status().as_u16(),
            refused.headers()["retry-after"].to_str().unwrap()
        ),
        (503, "7")
    );
    assert_eq!(
        control("/mock/faults", json!({"path_prefix": "/x"}))
            .await
            .unwrap()
            .status(),
        400,
        "a fault needs a kind"
    );

    let output = mock
        .client()
        .unwrap()
        .run(genapi::api::types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    assert_eq!(http.get(output.sample()).send().await.unwrap().status(), 200);
    assert_eq!(
        control("/mock/clock/advance", json!({"seconds": 601}))
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        http.get(output.sample()).send().await.unwrap().status(),
        403,
        "expired on the advanced clock"
    );
}

#[tokio::test]
async fn a_mock_started_again_on_its_port_has_the_same_addresses() {
    let port = common::free_ports(3);
    let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
    let first = MockService::start_with(MockConfig::default(), addr).await.unwrap();
    let origins = (
        first.base_url().to_string(),
        first.regional_url().to_string(),
        first.delivery_url().to_string(),
    );
    assert_eq!(origins.1, format!("http://127.0.0.1:{}", port + 1));
    assert_eq!(origins.2, format!("http://127.0.0.1:{}", port + 2));
    let trusted = first.trusted_origins();
    first.stop().await;
    let again = MockService::start_with(MockConfig::default(), addr).await.unwrap();
    assert_eq!(
        (
            again.base_url().to_string(),
            again.regional_url().to_string(),
            again.delivery_url().to_string()
        ),
        origins
    );
    assert_eq!(
        again.trusted_origins(),
        trusted,
        "a profile's trusted origins stay right"
    );
    again.stop().await;

    // The last ports have no two after them: refused, saying why.
    let top: std::net::SocketAddr = ([127, 0, 0, 1], 65535).into();
    let refused = MockService::start_with(MockConfig::default(), top).await.err().unwrap();
    assert!(refused.to_string().contains("two ports after"), "{refused}");
}
