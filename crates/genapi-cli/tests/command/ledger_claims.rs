//! Workers claim lines without meeting each other: one worker's commits per
//! line, counted by the server (`pg_stat_database`), stay within what the
//! design allows under any timing, and four workers share a batch with each
//! line paid once. What four workers add per line depends on how often
//! they find each other's lines held, which a slower machine moves: that
//! figure is the ledger bench's (`cargo bench -p genapi-cli --bench
//! ledger`), not a test's.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::json;

use crate::common;
use common::pg::{Postgres, PASSWORD};
use common::{genapi, posts_by_prompt, Dir};

const LINES: u64 = 400;

/// The most transactions per line one worker commits, however the run is
/// timed: each line's own records (its intent, carrying its seat's taking,
/// its acceptance, carrying the seat's task, and its end, which goes with a
/// later record when one comes within 250 ms and alone otherwise, as on a
/// busy machine), its claim (a statement claims a block, at worst a line);
/// and what the worker does once (connecting, checking the tables, its
/// name, preparing its statements), spread over the lines. How close a run
/// comes to the three a line it takes when every end is carried is timing,
/// and is measured by the ledger bench (`cargo bench -p genapi-cli --bench
/// ledger`), not here.
const MOST_PER_LINE: f64 = 4.5;

fn worker(dir: &Dir, mock: &MockService, url: &str) -> Command {
    let mut command = genapi(dir, mock);
    command
        .args([
            "batch",
            "jobs.jsonl",
            "--out",
            "out",
            "--quiet",
            "--max-active",
            "8",
            "--ledger",
            url,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    command
}

/// Transactions committed in database `name` so far, once every
/// connection to it has ended (a backend reports its counts as it ends).
fn committed(pg: &Postgres, name: &str) -> f64 {
    let query = format!(
        "SELECT (SELECT count(*) FROM pg_stat_activity WHERE datname = '{name}'), \
         (SELECT xact_commit FROM pg_stat_database WHERE datname = '{name}')"
    );
    // Statistics have no signal of their own: read until no backend of the
    // database is left and two readings agree.
    let mut last = String::new();
    for _ in 0..100 {
        let now = pg.sql(&query);
        if now.starts_with("0|") && now == last {
            return now.split('|').nth(1).unwrap().parse().unwrap();
        }
        last = now;
        std::thread::sleep(Duration::from_millis(100));
    }
    panic!("the statistics of {name} did not settle: {last}");
}

/// Runs `workers` workers over the batch in a database of their own, and
/// returns the transactions committed there per line.
async fn per_line(pg: &Postgres, mock: &MockService, workers: usize) -> f64 {
    let name = format!("claims_{workers}");
    pg.sql(&format!("CREATE DATABASE {name}"));
    let url = format!("postgres://postgres:{PASSWORD}@127.0.0.1:{}/{name}", pg.port);
    let dir = Dir::new(&format!("ledger-claims-{workers}"));
    let lines: Vec<String> = (1..=LINES)
        .map(|n| {
            json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("{name} {n}"),
                   "width": 64, "height": 64})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    let before = tokio::task::block_in_place(|| committed(pg, &name));
    let children: Vec<_> = (0..workers)
        .map(|_| worker(&dir, mock, &url).spawn().unwrap())
        .collect();
    let outputs: Vec<Output> = tokio::task::spawn_blocking(move || {
        children
            .into_iter()
            .map(|child| child.wait_with_output().unwrap())
            .collect()
    })
    .await
    .unwrap();
    for output in &outputs {
        assert_eq!(
            output.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let posts = posts_by_prompt(mock);
    for n in 1..=LINES {
        assert_eq!(posts.get(&format!("{name} {n}")), Some(&1), "line {n}");
    }
    let after = tokio::task::block_in_place(|| committed(pg, &name));
    (after - before) / LINES as f64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_worker_commits_no_more_per_line_than_the_design_allows_and_four_pay_each_line_once() {
    let Some(pg) = Postgres::start("claims") else {
        return;
    };
    let config = MockConfig::default()
        .default_duration(Duration::from_millis(50))
        .request_log_capacity(100_000);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    // Side by side, each in a database of its own: the server counts
    // each database's commits apart.
    let (one, four) = tokio::join!(per_line(&pg, &mock, 1), per_line(&pg, &mock, 4));
    eprintln!("transactions per line: {one:.2} with one worker, {four:.2} with four (a figure, not a verdict)");
    assert!(one <= MOST_PER_LINE, "{one:.2} transactions per line with one worker");
}
