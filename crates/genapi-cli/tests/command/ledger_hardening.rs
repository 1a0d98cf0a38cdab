//! The ledger when things go wrong, as the command meets it: a table
//! changed by hand, records the database refuses, a job file changed under
//! its batch's name, a built-in mock, and TLS settings from the environment.

use std::process::{Command, Stdio};

use genapi_mock::MockService;
use serde_json::Value;

use crate::common::pg::{Ca, Postgres, Setup};
use crate::common::{genapi, posts_by_prompt, roomy_mock, run_until_sent, Dir};

use crate::common::write_jobs;

fn worker(dir: &Dir, mock: &MockService, pg: &Postgres, out: &str, extra: &[&str]) -> Command {
    let mut command = genapi(dir, mock);
    command
        .args(["batch", "jobs.jsonl", "--out", out, "--json", "--ledger"])
        .arg(pg.url())
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// A table changed by hand (a column dropped) is found when the ledger
/// is opened, before anything is paid for, not when a paid task cannot
/// be recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_table_changed_by_hand_is_refused_before_anything_is_sent() {
    let Some(pg) = Postgres::start("changed-table") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let dir = Dir::new("changed-table");
    write_jobs(&dir.join("jobs.jsonl"), 2, "changed table");
    let first = worker(&dir, &mock, &pg, "out", &[]).output().unwrap();
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
    pg.sql("ALTER TABLE genapi_lines DROP COLUMN charged");
    write_jobs(&dir.join("jobs.jsonl"), 3, "changed table");
    let refused = worker(&dir, &mock, &pg, "out-2", &["--batch-name", "after-the-change"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_ne!(refused.status.code(), Some(0), "{said}");
    assert!(
        said.contains("genapi_lines") && said.contains("not as genapi made it"),
        "{said}"
    );
    assert!(said.contains("nothing was sent"), "{said}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing more was sent");
}

/// A paid task whose records the ledger refuses is still waited for and
/// saved, but the run names the task and does not end as a success: a
/// later run could not know it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paid_task_the_ledger_cannot_record_is_reported_with_its_id_and_a_failing_exit() {
    let Some(pg) = Postgres::start("unrecorded") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let dir = Dir::new("unrecorded");
    write_jobs(&dir.join("jobs.jsonl"), 2, "unrecorded");
    // The tables exist (opening a ledger made them), then the records of
    // paid tasks are refused by the database, as a failing disk would.
    genapi_ledger::Ledger::open(&pg.url(), "tables", "no jobs")
        .await
        .unwrap();
    pg.sql(
        "CREATE FUNCTION refuse_accepted() RETURNS trigger AS $$ BEGIN
             IF NEW.record->>'event' IN ('accepted', 'finished') THEN
                 RAISE EXCEPTION 'no room for these records';
             END IF;
             RETURN NEW;
         END $$ LANGUAGE plpgsql;
         CREATE TRIGGER refuse_accepted BEFORE INSERT ON genapi_records
             FOR EACH ROW EXECUTE FUNCTION refuse_accepted();",
    );
    let run = worker(&dir, &mock, &pg, "out", &[]).output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(1), "{said}");
    let tasks = mock.created_tasks();
    assert_eq!(tasks.len(), 2, "each line sent once");
    let reported: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect();
    for task in &tasks {
        let outcome = reported.iter().find(|outcome| outcome["task_id"] == task.id.as_str());
        let outcome = outcome.unwrap_or_else(|| panic!("task {} is not named: {reported:#?}", task.id));
        let error = outcome["error"].as_str().unwrap_or("");
        assert!(
            error.contains(&task.id) && error.contains("could not be recorded"),
            "{outcome}"
        );
        let line = outcome["line"].as_u64().unwrap();
        assert!(
            error.contains(&format!("--adopt {line}={}", task.id)),
            "the flag that adopts it: {outcome}"
        );
    }
    assert!(
        dir.join("out/img-1.jpg").is_file() && dir.join("out/img-2.jpg").is_file(),
        "the results are saved"
    );
}

