//! What fences the workers of one batch, each stalled on purpose where a
//! race would hurt (a trigger waits at a gate the test holds): a worker
//! whose intent is in flight when its lease lapses (its statement stalled
//! in a lock wait, a descheduled backend, a network stall before the
//! commit) keeps the line, and a worker claiming it meanwhile waits for the
//! intent and finds it, so the two never both decide to send; an intent is
//! refused on a line another worker took, or once its lease has lapsed; and
//! two workers' credit holds are decided one after the other, so
//! together they never pass the cap.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use genapi_batch::{Claim, CreditHolds, Hold, WriteStore};
use genapi_ledger::{Ledger, LedgerOptions};
use tokio::task::block_in_place;

use crate::common::pg::{Postgres, PASSWORD};

const BATCH: &str = "fenced";
const DIGEST: &str = "0123456789abcdef";
/// The advisory lock the test holds to stall worker a's intents.
pub(crate) const GATE: i64 = 424_242;
/// Longer than any step here takes on a loaded machine: a hang detector.
pub(crate) const LONG: Duration = Duration::from_secs(120);

/// A psql session on `pg`, reading its statements from its input.
pub(crate) fn psql(pg: &Postgres) -> Child {
    Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", &pg.url()])
        .env("PGPASSWORD", PASSWORD)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("psql runs")
}

/// A session holding the gate until it is dropped.
struct Gate(Child);

impl Gate {
    fn close(pg: &Postgres) -> Gate {
        let mut psql = psql(pg);
        let stdin = psql.stdin.as_mut().expect("psql's input");
        writeln!(stdin, "BEGIN; SELECT pg_advisory_xact_lock({GATE});").unwrap();
        stdin.flush().unwrap();
        pg.await_rows(
            "the gate held",
            &format!("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = {GATE} AND granted"),
            LONG,
        );
        Gate(psql)
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        // Its transaction ends with the session, and the gate opens.
        drop(self.0.stdin.take());
        let _ = self.0.wait();
    }
}

async fn worker(url: &str, name: &str) -> Ledger {
    let options = LedgerOptions::default()
        .worker_name(name)
        .lease(Duration::from_secs(2))
        .step_deadline(LONG);
    Ledger::open_with(url, BATCH, DIGEST, options).await.unwrap()
}

