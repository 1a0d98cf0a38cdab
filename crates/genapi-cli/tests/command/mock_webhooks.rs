//! `genapi mock` delivers signed webhooks to the `webhook_url` a
//! submission names, as the service does: a plain HTTP receiver on this
//! machine gets one, and the client's verifier accepts it. Started with
//! `--allow-remote`, it calls only the origins given with `--webhook-target`
//! and refuses a submission naming another; a `--webhook-target` it could
//! never use stops it at start, saying what to fix.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Output;
use std::time::Duration;

use serde_json::{json, Value};

use crate::cli::{assert_exit, text, Mock};
use crate::common::{genapi_alone, Dir};

const SECRET: &str = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";

/// Submits a gen-2-pro task to `mock` whose notification goes to `webhook_url`.
async fn submit(mock: &Mock, webhook_url: &str) -> (u16, Value) {
    let (base_url, key) = (mock.variable("GENAPI_BASE_URL"), mock.variable("GENAPI_API_KEY"));
    crate::common::submit_with_webhook(&crate::common::http(), base_url, key, webhook_url, SECRET).await
}

/// The webhook in `received` is signed for `SECRET` as the client's
/// verifier checks it, and is about the task `accepted` names.
fn assert_verified(received: &(Vec<(String, String)>, Vec<u8>), accepted: &Value) {
    let (headers, body) = received;
    let header = |name: &str| {
        headers
            .iter()
            .find(|(found, _)| found == name)
            .map(|(_, value)| value.as_str())
    };
    assert!(
        header("webhook-signature").is_some_and(|s| s.starts_with("v1,")),
        "{headers:?}"
    );
    let verifier = genapi::webhook::Verifier::new(SECRET).unwrap();
    let event = verifier.verify_lookup(header, body).unwrap();
    assert_eq!(Some(event.task_id.as_str()), accepted["id"].as_str(), "{event:?}");
}

/// One HTTP request read off `listener`: its header lines and body; the
/// receiver answers 200.
fn receive_one(listener: &TcpListener) -> (Vec<(String, String)>, Vec<u8>) {
    // Within 20 s, or the mock sent nothing.
    listener.set_nonblocking(true).unwrap();
    let give_up = std::time::Instant::now() + Duration::from_secs(20);
    let stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && std::time::Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("no webhook came from the mock: {e}"),
        }
    };
    stream.set_nonblocking(false).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut request_line = String::new();
    reader.read_line(&mut request_line).unwrap();
    assert!(request_line.starts_with("POST /hooks"), "{request_line}");
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        reader.read_line(&mut line).unwrap();
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        let (name, value) = line.split_once(':').unwrap();
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .map(|(_, value)| value.parse().unwrap())
        .unwrap();
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    let mut stream = stream;
    stream
        .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        .unwrap();
    (headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plain_receiver_gets_a_webhook_from_genapi_mock_that_the_verifier_accepts() {
    let dir = Dir::new("mock-webhooks");
    let mock = Mock::start(&dir, &["--duration-ms", "200"]);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let hook = format!("http://{}/hooks", listener.local_addr().unwrap());
    let receiver = std::thread::spawn(move || receive_one(&listener));
    let (status, accepted) = submit(&mock, &hook).await;
    assert_eq!(status, 200, "{accepted}");
    let received = tokio::task::spawn_blocking(move || receiver.join().unwrap())
        .await
        .unwrap();
    drop(mock);
    assert_verified(&received, &accepted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mock_others_can_reach_calls_only_the_webhook_targets_it_was_given() {
    let dir = Dir::new("mock-webhooks-remote");
    // A service listening on loopback only, trusting whoever reaches it.
    let internal = TcpListener::bind("127.0.0.1:0").unwrap();
    internal.set_nonblocking(true).unwrap();
    let listed = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = format!("http://{}", listed.local_addr().unwrap());
    // With a key of its own: the one every started mock gets.
    let options = ["--allow-remote", "--duration-ms", "200", "--webhook-target", &target];
    let mock = Mock::start(&dir, &options);

    let relay = format!("http://{}/internal-admin?drop=all", internal.local_addr().unwrap());
    let (status, refused) = submit(&mock, &relay).await;
    assert_eq!(status, 422, "{refused}");
    assert_eq!(refused["detail"][0]["loc"], json!(["body", "webhook_url"]), "{refused}");
    let msg = refused["detail"][0]["msg"].as_str().unwrap();
    assert!(msg.contains("--webhook-target"), "{msg}");

    let receiver = std::thread::spawn(move || receive_one(&listed));
    let (status, accepted) = submit(&mock, &format!("{target}/hooks")).await;
    assert_eq!(status, 200, "{accepted}");
    let received = tokio::task::spawn_blocking(move || receiver.join().unwrap())
        .await
        .unwrap();
    drop(mock);
    assert_verified(&received, &accepted);
    // The refused submission made no task, so nothing is left to call it.
    let called = internal.accept().map(|_| ());
    assert!(
        called
            .as_ref()
            .is_err_and(|e| e.kind() == std::io::ErrorKind::WouldBlock),
        "the loopback service was called: {called:?}"
    );
}

/// `genapi mock` with these options, bounded (a mock that started anyway
/// ends with 0 rather than hanging the test).
fn refused_at_start(dir: &Dir, options: &[&str]) -> Output {
    let run = genapi_alone(dir)
        .args(["mock", "--timeout", "30"])
        .args(options)
        .output()
        .unwrap();
    assert_exit(&run, 2);
    run
}

#[test]
fn an_unusable_webhook_target_stops_genapi_mock_at_start_with_what_to_fix() {
    let dir = Dir::new("mock-webhook-targets");
    let garbage = text(&refused_at_start(&dir, &["--webhook-target", "not a url at all"]).stderr);
    assert!(
        garbage.contains("--webhook-target is not a URL") && garbage.contains("http://127.0.0.1:9000"),
        "{garbage}"
    );
    assert!(!garbage.contains("at all"), "the value is not echoed: {garbage}");
    let second = [
        "--webhook-target",
        "http://127.0.0.1:9000",
        "--webhook-target",
        "ftp://127.0.0.1/",
    ];
    let second = text(&refused_at_start(&dir, &second).stderr);
    assert!(
        second.contains("--webhook-target (value 2 of 2) is not an http or https URL"),
        "{second}"
    );
    let elsewhere = text(&refused_at_start(&dir, &["--webhook-target", "https://hooks.example.com/in"]).stderr);
    assert!(
        elsewhere.contains("error: --webhook-target https://hooks.example.com needs --allow-remote"),
        "{elsewhere}"
    );
}
