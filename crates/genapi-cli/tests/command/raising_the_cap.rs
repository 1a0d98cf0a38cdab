//! A batch stopped at its credit cap says what cap sends the rest, and that
//! cap does.

use serde_json::{json, Value};

use crate::cli::text;
use crate::common::{genapi, roomy_mock, Dir};

/// The cap the summary suggests: the number after `--max-credits `.
fn suggested(said: &str) -> f64 {
    let (_, rest) = said.split_once("run the same command with --max-credits ").expect(said);
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_at_its_cap_names_the_cap_that_sends_the_rest() {
    let mock = roomy_mock(10).await;
    let dir = Dir::new("raising-the-cap");
    // What one line costs on this service.
    let one = genapi(&dir, &mock)
        .args(["generate", "priced", "--size", "256x256", "--json", "-o", "priced.jpg"])
        .output()
        .unwrap();
    let object: Value = serde_json::from_slice(&one.stdout).unwrap();
    let price = object["cost"].as_f64().unwrap();
    assert!(price > 0.0, "{object}");

    let lines: Vec<String> = (1..=4)
        .map(|n| {
            json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("capped {n}"),
                        "width": 256, "height": 256})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    let cap = format!("{:.2}", price * 1.5);
    let capped = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "shots", "--max-credits", &cap])
        .output()
        .unwrap();
    let said = text(&capped.stdout) + &text(&capped.stderr);
    assert_eq!(capped.status.code(), Some(11), "{said}");
    assert!(said.contains("3 lines left unsent at the --max-credits cap"), "{said}");
    let raised = suggested(&said);
    assert!(raised >= 4.0 * price - 1e-9, "{raised} for 4 lines of {price}: {said}");
    assert!(
        raised <= 4.0 * price + 0.01 + 1e-9,
        "{raised} for 4 lines of {price}: {said}"
    );

    let again = genapi(&dir, &mock)
        .args([
            "batch",
            "jobs.jsonl",
            "--out",
            "shots",
            "--max-credits",
            &format!("{raised:.2}"),
        ])
        .output()
        .unwrap();
    let said = text(&again.stdout) + &text(&again.stderr);
    assert_eq!(
        again.status.code(),
        Some(0),
        "the suggested cap did not send the rest: {said}"
    );
    assert!(said.contains("4 saved"), "{said}");

    // With nothing charged yet, what the lines cost is not known: the
    // summary says how to learn it rather than a number.
    std::fs::write(dir.join("other.jsonl"), lines[0].replace("capped 1", "unpriced") + "\n").unwrap();
    let nothing = genapi(&dir, &mock)
        .args(["batch", "other.jsonl", "--out", "other", "--max-credits", "0"])
        .output()
        .unwrap();
    let said = text(&nothing.stdout) + &text(&nothing.stderr);
    assert!(
        said.contains("1 line left unsent") && said.contains("--estimate"),
        "{said}"
    );
}

/// Against a service that settles no cost when a task ends (it reports a
/// cost only on acceptance), the cap counts the first task at all it held:
/// the summary says so, and never suggests a cap at or below the one given.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_ended_without_a_settled_cost_are_named_not_answered_with_a_lower_cap() {
    let mock = roomy_mock(10).await;
    let dir = Dir::new("unsettled-cap");
    // A finished task's poll answer, as a service that settles no cost
    // gives it: every poll of the batch gets it.
    let one = genapi(&dir, &mock)
        .args(["generate", "unsettled", "--size", "64x64", "--json", "-o", "one.jpg"])
        .output()
        .unwrap();
    let task: Value = serde_json::from_slice(&one.stdout).unwrap();
    let id = task["id"].as_str().unwrap();
    let mut ready: Value = crate::common::http()
        .get(format!("{}/v1/get_result?id={id}", mock.regional_url()))
        .header("x-key", mock.key())
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(ready["status"], "Ready", "{ready}");
    ready.as_object_mut().unwrap().remove("cost");
    crate::common::answer_polls(&mock, ready.to_string(), 1000);
    crate::common::write_jobs(&dir.join("jobs.jsonl"), 6, "unsettled");
    for _ in 0..2 {
        let run = genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "shots", "--max-credits", "100"])
            .output()
            .unwrap();
        let said = text(&run.stdout) + &text(&run.stderr);
        assert!(
            said.contains("5 lines left unsent at the --max-credits cap of 100.00"),
            "{said}"
        );
        assert!(said.contains("1 task ended without a settled cost"), "{said}");
        assert!(!said.contains("run the same command with --max-credits"), "{said}");
    }
}
