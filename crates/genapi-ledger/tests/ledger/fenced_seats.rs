//! What fences the workers sharing an account's seats, one of them stalled
//! on purpose where a race would hurt (its taking of a seat waits to commit
//! while the test holds it): the others never wait for it, and never take
//! the seat it is taking, so no seat is ever held by two workers.

use std::io::Write;
use std::time::{Duration, Instant};

use genapi_ledger::{LedgerOptions, SharedSeats, UNANSWERED_SEAT_HOLD};
use tokio::task::block_in_place;

use crate::common::pg::Postgres;
use crate::fenced_intents::{psql, GATE, LONG};

const POOL: &str = "fenced";
const TAKERS: usize = 8;

/// Eight workers ask for a seat of a pool of two at once, while a ninth
/// has taken the first seat and not yet committed (a descheduled backend, a
/// network stall before its `COMMIT`): none of the eight is given the seat
/// the ninth holds, and the one seat left goes to one worker only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_taking_seats_at_once_never_share_one() {
    let Some(pg) = Postgres::start("fenced-seats") else {
        return;
    };
    let url = pg.url();
    let mut workers = Vec::new();
    for n in 0..TAKERS {
        let options = LedgerOptions::default()
            .worker_name(format!("w{n}"))
            .step_deadline(LONG);
        let seats = SharedSeats::connect_with(&url, POOL, 2, &options, UNANSWERED_SEAT_HOLD);
        workers.push(seats.await.unwrap());
    }
    // Worker x takes seat 1; its commit waits until the test lets it go.
    let mut x = block_in_place(|| psql(&pg));
    let mut input = x.stdin.take().expect("psql's input");
    writeln!(
        input,
        "BEGIN; UPDATE genapi_seats SET worker = 'x', lease_until = now() + interval '600 s', \
         taken_at = now() WHERE pool = '{POOL}' AND seat = 1; SELECT pg_advisory_xact_lock({GATE});"
    )
    .unwrap();
    input.flush().unwrap();
    block_in_place(|| {
        pg.await_rows(
            "x holding seat 1, uncommitted",
            &format!("SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objid = {GATE} AND granted"),
            LONG,
        )
    });
    let takers: Vec<_> = workers
        .iter()
        .map(|seats| {
            let pool = seats.pool();
            tokio::spawn(async move { pool.take().await.map_err(|e| e.to_string()) })
        })
        .collect();
    // Each taker has answered, or waits for x's seat.
    let started = Instant::now();
    loop {
        let answered = takers.iter().filter(|taker| taker.is_finished()).count();
        let waiting = block_in_place(|| {
            pg.sql("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%taken AS%'")
        });
        if answered + waiting.parse::<usize>().unwrap() >= TAKERS {
            break;
        }
        assert!(started.elapsed() < LONG, "the takers neither answered nor waited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    writeln!(input, "COMMIT;").unwrap();
    drop(input);
    let _ = block_in_place(|| x.wait());
    let mut given = Vec::new();
    for taker in takers {
        if let Some(seat) = taker.await.unwrap().expect("a taker's answer") {
            given.push(seat);
        }
    }
    assert!(!given.contains(&1), "seat 1, x's, given to a taker too: {given:?}");
    assert_eq!(given, [2], "seat 2 given to one taker exactly");
    let holders = pg.sql(&format!(
        "SELECT worker FROM genapi_seats WHERE pool = '{POOL}' ORDER BY seat"
    ));
    assert_eq!(holders.lines().next(), Some("x"), "{holders}");
}
