//! Prices learned from a service are kept and read under one name, decided
//! from the configuration before anything is sent: a mock with its own key
//! is its address, for a batch and an estimate alike, and a `generate`
//! after a batch keeps the kinds the batch learned.

use genapi_mock::{MockConfig, MockService};
use serde_json::json;

use crate::cli::text;
use crate::common::{genapi, Dir};

/// A mock with a key of its own (so its prices are kept under its
/// address), whose tasks take 10 ms.
async fn mock_of_its_own() -> MockService {
    let config = MockConfig::default()
        .key("a-key-of-its-own")
        .default_duration(std::time::Duration::from_millis(10));
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mock_with_its_own_key_keeps_the_prices_an_estimate_then_reads() {
    let mock = mock_of_its_own().await;
    let dir = Dir::new("learned-prices");
    let pro = json!({"model": "gen-2-pro", "prompt": "a fox", "width": 512, "height": 512});
    let flex = json!({"model": "gen-2-flex", "prompt": "a hare"});
    std::fs::write(dir.join("jobs.jsonl"), format!("{pro}\n{flex}\n")).unwrap();
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "-q"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));

    let estimate = |dir: &Dir| {
        let said = genapi(dir, &mock)
            .args(["batch", "jobs.jsonl", "--estimate"])
            .output()
            .unwrap();
        text(&said.stdout)
    };
    let said = estimate(&dir);
    assert!(said.contains("in all: ") && !said.contains("unknown price"), "{said}");

    // One kind charged again by `generate`: the other stays priced.
    let one = genapi(&dir, &mock)
        .args(["generate", "a fox", "--size", "512x512", "-o", "fox.jpg"])
        .output()
        .unwrap();
    assert_eq!(one.status.code(), Some(0), "{}", text(&one.stderr));
    let said = estimate(&dir);
    assert!(said.contains("in all: ") && !said.contains("unknown price"), "{said}");
}

/// A model whose acceptance names no cost (the older families: their cost
/// comes with the result) is priced by what `generate`'s task settled at,
/// as a batch prices it, so an estimate of it is no longer unknown.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_prices_a_model_by_what_its_task_settled_at() {
    let mock = mock_of_its_own().await;
    let dir = Dir::new("learned-settled-prices");
    let job = json!({"model": "gen-dev", "prompt": "a dog", "width": 512, "height": 512, "output_format": "jpeg"});
    std::fs::write(dir.join("jobs.jsonl"), format!("{job}\n")).unwrap();
    let estimate = || {
        let said = genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--estimate"])
            .output()
            .unwrap();
        text(&said.stdout)
    };
    assert!(estimate().contains("unknown price"), "nothing charged yet");
    let submitted = genapi(&dir, &mock)
        .args(["--json", "submit", "-m", "gen-dev", "a dog", "--size", "512x512"])
        .output()
        .unwrap();
    let accepted: serde_json::Value = serde_json::from_slice(&submitted.stdout).unwrap();
    assert!(accepted["cost"].is_null(), "no cost at acceptance: {accepted}");

    let run = genapi(&dir, &mock)
        .args([
            "generate", "-m", "gen-dev", "a dog", "--size", "512x512", "-o", "dog.jpg",
        ])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let said = estimate();
    assert!(said.contains("in all: ") && !said.contains("unknown price"), "{said}");
}
