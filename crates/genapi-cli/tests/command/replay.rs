//! `genapi mock --replay FILE`: a run recorded with `--record` and run again
//! against a mock answering from the recording ends the same way: the same
//! files, the same results on stdout, the same exit code; for a `generate`,
//! and for a batch with a moderated and a failed task.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common::{self, Dir};

/// Every file under `root` (but the recording and the run's own records)
/// with its bytes.
fn files(root: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut found = BTreeMap::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.strip_prefix(root).unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "cache" {
                    pending.push(path);
                }
            // The gallery's page says when the run ended; its thumbnails are
            // compared like the images.
            } else if !name.ends_with(".har")
                && !name.contains("journal")
                && !name.ends_with(".jsonl")
                && !name.ends_with("index.html")
            {
                found.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    found
}

/// The results a run printed, without what names a host or a time, in the
/// order of the job file (a batch prints them as tasks end).
fn results(output: &Output) -> Vec<Value> {
    let mut found: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .map(|mut value| {
            if let Some(fields) = value.as_object_mut() {
                fields.retain(|name, _| {
                    !matches!(
                        name.as_str(),
                        "polling_url" | "elapsed" | "finished_at" | "sample" | "url"
                    )
                });
            }
            value
        })
        .collect();
    found.sort_by_key(|value| value["line"].as_u64());
    found
}

async fn output(mut command: Command) -> Output {
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generate_and_a_batch_with_failures_replay_to_the_same_files_output_and_exit_code() {
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let jobs = [
        json!({"model": "gen-2-pro", "name": "fine", "prompt": "a harbour", "width": 256, "height": 256}),
        json!({"model": "gen-2-pro", "name": "moderated", "prompt": "[mock:content-moderated]"}),
        json!({"model": "gen-2-pro", "name": "failed", "prompt": "[mock:error]"}),
    ];
    let job_file = jobs.iter().map(Value::to_string).collect::<Vec<_>>().join("\n") + "\n";
    let runs: [(&str, Vec<&str>); 2] = [
        (
            "generate",
            vec![
                "generate",
                "a lighthouse",
                "--size",
                "256x256",
                "-o",
                "light.jpg",
                "--json",
            ],
        ),
        ("batch", vec!["batch", "jobs.jsonl", "--out", "out", "--json"]),
    ];
    for (name, args) in runs {
        let recorded_dir = Dir::new(&format!("replay-{name}-recorded"));
        std::fs::write(recorded_dir.join("jobs.jsonl"), &job_file).unwrap();
        let mut command = common::genapi(&recorded_dir, &mock);
        command.args(["--record", "run.har", "--record-images"]).args(&args);
        let recorded = output(command).await;

        let replay_dir = Dir::new(&format!("replay-{name}-replayed"));
        std::fs::write(replay_dir.join("jobs.jsonl"), &job_file).unwrap();
        let recording = recorded_dir.join("run.har");
        let replaying = crate::cli::Mock::start(&replay_dir, &["--replay", recording.to_str().unwrap()]);
        let mut command = replaying.command(&replay_dir);
        command.args(&args);
        let replayed = output(command).await;

        if name == "batch" {
            assert_ne!(recorded.status.code(), Some(0), "a batch with failed lines fails");
        }
        assert_eq!(replayed.status.code(), recorded.status.code(), "{name}: {replayed:?}");
        assert_eq!(results(&replayed), results(&recorded), "{name}");
        let (before, after) = (files(&recorded_dir.0), files(&replay_dir.0));
        assert!(
            before.keys().any(|f| f.ends_with(".jpg")),
            "{name}: {:?}",
            before.keys()
        );
        assert_eq!(after, before, "{name}: the same files with the same bytes");
    }
}
