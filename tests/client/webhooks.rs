//! Webhook verification: the published Standard Webhooks vector, every way a
//! notification must be rejected, secrets checked up front, bounded work per
//! request, bounded memory in long-lived receivers, and a notification
//! waking a task's wait for a poll, which alone decides.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use genapi::webhook::{
    sign, DuplicateGuard, Event, Inbox, Rejection, Scheme, SecretError, Verifier, MAX_HEADER_BYTES, MAX_SIGNATURES,
};
use genapi::{TaskStatus, WebhookSecret};
use http::{HeaderMap, HeaderValue};

const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
const ID: &str = "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk";
const TIMESTAMP: i64 = 1649367553;
const BODY: &[u8] = br#"{"email":"test@example.com","username":"test_user"}"#;
const SIGNATURE: &str = "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=";
/// A raw (not `whsec_`) secret: the echo scheme is accepted with it.
const RAW: &str = "a-raw-shared-secret";

fn at(seconds: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(seconds as u64)
}

fn verifier() -> Verifier {
    Verifier::new(SECRET).unwrap().wall_clock(|| at(TIMESTAMP))
}

fn raw_verifier() -> Verifier {
    Verifier::new(RAW).unwrap()
}

/// A clock that the test moves by hand.
fn manual_clock() -> (Arc<Mutex<Instant>>, impl Fn() -> Instant + Send + Sync + 'static) {
    let now = Arc::new(Mutex::new(Instant::now()));
    let reading = now.clone();
    (now, move || *reading.lock().unwrap())
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

#[test]
fn a_tolerance_too_large_for_the_clock_accepts_a_valid_signature() {
    let forever = Verifier::new(SECRET)
        .unwrap()
        .wall_clock(|| at(TIMESTAMP + 1_000_000))
        .tolerance(Duration::MAX);
    assert_eq!(
        authenticate(&forever, &signed(SIGNATURE), BODY),
        Ok(Scheme::StandardWebhooks)
    );
}

fn authenticate(verifier: &Verifier, headers: &HeaderMap, body: &[u8]) -> Result<Scheme, Rejection> {
    verifier
        .authenticate_lookup(|n| headers.get(n).and_then(|v| v.to_str().ok()), body)
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
    let other = Verifier::new("whsec_b3RoZXItc2VjcmV0LW9mLWF0LWxlYXN0LTE2")
        .unwrap()
        .wall_clock(|| at(TIMESTAMP));
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
    let stale = Verifier::new(SECRET).unwrap().wall_clock(|| at(TIMESTAMP + 301));
    assert_eq!(
        authenticate(&stale, &signed(SIGNATURE), BODY),
        Err(Rejection::Stale(301))
    );
    let future = Verifier::new(SECRET).unwrap().wall_clock(|| at(TIMESTAMP - 301));
    assert_eq!(
        authenticate(&future, &signed(SIGNATURE), BODY),
        Err(Rejection::Future(301))
    );
    let within = Verifier::new(SECRET).unwrap().wall_clock(|| at(TIMESTAMP + 300));
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
}

#[test]
fn the_echo_scheme_matches_the_secret_and_never_overrides_a_bad_signature() {
    let body = br#"{"task_id":"t-1","status":"SUCCESS","result":{"sample":"https://cdn/x.jpg"}}"#;
    let event = raw_verifier()
        .verify(&headers(&[("x-webhook-secret", RAW)]), body)
        .unwrap();
    assert_eq!(
        (event.scheme, event.task_id.as_str(), event.status.clone()),
        (Scheme::SharedSecret, "t-1", TaskStatus::Ready)
    );
    assert_eq!(event.sample(), Some("https://cdn/x.jpg"));
    let wrong = raw_verifier().verify(&headers(&[("x-webhook-secret", "guess")]), body);
    assert_eq!(wrong, Err(Rejection::BadSecret));
    // A right echo beside a wrong signature: the signature decides.
    let mut both = signed("v1,AAAA");
    both.insert("x-webhook-secret", HeaderValue::from_static(SECRET));
    assert_eq!(
        authenticate(&verifier().require_signature(false), &both, BODY),
        Err(Rejection::BadSignature)
    );
}

#[test]
fn statuses_are_normalised_and_ids_read_from_either_field() {
    let verifier = raw_verifier();
    let event = |body: &str| {
        verifier
            .verify(&headers(&[("x-webhook-secret", RAW)]), body.as_bytes())
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
        verifier.verify(&headers(&[("x-webhook-secret", RAW)]), b"[1]"),
        Err(Rejection::Malformed(_))
    ));
}

