//! Proxies sharing their memory through a ledger database (a real
//! PostgreSQL): a caller's retry that reaches another proxy is answered as
//! the first would answer it, and a proxy that died leaves nothing another
//! pays again.

use std::time::Duration;

use genapi_mock::MockService;
use genapi_proxy::{Proxy, PROXY_HEADER};
use genapi_test_common::pg::Postgres;
use serde_json::Value;

use crate::common::{holding_mock, http, job, post, tasks, until, PATH};

/// A proxy for `mock` sharing its memory in the database at `url`.
async fn sharing(mock: &MockService, url: &str) -> Proxy {
    Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .ledger(url)
        .start("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Sends `body` to `proxy` on a task of its own, with `headers`.
fn sent(
    proxy: &Proxy,
    body: &str,
    headers: &[(&'static str, &'static str)],
) -> tokio::task::JoinHandle<reqwest::Response> {
    let (base, body, headers) = (proxy.base_url(), body.to_string(), headers.to_vec());
    tokio::spawn(async move {
        let mut request = http()
            .post(format!("{base}{PATH}"))
            .header("content-type", "application/json")
            .body(body);
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.send().await.unwrap()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_that_reaches_another_proxy_gets_the_first_task() {
    let Some(pg) = Postgres::start("proxy-retry-elsewhere") else {
        return;
    };
    let mock = holding_mock().await;
    let (first, second) = (sharing(&mock, &pg.url()).await, sharing(&mock, &pg.url()).await);
    // The caller gives up on the first proxy once the service has its job.
    let caller = sent(&first, &job("fox"), &[]);
    until("the service to have the submission", || mock.count("POST", PATH) == 1).await;
    caller.abort();
    let _ = caller.await;
    mock.advance(Duration::from_secs(3600));
    until("the first proxy to have the acceptance", || first.summary().tasks == 1).await;
    // The caller's going away is written down (else the acceptance waits
    // for its hold to lapse, a minute, before another caller gets it).
    pg.await_rows(
        "the acceptance owed to the next caller",
        "SELECT 1 FROM genapi_shared_records WHERE value->>'phase' = 'accepted' AND value->>'fate' = 'undelivered'",
        Duration::from_secs(120),
    );
    // Its retry reaches the second.
    let retry = post(&second, PATH, &job("fox"), &[]).await;
    assert_eq!(retry.headers()[PROXY_HEADER], "replayed");
    let acceptance: Value = retry.json().await.unwrap();
    assert_eq!(mock.created_tasks()[0].id, acceptance["id"]);
    assert_eq!(mock.count("POST", PATH), 1, "the retry never reached the service");
    let cost = acceptance["cost"].as_f64().unwrap();
    assert_eq!(mock.credits(), Some(100.0 - cost), "charged once");
    assert_eq!(second.summary().duplicates_stopped, 1);
    // Heard now: the same body again is a new job, at either proxy.
    let again = post(&first, PATH, &job("fox"), &[]).await;
    assert_eq!(again.headers()[PROXY_HEADER], "sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_idempotency_key_at_two_proxies_at_once_is_one_task() {
    let Some(pg) = Postgres::start("proxy-one-key") else {
        return;
    };
    let mock = holding_mock().await;
    let (first, second) = (sharing(&mock, &pg.url()).await, sharing(&mock, &pg.url()).await);
    let key = [("idempotency-key", "order-41")];
    let at_first = sent(&first, &job("owl"), &key);
    until("the service to have the submission", || mock.count("POST", PATH) == 1).await;
    // The same job at the other proxy, while the first waits for its
    // answer: it waits too, and is never sent.
    let at_second = sent(&second, &job("owl, again"), &key);
    mock.advance(Duration::from_secs(3600));
    let (at_first, at_second) = (at_first.await.unwrap(), at_second.await.unwrap());
    assert_eq!(at_first.headers()[PROXY_HEADER], "sent");
    assert_eq!(at_second.headers()[PROXY_HEADER], "replayed");
    let (a, b): (Value, Value) = (at_first.json().await.unwrap(), at_second.json().await.unwrap());
    assert_eq!(a["id"], b["id"]);
    assert_eq!((mock.count("POST", PATH), tasks(&mock)), (1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submission_whose_proxy_died_waiting_is_never_sent_again() {
    let Some(pg) = Postgres::start("proxy-died") else {
        return;
    };
    let mock = holding_mock().await;
    let (first, second) = (sharing(&mock, &pg.url()).await, sharing(&mock, &pg.url()).await);
    let caller = sent(&first, &job("crane"), &[]);
    until("the service to have the submission", || mock.count("POST", PATH) == 1).await;
    // The retry at the other proxy waits on the first, which holds the job.
    let retry = sent(&second, &job("crane"), &[]);
    // The first dies; its hold lapses (on the database's clock, moved here
    // rather than waited for).
    caller.abort();
    drop(first);
    pg.sql("UPDATE genapi_shared_records SET lease_until = now() WHERE holder IS NOT NULL");
    // A retry still waiting after two minutes waits on a dead proxy.
    let retry = tokio::time::timeout(Duration::from_secs(120), retry)
        .await
        .expect("the retry waits on a proxy that died")
        .unwrap();
    assert_eq!(retry.status(), 409, "the service may have made the task");
    assert_eq!(retry.headers()[PROXY_HEADER], "unknown");
    assert_eq!(mock.count("POST", PATH), 1, "never sent again");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_one_proxy_handed_out_is_relayed_by_the_others() {
    let Some(pg) = Postgres::start("proxy-origins") else {
        return;
    };
    let mock = MockService::start().await.unwrap();
    let (first, second) = (sharing(&mock, &pg.url()).await, sharing(&mock, &pg.url()).await);
    let accepted: Value = post(&first, PATH, &job("heron"), &[]).await.json().await.unwrap();
    mock.advance(Duration::from_secs(600));
    let polling_url = accepted["polling_url"].as_str().unwrap();
    let result: Value = http().get(polling_url).send().await.unwrap().json().await.unwrap();
    let sample = result["result"]["sample"].as_str().unwrap();
    // The result's address, asked of the other proxy.
    let elsewhere = sample.replacen(&first.base_url(), &second.base_url(), 1);
    assert_ne!(elsewhere, sample);
    let image = http().get(&elsewhere).send().await.unwrap();
    assert_eq!(image.status(), 200, "{elsewhere}");
    assert_eq!(mock.stats().keys_sent_to_delivery, 0);
}

/// What a proxy writes of a delivery is written before its stop returns:
/// a process that exits then leaves no acceptance its caller received
/// looking owed, to be replayed to the caller's next variation. (One
/// thread: nothing of the proxy runs once the stop has returned.)
#[tokio::test(flavor = "current_thread")]
async fn a_stop_returns_once_the_deliveries_are_written() {
    let Some(pg) = Postgres::start("proxy-stop-writes-deliveries") else {
        return;
    };
    let mock = MockService::start().await.unwrap();
    let proxy = sharing(&mock, &pg.url()).await;
    let answer = post(&proxy, PATH, &job("owl"), &[]).await;
    assert_eq!(answer.headers()[PROXY_HEADER], "sent");
    answer.bytes().await.unwrap();
    proxy.stop().await;
    // Delivered, so forgotten: only the origin it handed out is left.
    let left = pg.sql("SELECT value::text FROM genapi_shared_records WHERE key NOT LIKE 'origin %'");
    assert_eq!(left, "", "an acceptance its caller received is still remembered");
}

/// A proxy remembering in a file and one remembering in a ledger never run
/// side by side for one memory file (what one sent, the other knows
/// nothing of), and a ledger proxy does not start while the file
/// remembers submissions of the last day.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_memory_file_and_a_ledger_never_remember_one_service_at_once() {
    let Some(pg) = Postgres::start("proxy-file-and-ledger") else {
        return;
    };
    let mock = MockService::start().await.unwrap();
    let file = crate::common::memory_file("file-and-ledger");
    let beside = |file: &std::path::Path| {
        Proxy::builder(mock.client().unwrap())
            .key(mock.key())
            .memory_file(file)
            .ledger(pg.url())
            .start("127.0.0.1:0".parse().unwrap())
    };
    // A ledger proxy first: a file proxy is refused beside it, and after
    // it, for a day after the last submission the ledger took.
    // One that never started (its ledger out of reach) or sent nothing
    // keeps no file proxy away.
    let unreachable = genapi_test_common::RefusingPort::new();
    let out_of_reach = Proxy::builder(mock.client().unwrap())
        .key(mock.key())
        .memory_file(&file)
        .ledger(format!("postgres://genapi@{}/genapi", unreachable.address))
        .start("127.0.0.1:0".parse().unwrap())
        .await;
    assert!(out_of_reach.is_err());
    crate::common::proxy(&mock, Some(file.clone())).await.stop().await;
    beside(&file).await.unwrap().stop().await;
    crate::common::proxy(&mock, Some(file.clone())).await.stop().await;
    let ledger_proxy = beside(&file).await.unwrap();
    let refused = crate::common::proxy_refused(&mock, &file).await;
    assert!(refused.contains("another proxy is using it"), "{refused}");
    post(&ledger_proxy, PATH, &job("in the ledger"), &[]).await;
    ledger_proxy.stop().await;
    let refused = crate::common::proxy_refused(&mock, &file).await;
    assert!(refused.contains("remembered what they sent in a ledger"), "{refused}");
    // A day and an hour later, the file is the service's again.
    let mark = file.with_extension("ledger");
    let long_ago = std::time::SystemTime::now() - std::time::Duration::from_secs(25 * 3600 + 60);
    std::fs::File::options()
        .write(true)
        .open(&mark)
        .unwrap()
        .set_modified(long_ago)
        .unwrap();

    // A file proxy that remembers a job (named by a key, kept for a day):
    // no ledger proxy beside it, nor after it while the job is remembered.
    let file_proxy = crate::common::proxy(&mock, Some(file.clone())).await;
    post(&file_proxy, PATH, &job("kept"), &[("idempotency-key", "order-1")]).await;
    let refused = beside(&file).await.unwrap_err().to_string();
    assert!(refused.contains("a proxy without --ledger is using it"), "{refused}");
    file_proxy.stop().await;
    let refused = beside(&file).await.unwrap_err().to_string();
    assert!(refused.contains("remembers 1 submission of the last day"), "{refused}");
}
