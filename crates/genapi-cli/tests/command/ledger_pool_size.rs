//! A seat pool has one size, kept with it in the ledger: a worker asking for
//! another is refused before anything is sent, and a worker that does not
//! pass --max-active takes the pool's size (before, a worker left at the
//! default of 24 in a pool of 3 kept 24 tasks active and met 429s).

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;
use common::pg::Postgres;
use common::{genapi, Dir};

fn write_jobs(dir: &Dir, file: &str, count: u64) {
    let lines: Vec<String> = (1..=count)
        .map(|n| {
            json!({"model": "gen-2-pro", "name": format!("{file}-{n}"), "prompt": format!("{file} {n}"),
                   "width": 64, "height": 64})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join(&format!("{file}.jsonl")), lines.join("\n") + "\n").unwrap();
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

async fn finish(commands: Vec<Command>) -> Vec<Output> {
    let children: Vec<_> = commands
        .into_iter()
        .map(|mut command| command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap())
        .collect();
    tokio::task::spawn_blocking(move || children.into_iter().map(|c| c.wait_with_output().unwrap()).collect())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_has_one_size_another_is_refused_and_a_worker_without_one_takes_it() {
    let Some(pg) = Postgres::start("pool-size") else {
        return;
    };
    // An account allowing 3 active tasks.
    let config = MockConfig::default()
        .default_duration(Duration::from_millis(400))
        .max_active_tasks(3)
        .request_log_capacity(10_000);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("pool-size");
    let batch = |file: &str, extra: &[&str]| {
        let mut command = genapi(&dir, &mock);
        command
            .arg("batch")
            .arg(format!("{file}.jsonl"))
            // A folder per batch: a folder holds one ledger batch.
            .args([
                "--out",
                &format!("out-{file}"),
                "--json",
                "--ledger-lease",
                "2",
                "--ledger",
            ])
            .arg(pg.url())
            .args(extra);
        command
    };
    // The pool is made with 3 seats.
    write_jobs(&dir, "first", 1);
    let first = &finish(vec![batch("first", &["--max-active", "3"])]).await[0];
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));

    // Another size is refused, naming both and the flag, before anything is sent.
    write_jobs(&dir, "other", 2);
    let sent = mock.requests().len();
    let other = &finish(vec![batch("other", &["--max-active", "24"])]).await[0];
    let said = text(&other.stderr);
    assert_eq!(other.status.code(), Some(2), "{said}");
    assert!(
        said.contains("--max-active 24") && said.contains("3 seats") && said.contains("--seats-pool"),
        "{said}"
    );
    assert!(said.contains("nothing was sent"), "{said}");
    assert_eq!(mock.requests().len(), sent, "the refused worker sent something");

    // A worker that says 3 and one left at the default share the pool's 3
    // seats: the account never meets more than 3 active tasks.
    write_jobs(&dir, "shared", 12);
    let outputs = finish(vec![batch("shared", &["--max-active", "3"]), batch("shared", &[])]).await;
    for output in &outputs {
        assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    }
    let succeeded = outputs
        .iter()
        .flat_map(|o| text(&o.stdout).lines().map(str::to_string).collect::<Vec<_>>())
        .filter(|line| serde_json::from_str::<Value>(line).is_ok_and(|o| o["status"] == "saved"))
        .count();
    assert!(succeeded >= 12, "{outputs:?}");
    let stats = mock.stats();
    assert_eq!(
        stats.too_many_requests, 0,
        "429s from an account allowing 3 active tasks"
    );
    assert!(stats.peak_active_tasks <= 3, "peak {}", stats.peak_active_tasks);
    assert_eq!(
        pg.sql("SELECT count(*) FROM genapi_seats WHERE pool = 'default' AND seat > 3 AND worker IS NOT NULL"),
        "0"
    );
}
