//! A service that quotes the key, a line's webhook secret and its webhook
//! address's token in a failed task's details: none of them reaches the
//! terminal, any file a batch writes (results, journal, gallery) or the
//! records of a shared ledger.

use genapi_mock::{MockConfig, MockService};
use serde_json::{json, Value};

use crate::common::{self, Dir};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn details_quoting_secrets_are_scrubbed_from_the_terminal_and_every_file_of_a_batch() {
    const KEY: &str = "cli-canary-key-9d2e";
    const SECRET: &str = "cli-canary-secret-5f1";
    const TOKEN: &str = "cli-token-77aa31b9";
    let mock = MockService::start_with(MockConfig::default().key(KEY), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    // Quoted plainly, and as another JSON writer would escape them (every
    // character as `\uXXXX`).
    let escaped = |text: &str| text.chars().map(|c| format!("\\u{:04x}", c as u32)).collect::<String>();
    let quoting = format!(
        r#"{{"id": "any", "status": "Error", "details": {{"error": "refused {KEY} {SECRET} {TOKEN}", "again": "{} {} {}"}}}}"#,
        escaped(KEY),
        escaped(SECRET),
        escaped(TOKEN)
    );
    common::answer_polls(&mock, quoting, 100);
    let dir = Dir::new("echoed-secrets");
    let line = json!({"model": "gen-2-pro", "name": "fox", "prompt": "a red fox", "width": 64, "height": 64,
                      "webhook_url": format!("http://127.0.0.1:9/hook?token={TOKEN}"), "webhook_secret": SECRET});
    std::fs::write(dir.join("jobs.jsonl"), format!("{line}\n")).unwrap();
    let run = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert_ne!(run.status.code(), Some(0), "the line failed:\n{stderr}");
    let mut texts = vec![
        ("stderr", stderr),
        ("stdout", String::from_utf8_lossy(&run.stdout).into_owned()),
    ];
    for file in ["results.jsonl", "journal.jsonl", "index.html"] {
        texts.push((file, std::fs::read_to_string(dir.join("out").join(file)).unwrap()));
    }
    // The same batch shared through a ledger: its records hold the same
    // outcome, scrubbed as well.
    if let Some(pg) = common::pg::Postgres::start("echoed-secrets") {
        let run = common::genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "shared", "--ledger"])
            .arg(pg.url())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert_ne!(run.status.code(), Some(0), "the line failed:\n{stderr}");
        let tables = pg.sql("SELECT table_name FROM information_schema.tables WHERE table_schema = 'public'");
        let mut dump = String::new();
        for name in tables.lines() {
            dump.push_str(&pg.sql(&format!("SELECT to_jsonb(r)::text FROM \"{name}\" r")));
            dump.push('\n');
        }
        assert!(dump.contains("[redacted]"), "the outcome was stored: {dump}");
        texts.push(("the ledger's records", dump));
        texts.push(("stderr of the ledger's run", stderr));
    }
    let results = &texts[2].1;
    assert!(
        results.contains("refused [redacted] [redacted] [redacted]"),
        "{results}"
    );
    for (name, text) in &texts {
        for secret in [KEY, SECRET, TOKEN] {
            assert!(!text.contains(secret), "{secret} is in {name}:\n{text}");
        }
    }
}

