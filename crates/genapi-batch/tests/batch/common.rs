//! The workspace's shared test helpers, and this binary's.

use futures::StreamExt;
use genapi_batch::{Batch, Event, Job, JobOutcome, Journal, JournalStore, MemoryJournal};
use genapi_mock::MockService;
use serde_json::json;

pub use genapi_test_common::*;

/// A store over `journal` (which clones share), for one run or adoption.
pub fn store(journal: impl Journal) -> JournalStore {
    JournalStore::open(journal).unwrap()
}

/// A journal in which an earlier run had line 1's submission of `body`
/// accepted by the mock (the task is the mock's, really submitted).
pub async fn accepted_earlier(
    mock: &genapi_mock::MockService,
    body: serde_json::Value,
) -> (genapi::Task, MemoryJournal) {
    accepted_earlier_at(mock, "/v1/gen-2-pro", body).await
}

/// As [`accepted_earlier`], for a line of the operation at `path`.
pub async fn accepted_earlier_at(
    mock: &genapi_mock::MockService,
    path: &str,
    body: serde_json::Value,
) -> (genapi::Task, MemoryJournal) {
    let task = mock.client().unwrap().submit_raw(path, body).await.unwrap();
    let mut journal = MemoryJournal::default();
    journal
        .append(&Event::Accepted {
            line: 1,
            id: task.id().to_string(),
            polling_url: task.polling_url().to_string(),
            cost: None,
            adopted: false,
        })
        .unwrap();
    (task, journal)
}

/// `count` lines of `gen-2-pro`, prompts `TAG N`, files `img-N`.
pub fn jobs(count: u64, tag: &str) -> Vec<Job> {
    (1..=count)
        .map(|n| {
            Job::new(
                n,
                "/v1/gen-2-pro",
                json!({"prompt": format!("{tag} {n}"), "width": 64, "height": 64}),
            )
            .name(format!("img-{n}"))
        })
        .collect()
}

/// [`jobs`] of `width` × `height`: lines of one price kind.
pub fn sized_jobs(count: u64, tag: &str, width: u32, height: u32) -> Vec<Job> {
    jobs(count, tag)
        .into_iter()
        .map(|mut job| {
            job.body["width"] = json!(width);
            job.body["height"] = json!(height);
            job
        })
        .collect()
}

/// Jobs whose prompt the service does not rewrite (upsampling off), so the
/// prompt a task reports can be checked against them.
pub fn literal_jobs(count: u64, tag: &str) -> Vec<Job> {
    jobs(count, tag)
        .into_iter()
        .map(|mut job| {
            job.body["disable_pup"] = json!(true);
            job
        })
        .collect()
}

/// Runs `batch` over `jobs` to its end; the outcomes by line.
pub async fn run_batch(batch: Batch, jobs: Vec<Job>) -> Vec<JobOutcome> {
    let mut outcomes: Vec<JobOutcome> = batch.run(jobs).unwrap().collect().await;
    outcomes.sort_by_key(|o| o.line);
    outcomes
}

/// A mock whose tasks take `duration_ms`, a client of it, an empty output
/// directory named after the test, and an empty journal.
pub async fn setup(duration_ms: u64, name: &str) -> (MockService, genapi::Client, Dir, MemoryJournal) {
    let mock = roomy_mock(duration_ms).await;
    let client = mock.client().unwrap();
    (mock, client, Dir::new(name), MemoryJournal::default())
}

/// The result of a task, fetched again through its polling host.
pub async fn mock_result(client: &genapi::Client, id: &str) -> Vec<u8> {
    let task = client.task(id).unwrap();
    task.wait().await.unwrap().bytes().await.unwrap().to_vec()
}

/// A mock of 200 ms tasks on an account of 100 credits.
pub async fn funded_mock() -> MockService {
    let mock = MockService::start_with(
        genapi_mock::MockConfig::default().default_duration(std::time::Duration::from_millis(200)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    mock.set_credits(Some(100.0));
    mock
}
