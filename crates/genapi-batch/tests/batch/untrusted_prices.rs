//! The credit cap trusts no price it has not seen the service settle: a
//! tiny price learned before the run, or a cost an acceptance reports below
//! what the task then settles at, lets no line past the cap's bound (the
//! cap plus one submission's excess), counted by what the service charged.

use std::time::Duration;

use genapi_batch::{Batch, Job, JobOutcome, MemoryJournal, Prices, Standing};
use genapi_test_common::hostile::{self, Hostile};
use serde_json::json;

use crate::common::{funded_mock, run_batch, sized_jobs, store, Dir};

/// `count` lines of one kind: gen-2-pro at 1024 x 1024.
fn one_kind(count: u64, tag: &str) -> Vec<Job> {
    sized_jobs(count, tag, 1024, 1024)
}

/// How many lines were kept back at the cap.
fn at_cap(outcomes: &[JobOutcome]) -> usize {
    outcomes
        .iter()
        .filter(|o| o.class == Some(genapi::FailureClass::CreditCap))
        .count()
}

/// Prices that say `job`'s kind costs `credits` (written as JSON, as a
/// file of prices could hold it: learning refuses such a price).
fn forged(job: &Job, credits: &str) -> Prices {
    let mut prices = Prices::default();
    prices.learn(job, 1.0);
    let text = serde_json::to_string(&prices).unwrap();
    assert!(text.contains(r#""credits":1.0"#), "{text}");
    serde_json::from_str(&text.replace(r#""credits":1.0"#, &format!(r#""credits":{credits}"#))).unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_tiny_price_learned_before_the_run_lets_no_line_past_the_cap() {
    for tiny in ["1e-9", "5e-324"] {
        let mock = funded_mock().await;
        let dir = Dir::new(&format!("untrusted-tiny-price-{tiny}"));
        let lines = one_kind(8, "tiny");
        let prices = forged(&lines[0], tiny);
        let estimate = prices.estimate(lines.clone());
        assert_eq!(
            (estimate.credits, estimate.unknown.len()),
            (0.0, 8),
            "{tiny}: named as of unknown price, not summed near nothing"
        );
        let cap = 2.0;
        let client = mock.client_builder().max_active_tasks(8).build().unwrap();
        let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0)
            .max_credits(cap)
            .known_prices(prices);
        let outcomes = run_batch(batch, lines).await;
        let charged = 100.0 - mock.credits().unwrap();
        let price = outcomes.iter().find_map(|o| o.cost).expect("one line was charged");
        // The first line goes alone with the whole cap held; once it
        // settled, its price leaves too little for a second.
        assert!(price > cap / 2.0 && price <= cap, "{price}");
        assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "{tiny}: {outcomes:#?}");
        assert!(
            (charged - price).abs() < 1e-9,
            "{tiny}: charged {charged} of a cap of {cap}"
        );
        assert_eq!(at_cap(&outcomes), 7, "{tiny}: {outcomes:#?}");
        mock.stop().await;
    }
}

/// A service that reports a cost of 0.01 when it accepts a submission and
/// settles 1.0 when the task ends: each task created is charged 1.0.
async fn reporting_less_than_it_settles() -> Hostile {
    hostile::serve(|base, seen, before| match (seen.method.as_str(), seen.path.as_str()) {
        ("POST", "/v1/gen-2-pro") => {
            let id = format!("task-{before}");
            let polling_url = format!("{base}/v1/get_result?id={id}");
            hostile::json(200, json!({"id": id, "polling_url": polling_url, "cost": 0.01}))
        }
        ("GET", "/v1/get_result") => {
            let id = seen.query.trim_start_matches("id=");
            let sample = format!("{base}/samples/{id}.png");
            hostile::json(
                200,
                json!({"id": id, "status": "Ready", "result": {"sample": sample}, "cost": 1.0}),
            )
        }
        ("GET", path) if path.starts_with("/samples/") => hostile::image(b""),
        _ => hostile::json(404, json!({"detail": "not found"})),
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_acceptance_reporting_less_than_the_task_settles_lets_no_line_past_the_cap() {
    let service = reporting_less_than_it_settles().await;
    let dir = Dir::new("untrusted-acceptance-report");
    let cap = 2.0;
    let client = service.client_builder().max_active_tasks(8).build().unwrap();
    let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0).max_credits(cap);
    // Only a guard: a batch waiting for ever fails the test instead of
    // hanging it.
    let outcomes = tokio::time::timeout(Duration::from_secs(120), run_batch(batch, one_kind(20, "report")))
        .await
        .expect("the batch waited for ever");
    let created = service.count("/v1/gen-2-pro");
    let charged = created as f64;
    // The bound is the cap plus one submission's excess: 3. The first line
    // went alone holding the whole cap, whatever its acceptance said; once
    // settled, its kind's price (1) let one more go, and no third.
    assert!(charged <= cap + 1.0, "charged {charged} of a cap of {cap}");
    assert_eq!(created, 2, "{outcomes:#?}");
    let succeeded: Vec<_> = outcomes.iter().filter(|o| o.standing == Standing::Saved).collect();
    assert_eq!(succeeded.len(), 2, "{outcomes:#?}");
    assert!(
        succeeded.iter().all(|o| o.cost == Some(1.0)),
        "the settled cost is shown: {succeeded:#?}"
    );
    assert_eq!(at_cap(&outcomes), 18, "{outcomes:#?}");
    assert!(
        succeeded
            .iter()
            .all(|o| o.file.as_ref().is_some_and(|file| file.is_file())),
        "their results were saved: {succeeded:#?}"
    );
}

/// A service whose first task settles at 0.01 and every later one at 1.0,
/// and whose results take a while to download.
async fn rising_price_slow_results() -> Hostile {
    hostile::serve(|base, seen, before| match (seen.method.as_str(), seen.path.as_str()) {
        ("POST", "/v1/gen-2-pro") => hostile::accepted(base, &format!("task-{before}")),
        ("GET", "/v1/get_result") => {
            let id = seen.query.trim_start_matches("id=");
            let cost = if id == "task-0" { 0.01 } else { 1.0 };
            let sample = format!("{base}/samples/{id}.png");
            hostile::json(
                200,
                json!({"id": id, "status": "Ready", "result": {"sample": sample}, "cost": cost}),
            )
        }
        ("GET", path) if path.starts_with("/samples/") => hostile::trickle(4, 64, Duration::from_millis(100)),
        _ => hostile::json(404, json!({"detail": "not found"})),
    })
    .await
}

/// A price that rises is seen by the next hold as soon as a task settles,
/// not once its result is downloaded: the lines in flight at the old price
/// pass the cap by the rise each, and no more lines follow them. (One
/// thread, so nothing runs between a task's end and its settling.)
#[tokio::test(flavor = "current_thread")]
async fn a_price_that_rises_is_held_at_from_the_moment_a_task_settles() {
    let service = rising_price_slow_results().await;
    let dir = Dir::new("untrusted-rising-price");
    let (cap, seats) = (2.0, 8);
    let client = service.client_builder().max_active_tasks(seats).build().unwrap();
    let batch = Batch::new(client, store(MemoryJournal::default()), &dir.0).max_credits(cap);
    let outcomes = tokio::time::timeout(Duration::from_secs(120), run_batch(batch, one_kind(20, "rising")))
        .await
        .expect("the batch waited for ever");
    let created = service.count("/v1/gen-2-pro");
    let charged = 0.01 + (created.saturating_sub(1)) as f64;
    // The first went alone; at its price (0.01) one line per seat; the
    // first of those to settle (1.0) stops the rest.
    assert!(created <= 1 + seats, "{created} tasks created: {outcomes:#?}");
    assert!(
        charged <= cap + seats as f64 * (1.0 - 0.01) + 1e-9,
        "charged {charged} of a cap of {cap}"
    );
    assert_eq!(at_cap(&outcomes), 20 - created, "{outcomes:#?}");
}
