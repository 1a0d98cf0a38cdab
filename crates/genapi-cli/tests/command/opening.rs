//! `--open`: the saved image, or a batch's gallery, is handed to the
//! desktop's opener (here a script named by GENAPI_OPENER that records what
//! it was given), without the environment's secrets and without the
//! command waiting for it; without an opener the command says so and its
//! work and exit code stand.

use std::path::Path;

use crate::cli::text;
use crate::common::{genapi, roomy_mock, Dir};

/// An executable script `name` in `dir` of `body`, run by sh.
#[cfg(unix)]
fn script(dir: &Dir, name: &str, body: &str) -> std::path::PathBuf {
    let (source, script) = (dir.join(&format!("{name}.source")), dir.join(name));
    std::fs::write(&source, format!("#!/bin/sh\n{body}")).unwrap();
    crate::common::install_executable(&source, &script);
    script
}

/// A script that keeps a copy of the file it is asked to open as `seen`
/// (what a viewer showed) and its environment as `environment.txt`, then
/// appends the file's name to `opened.txt`, in `dir`.
#[cfg(unix)]
fn recording_opener(dir: &Dir) -> std::path::PathBuf {
    let body = format!(
        "cp \"$1\" '{seen}.part' && mv '{seen}.part' '{seen}'\nenv > '{environment}'\n\
         printf '%s\\n' \"$*\" >> '{log}'\n",
        seen = dir.join("seen").display(),
        environment = dir.join("environment.txt").display(),
        log = dir.join("opened.txt").display(),
    );
    script(dir, "opener.sh", &body)
}

