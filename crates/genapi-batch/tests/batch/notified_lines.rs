//! A batch that names a receiver of notifications leaves to them only the
//! waits of the tasks whose submission named it: a line with a webhook of
//! its own waits as it would without one, never for a notification that
//! cannot come to the batch.

use std::sync::Arc;

use genapi::webhook::Inbox;
use genapi::{Learned, WebhookSecret};
use genapi_batch::{Batch, Job, MemoryJournal, NotifyAt, Standing};
use serde_json::json;

use crate::common::{run_batch, store, Dir};

/// The polls a batch of `job` alone made, its receiver named but never
/// called, with durations learned from 0.2 s (lower quartile) to 1.6 s
/// (upper).
async fn polls(name: &str, job: Job) -> u64 {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let mut learned = Learned::default();
    for seconds in [0.2, 0.2, 0.2, 0.4, 0.8, 1.6, 1.6, 1.6] {
        learned.observe("gen_2_pro", seconds);
    }
    let client = mock.client_builder().learned(learned).build().unwrap();
    let dir = Dir::new(name);
    let notify = NotifyAt::new(
        "https://hooks.example.com/batch",
        WebhookSecret::new("the-batch-secret-of-this-run"),
        Arc::new(Inbox::new()),
    );
    let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0).notify_at(notify);
    let outcomes = run_batch(batch, vec![job]).await;
    assert_eq!(outcomes[0].standing, Standing::Saved, "{outcomes:#?}");
    mock.stats().polls
}

/// A task of 1 s: polled at the lower quartile (0.2 s), then at its end by
/// its progress, when it waits as without notifications; once, past the
/// upper quartile (1.6 s), when its notification is to see its end.
#[tokio::test(start_paused = true)]
async fn a_line_with_a_webhook_of_its_own_is_polled_as_without_notifications() {
    let own = Job::new(
        1,
        "/v1/gen-2-pro",
        json!({"prompt": "a fox [mock:duration_ms=1000]", "width": 64, "height": 64,
               "webhook_url": "https://mine.example.com/h", "webhook_secret": "a-secret-of-the-lines-own"}),
    );
    let named = Job::new(
        1,
        "/v1/gen-2-pro",
        json!({"prompt": "a fox [mock:duration_ms=1000]", "width": 64, "height": 64}),
    );
    assert_eq!(polls("notified-own", own).await, 2, "polled as without notifications");
    assert_eq!(polls("notified-named", named).await, 1, "left to its notification");
}