#[test]
fn a_replayed_notification_is_recognised() {
    let guard = DuplicateGuard::new(2, Duration::from_secs(60));
    let verifier = raw_verifier();
    let event = verifier
        .verify(
            &headers(&[("x-webhook-secret", RAW)]),
            br#"{"id":"a","status":"SUCCESS"}"#,
        )
        .unwrap();
    assert!(guard.first_time_event(&event));
    assert!(!guard.first_time_event(&event), "the same notification again");
    assert!(guard.first_time("b") && guard.first_time("c"));
    assert!(guard.first_time_event(&event), "evicted once capacity was reached");
}

#[test]
fn secrets_are_checked_when_the_verifier_is_built() {
    assert_eq!(Verifier::new("").unwrap_err(), SecretError::Empty, "an unset variable");
    assert_eq!(Verifier::new("whsec_").unwrap_err(), SecretError::Empty);
    assert_eq!(Verifier::new("s").unwrap_err(), SecretError::TooShort(1));
    assert_eq!(
        Verifier::new("whsec_c2hvcnQ=").unwrap_err(),
        SecretError::TooShort(5),
        "five bytes of key"
    );
    assert_eq!(Verifier::new("whsec_%%%").unwrap_err(), SecretError::InvalidBase64);
    assert!(Verifier::new("0123456789abcdef").is_ok(), "sixteen bytes are enough");
    // One whose echo would be refused as an oversize header.
    let long = "k".repeat(MAX_HEADER_BYTES + 1);
    assert_eq!(
        Verifier::new(long.as_str()).unwrap_err(),
        SecretError::TooLong(MAX_HEADER_BYTES + 1)
    );
    assert!(Verifier::new("k".repeat(MAX_HEADER_BYTES)).is_ok());
    // The sender side refuses the same secrets, so nothing signs with an empty key.
    assert_eq!(
        sign(&WebhookSecret::new("whsec_"), ID, TIMESTAMP, BODY),
        Err(SecretError::Empty)
    );
    // The error never shows the secret.
    let error = Verifier::new("whsec_not*base64*but-secret").unwrap_err();
    assert!(!format!("{error:?} {error}").contains("not*base64"));
}

#[test]
fn a_flood_of_signatures_or_oversize_headers_is_refused() {
    let timestamp = TIMESTAMP.to_string();
    let filler = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode([7u8; 32]));
    // The right signature after the allowed number of wrong ones is never reached.
    let mut flood = vec![filler.as_str(); MAX_SIGNATURES];
    flood.push(SIGNATURE);
    assert_eq!(
        authenticate(&verifier(), &signed(&flood.join(" ")), BODY),
        Err(Rejection::TooManySignatures)
    );
    // Within the bound, the right one among wrong ones still verifies.
    let mut rotation = vec![filler.as_str(); MAX_SIGNATURES - 1];
    rotation.push(SIGNATURE);
    assert_eq!(
        authenticate(&verifier(), &signed(&rotation.join(" ")), BODY),
        Ok(Scheme::StandardWebhooks)
    );
    let long = format!("{SIGNATURE}{}", " ".repeat(MAX_HEADER_BYTES));
    assert_eq!(
        authenticate(&verifier(), &signed(&long), BODY),
        Err(Rejection::HeaderTooLarge("webhook-signature"))
    );
    let long_id = "m".repeat(MAX_HEADER_BYTES + 1);
    let with_long_id = headers(&[
        ("webhook-id", &long_id),
        ("webhook-timestamp", &timestamp),
        ("webhook-signature", SIGNATURE),
    ]);
    assert_eq!(
        authenticate(&verifier(), &with_long_id, BODY),
        Err(Rejection::HeaderTooLarge("webhook-id"))
    );
    let long_echo = "e".repeat(MAX_HEADER_BYTES + 1);
    assert_eq!(
        authenticate(&raw_verifier(), &headers(&[("x-webhook-secret", &long_echo)]), BODY),
        Err(Rejection::HeaderTooLarge("x-webhook-secret"))
    );
}

