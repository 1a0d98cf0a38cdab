//! Files the command and the library write or read where a user or an
//! attacker placed something: outputs named without an extension, journals
//! that are links, saves cut short.
#![cfg(unix)]

use std::path::Path;
use std::time::Duration;

use crate::common;
use common::{genapi_alone as genapi, Dir};

/// `-o cat` (no extension) becomes `cat.jpg` at the save, so the check
/// before paying looks at every name the save may pick: with `cat.jpg`
/// taken, nothing is submitted.
#[test]
fn an_output_without_extension_is_checked_under_the_name_the_save_will_use() {
    let dir = Dir::new("output-without-extension");
    std::fs::write(dir.join("cat.jpg"), b"mine").unwrap();
    let run = genapi(&dir).args(["generate", "x", "-o", "cat"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !stderr.contains("submitted task"),
        "paid for a result it then threw away:\n{stderr}"
    );
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(std::fs::read(dir.join("cat.jpg")).unwrap(), b"mine");
}

/// A journal that is a link to a device is refused (its replay would never
/// end).
#[test]
fn a_journal_that_is_a_link_to_a_device_is_refused() {
    let dir = Dir::new("journal-device");
    let path = dir.join("journal.jsonl");
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    let opened = genapi_batch::FileJournal::open(&path);
    assert!(
        opened.is_err(),
        "/dev/zero opened as a journal (its replay would never end)"
    );
}

/// A journal that is a link to a file elsewhere (planted in a shared --out)
/// is never written through.
#[test]
fn a_journal_is_never_written_through_a_planted_link() {
    use genapi_batch::{Event, Journal};
    let dir = Dir::new("journal-link");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"").unwrap();
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let path = dir.join("out").join("journal.jsonl");
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    if let Ok(mut journal) = genapi_batch::FileJournal::open(&path) {
        let _ = journal.append(&Event::Refused {
            line: 1,
            error: "x".into(),
        });
    }
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"",
        "the file the link names was written"
    );
}

/// A save that is cancelled (a caller's timeout, a batch stopping, the
/// command's --timeout) leaves no `.NAME.partial` behind.
#[tokio::test(start_paused = true)]
async fn a_cancelled_save_leaves_no_partial_file() {
    use genapi::api::types;
    use genapi_mock::{Fault, MockService};
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let output = client
        .run(types::Gen2ProRequest::builder().prompt("x").width(64).height(64))
        .await
        .unwrap();
    mock.inject(Fault::unavailable("/mock/results/", 3).times(4));
    let dir = Dir::new("cancelled-save");
    let saved = tokio::time::timeout(Duration::from_secs(1), output.save(dir.join("x.jpg"))).await;
    assert!(saved.is_err(), "cancelled");
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// One small gen-2-pro line, as a job file holds it.
fn one_line(dir: &Dir) {
    let line =
        serde_json::json!({"model": "gen-2-pro", "name": "fox", "prompt": "a red fox", "width": 64, "height": 64});
    std::fs::write(dir.join("jobs.jsonl"), format!("{line}\n")).unwrap();
}

/// A batch's page, thumbnails and results replace only files a batch wrote:
/// the user's `index.html` and a file of theirs in `thumbs/` are left as they
/// are (and the run says so), and a results file of someone else's refuses
/// the run before anything is paid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_leaves_a_page_thumbnails_and_results_it_did_not_write_as_they_are() {
    use crate::cli::{assert_exit, text};
    let mock = genapi_mock::MockService::start().await.unwrap();
    let dir = Dir::new("not-ours");
    one_line(&dir);
    // The user's own page in the folder the batch is given.
    std::fs::create_dir_all(dir.join("site")).unwrap();
    std::fs::write(dir.join("site/index.html"), "<h1>my page</h1>").unwrap();
    let run = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "site"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("warning: no gallery") && stderr.contains("not written by the gallery"),
        "the run says so: {stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("site/index.html")).unwrap(),
        "<h1>my page</h1>"
    );
    assert!(dir.join("site/fox.jpg").exists() && dir.join("site/results.jsonl").exists());

    // A file of the user's at a thumbnail's name: kept, and its tile says why
    // it has no thumbnail; the page is the gallery's own.
    std::fs::create_dir_all(dir.join("shots/thumbs")).unwrap();
    std::fs::write(dir.join("shots/thumbs/fox.jpg"), "mine").unwrap();
    let run = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "shots"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert_eq!(
        std::fs::read_to_string(dir.join("shots/thumbs/fox.jpg")).unwrap(),
        "mine"
    );
    let page = std::fs::read_to_string(dir.join("shots/index.html")).unwrap();
    assert!(page.contains("not written by the gallery"), "{page}");
    // A second run keeps its own page current: the gallery's page is its own.
    let again = common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "shots"])
        .output()
        .unwrap();
    assert_exit(&again, 0);
    assert!(!text(&again.stderr).contains("no gallery"), "{}", text(&again.stderr));

    // Someone else's results.jsonl (one starting with a blank line too):
    // nothing is sent.
    for (folder, theirs) in [("theirs", "id,score\n1,0.5\n"), ("notes", "\nMy precious notes\n")] {
        std::fs::create_dir_all(dir.join(folder)).unwrap();
        std::fs::write(dir.join(folder).join("results.jsonl"), theirs).unwrap();
        let sent = mock.count("POST", "/v1/gen-2-pro");
        let run = common::genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", folder])
            .output()
            .unwrap();
        assert_exit(&run, 2);
        assert!(
            text(&run.stderr).contains("not written by a batch"),
            "{}",
            text(&run.stderr)
        );
        assert_eq!(mock.count("POST", "/v1/gen-2-pro"), sent, "nothing was sent");
        assert_eq!(
            std::fs::read_to_string(dir.join(folder).join("results.jsonl")).unwrap(),
            theirs
        );
    }
}

