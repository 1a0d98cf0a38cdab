//! A polling host the key may not go to refuses every poll of the tasks
//! it holds: the batch stops sending at the first such refusal, instead of
//! paying for every line and then waiting for ever on seats the unseen
//! tasks hold.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, Job, MemoryJournal, Standing};
use genapi_mock::MockService;
use serde_json::json;

use crate::common::{store, Dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_polling_host_that_refuses_polls_stops_the_batch_from_sending() {
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("untrusted-polling-host");
    // The mock's own client trusts its polling host; this one is told only
    // the base URL and the key, as a user who skipped a variable.
    let client = genapi::Client::builder()
        .api_key(mock.key())
        .base_url(mock.base_url())
        .max_active_tasks(4)
        .build()
        .unwrap();
    let jobs: Vec<Job> = (1..=30)
        .map(|n| {
            Job::new(
                n,
                "/v1/gen-2-pro",
                json!({"prompt": format!("line {n}"), "width": 64, "height": 64}),
            )
        })
        .collect();
    let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0);
    // Only a guard: a batch waiting for ever fails the test instead of
    // hanging it.
    let outcomes: Vec<_> = tokio::time::timeout(Duration::from_secs(120), batch.run(jobs).unwrap().collect())
        .await
        .expect("the batch waited for ever on seats no poll can free");
    assert_eq!(outcomes.len(), 30, "{outcomes:#?}");
    let sent = mock.count("POST", "/v1/gen-2-pro");
    assert!(sent <= 8, "{sent} tasks paid for after the first poll was refused");
    let not_sent: Vec<_> = outcomes.iter().filter(|o| o.standing == Standing::Unsent).collect();
    assert_eq!(not_sent.len(), 30 - sent, "{outcomes:#?}");
    assert!(
        not_sent.iter().all(|o| o
            .error
            .as_deref()
            .unwrap_or_default()
            .contains("GENAPI_TRUSTED_ORIGINS")),
        "each says why and what to do: {not_sent:#?}"
    );
}
