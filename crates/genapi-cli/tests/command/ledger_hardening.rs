//! The credit cap, the ledger and shared seats when things go wrong: lost
//! answers, a changed job file, odd database contents, a database that goes
//! away, a service repeating task ids.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, Job, JobOutcome, JobStatus, MemoryJournal};
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
        let mock = service().await;
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
        let refused = worker(&dir, &mock, &pg, "out", &["--batch-name", "after-the-change"])
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
        let mock = service().await;
        let dir = Dir::new("unrecorded");
        write_jobs(&dir.join("jobs.jsonl"), 2, "unrecorded");
        // The tables exist (opening a ledger made them), then the records of
        // paid tasks are refused by the database, as a failing disk would.
        genapi_batch::ledger::Ledger::open(&pg.url(), "tables", "no jobs")
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
        assert_eq!(
            run.status.code(),
            Some(i32::from(genapi::FailureClass::Write.exit_code())),
            "{said}"
        );
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
        let seats = genapi_batch::ledger::SharedSeats::connect(&pg.url(), "odd", 1)
            .await
            .unwrap();
        pg.sql(
            "UPDATE genapi_seats SET worker = 'ghost', lease_until = now() - interval '1 hour', task_id = 't', \
             polling_url = NULL, taken_at = now() WHERE pool = 'odd'",
        );
        let client = mock
            .client_builder()
            .shared_places(seats.places(), seats.limit())
            .build()
            .unwrap();
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
        // Each step within 2 s: the submission gives up after one step.
        let options = genapi_batch::ledger::LedgerOptions::default().step_deadline(Duration::from_secs(2));
        let hold = genapi_batch::ledger::UNANSWERED_SEAT_HOLD;
        let seats = genapi_batch::ledger::SharedSeats::connect_with(&pg.url(), "gone", 4, &options, hold)
            .await
            .unwrap();
        let client = mock
            .client_builder()
            .shared_places(seats.places(), seats.limit())
            .build()
            .unwrap();
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
        let seats = genapi_batch::ledger::SharedSeats::connect(&pg.url(), "dup", 2)
            .await
            .unwrap();
        let client = service
            .client_builder()
            .shared_places(seats.places(), seats.limit())
            .build()
            .unwrap();
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
        let seats = genapi_batch::ledger::SharedSeats::connect(&pg.url(), "unanswered", 1)
            .await
            .unwrap();
        let client = mock
            .client_builder()
            .shared_places(seats.places(), seats.limit())
            .build()
            .unwrap();
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
        let seats = genapi_batch::ledger::SharedSeats::connect_with(
            &pg.url(),
            "stranded",
            1,
            &genapi_batch::ledger::LedgerOptions::default().lease(Duration::from_secs(1)),
            Duration::from_secs(3),
        )
        .await
        .unwrap();
        pg.sql(
            "UPDATE genapi_seats SET worker = 'gone', lease_until = now() - interval '1 second', task_id = 't', \
             polling_url = 'http://127.0.0.1:1/v1/get_result?id=t', taken_at = now() WHERE pool = 'stranded'",
        );
        let client = mock
            .client_builder()
            .shared_places(seats.places(), seats.limit())
            .build()
            .unwrap();
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

/// The ledger's connection as the URL's `sslmode`, `sslrootcert` and
/// `require_auth` ask: against real PostgreSQL clusters with certificates
/// made here, and against a stand-in server on a loopback port that speaks
/// just enough of the protocol to misbehave.
mod tls {
    use std::time::Duration;

    use genapi_batch::ledger::{LedgerError, SharedSeats};
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::common::pg::{Postgres, Setup, PASSWORD};
    use super::common::Dir;

    /// A certificate authority made for one test.
    struct Ca {
        issuer: Issuer<'static, KeyPair>,
        pem: String,
    }

    impl Ca {
        fn new(name: &str) -> Ca {
            let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            params.distinguished_name.push(DnType::CommonName, name);
            let key = KeyPair::generate().unwrap();
            let pem = params.self_signed(&key).unwrap().pem();
            Ca {
                issuer: Issuer::new(params, key),
                pem,
            }
        }

