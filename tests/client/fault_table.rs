//! One table of faults, each with its expected outcome and the number of
//! submissions the server saw: never two for one call when the first may have
//! been accepted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use genapi::api::types;
use genapi::{Error, RetryPolicy};
use genapi_mock::{Fault, FaultKind, MockService};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common;

fn fast() -> RetryPolicy {
    RetryPolicy::default()
        .initial_backoff(Duration::from_millis(10))
        .max_backoff(Duration::from_millis(40))
}

fn request() -> types::builder::Gen2ProRequest {
    types::Gen2ProRequest::builder().prompt("x")
}

/// What the expected outcome is.
#[derive(Debug)]
enum Expect {
    Success,
    Transport,
    Server(u16),
    Decode,
    RateLimited,
}

fn check(name: &str, outcome: Result<genapi::Output, Error>, expect: &Expect) {
    let ok = match (&outcome, expect) {
        (Ok(_), Expect::Success) => true,
        (Err(Error::Transport { .. }), Expect::Transport) => true,
        (Err(Error::Server { status, .. }), Expect::Server(s)) => status == s,
        (Err(Error::Decode { .. }), Expect::Decode) => true,
        (Err(Error::RateLimited { .. }), Expect::RateLimited) => true,
        _ => false,
    };
    assert!(
        ok,
        "{name}: expected {expect:?}, got {:?}",
        outcome.map(|o| o.id().to_string())
    );
}

/// HTTP-level faults, injected into the mock.
#[tokio::test(start_paused = true)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn http_faults_on_submit_and_poll() {
    let date_soon = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(1));
    let status = |code: u16, retry_after: Option<&str>| FaultKind::Status {
        status: code,
        retry_after: retry_after.map(str::to_string),
        body: "{}".into(),
    };
    let table: Vec<(&str, Fault, Expect, usize)> = vec![
        (
            "500 on submit",
            Fault::on("/v1/gen-2-pro", status(500, None)),
            Expect::Server(500),
            1,
        ),
        (
            "502 on submit",
            Fault::on("/v1/gen-2-pro", status(502, None)),
            Expect::Server(502),
            1,
        ),
        (
            "503 on submit",
            Fault::on("/v1/gen-2-pro", status(503, Some("0"))),
            Expect::Server(503),
            1,
        ),
        (
            "504 on submit",
            Fault::on("/v1/gen-2-pro", status(504, None)),
            Expect::Server(504),
            1,
        ),
        (
            "429 with Retry-After seconds",
            Fault::on("/v1/gen-2-pro", status(429, Some("0"))),
            Expect::Success,
            2,
        ),
        (
            "429 with Retry-After date",
            Fault::on("/v1/gen-2-pro", status(429, Some(&date_soon))),
            Expect::Success,
            2,
        ),
        (
            "429 without Retry-After",
            Fault::on("/v1/gen-2-pro", status(429, None)),
            Expect::Success,
            2,
        ),
        (
            "429 that persists",
            Fault::on("/v1/gen-2-pro", status(429, Some("0"))).times(9),
            Expect::RateLimited,
            4,
        ),
        (
            "reset after the request was sent",
            Fault::on("/v1/gen-2-pro", FaultKind::DropConnection),
            Expect::Transport,
            1,
        ),
        (
            "answer lost after the task was created",
            Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer),
            Expect::Transport,
            1,
        ),
        (
            "malformed JSON on submit",
            Fault::on("/v1/gen-2-pro", FaultKind::MalformedBody),
            Expect::Decode,
            1,
        ),
        (
            "wrong content type",
            Fault::on(
                "/v1/gen-2-pro",
                FaultKind::Status {
                    status: 200,
                    retry_after: None,
                    body: "<html>hi</html>".into(),
                },
            ),
            Expect::Decode,
            1,
        ),
        (
            "500s while polling",
            Fault::on("/v1/get_result", status(500, None)).times(2),
            Expect::Success,
            1,
        ),
        (
            "502s while polling",
            Fault::on("/v1/get_result", status(502, None)).times(2),
            Expect::Success,
            1,
        ),
        (
            "503s while polling",
            Fault::on("/v1/get_result", status(503, Some("0"))).times(3),
            Expect::Success,
            1,
        ),
        (
            "504s while polling",
            Fault::on("/v1/get_result", status(504, None)).times(2),
            Expect::Success,
            1,
        ),
        (
            "404 then found",
            Fault::on("/v1/get_result", status(404, None)).times(3),
            Expect::Success,
            1,
        ),
        (
            "slow poll answer",
            Fault::on("/v1/get_result", FaultKind::Delay(Duration::from_millis(300))),
            Expect::Success,
            1,
        ),
        (
            "unreadable poll answers, ridden out",
            Fault::on("/v1/get_result", FaultKind::MalformedBody).times(4),
            Expect::Success,
            1,
        ),
        (
            "unreadable poll answers that go on",
            Fault::on("/v1/get_result", FaultKind::MalformedBody).times(1000),
            Expect::Decode,
            1,
        ),
        (
            "reset while polling",
            Fault::on("/v1/get_result", FaultKind::DropConnection).times(2),
            Expect::Success,
            1,
        ),
    ];
    for (name, fault, expect, submissions) in table {
        let mock = MockService::start().await.unwrap();
        mock.inject(fault);
        let client = mock.client_builder().retry_policy(fast()).build().unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(15), client.run(request()))
            .await
            .unwrap_or_else(|_| panic!("{name}: deadline"));
        check(name, outcome, &expect);
        assert_eq!(
            mock.count("POST", "/v1/gen-2-pro"),
            submissions,
            "{name}: submissions seen"
        );
    }
}

