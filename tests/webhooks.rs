//! Webhook verification: the published Standard Webhooks vector, every way a
//! notification must be rejected, replay protection, and waiting by webhook.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use genapi::webhook::{sign, Rejection, ReplayGuard, Scheme, Verifier};
use genapi::{TaskStatus, WebhookSecret};
use http::{HeaderMap, HeaderValue};

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const ID: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
const TIMESTAMP: i64 = 1649367553;
const BODY: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
const SIGNATURE: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";

fn at(seconds: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds as u64)
}

fn verifier() -> Verifier {
    Verifier::new(SECRET).clock(|| at(TIMESTAMP))
}

fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in pairs {
        map.insert(*name, HeaderValue::from_str(value).unwrap());
    }
    map
}

fn signed(signature: &str) -> HeaderMap {
    let timestamp = TIMESTAMP.to_string();
    headers(&[
        ("webhook-id", ID),
        ("webhook-timestamp", &timestamp),
        ("webhook-signature", signature),
    ])
}

fn authenticate(verifier: &Verifier, headers: &HeaderMap, body: &[u8]) -> Result<Scheme, Rejection> {
    verifier
        .authenticate_with(|n| headers.get(n).and_then(|v| v.to_str().ok()), body)
        .map(|(scheme, _)| scheme)
}

#[test]
fn the_published_vector_verifies() {
    assert_eq!(
        sign(&WebhookSecret::new(SECRET), ID, TIMESTAMP, BODY).unwrap(),
        SIGNATURE
    );
    assert_eq!(
        authenticate(&verifier(), &signed(SIGNATURE), BODY),
        Ok(Scheme::StandardWebhooks)
    );
    // One good signature among several is enough; unknown versions are skipped.
    let several = format!("v2,abc v1,AAAA {SIGNATURE}");
    assert_eq!(
        authenticate(&verifier(), &signed(&several), BODY),
        Ok(Scheme::StandardWebhooks)
    );
}

#[test]
fn forged_signatures_are_rejected() {
    let reject = |signature: &str| authenticate(&verifier(), &signed(signature), BODY);
    assert_eq!(reject("v1,"), Err(Rejection::BadSignature), "the bare-prefix bypass");
    assert_eq!(
        reject(&SIGNATURE[..SIGNATURE.len() - 8]),
        Err(Rejection::BadSignature),
        "truncated"
    );
    let engine = base64::engine::general_purpose::STANDARD;
    let mut raw = engine.decode(&SIGNATURE[3..]).unwrap();
    raw[5] ^= 0x01;
    assert_eq!(
        reject(&format!("v1,{}", engine.encode(&raw))),
        Err(Rejection::BadSignature),
        "bit-flipped"
    );
    assert_eq!(reject("v1,not base64!"), Err(Rejection::BadSignature));
    let other = Verifier::new("whsec_b3RoZXItc2VjcmV0LW9mLWF0LWxlYXN0LTE2").clock(|| at(TIMESTAMP));
    assert_eq!(
        authenticate(&other, &signed(SIGNATURE), BODY),
        Err(Rejection::BadSignature),
        "wrong secret"
    );
    assert_eq!(
        authenticate(&verifier(), &signed(SIGNATURE), b"{\"email\":\"x\"}"),
        Err(Rejection::BadSignature),
        "other body"
    );
}

#[test]
fn stale_future_and_malformed_timestamps_are_rejected() {
    let stale = Verifier::new(SECRET).clock(|| at(TIMESTAMP + 301));
    assert_eq!(
        authenticate(&stale, &signed(SIGNATURE), BODY),
        Err(Rejection::Stale(301))
    );
    let future = Verifier::new(SECRET).clock(|| at(TIMESTAMP - 301));
    assert_eq!(
        authenticate(&future, &signed(SIGNATURE), BODY),
        Err(Rejection::Future(301))
    );
    let within = Verifier::new(SECRET).clock(|| at(TIMESTAMP + 300));
    assert!(authenticate(&within, &signed(SIGNATURE), BODY).is_ok());
    let bad = headers(&[
        ("webhook-id", ID),
        ("webhook-timestamp", "yesterday"),
        ("webhook-signature", SIGNATURE),
    ]);
    assert_eq!(authenticate(&verifier(), &bad, BODY), Err(Rejection::BadTimestamp));
}

