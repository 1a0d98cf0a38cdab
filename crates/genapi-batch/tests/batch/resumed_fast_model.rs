//! A line an earlier run left accepted is waited for as its model's tasks
//! are: the rerun tells the task picked up again its operation (from the
//! job's path), so a fast model's task is polled when it is likely done,
//! not on the whole seconds a task nothing is known of is polled on, and
//! its duration is learned under it.

use futures::StreamExt;
use genapi::api::types::Gen2Klein4bRequest;
use genapi::{Learned, Submit};
use genapi_batch::{Batch, Job, Standing};

use crate::common::{accepted_earlier_at, store, Dir};

#[tokio::test(start_paused = true)]
async fn a_fast_models_task_taken_up_again_is_polled_when_its_durations_say() {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let dir = Dir::new("resumed-fast-model");
    let body = serde_json::json!({"prompt": "a fox [mock:duration_ms=1500]"});
    let (_task, journal) = accepted_earlier_at(&mock, "/v1/gen-2-klein-4b", body.clone()).await;
    let operation = <Gen2Klein4bRequest as Submit>::OPERATION.id;
    let mut learned = Learned::default();
    for _ in 0..8 {
        learned.observe(operation, 1.5);
    }
    let client = mock.client_builder().learned(learned).build().unwrap();
    let polls_before = mock.stats().polls;
    let outcomes: Vec<_> = Batch::new(client.clone(), store(journal), &dir.0)
        .run(vec![Job::new(1, "/v1/gen-2-klein-4b", body)])
        .unwrap()
        .collect()
        .await;
    assert_eq!(outcomes.len(), 1, "{outcomes:#?}");
    assert_eq!(outcomes[0].standing, Standing::Saved, "{outcomes:#?}");
    assert!(outcomes[0].resumed, "{outcomes:#?}");
    // Asked at once (still running), then just past the lower quartile
    // (1.5 s): knowing nothing, it would be asked again at 1 s and at 2 s.
    assert_eq!(mock.stats().polls - polls_before, 2, "one poll at once, one aimed");
    assert_eq!(
        client.learned().durations(operation).count(),
        9,
        "learned under its operation"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-klein-4b"), 1, "not submitted again");
}
