//! A worker whose shared seat pool cannot be written mid-run (its table
//! gone away): the line whose seat could not be taken was never sent, so it
//! is reported as not submitted, with no advice to adopt or resubmit, and
//! the next run sends it.
//!
//! Line 2 takes the seat line 1 gave back; the seat's lease (30 s) is long
//! enough that the seat is surely still this worker's, so its taking goes
//! with the line's intent, in one statement, and the intent fails with it:
//! nothing leaves.

use std::process::Stdio;
use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;
use common::pg::Postgres;
use common::{genapi, posts_by_prompt, Dir};

/// The prompts of the job file's two lines.
const LINE_1: &str = "seatless 1";
const LINE_2: &str = "seatless 2 [mock:duration_ms=300]";

/// How long line 1's task lasts.
const LINE_1_TASK: Duration = Duration::from_secs(2 * 24 * 3600);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn a_line_that_could_not_take_a_seat_is_not_submitted_and_the_next_run_sends_it() {
    let Some(pg) = Postgres::start("seat-pool-lost") else {
        return;
    };
    // Line 1's task lasts two days, so the table surely goes while it runs;
    // the test ends it by moving the mock clock. (Two days: longer than any
    // duration the command learns, so the rerun's first poll of line 2 is
    // not aimed at it.) Line 2 asks for a quick task.
    let config = MockConfig::default()
        .default_duration(LINE_1_TASK)
        .request_log_capacity(1_000);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("seat-pool-lost");
    let lines: Vec<String> = [LINE_1, LINE_2]
        .iter()
        .enumerate()
        .map(|(index, prompt)| {
            json!({"model": "gen-2-pro", "name": format!("img-{}", index + 1), "prompt": prompt,
                   "width": 64, "height": 64})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    let worker = || {
        let mut command = genapi(&dir, &mock);
        command
            .args(["batch", "jobs.jsonl", "--out", "out", "--json", "--max-active", "1"])
            .args(["--ledger-lease", "30", "--ledger"])
            .arg(pg.url())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    // One seat: line 1 takes it and is sent; line 2 waits for it. Once line
    // 1's task holds the seat, the seat pool's table goes away.
    let first = worker().spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let held = || {
        pg.sql("SELECT to_regclass('genapi_seats') IS NOT NULL") == "t"
            && pg.sql("SELECT count(*) FROM genapi_seats WHERE task_id IS NOT NULL") == "1"
    };
    while !held() {
        assert!(std::time::Instant::now() < deadline, "line 1 never held its seat");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    pg.sql("ALTER TABLE genapi_seats RENAME TO genapi_seats_away");
    mock.advance(LINE_1_TASK + Duration::from_secs(1));
    let first = tokio::task::spawn_blocking(move || first.wait_with_output().unwrap())
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr).into_owned();
    // The ledger could not record the submission: a failure to write.
    assert_eq!(first.status.code(), Some(1), "{stderr}");
    let reported: Vec<Value> = String::from_utf8_lossy(&first.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let line_2 = reported
        .iter()
        .find(|o| o["line"] == 2)
        .unwrap_or_else(|| panic!("{reported:?}"));
    assert_eq!(line_2["status"], "unsent", "{line_2}");
    let error = line_2["error"].as_str().unwrap();
    assert!(error.contains("nothing was sent"), "{error}");
    assert!(error.contains("running the batch again submits it"), "{error}");
    for wrong in [
        "no answer came back",
        "--adopt",
        "--resubmit-unknown",
        "resubmit_unknown",
    ] {
        assert!(!error.contains(wrong), "{wrong:?} in {error}");
        assert!(!stderr.contains(wrong), "{wrong:?} in {stderr}");
    }
    assert_eq!(posts_by_prompt(&mock).get(LINE_2), None, "line 2 was not sent");

    // The table is back: a plain run sends line 2, and line 1 is not sent again.
    pg.sql("ALTER TABLE genapi_seats_away RENAME TO genapi_seats");
    let mut rerun = worker();
    let again = tokio::task::spawn_blocking(move || rerun.output().unwrap())
        .await
        .unwrap();
    assert_eq!(
        again.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let posts = posts_by_prompt(&mock);
    assert_eq!(posts.get(LINE_1), Some(&1), "{posts:?}");
    assert_eq!(posts.get(LINE_2), Some(&1), "{posts:?}");
}
