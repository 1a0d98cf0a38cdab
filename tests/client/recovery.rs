//! After a task is accepted it is paid for: no panic, no hang, no lost task,
//! no second submission. Each test reproduces a reported failure.

use std::time::Duration;

use genapi::api::types;
use genapi::{Error, Learned, RetryPolicy, WaitOptions};
use genapi_mock::{Fault, FaultKind, MockConfig, MockService};
use serde_json::json;

use crate::common;
use common::hostile::{self, accepted, json};

fn prompt(text: &str) -> types::builder::Gen2ProRequest {
    types::Gen2ProRequest::builder().prompt(text)
}

/// A mock, and a client of it whose transport retries nothing: each
/// failure reaches the caller as it happens.
async fn mock_without_retries() -> (MockService, genapi::Client) {
    let mock = MockService::start().await.unwrap();
    let client = mock
        .client_builder()
        .retry_policy(RetryPolicy::never())
        .build()
        .unwrap();
    (mock, client)
}

fn quick_retries() -> RetryPolicy {
    RetryPolicy::default()
        .initial_backoff(Duration::from_millis(5))
        .max_backoff(Duration::from_millis(20))
        .max_retry_after(Duration::from_millis(20))
}

#[tokio::test(start_paused = true)]
async fn a_retry_after_too_large_for_a_duration_is_no_panic() {
    for (status, value) in [
        (429, "1e20"),
        (429, "99999999999999999999"),
        (403, "1e20"),
        (503, "1e300"),
    ] {
        let mock = MockService::start().await.unwrap();
        mock.inject(
            Fault::on(
                "/v1/gen-2-pro",
                FaultKind::Status {
                    status,
                    retry_after: Some(value.into()),
                    body: "{}".into(),
                },
            )
            .times(10),
        );
        let client = mock.client_builder().retry_policy(quick_retries()).build().unwrap();
        let error = client.submit(prompt("x")).await.unwrap_err();
        match (status, &error) {
            (
                429,
                Error::RateLimited {
                    retry_after: Some(after),
                    ..
                },
            ) => {
                assert_eq!(*after, Duration::from_secs(24 * 3600), "cut to a day")
            }
            (403, Error::Forbidden { .. }) | (503, Error::Server { .. }) => {}
            _ => panic!("{status} {value}: {error}"),
        }
    }
}

#[tokio::test(start_paused = true)]
async fn a_timeout_of_any_size_is_accepted_and_no_timeout_is_expressible() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let task = client.submit(prompt("x")).await.unwrap();
    task.wait_with(WaitOptions::default().timeout(Duration::MAX))
        .await
        .unwrap();
    let task = client.submit(prompt("y")).await.unwrap();
    task.wait_with(WaitOptions::default().no_timeout()).await.unwrap();
}

#[tokio::test(start_paused = true)]
async fn durations_are_learned_from_what_the_service_reports_not_when_ready_was_noticed() {
    let mock = MockService::start().await.unwrap();
    // Every poll answer is slow: Ready is noticed late.
    mock.inject(Fault::on("/v1/get_result", FaultKind::Delay(Duration::from_millis(700))).times(20));
    let client = mock.client().unwrap();
    client.run(prompt("x")).await.unwrap();
    let learned = serde_json::to_value(client.learned()).unwrap();
    assert_eq!(
        learned["operations"]["gen_2_pro"],
        json!([0.3]),
        "the service's reported duration: {learned}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_wrong_guess_never_sleeps_past_the_deadline_and_the_last_poll_comes_at_it() {
    // Learned: this operation takes a minute. This task takes 0.3 s.
    let mut learned = Learned::default();
    for _ in 0..5 {
        learned.observe("gen_2_pro", 60.0);
    }
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().learned(learned).build().unwrap();
    let task = client.submit(prompt("x")).await.unwrap();
    let started = tokio::time::Instant::now();
    let output = task
        .wait_with(WaitOptions::default().timeout(Duration::from_secs(2)))
        .await;
    assert!(
        output.is_ok(),
        "Ready before the deadline is found by the poll at it: {:?}",
        output.err()
    );
    assert!(started.elapsed() < Duration::from_secs(4));
}

#[tokio::test(start_paused = true)]
async fn an_odd_optional_field_never_makes_a_finished_task_undecodable() {
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-odd"),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-odd", "status": "Ready", "progress": "done", "cost": {"amount": 1},
                   "result": {"sample": format!("{base}/out.png"), "seed": 18446744073709551615u64,
                              "duration": "fast", "start_time": [1]}}),
        ),
        _ => json(404, json!({})),
    })
    .await;
    let client = service.client_builder().build().unwrap();
    let output = client.run(prompt("x")).await.unwrap();
    assert_eq!(output.id(), "t-odd");
    assert_eq!(output.seed(), Some(18446744073709551615), "a seed up to 2^64-1 is kept");
    assert_eq!(output.cost(), None, "the odd cost was dropped, the task kept");
}

