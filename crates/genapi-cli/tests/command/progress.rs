//! Progress of many tasks as a user sees it: a bar on a terminal, plain
//! time-stamped lines in a log, nothing with `--quiet`, and no colour.

use std::time::Duration;

use genapi_mock::{MockConfig, MockService};

use crate::common::{genapi, Dir};
use crate::terminal::Terminal;

async fn mock(duration_ms: u64) -> MockService {
    let config = MockConfig::default().default_duration(Duration::from_millis(duration_ms));
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// The credits a progress line ends with (`…, 1.58 credits`).
fn credits_on(line: &str) -> f64 {
    line.trim_end_matches(" credits")
        .rsplit(' ')
        .next()
        .and_then(|figure| figure.parse().ok())
        .unwrap_or_else(|| panic!("{line}"))
}

/// A styling escape sequence (colour, bold…): `ESC [ … m`.
fn has_styling(screen: &str) -> bool {
    screen.match_indices("\u{1b}[").any(|(at, _)| {
        let rest = &screen[at + 2..];
        let end = rest.find(|c: char| !(c.is_ascii_digit() || c == ';'));
        end.is_some_and(|end| rest[end..].starts_with('m'))
    })
}

/// `2026-11-25T10:00:00Z generate: …` (a UTC RFC 3339 time stamp first).
fn is_time_stamped(line: &str, label: &str) -> bool {
    let Some((stamp, rest)) = line.split_once(' ') else {
        return false;
    };
    stamp.len() >= 20
        && stamp.ends_with('Z')
        && stamp.as_bytes()[4] == b'-'
        && stamp.as_bytes()[10] == b'T'
        && humantime::parse_rfc3339(stamp).is_ok()
        && rest.starts_with(&format!("{label}: "))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_terminal_a_batch_draws_a_bar_without_colour_and_quiet_draws_none() {
    let mock = mock(1_500).await;
    let dir = Dir::new("progress-terminal");
    crate::common::write_jobs(&dir.join("jobs.jsonl"), 3, "a bar");
    let run = |out: &str, quiet: bool| {
        let mut command = genapi(&dir, &mock);
        command.args(["batch", "jobs.jsonl", "--out", out]).env("NO_COLOR", "1");
        if quiet {
            command.arg("--quiet");
        }
        Terminal::spawn(command).finish(Duration::from_secs(60))
    };
    let (code, screen) = run("drawn", false);
    assert_eq!(code, Some(0), "{screen}");
    assert!(screen.contains("batch ["), "a bar was drawn: {screen:?}");
    assert!(screen.contains("/3 "), "done of all: {screen:?}");
    assert!(!has_styling(&screen), "nothing is coloured: {screen:?}");
    let (code, screen) = run("quiet", true);
    assert_eq!(code, Some(0), "{screen}");
    assert!(!screen.contains("batch ["), "--quiet draws no bar: {screen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_log_progress_is_plain_time_stamped_lines_and_quiet_writes_none() {
    let mock = mock(300).await;
    let dir = Dir::new("progress-plain");
    let run = |out: &str, quiet: bool| {
        let mut command = genapi(&dir, &mock);
        command.args(["generate", "a progress log", "-n", "2", "--out", out]);
        if quiet {
            command.arg("--quiet");
        }
        command.output().unwrap()
    };
    let output = run("logged/", false);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    let stamped: Vec<&str> = stderr
        .lines()
        .filter(|line| is_time_stamped(line, "generate"))
        .collect();
    assert!(stamped.iter().any(|line| line.contains("0/2 done")), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "no escape sequence in a log: {stderr:?}");
    let output = run("quiet/", true);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        !stderr.lines().any(|line| is_time_stamped(line, "generate")),
        "--quiet writes no progress: {stderr}"
    );
}

/// A batch stopped by `--timeout` while its tasks run: they were charged
/// when accepted, so the line of where it stopped shows their cost, the
/// same as the summary's known cost, not 0.00.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_stopped_while_its_tasks_run_shows_what_their_acceptance_charged() {
    let mock = mock(600_000).await;
    let dir = Dir::new("progress-charged-in-flight");
    let lines: Vec<String> = (1..=2)
        .map(|n| format!(r#"{{"model": "gen-2-pro", "prompt": "a long fox {n}", "width": 1024, "height": 1024}}"#))
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    let run = genapi(&dir, &mock)
        // Time for both submissions to leave on a tenth of a core; the
        // tasks run ten minutes.
        .args(["--timeout", "30", "batch", "jobs.jsonl", "--out", "out", "--no-gallery"])
        .output()
        .unwrap();
    // The summary goes to stdout, progress to stderr.
    let stderr = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "{stderr}");
    let figure = |after: &str, before: &str| -> f64 {
        let line = stderr
            .lines()
            .find(|line| line.contains(after))
            .unwrap_or_else(|| panic!("{after:?}: {stderr}"));
        let start = line.find(after).unwrap() + after.len();
        let rest = &line[start..];
        let (number, _) = rest.rsplit_once(before).unwrap_or_else(|| panic!("{line}"));
        let number = number.rsplit(' ').next().unwrap();
        number.parse().unwrap_or_else(|_| panic!("{number:?} in {line}"))
    };
    assert!(
        stderr.contains("stopping at --timeout: answers to submissions still in flight are not waited for"),
        "a stop at --timeout promises no wait it has no time for: {stderr}"
    );
    // Its last progress line counts what its summary counts: both lines
    // accepted, not finished, left to the next run (neither done nor
    // failed).
    assert!(
        stderr.contains("batch: stopped at 0/2 done, 0 failed, 0 in flight, 2 left to the next run")
            && stderr.contains("lines 1-2 (2): accepted, not finished"),
        "{stderr}"
    );
    let shown = figure("batch: stopped at 0/2 done", " credits");
    let known = figure("known cost, all runs: ", " credits");
    assert!(known > 0.0, "the mock charges a 1 MP image: {stderr}");
    assert_eq!(shown, known, "{stderr}");
}

/// `generate` counts a task's credits from its acceptance too: one the
/// deadline leaves running shows what it was charged, not 0.00.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generate_whose_task_runs_on_shows_what_its_acceptance_charged() {
    let mock = mock(600_000).await;
    let dir = Dir::new("progress-generate-charged");
    let run = genapi(&dir, &mock)
        .args([
            "--timeout",
            "3",
            "generate",
            "a long fox",
            "--size",
            "1024x1024",
            "-o",
            "fox.jpg",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(8), "timed out: {stderr}");
    let line = stderr
        .lines()
        .find(|line| line.contains("generate: 0/1 done, 0 failed, 1 in flight"))
        .unwrap_or_else(|| panic!("{stderr}"));
    let credits = credits_on(line);
    assert!(credits > 0.0, "the mock charges a 1 MP image at acceptance: {line}");
}

/// A wait the service refuses (a key that is not the one the task was
/// submitted with) did not see the task end: it goes on at the service,
/// paid for, so it is not counted as failed, which would invite sending
/// it again, and the command that picks it up is printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_refused_by_the_service_counts_its_task_in_flight_not_failed() {
    let mock = mock(600_000).await;
    let dir = Dir::new("progress-wait-refused");
    let task = mock
        .client()
        .unwrap()
        .submit(genapi::api::types::Gen2ProRequest::builder().prompt("a long fox"))
        .await
        .unwrap();
    let run = genapi(&dir, &mock)
        .env("GENAPI_API_KEY", "not-the-key-it-was-sent-with")
        .args(["wait", task.id()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "refused: {stderr}");
    assert!(
        stderr.contains("0/1 done, 0 failed, 1 in flight") && !stderr.contains("1 failed"),
        "{stderr}"
    );
    assert!(
        stderr.contains("resume with: genapi wait") && stderr.contains(&format!("-- {}", task.id())),
        "the paid task is offered to be picked up once the key is right: {stderr}"
    );
}

/// A task seen `Ready` whose result could not be written ended, charged:
/// `generate` counts it failed, not in flight, at what it settled at (a
/// model whose acceptance says no cost reports it on the poll).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_generate_whose_result_is_not_written_counts_its_ended_task_at_its_cost() {
    let mock = mock(50).await;
    let dir = Dir::new("progress-generate-not-written");
    // The image goes to stdout, a device that is always full.
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let run = genapi(&dir, &mock)
        .args(["generate", "-m", "gen-dev", "a fox", "-o", "-"])
        .stdout(full)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_ne!(run.status.code(), Some(0), "not written: {stderr}");
    let line = stderr
        .lines()
        .rfind(|line| line.contains("generate: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(line.contains("1/1 done, 1 failed, 0 in flight"), "{stderr}");
    let credits = credits_on(line);
    assert!(credits > 0.0, "the mock charges gen-dev on the poll: {line}");
}