/// A raw TCP server that misbehaves on every connection; counts connections.
async fn misbehaving(
    behave: fn(tokio::net::TcpStream) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(AtomicUsize::new(0));
    let counter = seen.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(behave(stream));
        }
    });
    (base, seen)
}

async fn read_request(stream: &mut tokio::net::TcpStream) {
    let mut buffer = vec![0u8; 65536];
    let _ = stream.read(&mut buffer).await;
}

#[tokio::test(start_paused = true)]
async fn connection_level_faults_on_submit() {
    type Behave = fn(tokio::net::TcpStream) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;
    let table: Vec<(&str, Behave)> = vec![
        ("reset before the request was read", |stream| {
            Box::pin(async move { drop(stream) })
        }),
        ("closed after the request, no answer", |mut stream| {
            Box::pin(async move { read_request(&mut stream).await })
        }),
        ("headers slower than the timeout", |mut stream| {
            Box::pin(async move {
                read_request(&mut stream).await;
                tokio::time::sleep(Duration::from_secs(3)).await;
            })
        }),
        ("body slower than the timeout", |mut stream| {
            Box::pin(async move {
                read_request(&mut stream).await;
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"id\":",
                    )
                    .await;
                tokio::time::sleep(Duration::from_secs(3)).await;
            })
        }),
        ("truncated body", |mut stream| {
            Box::pin(async move {
                read_request(&mut stream).await;
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"id\":",
                    )
                    .await;
            })
        }),
    ];
    for (name, behave) in table {
        let (base, connections) = misbehaving(behave).await;
        let client = genapi::Client::builder()
            .api_key("k")
            .base_url(&base)
            .request_timeout(Duration::from_millis(800))
            .retry_policy(fast())
            .build()
            .unwrap();
        let outcome = tokio::time::timeout(Duration::from_secs(10), client.submit(request()))
            .await
            .unwrap_or_else(|_| panic!("{name}: deadline"));
        let error = outcome.err().unwrap_or_else(|| panic!("{name}: succeeded"));
        assert!(matches!(error, Error::Transport { .. }), "{name}: {error}");
        assert_eq!(
            connections.load(Ordering::SeqCst),
            1,
            "{name}: the submission may have been accepted, so it was sent once"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn connection_refused_is_retried_then_typed() {
    // Nothing listens on port 9 of loopback: safe to retry, nothing was sent.
    let client = genapi::Client::builder()
        .api_key("k")
        .base_url("http://127.0.0.1:9")
        .retry_policy(fast())
        .build()
        .unwrap();
    let started = tokio::time::Instant::now();
    let error = client.submit(request()).await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error}");
    assert!(
        started.elapsed() >= Duration::from_millis(15),
        "backed off between attempts"
    );
}

#[tokio::test(start_paused = true)]
async fn unknown_fields_in_answers_are_ignored() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    // A real task, announced with fields this client has never heard of.
    let task = client.submit(request()).await.unwrap();
    let body = serde_json::json!({
        "id": task.id(), "polling_url": task.polling_url().as_str(), "cost": 1.0,
        "region": "eu-2", "queue_position": 3, "hints": {"nested": [1, 2]},
    })
    .to_string();
    common::answer_next_submission(&mock, body);
    let output = client.run(request()).await.unwrap();
    assert_eq!(output.id(), task.id());
}
