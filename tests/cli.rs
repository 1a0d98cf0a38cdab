//! The `genapi` command, run as a new user would run it.
#![cfg(feature = "cli")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

mod common;

fn genapi() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_genapi"));
    for name in ["GENAPI_API_KEY", "GENAPI_BASE_URL", "GENAPI_REGIONAL_BASE_URL"] {
        command.env_remove(name);
    }
    command
}

#[test]
fn generate_without_configuration_uses_the_mock_and_saves_a_decodable_image() {
    let dir = std::env::temp_dir().join(format!("genapi-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("lighthouse.jpg");
    let run = genapi()
        .args(["generate", "a lighthouse at dusk", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr),
    );
    assert!(run.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("built-in mock service") && stderr.contains("test double"),
        "says it used the mock: {stderr}"
    );
    assert!(
        stdout.contains("Ready") && stdout.contains("credits") && stdout.contains("lighthouse.jpg"),
        "{stdout}"
    );
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(genapi::ImageFormat::sniff(&bytes), Some(genapi::ImageFormat::Jpeg));
    assert_eq!(
        genapi::dimensions(&bytes),
        Some((1024, 1024)),
        "the size the model chose"
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn set_and_image_fill_the_request_and_failures_exit_non_zero_with_one_line() {
    let dir = std::env::temp_dir().join(format!("genapi-cli-set-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("in.png");
    let mut png = vec![
        0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A, 0, 0, 0, 13, b'I', b'H', b'D', b'R',
    ];
    png.extend_from_slice(&[0, 0, 1, 0, 0, 0, 0, 192, 8, 2, 0, 0, 0]);
    std::fs::write(&input, png).unwrap();
    let run = genapi()
        .args([
            "generate",
            "--model",
            "gen-pro-1.0-expand",
            "--set",
            "left=64",
            "--set",
            "output_format=png",
            "--image",
        ])
        .arg(&input)
        .arg("--out")
        .arg(dir.join("wide"))
        .arg("wider")
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let bytes = std::fs::read(dir.join("wide.png")).unwrap();
    assert_eq!(
        genapi::dimensions(&bytes),
        Some((320, 192)),
        "input 256x192 plus 64 on the left"
    );

    let refused = genapi()
        .args(["generate", "--set", "safety_tolerance=9", "x"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("error: invalid request") && last.contains("safety_tolerance"),
        "{stderr}"
    );

    let moderated = genapi()
        .args(["generate", "[mock:content-moderated] x"])
        .output()
        .unwrap();
    assert!(!moderated.status.success());
    assert!(String::from_utf8_lossy(&moderated.stderr).contains("moderated"));
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn half_a_configuration_says_what_is_missing() {
    let run = genapi()
        .env("GENAPI_API_KEY", "k")
        .args(["generate", "x"])
        .output()
        .unwrap();
    assert!(!run.status.success());
    assert!(
        String::from_utf8_lossy(&run.stderr).contains("GENAPI_BASE_URL is not"),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
}

#[test]
fn get_prints_a_task_state() {
    let run = genapi().args(["get", "no-such-task"]).output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let state: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(state["status"], "Task not found");
}

#[test]
fn mock_runs_standalone_and_prints_its_address_and_key() {
    let mut child = genapi()
        .args(["mock", "--key", "k-123", "--duration-ms", "50"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let banner = lines.next().unwrap().unwrap();
    let base = lines.next().unwrap().unwrap();
    let key = lines.next().unwrap().unwrap();
    assert!(banner.contains("test double"));
    assert_eq!(key, "GENAPI_API_KEY=k-123");
    let base = base.strip_prefix("GENAPI_BASE_URL=").unwrap().to_string();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let output = runtime.block_on(async {
        // As for the service, the polling host is a regional one: find it from
        // a submission and trust it.
        let submitted: serde_json::Value = common::http()
            .post(format!("{base}/v1/gen-2-pro"))
            .header("x-key", "k-123")
            .json(&serde_json::json!({"prompt": "x"}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let polling = reqwest::Url::parse(submitted["polling_url"].as_str().unwrap()).unwrap();
        let client = genapi::Client::builder()
            .api_key("k-123")
            .base_url(&base)
            .trust_origin(polling.origin().ascii_serialization())
            .build()
            .unwrap();
        client
            .run(genapi::api::types::Gen2ProRequest::builder().prompt("x"))
            .await
    });
    child.kill().unwrap();
    let _ = child.wait();
    assert!(output.unwrap().sample.starts_with("http://127.0.0.1:"));
}
