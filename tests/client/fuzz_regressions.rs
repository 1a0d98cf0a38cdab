//! Replays the kept fuzz corpora (`fuzz/seeds` and the minimised
//! `fuzz/regressions`) through the fuzz targets' own checks, so what fuzzing
//! found keeps being tested by `cargo test`.
//!
//! `fuzz/kept-corpus.txt` lists every kept file. A listed file that is missing
//! or unreadable, a target or set with no file, or a file on disk that is not
//! listed fails the run: losing the corpus can no longer pass silently. After
//! adding regressions, regenerate the list from the `fuzz` folder with
//! `find seeds regressions -type f | LC_ALL=C sort > kept-corpus.txt`.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

#[path = "../../fuzz/checks.rs"]
mod checks;

const SETS: [&str; 2] = ["seeds", "regressions"];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

/// The kept files of one target, as listed: `(set, path relative to fuzz/)`.
fn listed(target: &str) -> Vec<(&'static str, String)> {
    let manifest = fuzz_dir().join("kept-corpus.txt");
    let text = std::fs::read_to_string(&manifest).unwrap_or_else(|e| panic!("{}: {e}", manifest.display()));
    let mut files = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let mut parts = line.splitn(3, '/');
        let (set, file_target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
        let set = SETS
            .into_iter()
            .find(|s| *s == set)
            .unwrap_or_else(|| panic!("kept-corpus.txt: {line} is in no known set"));
        if file_target == target {
            files.push((set, line.to_string()));
        }
    }
    files
}

/// Replays every listed file of `target` through `check`, after checking the
/// list against the folders. Returns how many files each set holds.
fn replay(target: &str, check: fn(&[u8])) -> [usize; 2] {
    let files = listed(target);
    let mut counts = [0; 2];
    for (index, set) in SETS.into_iter().enumerate() {
        let dir = fuzz_dir().join(set).join(target);
        let on_disk: BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|entry| {
                let entry = entry.unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
                format!("{set}/{target}/{}", entry.file_name().to_string_lossy())
            })
            .collect();
        let expected: BTreeSet<String> = files
            .iter()
            .filter(|(s, _)| *s == set)
            .map(|(_, f)| f.clone())
            .collect();
        let missing: Vec<_> = expected.difference(&on_disk).collect();
        assert!(missing.is_empty(), "listed in kept-corpus.txt but missing: {missing:?}");
        let unlisted: Vec<_> = on_disk.difference(&expected).collect();
        assert!(unlisted.is_empty(), "not listed in kept-corpus.txt: {unlisted:?}");
        assert!(!expected.is_empty(), "no {set} for {target}");
        for file in &expected {
            let path = fuzz_dir().join(file);
            check(&std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())));
        }
        counts[index] = expected.len();
    }
    counts
}

// The floors are the sizes kept when the list was written; fuzzing only adds.

#[test]
fn decode_responses_corpus() {
    let [seeds, regressions] = replay("decode_responses", checks::decode_responses);
    assert!(
        seeds >= 6 && regressions >= 918,
        "{seeds} seeds, {regressions} regressions"
    );
}

#[test]
fn webhook_verify_corpus() {
    let [seeds, regressions] = replay("webhook_verify", checks::webhook_verify);
    assert!(
        seeds >= 3 && regressions >= 667,
        "{seeds} seeds, {regressions} regressions"
    );
}

#[test]
fn image_inputs_corpus() {
    let [seeds, regressions] = replay("image_inputs", checks::image_inputs);
    assert!(
        seeds >= 4 && regressions >= 693,
        "{seeds} seeds, {regressions} regressions"
    );
}

#[test]
fn validator_corpus() {
    let [seeds, regressions] = replay("validator", checks::validator);
    assert!(
        seeds >= 4 && regressions >= 855,
        "{seeds} seeds, {regressions} regressions"
    );
}

#[test]
fn transport_corpus() {
    let [seeds, regressions] = replay("transport", checks::transport);
    assert!(
        seeds >= 5 && regressions >= 3657,
        "{seeds} seeds, {regressions} regressions"
    );
}
