//! Ledgers written by release 0.1.0 keep working: the fixture
//! (`fixtures/ledger-0.1.0.sql`, that release's tables and the rows its
//! `genapi batch --ledger` runs wrote) holds a line in every situation those
//! runs could leave, and each stands where that release left it; its
//! credits count as this release counts them (an acceptance's report held,
//! never a price); a batch it stopped with a task running resumes under
//! this release and pays nothing twice.

use std::collections::BTreeMap;

use futures::StreamExt;
use genapi_batch::{
    Batch, Claim, CreditHolds, Ending, FailedStatus, Hold, JobFile, JobOutcome, ReadStore, Standing, WriteStore,
};
use genapi_ledger::{Ledger, ReadOnlyLedger};

use crate::common::pg::Postgres;
use crate::common::{roomy_mock, Dir};

/// The database release 0.1.0 left, as `pg_dump` wrote it (see its header).
const FIXTURE: &str = include_str!("fixtures/ledger-0.1.0.sql");

/// The job file of its batch `jobs:jobsjsonl`, byte for byte (line 8's
/// image is not there: that release's first run skipped the line).
const JOBS: &str = include_str!("fixtures/jobs-0.1.0.jsonl");

/// The batch the job file ran as, and that release's digest of the file.
const BATCH: &str = "jobs:jobsjsonl";
const JOBS_DIGEST: &str = "0a1b19816cea503f";

/// The batch it ran under a credit cap, that job file's digest, and the
/// price kind of its one line (a gen-2-pro of the default size), as that
/// release wrote them.
const CAPPED: &str = "jobs:cappedjsonl";
const CAPPED_DIGEST: &str = "9e87575645df69dd";
const CAPPED_KIND: &str = "69ba6b6e6f2fe3c6282e817a18e2a3f2";

/// A fresh cluster holding the fixture, or `None` without PostgreSQL.
fn earlier_ledger(name: &str) -> Option<Postgres> {
    let pg = Postgres::start(name)?;
    pg.sql(FIXTURE);
    Some(pg)
}

