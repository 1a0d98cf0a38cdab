//! The credit cap, the ledger and shared seats when things go wrong: lost
//! answers, a changed job file, odd database contents, a database that goes
//! away, a service repeating task ids.

use std::time::Duration;

use futures::StreamExt;
use genapi::batch::{Batch, Job, JobOutcome, JobStatus, MemoryJournal};
use genapi_mock::{Fault, FaultKind, MockConfig, MockService};
use serde_json::json;

use crate::common;
use common::Dir;

fn sized_jobs(count: u64, tag: &str) -> Vec<Job> {
    (1..=count)
        .map(|n| {
            Job::new(
                n,
                "/v1/gen-2-pro",
                json!({"prompt": format!("{tag} {n}"), "width": 256, "height": 256}),
            )
            .name(format!("img-{n}"))
        })
        .collect()
}

/// A batch under a credit cap whose first submission goes unanswered: its
/// hold stays (it may have been charged) but is not waited for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_submission_under_a_credit_cap_does_not_hold_the_batch_back() {
    let config = MockConfig::default()
        .default_duration(Duration::from_millis(100))
        .price_per_mp(300.0 / 7.0);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    mock.set_credits(Some(100.0));
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let dir = Dir::new("cap-unanswered");
    let batch = Batch::new(mock.client().unwrap(), MemoryJournal::default(), &dir.0)
        .limit(1)
        .max_credits(30.0);
    let run = async {
        let outcomes: Vec<JobOutcome> = batch.run(sized_jobs(3, "hang")).unwrap().collect().await;
        outcomes
    };
    let outcomes = tokio::time::timeout(Duration::from_secs(20), run).await;
    let outcomes = outcomes.expect("the batch hung: 20 s and still waiting for credits held by an unanswered line");
    assert_eq!(outcomes.len(), 3);
    assert!(outcomes.iter().any(|o| o.status == JobStatus::Unknown));
}

/// Run again after its first submission went unanswered, with nothing
/// charged yet: what that task cost is unknown, so it may have taken the
/// whole cap, and nothing more is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_after_an_unanswered_first_submission_stays_under_the_cap() {
    let config = MockConfig::default()
        .default_duration(Duration::from_millis(50))
        .price_per_mp(300.0 / 7.0);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    mock.set_credits(Some(1_000.0));
    let dir = Dir::new("cap-rerun");
    let journal = MemoryJournal::default();
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let first = Batch::new(mock.client().unwrap(), journal.clone(), &dir.0).max_credits(30.0);
    let outcomes: Vec<JobOutcome> = first.run(sized_jobs(1, "rerun")).unwrap().collect().await;
    assert_eq!(outcomes[0].status, JobStatus::Unknown, "{outcomes:#?}");
    let again = Batch::new(mock.client().unwrap(), journal, &dir.0).max_credits(30.0);
    let run = async { again.run(sized_jobs(20, "rerun")).unwrap().collect::<Vec<_>>().await };
    tokio::time::timeout(Duration::from_secs(60), run).await.unwrap();
    let charged = 1_000.0 - mock.credits().unwrap();
    assert!(
        charged <= 30.0,
        "a cap of 30 credits, yet the service charged {charged}"
    );
}

mod ledger {
    use std::process::{Command, Stdio};
    use std::time::Duration;

    use genapi_mock::{MockConfig, MockService};
    use serde_json::{json, Value};

    use super::common::pg::Postgres;
    use super::common::{genapi, hostile, posts_by_prompt, Dir};

    async fn service() -> MockService {
        let config = MockConfig::default()
            .default_duration(Duration::from_millis(100))
            .request_log_capacity(100_000);
        MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap()
    }

