//! `genapi batch --json` whose stdout cannot be written (a full disk): as
//! with `genapi submit`, the run fails and the task ids go to stderr.

use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;
use common::{genapi, Dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn results_that_cannot_be_written_to_stdout_fail_the_run_and_name_each_task_on_stderr() {
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("batch-stdout-full");
    let lines: Vec<String> = (1..=3)
        .map(|n| json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("full {n}")}).to_string())
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let mut command = genapi(&dir, &mock);
    command
        .args(["batch", "jobs.jsonl", "--out", "out", "--json"])
        .stdout(full);
    let run = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_eq!(run.status.code(), Some(10), "{stderr}");
    assert!(
        stderr.contains("could not be written to stdout") && stderr.contains("results.jsonl"),
        "{stderr}"
    );
    // Every task the run created is named on stderr, and in results.jsonl.
    let results = std::fs::read_to_string(dir.join("out/results.jsonl")).unwrap();
    let ids: Vec<String> = results
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["task_id"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(ids.len(), 3, "{results}");
    for task in mock.created_tasks() {
        assert!(ids.contains(&task.id), "{results}");
        assert!(stderr.contains(&task.id), "task {} is not on stderr: {stderr}", task.id);
    }
}
