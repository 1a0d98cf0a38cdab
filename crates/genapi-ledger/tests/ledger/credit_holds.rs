//! Credits held under a cap, as the ledger decides them: an acceptance
//! that reports a charge of 0 says nothing yet of the charge, so its hold
//! stays until the task settles it, and a price learned before the batch
//! stands for a kind not charged in it.

use genapi_batch::{Claim, Hold, Store};
use genapi_ledger::Ledger;
use serde_json::json;

use crate::common::pg::Postgres;
use crate::record;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_charge_of_zero_at_acceptance_keeps_the_hold_until_the_task_settles_it() {
    let Some(pg) = Postgres::start("credit-holds") else {
        return;
    };
    let ledger = Ledger::open(&pg.url(), "capped", "0123456789abcdef").await.unwrap();
    for line in 1..=3 {
        assert!(
            matches!(ledger.claim(line).await.unwrap(), Claim::Mine(_)),
            "line {line}"
        );
    }
    assert_eq!(ledger.hold_credits(1, "k", 10.0, None).await.unwrap(), Hold::Held(10.0));
    ledger
        .write(record(
            json!({"event": "accepted", "line": 1, "id": "t-1", "polling_url": "https://x/1", "cost": 0.0}),
        ))
        .await
        .unwrap();
    assert_eq!(
        ledger.hold_credits(2, "k", 10.0, None).await.unwrap(),
        Hold::Wait,
        "not held at 0: the first of the kind's charge is not known yet"
    );
    ledger
        .write(record(
            json!({"event": "finished", "line": 1, "status": "Ready", "cost": 1.58}),
        ))
        .await
        .unwrap();
    assert_eq!(ledger.hold_credits(2, "k", 10.0, None).await.unwrap(), Hold::Held(1.58));
    // A kind never charged in this batch, priced in an earlier one.
    assert_eq!(
        ledger.hold_credits(3, "other", 10.0, Some(2.0)).await.unwrap(),
        Hold::Held(2.0)
    );
}