    fn write_jobs(path: &std::path::Path, count: u64, tag: &str) {
        let lines: Vec<String> = (1..=count)
            .map(|n| {
                json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("{tag} {n}"),
                       "width": 64, "height": 64})
                .to_string()
            })
            .collect();
        std::fs::write(path, lines.join("\n") + "\n").unwrap();
    }

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

    /// A worker started after a line was appended, on another machine (its
    /// own output directory): the batch is the job file's, by name, so the
    /// changed file is refused; nothing is paid for again.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_job_file_changed_under_its_batch_name_is_refused_not_paid_for_again() {
        let Some(pg) = Postgres::start("changed-job-file") else {
            return;
        };
        let mock = service().await;
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

    /// Before any worker ran, every line is "not started".
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn status_counts_the_lines_no_worker_has_reached() {
        let Some(pg) = Postgres::start("status-not-started") else {
            return;
        };
        let mock = service().await;
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
        assert_eq!(view["not_started"], 5, "{view}");
        let total: u64 = ["done", "failed", "in_flight", "unknown", "open", "not_started"]
            .iter()
            .map(|k| view[k].as_u64().unwrap())
            .sum();
        assert_eq!(total, 5, "the job file has 5 lines; --status says {view}");
    }

    /// A seat row with a NULL where a value belongs (odd database contents):
    /// skipped, never a panic.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_null_in_a_seat_row_is_skipped_without_a_panic() {
        let Some(pg) = Postgres::start("null-seat") else { return };
        let mock = service().await;
        let seats = genapi::ledger::SharedSeats::connect(&pg.url(), "odd", 1).await.unwrap();
        pg.sql(
            "UPDATE genapi_seats SET worker = 'ghost', lease_until = now() - interval '1 hour', task_id = 't', \
             polling_url = NULL, taken_at = now() WHERE pool = 'odd'",
        );
        let client = mock.client_builder().shared_seats(seats).build().unwrap();
        let submitting = tokio::spawn(async move {
            let request = genapi::api::types::Gen2ProRequest::builder()
                .prompt("odd")
                .width(64)
                .height(64);
            client.submit(request).await.map(|_| ())
        });
        // Still waiting for the only seat (its ghost's task cannot be
        // checked), and never a panic.
        let outcome = tokio::time::timeout(Duration::from_secs(5), submitting).await;
        assert!(outcome.is_err(), "{outcome:?}");
    }

    /// The database goes away (a restart, a failover): a submission waiting
    /// for a seat gives up with an error that says so, instead of waiting for
    /// ever, and sends nothing.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_lost_database_fails_a_shared_seat_submission_and_sends_nothing() {
        let Some(pg) = Postgres::start("database-gone") else {
            return;
        };
        let mock = service().await;
        let seats = genapi::ledger::SharedSeats::connect(&pg.url(), "gone", 4)
            .await
            .unwrap();
        let client = mock.client_builder().shared_seats(seats).build().unwrap();
        drop(pg);
        let request = genapi::api::types::Gen2ProRequest::builder()
            .prompt("gone")
            .width(64)
            .height(64);
        let submitted = tokio::time::timeout(Duration::from_secs(45), client.submit(request)).await;
        let error = submitted
            .expect("still waiting for a seat after 45 s with the database gone")
            .unwrap_err();
        assert!(matches!(error, genapi::Error::SharedLimit { .. }), "{error}");
        assert!(error.to_string().contains("nothing was sent"), "{error}");
        assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);
    }

    /// A hostile service answering two submissions with the same task id:
    /// one task, one seat, freed when it is seen final; no seat leaks.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_task_id_the_service_repeats_keeps_one_seat() {
        let Some(pg) = Postgres::start("repeated-id") else {
            return;
        };
        let service = hostile::serve(|base, request, _| match request.path.as_str() {
            "/v1/gen-2-pro" => hostile::accepted(base, "dup"),
            "/v1/get_result" => hostile::json(200, json!({"id": "dup", "status": "Error", "result": null})),
            _ => hostile::json(404, json!({})),
        })
        .await;
        let seats = genapi::ledger::SharedSeats::connect(&pg.url(), "dup", 2).await.unwrap();
        let client = service.client_builder().shared_seats(seats.clone()).build().unwrap();
        let request = || {
            genapi::api::types::Gen2ProRequest::builder()
                .prompt("dup")
                .width(64)
                .height(64)
        };
        let a = client.submit(request()).await.unwrap();
        let b = client.submit(request()).await.unwrap();
        let _ = a.wait().await;
        let _ = b.wait().await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(
            seats.taken().await.unwrap(),
            0,
            "both tasks were seen final; a seat stays taken"
        );
    }

    /// A submission whose answer never came (the service created the task)
    /// keeps its shared seat, so the next one does not go out into a full
    /// account and meet a 429.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_unanswered_submission_keeps_its_shared_seat() {
        let Some(pg) = Postgres::start("unanswered-seat") else {
            return;
        };
        let config = MockConfig::default()
            .default_duration(Duration::from_secs(5))
            .max_active_tasks(1)
            .request_log_capacity(1_000);
        let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        mock.inject(genapi_mock::Fault::on("/v1/gen-2-pro", genapi_mock::FaultKind::LoseAnswer).method("POST"));
        let seats = genapi::ledger::SharedSeats::connect(&pg.url(), "unanswered", 1)
            .await
            .unwrap();
        let client = mock.client_builder().shared_seats(seats.clone()).build().unwrap();
        let request = |p: &str| {
            genapi::api::types::Gen2ProRequest::builder()
                .prompt(p)
                .width(64)
                .height(64)
        };
        assert!(client.submit(request("lost")).await.is_err(), "the answer was lost");
        tokio::time::sleep(Duration::from_millis(300)).await;
        let taken = seats.taken().await.unwrap();
        let second = tokio::time::timeout(Duration::from_secs(2), client.submit(request("next"))).await;
        let refused = mock.stats().too_many_requests;
        assert_eq!(taken, 1, "the lost submission's task runs, yet its seat was given back");
        assert_eq!(
            refused, 0,
            "the next submission went out into a full account: {second:?}"
        );
    }

    /// `--ledger` with no service configured would share a batch whose tasks
    /// live in this worker's own built-in mock: refused before anything.
    #[test]
    fn a_ledger_is_refused_for_a_worker_on_its_own_built_in_mock() {
        let dir = Dir::new("ledger-builtin-mock");
        write_jobs(&dir.join("jobs.jsonl"), 2, "builtin");
        let run = super::common::genapi_alone(&dir)
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

    /// A dead worker's seat whose task cannot be checked (its host is gone)
    /// comes back once a task taken then can no longer be running.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dead_workers_seat_whose_task_cannot_be_checked_comes_back_in_time() {
        let Some(pg) = Postgres::start("uncheckable-seat") else {
            return;
        };
        let mock = service().await;
        let seats = genapi::ledger::SharedSeats::connect_with(
            &pg.url(),
            "stranded",
            1,
            Duration::from_secs(1),
            Duration::from_secs(3),
        )
        .await
        .unwrap();
        pg.sql(
            "UPDATE genapi_seats SET worker = 'gone', lease_until = now() - interval '1 second', task_id = 't', \
             polling_url = 'http://127.0.0.1:1/v1/get_result?id=t', taken_at = now() WHERE pool = 'stranded'",
        );
        let client = mock.client_builder().shared_seats(seats.clone()).build().unwrap();
        let started = std::time::Instant::now();
        let request = genapi::api::types::Gen2ProRequest::builder()
            .prompt("stranded")
            .width(64)
            .height(64);
        let task = tokio::time::timeout(Duration::from_secs(30), client.submit(request))
            .await
            .expect("the stranded seat never came back")
            .unwrap();
        assert!(started.elapsed() >= Duration::from_secs(2), "not before the hold");
        task.wait().await.unwrap();
        // Given back at once when the program says it is done.
        seats.flush().await;
        assert_eq!(seats.taken().await.unwrap(), 0);
    }
}