#[tokio::test(start_paused = true)]
async fn every_failure_after_acceptance_names_the_task() {
    let mock = MockService::start_with(
        MockConfig::default().default_duration(Duration::from_secs(30)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let client = mock.client_builder().retry_policy(quick_retries()).build().unwrap();

    // Timeout.
    let task = client.submit(prompt("slow")).await.unwrap();
    let id = task.id().to_string();
    let error = task
        .wait_with(WaitOptions::default().timeout(Duration::from_millis(300)))
        .await
        .unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error}");
    assert_eq!(error.task().map(|t| t.id.clone()), Some(id.clone()));
    assert!(error.to_string().contains(&id), "{error}");
    assert!(error.is_worth_waiting_again() && !error.is_safe_to_resubmit());
    // ... and it resumes from the id alone.
    assert_eq!(client.task(&id).unwrap().poll().await.unwrap().id, id);

    // A poll that cannot be decoded.
    let task = client.submit(prompt("slow")).await.unwrap();
    let id = task.id().to_string();
    mock.inject(Fault::on("/v1/get_result", FaultKind::MalformedBody));
    let error = task.poll().await.unwrap_err();
    assert!(matches!(error, Error::Decode { .. }), "{error}");
    assert_eq!(error.task().map(|t| t.id.as_str()), Some(id.as_str()));

    // A poll refused by the service.
    mock.inject(Fault::status("/v1/get_result", 500).times(10));
    let error = client.task(&id).unwrap().poll().await.unwrap_err();
    assert!(matches!(error, Error::Server { .. }), "{error}");
    assert_eq!(error.task().map(|t| t.id.as_str()), Some(id.as_str()));
    assert!(error.to_string().contains("instead of resubmitting"), "{error}");
    // A handle made from an id alone does not know the task was accepted.
    assert!(!error.to_string().contains("was accepted"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn download_and_save_failures_name_the_task() {
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-dl"),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-dl", "status": "Ready", "result": {"sample": format!("{base}/out.png")}}),
        ),
        _ => json(500, json!({"detail": "storage down"})),
    })
    .await;
    let client = service.client_builder().retry_policy(quick_retries()).build().unwrap();
    let output = client.run(prompt("x")).await.unwrap();
    let error = output.bytes().await.unwrap_err();
    assert_eq!(error.task().map(|t| t.id.as_str()), Some("t-dl"), "{error}");
    let missing_dir = std::env::temp_dir()
        .join(format!("genapi-no-such-dir-{}", std::process::id()))
        .join("out");
    let error = output.save(&missing_dir).await.unwrap_err();
    assert_eq!(error.task().map(|t| t.id.as_str()), Some("t-dl"), "{error}");
}

#[tokio::test(start_paused = true)]
async fn retry_advice_never_suggests_paying_twice() {
    let (mock, client) = mock_without_retries().await;
    mock.inject(Fault::status("/v1/gen-2-pro", 500));
    let server = client.submit(prompt("x")).await.unwrap_err();
    assert!(
        !server.is_safe_to_resubmit() && !server.is_worth_waiting_again(),
        "{server}"
    );
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::DropConnection));
    let dropped = client.submit(prompt("x")).await.unwrap_err();
    assert!(!dropped.is_safe_to_resubmit(), "the task may exist: {dropped}");
    assert!(
        dropped.to_string().contains("may have reached the service"),
        "{dropped}"
    );
    mock.inject(Fault::status("/v1/gen-2-pro", 429));
    let refused = client.submit(prompt("x")).await.unwrap_err();
    assert!(refused.is_safe_to_resubmit(), "{refused}");
    let nobody = genapi::Client::builder()
        .api_key("k")
        .base_url("http://127.0.0.1:9")
        .build()
        .unwrap();
    let unreachable = nobody.submit(prompt("x")).await.unwrap_err();
    assert!(unreachable.is_safe_to_resubmit(), "{unreachable}");
}

#[tokio::test(start_paused = true)]
async fn a_download_that_breaks_off_is_fetched_again() {
    let service = hostile::serve(|base, request, before| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-b"),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-b", "status": "Ready", "result": {"sample": format!("{base}/out.bin")}}),
        ),
        _ if before == 0 => hostile::broken_after(b"partial"),
        _ => hostile::image(b"whole"),
    })
    .await;
    let client = service.client_builder().retry_policy(quick_retries()).build().unwrap();
    let bytes = client.run(prompt("x")).await.unwrap().bytes().await.unwrap();
    assert!(bytes.ends_with(b"whole"), "the second answer, whole: {bytes:?}");
    assert_eq!(service.count("/out.bin"), 2);
}

