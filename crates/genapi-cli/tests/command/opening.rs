//! `--open`: the saved image, or a batch's gallery, is handed to the
//! desktop's opener (here a script named by GENAPI_OPENER that records what
//! it was given); without an opener the command says so and its work and
//! exit code stand.

use crate::cli::text;
use crate::common::{genapi, roomy_mock, Dir};

/// A script that appends each file it is asked to open to `opened.txt` in
/// `dir`, and keeps a copy of the last one as `seen` (what a viewer showed).
#[cfg(unix)]
fn recording_opener(dir: &Dir) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("opener.sh");
    let body = format!(
        "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{log}'\ncp \"$1\" '{seen}'\n",
        log = dir.join("opened.txt").display(),
        seen = dir.join("seen").display()
    );
    std::fs::write(&script, body).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    script
}

/// The files the opener was given, a line each.
#[cfg(unix)]
fn opened(dir: &Dir) -> Vec<String> {
    std::fs::read_to_string(dir.join("opened.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_open_opens_the_saved_image() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-generate");
    let opener = recording_opener(&dir);
    let run = genapi(&dir, &mock)
        .args(["generate", "a fox", "--size", "512x512", "-o", "fox.jpg", "--open"])
        .env("GENAPI_OPENER", &opener)
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    assert_eq!(opened(&dir), ["fox.jpg"]);
    assert_eq!(
        std::fs::read(dir.join("seen")).unwrap(),
        std::fs::read(dir.join("fox.jpg")).unwrap(),
        "the opener was given the image once it was saved whole"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_opener_the_image_is_saved_and_the_command_says_so() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-none");
    let run = genapi(&dir, &mock)
        .args(["generate", "a fox", "--size", "512x512", "-o", "fox.jpg", "--open"])
        .env("GENAPI_OPENER", dir.join("no-such-opener"))
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
    crate::common::write_jobs(&dir.join("night.jsonl"), 3, "night");
    let run = genapi(&dir, &mock)
        .args(["batch", "night.jsonl", "--out", "shots", "--open", "-q"])
        .env("GENAPI_OPENER", &opener)
        .output()
        .unwrap();
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

/// A batch run again over lines all saved: the gallery the viewer gets as
/// it starts already shows them saved, with their count and images.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rerun_opens_a_gallery_that_shows_the_lines_saved_before() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("open-batch-rerun");
    let opener = recording_opener(&dir);
    crate::common::write_jobs(&dir.join("night.jsonl"), 3, "night");
    let first = genapi(&dir, &mock)
        .args(["batch", "night.jsonl", "--out", "shots", "--no-gallery", "-q"])
        .output()
        .unwrap();
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert!(!dir.join("shots/index.html").exists());
    let again = genapi(&dir, &mock)
        .args(["batch", "night.jsonl", "--out", "shots", "--open", "-q"])
        .env("GENAPI_OPENER", &opener)
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(0), "{}", text(&again.stderr));
    let seen = std::fs::read_to_string(dir.join("seen")).unwrap();
    assert!(seen.contains("genapi batch: 3 lines"), "{seen}");
    assert!(seen.contains("3 saved"), "{seen}");
    assert!(
        seen.contains("src=\"thumbs/img-3.jpg\""),
        "the saved images shown: {seen}"
    );
    assert!(
        seen.contains("<meta http-equiv=\"refresh\""),
        "opened at the start: {seen}"
    );
}