#[test]
fn a_whsec_secret_requires_a_signature_unless_told_otherwise() {
    let body = br#"{"task_id":"t-1","status":"SUCCESS"}"#;
    let echo_only = headers(&[("x-webhook-secret", SECRET)]);
    // Whoever saw one delivery knows the echoed secret: refused by default.
    assert_eq!(verifier().verify(&echo_only, body), Err(Rejection::SignatureRequired));
    let lenient = verifier().require_signature(false);
    assert_eq!(
        lenient.verify(&echo_only, body).map(|e| e.scheme),
        Ok(Scheme::SharedSecret)
    );
    // A raw secret accepts the echo by default, and can require signatures too.
    let raw_echo = headers(&[("x-webhook-secret", RAW)]);
    assert_eq!(
        raw_verifier().verify(&raw_echo, body).map(|e| e.scheme),
        Ok(Scheme::SharedSecret)
    );
    assert_eq!(
        raw_verifier().require_signature(true).verify(&raw_echo, body),
        Err(Rejection::SignatureRequired)
    );
    // A signed delivery still verifies with signatures required.
    assert_eq!(
        authenticate(&verifier(), &signed(SIGNATURE), BODY),
        Ok(Scheme::StandardWebhooks)
    );
}

#[test]
fn the_replay_guard_forgets_by_age_and_holds_at_most_its_capacity() {
    let (now, clock) = manual_clock();
    let guard = DuplicateGuard::new(100, Duration::from_secs(60)).clock(clock);
    for i in 0..1_000 {
        assert!(guard.first_time(&format!("msg-{i}")));
    }
    assert_eq!(guard.len(), 100, "bounded by capacity");
    assert!(!guard.first_time("msg-999"), "recent keys are kept");
    assert!(guard.first_time("msg-0"), "the oldest went first");
    *now.lock().unwrap() += Duration::from_secs(59);
    assert!(!guard.first_time("msg-999"));
    *now.lock().unwrap() += Duration::from_secs(1);
    assert!(guard.is_empty(), "nothing kept past the ttl");
    assert!(guard.first_time("msg-999"));
}

