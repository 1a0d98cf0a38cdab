//! Credits held under a cap, as the ledger decides them, by the batch's one
//! rule: a kind is priced only by a cost the service settled when a task
//! ended, never by what an acceptance reported nor by a price learned
//! before the batch, and a hold left by a run that is gone is counted but
//! never waited for.

use genapi_batch::{Claim, CreditHolds, Hold, WriteStore};
use genapi_ledger::Ledger;
use serde_json::json;

use crate::common::pg::Postgres;
use crate::record;

/// A ledger of batch `batch` with lines `1..=lines` claimed by it.
async fn claimed(pg: &Postgres, batch: &str, lines: u64) -> Ledger {
    let ledger = Ledger::open(&pg.url(), batch, "0123456789abcdef").await.unwrap();
    for line in 1..=lines {
        assert!(
            matches!(ledger.claim(line).await.unwrap(), Claim::Mine(_)),
            "line {line}"
        );
    }
    ledger
}

async fn accept(ledger: &Ledger, line: u64, cost: f64) {
    let accepted = json!({"event": "accepted", "line": line, "id": format!("t-{line}"),
                          "polling_url": format!("https://x/{line}"), "cost": cost});
    ledger.write(record(accepted)).await.unwrap();
}

async fn settle(ledger: &Ledger, line: u64, cost: f64) {
    let finished = json!({"event": "finished", "line": line, "status": "Ready", "cost": cost});
    ledger.write(record(finished)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_of_zero_at_acceptance_keeps_the_hold_until_the_task_settles_it() {
    let Some(pg) = Postgres::start("credit-holds") else {
        return;
    };
    let ledger = claimed(&pg, "capped", 2).await;
    assert_eq!(ledger.hold_credits(1, "k", 10.0, None).await.unwrap(), Hold::Held(10.0));
    accept(&ledger, 1, 0.0).await;
    assert_eq!(
        ledger.hold_credits(2, "k", 10.0, None).await.unwrap(),
        Hold::Wait,
        "not held at 0: the first of the kind's charge is not known yet"
    );
    settle(&ledger, 1, 1.58).await;
    assert_eq!(ledger.hold_credits(2, "k", 10.0, None).await.unwrap(), Hold::Held(1.58));
}

/// A service that reports 0.01 at acceptance and settles 1.0 when the task
/// ends: the kind is priced at 1.0, and nothing is sent against the report.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acceptances_report_neither_prices_a_kind_nor_gives_back_its_hold() {
    let Some(pg) = Postgres::start("credit-holds-report") else {
        return;
    };
    let ledger = claimed(&pg, "reported", 3).await;
    assert_eq!(ledger.hold_credits(1, "k", 2.0, None).await.unwrap(), Hold::Held(2.0));
    accept(&ledger, 1, 0.01).await;
    assert_eq!(
        ledger.hold_credits(2, "k", 2.0, None).await.unwrap(),
        Hold::Wait,
        "the first of its kind still holds all that was left"
    );
    settle(&ledger, 1, 1.0).await;
    assert_eq!(ledger.hold_credits(2, "k", 2.0, None).await.unwrap(), Hold::Held(1.0));
    accept(&ledger, 2, 0.01).await;
    assert_eq!(ledger.hold_credits(3, "k", 2.0, None).await.unwrap(), Hold::Wait);
    settle(&ledger, 2, 1.0).await;
    assert_eq!(
        ledger.hold_credits(3, "k", 2.0, None).await.unwrap(),
        Hold::CapReached,
        "2 settled: the cap, not passed"
    );
}

/// A price learned before the batch, however small, never sets a hold.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_learned_before_the_batch_never_sets_a_hold() {
    let Some(pg) = Postgres::start("credit-holds-learned") else {
        return;
    };
    let ledger = claimed(&pg, "learned", 3).await;
    for learned in [1e-9, 5e-324, 1.0] {
        let hold = ledger.hold_credits(1, "k", 2.0, Some(learned)).await.unwrap();
        assert_eq!(hold, Hold::Held(2.0), "{learned}: all that is left, to go alone");
        assert_eq!(
            ledger.hold_credits(2, "k", 2.0, Some(learned)).await.unwrap(),
            Hold::Wait,
            "{learned}"
        );
        ledger.drop_hold(1).await.unwrap();
    }
    // One above what is left keeps the line back.
    assert_eq!(
        ledger.hold_credits(3, "k", 2.0, Some(2.5)).await.unwrap(),
        Hold::CapReached
    );
}

/// A worker that died with a task in flight leaves its hold. The worker
/// that claims the line counts it, but never waits for it: it is worked on
/// only when its turn comes, and a submission waiting for it then could
/// keep that turn from coming.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hold_left_by_a_worker_that_is_gone_is_counted_never_waited_for() {
    let Some(pg) = Postgres::start("credit-holds-gone") else {
        return;
    };
    let gone = claimed(&pg, "taken-over", 1).await;
    assert_eq!(gone.hold_credits(1, "k", 10.0, None).await.unwrap(), Hold::Held(10.0));
    accept(&gone, 1, 0.01).await;
    drop(gone);
    // Its lease lapses.
    pg.sql("UPDATE genapi_lines SET lease_until = now() - interval '1 second' WHERE line = 1");
    let ledger = claimed(&pg, "taken-over", 2).await;
    assert_eq!(
        ledger.hold_credits(2, "k", 10.0, None).await.unwrap(),
        Hold::CapReached,
        "the dead hold took all there was, and is not waited for"
    );
    settle(&ledger, 1, 1.0).await;
    assert_eq!(
        ledger.hold_credits(2, "k", 10.0, None).await.unwrap(),
        Hold::Held(9.0),
        "settled: its hold is replaced; its kind was not this run's to price"
    );
}

/// A moderated task is charged nothing: its hold goes when it ends, so the
/// cap it took is free for the next line (a task that failed with an error
/// and no settled cost keeps its hold: it may have been charged).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moderated_task_gives_its_hold_back_and_one_that_failed_keeps_it() {
    let Some(pg) = Postgres::start("credit-holds-moderated") else {
        return;
    };
    let ledger = claimed(&pg, "moderated", 3).await;
    let end = |line: u64, status: &str| json!({"event": "finished", "line": line, "status": status});
    assert_eq!(ledger.hold_credits(1, "k", 10.0, None).await.unwrap(), Hold::Held(10.0));
    accept(&ledger, 1, 0.0).await;
    ledger.write(record(end(1, "Content Moderated"))).await.unwrap();
    assert_eq!(
        ledger.hold_credits(2, "k", 10.0, None).await.unwrap(),
        Hold::Held(10.0),
        "nothing of the cap is taken by the moderated task"
    );
    accept(&ledger, 2, 0.0).await;
    ledger.write(record(end(2, "Error"))).await.unwrap();
    assert_eq!(
        ledger.hold_credits(3, "k", 10.0, None).await.unwrap(),
        Hold::CapReached,
        "the failed task may have been charged all it held"
    );
}
