//! Workers sharing a seat pool share it: a worker that found the pool full
//! gets seats while another keeps all of its own busy, down to an equal
//! share each. Before, a busy worker kept each seat its task gave back for
//! its own next submission, for as long as it had lines, and a worker that
//! started a moment later sent nothing until then while holding the lines
//! it had claimed (two workers of four idle for 26 s of a 28 s batch).

use std::time::Duration;

use genapi::SeatPool;
use genapi_ledger::SharedSeats;
use tokio::time::Instant;

use crate::common::pg::Postgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_found_the_pool_full_gets_an_equal_share_while_another_stays_busy() {
    let Some(pg) = Postgres::start("fair-shares") else {
        return;
    };
    let url = pg.url();
    let busy = SharedSeats::connect(&url, "team", 4).await.unwrap();
    let late = SharedSeats::connect(&url, "team", 4).await.unwrap();
    let mut busy_held = Vec::new();
    for _ in 0..4 {
        busy_held.push(busy.take().await.unwrap().expect("a free seat"));
    }
    assert_eq!(late.take().await.unwrap(), None, "the pool of 4 is full");
    // The busy worker's tasks end one after another, and each time its next
    // submission asks for a seat at once, as a worker with lines waits.
    let mut late_held = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut rounds = 0;
    while late_held.len() < 2 {
        assert!(
            Instant::now() < deadline,
            "after {rounds} tasks of the busy worker ended, it holds {} seats and the waiting one {}",
            busy_held.len(),
            late_held.len()
        );
        rounds += 1;
        if !busy_held.is_empty() {
            busy.free(busy_held.remove(0));
        }
        if let Some(place) = busy.take().await.unwrap() {
            busy_held.push(place);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        if let Some(place) = late.take().await.unwrap() {
            late_held.push(place);
        }
    }
    // Once at its share, the busy worker keeps its seats again.
    for _ in 0..10 {
        if let Some(place) = busy_held.pop() {
            busy.free(place);
        }
        if let Some(place) = busy.take().await.unwrap() {
            busy_held.push(place);
        }
    }
    busy.flush().await;
    late.flush().await;
    eprintln!(
        "after {rounds} rounds: busy {busy_held:?}, late {late_held:?}; in the database: {}",
        pg.sql("SELECT string_agg(seat || '=' || coalesce(worker, '-'), ', ' ORDER BY seat) FROM genapi_seats")
    );
    assert_eq!(
        busy_held.len(),
        2,
        "the busy worker keeps its share, no more and no less"
    );
    let mut all: Vec<i32> = busy_held.iter().chain(&late_held).copied().collect();
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 4, "four seats, none held twice");
    let owners = pg.sql("SELECT count(DISTINCT worker) FROM genapi_seats WHERE pool = 'team' AND worker IS NOT NULL");
    assert_eq!(owners, "2", "the database shows both workers holding seats");
}