        /// A server certificate for `names` (DNS names or addresses) and
        /// its key, in PEM.
        fn server(&self, names: &[&str]) -> (String, String) {
            let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
            params.distinguished_name.push(DnType::CommonName, names[0]);
            let key = KeyPair::generate().unwrap();
            let cert = params.signed_by(&key, &self.issuer).unwrap();
            (cert.pem(), key.serialize_pem())
        }

        /// The CA's certificate in a file, for `sslrootcert`.
        fn file(&self, dir: &Dir) -> String {
            let path = dir.join(&format!("ca-{}.pem", fastrand::u32(..)));
            std::fs::write(&path, &self.pem).unwrap();
            path.to_str().unwrap().to_string()
        }
    }

    /// A self-signed certificate for localhost and its key.
    fn self_signed() -> (String, String) {
        let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
        (made.cert.pem(), made.signing_key.serialize_pem())
    }

    /// A URL to `pg` at `host`, with `query` (`key=value&…`) after it.
    fn url(pg: &Postgres, host: &str, query: &str) -> String {
        format!("postgres://postgres:{PASSWORD}@{host}:{}/postgres?{query}", pg.port)
    }

    /// Connects as a worker's seats do, within 30 s.
    async fn connect(url: &str) -> Result<SharedSeats, LedgerError> {
        tokio::time::timeout(Duration::from_secs(30), SharedSeats::connect(url, "tls", 1))
            .await
            .expect("still connecting after 30 s")
    }

    async fn connects(url: &str) -> SharedSeats {
        match connect(url).await {
            Ok(seats) => seats,
            Err(error) => panic!("{error}"),
        }
    }

    async fn refused(url: &str) -> LedgerError {
        match connect(url).await {
            Ok(_) => panic!("connected"),
            Err(error) => error,
        }
    }

    /// Whether the connection named `application` is encrypted, as the
    /// server sees it.
    fn encrypted(pg: &Postgres, application: &str) -> String {
        pg.sql(&format!(
            "SELECT ssl FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE application_name = '{application}'"
        ))
    }

