//! `genapi batch --status` only reads the ledger: run before the first run
//! it creates nothing (no tables, no batch, no job file digest), says the
//! batch is not there yet, and a job file corrected afterwards still runs.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;
use common::pg::Postgres;
use common::{genapi, Dir};

fn write_jobs(dir: &Dir, prompts: &[&str]) {
    let lines: Vec<String> = prompts
        .iter()
        .enumerate()
        .map(|(n, prompt)| {
            json!({"model": "gen-2-pro", "name": format!("img-{}", n + 1), "prompt": prompt}).to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
}

async fn output(mut command: Command) -> Output {
    command.stdout(Stdio::piped()).stderr(Stdio::piped());
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_before_the_first_run_changes_nothing_and_says_the_batch_is_not_there() {
    let Some(pg) = Postgres::start("status-read-only") else {
        return;
    };
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("status-read-only");
    write_jobs(&dir, &["a red fox", "a blue whale", "a gren owl"]);
    let batch = |extra: &[&str]| {
        let mut command = genapi(&dir, &mock);
        command
            .args(["batch", "jobs.jsonl", "--out", "out", "--ledger"])
            .arg(pg.url())
            .args(extra);
        command
    };
    let tables = || pg.sql("SELECT count(*) FROM pg_tables WHERE tablename LIKE 'genapi%'");

    let status = output(batch(&["--status"])).await;
    let said = text(&status.stdout);
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
    assert!(
        said.contains("jobs:jobsjsonl") && said.contains("not in the ledger") && said.contains("3 lines"),
        "{said}"
    );
    let json = output(batch(&["--status", "--json"])).await;
    assert_eq!(json.status.code(), Some(0), "{}", text(&json.stderr));
    let view: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(view["exists"], false, "{view}");
    assert_eq!(view["not_started"], 3, "{view}");
    assert_eq!(tables(), "0", "--status created the ledger's tables");
    assert_eq!(mock.requests().len(), 0, "--status sent something");

    // The typo is corrected: the batch starts from the corrected file.
    write_jobs(&dir, &["a red fox", "a blue whale", "a green owl"]);
    let run = output(batch(&[])).await;
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));

    // Once the batch exists, --status reads it, still without writing.
    let before = pg.sql("SELECT (SELECT count(*) FROM genapi_batches) || '/' || (SELECT count(*) FROM genapi_lines)");
    let status = output(batch(&["--status", "--json"])).await;
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
    let view: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        (view["exists"].clone(), view["done"].clone()),
        (json!(true), json!(3)),
        "{view}"
    );
    let after = pg.sql("SELECT (SELECT count(*) FROM genapi_batches) || '/' || (SELECT count(*) FROM genapi_lines)");
    assert_eq!(before, after);
    let other = output(batch(&["--status", "--batch-name", "never-run"])).await;
    assert_eq!(other.status.code(), Some(0), "{}", text(&other.stderr));
    assert!(
        text(&other.stdout).contains("not in the ledger"),
        "{}",
        text(&other.stdout)
    );
    assert_eq!(
        pg.sql("SELECT count(*) FROM genapi_batches"),
        "1",
        "--status created a batch"
    );
}
