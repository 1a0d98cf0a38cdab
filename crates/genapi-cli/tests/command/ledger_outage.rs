//! Workers on a ledger whose database goes wrong under them: it stops
//! answering, it restarts, or a worker is killed and started again (before
//! the database ended its connections), or its name is kept. Counted at the
//! service (the mock's log), never from what the workers believe.

use std::collections::HashMap;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use genapi_ledger::{LedgerOptions, SharedSeats, UNANSWERED_SEAT_HOLD};
use genapi_mock::{MockConfig, MockService};
use serde_json::Value;

use crate::common;
use common::pg::{Postgres, Setup, PASSWORD};
use common::{genapi, posts_by_prompt, Dir};

/// An hour and a little: past a task of an hour on the mock clock.
const PAST_AN_HOUR: Duration = Duration::from_secs(3601);

/// Finished tasks stay known for two hours, so moving the mock clock
/// [`PAST_AN_HOUR`] leaves every other task of the test to be polled.
async fn service(duration: Duration) -> MockService {
    let config = MockConfig::default()
        .default_duration(duration)
        .task_ttl(2 * PAST_AN_HOUR)
        .request_log_capacity(100_000);
    MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap()
}

use crate::common::{write_jobs, write_jobs_with_line_1_held};

/// How long line 1's task takes where a test holds it.
const AN_HOUR: Duration = Duration::from_secs(3600);

/// Blocks until the mock has received `prompt` (or `limit` passed).
fn wait_for_post(mock: &MockService, prompt: &str, limit: Duration) {
    let until = Instant::now() + limit;
    while !posts_by_prompt(mock).contains_key(prompt) {
        assert!(Instant::now() < until, "{prompt:?} not sent within {limit:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn worker(dir: &Dir, mock: &MockService, url: &str, extra: &[&str]) -> Command {
    let mut command = genapi(dir, mock);
    command
        .args(["batch", "jobs.jsonl", "--out", "out", "--json", "--ledger", url])
        .args(extra)
        .env("GENAPI_LOG", "genapi=info")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

/// A worker whose outcomes are read as they come.
struct Watched {
    child: Child,
    outcomes: mpsc::Receiver<Value>,
    seen: Vec<Value>,
    stderr: std::thread::JoinHandle<Vec<u8>>,
}

impl Watched {
    fn start(mut command: Command) -> Watched {
        let mut child = command.spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (send, outcomes) = mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line) {
                    if value["line"].is_u64() && send.send(value).is_err() {
                        return;
                    }
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut all = Vec::new();
            let _ = std::io::Read::read_to_end(&mut stderr, &mut all);
            all
        });
        Watched {
            child,
            outcomes,
            seen: Vec::new(),
            stderr,
        }
    }

    /// Blocks until the worker reported `count` outcomes (or `limit` passed).
    fn wait_for_outcomes(&mut self, count: usize, limit: Duration) {
        let until = Instant::now() + limit;
        while self.seen.len() < count {
            let left = until.saturating_duration_since(Instant::now());
            match self.outcomes.recv_timeout(left) {
                Ok(outcome) => self.seen.push(outcome),
                Err(_) => panic!("{count} outcomes not reported within {limit:?}: {:?}", self.seen),
            }
        }
    }

    /// Blocks until the worker ends, for at most `limit`; `None` (and the
    /// worker killed) when it did not.
    fn end_within(mut self, limit: Duration) -> (Option<ExitStatus>, Vec<Value>, String) {
        let until = Instant::now() + limit;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break Some(status);
            }
            if Instant::now() >= until {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let stderr = String::from_utf8_lossy(&self.stderr.join().unwrap()).into_owned();
        self.seen.extend(self.outcomes.try_iter());
        (status, self.seen, stderr)
    }

    /// Stops the worker where it is (SIGSTOP), as a loaded machine may.
    fn pause(&self) {
        // SAFETY: signals our own child process.
        assert_eq!(unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGSTOP) }, 0);
    }

    fn kill(mut self) -> Vec<Value> {
        self.child.kill().unwrap();
        let _ = self.child.wait();
        let _ = self.stderr.join();
        self.seen.extend(self.outcomes.try_iter());
        self.seen
    }
}

/// The last outcome of each line.
fn by_line(outcomes: &[Value]) -> HashMap<u64, Value> {
    outcomes
        .iter()
        .filter_map(|o| Some((o["line"].as_u64()?, o.clone())))
        .collect()
}