/// What `-o` can never be written to is found before anything is paid:
/// a pipe (even with `--force`), and the file `--record` writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_output_that_cannot_be_written_is_refused_before_anything_is_paid() {
    use crate::cli::{assert_exit, output_within_a_minute, text};
    let mock = genapi_mock::MockService::start().await.unwrap();
    let dir = Dir::new("output-refused-first");
    assert!(std::process::Command::new("mkfifo")
        .arg(dir.join("pipe.png"))
        .status()
        .unwrap()
        .success());
    let run = output_within_a_minute(
        common::genapi(&dir, &mock).args(["--force", "generate", "x", "--size", "64x64", "-o", "pipe.png"]),
    );
    assert_exit(&run, 2);
    assert!(
        text(&run.stderr).contains("not a regular file"),
        "{}",
        text(&run.stderr)
    );
    for force in [false, true] {
        let mut command = common::genapi(&dir, &mock);
        command.args([
            "--record", "same.png", "generate", "x", "--size", "64x64", "-o", "same.png",
        ]);
        if force {
            command.arg("--force");
        }
        let run = output_within_a_minute(&mut command);
        assert_exit(&run, 2);
        assert!(
            text(&run.stderr).contains("--record and --out both name"),
            "{}",
            text(&run.stderr)
        );
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing was paid");
}

