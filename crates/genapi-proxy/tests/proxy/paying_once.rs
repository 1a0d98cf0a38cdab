//! A submission is paid once, whatever its caller does.

use std::time::Duration;

use genapi_mock::{Fault, FaultKind, MockService};
use genapi_proxy::PROXY_HEADER;
use serde_json::Value;

use crate::common::{holding_mock, job, memory_file, post, proxy, tasks, until, PATH};

/// A caller that sends `body` and goes away once the service has the
/// request: its connection closes before any answer.
async fn send_and_give_up(proxy: &genapi_proxy::Proxy, mock: &MockService, body: &str) {
    let sent_before = mock.count("POST", PATH);
    let caller = {
        let (base, body) = (proxy.base_url(), body.to_string());
        tokio::spawn(async move {
            let _ = crate::common::http()
                .post(format!("{base}{PATH}"))
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
        })
    };
    until("the service to have the submission", || {
        mock.count("POST", PATH) > sent_before
    })
    .await;
    caller.abort();
    let _ = caller.await;
}

async fn id_of(response: reqwest::Response) -> String {
    let value: Value = response.json().await.unwrap();
    value["id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn a_retry_after_the_caller_gave_up_gets_the_first_task_and_is_not_charged() {
    let mock = holding_mock().await;
    let proxy = proxy(&mock, None).await;
    send_and_give_up(&proxy, &mock, &job("fox")).await;
    // The service answers the proxy, which keeps the acceptance.
    mock.advance(Duration::from_secs(3600));
    let retry = post(&proxy, PATH, &job("fox"), &[]).await;
    assert_eq!(retry.status(), 200);
    assert_eq!(retry.headers()[PROXY_HEADER], "replayed");
    let acceptance: Value = retry.json().await.unwrap();
    assert_eq!(tasks(&mock), 1, "one task at the service");
    assert_eq!(
        mock.created_tasks()[0].id,
        acceptance["id"],
        "the retry names the first task"
    );
    assert_eq!(mock.count("POST", PATH), 1, "the retry never reached the service");
    let cost = acceptance["cost"].as_f64().expect("the mock reports costs");
    assert_eq!(mock.credits(), Some(100.0 - cost), "charged once");
    let summary = proxy.stop().await;
    assert_eq!((summary.tasks, summary.duplicates_stopped), (1, 1), "{summary}");
    assert_eq!(summary.credits_saved, cost);
}

#[tokio::test]
async fn a_retry_after_the_proxy_restarted_gets_the_first_task() {
    let mock = holding_mock().await;
    let memory = memory_file("restart");
    let first = proxy(&mock, Some(memory.clone())).await;
    send_and_give_up(&first, &mock, &job("owl")).await;
    mock.advance(Duration::from_secs(3600));
    until("the proxy to have the acceptance", || first.summary().tasks == 1).await;
    first.stop().await;
    let second = proxy(&mock, Some(memory)).await;
    let retry = post(&second, PATH, &job("owl"), &[]).await;
    assert_eq!(retry.headers()[PROXY_HEADER], "replayed");
    assert_eq!(id_of(retry).await, mock.created_tasks()[0].id);
    assert_eq!(mock.count("POST", PATH), 1);
}

#[tokio::test]
async fn two_identical_submissions_both_answered_are_two_tasks() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    let first = id_of(post(&proxy, PATH, &job("two"), &[]).await).await;
    let second = post(&proxy, PATH, &job("two"), &[]).await;
    assert_eq!(second.headers()[PROXY_HEADER], "sent");
    assert_ne!(id_of(second).await, first, "a second variation is a new job");
    assert_eq!(tasks(&mock), 2);
}

#[tokio::test]
async fn an_idempotency_key_seen_before_is_the_same_task_even_when_answered() {
    let mock = MockService::start().await.unwrap();
    let proxy = proxy(&mock, None).await;
    let key = [("idempotency-key", "order-17")];
    let first = id_of(post(&proxy, PATH, &job("a"), &key).await).await;
    let again = post(&proxy, PATH, &job("a, edited"), &key).await;
    assert_eq!(again.headers()[PROXY_HEADER], "replayed");
    assert_eq!(id_of(again).await, first);
    assert_eq!(tasks(&mock), 1);
    // Another key is another job.
    post(&proxy, PATH, &job("a"), &[("idempotency-key", "order-18")]).await;
    assert_eq!(tasks(&mock), 2);
    // A key beyond ASCII is a key too, never read as none.
    let accented = || async {
        crate::common::http()
            .post(format!("{}{PATH}", proxy.base_url()))
            .header("content-type", "application/json")
            .header(
                "idempotency-key",
                reqwest::header::HeaderValue::from_bytes("commande-été-17".as_bytes()).unwrap(),
            )
            .body(job("accented"))
            .send()
            .await
            .unwrap()
    };
    assert_eq!(accented().await.headers()[PROXY_HEADER], "sent");
    assert_eq!(accented().await.headers()[PROXY_HEADER], "replayed");
    assert_eq!(tasks(&mock), 3);
    // The same key with a query string is the same job of the endpoint.
    let queried = post(&proxy, &format!("{PATH}?retry=1"), &job("a"), &key).await;
    assert_eq!(queried.headers()[PROXY_HEADER], "replayed");
    // So is its path spelled with a dot segment (sent as it is written, as
    // a client that does not tidy addresses sends it): the same place.
    let dotted = raw_post(&proxy, &PATH.replace("/v1/", "/v1/./"), &job("a"), "order-17").await;
    assert!(dotted.contains(&format!("{PROXY_HEADER}: replayed")), "{dotted}");
    assert_eq!(tasks(&mock), 3);
    // The same key sent to another model is another job: it asks for another image.
    let other_model = post(&proxy, "/v1/gen-2-flex", &job("a"), &key).await;
    assert_eq!(other_model.headers()[PROXY_HEADER], "sent");
    assert_ne!(id_of(other_model).await, first);
    assert_eq!(tasks(&mock), 4);
}