/// A database that stops answering mid-run (its connections stay open,
/// nothing comes back) cannot hold the worker: each step gives up within
/// half of --timeout, the lines it kept back say so, and the worker ends on
/// its own with the timeout's exit code. (How long it takes is not asserted:
/// the wait below only keeps a hung worker from hanging the test.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_stops_answering_mid_run_cannot_hold_the_worker_past_its_timeout() {
    let Some(pg) = Postgres::start("stops-answering") else {
        return;
    };
    let stall = common::stall::Stall::start(pg.port).await;
    let url = format!(
        "postgres://postgres:{PASSWORD}@127.0.0.1:{}/postgres?connect_timeout=120",
        stall.port
    );
    let mock = service(Duration::from_millis(500)).await;
    let dir = Dir::new("ledger-stops-answering");
    // Line 1's hour keeps the worker at work until --timeout, however late
    // the database goes silent.
    let first = write_jobs_with_line_1_held(&dir.join("jobs.jsonl"), 30, "silent line", AN_HOUR);
    // Time for a slow machine to start and send line 1 before it passes.
    let mut running = Watched::start(worker(&dir, &mock, &url, &["--max-active", "2", "--timeout", "60"]));
    tokio::task::block_in_place(|| {
        wait_for_post(&mock, &first, Duration::from_secs(120));
        running.wait_for_outcomes(1, Duration::from_secs(120));
    });
    stall.silence();
    // --timeout, then at most 15 s of answers in flight and 5 s to give
    // seats back: a worker still running after four times that is hung.
    let (status, outcomes, stderr) = tokio::task::block_in_place(|| running.end_within(Duration::from_secs(360)));
    let status = status.unwrap_or_else(|| panic!("the worker hung on the silent database\n{stderr}"));
    assert_eq!(status.code(), Some(8), "the timeout's exit code\n{stderr}");
    // Why the lines were kept back: the silent database, when a step met
    // it before --timeout passed; on a slow machine --timeout may come
    // first. Either way the worker ended, with the timeout's code.
    let said = format!("{stderr}{outcomes:?}");
    assert!(
        said.contains("the ledger database did not answer within 30 s") || said.contains("--timeout 60s passed"),
        "the lines kept back say why: {said}"
    );
    assert!(!said.contains(PASSWORD), "the password is never shown");
    for (line, count) in posts_by_prompt(&mock) {
        assert_eq!(count, 1, "{line} sent more than once");
    }
}

/// The database is stopped as a crash would stop it, and started again a
/// few seconds later: both workers reconnect and finish, every line is sent
/// once and done, and no line changed hands.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_go_on_after_the_database_restarts_and_nothing_is_sent_twice_or_lost() {
    const LINES: u64 = 24;
    let setup = Setup {
        durable_commits: true,
        ..Setup::default()
    };
    let Some(mut pg) = Postgres::start_with("restarts", setup) else {
        return;
    };
    let mock = service(Duration::from_millis(1_000)).await;
    let dir = Dir::new("ledger-restarts");
    write_jobs(&dir.join("jobs.jsonl"), LINES, "restart line");
    let url = pg.url();
    let extra = ["--max-active", "4", "--timeout", "90"];
    let mut first = Watched::start(worker(&dir, &mock, &url, &extra));
    let mut second = Watched::start(worker(&dir, &mock, &url, &extra));
    // Both at work (each has its name, and lines) before the database
    // goes: a worker still starting while it is down is another test.
    tokio::task::block_in_place(|| {
        first.wait_for_outcomes(2, Duration::from_secs(120));
        second.wait_for_outcomes(1, Duration::from_secs(120));
    });
    tokio::task::block_in_place(|| {
        pg.stop_immediately();
        // Down for a few seconds: longer than a step's first attempts, far
        // shorter than a lease.
        std::thread::sleep(Duration::from_secs(4));
        pg.start_again();
    });
    let mut outcomes = Vec::new();
    for running in [first, second] {
        let (status, seen, stderr) = tokio::task::block_in_place(|| running.end_within(Duration::from_secs(120)));
        assert_eq!(status.and_then(|s| s.code()), Some(0), "{stderr}");
        outcomes.extend(seen);
    }
    let reported = by_line(&outcomes);
    assert_eq!(reported.len(), LINES as usize, "{reported:?}");
    assert!(reported.values().all(|o| o["status"] == "saved"), "{reported:?}");
    let posts = posts_by_prompt(&mock);
    for line in 1..=LINES {
        assert_eq!(posts.get(&format!("restart line {line}")), Some(&1), "line {line}");
    }
    let changed_hands = pg.sql(
        "SELECT count(*) FROM (SELECT line FROM genapi_records GROUP BY batch, line \
         HAVING count(DISTINCT worker) > 1) lines",
    );
    assert_eq!(changed_hands, "0", "each line's records are its one worker's");
}