    /// `sslmode=require`, and no `sslmode` at all (`prefer`), encrypt the
    /// ledger's own connection to a server with a self-signed certificate;
    /// `disable` does not.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn require_and_the_default_encrypt_against_a_self_signed_certificate() {
        let setup = Setup {
            tls: Some(self_signed()),
            ..Setup::default()
        };
        let Some(pg) = Postgres::start_with("tls-require", setup) else {
            return;
        };
        let _require = connects(&url(&pg, "127.0.0.1", "sslmode=require&application_name=require")).await;
        let _prefer = connects(&url(&pg, "127.0.0.1", "application_name=prefer")).await;
        let _disable = connects(&url(&pg, "127.0.0.1", "sslmode=disable&application_name=disable")).await;
        assert_eq!(encrypted(&pg, "require"), "t");
        assert_eq!(
            encrypted(&pg, "prefer"),
            "t",
            "prefer is the default and the server offers TLS"
        );
        assert_eq!(encrypted(&pg, "disable"), "f");
    }

    /// `verify-full` checks the chain against `sslrootcert` and the name:
    /// it connects to a certificate made out to 127.0.0.1 and localhost
    /// (also dialled through `hostaddr`), and refuses the same server
    /// checked against the platform's roots or against another CA.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn verify_full_accepts_the_right_ca_and_name_and_nothing_else() {
        let ca = Ca::new("ledger test CA");
        let setup = Setup {
            tls: Some(ca.server(&["localhost", "127.0.0.1"])),
            ..Setup::default()
        };
        let Some(pg) = Postgres::start_with("tls-verify-full", setup) else {
            return;
        };
        let dir = Dir::new("tls-verify-full");
        let root = ca.file(&dir);
        let by_address = url(
            &pg,
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={root}&application_name=a"),
        );
        let _a = connects(&by_address).await;
        let by_name = url(
            &pg,
            "localhost",
            &format!("sslmode=verify-full&sslrootcert={root}&hostaddr=127.0.0.1&application_name=n"),
        );
        let _n = connects(&by_name).await;
        assert_eq!(encrypted(&pg, "a"), "t");
        assert_eq!(encrypted(&pg, "n"), "t");

        let platform = refused(&url(&pg, "127.0.0.1", "sslmode=verify-full")).await;
        let LedgerError::Insecure { reason, fix, .. } = &platform else {
            panic!("{platform}")
        };
        assert!(
            reason.contains("certificate") && fix.contains("sslrootcert"),
            "{platform}"
        );
        let other = Ca::new("another CA").file(&dir);
        let wrong_ca = refused(&url(
            &pg,
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={other}"),
        ))
        .await;
        assert!(matches!(wrong_ca, LedgerError::Insecure { .. }), "{wrong_ca}");
        for error in [&platform, &wrong_ca] {
            assert!(!error.to_string().contains(PASSWORD), "{error}");
        }
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
            super::common::genapi_alone(&dir)
                .env("GENAPI_API_KEY", "k-unused")
                .env("GENAPI_BASE_URL", "http://127.0.0.1:9")
                .env("PGSSLMODE", "verify-full")
                .env("PGSSLROOTCERT", root)
                .args(["batch", "jobs.jsonl", "--status", "--ledger"])
                .arg(url(&pg, "127.0.0.1", query))
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

    /// A certificate made out to another name: `verify-full` refuses it
    /// and says to name the server as the certificate does or to use
    /// `verify-ca`; `verify-ca`, with the right CA, connects.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_certificate_for_another_name_fails_verify_full_and_passes_verify_ca() {
        let ca = Ca::new("ledger test CA");
        let setup = Setup {
            tls: Some(ca.server(&["db.elsewhere.test"])),
            ..Setup::default()
        };
        let Some(pg) = Postgres::start_with("tls-other-name", setup) else {
            return;
        };
        let dir = Dir::new("tls-other-name");
        let root = ca.file(&dir);
        let full = refused(&url(
            &pg,
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={root}"),
        ))
        .await;
        let LedgerError::Insecure { fix, .. } = &full else {
            panic!("{full}")
        };
        assert!(fix.contains("verify-ca"), "{full}");
        let _ca = connects(&url(
            &pg,
            "127.0.0.1",
            &format!("sslmode=verify-ca&sslrootcert={root}&application_name=ca"),
        ))
        .await;
        assert_eq!(encrypted(&pg, "ca"), "t");
    }

    /// A server set up for clear-text passwords (`password` in pg_hba):
    /// over a plain connection the ledger refuses it, saying what to
    /// change; `require_auth=password` opts in; over TLS (`require`, or the
    /// default when the server offers TLS) it is accepted without opting in;
    /// `require_auth=scram-sha-256` refuses it even over TLS.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_clear_text_password_goes_only_over_tls_or_when_allowed() {
        let ca = Ca::new("clear-text test CA");
        let setup = Setup {
            tls: Some(ca.server(&["localhost", "127.0.0.1"])),
            host_auth: Some("password"),
            ..Setup::default()
        };
        let Some(pg) = Postgres::start_with("tls-clear-text", setup) else {
            return;
        };
        let plain = refused(&url(&pg, "127.0.0.1", "sslmode=disable")).await;
        let LedgerError::Insecure { reason, fix, .. } = &plain else {
            panic!("{plain}")
        };
        assert!(reason.contains("clear text") && reason.contains("not sent"), "{plain}");
        assert!(
            fix.contains("sslmode=verify-full") && fix.contains("require_auth=password"),
            "{plain}"
        );
        assert!(!plain.to_string().contains(PASSWORD), "{plain}");

        let _allowed = connects(&url(
            &pg,
            "127.0.0.1",
            "sslmode=disable&require_auth=password&application_name=opt-in",
        ))
        .await;
        // Encrypted to a certificate nobody checked, whoever answered in the
        // server's place would read it: refused, by default and with require.
        for unchecked in ["sslmode=require", "application_name=default"] {
            let refused = refused(&url(&pg, "127.0.0.1", unchecked)).await;
            let LedgerError::Insecure { reason, .. } = &refused else {
                panic!("{refused}")
            };
            assert!(
                reason.contains("not checked") && reason.contains("not sent"),
                "{refused}"
            );
            assert!(!refused.to_string().contains(PASSWORD), "{refused}");
        }
        let dir = Dir::new("tls-clear-text");
        let root = ca.file(&dir);
        let _checked = connects(&url(
            &pg,
            "127.0.0.1",
            &format!("sslmode=verify-full&sslrootcert={root}&application_name=checked"),
        ))
        .await;
        let _require_checked = connects(&url(
            &pg,
            "127.0.0.1",
            &format!("sslmode=require&sslrootcert={root}&application_name=require-checked"),
        ))
        .await;
        assert_eq!(encrypted(&pg, "opt-in"), "f");
        assert_eq!(encrypted(&pg, "checked"), "t");
        assert_eq!(encrypted(&pg, "require-checked"), "t");

        let scram_only = refused(&url(&pg, "127.0.0.1", "sslmode=require&require_auth=scram-sha-256")).await;
        let LedgerError::Insecure { reason, .. } = &scram_only else {
            panic!("{scram_only}")
        };
        assert!(reason.contains("password authentication"), "{scram_only}");
    }

    /// `sslmode=bogus` is a URL error that names the allowed values.
    #[tokio::test]
    async fn an_unknown_sslmode_names_the_allowed_values() {
        let error = refused(&format!(
            "postgres://ledger:{PASSWORD}@127.0.0.1:1/ledger?sslmode=bogus"
        ))
        .await;
        assert!(matches!(error, LedgerError::Url { .. }), "{error}");
        let said = error.to_string();
        for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
            assert!(said.contains(mode), "{said}");
        }
        assert!(!said.contains(PASSWORD), "{said}");
    }

    /// What the stand-in server does once it has read the start-up message.
    #[derive(Clone, Copy, PartialEq)]
    enum Then {
        /// AuthenticationCleartextPassword.
        AskForTheClearTextPassword,
        /// An authentication message whose length says 2 GiB (2^31 - 1
        /// bytes, the most the driver takes as a length).
        ClaimTwoGibibytes,
        /// AuthenticationOk, then NoticeResponse after NoticeResponse.
        SendNoticesForEver,
        /// Nothing at all, not even the answer to the request for TLS.
        NeverAnswer,
    }

    /// A password only the stand-in server is given.
    const SECRET: &str = "stand-in-secret-9f2c";

    /// A stand-in server on a loopback port for one connection: it answers a
    /// request for TLS with N, reads the start-up message, then does `then`.
    /// Its task ends with every byte the client sent after the start-up
    /// message, once the client closed (or 30 s passed).
    async fn stand_in(then: Then) -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let task = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut rest = Vec::new();
            if then != Then::NeverAnswer {
                let mut first = packet(&mut socket).await;
                if first == [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f] {
                    socket.write_all(b"N").await.unwrap();
                    first = packet(&mut socket).await;
                }
                assert_eq!(&first[4..8], &[0, 3, 0, 0], "a start-up message of protocol 3.0");
                match then {
                    Then::AskForTheClearTextPassword => {
                        socket.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).await.unwrap();
                    }
                    Then::ClaimTwoGibibytes => {
                        socket
                            .write_all(&[b'R', 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 10])
                            .await
                            .unwrap();
                        socket.write_all(&[0; 4096]).await.unwrap();
                    }
                    Then::SendNoticesForEver => {
                        // AuthenticationOk (a trusting server), then notices,
                        // which the driver keeps until the session is ready.
                        socket.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0]).await.unwrap();
                        // A message field of 1 KiB, then the end of the fields.
                        let mut body = vec![b'M'];
                        body.extend_from_slice(&[b'x'; 1024]);
                        body.extend_from_slice(&[0, 0]);
                        let mut notice = vec![b'N'];
                        notice.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
                        notice.extend_from_slice(&body);
                        // Up to 256 MiB, until the client hangs up.
                        for _ in 0..(256 << 10) {
                            if socket.write_all(&notice).await.is_err() {
                                break;
                            }
                        }
                    }
                    Then::NeverAnswer => {}
                }
            }
            // Until the client hangs up, or sends a password message (then
            // the stand-in hangs up: it has seen enough).
            let read = async {
                let mut chunk = [0; 4096];
                while let Ok(n @ 1..) = socket.read(&mut chunk).await {
                    rest.extend_from_slice(&chunk[..n]);
                    if message_types(&rest).contains(&'p') {
                        break;
                    }
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(30), read).await;
            rest
        });
        (port, task)
    }

    /// A length-prefixed packet (the request for TLS, the start-up message).
    async fn packet(socket: &mut tokio::net::TcpStream) -> Vec<u8> {
        let mut length = [0; 4];
        socket.read_exact(&mut length).await.unwrap();
        let mut packet = length.to_vec();
        packet.resize(u32::from_be_bytes(length) as usize, 0);
        socket.read_exact(&mut packet[4..]).await.unwrap();
        packet
    }

    /// The type bytes of the messages a client sent.
    fn message_types(mut bytes: &[u8]) -> Vec<char> {
        let mut types = Vec::new();
        while bytes.len() >= 5 {
            types.push(bytes[0] as char);
            let length = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
            bytes = &bytes[(1 + length).min(bytes.len())..];
        }
        types
    }

    fn stand_in_url(port: u16, query: &str) -> String {
        format!("postgres://ledger:{SECRET}@127.0.0.1:{port}/ledger?{query}")
    }

    /// A server asking for the password in clear over a plain connection,
    /// whether TLS was not asked for (`disable`) or was and was declined
    /// (the default, `prefer`): refused with the new error, and the client
    /// sent no PasswordMessage, nor the password in any form.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_password_is_never_sent_to_a_server_asking_for_it_in_clear() {
        for query in ["sslmode=disable", "connect_timeout=20"] {
            let (port, server) = stand_in(Then::AskForTheClearTextPassword).await;
            let error = refused(&stand_in_url(port, query)).await;
            let sent = server.await.unwrap();
            let types = message_types(&sent);
            assert!(
                !types.contains(&'p'),
                "{query}: the client answered with a password message: {types:?}"
            );
            assert!(
                !sent.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "{query}: the password went out"
            );
            assert!(matches!(error, LedgerError::Insecure { .. }), "{query}: {error}");
            assert!(!error.to_string().contains(SECRET), "{error}");
        }
    }

    /// A message claiming 2 GiB is refused at its header, at once, rather
    /// than waited for and buffered (before, the driver reserved room for it
    /// and waited for the rest).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_message_claiming_two_gibibytes_is_refused_at_its_header() {
        let (port, server) = stand_in(Then::ClaimTwoGibibytes).await;
        let error = refused(&stand_in_url(port, "sslmode=disable&connect_timeout=60")).await;
        let LedgerError::Unreachable { reason, .. } = &error else {
            panic!("{error}")
        };
        assert!(reason.contains("2147483647") && reason.contains("64 MiB"), "{error}");
        server.abort();
    }

    /// A server streaming notices without end during the start-up is cut
    /// off by the bound on what may come before the session is ready,
    /// long before the connect timeout.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn endless_notices_during_the_start_up_are_cut_off() {
        let (port, server) = stand_in(Then::SendNoticesForEver).await;
        let error = refused(&stand_in_url(port, "sslmode=disable&connect_timeout=60")).await;
        let LedgerError::Unreachable { reason, .. } = &error else {
            panic!("{error}")
        };
        assert!(reason.contains("without finishing the start"), "{error}");
        server.abort();
    }

    /// A listener that accepts and never answers holds the worker only for
    /// the connect timeout (1 s here): the timeout covers the whole set-up,
    /// not only TCP, whether the client waits for the answer to its request
    /// for TLS (the default) or for authentication (`disable`).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_that_never_answers_is_given_up_at_the_connect_timeout() {
        for query in ["connect_timeout=1", "sslmode=disable&connect_timeout=1"] {
            let (port, server) = stand_in(Then::NeverAnswer).await;
            let error = refused(&stand_in_url(port, query)).await;
            let LedgerError::Unreachable { reason, .. } = &error else {
                panic!("{query}: {error}")
            };
            // The 1 s limit, not any later one, ended the wait.
            assert!(reason.contains("within 1 s (connect_timeout)"), "{query}: {error}");
            server.abort();
        }
    }
}
