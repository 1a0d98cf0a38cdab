//! The mock stands up to a hostile client: claimed image sizes are not
//! trusted, control routes need the key and sane values, its state stays
//! bounded, it listens on loopback only unless allowed, and it delivers
//! webhooks (and their secrets) only where the test said. Over real HTTP on
//! loopback.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use genapi_mock::{MockConfig, MockService, LOGGED_BODY_LIMIT};
use serde_json::{json, Value};

use crate::common;

async fn start(config: MockConfig) -> MockService {
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

async fn post(mock: &MockService, path: &str, key: Option<&str>, body: Value) -> (u16, Value) {
    let mut request = common::http().post(format!("{}{path}", mock.base_url())).json(&body);
    if let Some(key) = key {
        request = request.header("x-key", key);
    }
    let response = request.send().await.unwrap();
    (response.status().as_u16(), response.json().await.unwrap_or(Value::Null))
}

async fn poll(mock: &MockService, answer: &Value) -> Value {
    common::http()
        .get(answer["polling_url"].as_str().unwrap())
        .header("x-key", mock.key())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_claimed_giant_image_does_not_make_a_giant_output() {
    let mock = start(MockConfig::default().default_duration(Duration::from_millis(1))).await;
    let giant = common::b64(&common::png_header(200_000, 200_000));
    let (status, answer) = post(
        &mock,
        "/v1/gen-2-pro",
        Some(mock.key()),
        json!({"prompt": "edit", "input_image": giant}),
    )
    .await;
    assert_eq!(status, 200, "{answer}");
    mock.advance(Duration::from_secs(1));
    let result = poll(&mock, &answer).await;
    let image = common::http()
        .get(result["result"]["sample"].as_str().unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(image.status(), 200);
    let (w, h) = crate::common::dimensions(&image.bytes().await.unwrap()).unwrap();
    assert!(u64::from(w) * u64::from(h) <= 4 * 1024 * 1024, "{w}x{h}");
    assert!((w as f64 / h as f64 - 1.0).abs() < 0.01, "shape kept: {w}x{h}");
    // Still serving.
    assert_eq!(
        post(&mock, "/v1/gen-2-pro", Some(mock.key()), json!({"prompt": "after"}))
            .await
            .0,
        200
    );
}

#[tokio::test(start_paused = true)]
async fn an_expand_beyond_the_output_bound_is_refused_with_the_bound() {
    let mock = start(MockConfig::default().default_duration(Duration::from_millis(1))).await;
    let key = Some(mock.key());
    let expand = |w: u32, h: u32, sides: Value| {
        let mut body = json!({"image": common::b64(&common::png_header(w, h))});
        body.as_object_mut().unwrap().extend(sides.as_object().unwrap().clone());
        body
    };
    // Each side within its 0..2048, the result 6144 x 6144 (36 MP).
    let giant = expand(
        2048,
        2048,
        json!({"top": 2048, "bottom": 2048, "left": 2048, "right": 2048}),
    );
    let (status, answer) = post(&mock, "/v1/gen-pro-1.0-expand", key, giant).await;
    assert_eq!(status, 422, "{answer}");
    let error = &answer["detail"][0];
    assert_eq!(error["loc"], json!(["body"]), "{answer}");
    assert_eq!(error["type"], "value_error", "{answer}");
    let message = error["msg"].as_str().unwrap();
    assert!(
        message.contains("6144 x 6144") && message.contains("4194304") && message.contains("4 MP"),
        "{message}"
    );
    assert_eq!(mock.stats().tasks_kept, 0, "no task was created");
    // A claimed giant image with nothing added is as far beyond it.
    let claimed = expand(200_000, 200_000, json!({}));
    assert_eq!(post(&mock, "/v1/gen-pro-1.0-expand", key, claimed).await.0, 422);
    // Up to the bound, the expand is accepted: 2048 x 2048 exactly, and 1024 x 1024 plus 1024 on the left.
    for within in [expand(2048, 2048, json!({})), expand(1024, 1024, json!({"left": 1024}))] {
        let (status, answer) = post(&mock, "/v1/gen-pro-1.0-expand", key, within).await;
        assert_eq!(status, 200, "{answer}");
    }
}

#[tokio::test(start_paused = true)]
async fn control_routes_need_the_key_and_sane_values() {
    let mock = MockService::start().await.unwrap();
    let fault = json!({"path_prefix": "/v1/gen-2-pro", "status": 500});
    assert_eq!(post(&mock, "/mock/faults", None, fault.clone()).await.0, 403);
    assert_eq!(post(&mock, "/mock/faults", Some("guess"), fault.clone()).await.0, 403);
    assert_eq!(
        post(&mock, "/mock/clock/advance", None, json!({"seconds": 601}))
            .await
            .0,
        403
    );
    let stats = common::http()
        .get(format!("{}/mock/stats", mock.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(stats.status(), 403);
    assert_eq!(
        post(&mock, "/v1/gen-2-pro", Some(mock.key()), json!({"prompt": "x"}))
            .await
            .0,
        200,
        "the keyless fault was not installed"
    );

    let key = Some(mock.key());
    for bad in [
        json!({"seconds": 1.8e19}),
        json!({"seconds": -1}),
        json!({"seconds": "soon"}),
    ] {
        assert_eq!(
            post(&mock, "/mock/clock/advance", key, bad.clone()).await.0,
            400,
            "{bad}"
        );
    }
    for bad in [
        json!({"path_prefix": "/v1", "status": 1000}),
        json!({"path_prefix": "/v1", "status": 99}),
        json!({"path_prefix": "/v1", "delay_ms": 86_400_000u64}),
        json!({"path_prefix": "/v1", "status": 500, "times": 0}),
        json!({"path_prefix": "/v1", "status": 503, "retry_after": "1\r\nx-evil: 1"}),
        json!({"path_prefix": "/v1", "redirect": "not a url"}),
    ] {
        assert_eq!(post(&mock, "/mock/faults", key, bad.clone()).await.0, 400, "{bad}");
    }
    // The largest sane advance, and a saturating one from Rust: later requests still work.
    assert_eq!(
        post(&mock, "/mock/clock/advance", key, json!({"seconds": 3.0e9}))
            .await
            .0,
        200
    );
    mock.advance(Duration::MAX);
    let (status, answer) = post(&mock, "/v1/gen-2-pro", key, json!({"prompt": "later"})).await;
    assert_eq!(status, 200);
    assert_eq!(poll(&mock, &answer).await["status"], "Pending");
    // A fault on every path never locks the test out of the control routes.
    assert_eq!(
        post(
            &mock,
            "/mock/faults",
            key,
            json!({"path_prefix": "/", "status": 500, "times": 100})
        )
        .await
        .0,
        200
    );
    assert_eq!(
        post(&mock, "/mock/clock/advance", key, json!({"seconds": 1})).await.0,
        200
    );
}

#[tokio::test(start_paused = true)]
async fn a_non_loopback_address_is_refused_unless_allowed() {
    let error = MockService::start_with(MockConfig::default(), "0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(error.to_string().contains("loopback"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn the_request_log_is_a_ring_and_keeps_no_whole_bodies() {
    let mock = start(MockConfig::default().request_log_capacity(10)).await;
    let big = "x".repeat(1024 * 1024);
    for n in 0..30 {
        // Read (the key is right), refused (no such path): the body is still not kept whole.
        let (status, _) = post(
            &mock,
            "/v1/no-such-model",
            Some(mock.key()),
            json!({"prompt": big, "n": n}),
        )
        .await;
        assert_eq!(status, 404);
    }
    let log = mock.requests();
    assert_eq!(log.len(), 10);
    assert!(log[9].body.starts_with("{\"n\":29,"), "the newest kept");
    assert!(log.iter().all(|r| r.body.len() <= LOGGED_BODY_LIMIT + 64));
    assert_eq!(mock.count("POST", "/v1/no-such-model"), 10);
}

#[tokio::test(start_paused = true)]
async fn the_request_log_stays_within_its_byte_budget() {
    // The defaults: 1,024 entries, 16 MiB.
    let mock = MockService::start().await.unwrap();
    let filler = "h".repeat(64 * 1024);
    let body = json!({"prompt": "x".repeat(20 * 1024)});
    for n in 0..300 {
        let response = common::http()
            .post(format!("{}/v1/no-such-model", mock.base_url()))
            .header("x-key", mock.key())
            .header("x-filler", &filler)
            .header("x-n", n.to_string())
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 404);
    }
    let log = mock.requests();
    let held: usize = log
        .iter()
        .map(|r| r.body.len() + r.path.len() + r.headers.iter().map(|(n, v)| n.len() + v.len()).sum::<usize>())
        .sum();
    assert!(held <= 16 << 20, "the log holds {held} bytes of {} requests", log.len());
    assert!(log.len() < 300, "the oldest were dropped");
    assert_eq!(log.last().unwrap().header("x-n"), Some("299"), "the newest are kept");
}

#[tokio::test]
async fn a_request_without_the_key_is_answered_before_its_body_is_read() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mock = MockService::start().await.unwrap();
    let address = mock.base_url().trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    // 100 MiB announced and none of it sent: the answer must not wait for it.
    stream
        .write_all(
            b"POST /v1/gen-2-pro HTTP/1.1\r\nhost: mock\r\ncontent-type: application/json\r\n\
              content-length: 104857600\r\n\r\n",
        )
        .await
        .unwrap();
    let mut head = [0u8; 12];
    tokio::time::timeout(Duration::from_secs(30), stream.read_exact(&mut head))
        .await
        .expect("answered without waiting for the body")
        .unwrap();
    assert_eq!(&head, b"HTTP/1.1 403");
    let logged = mock.requests();
    assert_eq!(logged.len(), 1);
    assert_eq!(logged[0].body, "", "nothing of the body was read");
}

#[tokio::test(start_paused = true)]
async fn finished_tasks_are_forgotten_once_their_results_expire_and_active_tasks_are_counted() {
    let mock = start(
        MockConfig::default()
            .max_active_tasks(2)
            .default_duration(Duration::from_secs(60)),
    )
    .await;
    let key = Some(mock.key());
    let first = post(&mock, "/v1/gen-2-pro", key, json!({"prompt": "a"})).await.1;
    post(&mock, "/v1/gen-2-pro", key, json!({"prompt": "b"})).await;
    assert_eq!(post(&mock, "/v1/gen-2-pro", key, json!({"prompt": "c"})).await.0, 429);
    assert_eq!(mock.stats().active_tasks, 2);
    mock.advance(Duration::from_secs(61));
    assert_eq!(mock.stats().active_tasks, 0);
    assert_eq!(post(&mock, "/v1/gen-2-pro", key, json!({"prompt": "c"})).await.0, 200);
    // Issue a result address, then let everything expire.
    let ready = poll(&mock, &first).await;
    assert_eq!(ready["status"], "Ready");
    assert_eq!(mock.stats().tasks_kept, 3);
    mock.advance(Duration::from_secs(25 * 60));
    assert_eq!(
        mock.stats().tasks_kept,
        0,
        "pruned after task_ttl and the result's expiry"
    );
    assert_eq!(poll(&mock, &first).await["status"], "Task not found");
}

#[tokio::test(start_paused = true)]
async fn webhooks_go_only_to_configured_addresses() {
    // A local listener the test did not configure: it must never see the secret.
    let hits = Arc::new(AtomicUsize::new(0));
    let seen = hits.clone();
    let app = axum::Router::new().fallback(move || {
        let seen = seen.clone();
        async move {
            seen.fetch_add(1, Ordering::SeqCst);
            "ok"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    let mock = start(MockConfig::default().default_duration(Duration::from_millis(1))).await;
    let (status, _) = post(
        &mock,
        "/v1/gen-2-pro",
        Some(mock.key()),
        json!({"prompt": "p", "webhook_url": url, "webhook_secret": "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"}),
    )
    .await;
    assert_eq!(status, 200);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while mock.deliveries().is_empty() && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let delivery = &mock.deliveries()[0];
    assert_eq!((delivery.attempts, delivery.delivered), (0, false), "{delivery:?}");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    assert_eq!(mock.stats().webhooks_refused, 1);
}

#[tokio::test(start_paused = true)]
async fn a_huge_prompt_is_not_kept_whole_for_the_tasks_lifetime() {
    let mock = start(MockConfig::default().default_duration(Duration::ZERO)).await;
    let prompt = "p".repeat(4 << 20);
    let key = mock.key().to_string();
    let (status, answer) = post(&mock, "/v1/gen-2-pro", Some(&key), json!({ "prompt": prompt })).await;
    assert_eq!(status, 200);
    let result = poll(&mock, &answer).await;
    let kept = result["result"]["prompt"].as_str().unwrap();
    assert!(
        kept.len() <= 4096,
        "the task keeps {} characters of its prompt",
        kept.len()
    );
}
