//! An end of a line the database refuses, carried by a ledger's events,
//! does not keep another line from being sent.

use std::time::Duration;

use serde_json::json;

use crate::common;
use common::pg::Postgres;

/// A line's end that the database refuses (here: the service's failure
/// message holds a NUL, which `jsonb` cannot store) is carried by the next
/// record of the worker, which may be another line's intent: that intent,
/// an exclusive step, then fails, and the other line is not sent, its error
/// naming a cause that is not its own. Before ends were carried only the
/// line whose end could not be stored was affected (a warning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_the_database_refuses_does_not_keep_another_line_from_being_sent() {
    let Some(pg) = Postgres::start("carried-refused-end") else {
        return;
    };
    let config = genapi_mock::MockConfig::default().default_duration(Duration::from_millis(100));
    let mock = genapi_mock::MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let jobs = [
        json!({"model": "gen-2-pro", "name": "failing", "prompt": "[mock:error]", "width": 64, "height": 64}),
        json!({"model": "gen-2-pro", "name": "fine", "prompt": "a harbour", "width": 64, "height": 64}),
    ];
    let job_file = jobs.iter().map(|j| j.to_string()).collect::<Vec<_>>().join("\n") + "\n";
    // A recording of the run, whose failure message is then given a NUL.
    let recorded = common::Dir::new("carried-refused-recorded");
    std::fs::write(recorded.join("jobs.jsonl"), &job_file).unwrap();
    // One task at a time: line 2's intent is the record after line 1's end.
    let batch = ["batch", "jobs.jsonl", "--out", "out", "--json", "--max-active", "1"];
    let mut command = common::genapi(&recorded, &mock);
    command.args(["--record", "run.har", "--record-images"]).args(batch);
    let first = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert!(first.status.code().is_some(), "the recording run ended");
    let har = std::fs::read_to_string(recorded.join("run.har")).unwrap();
    assert!(har.contains("Mock failure requested"), "the failure is recorded");
    let mut value: serde_json::Value = serde_json::from_str(&har).unwrap();
    for entry in value["log"]["entries"].as_array_mut().unwrap() {
        if let Some(text) = entry["response"]["content"]["text"].as_str() {
            if text.contains("Mock failure requested") {
                entry["response"]["content"]["text"] =
                    json!(text.replace("Mock failure requested", "Mock failure\\u0000 requested"));
            }
        }
    }
    let replay_dir = common::Dir::new("carried-refused-replayed");
    std::fs::write(replay_dir.join("jobs.jsonl"), &job_file).unwrap();
    std::fs::write(replay_dir.join("run.har"), value.to_string()).unwrap();
    let replaying = crate::cli::Mock::start(&replay_dir, &["--replay", replay_dir.join("run.har").to_str().unwrap()]);
    let mut command = replaying.command(&replay_dir);
    command
        .args(batch)
        .arg("--ledger")
        .arg(pg.url())
        .env("GENAPI_LOG", "genapi=info");
    let run = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    let fine: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["line"] == 2)
        .unwrap_or_else(|| panic!("line 2 reported: {stdout}\n{stderr}"));
    assert_eq!(
        fine["status"], "saved",
        "line 2 was kept from being sent by line 1's end: {fine}"
    );
}
