//! `genapi batch --status` only reads the ledger: run before the first run
//! it creates nothing (no tables, no batch, no job file digest), says the
//! batch is not there yet, and a job file corrected afterwards still runs.
//! What it says of each line is what it says of a journal's.

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

/// A PostgreSQL server, a mock and a folder whose job file asks for
/// `prompts`, each named `name`; `None` without PostgreSQL's server.
async fn set_up(name: &str, prompts: &[&str]) -> Option<(Postgres, MockService, Dir)> {
    let pg = Postgres::start(name)?;
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new(name);
    write_jobs(&dir, prompts);
    Some((pg, mock, dir))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_before_the_first_run_changes_nothing_and_says_the_batch_is_not_there() {
    let Some((pg, mock, dir)) = set_up("status-read-only", &["a red fox", "a blue whale", "a gren owl"]).await else {
        return;
    };
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
    assert_eq!(view["lines"]["unsent"], 3, "{view}");
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
        (view["exists"].clone(), view["lines"]["saved"].clone()),
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

/// The README's set-up of a shared batch, run as written against a
/// throwaway server: the superuser's two statements, the URL (with the
/// server's address for `db.internal:5432`), a worker, and `--status`,
/// which needs no `--out`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readmes_ledger_set_up_works_as_written() {
    let Some((pg, mock, dir)) = set_up("readme-set-up", &["a red fox", "a blue whale"]).await else {
        return;
    };
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let block = readme
        .split("```sh\n")
        .skip(1)
        .filter_map(|rest| rest.split("\n```").next())
        .find(|block| block.contains("CREATE ROLE"))
        .expect("the README gives the server's set-up");
    let mut url = None;
    let mut run = 0;
    for line in block.lines() {
        let command = line.split(" #").next().unwrap().trim();
        if let Some(sql) = command
            .strip_prefix("psql -c \"")
            .and_then(|rest| rest.strip_suffix('"'))
        {
            pg.sql(sql);
        } else if let Some(value) = command.strip_prefix("export GENAPI_LEDGER_URL=") {
            url = Some(value.replace("db.internal:5432", &format!("127.0.0.1:{}", pg.port)));
        } else if let Some(args) = command.strip_prefix("genapi ") {
            let mut genapi = genapi(&dir, &mock);
            genapi
                .args(args.split_whitespace())
                .env("GENAPI_LEDGER_URL", url.as_deref().expect("the URL is set before"));
            let done = output(genapi).await;
            assert_eq!(done.status.code(), Some(0), "{command}: {}", text(&done.stderr));
            if args.contains("--status") {
                assert!(text(&done.stdout).contains("(2): saved;"), "{}", text(&done.stdout));
            }
        } else {
            panic!("a line of the set-up this test does not know: {line}");
        }
        run += 1;
    }
    assert_eq!(run, 5, "{block}");
}

/// `--status` is one view of a batch wherever it is kept: the same job file
/// run in a journal folder and in a ledger reads the same, line by line
/// (what the next run does with each), and the ledger adds its counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledgers_status_says_what_the_next_run_does_with_each_line_as_a_journals_does() {
    let Some((pg, mock, dir)) = set_up(
        "status-one-view",
        &["a red fox", "[mock:request-moderated] a wolf", "a blue whale"],
    )
    .await
    else {
        return;
    };
    let batch = |out: &str, ledger: bool, extra: &[&str]| {
        let mut command = genapi(&dir, &mock);
        command.args(["batch", "jobs.jsonl", "--out", out]).args(extra);
        if ledger {
            command.arg("--ledger").arg(pg.url());
        }
        command
    };
    // The same job file kept alone in a journal, and shared in the ledger.
    let places = [("alone", false), ("shared", true)];
    for (out, ledger) in places {
        let run = output(batch(out, ledger, &[])).await;
        assert_ne!(run.status.code(), Some(0), "the moderated line fails the run");
    }
    let mut said = Vec::new();
    for (out, ledger) in places {
        let status = output(batch(out, ledger, &["--status"])).await;
        assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
        said.push(text(&status.stdout));
    }
    let [alone, shared] = &said[..] else { unreachable!() };
    let sentences = |said: &str| -> Vec<String> {
        said.lines()
            .filter(|line| line.starts_with("  line"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(sentences(alone).len(), 2, "{alone}");
    assert_eq!(sentences(alone), sentences(shared), "{alone}\n{shared}");
    assert!(shared.contains("line 2: ended for good"), "{shared}");
    assert!(
        shared.contains(": 3.16 credits charged, 0.00 counted"),
        "two lines saved at 1.58: {shared}"
    );
    for (out, ledger) in places {
        let json = output(batch(out, ledger, &["--status", "--json"])).await;
        let view: Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(
            (&view["lines"]["saved"], &view["lines"]["ended"]),
            (&json!(2), &json!(1)),
            "{view}"
        );
    }
}
