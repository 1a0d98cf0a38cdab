//! A batch interrupted with Ctrl-C at a keyboard says, for each line, what
//! the next run does with it, and the next run does exactly that: during
//! submissions, while waiting, after a second Ctrl-C, and on the built-in
//! mock, whose tasks end with it.

use std::path::Path;
use std::time::Duration;

use genapi_mock::{Fault, FaultKind, MockConfig, MockService};

use crate::common::{genapi, genapi_alone, posts_by_prompt, Dir};
use crate::terminal::Terminal;

/// Long enough for any run of these tests on a loaded machine.
const PATIENCE: Duration = Duration::from_secs(120);

/// How long a task or a held submission lasts where a test must act before
/// it ends: far longer than any run of the test, so the test never races
/// it, and ended at the test's choosing by moving the mock clock past it.
const HOUR: Duration = Duration::from_secs(3600);

/// A little more than [`HOUR`]: past the end of tasks of an hour.
const PAST_HOUR: Duration = Duration::from_secs(3601);

async fn mock(duration: Duration) -> MockService {
    let config = MockConfig::default()
        .default_duration(duration)
        .request_log_capacity(10_000);
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

/// Records of this kind in the journal so far.
fn recorded(journal: &Path, event: &str) -> usize {
    let wanted = format!(r#""event":"{event}""#);
    std::fs::read_to_string(journal)
        .map(|text| text.lines().filter(|line| line.contains(&wanted)).count())
        .unwrap_or(0)
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn batch(command: &mut std::process::Command) -> &mut std::process::Command {
    command.args(["batch", "jobs.jsonl", "--out", "shots"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ctrl_c_during_submissions_says_which_lines_are_polled_and_which_are_sent_and_the_next_run_does_that() {
    let mock = mock(Duration::from_millis(200)).await;
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::Delay(HOUR)).method("POST"));
    let dir = Dir::new("interrupt-submitting");
    crate::common::write_jobs(&dir.join("jobs.jsonl"), 3, "submitting");
    let journal = dir.join("shots/journal.jsonl");
    let mut command = genapi(&dir, &mock);
    batch(&mut command).args(["--max-active", "1"]);
    let mut terminal = Terminal::spawn(command);
    // Sent: the mock holds the request (recorded first, a stop before it left
    // would rightly leave the line unsent).
    terminal.wait_until("line 1 sent", PATIENCE, || {
        recorded(&journal, "intent") == 1 && posts_by_prompt(&mock).len() == 1
    });
    terminal.ctrl_c();
    // Stopping, the command waits for the answer of the held submission,
    // which comes once the mock clock passes the delay.
    terminal.wait_for("stopping:", PATIENCE);
    mock.advance(HOUR);
    let (code, screen) = terminal.finish(PATIENCE);
    assert_eq!(code, Some(130), "{screen}");
    assert!(
        screen.contains("line 1: accepted, not finished; the same command polls its task"),
        "{screen}"
    );
    assert!(
        screen.contains("lines 2-3 (2): not sent; the same command sends them"),
        "{screen}"
    );
    assert!(screen.contains("run the same command again to resume"), "{screen}");

    let rerun = batch(&mut genapi(&dir, &mock)).output().unwrap();
    assert_eq!(rerun.status.code(), Some(0), "{}", text(&rerun.stderr));
    let posts = posts_by_prompt(&mock);
    assert_eq!(posts.len(), 3, "{posts:?}");
    assert!(
        posts.values().all(|n| *n == 1),
        "line 1 was polled, not sent again: {posts:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ctrl_c_while_waiting_says_the_tasks_are_polled_and_status_reads_the_journal_folder() {
    let mock = mock(HOUR).await;
    let dir = Dir::new("interrupt-waiting");
    crate::common::write_jobs(&dir.join("jobs.jsonl"), 3, "waiting");
    let journal = dir.join("shots/journal.jsonl");
    let mut terminal = Terminal::spawn({
        let mut command = genapi(&dir, &mock);
        batch(&mut command);
        command
    });
    terminal.wait_until("three tasks accepted", PATIENCE, || recorded(&journal, "accepted") == 3);
    terminal.ctrl_c();
    let (code, screen) = terminal.finish(PATIENCE);
    assert_eq!(code, Some(130), "{screen}");
    let said = "lines 1-3 (3): accepted, not finished; the same command polls their tasks";
    assert!(screen.contains(said), "{screen}");
    assert!(!screen.contains("not sent;"), "{screen}");

    // --status reads the journal folder: the same words, and nothing changes.
    let status = batch(&mut genapi(&dir, &mock)).arg("--status").output().unwrap();
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
    assert!(text(&status.stdout).contains(said), "{}", text(&status.stdout));
    let status = batch(&mut genapi(&dir, &mock))
        .args(["--status", "--json"])
        .output()
        .unwrap();
    let view: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(view["exists"], true, "{view}");
    assert_eq!(view["lines"]["accepted"], 3, "{view}");
    assert_eq!(
        posts_by_prompt(&mock).values().sum::<usize>(),
        3,
        "--status sends nothing"
    );

    mock.advance(PAST_HOUR);
    let rerun = batch(&mut genapi(&dir, &mock)).output().unwrap();
    assert_eq!(rerun.status.code(), Some(0), "{}", text(&rerun.stderr));
    let posts = posts_by_prompt(&mock);
    assert_eq!(posts.len(), 3, "{posts:?}");
    assert!(posts.values().all(|n| *n == 1), "{posts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_ctrl_c_during_slow_submissions_calls_them_unanswered_as_the_next_run_does_once() {
    let mock = mock(Duration::from_millis(200)).await;
    mock.inject(
        Fault::on("/v1/gen-2-pro", FaultKind::Delay(Duration::from_secs(90)))
            .method("POST")
            .times(3),
    );
    let dir = Dir::new("interrupt-twice");
    crate::common::write_jobs(&dir.join("jobs.jsonl"), 3, "twice");
    let mut terminal = Terminal::spawn({
        let mut command = genapi(&dir, &mock);
        batch(&mut command);
        command
    });
    terminal.wait_until("three submissions sent", PATIENCE, || {
        posts_by_prompt(&mock).values().sum::<usize>() == 3
    });
    terminal.ctrl_c();
    terminal.wait_for("stopping:", PATIENCE);
    terminal.ctrl_c();
    let (code, screen) = terminal.finish(PATIENCE);
    assert_eq!(code, Some(130), "{screen}");
    assert!(
        screen.contains("lines 1-3 (3): sent, and no answer came back")
            && screen.contains("the same command does not send them again"),
        "{screen}"
    );
    assert!(
        !screen.contains("not sent; the same command sends them"),
        "nothing is said to be sent again: {screen}"
    );

    let rerun = batch(&mut genapi(&dir, &mock)).output().unwrap();
    let said = format!("{}{}", text(&rerun.stdout), text(&rerun.stderr));
    assert_eq!(rerun.status.code(), Some(9), "{said}");
    assert_eq!(
        posts_by_prompt(&mock).values().sum::<usize>(),
        3,
        "nothing sent again: {said}"
    );
    assert_eq!(
        said.matches("may have accepted").count(),
        1,
        "the three lines are summarised once: {said}"
    );
    assert!(said.contains("lines 1, 2, 3 were sent without an answer"), "{said}");

    let finish = batch(&mut genapi(&dir, &mock))
        .arg("--resubmit-unknown")
        .output()
        .unwrap();
    assert_eq!(finish.status.code(), Some(0), "{}", text(&finish.stderr));
}

#[test]
fn on_the_built_in_mock_a_stopped_batch_says_its_tasks_are_gone_and_the_next_run_says_so_at_once() {
    let dir = Dir::new("interrupt-builtin");
    // Tasks of an hour (the longest a prompt may ask of the built-in mock):
    // the stop surely comes while they run.
    crate::common::write_jobs(&dir.join("jobs.jsonl"), 3, "[mock:duration_ms=3600000] builtin");
    crate::common::write_jobs(&dir.join("quick.jsonl"), 3, "builtin");
    let journal = dir.join("shots/journal.jsonl");
    let mut terminal = Terminal::spawn({
        let mut command = genapi_alone(&dir);
        batch(&mut command);
        command
    });
    terminal.wait_until("three tasks accepted", PATIENCE, || recorded(&journal, "accepted") == 3);
    terminal.ctrl_c();
    let (code, screen) = terminal.finish(PATIENCE);
    assert_eq!(code, Some(130), "{screen}");
    assert!(
        screen.contains("lines 1-3 (3) went to the built-in mock, which ends with this command: their tasks are gone"),
        "{screen}"
    );
    assert!(!screen.contains("run the same command again"), "{screen}");
    // The results (and the gallery made from them) say the same.
    let results = std::fs::read_to_string(dir.join("shots/results.jsonl")).unwrap_or_default();
    assert!(!results.contains("run the batch again"), "{results}");
    let gallery = std::fs::read_to_string(dir.join("shots/index.html")).unwrap_or_default();
    assert!(!gallery.contains("run the batch again"), "{gallery}");

    // Told at once, not after polling a mock that is gone until --timeout.
    let rerun = batch(&mut genapi_alone(&dir))
        .args(["--timeout", "30"])
        .output()
        .unwrap();
    let said = text(&rerun.stderr);
    assert_eq!(rerun.status.code(), Some(2), "{said}");
    assert!(said.contains("went to the built-in mock of an earlier run"), "{said}");
    assert!(
        said.contains("another folder") && said.contains("`genapi mock`") && said.contains("nothing was sent"),
        "{said}"
    );

    let again = genapi_alone(&dir)
        .args(["batch", "quick.jsonl", "--out", "shots-2"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    assert_eq!(recorded(&dir.join("shots-2/journal.jsonl"), "finished"), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_stops_a_batch_as_ctrl_c_does_with_the_resume_line_and_the_next_run_finishes() {
    let mock = mock(HOUR).await;
    let dir = Dir::new("interrupt-sigterm");
    crate::common::write_jobs(&dir.join("jobs.jsonl"), 2, "terminated");
    let journal = dir.join("shots/journal.jsonl");
    let child = batch(&mut genapi(&dir, &mock))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + PATIENCE;
    while recorded(&journal, "accepted") < 2 {
        assert!(std::time::Instant::now() < until, "the batch made no progress");
        std::thread::sleep(Duration::from_millis(5));
    }
    // SAFETY: signals our own child process.
    assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let stopped = child.wait_with_output().unwrap();
    let said = format!("{}{}", text(&stopped.stdout), text(&stopped.stderr));
    assert_eq!(stopped.status.code(), Some(130), "{said}");
    assert!(
        said.contains("lines 1-2 (2): accepted, not finished") && said.contains("run the same command again to resume"),
        "{said}"
    );
    mock.advance(PAST_HOUR);
    let rerun = batch(&mut genapi(&dir, &mock)).output().unwrap();
    assert_eq!(rerun.status.code(), Some(0), "{}", text(&rerun.stderr));
    assert!(posts_by_prompt(&mock).values().all(|n| *n == 1));
}

#[test]
fn batch_has_no_deadline_unless_given_the_mocks_help_promises_none_and_batch_name_is_said_one_way() {
    let dir = Dir::new("timeout-help");
    for (command, absent, present) in [
        ("batch", "[default: 600]", "none for batch"),
        ("mock", "[default: 600]", "none for batch, mock and proxy"),
        ("proxy", "[default: 600]", "none for batch, mock and proxy"),
    ] {
        let help = genapi_alone(&dir).args([command, "--help"]).output().unwrap();
        let help = text(&help.stdout);
        assert!(!help.contains(absent) && help.contains(present), "{command}: {help}");
    }
    // --batch-name is described one way: the default is the job file's
    // name, `jobs:` and its letters and digits.
    let help = genapi_alone(&dir).args(["batch", "--help"]).output().unwrap();
    let help: Vec<&str> = std::str::from_utf8(&help.stdout).unwrap().split_whitespace().collect();
    assert!(
        help.join(" ")
            .contains("[default: the job file's name, as `jobs:` and its letters and digits, e.g. jobs:jobsjsonl]"),
        "{}",
        help.join(" ")
    );
    let docs: Vec<&str> = include_str!("../../../../docs/batch.md").split_whitespace().collect();
    let docs = docs.join(" ");
    assert!(
        docs.contains("is named after its job file's name") && docs.contains("`jobs:jobsjsonl` for `jobs.jsonl`"),
        "docs/batch.md"
    );
}

/// A batch stopped with Ctrl-C leaves results.jsonl in line order, with
/// every line there: those saved, those left accepted. The results a killed
/// run left under its own name are removed; those of a run still writing
/// (it holds their lock) are not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_batch_leaves_its_results_in_line_order_and_a_killed_runs_partial_results_are_removed() {
    let mock = mock(HOUR).await;
    let dir = Dir::new("interrupt-results-in-order");
    let lines: Vec<String> = (1..=6)
        .map(|n| {
            // The even lines end at once; the odd ones last an hour.
            let marker = if n % 2 == 0 { " [mock:duration_ms=1]" } else { "" };
            serde_json::json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("ordered {n}{marker}"),
                               "width": 64, "height": 64})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    let shots = dir.join("shots");
    std::fs::create_dir_all(&shots).unwrap();
    let killed = shots.join(".results.jsonl.4242-0.partial");
    std::fs::write(&killed, "{\"line\":1,\"status\":\"saved\"}\n").unwrap();
    let writing = shots.join(".results.jsonl.4243-0.partial");
    let held = std::fs::File::create(&writing).unwrap();
    held.lock().unwrap();

    let journal = shots.join("journal.jsonl");
    let mut terminal = Terminal::spawn({
        let mut command = genapi(&dir, &mock);
        batch(&mut command);
        command
    });
    terminal.wait_until("the even lines saved, the odd ones accepted", PATIENCE, || {
        recorded(&journal, "accepted") == 6 && [2, 4, 6].iter().all(|n| shots.join(format!("img-{n}.jpg")).is_file())
    });
    terminal.ctrl_c();
    let (code, screen) = terminal.finish(PATIENCE);
    assert_eq!(code, Some(130), "{screen}");
    assert!(screen.contains("shots/results.jsonl has every line"), "{screen}");
    let results = std::fs::read_to_string(shots.join("results.jsonl")).unwrap();
    let standing: Vec<(u64, String)> = results
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .map(|line| {
            (
                line["line"].as_u64().unwrap(),
                line["status"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let expected: Vec<(u64, String)> = (1..=6)
        .map(|n| (n, if n % 2 == 0 { "saved" } else { "accepted" }.to_string()))
        .collect();
    assert_eq!(standing, expected, "{results}");
    assert!(!killed.exists(), "a killed run's results are removed");
    assert!(writing.exists(), "a live writer's results are kept");
    drop(held);
}

/// A run stopped (Ctrl-C) while a submission is on the wire and
/// another line's task runs leaves them in results.jsonl as the journal has
/// them, sent and accepted, never as they stood before the run: `unsent`
/// would tell a reader (and the next run in the folder) they cost nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_runs_results_say_what_was_sent_and_accepted() {
    let mock = mock(HOUR).await;
    let dir = Dir::new("interrupt-results-sent");
    let lines = [
        serde_json::json!({"model": "gen-2-pro", "prompt": "one", "width": 64, "height": 64}),
        serde_json::json!({"model": "gen-2-pro", "prompt": "two", "width": 64, "height": 64}),
    ];
    let text: Vec<String> = lines.iter().map(ToString::to_string).collect();
    std::fs::write(dir.join("jobs.jsonl"), text.join("\n") + "\n").unwrap();
    // The first submission to arrive gets no answer before the stop; the
    // other is accepted, and its task runs an hour.
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::Delay(Duration::from_secs(7200))).method("POST"));
    let mut command = genapi(&dir, &mock);
    command.args(["batch", "jobs.jsonl", "--out", "shots", "--max-active", "4"]);
    let run = crate::common::run_until_sent(command, &mock, 2).await;
    assert_eq!(run.status.code(), Some(130), "{}", crate::common::said(&run));
    let results = std::fs::read_to_string(dir.join("shots/results.jsonl")).unwrap();
    let mut standing: Vec<String> = results
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap()["status"].to_string())
        .collect();
    standing.sort();
    assert_eq!(standing, ["\"accepted\"", "\"unanswered\""], "{results}");
}

/// A run killed (SIGKILL, no word said) leaves results.jsonl whole and in
/// line order, as the run last put it in place while it ran: its saved
/// lines, and the lines it had sent as the journal has them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_batch_leaves_its_results_in_line_order() {
    let mock = mock(HOUR).await;
    let dir = Dir::new("killed-results");
    let lines: Vec<String> = (1..=4)
        .map(|n| {
            // The even lines end at once; the odd ones last an hour.
            let marker = if n % 2 == 0 { " [mock:duration_ms=1]" } else { "" };
            serde_json::json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("killed {n}{marker}"),
                               "width": 64, "height": 64})
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    let shots = dir.join("shots");
    let mut command = genapi(&dir, &mock);
    batch(&mut command)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut child = command.spawn().unwrap();
    let standing = || -> Vec<(u64, String)> {
        std::fs::read_to_string(shots.join("results.jsonl"))
            .unwrap_or_default()
            .lines()
            .map(|line| serde_json::from_str::<serde_json::Value>(line).expect("a whole line"))
            .map(|line| {
                (
                    line["line"].as_u64().unwrap(),
                    line["status"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let expected: Vec<(u64, String)> = (1..=4)
        .map(|n| (n, if n % 2 == 0 { "saved" } else { "accepted" }.to_string()))
        .collect();
    let deadline = std::time::Instant::now() + PATIENCE;
    while standing() != expected {
        assert!(
            std::time::Instant::now() < deadline,
            "never put in place: {:?}",
            standing()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(standing(), expected, "left whole, in line order");
}
