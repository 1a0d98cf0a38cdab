//! Records shared by many processes: made once, changed only on the version
//! read, written by their holder only, forgotten past their keeping. Each
//! condition of the statements has its case here.

use std::time::Duration;

use genapi_ledger::{RecordHold, SharedRecords};
use serde_json::json;

use crate::common::pg::Postgres;

const DAY: Duration = Duration::from_secs(86_400);

fn held(holder: &str, lasting: Duration) -> Option<RecordHold<'_>> {
    Some(RecordHold { holder, lasting })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_is_made_once_and_changed_only_on_the_version_read() {
    let Some(pg) = Postgres::start("records-once") else {
        return;
    };
    let (one, two) = (
        SharedRecords::open(&pg.url(), "proxies", DAY).await.unwrap(),
        SharedRecords::open(&pg.url(), "proxies", DAY).await.unwrap(),
    );
    assert!(one.create("job", &json!({"n": 1}), None).await.unwrap());
    assert!(
        !two.create("job", &json!({"n": 2}), None).await.unwrap(),
        "made by the first"
    );
    let read = two.read("job").await.unwrap().unwrap();
    assert_eq!(read.value, json!({"n": 1}));
    // Both decide on the same version: only the first write lands.
    assert!(one.replace("job", read.version, &json!({"n": 3}), None).await.unwrap());
    assert!(!two.replace("job", read.version, &json!({"n": 4}), None).await.unwrap());
    assert_eq!(one.read("job").await.unwrap().unwrap().value, json!({"n": 3}));
    // Another scope is another set of records.
    let other = SharedRecords::open(&pg.url(), "elsewhere", DAY).await.unwrap();
    assert_eq!(other.read("job").await.unwrap(), None);
    assert!(other.create("job", &json!({}), None).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_its_holder_changes_a_held_record_and_a_hold_lapses() {
    let Some(pg) = Postgres::start("records-held") else {
        return;
    };
    let records = SharedRecords::open(&pg.url(), "proxies", DAY).await.unwrap();
    assert!(records
        .create("job", &json!("in flight"), held("a/1", Duration::from_secs(600)))
        .await
        .unwrap());
    let read = records.read("job").await.unwrap().unwrap();
    assert_eq!((read.holder.as_deref(), read.held), (Some("a/1"), true));
    assert!(!records.update_held("job", "b/1", &json!("b's"), None).await.unwrap());
    assert!(!records.remove_held("job", "b/1").await.unwrap());
    // The holder's word, with a hold of no time: it stands no more, and is
    // still the holder's to write on.
    assert!(records
        .update_held("job", "a/1", &json!("accepted"), held("a/1", Duration::ZERO))
        .await
        .unwrap());
    let read = records.read("job").await.unwrap().unwrap();
    assert_eq!((read.value, read.held), (json!("accepted"), false));
    assert!(records.remove_held("job", "a/1").await.unwrap());
    assert_eq!(records.read("job").await.unwrap(), None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_record_past_its_keeping_is_gone_and_made_anew() {
    let Some(pg) = Postgres::start("records-kept") else {
        return;
    };
    let fleeting = SharedRecords::open(&pg.url(), "proxies", Duration::ZERO).await.unwrap();
    assert!(fleeting.create("job", &json!(1), None).await.unwrap());
    assert_eq!(fleeting.read("job").await.unwrap(), None, "past its keeping at once");
    let read_raw = || pg.sql("SELECT count(*) FROM genapi_shared_records");
    assert_eq!(read_raw().trim(), "1", "kept until the scope is opened again");
    // Made over the old one, and no replace lands on a record past keeping.
    let kept = SharedRecords::open(&pg.url(), "proxies", DAY).await.unwrap();
    assert_eq!(read_raw().trim(), "0", "forgotten when the scope is opened");
    assert!(fleeting.create("job", &json!(2), None).await.unwrap());
    assert!(
        fleeting.create("job", &json!(3), None).await.unwrap(),
        "over a record past keeping"
    );
    let version: i64 = pg
        .sql("SELECT version FROM genapi_shared_records")
        .trim()
        .parse()
        .unwrap();
    assert!(!kept.replace("job", version, &json!(4), None).await.unwrap());
    assert!(!kept.update_held("job", "x", &json!(4), None).await.unwrap());
}
