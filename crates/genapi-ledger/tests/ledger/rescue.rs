//! A worker gone is known the moment its session ends: its lines are taken
//! at once, not after its lease; a live worker's are not; and a worker that
//! lives on after its connection was cut sends nothing on a line another
//! worker took meanwhile.

use std::time::Duration;

use genapi_batch::{Claim, WriteStore};
use genapi_ledger::{Ledger, LedgerOptions};

use crate::common::pg::Postgres;

const BATCH: &str = "rescue";
const DIGEST: &str = "0123456789abcdef";
/// A lease no test outlives: a line taken here was taken by the session's
/// end, never by the lease.
const HOUR: Duration = Duration::from_secs(3600);
/// Longer than any step here takes on a loaded machine: a hang detector.
const LONG: Duration = Duration::from_secs(120);

/// A worker of a fresh name (as `genapi batch` starts one) with a lease of
/// an hour, on a server started `grace` ago at least as far as the rescue
/// of gone workers goes (the test's server started a moment ago).
async fn worker_with(pg: &Postgres, grace: Duration) -> Ledger {
    let options = LedgerOptions::default()
        .lease(HOUR)
        .step_deadline(LONG)
        .rescue_grace_after_restart(grace);
    Ledger::open_with(&pg.url(), BATCH, DIGEST, options).await.unwrap()
}

async fn worker(pg: &Postgres) -> Ledger {
    worker_with(pg, Duration::ZERO).await
}

/// Claims `line` for `ledger` until it is its (a hang detector bounds it).
async fn taken_by(ledger: &Ledger, line: u64) {
    let deadline = tokio::time::Instant::now() + LONG;
    loop {
        if let Claim::Mine(_) = ledger.claim(line).await.unwrap() {
            return;
        }
        assert!(tokio::time::Instant::now() < deadline, "line {line} never taken");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_workers_lines_are_taken_once_its_session_ends_and_not_before() {
    let Some(pg) = Postgres::start("rescue-session-end") else {
        return;
    };
    let a = worker(&pg).await;
    assert!(matches!(a.claim(1).await.unwrap(), Claim::Mine(_)));
    assert!(matches!(
        a.claim_many(&[2, 3]).await[..],
        [Ok(Claim::Mine(_)), Ok(Claim::Mine(_))]
    ));
    let b = worker(&pg).await;
    // Alive: its lines are its own for the hour of its lease.
    assert!(matches!(b.claim(1).await.unwrap(), Claim::Held));
    assert!(matches!(
        b.claim_many(&[2, 3]).await[..],
        [Ok(Claim::Held), Ok(Claim::Held)]
    ));
    // Gone (its process ended, and with it its sessions): taken at once.
    drop(a);
    taken_by(&b, 1).await;
    let claims = b.claim_many(&[2, 3]).await;
    assert!(
        matches!(claims[..], [Ok(Claim::Mine(_)), Ok(Claim::Mine(_))]),
        "{claims:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_connection_was_cut_sends_nothing_on_a_line_taken_meanwhile() {
    let Some(pg) = Postgres::start("rescue-cut") else {
        return;
    };
    let a = worker(&pg).await;
    assert!(matches!(a.claim(1).await.unwrap(), Claim::Mine(_)));
    let b = worker(&pg).await;
    // The session holding a's name is ended under it (a network cut the
    // server saw, an operator's pg_terminate_backend); a lives on.
    let names = pg.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1");
    assert_eq!(names.trim(), "2", "each worker holds its name");
    let terminated = pg.sql(&format!(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_locks WHERE locktype = 'advisory' AND granted \
         AND objsubid = 1 AND ((classid::bigint << 32) | objid::bigint) \
             = hashtextextended('batch {BATCH}' || E'\\n' || '{}', 7450482523331166210)",
        a.worker()
    ));
    assert_eq!(terminated.trim(), "1", "a's session");
    taken_by(&b, 1).await;
    let intent = crate::record(serde_json::json!({
        "event": "intent", "line": 1, "name": "l1", "digest": "d", "sent_at": 1
    }));
    let written = a.write(intent).await;
    assert!(written.is_err(), "a's intent on the line b took: {written:?}");
    let intents = pg.sql("SELECT count(*) FROM genapi_records WHERE line = 1 AND record->>'event' = 'intent'");
    assert_eq!(intents.trim(), "0");
}

/// A server that started less than the grace ago ended every session (a
/// restart): the workers that live take their names back in a moment, so
/// a gone worker keeps its lines for its lease until then.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn right_after_the_server_started_a_gone_worker_keeps_its_lease() {
    let Some(pg) = Postgres::start("rescue-grace") else {
        return;
    };
    let a = worker_with(&pg, HOUR).await;
    assert!(matches!(a.claim(1).await.unwrap(), Claim::Mine(_)));
    let names = || pg.sql("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1");
    let b = worker_with(&pg, HOUR).await;
    assert_eq!(names().trim(), "2");
    drop(a);
    // a's session is gone once its name is free.
    pg.await_rows(
        "a's name let go",
        "SELECT 1 WHERE (SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1) = 1",
        LONG,
    );
    assert!(
        matches!(b.claim(1).await.unwrap(), Claim::Held),
        "within the grace, the lease counts"
    );
}
