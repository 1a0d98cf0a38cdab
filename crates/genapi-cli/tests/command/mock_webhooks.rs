//! `genapi mock` delivers signed webhooks to the `webhook_url` a
//! submission names, as the service does: a plain HTTP receiver on this
//! machine gets one, and the client's verifier accepts it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::process::Stdio;
use std::time::Duration;

use crate::common::{genapi_alone, mock_variable, Dir};

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
    let mut mock = genapi_alone(&dir)
        .args(["mock", "--duration-ms", "200"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut variables = std::collections::HashMap::new();
    for line in BufReader::new(mock.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if line == "# genapi mock ready" {
            break;
        }
        if let Some((name, value)) = mock_variable(&line) {
            variables.insert(name, value);
        }
    }
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let hook = format!("http://{}/hooks", listener.local_addr().unwrap());
    let receiver = std::thread::spawn(move || receive_one(&listener));
    let secret = "whsec_MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=";
    let accepted: serde_json::Value = crate::common::http()
        .post(format!("{}/v1/gen-2-pro", variables["GENAPI_BASE_URL"]))
        .header("x-key", &variables["GENAPI_API_KEY"])
        .json(&serde_json::json!({"prompt": "a hook", "width": 64, "height": 64,
                                  "webhook_url": hook, "webhook_secret": secret}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let (headers, body) = tokio::task::spawn_blocking(move || receiver.join().unwrap())
        .await
        .unwrap();
    let _ = mock.kill();
    let _ = mock.wait();
    let verifier = genapi::webhook::Verifier::new(secret).unwrap();
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
    let event = verifier.verify_lookup(header, &body).unwrap();
    assert_eq!(Some(event.task_id.as_str()), accepted["id"].as_str(), "{event:?}");
}
