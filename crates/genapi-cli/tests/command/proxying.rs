//! `genapi proxy`: an SDK of any language pointed at it pays once for a
//! submission whose answer it never heard, across a restart of the proxy.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::time::Duration;

use genapi_mock::{Fault, FaultKind, MockConfig, MockService};
use serde_json::Value;

use crate::cli::text;
use crate::common::{genapi, genapi_alone, Dir};

const PATH: &str = "/v1/gen-2-pro";

/// `genapi proxy` started by `command` (with `extra` options), and the
/// base URL it printed.
fn started_with(mut command: std::process::Command, extra: &[&str]) -> (Child, String) {
    let mut child = command
        .args(["proxy", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    if !line.starts_with("http://127.0.0.1:") {
        let run = child.wait_with_output().unwrap();
        panic!("the proxy printed no address: {line:?} {}", text(&run.stderr));
    }
    (child, line.trim().to_string())
}

/// `genapi proxy` started by `command`, and the base URL it printed.
fn started(command: std::process::Command) -> (Child, String) {
    started_with(command, &[])
}

/// Stops the proxy as Ctrl-C does; what it said.
fn stopped(child: Child) -> String {
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) }, 0);
    let run = child.wait_with_output().unwrap();
    assert_eq!(run.status.code(), Some(0));
    text(&run.stderr)
}

fn http() -> reqwest::Client {
    genapi::http_client_builder().unwrap().build().unwrap()
}

