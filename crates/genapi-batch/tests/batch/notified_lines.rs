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
/// called, with durations learned from 0.2 s (lower quartile) to 3.2 s
/// (upper). On the real clock: a paused one would jump past the task's end
/// while the batch waits on a file (it moves on whenever nothing is
/// ready), so the first poll would not come at the aimed moment.
async fn polls(name: &str, job: Job) -> u64 {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let mut learned = Learned::default();
    for seconds in [0.2, 0.2, 0.2, 0.8, 1.6, 3.2, 3.2, 3.2] {
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

/// A task of 2 s: polled at the lower quartile (0.2 s, 1.8 s before its
/// end) and again at its end by its progress, when it waits as without
/// notifications; once, past the upper quartile (3.2 s), when its
/// notification is to see its end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_with_a_webhook_of_its_own_is_polled_as_without_notifications() {
    let own = Job::new(
        1,
        "/v1/gen-2-pro",
        json!({"prompt": "a fox [mock:duration_ms=2000]", "width": 64, "height": 64,
               "webhook_url": "https://mine.example.com/h", "webhook_secret": "a-secret-of-the-lines-own"}),
    );
    let named = Job::new(
        1,
        "/v1/gen-2-pro",
        json!({"prompt": "a fox [mock:duration_ms=2000]", "width": 64, "height": 64}),
    );
    let (own, named) = tokio::join!(polls("notified-own", own), polls("notified-named", named));
    assert!(
        own >= 2,
        "polled first at the lower quartile, as without notifications: {own}"
    );
    assert_eq!(named, 1, "left to its notification");
}
