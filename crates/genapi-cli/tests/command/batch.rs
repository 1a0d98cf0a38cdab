//! The `genapi batch` command: killed with SIGKILL and run again until it
//! completes, invalid lines, unknown outcomes, refusals kept until asked,
//! and folders it refuses rather than pay twice. (The runner's own
//! behaviour is tested with the library, in genapi-batch.)

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use tokio::time::Instant;

use futures::StreamExt;
use genapi_mock::{Fault, FaultKind, MockService};
use serde_json::{json, Value};

use crate::common;
use common::{created_for, genapi, genapi_alone, posts_by_prompt, roomy_mock, Dir};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

use crate::common::{write_jobs, write_jobs_with_line_1_held};

fn results(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// How many lines the journal has reached: lines with a submission
/// recorded as about to be sent. Unlike its count of records, this reaches
/// every line however many answers the kills lose (a line whose answer was
/// lost keeps one record, not three).
fn lines_started(path: &Path) -> usize {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let started: HashSet<u64> = text
        .lines()
        .filter(|record| record.contains(r#""event":"intent""#))
        // A record the kill cut short is not read.
        .filter_map(|record| serde_json::from_str::<Value>(record).ok()?["line"].as_u64())
        .collect();
    started.len()
}

/// Where a run is killed: once the journal has reached `lines` lines, and
/// the mock has created `held` (the task that keeps the batch from ending),
/// then `delay` later, so that the kill lands at any moment: while
/// submissions are in flight, answers are being recorded, results saved,
/// or nothing happens.
struct KillPoint<'a> {
    lines: usize,
    delay: Duration,
    held: &'a str,
}

/// Runs a batch killed at `point`. The batch cannot end before it: the
/// held task keeps it waiting until the test moves the mock's clock on.
fn run_killed(command: &mut Command, journal: &Path, mock: &MockService, point: &KillPoint) {
    // Nobody reads a run that is to be killed: its output goes nowhere.
    let mut child = command.stdout(Stdio::null()).stderr(Stdio::null()).spawn().unwrap();
    // Only a guard against a hung batch: the kill point never waits on time.
    let give_up = Instant::now() + Duration::from_secs(120);
    let mut fire_at = None;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("the batch ended ({status}) before its kill point, with its held task unfinished");
        }
        let reached =
            || lines_started(journal) >= point.lines && mock.created_tasks().iter().any(|t| t.prompt == point.held);
        if fire_at.is_none() && reached() {
            fire_at = Some(Instant::now() + point.delay);
        }
        if fire_at.is_some_and(|at| Instant::now() >= at) {
            child.kill().unwrap(); // SIGKILL
            let _ = child.wait();
            return;
        }
        assert!(Instant::now() < give_up, "the batch made no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn a_batch_killed_with_sigkill_at_random_points_completes_without_a_lost_or_doubled_task() {
    const LINES: u64 = 200;
    // Line 1 is held for five minutes of the mock's clock, so no killed run
    // can reach the batch's end before its kill, however many lines the
    // kills leave unanswered. (Five minutes leaves every result address
    // given before the clock moves on valid.)
    const HELD: Duration = Duration::from_secs(300);
    let mock = roomy_mock(150).await;
    let dir = Dir::new("crash");
    let held = write_jobs_with_line_1_held(&dir.join("jobs.jsonl"), LINES, "crash test line", HELD);
    let out = dir.join("out");
    let journal = out.join("journal.jsonl");
    // Kill points spread over the whole batch, drawn from a fixed seed.
    let mut rng = fastrand::Rng::with_seed(13);
    let mut lines: Vec<usize> = (0..5).map(|i| 10 + i * 38 + rng.usize(0..30)).collect();
    lines.sort();
    let batch = |extra: &[String]| {
        let mut command = genapi(&dir, &mock);
        command
            .args(["batch", "jobs.jsonl", "--out", "out", "--json"])
            .args(extra);
        command
    };
    for lines in &lines {
        let point = KillPoint {
            lines: *lines,
            delay: Duration::from_millis(rng.u64(0..40)),
            held: &held,
        };
        run_killed(&mut batch(&[]), &journal, &mock, &point);
    }
    // The held task ends; the last run finishes the batch.
    mock.advance(HELD + Duration::from_secs(1));
    let last = batch(&[]).output().unwrap();
    let stderr = text(&last.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");

    // A kill between sending a submission and recording its answer leaves a
    // line whose outcome is unknown: reported, never sent again on its own.
    let unknown: Vec<u64> = results(&out.join("results.jsonl"))
        .iter()
        .filter(|r| r["status"] == "unanswered")
        .map(|r| r["line"].as_u64().unwrap())
        .collect();
    let prompt = |line: u64| {
        if line == 1 {
            held.clone()
        } else {
            format!("crash test line {line}")
        }
    };
    let before = posts_by_prompt(&mock);
    let sent = |posts: &HashMap<String, usize>, line: u64| posts.get(&prompt(line)).copied().unwrap_or(0);
    for line in 1..=LINES {
        // An unknown line was sent once (its answer was lost) or not at all
        // (the kill came between its record and its sending).
        let allowed = if unknown.contains(&line) { 0..=1 } else { 1..=1 };
        assert!(
            allowed.contains(&sent(&before, line)),
            "line {line}: {} submissions",
            sent(&before, line)
        );
    }

    // What a user does with them: look each up in the service's records;
    // adopt the tasks found, submit the rest again.
    let mut recover = Vec::new();
    if unknown.is_empty() {
        assert_eq!(last.status.code(), Some(0), "{stderr}");
    } else {
        assert_eq!(last.status.code(), Some(9), "{stderr}");
        assert!(
            stderr.contains("--adopt") && stderr.contains("--resubmit-unknown"),
            "{stderr}"
        );
        let created = mock.created_tasks();
        for line in &unknown {
            if let Some(task) = created.iter().find(|t| t.prompt == prompt(*line)) {
                recover.push(format!("--adopt={line}={}", task.id));
            }
        }
        recover.push("--resubmit-unknown".into());
        let again = batch(&recover).output().unwrap();
        assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    }
    // Exactly one accepted submission per line, by the mock's own counters.
    let after = posts_by_prompt(&mock);
    for line in 1..=LINES {
        assert_eq!(sent(&after, line), 1, "line {line}");
    }
    assert_eq!(mock.stats().submissions.get("/v1/gen-2-pro"), Some(&LINES));
    eprintln!(
        "kills: {}; unknown lines: {unknown:?}; adopted: {}",
        lines.len(),
        recover.len().saturating_sub(1)
    );
    let lines = results(&out.join("results.jsonl"));
    assert_eq!(lines.len(), LINES as usize);
    let client = mock.client().unwrap();
    let checks = lines.iter().map(|line| {
        let client = client.clone();
        let out = out.clone();
        async move {
            assert_eq!(line["status"], "saved", "{line}");
            let n = line["line"].as_u64().unwrap();
            let file = out.join(format!("img-{n}.jpg"));
            let saved = std::fs::read(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            // The file is the task's own result: fetch it again from its task.
            let task = client.task(line["polling_url"].as_str().unwrap()).unwrap();
            let fetched = task.wait().await.unwrap().bytes().await.unwrap();
            assert_eq!(saved, fetched.to_vec(), "line {n}");
        }
    });
    futures::stream::iter(checks)
        .buffer_unordered(16)
        .collect::<Vec<()>>()
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_over_the_same_output_directory_is_refused_while_the_first_runs() {
    let mock = roomy_mock(100).await;
    let dir = Dir::new("locked");
    write_jobs(&dir.join("jobs.jsonl"), 2, "locked");
    std::fs::create_dir_all(dir.join("out")).unwrap();
    // Another run holds the journal (here: this process).
    let held = genapi_batch::FileJournal::open(dir.join("out").join("journal.jsonl")).unwrap();
    let second = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(2), "{}", text(&second.stderr));
    assert!(
        text(&second.stderr).contains("in use by another run"),
        "{}",
        text(&second.stderr)
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing was sent");
    drop(held);
    let after = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(after.status.code(), Some(0), "{}", text(&after.stderr));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_of_many_invalid_lines_lists_the_first_and_counts_the_rest() {
    let mock = roomy_mock(100).await;
    let dir = Dir::new("cli-many-invalid");
    let kept = genapi_batch::INVALID_LINES_KEPT;
    std::fs::write(dir.join("jobs.jsonl"), "{\"model\":\"x\"}\n".repeat(kept + 2)).unwrap();
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("2 more invalid lines (only the first {kept} are listed)")),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!("{} of {} lines are invalid", kept + 2, kept + 2)),
        "{stderr}"
    );
    assert_eq!(stderr.matches("unknown model").count(), kept);

    // A missing file is not a file too large: no hint to split it.
    let run = genapi(&dir, &mock)
        .args(["batch", "absent.jsonl", "--out", "out"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("absent.jsonl") && !stderr.contains("split"), "{stderr}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);
}

#[test]
fn a_journal_in_a_directory_that_does_not_exist_names_the_path() {
    let dir = Dir::new("journal-no-dir");
    let error = genapi_batch::FileJournal::open(dir.join("missing/journal.jsonl")).unwrap_err();
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    let said = error.to_string();
    assert!(
        said.contains("missing/journal.jsonl") && said.contains("its directory must exist"),
        "{said}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_lines_are_all_reported_and_nothing_is_sent() {
    let mock = roomy_mock(100).await;
    let dir = Dir::new("invalid");
    let jobs = [
        json!({"model": "gen-2-pro", "prompt": "fine"}).to_string(),
        json!({"model": "gen-2-prp", "prompt": "typo"}).to_string(),
        "not json".to_string(),
        json!({"model": "gen-2-pro", "prompt": "small", "width": 3}).to_string(),
        json!({"model": "gen-2-pro", "name": "../up", "prompt": "x"}).to_string(),
        json!({"model": "gen-2-pro", "promt": "x"}).to_string(),
        json!({"model": "gen-2-pro", "input_image": "missing.png", "prompt": "x"}).to_string(),
    ];
    std::fs::write(dir.join("jobs.jsonl"), jobs.join("\n")).unwrap();
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    for expected in [
        "line 2: unknown model",
        "did you mean gen-2-pro",
        "line 3: not a job line",
        "line 4: width",
        "line 5: name",
        "line 6: gen-2-pro has no field \"promt\"; did you mean prompt",
        "line 7: input_image: cannot read",
        "6 of 7 lines are invalid; nothing was submitted",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in\n{stderr}");
    }
    // Every error the command says starts one way.
    for line in stderr.lines().filter(|line| line.contains(": line ")) {
        assert!(line.starts_with("error: jobs.jsonl: line "), "{line}");
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);

    // --skip-invalid sends the valid line; every line is in results.jsonl.
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--skip-invalid", "--json"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    assert!(
        text(&run.stderr).contains("warning: jobs.jsonl: line 2: unknown model"),
        "a skipped line is a warning: {}",
        text(&run.stderr)
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);
    let mut printed: Vec<Value> = text(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // Printed as they come; the file is in line order.
    printed.sort_by_key(|r| r["line"].as_u64());
    assert_eq!(printed, results(&dir.join("out/results.jsonl")));
    assert_eq!(printed.len(), 7);
    let fine = printed.iter().find(|r| r["line"] == 1).unwrap();
    assert_eq!(fine["status"], "saved");
    assert!(dir.join("out/line-1.jpg").is_file());
    assert!(text(&run.stderr).contains("1 saved"), "{}", text(&run.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn the_command_reports_an_unknown_outcome_with_what_to_do_and_survives_closed_pipes() {
    let mock = roomy_mock(100).await;
    let dir = Dir::new("cli-unknown");
    write_jobs(&dir.join("jobs.jsonl"), 3, "cli unknown");
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--json", "--limit", "1"])
        .stdout(Stdio::from(writer))
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    // The results did not reach stdout: that decides the exit code, as for
    // `genapi submit`; the unknown line is reported all the same.
    assert_eq!(run.status.code(), Some(10), "{stderr}");
    assert!(stderr.contains("could not be written to stdout"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.contains("line 1 was sent without an answer"), "{stderr}");
    assert!(stderr.contains("--resubmit-unknown"), "{stderr}");
    // The line's own report names the command's flags, not the library's calls.
    let results = std::fs::read_to_string(dir.join("out/results.jsonl")).unwrap();
    let unknown: Value = serde_json::from_str(results.lines().find(|l| l.contains("\"unknown\"")).unwrap()).unwrap();
    let error = unknown["error"].as_str().unwrap();
    assert!(
        error.ends_with("(genapi batch: --adopt 1=TASK_ID, or --resubmit-unknown)"),
        "{error}"
    );
    let again = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(9), "{}", text(&again.stderr));
    assert!(
        text(&again.stdout).contains("2 saved (2 before this run or by another worker)"),
        "{}",
        text(&again.stdout)
    );
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        3,
        "the unknown line was not sent again"
    );

    // Its task, found in the service's records, is adopted and fetched.
    let bad = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt", "1"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(text(&bad.stderr).contains("LINE=TASK"), "{}", text(&bad.stderr));
    let mistyped = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt", "1=no-such-task"])
        .output()
        .unwrap();
    assert_eq!(mistyped.status.code(), Some(2));
    assert!(
        text(&mistyped.stderr).contains("does not know task no-such-task"),
        "{}",
        text(&mistyped.stderr)
    );
    let lost = created_for(&mock, "cli unknown 1");
    let adopted = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt"])
        .arg(format!("1={}", lost.id))
        .output()
        .unwrap();
    assert_eq!(adopted.status.code(), Some(0), "{}", text(&adopted.stderr));
    assert!(text(&adopted.stdout).contains("3 saved"), "{}", text(&adopted.stdout));
    assert!(dir.join("out").join("img-1.jpg").is_file());
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3, "adopting sends nothing");
    assert_eq!(mock.stats().submissions.get("/v1/gen-2-pro"), Some(&3));
    // The same command again: nothing to do, nothing refused.
    let repeated = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt"])
        .arg(format!("1={}", lost.id))
        .output()
        .unwrap();
    assert_eq!(repeated.status.code(), Some(0), "{}", text(&repeated.stderr));
    let absent = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--adopt", "7=abc"])
        .output()
        .unwrap();
    assert_eq!(absent.status.code(), Some(2));
    assert!(
        text(&absent.stderr).contains("has no valid line 7"),
        "{}",
        text(&absent.stderr)
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 3);
}

#[test]
fn the_job_line_schema_is_printed() {
    let run = Command::new(env!("CARGO_BIN_EXE_genapi"))
        .args(["batch", "--schema"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0));
    let schema: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert_eq!(schema["required"], json!(["model"]));
    assert_eq!(schema["properties"]["name"]["pattern"], "^[A-Za-z0-9_-]{1,100}$");
    assert_eq!(schema["additionalProperties"], true);
}

/// A standalone `genapi mock` process, killed when dropped.
struct StandaloneMock {
    child: std::process::Child,
    base_url: String,
    key: String,
    /// The origins it prints for `GENAPI_TRUSTED_ORIGINS` (its polling host).
    trusted: String,
}

impl StandaloneMock {
    fn start(duration_ms: u64) -> StandaloneMock {
        use std::io::BufRead;
        let mut child = Command::new(env!("CARGO_BIN_EXE_genapi"))
            .args(["mock", "--duration-ms", &duration_ms.to_string()])
            .env_remove("GENAPI_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut variables = HashMap::new();
        for line in std::io::BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if line.starts_with("# genapi mock ready") {
                break;
            }
            if let Some((name, value)) = common::mock_variable(&line) {
                variables.insert(name, value);
            }
        }
        StandaloneMock {
            child,
            base_url: variables["GENAPI_BASE_URL"].clone(),
            key: variables["GENAPI_API_KEY"].clone(),
            trusted: variables["GENAPI_TRUSTED_ORIGINS"].clone(),
        }
    }

    /// POSTs a control request over plain HTTP/1.1 (with the key, which
    /// control routes may require) and checks it succeeded.
    fn control(&self, path: &str, body: Value) {
        use std::io::{Read, Write};
        let address = self.base_url.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        let body = body.to_string();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: {address}\r\nx-key: {}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.key,
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{path}: {answer}");
    }

    fn command(&self, dir: &Dir) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_genapi"));
        for name in [
            "GENAPI_REGIONAL_BASE_URL",
            "GENAPI_TRUSTED_ORIGINS",
            "GENAPI_LOG",
            "GENAPI_DOCUMENT",
        ] {
            command.env_remove(name);
        }
        command
            .env("GENAPI_BASE_URL", &self.base_url)
            .env("GENAPI_API_KEY", &self.key)
            .env("GENAPI_TRUSTED_ORIGINS", &self.trusted)
            .env("XDG_CACHE_HOME", dir.0.join("cache"))
            .env("XDG_CONFIG_HOME", dir.0.join("config"))
            .current_dir(&dir.0)
            .stdin(Stdio::null());
        command
    }
}

impl Drop for StandaloneMock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_command_fetches_expired_results_again_from_the_same_tasks_on_a_standalone_mock() {
    let mock = StandaloneMock::start(100);
    let dir = Dir::new("standalone-expiry");
    write_jobs(&dir.join("jobs.jsonl"), 3, "standalone expiry");
    // Every download of the first run is refused: each result address, then
    // the fresh one a poll gives (two refusals per line, never retried).
    mock.control(
        "/mock/faults",
        json!({"path_prefix": "/mock/results/", "status": 403, "times": 6}),
    );
    let first = mock
        .command(&dir)
        .args(["batch", "jobs.jsonl", "--out", "out", "--json"])
        .output()
        .unwrap();
    assert_ne!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let pending: Vec<Value> = text(&first.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(pending.len(), 3);
    assert!(pending.iter().all(|r| r["status"] == "accepted"), "{pending:#?}");
    assert!(!dir.join("out/results.jsonl").exists() || results(&dir.join("out/results.jsonl")).len() == 3);

    // Past the addresses' validity: the next run polls the same tasks for
    // fresh addresses and submits nothing.
    mock.control("/mock/clock/advance", json!({"seconds": 601}));
    let second = mock
        .command(&dir)
        .args(["batch", "jobs.jsonl", "--out", "out", "--json"])
        .output()
        .unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    let done = results(&dir.join("out/results.jsonl"));
    assert_eq!(done.len(), 3);
    let ids = |lines: &[Value]| -> HashMap<u64, String> {
        lines
            .iter()
            .map(|r| (r["line"].as_u64().unwrap(), r["task_id"].as_str().unwrap().to_string()))
            .collect()
    };
    assert_eq!(ids(&pending), ids(&done), "the same tasks: nothing submitted again");
    for line in &done {
        assert_eq!(line["status"], "saved");
        let file = dir.0.join(line["file"].as_str().unwrap());
        assert_eq!(crate::common::dimensions(&std::fs::read(file).unwrap()), Some((64, 64)));
    }
    let journal = std::fs::read_to_string(dir.join("out/journal.jsonl")).unwrap();
    assert_eq!(journal.matches(r#""event":"intent""#).count(), 3, "{journal}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_with_130_and_the_same_command_finishes_the_batch() {
    // Tasks of an hour, all thirty accepted at once: the interrupt surely
    // comes before the batch ends; the mock clock is moved past them before
    // the same command runs again.
    let mock = roomy_mock(3_600_000).await;
    let dir = Dir::new("interrupt");
    write_jobs(&dir.join("jobs.jsonl"), 30, "interrupt");
    let journal = dir.join("out/journal.jsonl");
    let child = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--max-active", "30"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let give_up = Instant::now() + Duration::from_secs(30);
    let accepted = || {
        std::fs::read_to_string(&journal)
            .map(|text| text.matches(r#""event":"accepted""#).count())
            .unwrap_or(0)
    };
    while accepted() < 30 {
        assert!(Instant::now() < give_up, "the batch made no progress");
        std::thread::sleep(Duration::from_millis(2));
    }
    // SAFETY: signals our own child process.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    let stopped = child.wait_with_output().unwrap();
    let stderr = text(&stopped.stderr);
    assert_eq!(stopped.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("run the same command again to resume"), "{stderr}");
    // The stopped run's results are there, in line order, every line.
    let stopped_results = results(&dir.join("out/results.jsonl"));
    let numbers: Vec<u64> = stopped_results.iter().map(|r| r["line"].as_u64().unwrap()).collect();
    let mut in_order = numbers.clone();
    in_order.sort_unstable();
    assert_eq!(numbers, in_order, "in line order");
    assert_eq!(numbers.len(), 30, "every line");
    mock.advance(Duration::from_secs(3601));
    let finished = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(finished.status.code(), Some(0), "{}", text(&finished.stderr));
    assert_eq!(results(&dir.join("out/results.jsonl")).len(), 30);
    let posts = posts_by_prompt(&mock);
    assert_eq!(posts.len(), 30);
    assert!(posts.values().all(|n| *n == 1), "{posts:?}");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_planted_where_the_command_writes_temporary_files_are_never_followed() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("planted-links");
    write_jobs(&dir.join("jobs.jsonl"), 2, "planted");
    let out = dir.join("out");
    let cache = dir.join("cache").join("genapi");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::create_dir_all(&cache).unwrap();
    // Where results.jsonl, an image and the learned durations are written
    // before they are renamed into place: links to files of someone else's,
    // and one to a file that does not exist yet.
    let victims: Vec<_> = ["results", "image", "durations"]
        .iter()
        .map(|name| dir.join(&format!("victim-{name}.txt")))
        .collect();
    for victim in &victims {
        std::fs::write(victim, b"not yours").unwrap();
    }
    let elsewhere = dir.join("created-elsewhere.txt");
    for (link, target) in [
        (out.join(".results.jsonl.partial"), &victims[0]),
        (out.join(".img-1.partial"), &victims[1]),
        (cache.join("learned.json.partial"), &victims[2]),
        (out.join(".img-2.partial"), &elsewhere),
    ] {
        std::os::unix::fs::symlink(target, link).unwrap();
    }
    let run = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    for victim in &victims {
        let kept = std::fs::read(victim).unwrap() == b"not yours";
        assert!(kept, "{} was written through a link", victim.display());
    }
    assert!(!elsewhere.exists(), "nothing is created through a link");
    for n in 1..=2 {
        let image = std::fs::read(out.join(format!("img-{n}.jpg"))).unwrap();
        assert_eq!(crate::common::dimensions(&image), Some((64, 64)));
    }
    assert_eq!(results(&out.join("results.jsonl")).len(), 2);
    let learned = std::fs::read_to_string(cache.join("learned.json")).unwrap();
    assert!(serde_json::from_str::<Value>(&learned).is_ok(), "{learned}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_file_the_batch_did_not_write_is_left_as_it_was_and_refused() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("foreign-journal");
    write_jobs(&dir.join("jobs.jsonl"), 2, "foreign journal");
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let journal = dir.join("out/journal.jsonl");
    // Someone's own file, its last line without a newline.
    let mine = "{\"note\":\"my own log\"}\n{\"note\":\"its last line\"}";
    std::fs::write(&journal, mine).unwrap();
    let batch = || {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out"])
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let run = batch();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        for expected in [
            "is not a journal of a batch",
            "left as it is",
            "move it elsewhere",
            "nothing was sent",
        ] {
            assert!(stderr.contains(expected), "{expected:?} in {stderr}");
        }
        assert_eq!(
            std::fs::read_to_string(&journal).unwrap(),
            mine,
            "left exactly as it was"
        );
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);
    // Moved away, it makes room for the batch's own, which the next run reads.
    std::fs::rename(&journal, dir.join("mine.jsonl")).unwrap();
    for _ in 0..2 {
        let run = batch();
        assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    }
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        2,
        "the second run found its tasks in the journal"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_directory_whose_journal_lost_its_records_is_refused_not_paid_again() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("lost-journal");
    write_jobs(&dir.join("jobs.jsonl"), 2, "lost journal");
    let out = dir.join("out");
    let batch = || {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out"])
            .output()
            .unwrap()
    };
    let first = batch();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let images: Vec<Vec<u8>> = (1..=2)
        .map(|n| std::fs::read(out.join(format!("img-{n}.jpg"))).unwrap())
        .collect();
    let unchanged = || {
        for (n, image) in (1..=2).zip(&images) {
            assert_eq!(&std::fs::read(out.join(format!("img-{n}.jpg"))).unwrap(), image);
        }
    };
    // The journal loses line 2's records: results.jsonl still names its
    // task.
    let journal = std::fs::read_to_string(out.join("journal.jsonl")).unwrap();
    let kept: String = journal
        .lines()
        .filter(|record| !record.contains(r#""line":2,"#))
        .map(|record| format!("{record}\n"))
        .collect();
    assert_ne!(kept, journal, "line 2 had records");
    std::fs::write(out.join("journal.jsonl"), kept).unwrap();
    let refused = batch();
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr
            .contains("results.jsonl says line 2 of an earlier run was sent, but journal.jsonl holds no record of it"),
        "{stderr}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing paid again");
    // --status says what the run does, not "not sent" of line 2.
    let status = genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out", "--status"])
        .output()
        .unwrap();
    let said = format!("{}{}", text(&status.stdout), text(&status.stderr));
    assert_eq!(status.status.code(), Some(2), "{said}");
    assert!(
        said.contains("line 2 of an earlier run was sent") && !said.contains("not sent"),
        "{said}"
    );
    // The journal is emptied: results.jsonl still names the tasks.
    std::fs::write(out.join("journal.jsonl"), "").unwrap();
    let refused = batch();
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    for expected in [
        "results.jsonl says lines 1-2 (2) of an earlier run were sent",
        "holds no record",
        "restore journal.jsonl",
        "nothing was sent",
    ] {
        assert!(stderr.contains(expected), "{expected:?} in {stderr}");
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing paid again");
    unchanged();
    // Without results.jsonl, the saved images say so, line by line.
    std::fs::rename(out.join("results.jsonl"), dir.join("old-results.jsonl")).unwrap();
    let refused = batch();
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("img-1.jpg is already in the output directory")
            && stderr.contains("journal holds no task of line 1")
            && stderr.contains("restore them"),
        "{stderr}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing paid again");
    unchanged();
    // With the results moved away too, it starts over.
    for n in 1..=2 {
        std::fs::remove_file(out.join(format!("img-{n}.jpg"))).unwrap();
    }
    let fresh = batch();
    assert_eq!(fresh.status.code(), Some(0), "{}", text(&fresh.stderr));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_counts_as_already_done_only_the_lines_that_succeeded() {
    let mock = roomy_mock(100).await;
    let dir = Dir::new("batch-already-done");
    let line = |name: &str, prompt: &str| {
        json!({"model": "gen-2-pro", "name": name, "prompt": prompt, "width": 64, "height": 64}).to_string()
    };
    std::fs::write(
        dir.join("jobs.jsonl"),
        format!(
            "{}\n{}\n",
            line("fine", "a calm sea"),
            line("broken", "a calm sea [mock:error]")
        ),
    )
    .unwrap();
    let run = || {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out"])
            .output()
            .unwrap()
    };
    assert_eq!(run().status.code(), Some(7));
    let again = run();
    let said = text(&again.stdout);
    assert!(
        said.contains("1 saved (1 before this run or by another worker), 1 ended"),
        "{said}"
    );
}

/// A journal damaged in its middle (not a torn last line) is the user's to
/// look at: the run exits 2, as `--status` does, and sends nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_damaged_in_its_middle_refuses_the_run_as_status_does() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("damaged-journal");
    write_jobs(&dir.join("jobs.jsonl"), 2, "damaged journal");
    let batch = |extra: &[&str]| {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out"])
            .args(extra)
            .output()
            .unwrap()
    };
    let first = batch(&[]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let path = dir.join("out/journal.jsonl");
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    lines.insert(2, "{\"event\":nonsense}".into());
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let sent = mock.count("POST", "/v1/gen-2-pro");
    for extra in [&[][..], &["--status"][..]] {
        let refused = batch(extra);
        assert_eq!(refused.status.code(), Some(2), "{extra:?}: {}", text(&refused.stderr));
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), sent, "nothing was sent");
}

/// `--status` only reads: a job file with an invalid line is not refused,
/// and the invalid line is counted as what it is.
#[test]
fn status_reads_a_job_file_with_an_invalid_line_and_counts_it() {
    let dir = Dir::new("status-invalid");
    crate::common::write_jobs(&dir.join("jobs.jsonl"), 2, "status");
    let mut text = std::fs::read_to_string(dir.join("jobs.jsonl")).unwrap();
    text.push_str("{\"model\": \"gen-2-pro\", \"prompt\": \"a fox\", \"width\": 5}\n");
    std::fs::write(dir.join("jobs.jsonl"), text).unwrap();
    let status = genapi_alone(&dir)
        .args(["batch", "jobs.jsonl", "--out", "shots", "--status", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        status.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&status.stderr)
    );
    let view: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(
        (&view["lines"]["unsent"], &view["lines"]["invalid"]),
        (&json!(2), &json!(1)),
        "{view}"
    );
    assert!(!dir.join("shots").exists(), "--status created nothing");
}

/// A journal cut down to some of its records (here, line 3's alone) lost
/// lines 1 and 2, one of them sent without an answer (no task named
/// anywhere): results.jsonl says both were sent, so the run is refused
/// instead of paying for them again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_journal_that_lost_some_lines_records_is_refused_for_them_not_paid_again() {
    let mock = roomy_mock(50).await;
    mock.inject(Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer).method("POST"));
    let dir = Dir::new("lost-some-records");
    write_jobs(&dir.join("jobs.jsonl"), 3, "cut journal");
    let batch = || {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out", "--max-active", "1"])
            .output()
            .unwrap()
    };
    let first = batch();
    assert_eq!(
        first.status.code(),
        Some(9),
        "line 1 unanswered: {}",
        text(&first.stderr)
    );
    let journal = dir.join("out/journal.jsonl");
    let kept: Vec<String> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .enumerate()
        .filter(|(index, line)| *index == 0 || line.contains("\"line\":3"))
        .map(|(_, line)| line.to_string())
        .collect();
    std::fs::write(&journal, kept.join("\n") + "\n").unwrap();
    let posts = mock.count("POST", "/v1/gen-2-pro");
    let refused = batch();
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("says lines 1-2 (2) of an earlier run were sent"),
        "{stderr}"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), posts, "nothing paid again");
}

/// `-o -` means standard output to the other commands: a batch, which
/// writes a folder, refuses it rather than make a folder named `-`.
#[test]
fn a_batch_into_standard_output_is_refused_before_anything_is_made() {
    let dir = Dir::new("batch-out-dash");
    write_jobs(&dir.join("jobs.jsonl"), 1, "dash");
    let run = genapi_alone(&dir)
        .args(["batch", "jobs.jsonl", "-o", "-"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--json prints the results"), "{stderr}");
    assert!(!dir.join("-").exists(), "no folder named -");
    // A file or a device is no folder, and is said to be none.
    std::fs::write(dir.join("shot.jpg"), b"mine").unwrap();
    for name in ["shot.jpg", "/dev/null"] {
        let run = genapi_alone(&dir)
            .args(["batch", "jobs.jsonl", "-o", name])
            .output()
            .unwrap();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(&format!("--out {name}: not a folder")), "{stderr}");
    }
    assert_eq!(std::fs::read(dir.join("shot.jpg")).unwrap(), b"mine");
}

/// A line whose journal record cannot be read (after a refusal, it may be
/// any job's paid intent) is not sent with `--resubmit-unknown`, and its
/// report names the one flag that recovers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreadable_record_is_said_with_the_one_flag_that_recovers_it() {
    let mock = roomy_mock(100).await;
    let dir = Dir::new("cli-unreadable");
    write_jobs(&dir.join("jobs.jsonl"), 1, "cli unreadable");
    let run = |flag: &str| {
        genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out", flag])
            .output()
            .unwrap()
    };
    mock.inject(Fault::status("/v1/gen-2-pro", 402).method("POST").times(1));
    assert_eq!(run("--quiet").status.code(), Some(4));
    mock.inject(
        Fault::on("/v1/gen-2-pro", FaultKind::LoseAnswer)
            .method("POST")
            .times(1),
    );
    run("--retry-refused");
    let journal = dir.join("out/journal.jsonl");
    let text_of_journal = std::fs::read_to_string(&journal).unwrap();
    let last = text_of_journal.rfind("\"digest\":").unwrap();
    let damaged = format!(
        "{}\"digest\" {}",
        &text_of_journal[..last],
        &text_of_journal[last + "\"digest\":".len()..]
    );
    std::fs::write(&journal, damaged).unwrap();

    let asked = run("--resubmit-unknown");
    let stderr = text(&asked.stderr);
    let said = text(&asked.stdout);
    assert!(
        said.contains("the journal's record of line 1 cannot be read"),
        "{said}\n{stderr}"
    );
    assert!(!said.contains("run again with --resubmit-unknown"), "{said}");
    let error = results(&dir.join("out/results.jsonl"))[0]["error"].clone();
    let error = error.as_str().unwrap_or_default();
    assert!(error.ends_with("(genapi batch: --adopt 1=TASK_ID)"), "{error}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "nothing sent again");
}
