//! What a ledger's records carry (other lines' ends, the worker's seat
//! changes) never changes what is sent or stored: a seat no longer this
//! worker's is not handed out again, an end whose caller went away is not
//! written later by another record, and an end the database refuses does
//! not keep another line from being sent.

use std::time::Duration;

use genapi::SharedPlaces;
use genapi_batch::ledger::{Ledger, SharedSeats};
use genapi_batch::Record;
use serde_json::json;

use crate::common;
use common::pg::Postgres;

fn record(value: serde_json::Value) -> Record {
    serde_json::from_value(value).unwrap()
}

/// A seat given back a moment ago is handed out again without asking the
/// database only while it is surely still this worker's. Here its lease
/// lapsed (this worker's renewals could not renew it: the seat went to
/// another worker, as the pool's take or a reclaim leaves a lapsed seat),
/// so the database is asked, and the pool of one is found full.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_given_back_seat_whose_lease_lapsed_is_not_handed_out_again() {
    let Some(pg) = Postgres::start("carried-seat-retake") else {
        return;
    };
    let url = pg.url();
    for carried in [false, true] {
        let pool = if carried { "carried" } else { "plain" };
        let options = genapi_batch::ledger::LedgerOptions::default().lease(Duration::from_secs(1));
        let seats = SharedSeats::connect_with(&url, pool, 1, &options, genapi_batch::ledger::UNANSWERED_SEAT_HOLD)
            .await
            .unwrap();
        let mut ledger = Ledger::open(&url, &format!("batch-{pool}"), "0123456789abcdef")
            .await
            .unwrap();
        if carried {
            ledger.carry_seat_changes(&seats).unwrap();
        }
        let place = seats.take().await.unwrap();
        assert_eq!(place, Some(1), "{pool}");
        pg.sql(&format!(
            "UPDATE genapi_seats SET worker = 'another worker', lease_until = now() + interval '1 hour', \
             task_id = NULL, polling_url = NULL, taken_at = now() WHERE pool = '{pool}' AND seat = 1"
        ));
        // Longer than the lease: no renewal since could have kept it.
        tokio::time::sleep(Duration::from_millis(1_200)).await;
        // This worker's task ends: the seat goes to its spare list, and the
        // next submission asks for a seat at once.
        seats.free(1);
        let again = seats.take().await.unwrap();
        assert_eq!(
            again, None,
            "{pool}: seat 1 is another worker's in the database, yet this worker was handed it"
        );
        drop(ledger);
    }
}

/// An end whose caller went away (a timeout around `Ledger::append`) stays
/// queued: it is neither withdrawn nor written by its 250 ms fallback
/// (which belonged to the cancelled future), and is written later by
/// whatever record comes next, however late. When that next record is a
/// new acceptance of the same line (a task adopted for it again), both go
/// in one statement, which updates the line's row twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_end_is_not_written_later_by_an_unrelated_record() {
    let Some(pg) = Postgres::start("carried-cancelled-end") else {
        return;
    };
    let url = pg.url();
    let ledger = Ledger::open(&url, "zombie", "0123456789abcdef").await.unwrap();
    ledger
        .append(&[record(json!({"event": "accepted", "line": 1, "id": "task-1", "polling_url": "https://x/1", "cost": null, "adopted": true}))])
        .await
        .unwrap();
    let finished = record(json!({"event": "finished", "line": 1, "status": "Ready", "file": "one.png", "cost": 1.0}));
    let cancelled = tokio::time::timeout(Duration::from_millis(20), ledger.append(&[finished])).await;
    assert!(cancelled.is_err(), "the end waits for a carrier longer than 20 ms");
    tokio::time::sleep(Duration::from_millis(800)).await;
    let count = || {
        pg.sql("SELECT count(*) FROM genapi_records WHERE line = 1 AND record->>'event' = 'finished'")
            .parse::<u32>()
            .unwrap()
    };
    let before = count();
    eprintln!("Finished records of line 1, 800 ms after the cancelled append: {before}");
    // The line is adopted again with another task (an Accepted reopens it).
    ledger
        .append(&[record(json!({"event": "accepted", "line": 1, "id": "task-2", "polling_url": "https://x/2", "cost": null, "adopted": true}))])
        .await
        .unwrap();
    let after = count();
    let order = pg.sql(
        "SELECT string_agg(CASE WHEN record->>'event' = 'finished' THEN 'finished' ELSE 'accepted:' || (record->>'id') END, ' ' ORDER BY seq) FROM genapi_records WHERE line = 1",
    );
    let done = pg.sql("SELECT done FROM genapi_lines WHERE line = 1");
    let status = ledger.status(1).await.unwrap();
    eprintln!(
        "after re-adopting task-2: Finished records {after}; records in order: {order}; done = {done}; status: done {} in_flight {}",
        status.done, status.in_flight
    );
    assert_eq!(
        after, before,
        "the cancelled end was written by the next, unrelated record ({order}; done = {done})"
    );
}

