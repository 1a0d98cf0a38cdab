//! A task taken up from the journal was submitted by an earlier run, with a
//! webhook secret this run's client never sent: its answers are scrubbed of
//! that secret all the same, so an outcome (and whatever stores it) never
//! holds it.

use futures::StreamExt;
use genapi_batch::{Batch, Job, Standing};
use genapi_mock::MockService;
use serde_json::json;

use crate::common::{accepted_earlier, answer_polls, store, Dir};

#[tokio::test(start_paused = true)]
async fn a_resumed_task_whose_answer_quotes_its_webhook_secret_never_shows_it() {
    const SECRET: &str = "resumed-canary-secret-7b";
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("resumed-secrets");
    let body = json!({"prompt": "a fox", "webhook_url": "http://127.0.0.1:9/hook", "webhook_secret": SECRET});
    // An earlier run submitted line 1 and its task was accepted.
    let (task, journal) = accepted_earlier(&mock, body.clone()).await;
    let quoting = json!({"id": task.id(), "status": "Error", "details": {"error": format!("hook refused {SECRET}")}});
    answer_polls(&mock, quoting.to_string(), 100);
    let outcomes: Vec<_> = Batch::new(mock.client().unwrap(), store(journal), &dir.0)
        .run(vec![Job::new(1, "/v1/gen-2-pro", body)])
        .unwrap()
        .collect()
        .await;
    let outcome = &outcomes[0];
    assert_eq!(outcome.standing, Standing::Ended, "{outcome:#?}");
    let shown = format!("{outcome:?} {}", outcome.error.as_deref().unwrap_or_default());
    assert!(shown.contains("hook refused [redacted]"), "{shown}");
    assert!(!shown.contains(SECRET), "{shown}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "not submitted again");
}
