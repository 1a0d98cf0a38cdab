//! One road to the service: every operation of the document is sent by the
//! generated client, and one call sends at most `max_attempts` requests.

use std::time::Duration;

use genapi::api::types;
use genapi::{Error, RetryPolicy};
use genapi_mock::{Fault, FaultKind, MockService};

use crate::common;

/// The polls `mock` received, in order.
fn polls_seen_by(mock: &MockService) -> Vec<genapi_mock::LoggedRequest> {
    mock.requests()
        .into_iter()
        .filter(|r| r.path == "/v1/get_result")
        .collect()
}

fn fast_retries(attempts: u32) -> RetryPolicy {
    RetryPolicy::default()
        .max_attempts(attempts)
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(20))
}

/// The `api-version` header is written by the generated operation methods
/// only: a request without it was built by hand.
#[tokio::test(start_paused = true)]
async fn every_operation_is_sent_by_the_generated_client() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let typed = client
        .submit(types::Gen2ProRequest::builder().prompt("a typed request"))
        .await
        .unwrap();
    let raw = client
        .submit_raw(
            "/v1/gen-2-pro",
            serde_json::json!({"prompt": "a raw request", "user": "u-1"}),
        )
        .await
        .unwrap();
    let found = client.task(raw.id()).unwrap();
    typed.wait().await.unwrap();
    found.wait().await.unwrap().bytes().await.unwrap();

    let api_requests: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.origin != "delivery" && r.path.starts_with("/v1/"))
        .collect();
    assert!(api_requests.iter().any(|r| r.method == "POST"));
    assert!(api_requests.iter().any(|r| r.path == "/v1/get_result"));
    for request in &api_requests {
        assert_eq!(
            request.header("api-version"),
            Some("0.0.1"),
            "{} {} was not sent by the generated client",
            request.method,
            request.path
        );
    }
    // The raw body went on the wire as written, unknown field included.
    let posted = api_requests
        .iter()
        .find(|r| r.method == "POST" && r.body.contains("a raw request"))
        .unwrap();
    assert!(posted.body.contains("\"user\":\"u-1\""), "{}", posted.body);
}

/// Before the retry loops were one, an answer that broke off restarted the
/// status retries: a poll meeting one broken answer and then 503s sent
/// `max_attempts + 1` requests.
#[tokio::test(start_paused = true)]
async fn one_poll_sends_at_most_max_attempts_requests() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().retry_policy(fast_retries(4)).build().unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    mock.inject(Fault::on("/v1/get_result", FaultKind::DropConnection).times(1));
    mock.inject(Fault::status("/v1/get_result", 503).times(50));
    let error = task.poll().await.unwrap_err();
    assert!(matches!(error, Error::Server { status: 503, .. }), "{error}");
    assert_eq!(mock.count("GET", "/v1/get_result"), 4, "max_attempts in all");
}

#[tokio::test(start_paused = true)]
async fn one_submission_sends_at_most_max_attempts_requests() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().retry_policy(fast_retries(3)).build().unwrap();
    mock.inject(
        Fault::on(
            "/v1/gen-2-pro",
            FaultKind::Status {
                status: 429,
                retry_after: None,
                body: "{}".into(),
            },
        )
        .times(50),
    );
    let error = client
        .submit_raw("/v1/gen-2-pro", serde_json::json!({"prompt": "x"}))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::RateLimited { .. }), "{error}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "max_attempts in all");
}

/// The document counts `1024.0` as an integer, so `submit_raw` sends it (as
/// written), though the generated type wants a `u32`.
#[tokio::test(start_paused = true)]
async fn raw_bodies_with_whole_floats_are_sent_as_written() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let body =
        serde_json::json!({"prompt": "a", "width": 1024.0, "height": 1024.0, "seed": 42.0, "safety_tolerance": 2.0});
    assert!(genapi::validate::Document::embedded()
        .validate("Gen2ProRequest", &body)
        .is_empty());
    client.submit_raw("/v1/gen-2-pro", body).await.unwrap();
    let posted = mock.requests().into_iter().find(|r| r.method == "POST").unwrap();
    assert!(posted.body.contains("1024.0"), "{}", posted.body);
}