/// A POST written on the socket as given (`path` untidied), its answer's
/// head as text.
async fn raw_post(proxy: &genapi_proxy::Proxy, path: &str, body: &str, key: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = proxy.base_url().trim_start_matches("http://").to_string();
    let mut stream = tokio::net::TcpStream::connect(&address).await.unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\nidempotency-key: {key}\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer).to_ascii_lowercase();
    text.split("\r\n\r\n").next().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_submission_whose_answer_was_lost_is_not_sent_again() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::on(PATH, FaultKind::LoseAnswer).method("POST"));
    let proxy = proxy(&mock, None).await;
    let first = post(&proxy, PATH, &job("lost"), &[]).await;
    assert_eq!(first.status(), 502);
    assert_eq!(first.headers()[PROXY_HEADER], "unanswered");
    let retry = post(&proxy, PATH, &job("lost"), &[]).await;
    assert_eq!(
        retry.status(),
        409,
        "the service may have made the task: not sent again"
    );
    assert_eq!(retry.headers()[PROXY_HEADER], "unknown");
    assert_eq!(mock.count("POST", PATH), 1);
    assert_eq!(tasks(&mock), 1, "the one task the lost answer made");
}

#[tokio::test]
async fn a_refused_submission_may_be_sent_again() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::status(PATH, 402).method("POST"));
    let proxy = proxy(&mock, None).await;
    assert_eq!(post(&proxy, PATH, &job("poor"), &[]).await.status(), 402);
    let retry = post(&proxy, PATH, &job("poor"), &[]).await;
    assert_eq!(retry.status(), 200);
    assert_eq!(retry.headers()[PROXY_HEADER], "sent");
    assert_eq!(mock.count("POST", PATH), 2);
    assert_eq!(tasks(&mock), 1);
}

#[tokio::test]
async fn a_server_error_to_a_submission_may_hold_a_task_so_a_repeat_is_not_sent() {
    let mock = MockService::start().await.unwrap();
    mock.inject(Fault::status(PATH, 502).method("POST"));
    let proxy = proxy(&mock, None).await;
    assert_eq!(post(&proxy, PATH, &job("gateway"), &[]).await.status(), 502);
    let retry = post(&proxy, PATH, &job("gateway"), &[]).await;
    assert_eq!(retry.status(), 409);
    assert_eq!(retry.headers()[PROXY_HEADER], "unknown");
    assert_eq!(mock.count("POST", PATH), 1);
}

#[tokio::test]
async fn a_refusals_retry_after_reaches_the_caller() {
    let mock = MockService::start().await.unwrap();
    mock.inject(
        Fault::on(
            PATH,
            FaultKind::Status {
                status: 429,
                retry_after: Some("3600".into()),
                body: r#"{"detail":"Too many active tasks"}"#.into(),
            },
        )
        .method("POST"),
    );
    let proxy = proxy(&mock, None).await;
    let refused = post(&proxy, PATH, &job("busy"), &[]).await;
    assert_eq!(refused.status(), 429);
    assert_eq!(refused.headers()["retry-after"], "3600");
    // A poll meanwhile ignores nothing; a submission within the hour does.
    crate::common::http()
        .get(format!("{}/v1/credits", proxy.base_url()))
        .send()
        .await
        .unwrap();
    assert_eq!(proxy.summary().retry_after_ignored, 0);
    post(&proxy, PATH, &job("busy"), &[]).await;
    assert_eq!(proxy.summary().retry_after_ignored, 1);
}

