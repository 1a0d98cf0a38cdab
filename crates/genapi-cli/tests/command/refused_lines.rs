//! A line the service refused (here a 403 for a wrong key) is not sent
//! again by the same command, and every place that reports it says so and
//! names `--retry-refused`, which sends it once the cause is fixed.

use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::Value;

use crate::common::{genapi, said, write_jobs, Dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_refused_for_a_wrong_key_names_retry_refused_everywhere_and_is_sent_with_it() {
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    let mock = MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("refused-wrong-key");
    write_jobs(&dir.join("jobs.jsonl"), 1, "refused");
    let batch = |extra: &[&str]| {
        let mut command = genapi(&dir, &mock);
        command.args(["batch", "jobs.jsonl", "--out", "shots"]).args(extra);
        command
    };

    let refused = batch(&[]).env("GENAPI_API_KEY", "a-wrong-key").output().unwrap();
    let text = said(&refused);
    assert_eq!(refused.status.code(), Some(3), "{text}");
    assert!(
        text.contains("--retry-refused"),
        "the line's message and the summary: {text}"
    );
    assert!(text.contains("1 refused"), "{text}");

    // The key is fixed: the same command sends nothing and says why.
    let again = batch(&[]).output().unwrap();
    let text = said(&again);
    assert_eq!(again.status.code(), Some(3), "{text}");
    assert!(text.contains("--retry-refused"), "{text}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "not sent again: {text}");

    let status = batch(&["--status"]).output().unwrap();
    let text = said(&status);
    assert!(
        text.contains("line 1: refused by the service") && text.contains("--retry-refused"),
        "{text}"
    );
    let json = batch(&["--status", "--json"]).output().unwrap();
    let view: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(view["lines"]["refused"], 1, "{view}");
    let results = std::fs::read_to_string(dir.join("shots/results.jsonl")).unwrap();
    assert!(results.contains(r#""status":"refused""#), "{results}");

    let retried = batch(&["--retry-refused"]).output().unwrap();
    assert_eq!(retried.status.code(), Some(0), "{}", said(&retried));
    assert!(said(&retried).contains("1 saved"), "{}", said(&retried));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
}