#[test]
fn missing_headers_and_oversize_bodies_are_rejected() {
    let timestamp = TIMESTAMP.to_string();
    let no_id = headers(&[("webhook-timestamp", &timestamp), ("webhook-signature", SIGNATURE)]);
    assert_eq!(
        authenticate(&verifier(), &no_id, BODY),
        Err(Rejection::MissingHeader("webhook-id"))
    );
    let no_time = headers(&[("webhook-id", ID), ("webhook-signature", SIGNATURE)]);
    assert_eq!(
        authenticate(&verifier(), &no_time, BODY),
        Err(Rejection::MissingHeader("webhook-timestamp"))
    );
    assert_eq!(
        authenticate(&verifier(), &HeaderMap::new(), BODY),
        Err(Rejection::Unsigned)
    );
    let small = verifier().max_body(16);
    assert_eq!(
        authenticate(&small, &signed(SIGNATURE), BODY),
        Err(Rejection::TooLarge(BODY.len()))
    );
    let broken = Verifier::new("whsec_%%%").clock(|| at(TIMESTAMP));
    assert_eq!(
        authenticate(&broken, &signed(SIGNATURE), BODY),
        Err(Rejection::InvalidSecret)
    );
}

#[test]
fn the_echo_scheme_matches_the_secret_and_never_overrides_a_bad_signature() {
    let body = br#"{"task_id":"t-1","status":"SUCCESS","result":{"sample":"https://cdn/x.jpg"}}"#;
    let event = Verifier::new("plain-secret")
        .verify(&headers(&[("x-webhook-secret", "plain-secret")]), body)
        .unwrap();
    assert_eq!(
        (event.scheme, event.task_id.as_str(), event.status.clone()),
        (Scheme::SharedSecret, "t-1", TaskStatus::Ready)
    );
    assert_eq!(event.sample(), Some("https://cdn/x.jpg"));
    let wrong = Verifier::new("plain-secret").verify(&headers(&[("x-webhook-secret", "guess")]), body);
    assert_eq!(wrong, Err(Rejection::BadSecret));
    // A right echo beside a wrong signature: the signature decides.
    let mut both = signed("v1,AAAA");
    both.insert("x-webhook-secret", HeaderValue::from_static(SECRET));
    assert_eq!(authenticate(&verifier(), &both, BODY), Err(Rejection::BadSignature));
}

