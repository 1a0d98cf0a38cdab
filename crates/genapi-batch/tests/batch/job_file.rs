//! A job file is checked, every line, before anything is sent; then its valid
//! lines come out as jobs ready to submit, images read and encoded.

use crate::common;

use common::{b64, png_header, Dir};
use genapi_batch::{JobFile, LineProblem, JOB_FILE_LIMIT};
use serde_json::json;

fn write_lines(dir: &Dir, lines: &[serde_json::Value]) -> std::path::PathBuf {
    let path = dir.join("jobs.jsonl");
    let text: Vec<String> = lines.iter().map(ToString::to_string).collect();
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    path
}

#[test]
fn every_problem_of_every_line_is_named_before_anything_is_read_as_a_job() {
    let dir = Dir::new("job-file-problems");
    let path = dir.join("jobs.jsonl");
    let lines = [
        json!({"model": "gen-2-pro", "name": "ok", "prompt": "fine"}).to_string(),
        json!({"model": "gen-2-prp", "prompt": "typo"}).to_string(),
        "not json".to_string(),
        json!({"model": "gen-2-pro", "prompt": "small", "width": 48}).to_string(),
        json!({"model": "gen-2-pro", "name": "../up", "promt": "x"}).to_string(),
        json!({"model": "gen-2-pro", "name": "ok", "prompt": "again"}).to_string(),
        json!({"model": "gen-2-pro", "input_image": "missing.png", "prompt": "x"}).to_string(),
        json!({"model": "gen-2-pro", "input_image": 7, "prompt": "x"}).to_string(),
        String::new(),
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let checked = JobFile::check(&path).unwrap();
    assert_eq!(checked.lines(), 8, "the blank line is not a job");
    let invalid: Vec<(u64, &[LineProblem])> = checked
        .invalid()
        .iter()
        .map(|i| (i.line, i.problems.as_slice()))
        .collect();
    assert_eq!(invalid.len(), 7, "{invalid:#?}");

    let LineProblem::UnknownModel(unknown) = &invalid[0].1[0] else {
        panic!("{invalid:?}")
    };
    assert_eq!((invalid[0].0, unknown.suggestion.as_deref()), (2, Some("gen-2-pro")));
    assert!(matches!(&invalid[1], (3, [LineProblem::NotAJobLine(_)])));
    assert!(
        matches!(&invalid[2], (4, [LineProblem::Invalid { field, .. }]) if field == "width"),
        "{:?}",
        invalid[2]
    );
    assert_eq!(
        invalid[3],
        (
            5,
            &[
                LineProblem::UnsafeName("../up".into()),
                LineProblem::UnknownField {
                    model: "gen-2-pro".into(),
                    field: "promt".into(),
                    suggestion: Some("prompt".into())
                }
            ][..]
        )
    );
    assert_eq!(
        invalid[4],
        (
            6,
            &[LineProblem::RepeatedName {
                name: "ok".into(),
                first: 1
            }][..]
        )
    );
    assert!(
        matches!(&invalid[5], (7, [LineProblem::Image { field, message }])
            if field == "input_image" && message.contains("missing.png")),
        "{:?}",
        invalid[5]
    );
    assert!(matches!(&invalid[6], (8, [LineProblem::Image { field, .. }]) if field == "input_image"));
    let shown = checked.invalid()[3].to_string();
    assert!(shown.starts_with("line 5: name \"../up\""), "{shown}");

    let jobs: Vec<_> = checked.jobs().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!((jobs[0].line, jobs[0].stem().as_str()), (1, "ok"));
}

#[test]
fn valid_lines_become_jobs_with_their_images_encoded_relative_to_the_file() {
    let dir = Dir::new("job-file-jobs");
    std::fs::create_dir_all(dir.join("in")).unwrap();
    let image = png_header(64, 48);
    std::fs::write(dir.join("in/person.png"), &image).unwrap();
    let path = write_lines(
        &dir,
        &[
            json!({"model": "/v1/gen-2-pro", "name": "fox", "prompt": "a red fox", "seed": 7}),
            json!({"model": "gen-2-pro", "prompt": "edit", "input_image": "in/person.png",
                   "input_image_2": "https://example.com/coat.png"}),
        ],
    );
    // Run from elsewhere: image paths are the file's, not the process's.
    let checked = JobFile::check(&path).unwrap();
    assert!(checked.invalid().is_empty(), "{:?}", checked.invalid());
    let jobs: Vec<_> = checked.jobs().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(jobs.len(), 2);
    assert_eq!(jobs[0].path, "/v1/gen-2-pro");
    assert_eq!(jobs[0].body, json!({"prompt": "a red fox", "seed": 7}));
    assert_eq!(jobs[1].stem(), "line-2");
    assert_eq!(jobs[1].body["input_image"], b64(&image));
    assert_eq!(jobs[1].body["input_image_2"], "https://example.com/coat.png");
}

#[test]
fn a_line_that_changes_after_the_check_is_not_sent() {
    let dir = Dir::new("job-file-changed");
    let path = write_lines(
        &dir,
        &[
            json!({"model": "gen-2-pro", "prompt": "one"}),
            json!({"model": "gen-2-pro", "prompt": "two"}),
            json!({"model": "gen-2-pro", "prompt": "three"}),
            json!({"model": "gen-2-pro", "name": "n", "prompt": "four"}),
        ],
    );
    let checked = JobFile::check(&path).unwrap();
    let before = checked.digest().to_string();
    // Line 2 gets a model typo, line 3 a field the model lacks (still a
    // job line), line 4 a name that is not safe; a fifth line is added.
    let lines = [
        json!({"model": "gen-2-pro", "prompt": "one"}).to_string(),
        json!({"model": "gen-2-prp", "prompt": "two"}).to_string(),
        json!({"model": "gen-2-pro", "prompt": "three", "widht": 5}).to_string(),
        json!({"model": "gen-2-pro", "name": "../n", "prompt": "four"}).to_string(),
        json!({"model": "gen-2-pro", "prompt": "five", "colour": "red"}).to_string(),
    ];
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let read: Vec<_> = checked.jobs().unwrap().collect();
    assert_eq!(read.len(), 5);
    assert_eq!(read[0].as_ref().map(|job| job.line), Ok(1));
    for (index, outcome) in read.iter().enumerate().skip(1) {
        let changed = outcome.as_ref().unwrap_err();
        assert_eq!(changed.line, index as u64 + 1);
        assert!(matches!(changed.problems[..], [LineProblem::Changed(_)]), "{changed}");
    }
    assert_ne!(JobFile::check(&path).unwrap().digest(), before);
}

#[test]
fn a_replaced_image_is_checked_again_when_its_line_is_read() {
    let dir = Dir::new("job-file-image-replaced");
    std::fs::write(dir.join("in.png"), png_header(64, 48)).unwrap();
    let path = write_lines(
        &dir,
        &[json!({"model": "gen-2-pro", "prompt": "edit", "input_image": "in.png"})],
    );
    let checked = JobFile::check(&path).unwrap();
    assert!(checked.invalid().is_empty());
    std::fs::write(dir.join("in.png"), b"not an image at all").unwrap();
    let read: Vec<_> = checked.jobs().unwrap().collect();
    let changed = read[0].as_ref().unwrap_err();
    assert!(matches!(changed.problems[..], [LineProblem::Changed(_)]), "{changed}");
}

/// Workers sharing a ledger agree on the digest: image files swapped
/// between runs (the job file untouched) make another batch, refused as a
/// changed file is, rather than a line sent again with the image another
/// line was paid for.
#[test]
fn the_digest_covers_the_image_files_the_lines_read() {
    let dir = Dir::new("job-file-image-digest");
    std::fs::write(dir.join("a.png"), png_header(64, 48)).unwrap();
    std::fs::write(dir.join("b.png"), png_header(48, 64)).unwrap();
    let path = write_lines(
        &dir,
        &[
            json!({"model": "gen-2-pro", "prompt": "edit", "input_image": "a.png"}),
            json!({"model": "gen-2-pro", "prompt": "edit", "input_image": "b.png"}),
        ],
    );
    let before = JobFile::check(&path).unwrap().digest().to_string();
    assert_eq!(
        JobFile::check(&path).unwrap().digest(),
        before,
        "the same files, the same digest"
    );
    std::fs::rename(dir.join("a.png"), dir.join("t.png")).unwrap();
    std::fs::rename(dir.join("b.png"), dir.join("a.png")).unwrap();
    std::fs::rename(dir.join("t.png"), dir.join("b.png")).unwrap();
    assert_ne!(JobFile::check(&path).unwrap().digest(), before);
}

/// Image files swapped while a run goes on (after the check, before the
/// lines are read to be sent): neither line is sent with the other's image,
/// which would send one job for two lines.
#[test]
fn an_image_swapped_after_the_check_changes_its_line() {
    let dir = Dir::new("job-file-image-swapped-during");
    std::fs::write(dir.join("a.png"), png_header(64, 48)).unwrap();
    std::fs::write(dir.join("b.png"), png_header(48, 64)).unwrap();
    let path = write_lines(
        &dir,
        &[
            json!({"model": "gen-2-pro", "prompt": "edit", "input_image": "a.png"}),
            json!({"model": "gen-2-pro", "prompt": "plain"}),
            json!({"model": "gen-2-pro", "prompt": "edit", "input_image": "b.png"}),
        ],
    );
    let checked = JobFile::check(&path).unwrap();
    std::fs::rename(dir.join("a.png"), dir.join("t.png")).unwrap();
    std::fs::rename(dir.join("b.png"), dir.join("a.png")).unwrap();
    std::fs::rename(dir.join("t.png"), dir.join("b.png")).unwrap();
    let read: Vec<_> = checked.jobs().unwrap().collect();
    for index in [0, 2] {
        let changed = read[index].as_ref().unwrap_err();
        assert!(matches!(changed.problems[..], [LineProblem::Changed(_)]), "{changed}");
    }
    assert_eq!(
        read[1].as_ref().map(|job| job.line),
        Ok(2),
        "a line without images is sent"
    );
}

#[test]
fn a_repeated_name_points_at_the_first_line_that_has_it() {
    let dir = Dir::new("job-file-repeated");
    let path = write_lines(
        &dir,
        &[
            json!({"model": "gen-2-pro", "name": "fox", "prompt": "1"}),
            json!({"model": "gen-2-pro", "name": "fox", "prompt": "2"}),
            json!({"model": "gen-2-pro", "name": "fox", "prompt": "3"}),
        ],
    );
    let checked = JobFile::check(&path).unwrap();
    let firsts: Vec<_> = checked
        .invalid()
        .iter()
        .map(|invalid| (invalid.line, invalid.problems.clone()))
        .collect();
    let repeated = |first| {
        vec![LineProblem::RepeatedName {
            name: "fox".into(),
            first,
        }]
    };
    assert_eq!(firsts, [(2, repeated(1)), (3, repeated(1))]);
}

#[test]
fn the_digest_is_a_fingerprint_of_the_bytes() {
    let dir = Dir::new("job-file-digest");
    let path = dir.join("jobs.jsonl");
    std::fs::write(&path, "").unwrap();
    // FNV-1a of nothing is its offset basis.
    assert_eq!(JobFile::check(&path).unwrap().digest(), "cbf29ce484222325");
    std::fs::write(&path, "a").unwrap();
    assert_eq!(JobFile::check(&path).unwrap().digest(), "af63dc4c8601ec8c");
}

#[test]
fn a_file_that_cannot_be_a_job_file_is_refused_with_what_to_fix() {
    let dir = Dir::new("job-file-refused");
    let error = JobFile::check(dir.join("absent.jsonl")).unwrap_err();
    assert!(matches!(error, genapi::Error::Input { .. }), "{error:?}");
    let error = JobFile::check(&dir.0).unwrap_err();
    assert!(error.to_string().contains("not a regular file"), "{error}");

    let large = dir.join("large.jsonl");
    let file = std::fs::File::create(&large).unwrap();
    file.set_len(JOB_FILE_LIMIT + 1).unwrap();
    let error = JobFile::check(&large).unwrap_err();
    assert!(error.to_string().contains("above the 64 MiB"), "{error}");

    let binary = dir.join("binary.jsonl");
    std::fs::write(&binary, b"{\"model\": \"gen-2-pro\"}\n\xff\xfe\n").unwrap();
    let error = JobFile::check(&binary).unwrap_err();
    assert!(error.to_string().contains("line 2"), "{error}");
}

#[test]
fn a_line_the_request_type_cannot_hold_is_invalid_before_anything_is_sent() {
    let dir = Dir::new("job-file-typed");
    let path = write_lines(
        &dir,
        &[json!({"model": "gen-2-pro", "prompt": "x", "width": 4_294_967_296_u64})],
    );
    let checked = JobFile::check(&path).unwrap();
    assert_eq!(checked.invalid_lines(), 1, "{:?}", checked.invalid());
    assert!(checked.jobs().unwrap().next().is_none());
}

#[test]
fn a_file_of_many_bad_lines_keeps_the_first_ones_and_counts_the_rest() {
    let dir = Dir::new("job-file-many-bad");
    let path = dir.join("jobs.jsonl");
    let bad = 3 * genapi_batch::INVALID_LINES_KEPT;
    let mut text = "{\"model\":\"x\"}\n".repeat(bad);
    text.push_str(&json!({"model": "gen-2-pro", "prompt": "the good one"}).to_string());
    std::fs::write(&path, text).unwrap();
    let checked = JobFile::check(&path).unwrap();
    assert_eq!(checked.lines(), bad + 1);
    assert_eq!(checked.invalid_lines(), bad);
    assert_eq!(checked.invalid().len(), genapi_batch::INVALID_LINES_KEPT);
    let jobs: Vec<_> = checked.jobs().unwrap().collect::<Result<_, _>>().unwrap();
    assert_eq!(jobs.iter().map(|job| job.line).collect::<Vec<_>>(), [bad as u64 + 1]);
}

#[test]
fn what_a_line_shows_is_safe_for_a_terminal_and_keeps_secrets() {
    let dir = Dir::new("job-file-shown");
    let path = write_lines(
        &dir,
        &[
            json!({"model": "gen-2-pro", "prompt": "x", "input_image": "./\u{1b}]0;title\u{7}\u{1b}[2J.png"}),
            json!({"model": "gen-2-pro", "prompt": "x", "input_image": "https://example.com/a\t.png"}),
            json!({"model": "gen-2-pro", "prompt": "x", "webhook_url": "https://example.com/hook",
                   "webhook_secret": "whsec_canary_canary_canary_canary"}),
        ],
    );
    let checked = JobFile::check(&path).unwrap();
    let shown: Vec<String> = checked.invalid().iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(
        shown.iter().all(|text| !text.chars().any(char::is_control)),
        "{shown:?}"
    );
    assert!(shown[1].contains("control characters"), "{}", shown[1]);
    let job = checked.jobs().unwrap().next().unwrap().unwrap();
    assert_eq!(job.body["webhook_secret"], "whsec_canary_canary_canary_canary");
    let debug = format!("{job:?}");
    assert!(!debug.contains("canary"), "{debug}");
}

/// A refused size is followed by the nearest sizes the model takes, as
/// `generate --size` says them: a side off its step, and an area above the
/// limit (refused for the body as a whole).
#[test]
fn a_refused_size_names_the_nearest_sizes_the_model_takes() {
    let dir = Dir::new("job-file-sizes");
    let path = write_lines(
        &dir,
        &[
            json!({"model": "gen-2-pro", "prompt": "off step", "width": 1000, "height": 768}),
            json!({"model": "gen-2-pro", "prompt": "too many pixels", "width": 4096, "height": 4096}),
            json!({"model": "gen-2-pro", "prompt": "fine", "width": 1024, "height": 768}),
            json!({"model": "gen-2-pro", "prompt": "bad seed", "seed": "x", "width": 1024, "height": 768}),
        ],
    );
    let checked = JobFile::check(&path).unwrap();
    let shown: Vec<String> = checked.invalid().iter().map(ToString::to_string).collect();
    assert_eq!(shown.len(), 3, "{shown:#?}");
    assert!(
        shown[0].contains("width: ") && shown[0].ends_with("; the nearest sizes gen-2-pro takes: 992x768 or 1008x768"),
        "{}",
        shown[0]
    );
    assert!(
        shown[1].ends_with("; the nearest size gen-2-pro takes: 2048x2048"),
        "{}",
        shown[1]
    );
    assert!(
        !shown[2].contains("nearest"),
        "an accepted size gets no suggestion: {}",
        shown[2]
    );
}

/// A line that is not a job line is told what a job line is, in a job
/// file's words rather than the JSON reader's.
#[test]
fn a_line_that_is_no_job_line_is_told_what_one_looks_like() {
    let dir = Dir::new("job-file-not-lines");
    let path = dir.join("jobs.jsonl");
    let lines = [
        "a fox in the snow",
        r#"{"model": "gen-2-pro", "prompt": "cut"#,
        r#"["gen-2-pro", "a fox"]"#,
        r#"{"prompt": "a fox"}"#,
        r#"{"model": 3, "prompt": "a fox"}"#,
        r#"{"model": "gen-2-pro", "name": 7, "prompt": "a fox"}"#,
    ];
    std::fs::write(&path, lines.join("\n")).unwrap();
    let checked = JobFile::check(&path).unwrap();
    let shown: Vec<String> = checked
        .invalid()
        .iter()
        .map(|line| line.problems[0].to_string())
        .collect();
    let example = r#"each line is one JSON object such as {"model": "gen-2-pro", "prompt": "a fox"}"#;
    assert_eq!(
        shown,
        [
            format!("not a job line (not JSON (read as far as column 1); {example})"),
            format!("not a job line (the JSON ends with a string, list or object left open; {example})"),
            format!("not a job line (a list in JSON, not an object; {example})"),
            format!("not a job line (no \"model\"; {example})"),
            "not a job line (\"model\" is a number, not a model's name such as \"gen-2-pro\")".to_string(),
            "not a job line (\"name\" is a number, not a file name such as \"fox-1\")".to_string(),
        ]
    );
    // Some editors start a UTF-8 file with a byte-order mark.
    std::fs::write(&path, "\u{feff}{\"model\": \"gen-2-pro\", \"prompt\": \"a fox\"}\n").unwrap();
    let checked = JobFile::check(&path).unwrap();
    assert_eq!(
        checked.invalid()[0].problems[0].to_string(),
        "not a job line (the file starts with a byte-order mark: save it as UTF-8 without one)"
    );
}
