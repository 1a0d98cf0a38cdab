//! `-o -`: the image's bytes on standard output, for a pipe or a redirect;
//! every line the command says goes to stderr then. Where the bytes would
//! have nowhere sensible to go, nothing is sent.

use std::time::Duration;

use crate::cli::text;
use crate::common::{dimensions, genapi, roomy_mock, Dir};
use crate::terminal::Terminal;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_goes_to_standard_output_and_the_report_to_stderr() {
    let mock = roomy_mock(10).await;
    let dir = Dir::new("stdout-image");
    let mut command = genapi(&dir, &mock);
    command.args(["generate", "a lighthouse", "--size", "96x64", "-o", "-"]);
    // Under a umask that leaves new folders open to the group, as some
    // systems set it: the cache folder is still made the user's alone.
    #[cfg(unix)]
    // SAFETY: umask is async-signal-safe and cannot fail.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut command, || {
            libc::umask(0o002);
            Ok(())
        });
    }
    let run = command.output().unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert_eq!(
        dimensions(&run.stdout),
        Some((96, 64)),
        "stdout is not the image: {said}"
    );
    assert!(
        said.contains("Ready") && said.contains("written to standard output"),
        "{said}"
    );
    // The folder holds only the cache the test gives the command.
    let files: Vec<_> = std::fs::read_dir(dir.join("."))
        .unwrap()
        .map(|f| f.unwrap().file_name())
        .filter(|name| name != "cache")
        .collect();
    assert!(files.is_empty(), "-o - wrote a file: {files:?}");
    // The result went through a hidden file of the command's, gone now.
    let cache = dir.join("cache").join("genapi");
    let left: Vec<_> = std::fs::read_dir(&cache)
        .map(|entries| entries.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(
        !left.iter().any(|name| name.to_string_lossy().ends_with(".partial")),
        "a hidden file was left behind: {left:?}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(&cache).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "the cache folder is the user's alone: {mode:o}");
    }

    // `get -o -` of the same task writes the same kind of bytes, and its
    // state line goes to stderr too.
    let id = mock.created_tasks()[0].id.clone();
    let got = genapi(&dir, &mock).args(["get", &id, "-o", "-"]).output().unwrap();
    assert_eq!(got.status.code(), Some(0), "{}", text(&got.stderr));
    assert_eq!(dimensions(&got.stdout), Some((96, 64)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_the_bytes_cannot_go_nothing_is_sent() {
    let mock = roomy_mock(10).await;
    let dir = Dir::new("stdout-refused");

    let many = genapi(&dir, &mock)
        .args(["generate", "x", "-n", "3", "-o", "-"])
        .output()
        .unwrap();
    let said = text(&many.stderr);
    assert_eq!(many.status.code(), Some(2), "{said}");
    assert!(said.contains("-n 3") && said.contains("-o shots/"), "{said}");
    assert_eq!(said.matches("nothing was submitted").count(), 1, "said once: {said}");

    let json = genapi(&dir, &mock)
        .args(["generate", "x", "--json", "-o", "-"])
        .output()
        .unwrap();
    assert_eq!(json.status.code(), Some(2));
    assert!(text(&json.stderr).contains("--json and -o -"));

    let opened = genapi(&dir, &mock)
        .args(["generate", "x", "--open", "-o", "-"])
        .output()
        .unwrap();
    assert_eq!(opened.status.code(), Some(2));
    assert!(text(&opened.stderr).contains("--open opens a saved file"));

    let mut command = genapi(&dir, &mock);
    command.args(["generate", "x", "-o", "-"]);
    let (code, screen) = Terminal::spawn(command).finish(Duration::from_secs(60));
    assert_eq!(code, Some(2), "{screen}");
    assert!(screen.contains("which is a terminal here"), "{screen}");

    assert_eq!(mock.requests().len(), 0, "a refused -o - sent something");
}

/// A reader that stops before the image's end leaves a task paid for and
/// its result not written: said once, with the one command that writes it
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_stops_early_is_told_once_how_to_write_the_image_again() {
    let mock = roomy_mock(10).await;
    let dir = Dir::new("stdout-closed");
    let mut child = genapi(&dir, &mock)
        .args(["generate", "a lighthouse", "-o", "-"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes before a byte is read.
    drop(child.stdout.take());
    let run = child.wait_with_output().unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(1), "{said}");
    assert!(said.contains("standard output did not take the whole image"), "{said}");
    let id = mock.created_tasks()[0].id.clone();
    assert_eq!(said.matches("genapi wait --out=-").count(), 1, "{said}");
    let resume = said
        .lines()
        .find(|line| line.starts_with("resume with: "))
        .unwrap_or_default();
    assert!(resume.contains(&id), "{said}");
}