/// `genapi submit`, then `genapi wait` in another process: the waiting
/// process never sent the webhook secret or the webhook address's token,
/// yet they are scrubbed from what the service echoes, as the submission
/// left them (readable by the user alone, even in a folder an earlier
/// version left open for others to enter, which is left as it was) for it;
/// they are kept while the task is open (a wait the service refused did
/// not see it end) and after it failed (a second look shows its answer
/// again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_waited_for_in_another_process_is_scrubbed_of_its_submissions_secrets() {
    const SECRET: &str = "wait-canary-secret-0e7";
    const TOKEN: &str = "P4THS3CR3T123abc";
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("echoed-secrets-wait");
    let folder = dir.join("cache/genapi/tasks");
    std::fs::create_dir_all(&folder).unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let task = submitted(
        &dir,
        &mock,
        &[
            format!("webhook_secret={SECRET}"),
            format!("webhook_url=http://127.0.0.1:9/hook/{TOKEN}/in"),
        ],
    );
    let id = task["id"].as_str().unwrap();
    let kept: Vec<_> = std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&kept[0]).unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "readable by the user alone: {mode:o}");
        let mode = std::fs::metadata(&folder).unwrap().permissions().mode();
        assert_eq!(
            mode & 0o777,
            0o755,
            "an existing folder's mode is left as it was: {mode:o}"
        );
    }
    // A wait the service refuses (another key) did not see the task end:
    // the task goes on, and so must what scrubs its answers for the wait
    // that picks it up with the right key.
    let refused = common::genapi(&dir, &mock)
        .env("GENAPI_API_KEY", "not-the-key-it-was-sent-with")
        .args(["wait", id, "-o", "fox.jpg"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(refused.status.code(), Some(3), "{stderr}");
    assert!(kept[0].exists(), "kept while the task is open: {stderr}");
    // Secrets others could have changed are not used, and that is said.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&kept[0], std::fs::Permissions::from_mode(0o622)).unwrap();
        let run = common::genapi(&dir, &mock)
            .env("GENAPI_API_KEY", "not-the-key-it-was-sent-with")
            .args(["wait", id, "-o", "fox.jpg"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
        assert!(
            stderr.contains(&format!("warning: not reading the secrets kept for task {id}"))
                && stderr.contains("chmod go-w"),
            "{stderr}"
        );
        std::fs::set_permissions(&kept[0], std::fs::Permissions::from_mode(0o600)).unwrap();
    }
    let stderr = waited_for_failure_quoting(
        &dir,
        &mock,
        id,
        &format!("cannot deliver to /hook/{TOKEN}/in with secret {SECRET}"),
    );
    assert!(
        stderr.contains("cannot deliver to /hook/[redacted]/in with secret [redacted]"),
        "{stderr}"
    );
    assert!(!stderr.contains(SECRET) && !stderr.contains(TOKEN), "{stderr}");
    // A failed task is looked up again (its answer quotes what it was
    // sent): what scrubs it stays, and the second look is scrubbed too.
    assert!(kept[0].exists(), "kept after the task failed");
    let again = waited_for_failure_quoting(
        &dir,
        &mock,
        id,
        &format!("cannot deliver to /hook/{TOKEN}/in with secret {SECRET}"),
    );
    assert!(!again.contains(SECRET) && !again.contains(TOKEN), "{again}");
}

/// A `get` that only looks leaves a task's kept secrets for the command that
/// fetches its result: a `get` of a Ready task without `--out`, one that
/// saw a passing "not found", and one the service refuses (which, under
/// `--json`, gives the task's object with the command that picks it up,
/// never a bare "failed").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_get_that_only_looks_keeps_the_secrets_until_the_result_is_fetched() {
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("echoed-secrets-get");
    let task = submitted(&dir, &mock, &["webhook_secret=get-canary-secret-0e7".to_string()]);
    let id = task["id"].as_str().unwrap();
    let folder = dir.join("cache/genapi/tasks");
    let kept = || std::fs::read_dir(&folder).map(|entries| entries.count()).unwrap_or(0);
    assert_eq!(kept(), 1);
    // A passing 404 on both of its polls: the look says not found, and a
    // later wait still needs what scrubs the task's answers.
    mock.inject(genapi_mock::Fault::status("/v1/get_result", 404).times(2));
    exits(
        common::genapi(&dir, &mock).args(["get", task["polling_url"].as_str().unwrap()]),
        7,
    );
    assert_eq!(kept(), 1, "kept after one look's not found");
    let refused = exits(
        common::genapi(&dir, &mock)
            .env("GENAPI_API_KEY", "not-the-key-it-was-sent-with")
            .args(["get", id, "--json"]),
        3,
    );
    let object: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(object["id"], id, "{object}");
    assert_ne!(object["status"], "failed", "{object}");
    assert!(
        object["resume"].as_str().is_some_and(|resume| resume.contains(id)),
        "{object}"
    );
    assert_eq!(kept(), 1, "kept while the task is open");
    let mut looked = String::new();
    for _ in 0..200 {
        let run = common::genapi(&dir, &mock).args(["get", id]).output().unwrap();
        looked = String::from_utf8_lossy(&run.stdout).into_owned();
        if looked.contains("Ready") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(looked.contains("Ready"), "{looked}");
    assert_eq!(kept(), 1, "kept until the result is fetched");
    exits(common::genapi(&dir, &mock).args(["wait", id, "-o", "fox.jpg"]), 0);
    assert_eq!(kept(), 0, "forgotten once the result is saved");
}

/// A task `generate` left running (its deadline passed) keeps its
/// submission's secrets, as `submit` does, for the `wait` its resume line
/// names: that wait scrubs them from what the service echoes, and forgets
/// them once the task has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_generate_left_running_is_scrubbed_of_its_secrets_when_picked_up() {
    const SECRET: &str = "generate-canary-secret-4f1";
    let mock = MockService::start_with(
        MockConfig::default().default_duration(std::time::Duration::from_secs(600)),
        "127.0.0.1:0".parse().unwrap(),
    )
    .await
    .unwrap();
    let dir = Dir::new("echoed-secrets-generate");
    let generated = common::genapi(&dir, &mock)
        .args([
            // Past once the task is accepted (it runs ten minutes), with
            // time for a starved machine to start and submit.
            "--timeout",
            "20",
            "generate",
            "a fox",
            "-o",
            "fox.jpg",
            "--json",
            "--set",
        ])
        .arg(format!("webhook_secret={SECRET}"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&generated.stderr).into_owned();
    assert_eq!(generated.status.code(), Some(8), "{stderr}");
    let object: Value = serde_json::from_slice(&generated.stdout).unwrap();
    let id = object["id"].as_str().unwrap();
    assert!(
        object["resume"].as_str().is_some_and(|resume| resume.contains(id)),
        "{object}"
    );
    let folder = dir.join("cache/genapi/tasks");
    let kept = || std::fs::read_dir(&folder).map(|entries| entries.count()).unwrap_or(0);
    assert_eq!(kept(), 1, "kept while the task runs on");
    let stderr = waited_for_failure_quoting(&dir, &mock, id, &format!("no delivery with secret {SECRET}"));
    assert!(
        stderr.contains("no delivery with secret [redacted]") && !stderr.contains(SECRET),
        "{stderr}"
    );
    // Failed, the task is still looked up: a second look is scrubbed too.
    assert_eq!(kept(), 1, "kept after the task failed");
    let again = waited_for_failure_quoting(&dir, &mock, id, &format!("no delivery with secret {SECRET}"));
    assert!(!again.contains(SECRET), "{again}");
}

/// `genapi submit "a fox" --json` with each of `settings` as a `--set`: the
/// accepted task's object.
fn submitted(dir: &Dir, mock: &MockService, settings: &[String]) -> Value {
    let mut command = common::genapi(dir, mock);
    command.args(["submit", "a fox", "--json"]);
    for setting in settings {
        command.args(["--set", setting]);
    }
    serde_json::from_slice(&exits(&mut command, 0).stdout).unwrap()
}

/// Runs `command`, which must exit with `code` (its stderr said if not).
fn exits(command: &mut std::process::Command, code: i32) -> std::process::Output {
    let run = command.output().unwrap();
    assert_eq!(
        run.status.code(),
        Some(code),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    run
}

/// `genapi wait ID` once the service says the task failed with `message`:
/// what it said on stderr.
fn waited_for_failure_quoting(dir: &Dir, mock: &MockService, id: &str, message: &str) -> String {
    let quoting = json!({"id": id, "status": "Error", "details": {"error": message}});
    common::answer_polls(mock, quoting.to_string(), 100);
    let waited = exits(common::genapi(dir, mock).args(["wait", id, "-o", "fox.jpg"]), 7);
    String::from_utf8_lossy(&waited.stderr).into_owned()
}

/// The built-in mock ends with the command: a task of it that `generate`
/// leaves running cannot be picked up, so its secrets are not kept.
#[test]
fn a_task_of_the_built_in_mock_leaves_no_secrets_behind() {
    let dir = Dir::new("echoed-secrets-builtin");
    let generated = common::genapi_alone(&dir)
        .args([
            // Past once the task is accepted (it runs ten minutes), with
            // time for a starved machine to start and submit.
            "--timeout",
            "20",
            "generate",
            "a fox [mock:duration_ms=600000]",
            "-o",
            "fox.jpg",
            "--set",
            "webhook_secret=builtin-canary-secret-4f1",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&generated.stderr).into_owned();
    assert_eq!(generated.status.code(), Some(8), "{stderr}");
    assert!(stderr.contains("cannot be resumed"), "{stderr}");
    let folder = dir.join("cache/genapi/tasks");
    let kept = std::fs::read_dir(&folder).map(|entries| entries.count()).unwrap_or(0);
    assert_eq!(kept, 0, "nothing kept for a task no command can pick up");
}

/// A polling address the user gives with a token of its own (`batch
/// --adopt`, `wait`, `get`): the journal keeps it whole, its owner's alone,
/// for the run that polls it; results, the gallery, stdout and stderr name
/// the task by its address and id alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_in_a_polling_address_the_user_gives_stays_in_the_journal_alone() {
    const TOKEN: &str = "poll-token-3c9e1a77";
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("echoed-secrets-adopt");
    common::write_jobs(&dir.join("jobs.jsonl"), 1, "adopted token");
    mock.inject(genapi_mock::Fault::on("/v1/gen-2-pro", genapi_mock::FaultKind::LoseAnswer).method("POST"));
    let lost = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_ne!(lost.status.code(), Some(0), "{}", String::from_utf8_lossy(&lost.stderr));
    let task = mock.created_tasks().pop().expect("the lost answer's task was made");
    let address = format!("{}/v1/get_result?id={}&token={TOKEN}", mock.regional_url(), task.id);
    let adopted = exits(
        common::genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", "out", "--json", "--adopt"])
            .arg(format!("1={address}")),
        0,
    );
    let waited = exits(
        common::genapi(&dir, &mock).args(["wait", &address, "--json", "-o", "again.jpg"]),
        0,
    );
    let looked = exits(common::genapi(&dir, &mock).args(["get", &address, "--json"]), 0);
    // Without its scheme, the address is no task id: refused, not sent.
    let bare = address.split_once("://").map(|(_, rest)| rest.to_string()).unwrap();
    let seen_before = mock.requests().len();
    let refused = common::genapi(&dir, &mock)
        .args(["get", &bare, "--json"])
        .output()
        .unwrap();
    assert_ne!(refused.status.code(), Some(0));
    let requests = format!("{:?}", &mock.requests()[seen_before..]);
    let mut texts = vec![("what the mock saw of the bare address".to_string(), requests)];
    for (name, run) in [
        ("batch", &adopted),
        ("wait", &waited),
        ("get", &looked),
        ("a bare address", &refused),
    ] {
        texts.push((
            format!("{name}'s stdout"),
            String::from_utf8_lossy(&run.stdout).into_owned(),
        ));
        texts.push((
            format!("{name}'s stderr"),
            String::from_utf8_lossy(&run.stderr).into_owned(),
        ));
    }
    for file in ["results.jsonl", "index.html"] {
        texts.push((
            file.to_string(),
            std::fs::read_to_string(dir.join("out").join(file)).unwrap(),
        ));
    }
    for (name, text) in &texts {
        assert!(!text.contains(TOKEN), "the token is in {name}:\n{text}");
    }
    let results = std::fs::read_to_string(dir.join("out/results.jsonl")).unwrap();
    let line: Value = serde_json::from_str(results.lines().next().unwrap()).unwrap();
    assert_eq!(
        line["polling_url"],
        format!("{}/v1/get_result?id={}", mock.regional_url(), task.id),
        "the task stays named: {line}"
    );
    let waited: Value = serde_json::from_slice(&waited.stdout).unwrap();
    assert_eq!(waited["polling_url"], line["polling_url"], "{waited}");
    let journal = dir.join("out/journal.jsonl");
    assert!(
        std::fs::read_to_string(&journal).unwrap().contains(TOKEN),
        "the journal keeps what a later run polls"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&journal).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "the journal is its owner's alone: {mode:o}");
    }
}
