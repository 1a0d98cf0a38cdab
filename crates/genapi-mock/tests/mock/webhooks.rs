//! Where the mock sends webhooks, how many at once, and on which clock: a
//! mock others can reach calls only the origins it was told and takes no key
//! anyone knows; a receiver that never answers holds a few connections and
//! delays no submission; a notification sent after the mock clock moved is
//! still one the client's verifier accepts. Over real HTTP on loopback, on
//! the real clock (a paused one would run out a hung receiver's timeout).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use genapi_mock::{Error, MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;

pub(crate) const SECRET: &str = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// A receiver on loopback that answers 200 and keeps what it was sent.
pub(crate) struct Receiver {
    pub(crate) origin: String,
    pub(crate) seen: Arc<Mutex<Vec<(HeaderMap, Bytes)>>>,
}

impl Receiver {
    pub(crate) async fn start() -> Receiver {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let keep = seen.clone();
        let app = axum::Router::new().fallback(move |headers: HeaderMap, body: Bytes| {
            let keep = keep.clone();
            async move {
                keep.lock().unwrap().push((headers, body));
                "ok"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let origin = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Receiver { origin, seen }
    }

    pub(crate) fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// The first notification, once it came (within a minute).
    async fn first(&self) -> (HeaderMap, Bytes) {
        settle(|| self.count() > 0).await;
        self.seen.lock().unwrap()[0].clone()
    }
}

/// Waits until `done` holds, checking every 20 ms, at most a minute: the
/// tests assert what is counted then, never how long it took.
pub(crate) async fn settle(done: impl Fn() -> bool) {
    let give_up = std::time::Instant::now() + Duration::from_secs(60);
    while !done() && std::time::Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) async fn start(config: MockConfig) -> MockService {
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Submits a task whose notification goes to `webhook_url`, with `http`
/// (one client per test: building one reads the system's certificates).
async fn submit(http: &reqwest::Client, mock: &MockService, webhook_url: &str) -> (u16, Value) {
    common::submit_with_webhook(http, mock.base_url(), mock.key(), webhook_url, SECRET).await
}

fn submissions(mock: &MockService) -> u64 {
    mock.stats().submissions.values().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mock_others_can_reach_calls_only_the_origins_it_was_told() {
    let http = common::http();
    let listed = Receiver::start().await;
    // A service that listens on loopback only, trusting whoever reaches it.
    let internal = Receiver::start().await;
    let remote = || MockConfig::default().key("k-own").allow_remote(true);
    let mock = start(remote().webhook_target(&listed.origin).default_duration(Duration::ZERO)).await;

    let relay = format!("{}/internal-admin?drop=all", internal.origin);
    let (status, refused) = submit(&http, &mock, &relay).await;
    assert_eq!(status, 422, "{refused}");
    let error = &refused["detail"][0];
    assert_eq!(error["loc"], json!(["body", "webhook_url"]), "{refused}");
    assert!(error["msg"].as_str().unwrap().contains("--webhook-target"), "{refused}");
    assert_eq!(submissions(&mock), 0, "no task is created for a refused webhook_url");

    let (status, accepted) = submit(&http, &mock, &format!("{}/hooks", listed.origin)).await;
    assert_eq!(status, 200, "{accepted}");
    let (_, body) = listed.first().await;
    let event: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(event["task_id"], accepted["id"]);
    assert_eq!(internal.count(), 0, "the loopback service was never called");

    // With no origin given, no webhook_url is one it calls.
    let none = start(remote()).await;
    let (status, refused) = submit(&http, &none, &format!("{}/hooks", listed.origin)).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(listed.count(), 1);
}

#[tokio::test]
async fn a_mock_others_can_reach_does_not_start_with_a_known_key_or_as_a_relay_to_loopback() {
    let refusal = |result: Result<MockService, Error>| match result {
        Err(Error::Config(message)) => message,
        other => panic!("expected a refusal of the settings, got {other:?}"),
    };
    let loopback = "127.0.0.1:0".parse().unwrap();
    let remote = MockConfig::default().allow_remote(true);
    let known = refusal(MockService::start_with(remote.clone(), loopback).await);
    assert!(known.contains("keys of its own"), "{known}");
    let empty = refusal(MockService::start_with(remote.clone().key(""), loopback).await);
    assert!(empty.contains("keys of its own"), "{empty}");
    let relay = refusal(MockService::start_with(remote.clone().key("k").webhooks_to_loopback(true), loopback).await);
    assert!(relay.contains("relay"), "{relay}");
    MockService::start_with(remote.key("k"), loopback)
        .await
        .unwrap()
        .stop()
        .await;

    let local = MockConfig::default().webhook_target("not a url at all");
    let garbage = refusal(MockService::start_with(local, loopback).await);
    assert!(
        garbage.contains("not a URL") && !garbage.contains("at all"),
        "{garbage}"
    );
    let elsewhere = MockConfig::default().webhook_target("https://hooks.example.com/in");
    let needs = refusal(MockService::start_with(elsewhere.clone(), loopback).await);
    assert!(
        needs.contains("https://hooks.example.com is not on this machine"),
        "{needs}"
    );
    let allowed = MockService::start_with(elsewhere.allow_remote_webhooks(true), loopback).await;
    allowed.unwrap().stop().await;
}

/// Accepts connections on loopback and never answers: counts them and
/// holds them open.
async fn silent_receiver() -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let origin = format!("http://{}", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            held.push(connection);
        }
    });
    (origin, accepted)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_that_never_answers_delays_webhooks_not_submissions() {
    let http = common::http();
    const WORKERS: usize = 4;
    const QUEUE: usize = 16;
    const SUBMISSIONS: usize = 300;
    let (origin, accepted) = silent_receiver().await;
    // An attempt outlasts the test: every connection the mock opens stays open.
    let config = MockConfig::default()
        .webhook_target(&origin)
        .default_duration(Duration::ZERO)
        .webhook_timeout(Duration::from_secs(3600))
        .webhook_workers(WORKERS)
        .webhook_queue(QUEUE);
    let mock = start(config).await;
    for n in 0..SUBMISSIONS {
        let (status, answer) = submit(&http, &mock, &format!("{origin}/hooks/{n}")).await;
        assert_eq!(status, 200, "submission {n}: {answer}");
    }
    assert_eq!(submissions(&mock), SUBMISSIONS as u64);
    // Each notification is being sent (its connection accepted), waiting,
    // or dropped for want of room.
    let accounted = || {
        let stats = mock.stats();
        accepted.load(Ordering::SeqCst) as u64 + stats.webhooks_waiting + stats.webhooks_dropped
    };
    settle(|| accounted() == SUBMISSIONS as u64).await;
    let stats = mock.stats();
    assert_eq!(accounted(), SUBMISSIONS as u64, "{stats:?}");
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        WORKERS,
        "connections open at once: one per worker"
    );
    assert_eq!(stats.webhooks_waiting, QUEUE as u64, "{stats:?}");
    assert_eq!(
        stats.webhooks_dropped,
        (SUBMISSIONS - WORKERS - QUEUE) as u64,
        "{stats:?}"
    );
    let dropped = mock.deliveries().iter().filter(|d| d.attempts == 0).count();
    assert_eq!(dropped, SUBMISSIONS - WORKERS - QUEUE, "each dropped one is recorded");
    // Stopping does not wait for the hung attempts.
    mock.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_after_the_mock_clock_moved_is_signed_with_the_wall_clock() {
    let http = common::http();
    let receiver = Receiver::start().await;
    let config = MockConfig::default()
        .webhook_target(&receiver.origin)
        .default_duration(Duration::from_secs(600));
    let mock = start(config).await;
    let (status, accepted) = submit(&http, &mock, &format!("{}/hooks", receiver.origin)).await;
    assert_eq!(status, 200, "{accepted}");
    // The task ends, and its result address lives, on the moved clock.
    let advanced = http
        .post(format!("{}/mock/clock/advance", mock.base_url()))
        .header("x-key", mock.key())
        .json(&json!({"seconds": 601}))
        .send()
        .await
        .unwrap();
    assert_eq!(advanced.status(), 200);
    let (headers, body) = receiver.first().await;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let verifier = genapi::webhook::Verifier::new(SECRET).unwrap().require_signature(true);
    let event = verifier.verify_lookup(header, &body).unwrap();
    assert_eq!(Some(event.task_id.as_str()), accepted["id"].as_str(), "{event:?}");
}