#[tokio::test(start_paused = true)]
async fn a_poll_that_breaks_off_is_asked_again_within_the_same_poll() {
    let service = hostile::serve(|base, request, before| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-p"),
        "/v1/get_result" if before == 0 => hostile::broken_after(b"{\"id\":"),
        "/v1/get_result" => json(200, json!({"id": "t-p", "status": "Pending"})),
        _ => json(404, json!({})),
    })
    .await;
    let client = service.client_builder().retry_policy(quick_retries()).build().unwrap();
    let task = client.submit(prompt("x")).await.unwrap();
    assert_eq!(task.poll().await.unwrap().status, genapi::TaskStatus::Pending);
    assert_eq!(service.count("/v1/get_result"), 2);
}

#[tokio::test(start_paused = true)]
async fn downloads_have_their_own_timeout() {
    // A download slower than the API timeout, but steadily moving.
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => accepted(base, "t-slow"),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-slow", "status": "Ready", "result": {"sample": format!("{base}/big")}}),
        ),
        _ => hostile::trickle(8, 1024, Duration::from_millis(100)),
    })
    .await;
    let client = service
        .client_builder()
        .request_timeout(Duration::from_millis(400))
        .build()
        .unwrap();
    let bytes = client.run(prompt("x")).await.unwrap().bytes().await.unwrap();
    assert_eq!(bytes.len(), 8 * 1024);
}

#[tokio::test(start_paused = true)]
async fn a_422_or_402_after_acceptance_is_about_the_task_never_a_fix_your_request() {
    for status in [422u16, 402] {
        let service = hostile::serve(move |base, request, _| match request.path.as_str() {
            "/v1/gen-2-pro" => accepted(base, "t-paid"),
            "/v1/get_result" => json(
                status,
                json!({"detail": [{"loc": ["query", "id"], "msg": "bad id", "type": "value_error"}]}),
            ),
            _ => json(404, json!({})),
        })
        .await;
        let client = service.client_builder().retry_policy(quick_retries()).build().unwrap();
        let task = client.submit(prompt("x")).await.unwrap();
        let error = task.poll().await.unwrap_err();
        assert!(matches!(error, Error::UnexpectedStatus { .. }), "{status}: {error}");
        assert_eq!(error.task().map(|t| t.id.as_str()), Some("t-paid"), "{status}: {error}");
        assert!(!error.to_string().contains("fix the fields"), "{error}");
        assert_eq!(service.count("/v1/gen-2-pro"), 1);
    }
}

#[tokio::test(start_paused = true)]
async fn an_accepted_answer_with_odd_fields_still_gives_the_task() {
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => json(
            200,
            json!({"id": "t-odd", "polling_url": 42, "cost": "3 credits", "output_mp": "1.0"}),
        ),
        "/v1/get_result" => json(
            200,
            json!({"id": "t-odd", "status": "Ready", "result": {"sample": format!("{base}/x")}}),
        ),
        _ => json(404, json!({})),
    })
    .await;
    let client = service.client_builder().build().unwrap();
    let task = client.submit(prompt("x")).await.unwrap();
    assert_eq!(task.id(), "t-odd");
    assert_eq!(task.cost(), None, "the odd cost is dropped, the task kept");
    assert_eq!(
        task.polling_url().as_str(),
        format!("{}/v1/get_result?id=t-odd", service.base),
        "the fallback"
    );
    task.wait().await.unwrap();
    // Without an id there is no task to keep: a typed decode error.
    let none = hostile::serve(|_, _, _| json(200, json!({"polling_url": "http://x/"}))).await;
    let client = none.client_builder().build().unwrap();
    let error = client.submit(prompt("x")).await.unwrap_err();
    assert!(matches!(error, Error::Decode { task: None, .. }), "{error}");
}

#[tokio::test(start_paused = true)]
async fn a_polling_url_with_user_information_is_never_used() {
    let client = genapi::Client::builder()
        .api_key("k")
        .base_url("http://127.0.0.1:9")
        .build()
        .unwrap();
    let error = client.task("http://u:p@127.0.0.1:9/v1/get_result?id=t").unwrap_err();
    assert!(
        matches!(
            error,
            Error::InvalidArgument {
                argument: "task id or polling URL",
                ..
            }
        ),
        "{error}"
    );
    // Not a URL the parser accepts (a space in the host), yet an address:
    // never sent to the service as a bare id, and its password not shown.
    let error = client
        .task("https://user:hunter2@exa mple.com/v1/get_result?id=1")
        .unwrap_err();
    assert!(matches!(error, Error::InvalidArgument { .. }), "{error}");
    assert!(!error.to_string().contains("hunter2"), "{error}");
    let service = hostile::serve(|base, request, _| match request.path.as_str() {
        "/v1/gen-2-pro" => {
            let trick = base.replace("http://", "http://user:pw@");
            json(
                200,
                json!({"id": "t-u", "polling_url": format!("{trick}/v1/get_result?id=t-u")}),
            )
        }
        _ => json(200, json!({"id": "t-u", "status": "Pending"})),
    })
    .await;
    let client = service.client_builder().build().unwrap();
    let task = client.submit(prompt("x")).await.unwrap();
    assert!(task.polling_url().username().is_empty(), "{}", task.polling_url());
    task.poll().await.unwrap();
    assert!(service.seen().iter().all(|s| s.headers.get("authorization").is_none()));
}