/// The server processes of a killed worker's connections, stopped
/// (SIGSTOP) before the kill, as a loaded machine may leave them: the
/// database has not ended those connections, so they hold the worker's
/// name, until they are continued (SIGCONT), when dropped at the latest.
struct Lingering(Vec<i32>);

impl Lingering {
    /// Stops the connections holding the paused worker's name, once every
    /// connection of it is idle (so the stopped ones hold no row another
    /// worker would wait for).
    fn stop_name_holders(pg: &Postgres) -> Lingering {
        pg.await_rows(
            "every connection of the paused worker idle",
            "SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE backend_type = 'client backend' \
             AND pid <> pg_backend_pid() AND state IS DISTINCT FROM 'idle')",
            Duration::from_secs(120),
        );
        let mut stopped = Lingering(Vec::new());
        for pid in pg.advisory_lock_holders() {
            stopped.0.push(pid);
            // SAFETY: signals a process of the test's own server.
            assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0, "server process {pid}");
        }
        assert!(!stopped.0.is_empty(), "the worker holds its name");
        stopped
    }
}

impl Drop for Lingering {
    fn drop(&mut self) {
        for pid in &self.0 {
            // SAFETY: signals a process of the test's own server.
            unsafe { libc::kill(*pid, libc::SIGCONT) };
        }
    }
}

/// A worker killed mid-run and started again (same machine, same --out)
/// takes its lines back at once, although their lease has an hour to run,
/// even while the database has not yet ended the killed worker's
/// connections: it waits for them to end, and takes back its name, its
/// lines and its seats. It finishes well within its --timeout, and nothing
/// is sent twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_started_again_takes_its_lines_back_at_once() {
    killed_and_started_again("worker-again", None).await;
}

/// The same with an explicit --worker-name, started again from another
/// folder: the name alone makes it the same worker.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_started_again_under_its_name_elsewhere_takes_its_lines_back_at_once() {
    killed_and_started_again("worker-named", Some("render-1")).await;
}

async fn killed_and_started_again(test: &str, name: Option<&str>) {
    const LINES: u64 = 16;
    let Some(pg) = Postgres::start(test) else {
        return;
    };
    let mock = service(Duration::from_millis(1_000)).await;
    let dir = Dir::new(&format!("ledger-{test}"));
    // Line 1's hour: the kill surely leaves it held; the mock clock is
    // moved past it before the worker starts again.
    let first_line = write_jobs_with_line_1_held(&dir.join("jobs.jsonl"), LINES, "again line", AN_HOUR);
    let url = pg.url();
    let mut extra = vec!["--max-active", "4", "--ledger-lease", "3600", "--timeout", "60"];
    if let Some(name) = name {
        extra.extend(["--worker-name", name]);
    }
    let mut first = Watched::start(worker(&dir, &mock, &url, &extra));
    tokio::task::block_in_place(|| {
        wait_for_post(&mock, &first_line, Duration::from_secs(120));
        first.wait_for_outcomes(3, Duration::from_secs(120));
    });
    first.pause();
    let lingering = tokio::task::block_in_place(|| Lingering::stop_name_holders(&pg));
    let mut outcomes = first.kill();
    let held = pg.sql("SELECT count(*) FROM genapi_lines WHERE worker IS NOT NULL AND NOT done");
    assert_ne!(held, "0", "the kill left lines held");
    mock.advance(PAST_AN_HOUR);
    // Named, it starts again from another folder (another machine would do
    // the same): only the name says it is the same worker.
    let elsewhere = Dir::new(&format!("ledger-{test}-elsewhere"));
    let again_in = match name {
        Some(_) => {
            std::fs::copy(dir.join("jobs.jsonl"), elsewhere.join("jobs.jsonl")).unwrap();
            &elsewhere
        }
        None => &dir,
    };
    let again = Watched::start(worker(again_in, &mock, &url, &extra));
    // The killed worker's connections end once the new one asks for the
    // name they hold.
    tokio::task::block_in_place(|| pg.await_advisory_waiter(&lingering.0, Duration::from_secs(60)));
    drop(lingering);
    let (status, seen, stderr) = tokio::task::block_in_place(|| again.end_within(Duration::from_secs(90)));
    // 9 (unknown) if the kill fell between a submission and its answer.
    assert!(
        matches!(status.and_then(|s| s.code()), Some(0 | 9)),
        "{status:?}; lines still held by the killed worker are waited for until --timeout\n{stderr}"
    );
    outcomes.extend(seen);
    let reported = by_line(&outcomes);
    assert_eq!(reported.len(), LINES as usize, "{reported:?}");
    assert!(
        reported
            .values()
            .all(|o| o["status"] == "saved" || o["status"] == "unanswered"),
        "{reported:?}"
    );
    for (prompt, count) in posts_by_prompt(&mock) {
        assert_eq!(count, 1, "{prompt} sent (and paid for) more than once");
    }
    // The same name: one worker in the ledger, not two.
    let workers = pg.sql("SELECT count(DISTINCT worker) FROM genapi_records");
    assert_eq!(workers, "1");
    if let Some(name) = name {
        let named = pg.sql("SELECT DISTINCT worker FROM genapi_records");
        assert_eq!(named, name);
    }
    // Its seats went by the same name: the killed run's were handed back
    // (each under its earlier run's label until its task is seen final),
    // and none is left under the name, or under a `#2` the new run took.
    let kept =
        pg.sql("SELECT string_agg(DISTINCT worker, ', ') FROM genapi_seats WHERE worker NOT LIKE '% (earlier run)'");
    assert_eq!(kept, "", "seats still taken after the run ended");
}