/// A worker started after a line was appended, on another machine (its
/// own output directory): the batch is the job file's, by name, so the
/// changed file is refused; nothing is paid for again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_file_changed_under_its_batch_name_is_refused_not_paid_for_again() {
    let Some(pg) = Postgres::start("changed-job-file") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let dir = Dir::new("changed-job-file");
    write_jobs(&dir.join("jobs.jsonl"), 3, "append");
    let first = worker(&dir, &mock, &pg, "out-machine-a", &[]).output().unwrap();
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    write_jobs(&dir.join("jobs.jsonl"), 4, "append");
    let second = worker(&dir, &mock, &pg, "out-machine-b", &[]).output().unwrap();
    let said = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(2), "{said}");
    assert!(
        said.contains("before it changed") && said.contains("batch name"),
        "{said}"
    );
    let posts = posts_by_prompt(&mock);
    for line in 1..=3 {
        assert_eq!(
            posts.get(&format!("append {line}")),
            Some(&1),
            "line {line} paid for again: {posts:?}"
        );
    }
    assert_eq!(posts.get("append 4"), None, "nothing sent by the refused worker");
}

/// Before any worker ran, every line is unsent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_counts_the_lines_no_worker_has_reached() {
    let Some(pg) = Postgres::start("status-not-started") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let dir = Dir::new("status-not-started");
    write_jobs(&dir.join("jobs.jsonl"), 5, "status");
    let status = worker(&dir, &mock, &pg, "out", &["--status"]).output().unwrap();
    assert_eq!(
        status.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let view: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(view["lines"]["unsent"], 5, "{view}");
    let total: u64 = genapi_batch::Standing::ALL
        .iter()
        .map(|standing| view["lines"][standing.as_str()].as_u64().unwrap())
        .sum();
    assert_eq!(total, 5, "the job file has 5 lines; --status says {view}");
}