/// The generated `get_result` builds `{origin}/v1/get_result?id=…`; a polling
/// URL that says more (another parameter, another order) is still polled
/// exactly as the service gave it.
#[tokio::test(start_paused = true)]
async fn a_polling_url_is_polled_exactly_as_the_service_gave_it() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let accepted = client
        .submit(types::Gen2ProRequest::builder().prompt("a fox"))
        .await
        .unwrap();
    let id = accepted.id().to_string();
    let given = format!(
        "{}/v1/get_result?shard=7&id={id}",
        mock.regional_url().trim_end_matches('/')
    );
    common::answer_next_submission(&mock, serde_json::json!({"id": id, "polling_url": given}).to_string());
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("a fox"))
        .await
        .unwrap();
    assert_eq!(task.polling_url().as_str(), given);
    task.wait().await.unwrap();
    let polls = polls_seen_by(&mock);
    assert!(!polls.is_empty());
    let expected = format!("shard=7&id={id}");
    assert!(
        polls.iter().all(|r| r.query.as_deref() == Some(expected.as_str())),
        "every poll carries the given query: {:?}",
        polls.iter().map(|r| r.query.clone()).collect::<Vec<_>>()
    );
}

fn long_task() -> types::builder::Gen2ProRequest {
    types::Gen2ProRequest::builder().prompt("a slow fox [mock:duration_ms=60000]")
}

/// A client's first poll keeps the request the generated `get_result`
/// built; every later poll, of any task, is that request at the task's own
/// polling URL. On the wire each poll is what the generated code sends: the
/// address the service gave (query and all), the generated headers, and the
/// key once, added beneath for a trusted host.
#[tokio::test(start_paused = true)]
async fn every_poll_is_the_request_the_generated_get_result_sends() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let accepted = client.submit(long_task()).await.unwrap();
        let given = format!(
            "{}/v1/get_result?shard=7&id={}",
            mock.base_url().trim_end_matches('/'),
            accepted.id()
        );
        tasks.push((client.task(&given).unwrap(), format!("shard=7&id={}", accepted.id())));
    }
    for _ in 0..3 {
        for (task, _) in &tasks {
            task.poll().await.unwrap();
        }
    }
    let polls = polls_seen_by(&mock);
    assert_eq!(polls.len(), 6);
    let first = &polls[0];
    assert_eq!(first.header("api-version"), Some("0.0.1"));
    assert_eq!(first.header("accept"), Some("application/json"));
    let keys = |r: &genapi_mock::LoggedRequest| r.headers.iter().filter(|(name, _)| name == "x-key").count();
    assert_eq!(keys(first), 1, "the key, once");
    for (n, poll) in polls.iter().enumerate() {
        let (_, query) = &tasks[n % 2];
        assert_eq!(
            poll.query.as_deref(),
            Some(query.as_str()),
            "poll {n} went to its task's own URL"
        );
        assert_eq!(poll.method, "GET");
        assert_eq!(poll.headers, first.headers, "poll {n} is the first one again");
    }
}

/// The key is added to each poll as it leaves, by the trust rules: a client
/// that polled a trusted host first polls an untrusted one without it.
#[tokio::test(start_paused = true)]
async fn a_poll_of_an_untrusted_host_after_a_trusted_one_carries_no_key() {
    let (front, other) = (MockService::start().await.unwrap(), MockService::start().await.unwrap());
    let client = front.client().unwrap();
    client.submit(long_task()).await.unwrap().poll().await.unwrap();
    let elsewhere = other.client().unwrap().submit(long_task()).await.unwrap();
    let untrusted = client.task(elsewhere.polling_url().as_str()).unwrap();
    let _refused = untrusted.poll().await;
    let _refused_again = untrusted.poll().await;
    let front_polls = polls_seen_by(&front);
    assert_eq!(front_polls.len(), 1);
    assert_eq!(
        front_polls[0].header("x-key"),
        Some("[redacted]"),
        "the trusted host got the key"
    );
    let other_polls = polls_seen_by(&other);
    assert_eq!(other_polls.len(), 2, "the untrusted host was polled");
    assert!(
        other_polls.iter().all(|r| r.header("x-key").is_none()),
        "never with the key"
    );
    assert!(other_polls.iter().all(|r| r.header("api-version") == Some("0.0.1")));
}

