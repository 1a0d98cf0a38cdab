//! A worker's name, one for its seats and its lines: started again while
//! its earlier run's connections still hold the name (the database has not
//! ended them yet), a worker waits for them and takes back its name, its
//! seats and its lines; a name a live worker keeps is given up after the
//! name wait, for `#2` or a refusal.

use std::time::Duration;

use genapi_batch::{Claim, WriteStore};
use genapi_ledger::{Ledger, LedgerError, LedgerOptions, SharedSeats, UNANSWERED_SEAT_HOLD};
use tokio::task::block_in_place;

use crate::common::pg::Postgres;
use crate::common::Dir;

const POOL: &str = "named";
const BATCH: &str = "named-batch";
const DIGEST: &str = "0123456789abcdef";

/// Longer than anything here takes on a loaded machine: only a broken
/// worker waits this long.
const LONG: Duration = Duration::from_secs(60);

/// A worker's seats, then its ledger under the name the seats got, as
/// `genapi batch` opens them.
async fn open_worker(url: &str, options: LedgerOptions) -> Result<(SharedSeats, Ledger), LedgerError> {
    let seats = SharedSeats::connect_with(url, POOL, 2, &options, UNANSWERED_SEAT_HOLD).await?;
    let ledger = Ledger::open_with(url, BATCH, DIGEST, options.worker_name(seats.worker())).await?;
    Ok((seats, ledger))
}

/// A worker for a folder of its own, on a cluster of its own, holding its
/// name, seat 1 of the pool and line 1 of the batch.
struct Holding {
    seats: SharedSeats,
    ledger: Ledger,
    /// The worker's name.
    name: String,
    /// Its options, for another worker for the same folder.
    options: LedgerOptions,
    /// The folder its name is made of, kept until the test ends.
    _folder: Dir,
    url: String,
    pg: Postgres,
}

/// A [`Holding`] worker; `None` where PostgreSQL is not installed.
async fn a_worker_holding_its_name(test: &str) -> Option<Holding> {
    let pg = Postgres::start(test)?;
    let url = pg.url();
    let folder = Dir::new(test);
    let options = LedgerOptions::default().worker_for_folder(&folder.0);
    let (seats, ledger) = open_worker(&url, options.clone()).await.unwrap();
    assert_eq!(seats.pool().take().await.unwrap(), Some(1));
    assert!(matches!(ledger.claim(1).await.unwrap(), Claim::Mine(_)));
    Some(Holding {
        name: seats.worker().to_string(),
        seats,
        ledger,
        options,
        _folder: folder,
        url,
        pg,
    })
}

/// The earlier run holds the name, a seat and a line until the test lets
/// go of its connections, one at a time, each once the new run is seen
/// waiting for it: the new run gets the name itself (not `#2`) for its
/// seats and its ledger, the earlier run's seat is handed back, and its
/// line is the new run's at once, its lease notwithstanding.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_started_again_waits_for_its_name_and_takes_back_its_seats_and_lines() {
    let Some(earlier) = a_worker_holding_its_name("name-waited-for").await else {
        return;
    };
    // Waiting as long as it takes here: the test, not the clock, decides
    // when the name is let go.
    let patient = earlier.options.clone().step_deadline(3 * LONG).name_wait(LONG);
    let again = tokio::spawn({
        let url = earlier.url.clone();
        async move { open_worker(&url, patient).await }
    });
    let pg = &earlier.pg;
    let seats_asking = block_in_place(|| pg.await_advisory_waiter(&[], LONG));
    drop(earlier.seats);
    // The pool's name is the new run's now, and its ledger asks for the
    // batch's, which the earlier run still holds.
    block_in_place(|| pg.await_advisory_waiter(&[seats_asking], LONG));
    drop(earlier.ledger);
    let (seats, ledger) = again.await.unwrap().unwrap();

    let name = &earlier.name;
    assert_eq!(seats.worker(), name);
    assert_eq!(ledger.worker(), name);
    assert_eq!(
        pg.sql("SELECT worker FROM genapi_seats WHERE worker IS NOT NULL"),
        format!("{name} (earlier run)"),
        "the earlier run's seat is no one's to renew, and comes back"
    );
    assert!(matches!(ledger.claim(1).await.unwrap(), Claim::Mine(_)));
}

/// A live worker keeps its name: after a short name wait, a worker for the
/// same folder works as `#2`, its seats and its lines alike, leaving the
/// live worker's seat alone; a worker asking for that name explicitly is
/// refused, for the seats and for the ledger.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_name_its_live_worker_keeps_is_given_up_after_the_name_wait() {
    let Some(live) = a_worker_holding_its_name("name-kept").await else {
        return;
    };
    let (url, name) = (&live.url, &live.name);
    let brief = Duration::from_millis(500);
    let (seats, ledger) = open_worker(url, live.options.clone().name_wait(brief)).await.unwrap();
    assert_eq!(seats.worker(), format!("{name}#2"));
    assert_eq!(ledger.worker(), format!("{name}#2"));
    assert_eq!(
        &live.pg.sql("SELECT worker FROM genapi_seats WHERE worker IS NOT NULL"),
        name,
        "the live worker's seat stays its own"
    );

    let named = LedgerOptions::default().worker_name(name.clone()).name_wait(brief);
    let refused = SharedSeats::connect_with(url, POOL, 2, &named, UNANSWERED_SEAT_HOLD)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, LedgerError::WorkerTaken { worker } if worker == name),
        "{refused}"
    );
    let refused = Ledger::open_with(url, BATCH, DIGEST, named).await.unwrap_err();
    assert!(
        matches!(&refused, LedgerError::WorkerTaken { worker } if worker == name),
        "{refused}"
    );
}