fn final_event(task_id: &str) -> Event {
    let body = format!(r#"{{"task_id":"{task_id}","status":"SUCCESS"}}"#);
    raw_verifier()
        .verify(&headers(&[("x-webhook-secret", RAW)]), body.as_bytes())
        .unwrap()
}

#[test]
fn the_inbox_keeps_no_event_forever_for_a_task_nobody_waits_for() {
    let (now, clock) = manual_clock();
    let inbox = Inbox::with_limits(50, Duration::from_secs(600)).clock(clock);
    for i in 0..500 {
        inbox.deliver(final_event(&format!("task-{i}")));
    }
    assert_eq!(inbox.len(), 50, "bounded by capacity");
    let mut progress = final_event("task-in-progress");
    progress.status = TaskStatus::Pending;
    inbox.deliver(progress);
    assert_eq!(inbox.len(), 50, "only final events are kept");
    *now.lock().unwrap() += Duration::from_secs(600);
    assert!(inbox.is_empty(), "nothing kept past the maximum age");
    let default = Inbox::new();
    default.deliver(final_event("task-1"));
    assert_eq!(default.len(), 1);
    assert_eq!(
        (Inbox::DEFAULT_CAPACITY, Inbox::DEFAULT_MAX_AGE),
        (10_000, Duration::from_secs(3600))
    );
}

proptest::proptest! {
    #[test]
    fn no_header_or_body_makes_verification_panic(
        id in ".{0,40}", timestamp in ".{0,20}", signature in ".{0,120}", echo in proptest::option::of(".{0,40}"),
        body in proptest::collection::vec(proptest::num::u8::ANY, 0..300),
    ) {
        let verifier = Verifier::new(SECRET).unwrap().wall_clock(|| at(TIMESTAMP));
        let lookup = |name: &str| match name {
            "webhook-id" => Some(id.as_str()),
            "webhook-timestamp" => Some(timestamp.as_str()),
            "webhook-signature" if !signature.is_empty() => Some(signature.as_str()),
            "x-webhook-secret" => echo.as_deref(),
            _ => None,
        };
        let _ = verifier.verify_lookup(lookup, &body);
    }

    /// Random headers never authenticate, whatever scheme they try: random
    /// signatures (well-formed or not) within the time window, random echoed
    /// secrets, with signatures required or not.
    #[test]
    fn random_headers_never_authenticate(
        id in "[a-zA-Z0-9_]{1,40}", skew in -300i64..=300,
        raw_signatures in proptest::collection::vec(proptest::collection::vec(proptest::num::u8::ANY, 0..40), 0..6),
        noise in "[ -~]{0,60}", echo in proptest::option::of("[ -~]{0,40}"),
        body in proptest::collection::vec(proptest::num::u8::ANY, 0..200),
    ) {
        let engine = base64::engine::general_purpose::STANDARD;
        let mut signatures: Vec<String> = raw_signatures.iter().map(|raw| format!("v1,{}", engine.encode(raw))).collect();
        signatures.push(noise);
        let signature = signatures.join(" ");
        let timestamp = (TIMESTAMP + skew).to_string();
        for signed_too in [true, false] {
            let lookup = |name: &str| match name {
                "webhook-id" if signed_too => Some(id.as_str()),
                "webhook-timestamp" if signed_too => Some(timestamp.as_str()),
                "webhook-signature" if signed_too => Some(signature.as_str()),
                "x-webhook-secret" => echo.as_deref(),
                _ => None,
            };
            for verifier in [verifier(), verifier().require_signature(false), raw_verifier().wall_clock(|| at(TIMESTAMP))] {
                let outcome = verifier.authenticate_lookup(lookup, &body);
                proptest::prop_assert!(outcome.is_err(), "authenticated: {:?}", outcome);
            }
        }
    }
}

pub(crate) mod end_to_end {
    use std::sync::Arc;
    use std::time::Duration;

    use axum::body::Bytes;
    use axum::http::{HeaderMap, StatusCode};
    use genapi::api::types;
    use genapi::webhook::{Inbox, Scheme, Verifier};
    use genapi::WebhookSecret;
    use genapi_mock::{MockConfig, MockService};

    /// The secret the receiver verifies with and requests sign with.
    pub(crate) const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";

    /// A receiver on loopback that verifies and forwards to the inbox; it
    /// refuses the first `refuse_first` deliveries with 500.
    pub(crate) async fn receiver(
        inbox: Arc<Inbox>,
        refuse_first: usize,
    ) -> (String, Arc<std::sync::Mutex<Vec<Scheme>>>) {
        let schemes = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = schemes.clone();
        let refused = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let verifier = Verifier::new(SECRET).unwrap();
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
    pub(crate) async fn mock_delivering_to(urls: &[&str]) -> MockService {
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

    /// The mock's notification, refused once and delivered on the retry,
    /// wakes the wait: one poll, long before the schedule's first (at 1 s,
    /// with nothing learned).
    #[tokio::test(start_paused = true)]
    async fn the_mock_notifies_the_receiver_and_the_wait_polls_once_at_once() {
        let inbox = Arc::new(Inbox::new());
        let (url, schemes) = receiver(inbox.clone(), 1).await;
        let mock = mock_delivering_to(&[&url]).await;
        let task = mock.client().unwrap().submit(request(&url)).await.unwrap();
        let started = tokio::time::Instant::now();
        let output = inbox.wait(task).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(1), "{:?}", started.elapsed());
        assert!(!output.bytes().await.unwrap().is_empty());
        assert_eq!(mock.stats().polls, 1, "one poll, the one the notification woke");
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

    /// A moderated task reads the same by notification as by polling.
    #[tokio::test(start_paused = true)]
    async fn a_moderated_task_notified_by_webhook_is_moderated() {
        let inbox = Arc::new(Inbox::new());
        let (url, _) = receiver(inbox.clone(), 0).await;
        let mock = mock_delivering_to(&[&url]).await;
        let moderated = request(&url).prompt("a lighthouse [mock:content-moderated]");
        let task = mock.client().unwrap().submit(moderated).await.unwrap();
        let error = inbox.wait(task).await.unwrap_err();
        assert!(
            matches!(
                error,
                genapi::Error::Moderated {
                    stage: genapi::Moderation::Content,
                    ..
                }
            ),
            "{error}"
        );
        assert_eq!(mock.stats().polls, 1, "the poll the notification woke settled it");
    }

    #[tokio::test(start_paused = true)]
    async fn with_an_unreachable_receiver_the_wait_polls_on_its_schedule() {
        let mock = MockService::start().await.unwrap();
        let task = mock
            .client()
            .unwrap()
            .submit(request("http://127.0.0.1:9/hook"))
            .await
            .unwrap();
        let output = Arc::new(Inbox::new()).wait(task).await.unwrap();
        assert!(!output.sample().is_empty());
        assert_eq!(mock.stats().polls, 1, "the schedule's poll, at 1 s");
    }

    #[tokio::test(start_paused = true)]
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
        // Listing a remote address without allowing remote deliveries is a
        // mistake the mock refuses at start.
        let remote = MockConfig::default().webhook_target("http://192.0.2.1/hook");
        let refused = MockService::start_with(remote, "127.0.0.1:0".parse().unwrap()).await;
        assert!(refused.is_err(), "{refused:?}");
        let mock = mock_delivering_to(&[&url]).await;
        let client = mock.client().unwrap();
        client.submit(request(&url)).await.unwrap().wait().await.unwrap();
        client
            .submit(request("http://192.0.2.1/hook"))
            .await
            .unwrap()
            .wait()
            .await
            .unwrap();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while mock.deliveries().len() < 2 && tokio::time::Instant::now() < deadline {
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

    #[tokio::test(start_paused = true)]
    async fn a_failure_notification_is_the_typed_error() {
        let inbox = Arc::new(Inbox::new());
        let (url, _) = receiver(inbox.clone(), 0).await;
        let mock = mock_delivering_to(&[&url]).await;
        let task = mock
            .client()
            .unwrap()
            .submit(request(&url).prompt("[mock:error]"))
            .await
            .unwrap();
        let error = inbox.wait(task).await.unwrap_err();
        assert!(matches!(error, genapi::Error::TaskFailed { .. }), "{error}");
        assert_eq!(mock.stats().polls, 1);
    }
}

/// A notification is text from the service like any answer: the secret it
/// was verified with, quoted in its body, is gone from the event. And what
/// it says never becomes a wait's outcome: a notification of failure,
/// quoting the client's key, for a task that goes on to succeed only wakes
/// the wait for a poll, and the poll decides.
#[tokio::test(start_paused = true)]
async fn a_notification_quoting_a_secret_is_scrubbed_and_never_the_outcome() {
    const KEY: &str = "inbox-canary-key-31";
    let body = format!(
        r#"{{"task_id":"t-1","status":"FAILED","webhook_secret":"{RAW}","error":{{"message":"sent {RAW} with {KEY}"}}}}"#
    );
    let event = raw_verifier()
        .verify(&headers(&[("x-webhook-secret", RAW)]), body.as_bytes())
        .unwrap();
    assert!(!format!("{event:?}").contains(RAW), "{event:?}");
    assert_eq!(event.raw["webhook_secret"], "[redacted]");

    let config = genapi_mock::MockConfig::default().key(KEY);
    let mock = genapi_mock::MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let task = mock.client().unwrap().submit(prompt("a fox")).await.unwrap();
    let inbox = Arc::new(Inbox::new());
    let body = body.replace("t-1", task.id());
    inbox.deliver(
        raw_verifier()
            .verify(&headers(&[("x-webhook-secret", RAW)]), body.as_bytes())
            .unwrap(),
    );
    let output = inbox.wait(task).await.unwrap();
    assert!(!output.sample().is_empty());
    assert_eq!(mock.stats().polls, 2, "one woken at once, one when the task ended");
}

fn prompt(text: &str) -> genapi::api::types::builder::Gen2ProRequest {
    genapi::api::types::Gen2ProRequest::builder().prompt(text)
}

/// Delivers the final notification `event` of `task_id` to `inbox` after
/// `after`.
fn notify_later(inbox: &Arc<Inbox>, event: Event, after: Duration) {
    let inbox = inbox.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        inbox.deliver(event);
    });
}

/// A client that expects tasks of 5 s polls a task that ended at 0.3 s once,
/// right when its notification arrives, not at 5 s.
#[tokio::test(start_paused = true)]
async fn a_notification_brings_the_poll_forward_to_its_arrival() {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let mut learned = genapi::Learned::default();
    for _ in 0..8 {
        learned.observe("gen_2_pro", 5.0);
    }
    let client = mock.client_builder().learned(learned).build().unwrap();
    let task = client.submit(prompt("[mock:duration_ms=300] a fox")).await.unwrap();
    let started = tokio::time::Instant::now();
    let inbox = Arc::new(Inbox::new());
    notify_later(&inbox, final_event(task.id()), Duration::from_millis(300));
    let output = task
        .wait_with(genapi::WaitOptions::default().woken_by(inbox.clone()))
        .await
        .unwrap();
    assert!(!output.sample().is_empty());
    let seen = started.elapsed();
    assert!(
        seen >= Duration::from_millis(300) && seen < Duration::from_millis(310),
        "{seen:?}"
    );
    assert_eq!(mock.stats().polls, 1);
    assert!(inbox.is_empty(), "the waiter took the notification");
}

/// A forged "ready" for a task still running wakes one poll, which says
/// Pending: the wait goes on, on its schedule, until a poll says Ready.
#[tokio::test(start_paused = true)]
async fn a_forged_ready_notification_does_not_end_the_wait() {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let task = client.submit(prompt("[mock:duration_ms=2000] a fox")).await.unwrap();
    let started = tokio::time::Instant::now();
    let inbox = Arc::new(Inbox::new());
    notify_later(&inbox, final_event(task.id()), Duration::from_millis(300));
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let options = genapi::WaitOptions::default()
        .woken_by(inbox)
        .on_progress(move |p| record.lock().unwrap().push((p.status.clone(), p.elapsed)));
    task.wait_with(options).await.unwrap();
    assert!(started.elapsed() >= Duration::from_secs(2), "{:?}", started.elapsed());
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0].0, TaskStatus::Pending, "{seen:?}");
    assert!(seen[0].1 < Duration::from_millis(310), "woken at once: {seen:?}");
    assert_eq!(seen[1].0, TaskStatus::Ready, "{seen:?}");
}