fn intent() -> genapi_batch::Event {
    crate::record(serde_json::json!({
        "event": "intent", "line": 1, "name": "l1", "digest": "d", "sent_at": 1
    }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_made_while_an_intent_is_in_flight_waits_for_it_and_sees_it() {
    let Some(pg) = Postgres::start("fenced-intent") else {
        return;
    };
    let url = pg.url();
    let a = worker(&url, "a").await;
    let b = worker(&url, "b").await;
    // Worker a's intents wait at the gate inside their statement.
    pg.sql(&format!(
        "CREATE FUNCTION stall_intents() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.worker = 'a' AND NEW.record->>'event' = 'intent' THEN
             PERFORM pg_advisory_xact_lock({GATE});
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER stall_intents BEFORE INSERT ON genapi_records
         FOR EACH ROW EXECUTE FUNCTION stall_intents();"
    ));
    assert!(matches!(a.claim(1).await.unwrap(), Claim::Mine(_)));
    let gate = block_in_place(|| Gate::close(&pg));
    let a = std::sync::Arc::new(a);
    let writing = tokio::spawn({
        let a = a.clone();
        async move { a.write(intent()).await }
    });
    block_in_place(|| {
        pg.await_rows(
            "a's intent waiting at the gate",
            &format!("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = {GATE} AND NOT granted"),
            LONG,
        );
        // By the database's clock, the lease a's claim took has lapsed.
        pg.await_rows(
            "a's lease lapsed",
            "SELECT 1 FROM genapi_lines WHERE line = 1 AND lease_until < clock_timestamp()",
            LONG,
        );
    });
    let claiming = tokio::spawn(async move { (b.claim(1).await, b.claim_many(&[1]).await) });
    // b's claim either answers at once (the line taken from under a) or
    // waits for the line's row, which a's intent holds.
    block_in_place(|| {
        pg.await_rows(
            "b's claim answered or waiting for a's intent",
            "SELECT 1 WHERE EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' \
             AND query LIKE '%claimed AS%') OR EXISTS (SELECT 1 FROM genapi_lines WHERE worker = 'b')",
            LONG,
        )
    });
    drop(gate);
    let written = writing.await.unwrap();
    let (claimed, claimed_many) = claiming.await.unwrap();
    for claim in [claimed.unwrap(), claimed_many.into_iter().next().unwrap().unwrap()] {
        if let Claim::Mine(line) = claim {
            assert!(
                written.is_err() || line.sent().is_some(),
                "b took the line without a's intent, which a then stored: both would send"
            );
        }
    }
    let intents = pg.sql("SELECT count(*) FROM genapi_records WHERE line = 1 AND record->>'event' = 'intent'");
    assert!(written.is_ok(), "a kept the line through its intent: {written:?}");
    assert_eq!(intents, "1");
}

/// A worker whose claim of several lines began before another worker took
/// one of them, its lease lapsed (the first claim stalled meanwhile: a lock
/// wait, a descheduled backend), does not take the line too once it runs
/// on: the other worker's intent stands alone, and the first sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_claim_of_many_lines_leaves_a_lapsed_line_another_worker_took() {
    let Some(pg) = Postgres::start("fenced-claim-many") else {
        return;
    };
    let url = pg.url();
    let open = |name: &'static str| {
        let options = LedgerOptions::default()
            .worker_name(name)
            .lease(Duration::from_secs(600))
            .step_deadline(LONG);
        Ledger::open_with(&url, BATCH, DIGEST, options)
    };
    let (a, b) = (std::sync::Arc::new(open("a").await.unwrap()), open("b").await.unwrap());
    // Line 1 was worker c's, whose lease lapsed (c is gone).
    pg.sql(&format!(
        "INSERT INTO genapi_lines (batch, line, worker, lease_until)
         VALUES ('{BATCH}', 1, 'c', clock_timestamp() - interval '1 s')"
    ));
    // Worker a's claims wait at the gate inside their statement, before
    // they reach the lines already there.
    pg.sql(&format!(
        "CREATE FUNCTION stall_claims() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.worker = 'a' THEN
             PERFORM pg_advisory_xact_lock({GATE});
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER stall_claims BEFORE INSERT ON genapi_lines
         FOR EACH ROW EXECUTE FUNCTION stall_claims();"
    ));
    let gate = block_in_place(|| Gate::close(&pg));
    let claiming = tokio::spawn({
        let a = a.clone();
        async move { a.claim_many(&[1]).await }
    });
    block_in_place(|| {
        pg.await_rows(
            "a's claim waiting at the gate",
            &format!("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = {GATE} AND NOT granted"),
            LONG,
        )
    });
    // Meanwhile b takes the lapsed line and stores its intent.
    assert!(
        matches!(b.claim(1).await.unwrap(), Claim::Mine(_)),
        "line 1 lapsed: b's"
    );
    b.write(intent()).await.expect("b's intent on the line it holds");
    drop(gate);
    let claimed = claiming.await.unwrap().into_iter().next().unwrap().unwrap();
    assert!(
        matches!(claimed, Claim::Held),
        "a took line 1 from b, who stored its intent: both would send ({claimed:?})"
    );
    assert!(a.write(intent()).await.is_err(), "a stored an intent on b's line");
    assert_eq!(intents(&pg), "1");
}

/// Worker a holds line 1 under a lease of ten minutes (renewed every
/// few minutes: no renewal comes between a test's steps), as it would
/// claim it.
async fn claimed_by_a(pg: &Postgres) -> Ledger {
    let options = LedgerOptions::default()
        .worker_name("a")
        .lease(Duration::from_secs(600))
        .step_deadline(LONG);
    let a = Ledger::open_with(&pg.url(), BATCH, DIGEST, options).await.unwrap();
    assert!(matches!(a.claim(1).await.unwrap(), Claim::Mine(_)));
    a
}

fn intents(pg: &Postgres) -> String {
    pg.sql("SELECT count(*) FROM genapi_records WHERE line = 1 AND record->>'event' = 'intent'")
}

/// A worker whose line another worker took (its lease lapsed while it
/// was paused) stores no intent, and so sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_on_a_line_another_worker_took_is_refused() {
    let Some(pg) = Postgres::start("fenced-taken") else {
        return;
    };
    let a = claimed_by_a(&pg).await;
    pg.sql("UPDATE genapi_lines SET worker = 'b', lease_until = clock_timestamp() + interval '600 s' WHERE line = 1");
    let written = a.write(intent()).await;
    assert!(written.is_err(), "a's intent on b's line: {written:?}");
    assert_eq!(intents(&pg), "0");
}

/// An intent on a live lease, however little of it is left, is stored and
/// renews the lease to a whole one (the request leaves with it ahead); an
/// intent on a lease that lapsed is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intent_renews_a_live_lease_and_is_refused_on_a_lapsed_one() {
    let Some(pg) = Postgres::start("fenced-renewal") else {
        return;
    };
    let a = claimed_by_a(&pg).await;
    pg.sql("UPDATE genapi_lines SET lease_until = clock_timestamp() - interval '1 s' WHERE line = 1");
    let written = a.write(intent()).await;
    assert!(written.is_err(), "an intent on a lapsed lease: {written:?}");
    assert_eq!(intents(&pg), "0");
    // 5 s left of a 600 s lease: live, so stored, and renewed.
    pg.sql("UPDATE genapi_lines SET lease_until = clock_timestamp() + interval '5 s' WHERE line = 1");
    a.write(intent()).await.unwrap();
    assert_eq!(intents(&pg), "1");
    let left =
        pg.sql("SELECT extract(epoch FROM lease_until - clock_timestamp())::int FROM genapi_lines WHERE line = 1");
    let left: i64 = left.trim().parse().unwrap();
    assert!(left > 500, "renewed to a whole lease: {left} s left");
}