/// `--ledger` with no service configured would share a batch whose tasks
/// live in this worker's own built-in mock: refused before anything.
#[test]
fn a_ledger_is_refused_for_a_worker_on_its_own_built_in_mock() {
    let dir = Dir::new("ledger-builtin-mock");
    write_jobs(&dir.join("jobs.jsonl"), 2, "builtin");
    let run = crate::common::genapi_alone(&dir)
        .args([
            "batch",
            "jobs.jsonl",
            "--out",
            "out",
            "--ledger",
            "postgres://nobody@127.0.0.1:1/none",
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(said.contains("built-in") && said.contains("GENAPI_BASE_URL"), "{said}");
    assert!(!dir.join("out").exists(), "nothing was done");
}

/// As with libpq, `PGSSLMODE` and `PGSSLROOTCERT` stand for what the
/// URL does not say: the command checks the server against the CA they
/// name, refuses it against another CA, and the URL's own `sslmode`
/// wins over them.
#[test]
fn the_environments_sslmode_and_sslrootcert_are_honoured_as_libpq_does() {
    let ca = Ca::new("environment test CA");
    let setup = Setup {
        tls: Some(ca.server(&["localhost", "127.0.0.1"])),
        ..Setup::default()
    };
    let Some(pg) = Postgres::start_with("tls-environment", setup) else {
        return;
    };
    let dir = Dir::new("tls-environment");
    std::fs::write(
        dir.join("jobs.jsonl"),
        "{\"model\": \"gen-2-pro\", \"prompt\": \"x\"}\n",
    )
    .unwrap();
    let right = ca.file(&dir);
    let wrong = Ca::new("another CA").file(&dir);
    let status = |query: &str, root: &str| {
        crate::common::genapi_alone(&dir)
            .env("GENAPI_API_KEY", "k-unused")
            .env("GENAPI_BASE_URL", "http://127.0.0.1:9")
            .env("PGSSLMODE", "verify-full")
            .env("PGSSLROOTCERT", root)
            .args(["batch", "jobs.jsonl", "--status", "--ledger"])
            .arg(pg.url_at("127.0.0.1", query))
            .output()
            .unwrap()
    };
    let text = |run: &std::process::Output| String::from_utf8_lossy(&run.stderr).into_owned();
    let checked = status("application_name=env", &right);
    assert_eq!(checked.status.code(), Some(0), "{}", text(&checked));
    let refused = status("application_name=env", &wrong);
    assert_ne!(refused.status.code(), Some(0));
    assert!(text(&refused).contains("certificate"), "{}", text(&refused));
    let overridden = status("sslmode=disable&application_name=env", &wrong);
    assert_eq!(overridden.status.code(), Some(0), "the URL wins: {}", text(&overridden));
}

/// Runs `command`, which must be refused (exit 2) saying `words`.
fn refused_saying(mut command: Command, words: &str) {
    let refused = command.output().unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains(words), "{said}");
}

/// One folder, one store: a folder a run without the ledger used is refused
/// for a run with it, and the other way round, before anything is sent:
/// neither store knows the other's tasks, and would pay for them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_is_never_run_by_the_journal_and_the_ledger_in_turn() {
    let Some(pg) = Postgres::start("journal-and-ledger") else {
        return;
    };
    // Tasks that outlive the runs: each run stops with them accepted.
    let mock = roomy_mock(3_600_000).await;
    let dir = Dir::new("journal-and-ledger");
    write_jobs(&dir.join("jobs.jsonl"), 2, "one store");
    let posts = || mock.count("POST", "/v1/gen-2-pro");

    let mut journal_run = genapi(&dir, &mock);
    journal_run.args(["batch", "jobs.jsonl", "--out", "by-journal"]);
    run_until_sent(journal_run, &mock, 2).await;
    let refused = worker(&dir, &mock, &pg, "by-journal", &["--batch-name", "b1"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("a run without --ledger") && said.contains("nothing was sent"),
        "{said}"
    );
    assert_eq!(posts(), 2, "the ledger sent nothing");

    let stopped = run_until_sent(worker(&dir, &mock, &pg, "by-ledger", &["--batch-name", "b2"]), &mock, 4).await;
    // Its two lines accepted and left running: the next run's, not "not
    // sent yet".
    let said = String::from_utf8_lossy(&stopped.stderr);
    assert!(
        said.contains("stopped at 0/2 done")
            && said.contains("2 left to the next run")
            && !said.contains("not sent yet"),
        "{said}"
    );
    let mut command = genapi(&dir, &mock);
    command.args(["batch", "jobs.jsonl", "--out", "by-ledger"]);
    refused_saying(command, "a run with --ledger used this folder");
    assert_eq!(posts(), 4, "the journal sent nothing");
    // --status without the ledger says so too, rather than "not sent".
    let mut command = genapi(&dir, &mock);
    command.args(["batch", "jobs.jsonl", "--out", "by-ledger", "--status"]);
    refused_saying(command, "see where it stands");

    // A mark an earlier release wrote (the batch, then the address as
    // shown) is the same ledger's when the address is: the batch resumes
    // there, and the mark is written anew.
    let mark = std::fs::read_to_string(dir.join("by-ledger/.ledger-batch")).unwrap();
    let lines: Vec<&str> = mark.lines().collect();
    assert!(lines[1].starts_with("ledger "), "{mark}");
    std::fs::write(
        dir.join("by-ledger/.ledger-batch"),
        format!("{}\n{}", lines[0], lines[2]),
    )
    .unwrap();
    let resumed = worker(&dir, &mock, &pg, "by-ledger", &["--batch-name", "b2", "--timeout", "3"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&resumed.stderr);
    assert!(!said.contains("used this folder"), "{said}");
    assert_eq!(
        std::fs::read_to_string(dir.join("by-ledger/.ledger-batch")).unwrap(),
        mark
    );
    assert_eq!(posts(), 4, "its accepted tasks are polled, not sent again");

    // The same batch name in another database of the same server (its
    // name given in the address's query, which no address shows) knows
    // none of its tasks either.
    pg.sql("CREATE DATABASE other");
    let mut elsewhere = genapi(&dir, &mock);
    elsewhere
        .args([
            "batch",
            "jobs.jsonl",
            "--out",
            "by-ledger",
            "--json",
            "--batch-name",
            "b2",
            "--ledger",
        ])
        .arg(pg.url_at("127.0.0.1", "dbname=other&connect_timeout=120"));
    refused_saying(elsewhere, "batch \"b2\" in another ledger database");
    assert_eq!(posts(), 4, "nothing more was sent");

    // Another ledger batch in the marked folder knows none of its tasks.
    refused_saying(
        worker(&dir, &mock, &pg, "by-ledger", &["--batch-name", "b3"]),
        "another ledger batch (\"b2\") used this folder",
    );
    // Nor does a ledger batch in a folder whose journal was moved away,
    // though its results say the lines were sent.
    std::fs::rename(dir.join("by-journal/journal.jsonl"), dir.join("journal.bak")).unwrap();
    refused_saying(
        worker(&dir, &mock, &pg, "by-journal", &["--batch-name", "b4"]),
        "the ledger's batch holds no record",
    );
    assert_eq!(posts(), 4, "nothing more was sent");
}

/// A run by the journal and a run by a ledger started in one new folder at
/// once: whichever holds the folder first keeps the other out, though
/// neither has written anything the other could read yet (an empty
/// journal, no mark). And two ledger runs check and mark a folder one at a
/// time. Here the test holds the locks as such a run would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_held_by_another_run_is_not_shared_by_a_ledger_run() {
    let Some(pg) = Postgres::start("folder-held") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let dir = Dir::new("folder-held");
    write_jobs(&dir.join("jobs.jsonl"), 2, "held folder");
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();

    // A run by the journal holds the folder (its journal still empty).
    let journal = genapi_batch::FileJournal::open(out.join("journal.jsonl")).unwrap();
    let refused = worker(&dir, &mock, &pg, "out", &["--batch-name", "held"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(said.contains("a run without --ledger is using this folder"), "{said}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing was sent");
    drop(journal);
    std::fs::remove_file(out.join("journal.jsonl")).unwrap();

    // Another ledger run is checking the folder, and never lets go.
    let marking = std::fs::File::create(out.join(".ledger-batch.lock")).unwrap();
    marking.lock().unwrap();
    let waited = worker(&dir, &mock, &pg, "out", &["--batch-name", "other", "--timeout", "3"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&waited.stderr);
    assert_ne!(waited.status.code(), Some(0), "{said}");
    assert!(said.contains("another run with --ledger was checking"), "{said}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing was sent");
    assert!(!out.join(".ledger-batch").exists(), "nor was the folder marked");
}

/// A finished ledger batch's job file copied with a line inserted on top
/// and run into the same folder (its new name names another batch) is
/// refused, as the journal refuses the same edit: that batch's records of
/// paid tasks are not this one's, and its jobs would be paid again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_copy_of_a_finished_batch_is_refused_in_its_folder() {
    let Some(pg) = Postgres::start("edited-copy") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let dir = Dir::new("edited-copy");
    let jobs = |file: &str, prompts: &[&str]| {
        let lines: Vec<String> = prompts
            .iter()
            .map(|p| serde_json::json!({"model": "gen-2-pro", "prompt": p, "width": 64, "height": 64}).to_string())
            .collect();
        std::fs::write(dir.join(file), lines.join("\n") + "\n").unwrap();
    };
    jobs("first.jsonl", &["alpha", "bravo"]);
    jobs("second.jsonl", &["zulu", "alpha", "bravo"]);
    let run = |file: &str| {
        let mut command = genapi(&dir, &mock);
        command
            .args(["batch", file, "--out", "out", "--ledger"])
            .arg(pg.url())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    };
    let first = run("first.jsonl").output().unwrap();
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    refused_saying(
        run("second.jsonl"),
        "another ledger batch (\"jobs:firstjsonl\") used this folder",
    );
    // A mark with a byte that is not text names no batch: still refused.
    let mark = dir.join("out/.ledger-batch");
    let mut bytes = std::fs::read(&mark).unwrap();
    bytes.push(0xff);
    std::fs::write(&mark, &bytes).unwrap();
    refused_saying(run("second.jsonl"), "used this folder");
    // One that cannot be read at all is refused, not taken for none, with
    // the ledger and without it.
    std::fs::remove_file(&mark).unwrap();
    std::fs::create_dir(&mark).unwrap();
    refused_saying(run("second.jsonl"), "its ledger mark (.ledger-batch) cannot be read");
    let mut journal_run = genapi(&dir, &mock);
    journal_run.args(["batch", "second.jsonl", "--out", "out"]);
    refused_saying(journal_run, "its ledger mark (.ledger-batch) cannot be read");
    // Nor is a link at its name, even to nothing.
    std::fs::remove_dir(&mark).unwrap();
    std::os::unix::fs::symlink(dir.join("nowhere"), &mark).unwrap();
    refused_saying(run("second.jsonl"), "its ledger mark (.ledger-batch) cannot be read");
    let paid = posts_by_prompt(&mock);
    assert_eq!(paid.get("bravo"), Some(&1), "{paid:?}");
    assert_eq!(paid.get("zulu"), None, "{paid:?}");
}

/// A line the ledger knows only by its claim (its records lost: a database
/// restored from a copy taken between the claim and the intent) holds no
/// record: results that say it was sent refuse the run, as a journal
/// without the line's records does, rather than sending it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_the_ledger_knows_only_by_its_claim_holds_no_record() {
    use genapi_mock::{Fault, FaultKind};
    let Some(pg) = Postgres::start("claim-only") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let dir = Dir::new("claim-only");
    write_jobs(&dir.join("jobs.jsonl"), 1, "claim only");
    mock.inject(
        Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer)
            .method("POST")
            .times(1),
    );
    let lost = worker(&dir, &mock, &pg, "out", &[]).output().unwrap();
    assert_eq!(lost.status.code(), Some(9), "{}", String::from_utf8_lossy(&lost.stderr));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);
    let claimed = pg.sql("SELECT count(*) FROM genapi_lines");
    assert_eq!(claimed.trim(), "1", "the line's claim stays");
    pg.sql("DELETE FROM genapi_records");
    refused_saying(
        worker(&dir, &mock, &pg, "out", &[]),
        "the ledger's batch holds no record",
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "not sent again");
}

