//! The command speaks of its flags and models, never of the library's
//! names, says a message shared by many lines once, and with `--json` prints one object for every outcome, in the
//! documented shape; a mistake caught before sending is said before any
//! mock starts.

use std::time::Duration;

use genapi_mock::{Fault, FaultKind, MockConfig, MockService};
use serde_json::{json, Value};

use crate::cli::Mock;
use crate::common::{genapi, genapi_alone, said, Dir};

/// Names of the library's code that a user of the command never typed.
const INTERNAL: [&str; 7] = [
    "batch::adopt",
    "Batch::resubmit_unknown",
    "ClientBuilder",
    "credit_cap",
    "not_submitted",
    "not_sent",
    "gen_2_pro",
];

fn no_internal_names(text: &str) {
    for name in INTERNAL {
        assert!(!text.contains(name), "{name} in: {text}");
    }
}

#[test]
fn a_mistake_caught_before_sending_is_one_json_object_and_starts_no_mock() {
    let dir = Dir::new("json-local-error");
    let run = genapi_alone(&dir)
        .args(["generate", "a fox", "--size", "5x5", "--json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", said(&run));
    let stdout = String::from_utf8_lossy(&run.stdout);
    let objects: Vec<Value> = stdout.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(objects.len(), 1, "{stdout}");
    assert_eq!(objects[0]["exit_code"], 2);
    assert!(objects[0]["error"].as_str().unwrap().contains("--size"), "{stdout}");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !stderr.contains("built-in mock"),
        "no mock for a local mistake: {stderr}"
    );
}

#[test]
fn get_json_has_the_documented_shape() {
    let dir = Dir::new("get-json-shape");
    let mock = Mock::start(&dir, &["--duration-ms", "50"]);
    let submitted = mock.command(&dir).args(["submit", "a fox", "--json"]).output().unwrap();
    let id = serde_json::from_slice::<Value>(&submitted.stdout).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    std::thread::sleep(Duration::from_millis(200));
    let got = mock.command(&dir).args(["get", &id, "--json"]).output().unwrap();
    assert_eq!(got.status.code(), Some(0), "{}", said(&got));
    let object: Value = serde_json::from_slice(&got.stdout).unwrap();
    for key in [
        "id",
        "polling_url",
        "file",
        "seed",
        "cost",
        "duration",
        "status",
        "mock",
    ] {
        assert!(object.get(key).is_some(), "{key} missing: {object}");
    }
    assert_eq!(object["id"], id.as_str());
    assert_eq!(object["mock"], true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_said_with_flags_and_model_names() {
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("plain-words");
    // A connection that breaks after the submission left: the command names
    // the model's submission.
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::DropConnection).method("POST"));
    let broken = genapi(&dir, &mock).args(["generate", "a fox"]).output().unwrap();
    let text = said(&broken);
    assert_eq!(broken.status.code(), Some(9), "{text}");
    assert!(text.contains("the gen-2-pro submission"), "{text}");
    no_internal_names(&text);

    // A batch stopped at its credit cap says so in words.
    let lines: Vec<String> = (1..=2)
        .map(|n| json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("capped {n}")}).to_string())
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    let capped = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "shots", "--max-credits", "0"])
        .output()
        .unwrap();
    let text = said(&capped);
    assert_eq!(capped.status.code(), Some(11), "{text}");
    assert!(
        text.contains("2 unsent (2 at the credit cap)"),
        "the count reads as lines, not credits: {text}"
    );
    no_internal_names(&text);
    // Said once, for both lines, without repeating its status.
    assert_eq!(text.matches("raise the cap").count(), 1, "{text}");
    assert!(text.contains(": the same as line "), "{text}");
    assert!(
        !text.contains("unsent: unsent") && !text.contains("not sent: not sent"),
        "{text}"
    );
}

#[test]
fn an_adoption_naming_no_line_is_refused_before_the_built_in_mock_starts() {
    let dir = Dir::new("adopt-no-line");
    let line = json!({"model": "gen-2-pro", "name": "fox", "prompt": "a fox"}).to_string();
    std::fs::write(dir.join("jobs.jsonl"), line + "\n").unwrap();
    let run = genapi_alone(&dir)
        .args(["batch", "jobs.jsonl", "--out", "shots", "--adopt", "7=some-task"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("has no valid line 7"), "{stderr}");
    assert!(
        !stderr.contains("built-in mock"),
        "no mock for a local mistake: {stderr}"
    );
}
