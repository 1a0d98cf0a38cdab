//! A job file edited between runs the way people edit one (a line added on
//! top): the lines the edit moved are not sent, and every view says the
//! same of them (`changed`): the summary, results.jsonl, the gallery and
//! `--status` before the run. None is told a flag that would not send it,
//! or to start over elsewhere (which pays again); each is told to restore
//! the file and add new jobs at its end.

use std::time::Duration;

use genapi_mock::{Fault, MockConfig, MockService};
use serde_json::{json, Value};

use crate::common::{genapi, posts_by_prompt, said, Dir};

fn write(dir: &Dir, prompts: &[&str]) {
    let lines: Vec<String> = prompts
        .iter()
        .map(|prompt| json!({"model": "gen-2-pro", "prompt": prompt, "width": 64, "height": 64}).to_string())
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
}

/// A mock whose tasks end at once.
async fn quick_mock() -> MockService {
    let config = MockConfig::default().default_duration(Duration::from_millis(50));
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// `genapi batch jobs.jsonl --out out` with `extra`, in `dir`.
fn batch(dir: &Dir, mock: &MockService, extra: &[&str]) -> std::process::Output {
    let mut command = genapi(dir, mock);
    command.args(["batch", "jobs.jsonl", "--out", "out"]).args(extra);
    command.output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lines_an_edit_moved_stand_changed_in_every_view_and_are_told_to_restore_the_file() {
    let mock = quick_mock().await;
    let dir = Dir::new("edited-job-file");
    let batch = |extra: &[&str]| batch(&dir, &mock, extra);
    // alpha saved; bravo refused for credits.
    write(&dir, &["alpha"]);
    assert_eq!(batch(&[]).status.code(), Some(0));
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST"));
    write(&dir, &["alpha", "bravo"]);
    let refused = batch(&[]);
    assert_ne!(refused.status.code(), Some(0), "{}", said(&refused));

    // A line added on top: line 1 (alpha's record) now holds zulu, line 2
    // holds alpha, whose record line 1 no longer holds.
    write(&dir, &["zulu", "alpha", "bravo"]);
    let status = batch(&["--status", "--json"]);
    let view: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(view["lines"]["changed"], 2, "--status reads the edit: {view}");
    assert_eq!(view["lines"]["saved"], 0, "{view}");
    let status = said(&batch(&["--status"]));
    assert!(status.contains("add new jobs at its end"), "{status}");

    let run = batch(&["--retry-refused"]);
    let text = said(&run);
    assert_ne!(run.status.code(), Some(0), "{text}");
    assert!(text.contains("1 saved, 2 changed;"), "{text}");
    assert!(text.contains("add new jobs at its end"), "{text}");
    assert!(!text.contains("output directory"), "{text}");
    assert!(
        !text.contains("--retry-refused"),
        "no flag sends a changed line: {text}"
    );
    let results = std::fs::read_to_string(dir.join("out/results.jsonl")).unwrap();
    let standing: Vec<(u64, String)> = results
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .map(|line| {
            (
                line["line"].as_u64().unwrap(),
                line["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert!(standing.contains(&(1, "changed".into())), "{results}");
    assert!(standing.contains(&(2, "changed".into())), "{results}");
    let page = std::fs::read_to_string(dir.join("out/index.html")).unwrap();
    assert!(page.contains("changed"), "the gallery says changed");
    // bravo, refused before, is sent at its new line; alpha and zulu are not.
    let paid = posts_by_prompt(&mock);
    assert_eq!(paid.get("alpha"), Some(&1), "{paid:?}");
    assert_eq!(paid.get("zulu"), None, "{paid:?}");
    assert_eq!(paid.get("bravo"), Some(&2), "refused once, then sent: {paid:?}");
}

/// A refused line whose job the edit moved is said as changed by
/// `--status` and by a run without flags, never with `--retry-refused`,
/// which would not send it either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_line_the_edit_moved_is_never_told_a_flag_that_would_not_send_it() {
    let mock = quick_mock().await;
    let dir = Dir::new("edited-refused-copy");
    let batch = |extra: &[&str]| batch(&dir, &mock, extra);
    write(&dir, &["juliet"]);
    assert_eq!(batch(&[]).status.code(), Some(0));
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST"));
    // A copy of juliet, refused.
    write(&dir, &["juliet", "juliet"]);
    assert_ne!(batch(&[]).status.code(), Some(0));
    // Line 1 edited: juliet's saved record is left behind, so the refused
    // copy at line 2 may be the job it paid for.
    write(&dir, &["kilo", "juliet"]);
    let status = batch(&["--status", "--json"]);
    let view: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(view["lines"]["changed"], 2, "{view}");
    for extra in [&[][..], &["--retry-refused"][..]] {
        let text = said(&batch(extra));
        assert!(!text.contains("--retry-refused"), "{extra:?}: {text}");
        assert!(text.contains("2 changed"), "{extra:?}: {text}");
    }
    assert_eq!(
        posts_by_prompt(&mock).get("juliet"),
        Some(&2),
        "saved once, refused once"
    );
}

/// A refused line whose place another job took (the file rewritten, not
/// moved) holds no task: `--status` says the new job is to be sent, not
/// that it was refused, and a run without flags sends it, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_job_where_a_refused_one_stood_is_said_to_be_sent_and_is_sent() {
    let mock = quick_mock().await;
    let dir = Dir::new("edited-refused-replaced");
    let batch = |extra: &[&str]| batch(&dir, &mock, extra);
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST"));
    write(&dir, &["lima"]);
    assert_ne!(batch(&[]).status.code(), Some(0));
    write(&dir, &["mike"]);
    let status = batch(&["--status", "--json"]);
    let view: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(view["lines"]["refused"], 0, "{view}");
    assert_eq!(view["lines"]["unsent"], 1, "{view}");
    let status = said(&batch(&["--status"]));
    assert!(!status.contains("--retry-refused"), "{status}");
    let run = batch(&[]);
    assert_eq!(run.status.code(), Some(0), "{}", said(&run));
    let paid = posts_by_prompt(&mock);
    assert_eq!(paid.get("mike"), Some(&1), "{paid:?}");
    assert_eq!(paid.get("lima"), Some(&1), "refused once, never again: {paid:?}");
}

/// bravo saved, then a line added on top and bravo's seed written `5.0`
/// (as a tool rewriting the file may write `5`), or its prompt retyped:
/// `--status` and the run both say the lines changed, and bravo is paid
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_rewritten_as_it_moved_is_said_changed_and_not_paid_again() {
    let mock = quick_mock().await;
    let dir = Dir::new("rewritten-as-moved");
    let batch = |extra: &[&str]| batch(&dir, &mock, extra);
    let write_lines = |lines: &[Value]| {
        let text: Vec<String> = lines.iter().map(Value::to_string).collect();
        std::fs::write(dir.join("jobs.jsonl"), text.join("\n") + "\n").unwrap();
    };
    let job = |prompt: &str, seed: Value| json!({"model": "gen-2-pro", "prompt": prompt, "width": 64, "height": 64, "seed": seed});
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST").times(1));
    write_lines(&[job("alpha", json!(1)), job("bravo", json!(5))]);
    let first = batch(&["--max-active", "1"]);
    assert!(said(&first).contains("1 saved"), "{}", said(&first));

    // Written 5.0 or retyped, bravo is in no line of the file: a job new
    // to the journal (zulu, and bravo as written now) is not sent while it
    // may be bravo, edited; alpha stands on bravo's old line.
    for bravo in [job("bravo", json!(5.0)), job("bravo, retyped", json!(5))] {
        write_lines(&[job("zulu", json!(1)), job("alpha", json!(1)), bravo]);
        let status: Value = serde_json::from_slice(&batch(&["--status", "--json"]).stdout).unwrap();
        assert_eq!(
            status["lines"]["changed"], 3,
            "--status says what the run does: {status}"
        );
        let run = batch(&["--max-active", "1"]);
        let text = said(&run);
        assert!(
            text.contains("3 changed") && text.contains("no line of the job file holds it any more"),
            "{text}"
        );
        let paid = posts_by_prompt(&mock);
        assert_eq!(paid.get("bravo"), Some(&1), "{text}");
        assert_eq!(paid.get("bravo, retyped"), None, "{text}");
    }
}