/// A sender that repeats a task's notification every millisecond (replayed,
/// or forged with a leaked secret) while the task runs 5 s does not buy a
/// poll each: the woken polls that find the task still running push the next
/// wake-up ever further out, so the wait makes a few polls more than its
/// schedule's five, not hundreds.
#[tokio::test(start_paused = true)]
async fn a_flood_of_notifications_is_not_a_flood_of_polls() {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let task = mock
        .client()
        .unwrap()
        .submit(prompt("[mock:duration_ms=5000] a fox"))
        .await
        .unwrap();
    let inbox = Arc::new(Inbox::new());
    let flood = {
        let (inbox, event) = (inbox.clone(), final_event(task.id()));
        tokio::spawn(async move {
            loop {
                inbox.deliver(event.clone());
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
        })
    };
    inbox.wait(task).await.unwrap();
    flood.abort();
    let polls = mock.stats().polls;
    assert!(polls <= 12, "{polls} polls for a task of 5 s");
}

/// The Standard Webhooks specification's own worked example: its secret,
/// message id, timestamp and body give its signature, which the verifier
/// accepts at the example's time, alone or among other signatures (a
/// rotated secret's); a changed body, and the same message read a day
/// late, are refused.
#[test]
fn the_standard_webhooks_specifications_worked_example_is_accepted() {
    const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
    const ID: &str = "msg_p5jXN8AQM9LWM0D4loKWxJek";
    const TIMESTAMP: i64 = 1614265330;
    const BODY: &[u8] = br#"{"test": 2432232314}"#;
    const SIGNATURE: &str = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    assert_eq!(
        genapi::webhook::sign(&SECRET.into(), ID, TIMESTAMP, BODY).unwrap(),
        SIGNATURE
    );
    let at = |seconds: i64| {
        Verifier::new(SECRET)
            .unwrap()
            .wall_clock(move || UNIX_EPOCH + Duration::from_secs((TIMESTAMP + seconds) as u64))
    };
    let headers = |signatures: &'static str| {
        move |name: &str| match name {
            "webhook-id" => Some(ID),
            "webhook-timestamp" => Some("1614265330"),
            "webhook-signature" => Some(signatures),
            _ => None,
        }
    };
    let accepted = at(5).authenticate_lookup(headers(SIGNATURE), BODY).unwrap();
    assert_eq!(accepted.1.as_deref(), Some(ID));
    let among = "v1,Zm9vYmFyYmF6cXV4cXV1eHF1dXhxdXV4cXV1eHE= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
    assert!(at(5).authenticate_lookup(headers(among), BODY).is_ok());
    assert!(matches!(
        at(5).authenticate_lookup(headers(SIGNATURE), br#"{"test": 2432232315}"#),
        Err(Rejection::BadSignature)
    ));
    assert!(matches!(
        at(24 * 60 * 60).authenticate_lookup(headers(SIGNATURE), BODY),
        Err(Rejection::Stale(_))
    ));
}

/// A notification is looked up by the wait of its own task only: a flood of
/// notifications for tasks nobody here waits for (valid, but for another
/// program's tasks, or forged with a leaked secret) costs each delivery a
/// look-up, not one for every waiting task. The inbox's clock is read once
/// per look-up, so it counts them.
#[tokio::test(start_paused = true)]
async fn notifications_for_other_tasks_do_not_wake_every_wait() {
    const WAITS: usize = 20;
    const OTHERS: usize = 50;
    let mock = genapi_mock::MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = reads.clone();
    let inbox = Arc::new(Inbox::new().clock(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        tokio::time::Instant::now().into_std()
    }));
    let mut waits = Vec::new();
    for _ in 0..WAITS {
        let task = client.submit(prompt("[mock:duration_ms=60000] a fox")).await.unwrap();
        let inbox = inbox.clone();
        waits.push(tokio::spawn(async move { inbox.wait(task).await }));
    }
    // Every wait is asleep before its first poll, listening to the inbox.
    tokio::time::sleep(Duration::from_millis(50)).await;
    reads.store(0, std::sync::atomic::Ordering::SeqCst);
    for n in 0..OTHERS {
        inbox.deliver(final_event(&format!("someone-elses-task-{n}")));
        tokio::task::yield_now().await;
    }
    tokio::task::yield_now().await;
    let looked = reads.load(std::sync::atomic::Ordering::SeqCst);
    for wait in waits {
        wait.abort();
    }
    assert!(
        looked <= 2 * OTHERS,
        "{looked} look-ups for {OTHERS} notifications of tasks nobody waits for, with {WAITS} waits"
    );
}

