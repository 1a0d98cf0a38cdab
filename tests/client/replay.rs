//! Replay (`MockConfig::replay`): a recorded run, replayed by a mock that
//! answers from the recording, gives the same results and the same
//! failures; a request the recording does not have is refused, naming the
//! nearest recorded one.

use genapi::api::types;
use genapi::{RecordOptions, RetryPolicy};
use genapi_mock::{Fault, MockConfig, MockService, Replay};

use crate::common::Dir;

/// What a run of the same four requests came to: each result's bytes or
/// its error's class and text.
async fn run_all(client: &genapi::Client) -> Vec<Result<Vec<u8>, String>> {
    let mut outcomes = Vec::new();
    for prompt in ["a lighthouse", "[mock:content-moderated]", "[mock:error]", "a harbour"] {
        let request = types::Gen2ProRequest::builder()
            .prompt(prompt)
            .width(256u32)
            .height(256u32);
        let outcome = match client.run(request).await {
            Ok(output) => output.bytes().await.map(|b| b.to_vec()),
            Err(error) => Err(error),
        };
        outcomes.push(outcome.map_err(|e| format!("{:?}: {e}", e.class())));
    }
    outcomes
}

fn replaying(path: &std::path::Path) -> MockConfig {
    let text = std::fs::read_to_string(path).unwrap();
    MockConfig::default().replay(Replay::from_har(&text).unwrap())
}

fn fast() -> RetryPolicy {
    RetryPolicy::default().initial_backoff(std::time::Duration::from_millis(1))
}

#[tokio::test(start_paused = true)]
async fn a_recorded_run_replays_to_the_same_results_failures_and_retries() {
    let dir = Dir::new("replay-run");
    let path = dir.join("run.har");
    let mock = MockService::start().await.unwrap();
    // The first submission meets two 429s and is sent a third time.
    mock.inject(Fault::status("/v1/gen-2-pro", 429).method("POST"));
    mock.inject(Fault::status("/v1/gen-2-pro", 429).method("POST"));
    let recording = mock
        .client_builder()
        .retry_policy(fast())
        .record_with(&path, RecordOptions::default().keep_images(true))
        .build()
        .unwrap();
    let recorded = run_all(&recording).await;
    assert!(recorded[0].is_ok() && recorded[1].is_err() && recorded[2].is_err() && recorded[3].is_ok());
    let recorded_posts = mock.count("POST", "/v1/gen-2-pro");

    let replay = MockService::start_with(replaying(&path), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let client = replay.client_builder().retry_policy(fast()).build().unwrap();
    let replayed = run_all(&client).await;
    assert_eq!(replayed, recorded);
    assert_eq!(
        replay.count("POST", "/v1/gen-2-pro"),
        recorded_posts,
        "the 429s replay too"
    );
}

#[tokio::test(start_paused = true)]
async fn a_result_not_kept_replays_as_a_placeholder_of_its_format_and_size() {
    let dir = Dir::new("replay-placeholder");
    let path = dir.join("run.har");
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().record(&path).build().unwrap();
    let request = types::Gen2ProRequest::builder()
        .prompt("a boat")
        .width(320u32)
        .height(192u32)
        .output_format(types::OutputFormat::Png);
    let original = client.run(request.clone()).await.unwrap().bytes().await.unwrap();

    let replay = MockService::start_with(replaying(&path), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let again = replay
        .client()
        .unwrap()
        .run(request)
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    assert_eq!(
        genapi::ImageFormat::sniff(&again),
        genapi::ImageFormat::sniff(&original)
    );
    assert_eq!(crate::common::dimensions(&again), Some((320, 192)));
}

#[tokio::test(start_paused = true)]
async fn a_submission_the_recording_lacks_is_refused_naming_the_nearest() {
    let dir = Dir::new("replay-nearest");
    let path = dir.join("run.har");
    let mock = MockService::start().await.unwrap();
    let client = mock.client_builder().record(&path).build().unwrap();
    client
        .submit(types::Gen2ProRequest::builder().prompt("a fox").seed(7))
        .await
        .unwrap();

    let replay = MockService::start_with(replaying(&path), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let error = replay
        .client()
        .unwrap()
        .submit(types::Gen2ProRequest::builder().prompt("a wolf").seed(7))
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("no recorded submission matches POST /v1/gen-2-pro"),
        "{text}"
    );
    assert!(text.contains(r#"prompt (recorded "a fox", sent "a wolf")"#), "{text}");
}