#[tokio::test]
async fn a_job_whose_acceptance_was_delivered_is_a_new_job_after_a_restart_too() {
    let mock = MockService::start().await.unwrap();
    let memory = memory_file("delivered-restart");
    let first = proxy(&mock, Some(memory.clone())).await;
    id_of(post(&first, PATH, &job("heard"), &[]).await).await;
    first.stop().await;
    let second = proxy(&mock, Some(memory)).await;
    let again = post(&second, PATH, &job("heard"), &[]).await;
    assert_eq!(again.headers()[PROXY_HEADER], "sent");
    assert_eq!(tasks(&mock), 2);
}

#[tokio::test]
async fn a_stop_waits_for_the_answer_of_a_submission_whose_caller_went_away() {
    let mock = holding_mock().await;
    let memory = memory_file("stop-waits");
    let first = proxy(&mock, Some(memory.clone())).await;
    send_and_give_up(&first, &mock, &job("late")).await;
    let stopping = tokio::spawn(first.stop());
    // The service answers only once the stop has begun.
    mock.advance(Duration::from_secs(3600));
    stopping.await.unwrap();
    let second = proxy(&mock, Some(memory)).await;
    let retry = post(&second, PATH, &job("late"), &[]).await;
    assert_eq!(retry.headers()[PROXY_HEADER], "replayed", "kept, not abandoned");
    assert_eq!(mock.count("POST", PATH), 1);
}

/// An SDK as the failures people report: a 2 s read timeout, and the same
/// request sent again after each, against a service that takes longer to
/// accept (held on the mock's clock until the test lets it answer, so the
/// verdict does not depend on any machine's speed). With `restart`, the
/// proxy is stopped and started again between the first send and the
/// retry.
async fn an_sdk_with_a_read_timeout_retrying(restart: bool) {
    let mock = holding_mock().await;
    let memory = memory_file(if restart { "timeout-restart" } else { "timeout" });
    let mut proxy = proxy(&mock, Some(memory.clone())).await;
    let impatient = genapi::http_client_builder()
        .unwrap()
        .timeout(Duration::from_secs(2))
        .build()
        .unwrap();
    let send = |base: String| {
        let impatient = impatient.clone();
        async move {
            impatient
                .post(format!("{base}{PATH}"))
                .header("content-type", "application/json")
                .body(job("impatient"))
                .send()
                .await
        }
    };
    // Timed out while the service holds the acceptance: the first try, and
    // (without a restart) two retries, which wait on it and are never sent.
    let tries = if restart { 1 } else { 3 };
    for _ in 0..tries {
        let timed_out = send(proxy.base_url()).await;
        assert!(timed_out.is_err_and(|e| e.is_timeout()));
    }
    assert_eq!(mock.count("POST", PATH), 1);
    mock.advance(Duration::from_secs(3600));
    until("the proxy to have the acceptance", || proxy.summary().tasks == 1).await;
    if restart {
        proxy.stop().await;
        proxy = crate::common::proxy(&mock, Some(memory)).await;
    }
    let retry = send(proxy.base_url()).await.unwrap();
    assert_eq!(retry.headers()[PROXY_HEADER], "replayed");
    let acceptance: Value = retry.json().await.unwrap();
    assert_eq!(
        acceptance["id"],
        mock.created_tasks()[0].id,
        "the task the SDK never heard of"
    );
    assert_eq!(
        (mock.count("POST", PATH), tasks(&mock)),
        (1, 1),
        "one task at the service"
    );
    let cost = acceptance["cost"].as_f64().unwrap();
    assert_eq!(mock.credits(), Some(100.0 - cost), "charged once");
}

#[tokio::test]
async fn an_sdk_retrying_after_its_read_timeout_gets_the_first_task() {
    an_sdk_with_a_read_timeout_retrying(false).await;
}

#[tokio::test]
async fn an_sdk_retrying_after_its_read_timeout_and_a_restart_of_the_proxy_gets_the_first_task() {
    an_sdk_with_a_read_timeout_retrying(true).await;
}

/// An answer the server took to the last byte is not yet on the
/// connection: a proxy gone right then (dropped here, as a kill leaves it)
/// has not written it delivered, so the next proxy gives the caller's
/// retry the first task, not a second. (The delivery is written an hour
/// after here, so the moment is the test's, whatever the machine's speed.)
#[tokio::test]
async fn an_answer_read_as_the_proxy_dies_is_owed_to_the_retry() {
    let mock = MockService::start().await.unwrap();
    let file = memory_file("handed-over");
    let first = genapi_proxy::Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .memory_file(&file)
        .delivery_written_after(Duration::from_secs(3600))
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let answered = post(&first, PATH, &job("handed over"), &[]).await;
    assert_eq!(answered.headers()[PROXY_HEADER], "sent");
    let id = id_of(answered).await;
    drop(first);
    let next = crate::common::proxy_when_free(&mock, &file).await;
    let retry = post(&next, PATH, &job("handed over"), &[]).await;
    assert_eq!(retry.headers()[PROXY_HEADER], "replayed");
    assert_eq!(id_of(retry).await, id);
    assert_eq!(tasks(&mock), 1, "the retry was not paid again");
}