/// A line another worker saved (this folder's results say so, without the
/// image, which is in that worker's folder) whose records the ledger lost
/// refuses the run too: it would be paid again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_saved_by_another_worker_whose_records_were_lost_is_not_paid_again() {
    let Some(pg) = Postgres::start("saved-elsewhere-lost") else {
        return;
    };
    let mock = roomy_mock(100).await;
    let dir = Dir::new("saved-elsewhere-lost");
    write_jobs(&dir.join("jobs.jsonl"), 2, "saved elsewhere");
    let first = worker(&dir, &mock, &pg, "out", &["--batch-name", "shared"])
        .output()
        .unwrap();
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    // This folder's results, as a second worker that found both lines
    // saved by the first one writes them: saved, no file here.
    let second = worker(&dir, &mock, &pg, "out-2", &["--batch-name", "shared"])
        .output()
        .unwrap();
    assert_eq!(
        second.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let results = std::fs::read_to_string(dir.join("out-2/results.jsonl")).unwrap();
    assert!(results.contains("\"saved\""), "{results}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
    pg.sql("DELETE FROM genapi_records WHERE line = 1");
    pg.sql("UPDATE genapi_lines SET done = false, worker = NULL, lease_until = NULL WHERE line = 1");
    refused_saying(
        worker(&dir, &mock, &pg, "out-2", &["--batch-name", "shared"]),
        "the ledger's batch holds no record",
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "not sent again");
}
