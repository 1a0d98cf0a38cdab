//! `genapi --record FILE`: every command that talks to the service records
//! its exchanges, and a run killed with SIGKILL leaves a file that is whole
//! HAR, which the drift check and the replay read.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use genapi_mock::{MockConfig, MockService};
use serde_json::Value;

use crate::common::{self, Dir};

/// The recording at `path`, when it can be read as one.
fn recording(path: &Path) -> Option<Value> {
    let text = std::fs::read_to_string(path).ok()?;
    xtask::drift::read("recording", &text).ok()
}

fn operations(har: &Value) -> Vec<String> {
    har["log"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["_genapi"]["operation"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_killed_with_sigkill_leaves_a_recording_the_drift_check_reads() {
    let dir = Dir::new("record-sigkill");
    // A task that outlasts the test: the kill always lands mid-run.
    let config = MockConfig::default().duration_for("gen_2_pro", Duration::from_secs(3600));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let path = dir.join("killed.har");
    let mut child = common::genapi(&dir, &mock)
        .args(["--record", "killed.har", "generate", "a long task", "-o", "long.jpg"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(60);
    // The submission and a first poll, then the kill.
    while recording(&path).is_none_or(|har| operations(&har).len() < 2) {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it was killed"
        );
        assert!(Instant::now() < give_up, "the run recorded nothing to kill it after");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.ends_with("]}}\n"), "the file ends with the closing of the log");
    let har = recording(&path).expect("the killed run's recording is whole JSON");
    let seen = operations(&har);
    assert_eq!(seen[0], "gen_2_pro");
    assert!(seen[1..].iter().all(|op| op == "get_result"), "{seen:?}");
    let report = xtask::drift::check(&common::document(), &[har]);
    assert!(!report.drifted(), "{}", report.render());
    assert_eq!(report.exchanges, seen.len());
    // The replay reads it too: the task it recorded can be submitted again.
    assert!(genapi_mock::Replay::from_har(&text).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_that_calls_the_service_records_with_the_global_option() {
    let dir = Dir::new("record-commands");
    let mock = MockService::start().await.unwrap();
    let submitted = common::genapi(&dir, &mock)
        .args(["submit", "a boat", "--json", "--record", "submit.har"])
        .output()
        .unwrap();
    assert!(submitted.status.success(), "{submitted:?}");
    let task: Value = serde_json::from_slice(&submitted.stdout).unwrap();
    let polling_url = task["polling_url"].as_str().unwrap();
    let waited = common::genapi(&dir, &mock)
        .args([
            "--record",
            "wait.har",
            "--record-images",
            "wait",
            polling_url,
            "-o",
            "boat.jpg",
        ])
        .output()
        .unwrap();
    assert!(waited.status.success(), "{waited:?}");

    let submit = recording(&dir.join("submit.har")).unwrap();
    assert_eq!(operations(&submit), ["gen_2_pro"]);
    let wait = recording(&dir.join("wait.har")).unwrap();
    let seen = operations(&wait);
    assert_eq!(seen.last().map(String::as_str), Some("download"), "{seen:?}");
    let download = wait["log"]["entries"].as_array().unwrap().last().unwrap();
    assert_eq!(
        download["response"]["content"]["encoding"], "base64",
        "--record-images keeps the result"
    );
    let key = mock.key();
    for file in ["submit.har", "wait.har"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(!text.contains(key), "{file} holds the key");
    }

    let refused = common::genapi(&dir, &mock)
        .args(["--record", "no-such-dir/x.har", "submit", "a boat"])
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("cannot write the recording no-such-dir/x.har"),
        "{stderr}"
    );
}
