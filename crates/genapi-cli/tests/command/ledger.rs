//! Many workers, one account: a batch, its active-task seats and its credit
//! cap shared through a real PostgreSQL (a throwaway cluster per test).

use std::collections::HashMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common;
use common::pg::Postgres;
use common::{genapi, posts_by_prompt, Dir};

/// The service as the tests meet it: 24 active tasks per key (its default),
/// every request logged.
async fn service(duration: Duration, price_per_mp: f64) -> MockService {
    let config = MockConfig::default()
        .default_duration(duration)
        .price_per_mp(price_per_mp)
        .request_log_capacity(100_000);
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

fn write_jobs(path: &Path, count: u64, tag: &str, side: u32) {
    let lines: Vec<String> = (1..=count)
        .map(|n| {
            json!({"model": "gen-2-pro", "name": format!("img-{n}"), "prompt": format!("{tag} {n}"),
                   "width": side, "height": side})
            .to_string()
        })
        .collect();
    std::fs::write(path, lines.join("\n") + "\n").unwrap();
}

fn worker(dir: &Dir, mock: &MockService, pg: &Postgres, extra: &[&str]) -> Command {
    let mut command = genapi(dir, mock);
    command
        .args(["batch", "jobs.jsonl", "--out", "out", "--json", "--ledger"])
        .arg(pg.url())
        .args(["--ledger-lease", "2"])
        .args(extra)
        // Kept in memory, shown only when a test fails: what each worker did.
        .env("GENAPI_LOG", "genapi=info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// A worker whose output is read as it comes. Read only once the worker
/// ends, a pipe fills (64 KiB: a few hundred JSON lines or log lines), the
/// worker stops at its next write holding its lines' leases and seats, and
/// every other worker waits for them.
struct Running {
    child: Child,
    stdout: JoinHandle<Vec<u8>>,
    stderr: JoinHandle<Vec<u8>>,
}

impl Running {
    fn start(mut command: Command) -> Running {
        let mut child = command.spawn().unwrap();
        let stdout = drain(child.stdout.take().unwrap());
        let stderr = drain(child.stderr.take().unwrap());
        Running { child, stdout, stderr }
    }

    fn kill(mut self) {
        self.child.kill().unwrap();
        let _ = self.child.wait();
    }

    /// Waits for the worker to end (blocking).
    fn finish(mut self) -> Output {
        let status = self.child.wait().unwrap();
        Output {
            status,
            stdout: self.stdout.join().unwrap(),
            stderr: self.stderr.join().unwrap(),
        }
    }
}

/// Reads `pipe` to its end on a thread of its own.
fn drain(mut pipe: impl std::io::Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = pipe.read_to_end(&mut all);
        all
    })
}

/// Waits for every worker to end, off the runtime's threads (the mock is
/// served on them).
async fn finish_all(workers: Vec<Running>) -> Vec<Output> {
    tokio::task::spawn_blocking(move || workers.into_iter().map(Running::finish).collect())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The last outcome reported for each line, over every worker's output.
fn outcomes(outputs: &[Output]) -> HashMap<u64, Value> {
    let mut lines = HashMap::new();
    for output in outputs {
        for line in text(&output.stdout).lines() {
            if let Ok(value) = serde_json::from_str::<Value>(line) {
                if let Some(number) = value["line"].as_u64() {
                    lines.insert(number, value);
                }
            }
        }
    }
    lines
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_workers_two_killed_and_restarted_finish_every_line_once_without_a_429() {
    const LINES: u64 = 240;
    let Some(pg) = Postgres::start("four-workers") else {
        return;
    };
    let task_time = Duration::from_secs(2);
    let mock = service(task_time, 1.5).await;
    let dir = Dir::new("ledger-workers");
    write_jobs(&dir.join("jobs.jsonl"), LINES, "shared line", 64);
    let started = std::time::Instant::now();
    let mut children: Vec<Running> = (0..4).map(|_| Running::start(worker(&dir, &mock, &pg, &[]))).collect();
    // Two of them die by SIGKILL at points drawn from a fixed seed, and are
    // started again.
    let mut rng = fastrand::Rng::with_seed(21);
    let mut outputs = Vec::new();
    for victim in [1_usize, 3] {
        let after = Duration::from_millis(rng.u64(1_000..6_000));
        tokio::time::sleep(after).await;
        children.remove(victim).kill();
        children.insert(victim, Running::start(worker(&dir, &mock, &pg, &[])));
    }
    outputs.extend(finish_all(children).await);
    let elapsed = started.elapsed();
    for output in &outputs {
        assert!(!text(&output.stderr).contains("panicked"), "{}", text(&output.stderr));
    }
    // A kill between a submission and its answer leaves it unknown: as with
    // the journal, the user adopts what the service created and resubmits
    // the rest.
    let reported = outcomes(&outputs);
    let unknown: Vec<u64> = reported
        .values()
        .filter(|o| o["status"] == "unanswered")
        .filter_map(|o| o["line"].as_u64())
        .collect();
    if !unknown.is_empty() {
        let created = mock.created_tasks();
        let mut recover: Vec<String> = unknown
            .iter()
            .filter_map(|line| {
                let prompt = format!("shared line {line}");
                created
                    .iter()
                    .find(|t| t.prompt == prompt)
                    .map(|t| format!("--adopt={line}={}", t.id))
            })
            .collect();
        recover.push("--resubmit-unknown".into());
        let extra: Vec<&str> = recover.iter().map(String::as_str).collect();
        let again = worker(&dir, &mock, &pg, &extra).output().unwrap();
        assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
        outputs.push(again);
    }
    // Counted at the service: every line created exactly once, none unsent.
    let posts = posts_by_prompt(&mock);
    for line in 1..=LINES {
        assert_eq!(posts.get(&format!("shared line {line}")), Some(&1), "line {line}");
    }
    let stats = mock.stats();
    assert_eq!(
        stats.too_many_requests, 0,
        "no 429 from a service allowing 24 active tasks"
    );
    assert!(stats.peak_active_tasks <= 24, "peak {}", stats.peak_active_tasks);
    let reported = outcomes(&outputs);
    assert_eq!(reported.len(), LINES as usize);
    assert!(reported.values().all(|o| o["status"] == "saved"), "{reported:?}");
    // The 24-slot ideal: 240 two-second tasks, 24 at a time.
    let ideal = task_time * (LINES as u32).div_ceil(24);
    eprintln!(
        "240 lines, 4 workers (2 killed and restarted): {:.1} s, ideal {:.1} s; unknown {unknown:?}; peak active {}",
        elapsed.as_secs_f64(),
        ideal.as_secs_f64(),
        stats.peak_active_tasks
    );
    // How close to the ideal the workers come is a figure for the ledger
    // bench (`benches/ledger.rs`), not a pass mark: a wall-clock bound would
    // fail on a slower machine with nothing wrong.
}

/// For a failure message: every outcome other than `saved` that any
/// worker reported (a line may be reported by more than one), and the end
/// of each worker's log.
fn what_each_worker_said(outputs: &[Output]) -> String {
    let mut said = String::new();
    for (worker, output) in outputs.iter().enumerate() {
        for line in text(&output.stdout).lines() {
            if serde_json::from_str::<Value>(line).is_ok_and(|o| o["line"].is_u64() && o["status"] != "saved") {
                said.push_str(&format!("worker {worker} reported: {line}\n"));
            }
        }
    }
    for (worker, output) in outputs.iter().enumerate() {
        let log = text(&output.stderr);
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(60)..];
        said.push_str(&format!(
            "--- worker {worker}, last {} log lines:\n{}\n",
            tail.len(),
            tail.join("\n")
        ));
    }
    said
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_under_a_cap_of_60_credits_at_3_a_task_spend_48_to_60() {
    let Some(pg) = Postgres::start("credit-cap") else {
        return;
    };
    // 256 x 256 is 0.07 MP as the service rounds it: 3 credits a task.
    let mock = service(Duration::from_millis(300), 300.0 / 7.0).await;
    mock.set_credits(Some(1_000.0));
    let dir = Dir::new("ledger-cap");
    write_jobs(&dir.join("jobs.jsonl"), 40, "capped line", 256);
    let children: Vec<Running> = (0..3)
        .map(|_| Running::start(worker(&dir, &mock, &pg, &["--max-credits", "60"])))
        .collect();
    let outputs = finish_all(children).await;
    let charged = 1_000.0 - mock.credits().unwrap();
    let created = mock.created_tasks().len();
    eprintln!("charged {charged} credits for {created} tasks");
    assert!((48.0..=60.0).contains(&charged), "charged {charged}");
    for output in &outputs {
        assert_eq!(
            output.status.code(),
            Some(11),
            "the credit cap's own exit code: {}",
            text(&output.stderr)
        );
    }
    let reported = outcomes(&outputs);
    let at_cap = reported.values().filter(|o| o["class"] == "credit_cap").count();
    assert_eq!(at_cap, 40 - created, "every line not sent says why");
    // One view of the whole batch.
    let status = worker(&dir, &mock, &pg, &["--status"]).output().unwrap();
    assert_eq!(status.status.code(), Some(0), "{}", text(&status.stderr));
    let view: Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(view["lines"]["saved"], created as u64);
    assert_eq!(view["credits_charged"].as_f64(), Some(charged));
    assert_eq!(view["lines"]["unsent"], 40 - created as u64);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_workers_under_a_cap_stay_under_it_when_input_images_change_the_price() {
    let Some(pg) = Postgres::start("credit-cap-mixed") else {
        return;
    };
    // At 1.5 credits per megapixel: 0.1 a line without input, 0.5 with a
    // 512 x 512 input and 0.72 with a 640 x 640 one; the size is the same.
    let mock = service(Duration::from_millis(300), 1.5).await;
    mock.set_credits(Some(1_000.0));
    let dir = Dir::new("ledger-cap-mixed");
    std::fs::write(dir.join("in-512.png"), square_png(512)).unwrap();
    std::fs::write(dir.join("in-640.png"), square_png(640)).unwrap();
    let lines: Vec<String> = (1..=24)
        .map(|n| {
            let mut line = json!({"model": "gen-2-pro", "name": format!("img-{n}"),
                                  "prompt": format!("mixed line {n}"), "width": 256, "height": 256});
            match n % 4 {
                2 | 3 => line["input_image"] = json!("in-512.png"),
                0 => line["input_image"] = json!("in-640.png"),
                _ => {}
            }
            line.to_string()
        })
        .collect();
    std::fs::write(dir.join("jobs.jsonl"), lines.join("\n") + "\n").unwrap();
    // Answers that take a while keep several submissions in flight at once,
    // each held at what was seen so far.
    mock.inject(
        genapi_mock::Fault::on(
            "/v1/gen-2-pro",
            genapi_mock::FaultKind::Delay(Duration::from_millis(500)),
        )
        .method("POST")
        .times(100),
    );
    let children: Vec<Running> = (0..3)
        .map(|_| Running::start(worker(&dir, &mock, &pg, &["--max-credits", "2"])))
        .collect();
    let outputs = finish_all(children).await;
    let charged = 1_000.0 - mock.credits().unwrap();
    eprintln!("charged {charged} credits for {} tasks", mock.created_tasks().len());
    assert!(charged > 0.0, "{}", what_each_worker_said(&outputs));
    assert!(charged <= 2.0, "a cap of 2 credits, yet the service charged {charged}");
}

/// A PNG header of a square image.
fn square_png(side: u32) -> Vec<u8> {
    common::png_header(side, side)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ledger_that_cannot_be_used_is_refused_and_nothing_is_sent() {
    let Some(pg) = Postgres::start("refusals") else { return };
    let mock = service(Duration::from_millis(100), 1.5).await;
    let dir = Dir::new("ledger-refusals");
    write_jobs(&dir.join("jobs.jsonl"), 3, "refused line", 64);
    let run = |url: String, extra: &[&str]| {
        let mut command = genapi(&dir, &mock);
        command
            .args(["batch", "jobs.jsonl", "--out", "out", "--ledger"])
            .arg(url)
            .args(extra);
        command.output().unwrap()
    };
    let closed = format!("postgres://postgres:{}@127.0.0.1:1/postgres", common::pg::PASSWORD);
    let unreachable = run(closed, &[]);
    assert_eq!(unreachable.status.code(), Some(9), "{}", text(&unreachable.stderr));
    assert!(text(&unreachable.stderr).contains("cannot reach the ledger database at 127.0.0.1:1"));

    let wrong = format!("postgres://postgres:not-the-password@127.0.0.1:{}/postgres", pg.port);
    let refused = run(wrong, &[]);
    assert_eq!(refused.status.code(), Some(3), "{}", text(&refused.stderr));
    let said = text(&refused.stderr);
    assert!(said.contains("refused the credentials"), "{said}");
    assert!(
        !said.contains("not-the-password"),
        "the password is never shown: {said}"
    );

    // A batch name taken by another job file.
    let first = run(pg.url(), &["--batch-name", "catalogue"]);
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    let sent = mock.count("POST", "/v1/gen-2-pro");
    write_jobs(&dir.join("jobs.jsonl"), 4, "another file", 64);
    let other = run(pg.url(), &["--batch-name", "catalogue"]);
    assert_eq!(other.status.code(), Some(2), "{}", text(&other.stderr));
    assert!(text(&other.stderr).contains("started from another job file"));

    // A schema newer than this build.
    pg.sql("INSERT INTO genapi_schema (version) VALUES (99)");
    // (The folder's batch: another one is refused in it before the ledger is read.)
    let newer = run(pg.url(), &["--batch-name", "catalogue"]);
    assert_eq!(newer.status.code(), Some(2), "{}", text(&newer.stderr));
    assert!(
        text(&newer.stderr).contains("newer than this genapi knows"),
        "{}",
        text(&newer.stderr)
    );
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        sent,
        "nothing sent after a refusal"
    );
    let stored =
        pg.sql("SELECT count(*) FROM genapi_records WHERE record::text LIKE '%key%' OR record::text LIKE '%base64%'");
    assert_eq!(stored, "0", "neither the key nor images are stored");
}