#[test]
fn statuses_are_normalised_and_ids_read_from_either_field() {
    let verifier = Verifier::new("s");
    let event = |body: &str| {
        verifier
            .verify(&headers(&[("x-webhook-secret", "s")]), body.as_bytes())
            .unwrap()
    };
    assert_eq!(
        event(r#"{"id":"a","status":"FAILED","error":"boom"}"#).status,
        TaskStatus::Error
    );
    assert_eq!(
        event(r#"{"id":"a","status":"FAILED","error":"boom"}"#).details,
        Some(serde_json::json!("boom"))
    );
    assert_eq!(event(r#"{"id":"a","status":"Ready"}"#).status, TaskStatus::Ready);
    assert_eq!(
        event(r#"{"id":"a","status":"Content Moderated"}"#).status,
        TaskStatus::ContentModerated
    );
    assert_eq!(
        event(r#"{"id":"a","status":"Teleporting"}"#).status,
        TaskStatus::Other("Teleporting".into())
    );
    assert_eq!(
        event(r#"{"task_id":"b","id":"ignored","status":"SUCCESS"}"#).task_id,
        "b"
    );
    assert!(matches!(
        verifier.verify(&headers(&[("x-webhook-secret", "s")]), b"[1]"),
        Err(Rejection::Malformed(_))
    ));
}

#[test]
fn a_replayed_notification_is_recognised() {
    let guard = ReplayGuard::new(Duration::from_secs(60), 2);
    let verifier = Verifier::new("s");
    let event = verifier
        .verify(
            &headers(&[("x-webhook-secret", "s")]),
            br#"{"id":"a","status":"SUCCESS"}"#,
        )
        .unwrap();
    assert!(guard.first_time_event(&event));
    assert!(!guard.first_time_event(&event), "the same notification again");
    assert!(guard.first_time("b") && guard.first_time("c"));
    assert!(guard.first_time_event(&event), "evicted once capacity was reached");
}

proptest::proptest! {
    #[test]
    fn no_header_or_body_makes_verification_panic(
        id in ".{0,40}", timestamp in ".{0,20}", signature in ".{0,120}", echo in proptest::option::of(".{0,40}"),
        body in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
    ) {
        let verifier = Verifier::new(SECRET).clock(|| at(TIMESTAMP));
        let lookup = |name: &str| match name {
            "webhook-id" => Some(id.as_str()),
            "webhook-timestamp" => Some(timestamp.as_str()),
            "webhook-signature" if !signature.is_empty() => Some(signature.as_str()),
            "x-webhook-secret" => echo.as_deref(),
            _ => None,
        };
        let _ = verifier.verify_with(lookup, &body);
    }
}

#[cfg(feature = "mock")]
mod end_to_end {
    use std::sync::Arc;
    use std::time::Duration;

    use axum::body::Bytes;
    use axum::http::{HeaderMap, StatusCode};
    use genapi::api::types;
    use genapi::mock::{MockConfig, MockService};
    use genapi::webhook::{Inbox, Scheme, Verifier};
    use genapi::WebhookSecret;

    const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

    /// A receiver on loopback that verifies and forwards to the inbox; it
    /// refuses the first `refuse_first` deliveries with 500.
    async fn receiver(inbox: Arc<Inbox>, refuse_first: usize) -> (String, Arc<std::sync::Mutex<Vec<Scheme>>>) {
        let schemes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = schemes.clone();
        let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let verifier = Verifier::new(SECRET);
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |headers: HeaderMap, body: Bytes| {
                let (inbox, seen, refused, verifier) = (inbox.clone(), seen.clone(), refused.clone(), verifier.clone());
                async move {
                    if refused.fetch_add(1, std::sync::atomic::Ordering::SeqCst) < refuse_first {
                        return StatusCode::INTERNAL_SERVER_ERROR;
                    }
                    match verifier.verify(&headers, &body) {
                        Ok(event) => {
                            seen.lock().unwrap().push(event.scheme);
                            inbox.deliver(event);
                            StatusCode::NO_CONTENT
                        }
                        Err(_) => StatusCode::UNAUTHORIZED,
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{address}/hook"), schemes)
    }

    /// A mock that may deliver webhooks to these addresses.
    async fn mock_delivering_to(urls: &[&str]) -> MockService {
        let config = urls
            .iter()
            .fold(MockConfig::default(), |config, url| config.webhook_target(url));
        MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap()
    }

    fn request(url: &str) -> types::builder::Gen2ProRequest {
        types::Gen2ProRequest::builder()
            .prompt("a lighthouse")
            .webhook_url(types::WebhookUrl::try_from(url).unwrap())
            .webhook_secret(WebhookSecret::new(SECRET))
    }

    #[tokio::test]
    async fn the_mock_notifies_the_receiver_and_the_task_finishes_without_polling() {
        let inbox = Inbox::new();
        let (url, schemes) = receiver(inbox.clone(), 1).await;
        let mock = mock_delivering_to(&[&url]).await;
        let task = mock.client().unwrap().submit(request(&url)).await.unwrap();
        let output = inbox.wait(task, Duration::from_secs(20)).await.unwrap();
        assert!(!output.bytes().await.unwrap().is_empty());
        assert_eq!(mock.count("GET", "/v1/get_result"), 0, "zero polls");
        assert_eq!(
            *schemes.lock().unwrap(),
            [Scheme::StandardWebhooks],
            "signed, and verified by signature"
        );
        let delivery = &mock.deliveries()[0];
        assert!(
            delivery.delivered && delivery.attempts == 2,
            "retried after a 500: {delivery:?}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_receiver_falls_back_to_polling() {
        let mock = MockService::start().await.unwrap();
        let task = mock
            .client()
            .unwrap()
            .submit(request("http://127.0.0.1:9/hook"))
            .await
            .unwrap();
        let output = Inbox::new().wait(task, Duration::from_millis(500)).await.unwrap();
        assert!(!output.sample.is_empty());
        assert!(mock.count("GET", "/v1/get_result") >= 1);
    }

    #[tokio::test]
    async fn the_mock_never_follows_a_redirect_nor_delivers_off_loopback() {
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(|| async {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [("location", "http://127.0.0.1:9/elsewhere")],
                )
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/hook", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        // Even a listed remote address is refused unless remote deliveries are allowed.
        let mock = mock_delivering_to(&[&url, "http://192.0.2.1/hook"]).await;
        let client = mock.client().unwrap();
        client.submit(request(&url)).await.unwrap().wait().await.unwrap();
        client
            .submit(request("http://192.0.2.1/hook"))
            .await
            .unwrap()
            .wait()
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while mock.deliveries().len() < 2 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let deliveries = mock.deliveries();
        let redirected = deliveries.iter().find(|d| d.url == url).expect("attempted");
        assert!(
            !redirected.delivered && redirected.last_status == Some(307),
            "{redirected:?}"
        );
        let remote = deliveries
            .iter()
            .find(|d| d.url.contains("192.0.2.1"))
            .expect("recorded");
        assert_eq!(remote.attempts, 0, "never sent off loopback");
    }

    #[tokio::test]
    async fn a_failure_notification_is_the_typed_error() {
        let inbox = Inbox::new();
        let (url, _) = receiver(inbox.clone(), 0).await;
        let mock = mock_delivering_to(&[&url]).await;
        let task = mock
            .client()
            .unwrap()
            .submit(request(&url).prompt("[mock:error]"))
            .await
            .unwrap();
        let error = inbox.wait(task, Duration::from_secs(20)).await.unwrap_err();
        assert!(matches!(error, genapi::Error::TaskFailed { .. }), "{error}");
        assert_eq!(mock.count("GET", "/v1/get_result"), 0);
    }
}