/// An inbox nothing reaches (the receiver cut off, its connections held by
/// strangers) makes no wait later than without one: after eight waits in a
/// row ended by a scheduled poll, a wait aims its first poll as it would
/// with no notifications at all, and the next notification makes the
/// inbox heard again.
#[tokio::test(start_paused = true)]
async fn waits_stop_leaving_their_polls_to_notifications_that_do_not_come() {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let mut learned = genapi::Learned::default();
    // Lower quartile about 0.2 s, upper about 1.6 s.
    for seconds in [0.2, 0.2, 0.2, 0.4, 0.8, 1.6, 1.6, 1.6] {
        learned.observe("gen_2_pro", seconds);
    }
    let client = mock.client_builder().learned(learned).build().unwrap();
    let inbox = Arc::new(Inbox::new());
    let mut seen = Vec::new();
    for n in 0..=Inbox::DEAF_AFTER {
        assert_eq!(inbox.is_heard(), n < Inbox::DEAF_AFTER, "after {n} waits");
        let task = client
            .submit(prompt(&format!("[mock:duration_ms=150] fox {n}")))
            .await
            .unwrap();
        let started = tokio::time::Instant::now();
        task.wait_with(genapi::WaitOptions::default().woken_by(inbox.clone()))
            .await
            .unwrap();
        seen.push(started.elapsed());
    }
    // (The client learns each 0.15 s task, so the upper quartile comes down
    // as they end, not below 0.8 s in eight.)
    assert!(
        seen[..8].iter().all(|took| *took >= Duration::from_millis(700)),
        "left to notifications, first polled past the upper quartile: {seen:?}"
    );
    assert!(seen[8] < Duration::from_millis(300), "polled as without them: {seen:?}");
    inbox.deliver(final_event("another-task"));
    assert!(inbox.is_heard(), "a notification came");
}