async fn until(what: &str, condition: impl AsyncFn() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !condition().await {
        assert!(std::time::Instant::now() < deadline, "still waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// An SDK that sends the job to the proxy at `base` and gives up once the
/// service (holding its answer) has it; then the service answers, and the
/// proxy keeps the acceptance.
async fn give_up_until_accepted(base: &str, mock: &MockService) {
    let caller = {
        let url = format!("{base}{PATH}");
        tokio::spawn(async move {
            let _ = http()
                .post(url)
                .header("content-type", "application/json")
                .body(job())
                .send()
                .await;
        })
    };
    until("the service to have it", async || mock.count("POST", PATH) == 1).await;
    caller.abort();
    mock.advance(Duration::from_secs(3600));
    let summary_url = format!("{base}/_genapi/summary");
    until("the proxy to have the acceptance", async || {
        let summary: Value = http().get(&summary_url).send().await.unwrap().json().await.unwrap();
        summary["tasks"] == 1
    })
    .await;
}

/// The SDK's retry at the proxy at `base`: answered with the first task,
/// which the service never saw again. Its acceptance.
async fn replayed_first_task(base: &str, mock: &MockService) -> Value {
    let retry = http()
        .post(format!("{base}{PATH}"))
        .header("content-type", "application/json")
        .body(job())
        .send()
        .await
        .unwrap();
    assert_eq!(retry.headers()["x-genapi-proxy"], "replayed");
    let accepted: Value = retry.json().await.unwrap();
    assert_eq!(accepted["id"], mock.created_tasks()[0].id.as_str());
    assert_eq!(mock.count("POST", PATH), 1, "the retry never reached the service");
    accepted
}

fn job() -> String {
    serde_json::json!({"prompt": "a proxied fox", "width": 64, "height": 64}).to_string()
}

#[cfg(unix)]
#[tokio::test]
async fn a_retry_after_the_sdk_gave_up_and_the_proxy_restarted_is_answered_with_the_first_task() {
    let dir = Dir::new("proxy-restart");
    let config = MockConfig::default().credits(Some(10.0));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    mock.inject(Fault::on(PATH, FaultKind::Delay(Duration::from_secs(3600))).method("POST"));
    let (proxy, base) = started(genapi(&dir, &mock));

    // The SDK sends, and gives up once the service has the request.
    give_up_until_accepted(&base, &mock).await;
    // `--status` asks the running proxy, at the address it printed.
    let listen = base.clone();
    let status = tokio::task::spawn_blocking({
        let command = genapi(&dir, &mock);
        move || {
            let mut command = command;
            command
                .args(["proxy", "--listen", &listen, "--status"])
                .output()
                .unwrap()
        }
    })
    .await
    .unwrap();
    assert!(
        text(&status.stdout).contains("1 submission sent, 1 task accepted"),
        "{status:?}"
    );
    let said = stopped(proxy);
    assert!(said.contains("1 task accepted, 0 duplicates stopped"), "{said}");

    // Started again, it still knows the task the SDK never heard of, though
    // its trusted origins are given another way this time: one memory per
    // service.
    let mut again = genapi(&dir, &mock);
    again.env_remove("GENAPI_TRUSTED_ORIGINS");
    for origin in mock.trusted_origins() {
        again.args(["--trust-origin", &origin]);
    }
    let (proxy, base) = started(again);
    let accepted = replayed_first_task(&base, &mock).await;
    let cost = accepted["cost"].as_f64().unwrap();
    assert_eq!(mock.credits(), Some(10.0 - cost), "charged once");
    let said = stopped(proxy);
    assert!(said.contains("1 duplicate stopped"), "{said}");
}

#[cfg(unix)]
#[tokio::test]
async fn with_nothing_configured_it_relays_to_the_built_in_mock_and_says_so() {
    let dir = Dir::new("proxy-builtin");
    let (proxy, base) = started(genapi_alone(&dir));
    let accepted: Value = http()
        .post(format!("{base}{PATH}"))
        .header("content-type", "application/json")
        .body(job())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(
        accepted["polling_url"].as_str().unwrap().starts_with(&base),
        "{accepted}"
    );
    let said = stopped(proxy);
    assert!(said.contains("relaying to the built-in mock"), "{said}");
    assert!(said.contains("a test double"), "{said}");
}

#[test]
fn an_address_beyond_loopback_is_refused() {
    let dir = Dir::new("proxy-remote");
    let run = genapi_alone(&dir)
        .args(["proxy", "--listen", "0.0.0.0:0", "--timeout", "5"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_ne!(run.status.code(), Some(0));
    assert!(said.contains("not a loopback address"), "{said}");
    let run = genapi_alone(&dir)
        .args(["proxy", "--listen", "0.0.0.0:0", "--allow-remote", "--timeout", "5"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(said.contains("set GENAPI_PROXY_KEY"), "{said}");
}

/// Proxies given one ledger database remember together: an SDK's retry
/// that reaches another proxy, after the first was killed, gets the first
/// one's task.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_that_reaches_another_proxy_sharing_a_ledger_gets_the_first_task() {
    let Some(pg) = crate::common::pg::Postgres::start("proxy-ledger") else {
        return;
    };
    let dir = Dir::new("proxy-ledger");
    let mock = MockService::start_with(
        MockConfig::default().credits(Some(10.0)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    mock.inject(Fault::on(PATH, FaultKind::Delay(Duration::from_secs(3600))).method("POST"));
    let sharing = || {
        let mut command = genapi(&dir, &mock);
        command.env("GENAPI_LEDGER_URL", pg.url());
        command
    };
    let (mut first, first_base) = started(sharing());
    give_up_until_accepted(&first_base, &mock).await;
    // The caller's going away is written down (else the acceptance waits
    // for its hold to lapse, a minute, before another caller gets it).
    pg.await_rows(
        "the acceptance owed to the next caller",
        "SELECT 1 FROM genapi_shared_records WHERE value->>'phase' = 'accepted' AND value->>'fate' = 'undelivered'",
        Duration::from_secs(120),
    );
    first.kill().unwrap();
    first.wait().unwrap();

    let (second, base) = started(sharing());
    replayed_first_task(&base, &mock).await;
    let said = stopped(second);
    assert!(said.contains("1 duplicate stopped"), "{said}");

    // A ledger is for proxies of one service: never the built-in mock's.
    let run = genapi_alone(&dir)
        .args(["proxy", "--listen", "127.0.0.1:0", "--ledger", &pg.url()])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{run:?}");
    assert!(text(&run.stderr).contains("built-in mock"), "{run:?}");
}

/// `--status` of a proxy that has a key of its own says which variable to
/// set, rather than that no proxy answers.
#[cfg(unix)]
#[tokio::test]
async fn the_status_of_a_proxy_with_its_own_key_names_the_variable() {
    let dir = Dir::new("proxy-status-key");
    let mut command = genapi_alone(&dir);
    command.env("GENAPI_PROXY_KEY", "a-key-of-the-proxys-own");
    let (proxy, base) = started_with(command, &["--allow-remote"]);
    let status = tokio::task::spawn_blocking({
        let mut command = genapi_alone(&dir);
        command.args(["proxy", "--listen", &base, "--status"]);
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    let said = text(&status.stderr);
    assert_ne!(status.status.code(), Some(0));
    assert!(said.contains("set GENAPI_PROXY_KEY"), "{said}");
    stopped(proxy);
}

/// `--status` never follows a redirect: the proxy's own key goes to the
/// address asked, and nowhere an answer points.
#[cfg(unix)]
#[tokio::test]
async fn the_status_sends_the_proxys_key_nowhere_a_redirect_points() {
    use axum::response::IntoResponse;
    use genapi_test_common::hostile;
    let elsewhere = hostile::serve(|_, _, _| hostile::json(200, serde_json::json!({}))).await;
    let target = format!("{}/steal", elsewhere.base);
    let redirecting =
        hostile::serve(move |_, _, _| (axum::http::StatusCode::FOUND, [("location", target.clone())]).into_response())
            .await;
    let dir = Dir::new("proxy-status-redirect");
    let listen = redirecting.base.trim_start_matches("http://").to_string();
    let status = tokio::task::spawn_blocking({
        let mut command = genapi_alone(&dir);
        command
            .env("GENAPI_PROXY_KEY", "a-key-of-the-proxys-own")
            .args(["proxy", "--listen", &listen, "--status"]);
        move || command.output().unwrap()
    })
    .await
    .unwrap();
    assert_ne!(status.status.code(), Some(0), "{}", text(&status.stderr));
    assert_eq!(redirecting.seen().len(), 1);
    assert!(elsewhere.seen().is_empty(), "the key went where the redirect pointed");
}