/// Waits (a while at most) for `file` to be there: the command does not
/// wait for its opener.
#[cfg(unix)]
fn appears(file: &Path) -> bool {
    for _ in 0..1000 {
        if file.exists() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    false
}

/// The files the opener was given, a line each, once it has run (its
/// line written whole: the script's `>>` makes the file before it writes).
#[cfg(unix)]
fn opened(dir: &Dir) -> Vec<String> {
    let log = dir.join("opened.txt");
    assert!(appears(&log), "the opener ran");
    let whole = || std::fs::read_to_string(&log).is_ok_and(|text| text.ends_with('\n'));
    for _ in 0..1000 {
        if whole() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// `genapi generate … -o fox.jpg --open` with `opener` as the opener.
fn generate_opening(dir: &Dir, mock: &genapi_mock::MockService, opener: &Path) -> std::process::Command {
    let mut command = genapi(dir, mock);
    command
        .args(["generate", "a fox", "--size", "512x512", "-o", "fox.jpg", "--open"])
        .env("GENAPI_OPENER", opener);
    command
}

/// How long a held line's task takes on the mock clock.
const HELD_MS: u64 = 60_000;

/// Appends to `jobs` a line whose task takes [`HELD_MS`] on the mock clock:
/// the batch cannot end before the test moves that clock on.
#[cfg(unix)]
fn append_held_line(jobs: &Path) {
    use std::io::Write;
    let line = serde_json::json!({"model": "gen-2-pro", "name": "held",
        "prompt": format!("held [mock:duration_ms={HELD_MS}]"), "width": 64, "height": 64});
    let mut file = std::fs::OpenOptions::new().append(true).open(jobs).unwrap();
    writeln!(file, "{line}").unwrap();
}

/// Runs `command` (a batch with a held line) until `mark` appears, the sign
/// that its opener has run, and the held task is under way, then ends that
/// task and lets the batch finish. The opener thus always runs while the batch is under way, however
/// slow the machine; no result depends on which comes first.
#[cfg(unix)]
fn run_until_opened(
    mut command: std::process::Command,
    mock: &genapi_mock::MockService,
    mark: &Path,
) -> std::process::Output {
    use std::process::Stdio;
    let child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let opened = appears(mark);
    let held = format!("held [mock:duration_ms={HELD_MS}]");
    for _ in 0..1000 {
        if mock.created_tasks().iter().any(|task| task.prompt == held) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    mock.advance(std::time::Duration::from_millis(HELD_MS + 1_000));
    let output = child.wait_with_output().unwrap();
    assert!(opened, "the opener never ran: {}", text(&output.stderr));
    output
}

/// A batch of three lines, the last held until the opener has run (its
/// `mark` appeared), run with `--open` and `opener` as the opener, to its end.
#[cfg(unix)]
fn batch_opening(dir: &Dir, mock: &genapi_mock::MockService, opener: &Path, mark: &Path) -> std::process::Output {
    let jobs = dir.join("night.jsonl");
    crate::common::write_jobs(&jobs, 2, "night");
    append_held_line(&jobs);
    let mut command = genapi(dir, mock);
    command
        .args(["batch", "night.jsonl", "--out", "shots", "--open", "-q"])
        .env("GENAPI_OPENER", opener);
    run_until_opened(command, mock, mark)
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_open_opens_the_saved_image() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-generate");
    let opener = recording_opener(&dir);
    let run = generate_opening(&dir, &mock, &opener).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(opened(&dir), ["fox.jpg"]);
    assert_eq!(
        std::fs::read(dir.join("seen")).unwrap(),
        std::fs::read(dir.join("fox.jpg")).unwrap(),
        "the opener was given the image once it was saved whole"
    );
}

/// The opener gets the desktop's variables and none of the rest: not the
/// key, the mock's key, the ledger's address, a secret under a name that
/// says so or under one that does not (`PASSPHRASE`, `SESSION_COOKIE`,
/// an access key's id), nor any other variable of the run.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opener_is_not_handed_the_environments_secrets() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-secrets");
    let opener = recording_opener(&dir);
    let run = generate_opening(&dir, &mock, &opener)
        .env("GENAPI_MOCK_KEY", "mock-canary")
        .env("GENAPI_LEDGER_URL", "postgres://user:ledger-canary@127.0.0.1:9/db")
        .env("DEPLOY_TOKEN", "token-canary")
        .env("Mail_Password", "password-canary")
        .env("PASSPHRASE", "passphrase-canary")
        .env("SESSION_COOKIE", "sid=cookie-canary")
        .env("AWS_ACCESS_KEY_ID", "AKIAIOSFODNN7EXAMPLE")
        .env("SETTINGS", "password = spaced-canary")
        .env("OPENER_CANARY", "not-a-desktop-variable")
        .env("XDG_CURRENT_DESKTOP", "desktop-kept")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(opened(&dir), ["fox.jpg"]);
    let environment = std::fs::read_to_string(dir.join("environment.txt")).unwrap();
    assert!(
        environment.contains("XDG_CURRENT_DESKTOP=desktop-kept"),
        "{environment}"
    );
    assert!(environment.contains("LC_ALL=C.UTF-8"), "{environment}");
    assert!(environment.contains("PATH="), "{environment}");
    for secret in [
        mock.key(),
        "mock-canary",
        "ledger-canary",
        "token-canary",
        "password-canary",
        "passphrase-canary",
        "cookie-canary",
        "AKIAIOSFODNN7EXAMPLE",
        "spaced-canary",
        "not-a-desktop-variable",
        "GENAPI_BASE_URL",
    ] {
        assert!(!environment.contains(secret), "{secret} handed over: {environment}");
    }
    assert!(!environment.contains("GENAPI_API_KEY"), "{environment}");
}

/// The opener is not handed the variable holding the profile's key, whose
/// name (`GENAPI_WORK`) does not say it holds one, nor another variable
/// holding the same key, even one a desktop keeps (`XDG_WORK`), nor
/// `PGPASSWORD`, nor a variable whose value is an address with a password
/// (`DATABASE_URL`, or a kept `XDG_DATA_URL`).
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_opener_is_not_handed_the_profiles_key_nor_passwords_by_convention_or_in_addresses() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-profile-secrets");
    let opener = recording_opener(&dir);
    let folder = dir.join("config/genapi");
    std::fs::create_dir_all(&folder).unwrap();
    let origins: Vec<String> = mock.trusted_origins().iter().map(|o| format!("{o:?}")).collect();
    std::fs::write(
        folder.join("config.toml"),
        format!(
            "default_profile = \"work\"\n[profiles.work]\nbase_url = \"{}\"\ntrusted_origins = [{}]\n\
             key_env = \"GENAPI_WORK\"\n",
            mock.base_url(),
            origins.join(", ")
        ),
    )
    .unwrap();
    let run = crate::common::genapi_alone(&dir)
        .args(["generate", "a fox", "--size", "512x512", "-o", "fox.jpg", "--open"])
        .env("GENAPI_OPENER", &opener)
        .env("GENAPI_WORK", mock.key())
        .env("PGPASSWORD", "pgpassword-canary")
        .env("DATABASE_URL", "postgres://app:database-canary@db.example.com:5432/app")
        .env("XDG_DATA_URL", "https://app:xdg-canary@db.example.com/app")
        .env("XDG_SEAT", "seat0")
        // The key encoded, and credentials as they are written, in
        // variables a desktop keeps.
        .env("LC_MESSAGES", base64_of(mock.key()))
        .env("XDG_SESSION_TYPE", mock.key().chars().rev().collect::<String>())
        .env("XDG_X", "https://h/?token=abc123SECRET")
        .env("LC_Y", "Bearer eyJhbGciOi.SECRETsig")
        // The key again, under a name a desktop keeps.
        .env("XDG_WORK", format!("  {}\n", mock.key()))
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "the profile's key was used");
    assert_eq!(opened(&dir), ["fox.jpg"]);
    let environment = std::fs::read_to_string(dir.join("environment.txt")).unwrap();
    assert!(environment.contains("XDG_SEAT=seat0"), "{environment}");
    for secret in [
        mock.key(),
        "pgpassword-canary",
        "database-canary",
        "xdg-canary",
        "XDG_WORK",
    ] {
        assert!(!environment.contains(secret), "{secret} handed over: {environment}");
    }
}

/// A viewer that stays in front until it is closed (here one that sleeps
/// 30 s, then leaves a mark) holds neither the batch nor its end: the
/// command has ended, its gallery whole, while the opener still sleeps.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_viewer_that_stays_open_does_not_hold_the_batch() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-slow-viewer");
    let (started, marker) = (dir.join("viewer.pid"), dir.join("viewer-closed"));
    let body = format!(
        "echo $$ > '{started}.part' && mv '{started}.part' '{started}'\nsleep 30\ntouch '{marker}'\n",
        started = started.display(),
        marker = marker.display()
    );
    let opener = script(&dir, "viewer.sh", &body);
    let run = batch_opening(&dir, &mock, &opener, &started);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert!(!marker.exists(), "the command waited for the viewer");
    let page = std::fs::read_to_string(dir.join("shots/index.html")).unwrap();
    assert!(page.contains("3 saved"), "{page}");
    // The viewer is this test's to close.
    assert!(appears(&started), "the viewer was started");
    let pid = std::fs::read_to_string(&started).unwrap();
    let _ = std::process::Command::new("kill").arg(pid.trim()).status();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_opener_the_image_is_saved_and_the_command_says_so() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-none");
    let run = generate_opening(&dir, &mock, &dir.join("no-such-opener"))
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("no opener"), "{stderr}");
    assert!(stderr.contains("fox.jpg is saved"), "{stderr}");
    assert!(dir.join("fox.jpg").is_file());
}

