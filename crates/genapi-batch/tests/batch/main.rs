//! Batches as a library user runs them: job files checked before anything
//! is sent, and jobs made from typed requests run against the mock. (Most of
//! the runner is driven through the `genapi batch` command's tests.)

/// The workspace's shared test helpers, and this binary's.
mod common {
    pub use genapi_test_common::*;

    use genapi_batch::{Journal, MemoryJournal, Record};

    /// A journal in which an earlier run had line 1's submission of `body`
    /// accepted by the mock (the task is the mock's, really submitted).
    pub async fn accepted_earlier(
        mock: &genapi_mock::MockService,
        body: serde_json::Value,
    ) -> (genapi::Task, MemoryJournal) {
        let task = mock.client().unwrap().submit_raw("/v1/gen-2-pro", body).await.unwrap();
        let mut journal = MemoryJournal::default();
        journal
            .append(&Record::Accepted {
                line: 1,
                id: task.id().to_string(),
                polling_url: task.polling_url().to_string(),
                cost: None,
                adopted: false,
            })
            .unwrap();
        (task, journal)
    }
}

mod credit_cap;
mod job_file;
mod journal_lock;
mod results_file;
mod resumed_secrets;
mod resumed_without_seat;
mod typed_jobs;
mod untrusted_polling_host;