/// `--record FILE` follows the rules of `-o`: an existing file (the job
/// file itself, say) is refused before anything is sent, a link is never
/// written through, a pipe is refused at once; `--force` replaces a file,
/// and a link as a link.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recording_replaces_nothing_without_force_never_follows_a_link_and_never_waits_on_a_pipe() {
    use crate::cli::{assert_exit, output_within_a_minute, text};
    let mock = genapi_mock::MockService::start().await.unwrap();
    let dir = Dir::new("record-policy");
    one_line(&dir);
    let jobs = std::fs::read_to_string(dir.join("jobs.jsonl")).unwrap();
    let run = common::genapi(&dir, &mock)
        .args(["--record", "jobs.jsonl", "batch", "jobs.jsonl", "--out", "out"])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    assert!(text(&run.stderr).contains("exists"), "{}", text(&run.stderr));
    assert_eq!(
        std::fs::read_to_string(dir.join("jobs.jsonl")).unwrap(),
        jobs,
        "the job file is kept"
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing was sent");

    let victim = dir.join("victim.txt");
    std::fs::write(&victim, "keep me").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("link.har")).unwrap();
    let generate = |record: &str, force: bool| {
        let mut command = common::genapi(&dir, &mock);
        command.args(["--record", record, "generate", "x", "--size", "64x64", "-o"]);
        command.arg(format!("{record}.jpg"));
        if force {
            command.arg("--force");
        }
        output_within_a_minute(&mut command)
    };
    let refused = generate("link.har", false);
    assert_exit(&refused, 2);
    assert!(text(&refused.stderr).contains("link"), "{}", text(&refused.stderr));
    let forced = generate("link.har", true);
    assert_exit(&forced, 0);
    assert_eq!(
        std::fs::read_to_string(&victim).unwrap(),
        "keep me",
        "never written through"
    );
    let recorded = std::fs::symlink_metadata(dir.join("link.har")).unwrap();
    assert!(recorded.file_type().is_file(), "the link itself was replaced");
    assert!(std::fs::read_to_string(dir.join("link.har"))
        .unwrap()
        .contains("\"entries\""));

    let fifo = dir.join("pipe.har");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for force in [false, true] {
        let run = generate("pipe.har", force);
        assert_exit(&run, 2);
        assert!(
            text(&run.stderr).contains("not a regular file"),
            "{}",
            text(&run.stderr)
        );
    }
    assert_eq!(
        mock.count("POST", "/v1/gen-2-pro"),
        1,
        "only the forced run sent anything"
    );
}

/// Inputs that are not regular files (a device, a pipe) are refused at
/// once wherever a path is read: a recording to replay, the ledger's CA file.
#[test]
fn a_device_or_a_pipe_is_never_read_as_a_recording_or_a_certificate() {
    use crate::cli::{assert_exit, output_within_a_minute, text};
    let dir = Dir::new("inputs-not-regular");
    let fifo = dir.join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for input in [Path::new("/dev/zero"), fifo.as_path()] {
        let run = output_within_a_minute(genapi(&dir).arg("mock").arg("--replay").arg(input));
        assert_exit(&run, 2);
        assert!(
            text(&run.stderr).contains("not a regular file"),
            "{}",
            text(&run.stderr)
        );
        // The ledger reads its CA file before it dials: no server is needed.
        let url = format!(
            "postgres://u@127.0.0.1:1/x?sslmode=verify-ca&sslrootcert={}",
            input.display()
        );
        one_line(&dir);
        let run = output_within_a_minute(
            genapi(&dir)
                .env("GENAPI_API_KEY", "k-unused")
                .env("GENAPI_BASE_URL", "http://127.0.0.1:9")
                .args(["batch", "jobs.jsonl", "--status", "--ledger"])
                .arg(&url),
        );
        assert_ne!(run.status.code(), Some(0));
        let stderr = text(&run.stderr);
        assert!(
            stderr.contains("sslrootcert") && stderr.contains("not a regular file"),
            "{stderr}"
        );
    }
}

/// A grid whose job lines cannot fit in a job file is refused at once,
/// naming its size, before a line is made or a file written.
#[test]
fn a_grid_too_big_for_a_job_file_is_refused_before_anything_is_built() {
    use crate::cli::{assert_exit, output_within_a_minute, text};
    let dir = Dir::new("grid-too-big");
    let prompts: Vec<String> = (1..=3200).map(|n| format!("prompt number {n}")).collect();
    let seeds: Vec<String> = (1..=3200).map(|n| n.to_string()).collect();
    let mut command = genapi(&dir);
    command.arg("grid");
    for prompt in &prompts {
        command.args(["--prompt", prompt]);
    }
    command.args(["--sweep", &format!("seed={}", seeds.join(","))]);
    command.args(["-o", "sweep.jsonl"]);
    let run = output_within_a_minute(&mut command);
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("3200 prompts by 3200 values is 10240000 cells"),
        "{stderr}"
    );
    assert!(stderr.contains("64 MiB"), "{stderr}");
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.iter().all(|name| name == "cache"), "nothing written: {left:?}");
}
