//! `batch --estimate`: what a job file will cost by the prices this account
//! was charged before, matching what the service then charges; lines of a
//! kind never charged are named, never counted as free.

use serde_json::{json, Value};

use crate::cli::text;
use crate::common::{genapi, roomy_mock, Dir};

fn job_file(dir: &Dir, name: &str, lines: &[Value]) {
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(dir.join(name), text).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_estimate_is_what_the_service_then_charges_and_names_the_lines_it_cannot_price() {
    let mock = roomy_mock(50).await;
    mock.set_credits(Some(1000.0));
    let dir = Dir::new("estimate");
    let small = |prompt: &str| json!({"model": "gen-2-pro", "prompt": prompt, "width": 512, "height": 512});
    let flex = |prompt: &str| json!({"model": "gen-2-flex", "prompt": prompt});
    // Nothing charged yet: nothing can be priced, and nothing is sent.
    job_file(&dir, "first.jsonl", &[small("a fox"), flex("a hare")]);
    let estimate = genapi(&dir, &mock)
        .args(["batch", "first.jsonl", "--estimate"])
        .output()
        .unwrap();
    assert_eq!(estimate.status.code(), Some(0), "{}", text(&estimate.stderr));
    let said = text(&estimate.stdout);
    assert!(
        said.contains("in all: 0.00 credits for 0 lines; lines 1-2 (2) of a kind never charged not counted"),
        "{said}"
    );
    assert_eq!(mock.requests().len(), 0, "an estimate sends nothing");

    // A run is charged; its prices are kept for this service.
    let run = genapi(&dir, &mock)
        .args(["batch", "first.jsonl", "--out", "first", "-q"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));

    // New prompts of the same kinds are priced; another size is not.
    let known = [small("a lighthouse"), small("a boat"), flex("a field"), small("a barn")];
    let mut with_unknown = known.to_vec();
    with_unknown.insert(
        2,
        json!({"model": "gen-2-pro", "prompt": "wide", "width": 1024, "height": 512}),
    );
    job_file(&dir, "second.jsonl", &with_unknown);
    let estimate = genapi(&dir, &mock)
        .args(["batch", "second.jsonl", "--estimate", "--json"])
        .output()
        .unwrap();
    let estimate: Value = serde_json::from_slice(&estimate.stdout).unwrap();
    assert_eq!(estimate["lines"], 5);
    assert_eq!(estimate["unknown"], json!([{"line": 3, "model": "gen-2-pro"}]));
    assert_eq!(estimate["by_model"]["gen-2-pro"]["unknown"], 1);
    assert_eq!(estimate["by_model"]["gen-2-flex"]["lines"], 1);

    // The known lines alone: the estimate is what the service charges.
    job_file(&dir, "third.jsonl", &known);
    let estimate = genapi(&dir, &mock)
        .args(["batch", "third.jsonl", "--estimate", "--json"])
        .output()
        .unwrap();
    let estimate: Value = serde_json::from_slice(&estimate.stdout).unwrap();
    assert_eq!(estimate["unknown"], json!([]));
    let estimated = estimate["credits"].as_f64().unwrap();
    let before = mock.credits().unwrap();
    let run = genapi(&dir, &mock)
        .args(["batch", "third.jsonl", "--out", "third", "-q"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let charged = before - mock.credits().unwrap();
    assert!(estimated > 0.0);
    assert!(
        (charged - estimated).abs() < 1e-6,
        "estimated {estimated}, the service charged {charged}"
    );

    // What `generate` was charged prices its kind too.
    let generated = genapi(&dir, &mock)
        .args(["generate", "a kite", "--size", "640x640", "-o", "kite.jpg", "--json"])
        .output()
        .unwrap();
    assert_eq!(generated.status.code(), Some(0), "{}", text(&generated.stderr));
    let generated: Value = serde_json::from_slice(&generated.stdout).unwrap();
    job_file(
        &dir,
        "fourth.jsonl",
        &[json!({"model": "gen-2-pro", "prompt": "a sail", "width": 640, "height": 640, "output_format": "jpeg"})],
    );
    let estimate = genapi(&dir, &mock)
        .args(["batch", "fourth.jsonl", "--estimate", "--json"])
        .output()
        .unwrap();
    let estimate: Value = serde_json::from_slice(&estimate.stdout).unwrap();
    assert_eq!(estimate["unknown"], json!([]), "{estimate}");
    assert_eq!(estimate["credits"], generated["cost"]);
}