/// The fixture's job file in `dir`, checked as `genapi batch` checks it.
fn job_file(dir: &Dir) -> JobFile {
    let path = dir.join("jobs.jsonl");
    std::fs::write(&path, JOBS).unwrap();
    JobFile::check(&path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_of_the_earlier_release_stands_as_that_release_left_it() {
    let Some(pg) = earlier_ledger("earlier-ledger") else {
        return;
    };
    let dir = Dir::new("earlier-ledger");
    assert_eq!(job_file(&dir).digest(), JOBS_DIGEST, "the job file is the batch's own");
    let ledger = Ledger::open(&pg.url(), BATCH, JOBS_DIGEST).await.unwrap();
    let status = ledger.status(&[]).await.unwrap();
    use Standing::*;
    let expected: BTreeMap<u64, Standing> = [
        (1, Saved),
        (2, Ended),
        (3, Ended),
        // Refused with a 422: that release never sent it again unasked
        // (its --status counted it open); --retry-refused sends it.
        (4, Refused),
        (5, Unanswered),
        (6, Accepted),
        (7, Accepted),
        // At the credit cap: a line claimed, with no record.
        (8, Unsent),
        (9, Saved),
        (10, Unsent),
    ]
    .into_iter()
    .collect();
    assert_eq!(status.lines, expected);
    let shared = status.shared.as_ref().unwrap();
    assert!(
        shared.workers.is_empty(),
        "every worker of that release stopped: {shared:?}"
    );
    assert_eq!(
        (shared.credits_charged, shared.credits_held),
        (2.77, 1.58),
        "the 4.35 that release counted as charged: what the service settled, and line 7's reported cost held"
    );
    let read_only = ReadOnlyLedger::open(&pg.url(), BATCH, JOBS_DIGEST)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(read_only.status(&[]).await.unwrap(), status, "--status reads the same");

    let lines = ledger.lines().await.unwrap();
    let failed = |line: u64| match lines[&line].ending() {
        Some(Ending::Failed { status, .. }) => status.clone(),
        other => panic!("line {line}: {other:?}"),
    };
    assert_eq!(failed(2), FailedStatus::ContentModerated);
    assert_eq!(failed(3), FailedStatus::Error);
    assert!(lines[&4].refused() && !lines[&3].refused());
    assert_eq!(lines[&5].sent().and_then(|sent| sent.sent_at), Some(1_795_693_723));
    let adopted = lines[&6].task().unwrap();
    assert!(adopted.adopted);
    assert_eq!(adopted.id, "6b1e2c2f-251b-4659-91aa-9f07cc98ded1");
    let running = lines[&7].task().unwrap();
    assert_eq!(running.id, "45854305-5399-4b05-89df-00f9cb27c3ae");
    assert_eq!(running.cost, Some(1.58));
    assert!(!lines.contains_key(&8), "the cap wrote nothing for line 8");
    assert!(matches!(lines[&9].ending(), Some(Ending::Saved { file: Some(file), .. }) if file == "retried.jpg"));
    assert_eq!(
        lines[&10].sent().and_then(|sent| sent.sent_at),
        Some(1_795_693_752),
        "the last of its six tries"
    );

    // The batch that release ran under a cap, stopped with its task running.
    let capped = ReadOnlyLedger::open(&pg.url(), CAPPED, CAPPED_DIGEST)
        .await
        .unwrap()
        .unwrap();
    let status = capped.status(&[]).await.unwrap();
    assert_eq!(status.lines, BTreeMap::from([(1, Accepted)]));
}

/// Release 0.1.0 stopped while line 7's task ran. Its acceptance (as that
/// release wrote it, the line's row and intent too, whose digest is that
/// release's of the job) is pointed at a task of a fresh mock; this release
/// claims the line, polls the task, saves its result and submits nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stopped_by_the_earlier_release_resumes_without_paying_twice() {
    let Some(pg) = earlier_ledger("earlier-ledger-resumed") else {
        return;
    };
    let mock = roomy_mock(200).await;
    let client = mock.client().unwrap();
    let dir = Dir::new("earlier-ledger-resumed");
    let file = job_file(&dir);
    let job = file
        .jobs()
        .unwrap()
        .map(Result::unwrap)
        .find(|job| job.line == 7)
        .unwrap();
    let mut body = job.body.clone();
    // The same job, without the marker that made it run for ten minutes.
    body["prompt"] = "a red fox at night".into();
    let task = client.submit_raw(&job.path, body).await.unwrap();
    pg.sql(&format!(
        "UPDATE genapi_records SET record = record || jsonb_build_object('id', '{}', 'polling_url', '{}') \
         WHERE batch = '{BATCH}' AND line = 7 AND record->>'event' = 'accepted'",
        task.id(),
        task.polling_url()
    ));
    let ledger = Ledger::open(&pg.url(), BATCH, file.digest()).await.unwrap();
    let outcomes: Vec<JobOutcome> = Batch::new(client, ledger, &dir.0).run([job]).unwrap().collect().await;
    assert_eq!(outcomes.len(), 1);
    let outcome = &outcomes[0];
    assert_eq!(outcome.standing, Standing::Saved, "{outcome:#?}");
    assert!(outcome.resumed);
    assert_eq!(outcome.task.as_ref().map(|t| t.id.as_str()), Some(task.id()));
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        1,
        "submitted once, by the earlier release"
    );
    assert!(dir.join("running.jpg").is_file());
    let after = ReadOnlyLedger::open(&pg.url(), BATCH, JOBS_DIGEST)
        .await
        .unwrap()
        .unwrap();
    let status = after.status(&[]).await.unwrap();
    assert_eq!(status.lines[&7], Standing::Saved);
    assert_eq!(status.lines[&6], Standing::Accepted, "a line not run is left as it was");
}

/// Release 0.1.0 wrote the cost an acceptance reported as the line's charge
/// (`charged`), where this release keeps only costs the service settled
/// and holds the report. A line it left accepted under a cap is counted, its
/// report no price of its kind: the next line of the kind goes alone, with
/// all that is left, until a task of the kind settles its price.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acceptances_report_the_earlier_release_wrote_as_charged_prices_no_kind() {
    let Some(pg) = earlier_ledger("earlier-ledger-report") else {
        return;
    };
    let ledger = Ledger::open(&pg.url(), CAPPED, CAPPED_DIGEST).await.unwrap();
    let status = ledger.status(&[]).await.unwrap();
    let shared = status.shared.as_ref().unwrap();
    assert_eq!(
        (shared.credits_charged, shared.credits_held),
        (0.0, 1.58),
        "held, not charged"
    );
    assert!(matches!(ledger.claim(2).await.unwrap(), Claim::Mine(_)));
    assert_eq!(
        ledger.hold_credits(2, CAPPED_KIND, 10.0, None).await.unwrap(),
        Hold::Held(10.0 - 1.58),
        "the first line of a kind not settled yet, alone"
    );
}
