//! Waiting for tasks: every final status, unknown statuses, deadlines,
//! progress, cancellation and the active-task limit.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use genapi::api::types;
use genapi::{Error, Learned, Moderation, TaskStatus, WaitOptions};
use genapi_mock::{Fault, MockConfig, MockService};

fn prompt(text: &str) -> types::builder::Gen2ProRequest {
    types::Gen2ProRequest::builder().prompt(text)
}

#[tokio::test(start_paused = true)]
async fn each_failure_status_is_a_typed_error() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let failed = client.run(prompt("[mock:error]")).await.unwrap_err();
    let Error::TaskFailed {
        details: Some(details), ..
    } = &failed
    else {
        panic!("{failed}")
    };
    assert!(details["error"].as_str().unwrap().contains("Mock failure"));
    assert!(
        failed.to_string().contains("Mock failure"),
        "the reason is shown: {failed}"
    );
    let request = client.run(prompt("[mock:request-moderated]")).await.unwrap_err();
    assert!(
        matches!(
            request,
            Error::Moderated {
                stage: Moderation::Request,
                ..
            }
        ),
        "{request}"
    );
    let content = client.run(prompt("[mock:content-moderated]")).await.unwrap_err();
    assert!(
        matches!(
            content,
            Error::Moderated {
                stage: Moderation::Content,
                ..
            }
        ),
        "{content}"
    );
}

#[tokio::test(start_paused = true)]
async fn not_found_is_ridden_out_after_sending_but_final_for_a_task_sent_long_ago() {
    let mock = MockService::start().await.unwrap();
    // The default grace is 10 s.
    let client = mock.client().unwrap();
    // Just submitted: the service may not know it yet; polling goes on.
    mock.inject(genapi_mock::Fault::status("/v1/get_result", 404).times(2));
    let output = client.run(prompt("x")).await.unwrap();
    // Picked up again by a program that recorded it was sent only just (a
    // run killed right after the acceptance, run again): a passing "not
    // found" does not end the paid task.
    mock.inject(genapi_mock::Fault::status("/v1/get_result", 404).times(2));
    let polling_url = output.reference().polling_url.as_str();
    let just_sent = client.task(polling_url).unwrap().sent_at(std::time::SystemTime::now());
    let again = just_sent.wait().await;
    assert!(again.is_ok(), "{:?}", again.err());
    // Sent long ago, or when it was sent is not known: final at once, and
    // the message says how to resume a task polled on another host.
    let long_ago = std::time::SystemTime::now() - Duration::from_secs(3600);
    for task in [
        client.task("no-such-task").unwrap(),
        client.task("no-such-task").unwrap().sent_at(long_ago),
    ] {
        let started = tokio::time::Instant::now();
        let error = task.wait().await.unwrap_err();
        assert!(matches!(error, Error::TaskNotFound { .. }), "{error}");
        assert!(
            started.elapsed() < Duration::from_millis(1500),
            "no grace for a task sent long ago"
        );
        assert!(error.to_string().contains("polling URL"), "{error}");
    }
}

