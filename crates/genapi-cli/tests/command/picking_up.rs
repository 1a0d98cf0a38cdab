//! `submit`, `wait` and `get`: a task is picked up again by the command the
//! previous one printed, and every command printed can succeed.

use std::path::Path;

use crate::cli::Mock;
use crate::common::{genapi_alone, said, Dir};

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The files whose name starts with a dot in `dir`.
fn hidden(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| name.starts_with('.'))
        .collect()
}

/// The arguments of the `genapi …` command printed after `prefix`.
fn printed_command(text: &str, prefix: &str) -> Vec<String> {
    let start = text
        .find(prefix)
        .unwrap_or_else(|| panic!("{prefix:?} not printed: {text}"))
        + prefix.len();
    let line = text[start..].lines().next().unwrap_or_default();
    let words: Vec<String> = line
        .split_whitespace()
        .map(|word| word.trim_matches('\'').to_string())
        .collect();
    assert_eq!(words.first().map(String::as_str), Some("genapi"), "{line}");
    words[1..].to_vec()
}

fn format_of(path: &Path) -> Option<genapi::ImageFormat> {
    genapi::ImageFormat::sniff(&std::fs::read(path).unwrap_or_default())
}

#[test]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
fn on_the_built_in_mock_submit_and_wait_say_they_need_one_genapi_mock_and_with_one_they_work() {
    let dir = Dir::new("submit-wait-builtin");
    let submitted = genapi_alone(&dir).args(["submit", "a boat"]).output().unwrap();
    assert_eq!(submitted.status.code(), Some(0), "{}", said(&submitted));
    let stderr = text(&submitted.stderr);
    assert!(
        stderr.contains("Between `genapi submit` and `genapi wait`, keep one `genapi mock` running"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("wait for it with"),
        "no command that cannot succeed: {stderr}"
    );
    let id = text(&submitted.stdout).split('\t').next().unwrap().trim().to_string();

    for command in ["wait", "get"] {
        let run = genapi_alone(&dir).args([command, &id]).output().unwrap();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(7), "{stderr}");
        assert!(stderr.contains("keep one `genapi mock` running"), "{command}: {stderr}");
        assert!(!stderr.contains("resume with"), "{command}: {stderr}");
        assert!(
            !stderr.contains("using the built-in mock"),
            "said before any mock starts: {stderr}"
        );
    }

    // A polling URL names a service of its own, which nothing configured
    // reaches: said so, not that the built-in mock lost the task.
    for command in ["wait", "get"] {
        let run = genapi_alone(&dir)
            .args([command, "http://127.0.0.1:9/v1/get_result?id=t1"])
            .output()
            .unwrap();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("is an address of http://127.0.0.1:9") && stderr.contains("GENAPI_BASE_URL"),
            "{command}: {stderr}"
        );
        assert!(!stderr.contains("not found"), "{command}: {stderr}");
    }

    // With one `genapi mock`, as said: the printed command finishes the task,
    // in the format its --out asked for at submission.
    let mock = Mock::start(&dir, &["--duration-ms", "50"]);
    let submitted = mock
        .command(&dir)
        .args(["submit", "a boat", "-o", "boat.png"])
        .output()
        .unwrap();
    assert_eq!(submitted.status.code(), Some(0), "{}", said(&submitted));
    let wait = printed_command(&text(&submitted.stderr), "wait for it with: ");
    assert_eq!(wait[..4], ["wait", "--out", "boat.png", "--"], "{wait:?}");
    // Its id alone, with nothing configured: the history knows where it
    // went, and that is said rather than that the built-in mock lost it.
    let id = wait[4].split("id=").nth(1).unwrap().to_string();
    let alone = genapi_alone(&dir).args(["wait", &id]).output().unwrap();
    let stderr = text(&alone.stderr);
    assert_eq!(alone.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("task {id} was sent to {}", mock.variable("GENAPI_BASE_URL")))
            && stderr.contains("GENAPI_BASE_URL and GENAPI_API_KEY"),
        "{stderr}"
    );
    assert!(!stderr.contains("not found"), "{stderr}");
    // With the service configured and --mock given, dropping --mock is the
    // fix.
    let forced = mock.command(&dir).args(["--mock", "wait", &id]).output().unwrap();
    let stderr = text(&forced.stderr);
    assert_eq!(forced.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--mock is given") && stderr.contains("drop --mock") && !stderr.contains("no service"),
        "{stderr}"
    );
    let waited = mock.command(&dir).args(&wait).output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", said(&waited));
    assert_eq!(format_of(&dir.join("boat.png")), Some(genapi::ImageFormat::Png));

    // --force, as `generate` takes it: the name is free to replace, and the
    // printed command replaces it.
    let refused = mock
        .command(&dir)
        .args(["submit", "a boat", "-o", "boat.png"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", said(&refused));
    let submitted = mock
        .command(&dir)
        .args(["submit", "a boat", "-o", "boat.png", "--force"])
        .output()
        .unwrap();
    assert_eq!(submitted.status.code(), Some(0), "{}", said(&submitted));
    let wait = printed_command(&text(&submitted.stderr), "wait for it with: ");
    assert_eq!(wait[..5], ["wait", "--out", "boat.png", "--force", "--"], "{wait:?}");
    let waited = mock.command(&dir).args(&wait).output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", said(&waited));

    // A name that begins as an option does is printed so that it is read
    // as the value it is.
    let submitted = mock
        .command(&dir)
        .args(["submit", "a dash", "--out=-dash.png"])
        .output()
        .unwrap();
    assert_eq!(submitted.status.code(), Some(0), "{}", said(&submitted));
    let wait = printed_command(&text(&submitted.stderr), "wait for it with: ");
    assert_eq!(wait[..2], ["wait", "--out=-dash.png"], "{wait:?}");
    let waited = mock.command(&dir).args(&wait).output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", said(&waited));
    assert_eq!(format_of(&dir.join("-dash.png")), Some(genapi::ImageFormat::Png));
}

/// A task picked up by its id alone is reported, once saved, with the
/// address the service polls it at (its polling host), as `submit` gave
/// it: never the bare id, nor the base URL's address, which does not know
/// the task.
#[test]
fn a_task_picked_up_by_id_is_reported_with_its_real_polling_url() {
    let dir = Dir::new("picked-up-polling-url");
    let mock = Mock::start(&dir, &["--duration-ms", "50"]);
    let submitted = mock.command(&dir).args(["--json", "submit", "a fox"]).output().unwrap();
    assert_eq!(submitted.status.code(), Some(0), "{}", said(&submitted));
    let accepted: serde_json::Value = serde_json::from_slice(&submitted.stdout).unwrap();
    let (id, polling_url) = (
        accepted["id"].as_str().unwrap(),
        accepted["polling_url"].as_str().unwrap(),
    );
    for command in ["wait", "get"] {
        let run = mock
            .command(&dir)
            .args(["--json", command, id, "-o", &format!("{command}.jpg")])
            .output()
            .unwrap();
        assert_eq!(run.status.code(), Some(0), "{command}: {}", said(&run));
        let reported: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
        assert_eq!(reported["polling_url"], polling_url, "{command}: {reported}");
        if command == "wait" {
            // Charged when `submit` sent it: no credits are counted until
            // it ends, then what it settled at.
            let stderr = said(&run);
            let counts: Vec<_> = stderr.lines().filter(|line| line.contains("1 done,")).collect();
            assert!(
                counts
                    .first()
                    .is_some_and(|first| first.contains("0/1 done") && !first.contains("credits")),
                "{stderr}"
            );
            assert!(
                counts
                    .last()
                    .is_some_and(|last| last.contains("1/1 done") && last.ends_with(" credits")),
                "{stderr}"
            );
        }
    }
}

#[test]
fn wait_and_get_into_a_name_of_another_format_check_the_real_name_and_print_a_command_that_works() {
    let dir = Dir::new("wrong-extension");
    let mock = Mock::start(&dir, &["--duration-ms", "50"]);
    for command in ["wait", "get"] {
        let submitted = mock.command(&dir).args(["submit", "a jpeg"]).output().unwrap();
        assert_eq!(submitted.status.code(), Some(0), "{}", said(&submitted));
        let id = text(&submitted.stdout).split('\t').next().unwrap().trim().to_string();
        // Finished, so `get` saves it too.
        let ready = mock
            .command(&dir)
            .args(["wait", &id, "-o", "first.jpg", "--force"])
            .output()
            .unwrap();
        assert_eq!(ready.status.code(), Some(0), "{}", said(&ready));
        std::fs::write(dir.join("x.jpg"), b"mine").unwrap();

        let run = mock.command(&dir).args([command, &id, "-o", "x.png"]).output().unwrap();
        let stderr = text(&run.stderr);
        // The task is paid for: a result that could not be written (1),
        // never "nothing was charged" (2).
        assert_eq!(run.status.code(), Some(1), "{command}: {stderr}");
        assert!(stderr.contains("x.jpg exists"), "{command}: {stderr}");
        assert_eq!(std::fs::read(dir.join("x.jpg")).unwrap(), b"mine", "nothing replaced");
        assert!(!dir.join("x.png").exists());
        assert_eq!(
            hidden(&dir.0),
            Vec::<String>::new(),
            "{command}: nothing hidden left behind"
        );

        // One next step, the one that works: under a free name.
        assert_eq!(stderr.matches("resume with: ").count(), 1, "{command}: {stderr}");
        let again = printed_command(&stderr, "resume with: ");
        assert_eq!(again[..3], ["wait", "--out", "x-2.jpg"], "{again:?}");
        let saved = mock.command(&dir).args(&again).output().unwrap();
        assert_eq!(
            saved.status.code(),
            Some(0),
            "{command}: the printed command works: {}",
            said(&saved)
        );
        assert_eq!(format_of(&dir.join("x-2.jpg")), Some(genapi::ImageFormat::Jpeg));
        assert_eq!(hidden(&dir.0), Vec::<String>::new());
        // A name of no image format is written as given, with a word.
        let txt = mock.command(&dir).args([command, &id, "-o", "y.txt"]).output().unwrap();
        assert_eq!(txt.status.code(), Some(0), "{command}: {}", said(&txt));
        assert!(
            text(&txt.stderr).contains("the result is jpeg, and .txt is no image extension"),
            "{command}: {}",
            said(&txt)
        );
        assert_eq!(format_of(&dir.join("y.txt")), Some(genapi::ImageFormat::Jpeg));
        // JPEG's other names are its own: no word.
        let jfif = mock
            .command(&dir)
            .args([command, &id, "-o", "z.jfif"])
            .output()
            .unwrap();
        assert_eq!(jfif.status.code(), Some(0), "{command}: {}", said(&jfif));
        assert!(!text(&jfif.stderr).contains("extension"), "{command}: {}", said(&jfif));
        assert_eq!(format_of(&dir.join("z.jfif")), Some(genapi::ImageFormat::Jpeg));
        for name in ["x.jpg", "x-2.jpg", "first.jpg", "y.txt", "z.jfif"] {
            std::fs::remove_file(dir.join(name)).unwrap();
        }
    }
}

#[test]
fn an_out_folder_named_with_a_trailing_slash_is_made_as_batch_makes_its_folder() {
    let dir = Dir::new("out-folder");
    let run = genapi_alone(&dir)
        .args(["generate", "a fox", "-o", "newdir/"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", said(&run));
    let saved: Vec<_> = std::fs::read_dir(dir.join("newdir")).unwrap().collect();
    assert_eq!(saved.len(), 1, "{saved:?}");
}

/// `wait` on a service nothing answers for says, as it goes, that its polls
/// fail and why, and its timeout names the last failure: it does not look
/// like a task still running. The resume line stays, for when the service
/// is back.
#[test]
fn a_wait_whose_polls_fail_says_why_as_it_goes_and_when_it_gives_up() {
    let dir = Dir::new("polls-fail");
    // Nothing listens there: every poll is refused. The timeout leaves a
    // process on a tenth of a core time to start and poll once.
    let port = crate::common::free_ports(1);
    let run = genapi_alone(&dir)
        .env("GENAPI_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("GENAPI_API_KEY", "key-polls-fail")
        .args(["--timeout", "20", "wait", "t-unreachable"])
        .output()
        .unwrap();
    let said = said(&run);
    assert_eq!(run.status.code(), Some(8), "a timeout: {said}");
    assert!(
        said.contains("task t-unreac: a poll failed, polling again until --timeout: network error"),
        "{said}"
    );
    assert!(
        said.contains("--timeout 20s passed before the task finished; its last poll failed: network error"),
        "{said}"
    );
    assert!(said.contains("resume with: genapi wait"), "{said}");
}

/// On a terminal, where a bar shows progress, a failing poll is said above
/// it: the bar alone would show a task still in flight.
#[cfg(unix)]
#[test]
fn on_a_terminal_a_failing_poll_is_said_above_the_bar() {
    let dir = Dir::new("polls-fail-terminal");
    let port = crate::common::free_ports(1);
    let mut command = genapi_alone(&dir);
    command
        .env("GENAPI_BASE_URL", format!("http://127.0.0.1:{port}"))
        .env("GENAPI_API_KEY", "key-polls-fail")
        .args(["--timeout", "20", "wait", "t-unreachable"]);
    let (code, screen) = crate::terminal::Terminal::spawn(command).finish(std::time::Duration::from_secs(60));
    assert_eq!(code, Some(8), "{screen}");
    assert!(
        screen.contains("wait: task t-unreac: a poll failed, polling again until --timeout: network error"),
        "{screen}"
    );
}

/// A paid result whose `-o` came to be no regular file while its task ran
/// (a link the user replaces with `--force`, changed to lead to a device;
/// a folder made there) is refused at the save, with no word of `--force`,
/// which would not replace it either, and the command printed to fetch it
/// names a free file beside it, which the same name would never be: that
/// command saves it.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_whose_output_became_a_device_or_a_folder_while_it_ran_is_resumed_under_a_free_name() {
    use std::time::{Duration, Instant};
    let mock = genapi_mock::MockService::start().await.unwrap();
    for (case, force) in [("device", true), ("folder", false)] {
        let dir = Dir::new(&format!("output-became-a-{case}"));
        std::fs::write(dir.join("old.jpg"), b"old").unwrap();
        if force {
            std::os::unix::fs::symlink("old.jpg", dir.join("out.jpg")).unwrap();
        }
        let mut command = crate::common::genapi(&dir, &mock);
        if force {
            command.arg("--force");
        }
        let child = command
            .args([
                "generate",
                "x [mock:duration_ms=3600000]",
                "--size",
                "64x64",
                "-o",
                "out.jpg",
            ])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        // The task cannot end before the mock's clock is moved past it.
        let submitted = mock.count("POST", "/v1/gen-2-pro");
        let until = Instant::now() + Duration::from_secs(60);
        while mock.count("POST", "/v1/gen-2-pro") == submitted {
            assert!(Instant::now() < until, "{case}: nothing was submitted");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if force {
            std::fs::remove_file(dir.join("out.jpg")).unwrap();
            std::os::unix::fs::symlink("/dev/null", dir.join("out.jpg")).unwrap();
        } else {
            std::fs::create_dir(dir.join("out.jpg")).unwrap();
        }
        mock.advance(Duration::from_secs(3601));
        let run = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .unwrap()
            .unwrap();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{case}: paid for, not saved: {stderr}");
        assert!(
            stderr.contains("not a regular file") && !stderr.contains("--force"),
            "{case}: {stderr}"
        );
        let again = printed_command(&stderr, "resume with: ");
        assert_eq!(again[..3], ["wait", "--out", "out-2.jpg"], "{case}: {again:?}");
        let saved = crate::common::genapi(&dir, &mock).args(&again).output().unwrap();
        assert_eq!(saved.status.code(), Some(0), "{case}: {}", said(&saved));
        assert_eq!(format_of(&dir.join("out-2.jpg")), Some(genapi::ImageFormat::Jpeg));
        assert_eq!(std::fs::read(dir.join("old.jpg")).unwrap(), b"old");
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 2, "each paid once");
}