/// A line's end that the database refuses (here: the service's failure
/// message holds a NUL, which `jsonb` cannot store) is carried by the next
/// record of the worker, which may be another line's intent: that intent,
/// an exclusive step, then fails, and the other line is not sent, its error
/// naming a cause that is not its own. Before ends were carried only the
/// line whose end could not be stored was affected (a warning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_the_database_refuses_does_not_keep_another_line_from_being_sent() {
    let Some(pg) = Postgres::start("carried-refused-end") else {
        return;
    };
    let config = genapi_mock::MockConfig::default().default_duration(Duration::from_millis(100));
    let mock = genapi_mock::MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let jobs = [
        json!({"model": "gen-2-pro", "name": "failing", "prompt": "[mock:error]", "width": 64, "height": 64}),
        json!({"model": "gen-2-pro", "name": "fine", "prompt": "a harbour", "width": 64, "height": 64}),
    ];
    let job_file = jobs.iter().map(|j| j.to_string()).collect::<Vec<_>>().join("\n") + "\n";
    // A recording of the run, whose failure message is then given a NUL.
    let recorded = common::Dir::new("carried-refused-recorded");
    std::fs::write(recorded.join("jobs.jsonl"), &job_file).unwrap();
    // One task at a time: line 2's intent is the record after line 1's end.
    let batch = ["batch", "jobs.jsonl", "--out", "out", "--json", "--max-active", "1"];
    let mut command = common::genapi(&recorded, &mock);
    command.args(["--record", "run.har", "--record-images"]).args(batch);
    let first = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    assert!(first.status.code().is_some(), "the recording run ended");
    let har = std::fs::read_to_string(recorded.join("run.har")).unwrap();
    assert!(har.contains("Mock failure requested"), "the failure is recorded");
    let mut value: serde_json::Value = serde_json::from_str(&har).unwrap();
    for entry in value["log"]["entries"].as_array_mut().unwrap() {
        if let Some(text) = entry["response"]["content"]["text"].as_str() {
            if text.contains("Mock failure requested") {
                entry["response"]["content"]["text"] =
                    json!(text.replace("Mock failure requested", "Mock failure\\u0000 requested"));
            }
        }
    }
    let replay_dir = common::Dir::new("carried-refused-replayed");
    std::fs::write(replay_dir.join("jobs.jsonl"), &job_file).unwrap();
    std::fs::write(replay_dir.join("run.har"), value.to_string()).unwrap();
    let replaying = crate::cli::Mock::start(&replay_dir, &["--replay", replay_dir.join("run.har").to_str().unwrap()]);
    let mut command = replaying.command(&replay_dir);
    command
        .args(batch)
        .arg("--ledger")
        .arg(pg.url())
        .env("GENAPI_LOG", "genapi=info");
    let run = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    let fine: serde_json::Value = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|v| v["line"] == 2)
        .unwrap_or_else(|| panic!("line 2 reported: {stdout}\n{stderr}"));
    assert_eq!(
        fine["status"], "succeeded",
        "line 2 was kept from being sent by line 1's end: {fine}"
    );
}
