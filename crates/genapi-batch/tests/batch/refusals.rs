//! A refusal that surely created no task (402, 403, 422) is kept: the line
//! is not sent again until the user asks for it.

use genapi_batch::{Batch, Job, Standing};
use serde_json::json;

use crate::common::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_that_created_no_task_is_kept_until_the_user_asks_to_retry_it() {
    let (mock, client, dir, journal) = setup(100, "refused").await;
    // 1 MP costs 1.5 illustrative credits: more than the balance.
    mock.set_credits(Some(1.0));
    let jobs = |_: u64, tag: &str| -> Vec<Job> {
        (1..=2)
            .map(|n| {
                Job::new(
                    n,
                    "/v1/gen-2-pro",
                    json!({"prompt": format!("{tag} {n}"), "width": 1024, "height": 1024}),
                )
            })
            .collect()
    };
    let batch = || Batch::new(client.clone(), store(journal.clone()), &dir.0);
    let first = run_batch(batch(), jobs(2, "refused")).await;
    assert!(first.iter().all(|o| o.standing == Standing::Refused), "{first:#?}");
    assert_eq!(first[0].class, Some(genapi::FailureClass::Credits));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
    mock.set_credits(None);
    let second = run_batch(batch(), jobs(2, "refused")).await;
    assert!(second.iter().all(|o| o.standing == Standing::Refused && o.from_journal));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "not sent again by itself");
    let third = run_batch(batch().retry_refused(true), jobs(2, "refused")).await;
    assert!(third.iter().all(|o| o.standing == Standing::Saved), "{third:#?}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 4);
}