/// The gallery is opened as the batch starts: the page the viewer got
/// reloads itself and names the job file; the page the batch leaves does
/// not reload.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_open_opens_the_gallery_which_reloads_until_the_batch_ends() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-batch");
    let opener = recording_opener(&dir);
    let run = batch_opening(&dir, &mock, &opener, &dir.join("seen"));
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(opened(&dir), ["shots/index.html"]);
    let reload = "<meta http-equiv=\"refresh\"";
    let seen = std::fs::read_to_string(dir.join("seen")).unwrap();
    assert!(seen.contains(reload), "the page opened mid-run reloads: {seen}");
    assert!(seen.contains("job file <code>night.jsonl</code>"), "{seen}");
    assert!(
        seen.contains("genapi batch: 3 lines"),
        "every line counted from the start: {seen}"
    );
    let last = std::fs::read_to_string(dir.join("shots/index.html")).unwrap();
    assert!(!last.contains(reload), "the batch has ended: {last}");
    assert!(last.contains("job file <code>night.jsonl</code>"), "{last}");
    assert!(last.contains("3 saved"), "{last}");
}

/// A batch run again over lines saved before, and one more: the gallery
/// the viewer gets as it starts already shows them saved, with their count
/// and images.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_opens_a_gallery_that_shows_the_lines_saved_before() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-batch-rerun");
    let opener = recording_opener(&dir);
    let jobs = dir.join("night.jsonl");
    crate::common::write_jobs(&jobs, 3, "night");
    let first = genapi(&dir, &mock)
        .args(["batch", "night.jsonl", "--out", "shots", "--no-gallery", "-q"])
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert!(!dir.join("shots/index.html").exists());
    append_held_line(&jobs);
    let mut again = genapi(&dir, &mock);
    again
        .args(["batch", "night.jsonl", "--out", "shots", "--open", "-q"])
        .env("GENAPI_OPENER", &opener);
    let again = run_until_opened(again, &mock, &dir.join("seen"));
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    let seen = std::fs::read_to_string(dir.join("seen")).unwrap();
    assert!(seen.contains("genapi batch: 4 lines"), "{seen}");
    assert!(seen.contains("3 saved"), "{seen}");
    assert!(
        seen.contains("src=\"thumbs/img-3.jpg\""),
        "the saved images shown: {seen}"
    );
    assert!(
        seen.contains("<meta http-equiv=\"refresh\""),
        "opened at the start: {seen}"
    );
    let last = std::fs::read_to_string(dir.join("shots/index.html")).unwrap();
    assert!(last.contains("4 saved"), "{last}");
}

/// `text` in base64, as a value may hold a key.
fn base64_of(text: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(text)
}
