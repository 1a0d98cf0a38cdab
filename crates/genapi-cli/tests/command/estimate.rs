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
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
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
        said.contains("no price is known yet: 2 lines of unknown price (gen-2-flex ×1, gen-2-pro ×1; lines 1-2 (2)): "),
        "{said}"
    );
    assert!(said.contains("run one line of each kind first"), "{said}");
    assert!(!said.contains("0.00 credits"), "nothing is summed as free: {said}");
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
    let said = genapi(&dir, &mock)
        .args(["batch", "second.jsonl", "--estimate"])
        .output()
        .unwrap();
    let said = text(&said.stdout);
    assert!(
        said.contains(
            "credits for the 4 lines of known price only; not counted: 1 line of unknown price (gen-2-pro ×1; line 3)"
        ),
        "{said}"
    );
    let estimate = genapi(&dir, &mock)
        .args(["batch", "second.jsonl", "--estimate", "--json"])
        .output()
        .unwrap();
    let estimate: Value = serde_json::from_slice(&estimate.stdout).unwrap();
    assert_eq!(estimate["lines"], 5);
    assert_eq!(estimate["priced_lines"], 4);
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

/// Sets every price in the command's file of learned prices to `credits`,
/// as a corrupt or forged file could hold it.
fn forge_prices(dir: &Dir, credits: f64) {
    let path = dir.join("cache/genapi/prices.json");
    let mut all: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    for service in all.as_object_mut().unwrap().values_mut() {
        for price in service["learned"]["kinds"].as_object_mut().unwrap().values_mut() {
            price["credits"] = json!(credits);
        }
    }
    std::fs::write(&path, all.to_string()).unwrap();
}

/// A price far below any a service charges (1e-9, or the smallest float)
/// is no price: the estimate names the lines as of unknown price instead of
/// saying they cost nothing, and a capped batch sends the first line of the
/// kind alone, so the service charges within the cap and the run exits 11
/// for the lines it kept back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiny_learned_price_prices_nothing_for_an_estimate_or_a_cap() {
    let mock = roomy_mock(50).await;
    mock.set_credits(Some(1000.0));
    let dir = Dir::new("estimate-tiny-price");
    let line = |n: u64| json!({"model": "gen-2-pro", "prompt": format!("line {n}"), "width": 1024, "height": 1024});
    // A run learns the kind's real price.
    job_file(&dir, "one.jsonl", &[line(0)]);
    let run = genapi(&dir, &mock)
        .args(["batch", "one.jsonl", "--out", "one", "-q"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    let price = 1000.0 - mock.credits().unwrap();
    job_file(&dir, "eight.jsonl", &(1..=8).map(line).collect::<Vec<_>>());
    for tiny in [1e-9, 5e-324] {
        forge_prices(&dir, tiny);
        let estimate = genapi(&dir, &mock)
            .args(["batch", "eight.jsonl", "--estimate"])
            .output()
            .unwrap();
        let said = text(&estimate.stdout);
        assert!(
            said.contains("gen-2-pro: 8 lines, 8 of unknown price"),
            "{tiny:e}: {said}"
        );
        assert!(
            said.contains("no price is known yet: 8 lines of unknown price (gen-2-pro ×8; lines 1-8 (8))"),
            "{tiny:e}: {said}"
        );
        let cap = 2.0;
        let before = mock.credits().unwrap();
        let run = genapi(&dir, &mock)
            .args(["batch", "eight.jsonl", "--out", &format!("eight-{tiny:e}"), "-q"])
            .args(["--max-credits", "2", "--max-active", "8"])
            .output()
            .unwrap();
        let charged = before - mock.credits().unwrap();
        assert_eq!(run.status.code(), Some(11), "{tiny:e}: {}", text(&run.stderr));
        assert!(
            (charged - price).abs() < 1e-9 && charged <= cap,
            "{tiny:e}: one line of {price} charged alone, yet {charged} of a cap of {cap}"
        );
    }
}

/// Prices are kept per service, not per address: what one mock charged
/// prices the estimate against another mock on another port (every mock
/// charges the same illustrative prices), which says it is the mock's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mock_on_another_port_is_the_same_service_for_prices() {
    let first = roomy_mock(50).await;
    let dir = Dir::new("estimate-any-port");
    let line = |prompt: &str| json!({"model": "gen-2-pro", "prompt": prompt, "width": 512, "height": 512});
    job_file(&dir, "one.jsonl", &[line("a fox")]);
    let run = genapi(&dir, &first)
        .args(["batch", "one.jsonl", "--out", "one", "-q"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    drop(first);
    let second = roomy_mock(50).await;
    job_file(&dir, "two.jsonl", &[line("a hare"), line("a lynx")]);
    let estimate = genapi(&dir, &second)
        .args(["batch", "two.jsonl", "--estimate"])
        .output()
        .unwrap();
    let said = text(&estimate.stdout);
    assert!(said.contains("at the mock (its illustrative prices"), "{said}");
    assert!(
        said.contains("in all: ") && said.contains(" credits for 2 lines"),
        "{said}"
    );
    assert!(!said.contains("unknown price"), "{said}");
    let kept: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cache/genapi/prices.json")).unwrap()).unwrap();
    let services: Vec<&String> = kept.as_object().unwrap().keys().collect();
    assert_eq!(services, ["the mock"], "one service, whatever its port");
}

/// An estimate sends nothing, so invalid lines do not stop it: they are
/// said, the valid lines are estimated, and the words say what a run does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_estimate_of_a_file_with_invalid_lines_prices_the_others_and_says_what_a_run_does() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("estimate-invalid");
    job_file(
        &dir,
        "mixed.jsonl",
        &[
            json!({"model": "gen-2-pro", "prompt": "a fox"}),
            json!({"model": "gen-2-pro", "prompt": "a hare", "width": 1000}),
            json!({"model": "gen-2-pro", "prompt": "an owl"}),
        ],
    );
    let estimate = genapi(&dir, &mock)
        .args(["batch", "mixed.jsonl", "--estimate"])
        .output()
        .unwrap();
    let (said, stderr) = (text(&estimate.stdout), text(&estimate.stderr));
    assert_eq!(estimate.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("warning: mixed.jsonl: line 2: width"), "{stderr}");
    assert!(said.contains("mixed.jsonl: 2 lines, by the prices"), "{said}");
    assert!(
        said.contains("not counted: 1 line found invalid (said above); a run refuses the file until they are fixed"),
        "{said}"
    );
    assert!(!stderr.contains("nothing was submitted"), "{stderr}");
    let json = genapi(&dir, &mock)
        .args(["--json", "batch", "mixed.jsonl", "--estimate"])
        .output()
        .unwrap();
    let shown: Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(shown["invalid_lines"], 1, "{shown}");
    assert_eq!(mock.requests().len(), 0, "an estimate sends nothing");
}
