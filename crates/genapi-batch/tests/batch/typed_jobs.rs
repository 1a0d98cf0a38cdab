//! Jobs made from the same typed requests `Client::submit` takes.

use futures::StreamExt;
use genapi::api::types::Gen2ProRequest;
use genapi_batch::{Batch, Job, MemoryJournal, Standing};
use serde_json::Value;

use crate::common::{store, Dir};

#[tokio::test(start_paused = true)]
async fn a_typed_job_sends_what_submit_would_and_is_saved() {
    let mock = genapi_mock::MockService::start().await.unwrap();
    let dir = Dir::new("typed-jobs");
    let jobs = vec![
        Job::from_request(
            1,
            Gen2ProRequest::builder()
                .prompt("a red fox")
                .width(512u32)
                .height(512u32),
        )
        .unwrap()
        .name("fox"),
        Job::from_request(2, Gen2ProRequest::builder().prompt("a grey owl")).unwrap(),
    ];
    let batch = Batch::new(mock.client().unwrap(), store(MemoryJournal::default()), &dir.0);
    let outcomes: Vec<_> = batch.run(jobs).unwrap().collect().await;
    assert!(outcomes.iter().all(|o| o.standing == Standing::Saved), "{outcomes:#?}");
    assert!(dir.join("fox.jpg").is_file() && dir.join("line-2.jpg").is_file());
    // What the service received is what the typed builders hold, and only that.
    let mut bodies: Vec<Value> = mock
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path == "/v1/gen-2-pro")
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    bodies.sort_by_key(|body| body["prompt"].as_str().unwrap_or("").to_string());
    assert_eq!(bodies[0], serde_json::json!({"prompt": "a grey owl"}));
    assert_eq!(
        bodies[1],
        serde_json::json!({"prompt": "a red fox", "width": 512, "height": 512})
    );
}

#[test]
fn a_builder_that_cannot_finish_is_refused_as_submit_refuses_it() {
    let error = Job::from_request(1, Gen2ProRequest::builder()).unwrap_err();
    assert!(matches!(error, genapi::Error::Validation { .. }), "{error}");
    assert!(error.to_string().contains("prompt"), "{error}");
}