/// A first poll that failed in the transport still kept its request: the
/// next poll sends it and reads the task.
#[tokio::test(start_paused = true)]
async fn a_poll_after_a_failed_first_poll_reads_the_task() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().retry_policy(fast_retries(1)).build().unwrap();
    let task = client.submit(long_task()).await.unwrap();
    mock.inject(Fault::on("/v1/get_result", FaultKind::DropConnection).times(1));
    let error = task.poll().await.unwrap_err();
    assert!(matches!(error, Error::Transport { .. }), "{error}");
    assert!(!task.poll().await.unwrap().status.is_final());
    assert_eq!(mock.count("GET", "/v1/get_result"), 2);
}

/// Whatever the service answers, a poll reads it the same whether the
/// generated `get_result` sent it (a client's first poll) or the request it
/// built was sent again (every later poll): the same result or the same
/// error.
#[tokio::test(start_paused = true)]
async fn a_later_poll_reads_every_answer_as_the_first_poll_does() {
    let answers: Vec<(&str, u16, String)> = vec![
        (
            "a fitting 200",
            200,
            r#"{"id":"ID","status":"Processing","progress":0.5}"#.into(),
        ),
        (
            "a 200 with odd fields",
            200,
            r#"{"id":"ID","status":"Pending","progress":"half","cost":"x"}"#.into(),
        ),
        ("a 200 that is not JSON", 200, "<html>".into()),
        ("a 202", 202, "{}".into()),
        ("a 404", 404, r#"{"detail":"Task not found"}"#.into()),
        (
            "a 422 in the validation shape",
            422,
            r#"{"detail":[{"loc":["query","id"],"msg":"bad id","type":"value_error"}]}"#.into(),
        ),
        (
            "a 422 carrying a task",
            422,
            r#"{"id":"ID","status":"Content Moderated"}"#.into(),
        ),
        ("a 422 of another shape", 422, r#"{"detail":"no"}"#.into()),
        // The document's 422 first, as the generated code reads it: an
        // error, though the body also names the task and a status.
        (
            "a 422 in the validation shape naming a status",
            422,
            r#"{"detail":[{"loc":["query","id"],"msg":"bad id","type":"value_error"}],"id":"ID","status":"Ready","result":{"sample":"https://d.example/x.jpg"}}"#.into(),
        ),
        ("a 401", 401, r#"{"detail":"Invalid key"}"#.into()),
        ("a 500", 500, r#"{"detail":"down"}"#.into()),
    ];
    for (name, status, body) in answers {
        let mock = MockService::start().await.unwrap();
        let client = || mock.client_builder().retry_policy(fast_retries(1)).build().unwrap();
        let (fresh, warm) = (client(), client());
        warm.submit(long_task()).await.unwrap().poll().await.unwrap();
        let mut outcomes = Vec::new();
        for client in [&fresh, &warm] {
            let task = client.submit(long_task()).await.unwrap();
            mock.inject(
                Fault::on(
                    "/v1/get_result",
                    FaultKind::Status {
                        status,
                        retry_after: None,
                        body: body.replace("ID", task.id()),
                    },
                )
                .times(1),
            );
            outcomes.push(format!("{:?}", task.poll().await).replace(task.id(), "<task>"));
        }
        assert_eq!(outcomes[1], outcomes[0], "{name}");
        if name.ends_with("naming a status") {
            assert!(outcomes[0].starts_with("Err("), "{}", outcomes[0]);
        }
    }
}
