//! The credit cap at its stated bound: the kinds a batch has seen charged
//! never pass it; the first submission of a kind not seen yet goes alone
//! and may cost more than was left, and nothing is sent after it.

use std::time::Duration;

use futures::StreamExt;
use genapi_batch::{Batch, Job, JobStatus, MemoryJournal};
use genapi_mock::{MockConfig, MockService};
use serde_json::json;

use crate::common::{b64, png_header, Dir};

#[tokio::test(start_paused = true)]
async fn a_cap_is_passed_at_most_by_one_first_submission_of_a_new_kind_and_nothing_after_it() {
    let mock = MockService::start_with(
        MockConfig::default().default_duration(Duration::from_millis(200)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    mock.set_credits(Some(100.0));
    let dir = Dir::new("credit-cap-bound");
    // Two lines of a cheap kind, one with a large input image (a kind of its
    // own, dearer than all that is left), then two more cheap ones.
    let large = b64(&png_header(1024, 1024));
    let jobs: Vec<Job> = (1..=5)
        .map(|n| {
            let mut body = json!({"prompt": format!("line {n}"), "width": 256, "height": 256});
            if n == 3 {
                body["input_image"] = json!(large);
            }
            Job::new(n, "/v1/gen-2-pro", body).name(format!("img-{n}"))
        })
        .collect();
    let cap = 1.0;
    // One task at a time, so lines come in order.
    let client = mock.client_builder().max_active_tasks(1).build().unwrap();
    let batch = Batch::new(client, MemoryJournal::default(), &dir.0).max_credits(cap);
    let outcomes: Vec<_> = batch.run(jobs).unwrap().collect().await;
    let by_line = |line: u64| outcomes.iter().find(|o| o.line == line).unwrap();
    let charged = 100.0 - mock.credits().unwrap();
    let first_of_its_kind = by_line(3).cost.expect("line 3 was charged");
    // The bound is real: the service charged more than the cap…
    assert!(charged > cap, "{charged}: {outcomes:#?}");
    // …by one submission only: without it, what was charged is within it.
    assert!(
        charged - first_of_its_kind <= cap + 1e-9,
        "{charged} {first_of_its_kind}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "nothing was sent after it");
    for line in [4, 5] {
        let outcome = by_line(line);
        assert_eq!(outcome.status, JobStatus::NotSubmitted, "{outcome:#?}");
        assert_eq!(outcome.class, Some(genapi::FailureClass::CreditCap));
    }
}