/// Waits until `done` or `query` answers a row (a hang detector bounds it).
async fn until(pg: &Postgres, done: impl Fn() -> bool, query: &str) {
    let started = std::time::Instant::now();
    while !done() && block_in_place(|| pg.sql(query)).is_empty() {
        assert!(started.elapsed() < LONG, "not within {LONG:?}: {query}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two workers ask to hold credits at once under a cap one hold fills:
/// the second decides only once the first's hold is written, and is not
/// given credits the first holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn holds_of_two_workers_at_once_never_pass_the_cap() {
    let Some(pg) = Postgres::start("fenced-holds") else {
        return;
    };
    let url = pg.url();
    let (a, b) = (worker(&url, "a").await, worker(&url, "b").await);
    assert!(matches!(a.claim(1).await.unwrap(), Claim::Mine(_)));
    assert!(matches!(b.claim(2).await.unwrap(), Claim::Mine(_)));
    // Worker a's hold waits at the gate once decided, before its commit.
    pg.sql(&format!(
        "CREATE FUNCTION stall_holds() RETURNS trigger LANGUAGE plpgsql AS $$
         BEGIN
           IF NEW.worker = 'a' AND NEW.hold IS NOT NULL THEN
             PERFORM pg_advisory_xact_lock({GATE});
           END IF;
           RETURN NEW;
         END $$;
         CREATE TRIGGER stall_holds BEFORE UPDATE ON genapi_lines
         FOR EACH ROW EXECUTE FUNCTION stall_holds();"
    ));
    let gate = block_in_place(|| Gate::close(&pg));
    let first = tokio::spawn(async move { a.hold_credits(1, "kind", 2.0, None).await });
    until(
        &pg,
        || false,
        &format!("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = {GATE} AND NOT granted"),
    )
    .await;
    let second = tokio::spawn(async move { b.hold_credits(2, "kind", 2.0, None).await });
    // b's decision is made (the race lost) or waits for a's.
    until(
        &pg,
        || second.is_finished(),
        &format!("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid <> {GATE} AND NOT granted"),
    )
    .await;
    drop(gate);
    let (first, second) = (first.await.unwrap().unwrap(), second.await.unwrap().unwrap());
    assert_eq!(first, Hold::Held(2.0), "the first line of a kind holds what is left");
    assert!(
        !matches!(second, Hold::Held(_)),
        "b was given credits a holds: {second:?} beside {first:?} under a cap of 2"
    );
}

/// An intent whose commit comes more than a lease after its statement
/// renewed the lease (a commit stalled on a slow disk, a network stall
/// before the `COMMIT`): a claim that waited for the line's row then finds
/// the renewed lease lapsed and takes the line, and must read the intent
/// that was committed while it waited, not the records as they stood when
/// its own statement began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_that_waited_for_an_intent_reads_it_even_when_its_renewed_lease_lapsed() {
    let Some(pg) = Postgres::start("fenced-late-commit") else {
        return;
    };
    let url = pg.url();
    let a = worker(&url, "a").await;
    let b = worker(&url, "b").await;
    assert!(matches!(a.claim(1).await.unwrap(), Claim::Mine(_)));
    // a's own renewals would take the row first once it is free: its
    // intent is played by the session below, as its statement writes it.
    drop(a);
    let gate = block_in_place(|| Gate::close(&pg));
    // a's intent, whose commit waits at the gate: the lease renewed to one
    // second, the record written.
    let mut late = psql(&pg);
    {
        let stdin = late.stdin.as_mut().expect("psql's input");
        writeln!(
            stdin,
            "BEGIN; UPDATE genapi_lines SET lease_until = clock_timestamp() + interval '1 s' \
             WHERE batch = '{BATCH}' AND line = 1 AND worker = 'a'; \
             INSERT INTO genapi_records (batch, line, worker, record) VALUES ('{BATCH}', 1, 'a', \
             '{{\"event\": \"intent\", \"line\": 1, \"name\": \"l1\", \"digest\": \"d\", \"sent_at\": 1}}'); \
             SELECT pg_advisory_xact_lock({GATE}); COMMIT;"
        )
        .unwrap();
    }
    drop(late.stdin.take());
    block_in_place(|| {
        pg.await_rows(
            "a's intent waiting to commit, its renewed lease lapsed",
            &format!(
                "SELECT 1 FROM pg_stat_activity WHERE xact_start < clock_timestamp() - interval '1.5 s' \
                 AND pid IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objid = {GATE} \
                 AND NOT granted)"
            ),
            LONG,
        )
    });
    let claiming = tokio::spawn(async move { b.claim(1).await });
    block_in_place(|| {
        pg.await_rows(
            "b's claim waiting for the line's row",
            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%claimed AS%'",
            LONG,
        )
    });
    drop(gate);
    let _ = block_in_place(|| late.wait());
    match claiming.await.unwrap().unwrap() {
        Claim::Mine(line) => assert!(line.sent().is_some(), "b took the line without a's intent: {line:?}"),
        other => assert!(matches!(other, Claim::Held), "{other:?}"),
    }
}
