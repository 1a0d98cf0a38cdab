//! A task accepted in an earlier run, whose place under a shared limit
//! cannot be taken now, is still the line's: reported pending (run again to
//! wait for it), never failed.

use std::sync::Arc;

use futures::future::BoxFuture;
use futures::StreamExt;
use genapi_batch::{Batch, Job, Standing};
use url::Url;

use crate::common::{accepted_earlier, store, Dir};

/// Shared places whose database never answers.
#[derive(Debug, Default)]
struct Unreachable(tokio::sync::Notify);

impl genapi::SeatPool for Unreachable {
    fn take(&self) -> BoxFuture<'_, Result<Option<i32>, Box<dyn std::error::Error + Send + Sync>>> {
        Box::pin(async { Err("the database is down".into()) })
    }
    fn changes(&self) -> &tokio::sync::Notify {
        &self.0
    }
    fn lapsed(&self) -> BoxFuture<'_, Vec<(i32, String, String)>> {
        Box::pin(async { Vec::new() })
    }
    fn reclaim(&self, _seat: i32, _task_id: &str) {}
    fn assign(&self, _seat: i32, _task_id: &str, _polling_url: &Url) {}
    fn free(&self, _seat: i32) {}
    fn free_when_unanswered_expires(&self, _seat: i32) {}
}

#[tokio::test(start_paused = true)]
async fn a_resumed_task_without_a_shared_seat_is_pending_not_failed() {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let dir = Dir::new("resumed-without-seat");
    // An earlier run submitted line 1 and its task was accepted.
    let (task, journal) = accepted_earlier(&mock, serde_json::json!({"prompt": "a fox"})).await;
    let job = Job::new(1, "/v1/gen-2-pro", serde_json::json!({"prompt": "a fox"}));
    let client = mock
        .client_builder()
        .shared_seats(Arc::new(Unreachable::default()), 4)
        .build()
        .unwrap();
    let outcomes: Vec<_> = Batch::new(client, store(journal), &dir.0)
        .run(vec![job])
        .unwrap()
        .collect()
        .await;
    assert_eq!(outcomes.len(), 1, "{outcomes:#?}");
    let outcome = &outcomes[0];
    assert_eq!(outcome.standing, Standing::Accepted, "{outcome:#?}");
    assert_eq!(
        outcome.task.as_ref().map(|t| t.id.as_str()),
        Some(task.id()),
        "{outcome:#?}"
    );
    let error = outcome.error.as_deref().unwrap_or_default();
    assert!(error.contains("run the batch again"), "{error}");
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        1,
        "the task is not submitted again"
    );
}
