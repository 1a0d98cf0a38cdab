//! A ledger database is known by a name of its own, whatever its address:
//! two databases on one server never pass for one (a folder marked by one
//! batch's workers refuses the other's), and one database keeps its name
//! under every spelling of its address.

use genapi_ledger::Ledger;

use crate::common::pg::Postgres;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_keeps_its_name_under_every_address_and_another_has_its_own() {
    let Some(pg) = Postgres::start("database-names") else {
        return;
    };
    pg.sql("CREATE DATABASE other");
    let first = Ledger::open(&pg.url(), "b", "d").await.unwrap();
    // The same database, its address spelt otherwise.
    let spelt = pg.url_at("127.0.0.1", "application_name=another&connect_timeout=120");
    let again = Ledger::open(&spelt, "b", "d").await.unwrap();
    assert_eq!(first.database_id(), again.database_id());
    assert!(!first.database_id().is_empty());
    // Another database of the same server, named in the address's query.
    let other_url = pg.url_at("127.0.0.1", "dbname=other&connect_timeout=120");
    let other = Ledger::open(&other_url, "b", "d").await.unwrap();
    assert_ne!(first.database_id(), other.database_id());
}
