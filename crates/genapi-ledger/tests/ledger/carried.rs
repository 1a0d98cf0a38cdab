//! What a ledger's events carry (other lines' ends, the worker's seat
//! changes) never changes what is stored: a seat no longer this worker's is
//! not handed out again, and an end whose caller went away is not written
//! later by another event.

use std::time::Duration;

use genapi::SeatPool;
use genapi_batch::WriteStore;
use genapi_ledger::{Ledger, SharedSeats};
use serde_json::json;

use crate::common::pg::Postgres;
use crate::record;

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
        let options = genapi_ledger::LedgerOptions::default().lease(Duration::from_secs(1));
        let seats = SharedSeats::connect_with(&url, pool, 1, &options, genapi_ledger::UNANSWERED_SEAT_HOLD)
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

/// An end whose caller went away (a timeout around `Store::write_adoption`) stays
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
    ledger.write_adoption(record(json!({"event": "accepted", "line": 1, "id": "task-1", "polling_url": "https://x/1", "cost": null, "adopted": true})))
        .await
        .unwrap();
    let finished = record(json!({"event": "finished", "line": 1, "status": "Ready", "file": "one.png", "cost": 1.0}));
    let cancelled = tokio::time::timeout(Duration::from_millis(20), ledger.write_adoption(finished)).await;
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
    ledger.write_adoption(record(json!({"event": "accepted", "line": 1, "id": "task-2", "polling_url": "https://x/2", "cost": null, "adopted": true})))
        .await
        .unwrap();
    let after = count();
    let order = pg.sql(
        "SELECT string_agg(CASE WHEN record->>'event' = 'finished' THEN 'finished' ELSE 'accepted:' || (record->>'id') END, ' ' ORDER BY seq) FROM genapi_records WHERE line = 1",
    );
    let done = pg.sql("SELECT done FROM genapi_lines WHERE line = 1");
    eprintln!("after re-adopting task-2: Finished records {after}; records in order: {order}; done = {done}");
    assert_eq!(
        after, before,
        "the cancelled end was written by the next, unrelated record ({order}; done = {done})"
    );
}
