//! What a run's exit code and results say is what happened: a line the
//! batch skipped is counted, and a result whose bytes are no image is a
//! failure that names its task, never a success.

use std::time::Duration;

use genapi_mock::{Fault, FaultKind, MockService};
use serde_json::{json, Value};

use crate::cli::{assert_exit, text};
use crate::common::{self, Dir};

/// A job line of about 3 KB: four of them pass the reader's 8 KB buffer, so
/// the last is read from the file only when the batch reaches it.
fn long_line(n: u64, tag: &str) -> String {
    let prompt = format!("{tag} {n} {}", "and more ".repeat(330));
    json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": prompt, "width": 64, "height": 64}).to_string()
}

/// A line changed in the job file while the batch ran is skipped (never
/// sent), said, written to the results and counted: the run exits 2, not 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_changed_while_the_batch_ran_is_counted_and_the_exit_says_so() {
    let mock = MockService::start().await.unwrap();
    // The first submission is held until the file has changed (an hour on
    // the mock clock, which the test moves past it then): with one active
    // task the batch reads at most two lines before it answers.
    let held = Duration::from_secs(3600);
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::Delay(held)).method("POST"));
    let dir = Dir::new("changed-lines");
    let lines = |last: &str| {
        (1..=4)
            .map(|n| long_line(n, if n == 4 { last } else { "same" }))
            .collect::<Vec<_>>()
    };
    std::fs::write(dir.join("jobs.jsonl"), lines("same").join("\n") + "\n").unwrap();
    let child = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--max-active", "1"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Once the first submission is in, line 4 is changed.
    while mock.count("POST", "/v1/gen-2-pro") == 0 {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    std::fs::write(dir.join("jobs.jsonl"), lines("changed").join("\n") + "\n").unwrap();
    mock.advance(held);
    let run = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(stderr.contains("line 4: changed while the batch ran"), "{stderr}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "line 4 was not sent");
    let results: Vec<Value> = std::fs::read_to_string(dir.join("out/results.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let line_4: Vec<&Value> = results.iter().filter(|r| r["line"] == 4).collect();
    assert_eq!(line_4.len(), 1, "{results:?}");
    assert_eq!(
        (line_4[0]["status"].as_str(), line_4[0]["class"].as_str()),
        (Some("invalid"), Some("validation"))
    );
}

/// A result served as an image whose bytes are none (an HTML page, an empty
/// body) is a failure of the service naming its task, and no file is saved:
/// for `generate` (exit 9, with the command that fetches it again), and for
/// a batch, whose line is not a success but stays the task's (the task is
/// paid for: the next run fetches its result again, never submits it
/// again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_that_is_not_an_image_fails_naming_its_task_and_saves_nothing() {
    let mock = MockService::start().await.unwrap();
    let page = FaultKind::Status {
        status: 200,
        retry_after: None,
        body: "<html>maintenance</html>".into(),
    };
    // One download is answered with the page (a save is not retried on bytes
    // it got whole).
    mock.inject(Fault::on("/mock/results/", page.clone()));
    let dir = Dir::new("not-an-image");
    let line = json!({"model": "gen-2-pro", "name": "fox", "prompt": "a red fox", "width": 64, "height": 64});
    std::fs::write(dir.join("jobs.jsonl"), format!("{line}\n")).unwrap();
    let run = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_exit(&run, 9);
    let result: Value =
        serde_json::from_str(std::fs::read_to_string(dir.join("out/results.jsonl")).unwrap().trim()).unwrap();
    let task = result["task_id"].as_str().unwrap_or_default().to_string();
    assert_ne!(result["status"], "saved", "{result}");
    assert_eq!(result["class"], "network", "{result}");
    assert!(
        !task.is_empty() && result["error"].as_str().unwrap().contains(&task),
        "{result}"
    );
    assert!(result["error"].as_str().unwrap().contains("not an image"), "{result}");
    let saved: Vec<_> = std::fs::read_dir(dir.join("out"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("fox"))
        .collect();
    assert!(saved.is_empty(), "nothing saved: {saved:?}");
    // Once the service serves the image, the next run fetches it, and pays
    // nothing again.
    let again = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_exit(&again, 0);
    assert!(dir.join("out/fox.jpg").exists());
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "not submitted again");
    mock.inject(Fault::on("/mock/results/", page));

    let run = common::genapi(&dir, &mock)
        .args(["generate", "a fox", "--size", "64x64", "-o", "fox.png", "--json"])
        .output()
        .unwrap();
    assert_exit(&run, 9);
    assert!(
        text(&run.stderr).contains("genapi wait"),
        "says how to fetch it again: {}",
        text(&run.stderr)
    );
    let object: Value = serde_json::from_str(text(&run.stdout).trim()).unwrap();
    let id = object["id"].as_str().unwrap();
    assert!(object["error"].as_str().unwrap().contains(id), "{object}");
    assert!(!dir.join("fox.png").exists());
}

/// A batch charged more than its cap never exits 0: its one line, of a kind
/// not priced yet, went alone with the whole cap held and cost more than
/// that (the bound allows it by that one submission). The run exits as one
/// at its cap does, and its summary says by how much.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_charged_more_than_its_cap_exits_as_one_at_its_cap() {
    let mock = common::roomy_mock(50).await;
    mock.set_credits(Some(100.0));
    let dir = Dir::new("past-the-cap");
    let line = json!({"model": "gen-2-pro", "name": "wide", "prompt": "a wide sea", "width": 1024, "height": 1024});
    std::fs::write(dir.join("jobs.jsonl"), format!("{line}\n")).unwrap();
    let run = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--max-credits", "1"])
        .output()
        .unwrap();
    let charged = 100.0 - mock.credits().unwrap();
    assert!(charged > 1.0, "the line costs more than the cap: {charged}");
    assert_exit(&run, 11);
    let said = text(&run.stdout);
    assert!(
        said.contains(&format!(
            "the batch was charged {charged:.2} credits in all, more than its --max-credits cap of 1"
        )),
        "{said}"
    );
}