#[tokio::test(start_paused = true)]
async fn unknown_statuses_mean_keep_polling_and_progress_is_reported() {
    let mock = MockService::start_with(
        MockConfig::default().default_duration(Duration::from_millis(2500)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    let options =
        WaitOptions::default().on_progress(move |p| record.lock().unwrap().push((p.status.clone(), p.progress)));
    let task = mock
        .client()
        .unwrap()
        .submit(prompt("[mock:status=Dreaming] a cat"))
        .await
        .unwrap();
    task.wait_with(options).await.unwrap();
    let seen = seen.lock().unwrap();
    assert!(
        seen.iter().any(|(s, _)| *s == TaskStatus::Other("Dreaming".into())),
        "{seen:?}"
    );
    assert!(
        seen.iter().any(|(_, p)| p.is_some_and(|p| p > 0.0 && p < 1.0)),
        "{seen:?}"
    );
    assert_eq!(seen.last().unwrap().0, TaskStatus::Ready);
}

#[tokio::test(start_paused = true)]
async fn the_deadline_bounds_the_wait() {
    let mock = MockService::start_with(
        MockConfig::default().default_duration(Duration::from_secs(30)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let task = mock.client().unwrap().submit(prompt("slow")).await.unwrap();
    let started = tokio::time::Instant::now();
    let error = task
        .wait_with(WaitOptions::default().timeout(Duration::from_millis(700)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::Timeout {
                last_status: Some(TaskStatus::Pending),
                ..
            }
        ),
        "{error}"
    );
    assert!(error.to_string().contains("last seen: Pending"), "{error}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test(start_paused = true)]
async fn dropping_the_wait_stops_polling_but_the_place_is_kept_until_the_task_ends() {
    let task_time = Duration::from_millis(1500);
    let mock = MockService::start_with(
        MockConfig::default().default_duration(task_time),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let client = mock.client_builder().max_active_tasks(1).build().unwrap();
    let submitted = tokio::time::Instant::now();
    let task = client.submit(prompt("first")).await.unwrap();
    let waiting = tokio::time::timeout(Duration::from_millis(300), task.wait()).await;
    assert!(waiting.is_err(), "still waiting when dropped");
    let polls = mock.count("GET", "/v1/get_result");
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(mock.count("GET", "/v1/get_result"), polls, "no polling after the drop");
    // The first task still runs at the service: the second submission waits
    // for it (checking it by polling), then goes; it never hangs.
    let second = tokio::time::timeout(Duration::from_secs(10), client.submit(prompt("second")))
        .await
        .expect("the second submission went once the first task ended")
        .unwrap();
    assert!(submitted.elapsed() >= task_time, "not before the first task ended");
    assert!(
        mock.count("GET", "/v1/get_result") > polls,
        "the waiting submission checked the first task"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "never refused, never doubled");
    second.wait().await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn submitting_many_before_waiting_on_any_completes() {
    // The reported hang: 25 submissions before any wait, at a limit of 24.
    let config = MockConfig::default()
        .default_duration(Duration::from_millis(300))
        .max_active_tasks(24);
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = mock.client().unwrap();
    let mut tasks = Vec::new();
    for i in 0..100 {
        let task = tokio::time::timeout(Duration::from_secs(30), client.submit(prompt(&format!("task {i}"))))
            .await
            .unwrap_or_else(|_| panic!("submission {i} hung"))
            .unwrap();
        tasks.push(task);
    }
    for task in tasks {
        task.wait().await.unwrap();
    }
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        100,
        "each submitted once, none refused"
    );
}

#[tokio::test(start_paused = true)]
async fn the_active_task_limit_keeps_clear_of_429() {
    let config = MockConfig::default()
        .max_active_tasks(3)
        .default_duration(Duration::from_millis(200));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = mock.client_builder().max_active_tasks(3).build().unwrap();
    let runs = (0..12).map(|i| {
        let client = client.clone();
        async move { client.run(prompt(&format!("task {i}"))).await }
    });
    for outcome in futures::future::join_all(runs).await {
        outcome.unwrap();
    }
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        12,
        "each task submitted once, none refused"
    );
}

/// Right after a submission, "not found" means the service does not know the
/// task yet: the task keeps its place, by a poll of its own or inside a wait.
#[tokio::test(start_paused = true)]
async fn a_not_found_within_the_grace_period_keeps_the_place() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().max_active_tasks(1).build().unwrap();
    let first = client.submit(prompt("[mock:duration_ms=5000]")).await.unwrap();
    mock.inject(Fault::status("/v1/get_result", 404).times(1));
    assert_eq!(first.poll().await.unwrap().status, TaskStatus::TaskNotFound);
    let second = tokio::time::timeout(Duration::from_secs(2), client.submit(prompt("second"))).await;
    assert!(second.is_err(), "the first task still holds the one place");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);

    mock.inject(Fault::status("/v1/get_result", 404).times(1));
    let waiting = tokio::spawn(first.wait_with(WaitOptions::default().not_found_grace(Duration::from_secs(60))));
    let second = tokio::time::timeout(Duration::from_secs(2), client.submit(prompt("second"))).await;
    assert!(second.is_err(), "still held while the wait rides the not-found out");
    waiting.await.unwrap().unwrap();
    client.submit(prompt("second")).await.unwrap();
}

/// Past the grace period, "not found" is the task's end: a poll of its own
/// frees its place.
#[tokio::test(start_paused = true)]
async fn a_not_found_past_the_grace_period_frees_the_place() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().max_active_tasks(1).build().unwrap();
    let first = client.submit(prompt("[mock:duration_ms=60000]")).await.unwrap();
    tokio::time::sleep(Duration::from_secs(11)).await;
    mock.inject(Fault::status("/v1/get_result", 404).times(1));
    assert_eq!(first.poll().await.unwrap().status, TaskStatus::TaskNotFound);
    let second = tokio::time::timeout(Duration::from_secs(2), client.submit(prompt("second"))).await;
    assert!(second.is_ok_and(|submitted| submitted.is_ok()), "the place was freed");
}

/// A client that has seen tasks of `seconds` each.
fn learned(seconds: &[f64]) -> Learned {
    let mut learned = Learned::default();
    for s in seconds {
        learned.observe("gen_2_pro", *s);
    }
    learned
}

/// Runs a task of `ms` at the mock; returns how long after submission the
/// wait saw its end, and the polls it made.
async fn seen_after(mock: &MockService, client: &genapi::Client, ms: u64) -> (Duration, u64) {
    let polls = mock.stats().polls;
    let task = client
        .submit(prompt(&format!("[mock:duration_ms={ms}]")))
        .await
        .unwrap();
    let submitted = tokio::time::Instant::now();
    task.wait().await.unwrap();
    (submitted.elapsed(), mock.stats().polls - polls)
}

/// With tasks of about 0.2 s learned, the first poll comes just after the
/// lower quartile: a task of 0.12 s has ended by then, and one of 0.25 s
/// reports progress there, from which the next poll lands just past its end
/// (not at a floor of 0.2 s more).
#[tokio::test(start_paused = true)]
async fn short_tasks_are_seen_just_after_their_end() {
    let mock = MockService::start().await.unwrap();
    let client = mock
        .client_builder()
        .learned(learned(&[0.18, 0.19, 0.2, 0.2, 0.2, 0.21, 0.22, 0.2]))
        .build()
        .unwrap();
    let (seen, polls) = seen_after(&mock, &client, 120).await;
    assert_eq!(polls, 1, "seen at {seen:?}");
    assert!(seen < Duration::from_millis(210), "{seen:?}");
    let (seen, polls) = seen_after(&mock, &client, 250).await;
    assert_eq!(polls, 2, "seen at {seen:?}");
    let end = Duration::from_millis(250);
    assert!(seen >= end && seen < end.mul_f64(1.05), "{seen:?}");
}

/// Tasks of one constant duration are polled once each, just after they
/// end: the first on the whole-second grid, the rest aimed by what it
/// taught the client.
#[tokio::test(start_paused = true)]
async fn tasks_of_one_constant_duration_take_one_poll_each() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let (first, polls) = seen_after(&mock, &client, 1000).await;
    assert_eq!(polls, 1, "seen at {first:?}");
    let started = tokio::time::Instant::now();
    let runs = (0..24).map(|_| seen_after(&mock, &client, 1000));
    for (seen, _) in futures::future::join_all(runs).await {
        let end = Duration::from_secs(1);
        assert!(seen >= end && seen < end.mul_f64(1.035), "{seen:?}");
    }
    assert_eq!(mock.stats().polls, 25, "one poll per task");
    assert!(
        started.elapsed() < Duration::from_millis(1050),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn learned_durations_are_trimmed_as_they_are_read() {
    // A kept file grown by hand or by an attacker: 100,000 durations of one
    // operation, some implausible, and a thousand operations.
    let mut samples: Vec<f64> = (1..=100_000).map(|n| f64::from(n) / 1000.0).collect();
    samples.insert(99_990, -1.0);
    samples.insert(99_995, 1e12);
    let mut operations = serde_json::Map::new();
    operations.insert("gen_2_pro".into(), serde_json::json!(samples));
    for n in 0..1000 {
        operations.insert(format!("op_{n:04}"), serde_json::json!([1.0]));
    }
    let text = serde_json::json!({ "operations": operations }).to_string();
    let read: genapi::Learned = serde_json::from_str(&text).unwrap();

    // What observing the same durations keeps: the last 32 plausible ones.
    let mut observed = genapi::Learned::default();
    for seconds in &samples {
        observed.observe("gen_2_pro", *seconds);
    }
    let read = serde_json::to_value(&read).unwrap();
    let observed = serde_json::to_value(&observed).unwrap();
    assert_eq!(read["operations"]["gen_2_pro"], observed["operations"]["gen_2_pro"]);
    assert_eq!(read["operations"]["gen_2_pro"].as_array().unwrap().len(), 32);
    assert!(
        read["operations"].as_object().unwrap().len() <= 256,
        "{} operations kept",
        read["operations"].as_object().unwrap().len()
    );
}