/// A worker whose name in its seat pool a live process keeps (here the
/// test, holding it in no batch) gives it up once the name wait passes,
/// and works as `#2` in the batch too: its lines and its seats go by one
/// name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_whose_name_is_kept_in_its_seat_pool_works_under_the_same_other_name_in_the_batch() {
    let Some(pg) = Postgres::start("name-kept-in-pool") else {
        return;
    };
    let mock = service(Duration::from_millis(200)).await;
    let dir = Dir::new("ledger-name-kept-in-pool");
    write_jobs(&dir.join("jobs.jsonl"), 4, "kept line");
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let url = pg.url();
    // The name `genapi batch` takes on this machine for this --out.
    let options = LedgerOptions::default().worker_for_folder(&dir.join("out"));
    let keeper = SharedSeats::join_with(&url, "default", 24, &options, UNANSWERED_SEAT_HOLD)
        .await
        .unwrap();
    let running = Watched::start(worker(&dir, &mock, &url, &["--timeout", "60"]));
    let (status, outcomes, stderr) = tokio::task::block_in_place(|| running.end_within(Duration::from_secs(90)));
    assert_eq!(status.and_then(|s| s.code()), Some(0), "{outcomes:?}\n{stderr}");
    let workers = pg.sql("SELECT string_agg(DISTINCT worker, ', ') FROM genapi_records");
    assert_eq!(workers, format!("{}#2", keeper.worker()));
}

/// A worker whose lines another worker holds (here a paused one, whose
/// lease has an hour to run) says so in its progress instead of showing
/// nothing in flight.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_waiting_for_lines_another_holds_says_so() {
    let Some(pg) = Postgres::start("held-elsewhere") else {
        return;
    };
    let mock = service(Duration::from_millis(1_000)).await;
    let dir = Dir::new("ledger-held-elsewhere");
    // Line 1's hour: the dead worker surely holds it.
    let first_line = write_jobs_with_line_1_held(&dir.join("jobs.jsonl"), 8, "held line", AN_HOUR);
    let url = pg.url();
    let extra = ["--max-active", "4", "--ledger-lease", "3600", "--timeout", "120"];
    let mut first = Watched::start(worker(&dir, &mock, &url, &extra));
    tokio::task::block_in_place(|| {
        wait_for_post(&mock, &first_line, Duration::from_secs(120));
        first.wait_for_outcomes(1, Duration::from_secs(120));
    });
    first.pause();
    // Another folder: another worker, which cannot take the paused one's
    // lines.
    let elsewhere = Dir::new("ledger-held-elsewhere-2");
    std::fs::copy(dir.join("jobs.jsonl"), elsewhere.join("jobs.jsonl")).unwrap();
    // Its --timeout passes while it waits: long enough for each step of a
    // slow machine's database.
    let second = Watched::start(worker(&elsewhere, &mock, &url, &["--timeout", "30"]));
    let (status, _, stderr) = tokio::task::block_in_place(|| second.end_within(Duration::from_secs(120)));
    first.kill();
    assert_eq!(status.and_then(|s| s.code()), Some(8), "{stderr}");
    assert!(stderr.contains(" held by other workers"), "{stderr}");
}

/// --ledger-lease and --worker-name are in --help, not hidden.
#[test]
fn the_lease_and_the_worker_name_are_documented() {
    let dir = Dir::new("ledger-help");
    let help = common::genapi_alone(&dir).args(["batch", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("--ledger-lease <SECONDS>"), "{help}");
    assert!(help.contains("--worker-name <NAME>"), "{help}");
}
