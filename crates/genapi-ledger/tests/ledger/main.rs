//! The ledger as a program sharing a batch or an account's seats meets it,
//! against a real PostgreSQL (a throwaway cluster per test) and the mock on
//! a loopback port: seats shared fairly and never leaked, what events carry,
//! a worker's name taken back, ledgers an earlier release wrote, and the
//! connection's TLS as libpq's settings ask. (Workers sharing a batch
//! through the `genapi batch` command are tested with the command.)

/// The workspace's shared test helpers.
mod common {
    pub use genapi_test_common::*;
}

/// A batch event from its JSON form, as the journal writes it.
fn record(value: serde_json::Value) -> genapi_batch::Event {
    serde_json::from_value(value).unwrap()
}

mod carried;
mod credit_holds;
mod database_names;
mod earlier_ledgers;
mod fair_shares;
mod fenced_intents;
mod fenced_seats;
mod rescue;
mod shared_records;
mod shared_seats;
mod store_contract;
mod tls;
mod worker_names;