/// The one way to pick a task up again, `client.task`, works with its bare
/// id for a task polled on a regional host (which the global host does not
/// know), as it does with its polling URL.
#[tokio::test(start_paused = true)]
async fn a_bare_id_picks_up_a_task_polled_on_the_regional_host() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let submitted = client.submit(prompt("picked up by its id")).await.unwrap();
    let id = submitted.id().to_string();
    assert!(
        submitted.polling_url().as_str().starts_with(mock.regional_url()),
        "the mock polls on a regional host, as the service does"
    );
    drop(submitted);

    let output = client.task(&id).unwrap().wait().await.unwrap();
    assert_eq!(output.id(), id);
    let again = client.task(&id).unwrap();
    assert_eq!(again.poll().await.unwrap().status, genapi::TaskStatus::Ready);
    assert!(
        again.polling_url().as_str().starts_with(mock.regional_url()),
        "the handle polls where the task is: {}",
        again.polling_url()
    );
    let missing = client.task("no-such-task").unwrap().wait().await.unwrap_err();
    assert!(matches!(missing, Error::TaskNotFound { .. }), "{missing}");
}

/// A task picked up again is asked at once: it may have ended long ago, and
/// waiting out a schedule that counts from the pick-up (seconds for a model
/// whose tasks took seconds) would only delay its result.
#[tokio::test(start_paused = true)]
async fn a_task_picked_up_again_is_polled_at_once() {
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    // Learned durations of a few seconds, as after a first task.
    let first = client.run(prompt("learn the duration")).await.unwrap();
    let submitted = client.submit(prompt("ended before it is picked up")).await.unwrap();
    let id = submitted.id().to_string();
    drop(submitted);
    tokio::time::sleep(Duration::from_secs(30)).await;

    let picked_up = tokio::time::Instant::now();
    let output = client.task(&id).unwrap().wait().await.unwrap();
    assert_eq!(output.id(), id);
    assert!(
        picked_up.elapsed() < Duration::from_millis(200),
        "waited {:?} for a task that had ended (the first one took {:?})",
        picked_up.elapsed(),
        first.duration()
    );
}

/// Polls the service fails are each told to the wait's caller, naming the
/// task, while the wait goes on to the task's end: a service that cannot
/// be reached does not look like a task still running.
#[tokio::test(start_paused = true)]
async fn each_failed_poll_is_told_and_the_wait_goes_on_to_the_end() {
    let (mock, client) = mock_without_retries().await;
    let task = client.submit(prompt("told")).await.unwrap();
    let id = task.id().to_string();
    mock.inject(Fault::status("/v1/get_result", 503).times(3));
    let told = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = told.clone();
    let options = WaitOptions::default().on_poll_failure(move |error| {
        seen.lock()
            .unwrap()
            .push((error.task().map(|t| t.id.clone()), error.to_string()));
    });
    let output = task.wait_with(options).await.unwrap();
    assert_eq!(output.id(), id);
    let told = told.lock().unwrap();
    assert_eq!(told.len(), 3, "{told:?}");
    for (task, text) in told.iter() {
        assert_eq!(task.as_deref(), Some(id.as_str()), "{text}");
        assert!(text.contains("503"), "{text}");
    }
}

/// A polling address that names its task in its path (`/v1/tasks/<id>`),
/// as some services write it, gives the task its id, as `?id=` does.
#[tokio::test(start_paused = true)]
async fn a_polling_url_naming_its_task_in_its_path_gives_the_task_its_id() {
    let client = genapi::Client::builder()
        .api_key("k")
        .base_url("http://127.0.0.1:9")
        .build()
        .unwrap();
    let by_path = client.task("http://127.0.0.1:9/v1/tasks/tk_7f3a9c").unwrap();
    assert_eq!(by_path.id(), "tk_7f3a9c");
    let by_query = client.task("http://127.0.0.1:9/v1/get_result?id=t-1").unwrap();
    assert_eq!(by_query.id(), "t-1");
    let no_id = client.task("http://127.0.0.1:9/v1/get_result").unwrap();
    assert_eq!(no_id.id(), "");
}
