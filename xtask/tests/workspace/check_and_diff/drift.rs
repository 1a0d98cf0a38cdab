//! `cargo xtask drift`: a recording that follows the document shows nothing;
//! each kind of drift planted in it is found at its pointer and makes the
//! command exit non-zero; what an `x-correction` covers is not drift.

use std::path::PathBuf;
use std::process::Command;

use serde_json::{json, Value};
use xtask::drift::{self, Kind};

use super::document;

/// One recorded attempt, as `ClientBuilder::record` writes it.
fn entry(operation: &str, method: &str, url: &str, sent: Option<Value>, status: u16, answer: Value) -> Value {
    let mut request = json!({"method": method, "url": url, "httpVersion": "HTTP/1.1", "cookies": [],
        "headers": [{"name": "x-key", "value": "[redacted]"}], "queryString": [], "headersSize": -1, "bodySize": 0});
    if let Some(body) = sent {
        request["postData"] = json!({"mimeType": "application/json", "text": body.to_string()});
    }
    let content = if answer.is_null() {
        json!({"size": 1234, "mimeType": "image/jpeg", "comment": "[image jpeg 8x8, 1234 bytes, sha256:00]"})
    } else {
        json!({"size": 10, "mimeType": "application/json", "text": answer.to_string()})
    };
    json!({"startedDateTime": "2026-01-01T00:00:00.000Z", "time": 1.0, "request": request,
        "response": {"status": status, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [], "headers": [],
            "content": content, "redirectURL": "", "headersSize": -1, "bodySize": 10},
        "cache": {}, "timings": {"send": 0, "wait": 1, "receive": 0},
        "_genapi": {"operation": operation, "attempt": 1, "keyed": operation != "download"}})
}

const POLL: &str = "https://api.eu1.example.com/v1/get_result?id=t1";
const SAMPLE: &str = "https://delivery-eu1.example.com/r/t1.jpg?signature=%5Bredacted%5D";

/// A submission, two polls and a download, all as the document says.
fn recording() -> Value {
    json!({"log": {"version": "1.2", "creator": {"name": "genapi", "version": "0.1.0"},
    "_genapi": {"base_url": "https://api.example.com/", "regional_base_url": "https://api.example.com/", "trusted_origins": []},
    "entries": [
        entry("gen_2_pro", "POST", "https://api.example.com/v1/gen-2-pro", Some(json!({"prompt": "p", "seed": 7})),
            200, json!({"id": "t1", "polling_url": POLL, "cost": 1.5})),
        entry("get_result", "GET", POLL, None, 200, json!({"id": "t1", "status": "Pending", "progress": 0.5})),
        entry("get_result", "GET", POLL, None, 200,
            json!({"id": "t1", "status": "Ready", "result": {"sample": SAMPLE, "seed": 7}})),
        entry("download", "GET", SAMPLE, None, 200, Value::Null),
    ]}})
}

#[test]
fn a_file_that_is_not_har_is_refused_with_its_name() {
    let mut har = recording();
    har["log"]["entries"][0]["response"]
        .as_object_mut()
        .unwrap()
        .remove("status");
    let error = drift::read("broken.har", &har.to_string()).unwrap_err();
    assert!(error.starts_with("broken.har is not a HAR file: "), "{error}");
    assert!(drift::read("clean.har", &recording().to_string()).is_ok());
}

fn check(har: &Value) -> drift::Report {
    drift::check(&document(), std::slice::from_ref(har))
}

/// Runs `cargo xtask drift` on `har`: its exit status and output.
fn run(name: &str, har: &Value, extra: &[&str]) -> (bool, String) {
    run_with(name, har, extra, "no")
}

/// [`run`], with insta's `INSTA_UPDATE` set to `update`.
fn run_with(name: &str, har: &Value, extra: &[&str], update: &str) -> (bool, String) {
    let dir = std::env::temp_dir().join(format!("xtask-drift-har-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file: PathBuf = dir.join(format!("{name}.har"));
    std::fs::write(&file, har.to_string()).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_xtask"))
        .arg("drift")
        .arg(&file)
        .args(extra)
        .env("INSTA_UPDATE", update)
        .env_remove("INSTA_FORCE_PASS")
        .output()
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    let text = String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
    (output.status.success(), text)
}

#[test]
fn a_recording_that_follows_the_document_shows_no_drift() {
    let report = check(&drift::read("clean.har", &recording().to_string()).unwrap());
    assert!(report.findings.is_empty(), "{}", report.render());
    assert_eq!(report.exchanges, 4);
    let (ok, text) = run("clean", &recording(), &[]);
    assert!(ok, "{text}");
}

/// Each kind of drift, planted at one place: the pointer and place it must
/// be found at.
#[test]
fn each_planted_drift_is_found_at_its_pointer_and_fails_the_check() {
    type Plant = fn(&mut Value);
    let planted: [(&str, Plant, &str, &str, Kind); 10] = [
        (
            "unknown field",
            |h| {
                h[2]["response"]["content"]["text"] =
                    json!({"id": "t1", "status": "Ready", "result": {"sample": SAMPLE, "watermark": true}})
                        .to_string()
                        .into()
            },
            "response 200",
            "/result/watermark",
            Kind::UnknownField,
        ),
        (
            "missing required field",
            |h| h[0]["response"]["content"]["text"] = json!({"polling_url": POLL}).to_string().into(),
            "response 200",
            "/id",
            Kind::MissingRequired,
        ),
        (
            "wrong type",
            |h| {
                h[1]["response"]["content"]["text"] = json!({"id": "t1", "status": "Pending", "progress": "half"})
                    .to_string()
                    .into()
            },
            "response 200",
            "/progress",
            Kind::WrongType("number".into()),
        ),
        (
            "new task status",
            |h| h[1]["response"]["content"]["text"] = json!({"id": "t1", "status": "Upscaling"}).to_string().into(),
            "response 200",
            "/status",
            Kind::UnlistedValue(vec![]),
        ),
        (
            "undocumented status",
            |h| h[1]["response"]["status"] = json!(409),
            "response 409",
            "",
            Kind::UndocumentedStatus(vec!["200".into(), "422".into()]),
        ),
        (
            "undocumented content type",
            |h| h[1]["response"]["content"]["mimeType"] = json!("text/html; charset=utf-8"),
            "response 200",
            "",
            Kind::UndocumentedContentType(vec!["application/json".into()]),
        ),
        (
            "untrusted polling host",
            |h| {
                h[0]["response"]["content"]["text"] =
                    json!({"id": "t1", "polling_url": "https://poll.evil.net/v1/get_result?id=t1"})
                        .to_string()
                        .into()
            },
            "response 200",
            "/polling_url",
            Kind::UntrustedHost,
        ),
        (
            "untrusted result host",
            |h| {
                h[2]["response"]["content"]["text"] =
                    json!({"id": "t1", "status": "Ready", "result": {"sample": "https://cdn.other.net/r.jpg"}})
                        .to_string()
                        .into()
            },
            "response 200",
            "/result/sample",
            Kind::UntrustedHost,
        ),
        (
            "unknown request field",
            |h| h[0]["request"]["postData"]["text"] = json!({"prompt": "p", "new_knob": 1}).to_string().into(),
            "request",
            "/new_knob",
            Kind::UnknownField,
        ),
        (
            "request field of another type",
            |h| h[0]["request"]["postData"]["text"] = json!({"prompt": 5}).to_string().into(),
            "request",
            "/prompt",
            Kind::WrongType("string".into()),
        ),
    ];
    for (name, plant, place, pointer, kind) in planted {
        let mut har = recording();
        plant(&mut har["log"]["entries"]);
        let report = check(&har);
        assert!(report.drifted(), "{name}: not found\n{}", report.render());
        let found = report
            .findings
            .iter()
            .find(|f| f.place == place && f.pointer == pointer);
        let found = found.unwrap_or_else(|| panic!("{name}: nothing at {place} {pointer:?}\n{}", report.render()));
        // Listed values are compared apart: the lists are the document's.
        match (&found.kind, &kind) {
            (Kind::UnlistedValue(listed), Kind::UnlistedValue(_)) => assert!(listed.contains(&"Ready".to_string())),
            (found, expected) => assert_eq!(found, expected, "{name}"),
        }
        let (ok, text) = run(&name.replace(' ', "-"), &har, &[]);
        assert!(!ok, "{name}: the command passed\n{text}");
        let shown = if pointer.is_empty() { "(status)" } else { pointer };
        assert!(text.contains(shown), "{name}: {shown} is not in the report\n{text}");
    }
}

#[test]
fn what_an_x_correction_covers_is_known_not_drift() {
    let mut har = recording();
    har["log"]["entries"][0]["request"]["postData"]["text"] =
        json!({"prompt": "p", "output_format": "avif"}).to_string().into();
    let report = check(&har);
    assert_eq!(report.findings.len(), 1, "{}", report.render());
    assert_eq!(report.findings[0].correction.as_deref(), Some("output-format-webp"));
    assert!(!report.drifted());
    assert!(report
        .render()
        .contains("known (covered by an x-correction, not drift)"));
}

#[test]
fn propose_adds_new_fields_and_values_to_the_document() {
    let mut har = recording();
    let entries = har["log"]["entries"].as_array_mut().unwrap();
    entries[2]["response"]["content"]["text"] =
        json!({"id": "t1", "status": "Upscaling", "result": {"sample": SAMPLE, "watermark": true}})
            .to_string()
            .into();
    let report = check(&har);
    let (patched, applied) = drift::propose::patched(&document(), &report.findings);
    assert_eq!(applied, 2, "{}", report.render());
    let schemas = &patched["components"]["schemas"];
    assert_eq!(schemas["TaskResult"]["properties"]["watermark"]["type"], "boolean");
    assert!(schemas["TaskStatus"]["x-known-values"].get("Upscaling").is_some());
    // The patched document takes the same traffic without drift.
    let again = drift::check(&patched, &[har]);
    assert!(!again.drifted(), "{}", again.render());

    // Written as a proposal, it is openapi.json with the two additions
    // alone: the document's own key order and layout are kept.
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.json")).unwrap();
    let (written, applied) = drift::propose::proposal(&text, &document(), &report.findings).unwrap();
    assert_eq!(applied, 2);
    let before: Vec<&str> = text.lines().collect();
    let after: Vec<&str> = written.lines().collect();
    let kept = before.iter().filter(|line| after.contains(line)).count();
    assert!(
        before.len() - kept <= 2,
        "no line of the document is lost or rewritten, but for a comma before an addition"
    );
    let added: Vec<&&str> = after.iter().filter(|line| !before.contains(line)).collect();
    assert!(
        (2..=8).contains(&added.len()) && added.iter().any(|line| line.contains("\"watermark\"")),
        "{added:#?}"
    );
    let (unchanged, none) = drift::propose::proposal(&text, &document(), &[]).unwrap();
    assert_eq!((unchanged == text, none), (true, 0), "no finding, the same bytes");
}

#[test]
fn propose_with_nothing_to_propose_writes_nothing_and_says_so() {
    let dir = std::env::temp_dir().join(format!("xtask-drift-nothing-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out = dir.join("proposed.json");
    let _ = std::fs::remove_file(&out);
    let (ok, text) = run("nothing", &recording(), &["--propose", out.to_str().unwrap()]);
    assert!(ok, "{text}");
    assert!(
        text.contains("nothing to propose") && text.contains("was not written"),
        "{text}"
    );
    assert!(!out.exists(), "a proposal of nothing was written");

    // With something to propose, the file is written.
    let mut har = recording();
    har["log"]["entries"][2]["response"]["content"]["text"] =
        json!({"id": "t1", "status": "Ready", "result": {"sample": SAMPLE, "watermark": true}})
            .to_string()
            .into();
    let (_, text) = run("something", &har, &["--propose", out.to_str().unwrap()]);
    assert!(text.contains("1 additive change(s) proposed"), "{text}");
    assert!(out.exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn cargo_xtask_shows_that_it_is_building() {
    // The alias runs cargo as is: its first build takes a while, and a
    // quiet cargo would show nothing meanwhile.
    let config = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../.cargo/config.toml")).unwrap();
    let table: toml::Table = config.parse().unwrap();
    let alias = table["alias"]["xtask"].as_str().unwrap();
    let words: Vec<&str> = alias.split_whitespace().collect();
    assert_eq!(&words[..3], ["run", "--package", "xtask"], "{alias}");
    assert!(!words.iter().any(|w| *w == "--quiet" || *w == "-q"), "{alias}");
}

#[test]
fn a_snapshot_of_the_drift_passes_until_the_drift_changes() {
    let dir = std::env::temp_dir().join(format!("xtask-drift-snapshot-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let snapshot = dir.join("service.snap");
    let snapshot_arg = snapshot.to_str().unwrap();
    let mut new_status = recording();
    new_status["log"]["entries"][1]["response"]["content"]["text"] =
        json!({"id": "t1", "status": "Upscaling"}).to_string().into();

    let (ok, text) = run_with("snapshot-accept", &new_status, &["--snapshot", snapshot_arg], "always");
    assert!(ok, "{text}");
    let kept = std::fs::read_to_string(&snapshot).unwrap();
    assert!(
        kept.contains("get_result — response 200  /status  value the document does not list"),
        "{kept}"
    );
    // The same drift again: the accepted snapshot, so the check passes.
    let (ok, text) = run("snapshot-same", &new_status, &["--snapshot", snapshot_arg]);
    assert!(ok, "{text}");
    // Another kind of drift: it fails and leaves the new findings to review.
    let mut more = new_status.clone();
    more["log"]["entries"][1]["response"]["status"] = json!(409);
    let (ok, text) = run("snapshot-more", &more, &["--snapshot", snapshot_arg]);
    assert!(!ok, "{text}");
    assert!(text.contains("cargo insta review"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_body_that_is_not_the_json_it_says_is_drift_and_a_base64_body_is_read() {
    let mut har = recording();
    har["log"]["entries"][1]["response"]["content"]["text"] = json!("<html>bad gateway</html>");
    let report = check(&har);
    assert!(report.drifted(), "{:?}", report.findings);
    assert!(
        report.findings.iter().any(|f| f.kind == Kind::NotJson),
        "{:?}",
        report.findings
    );
    // A poll stored as base64 (as proxies store bodies) is read, and its
    // new status found.
    use base64::Engine as _;
    let mut har = recording();
    let body = json!({"id": "t1", "status": "Throttled"}).to_string();
    har["log"]["entries"][1]["response"]["content"]["text"] =
        json!(base64::engine::general_purpose::STANDARD.encode(body));
    har["log"]["entries"][1]["response"]["content"]["encoding"] = json!("base64");
    let report = check(&har);
    assert!(
        report.findings.iter().any(|f| matches!(f.kind, Kind::UnlistedValue(_))),
        "{:?}",
        report.findings
    );
}

/// A recording on disk is read entry by entry: each entry is checked as it
/// is parsed (one is held at a time), the log's head counts wherever it
/// stands, and what is not a regular file is refused before a byte is read.
#[test]
fn a_recording_is_checked_as_a_stream_and_only_from_a_regular_file() {
    // An entry is handed over before the rest of the file has been read: a
    // reader that fails after the first entry has given that entry.
    let whole = recording();
    let first = whole["log"]["entries"][0].to_string();
    let text = format!(
        "{{\"log\":{{\"version\":\"1.2\",\"entries\":[{first},{}]}}}}",
        whole["log"]["entries"][1]
    );
    let second = text.find(&first).unwrap() + first.len() + 1;
    struct Breaks<'a>(&'a [u8]);
    impl std::io::Read for Breaks<'_> {
        fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
            if self.0.is_empty() {
                return Err(std::io::Error::other("the disk went away"));
            }
            let n = self.0.len().min(buffer.len());
            buffer[..n].copy_from_slice(&self.0[..n]);
            self.0 = &self.0[n..];
            Ok(n)
        }
    }
    let mut seen = Vec::new();
    let read = drift::stream::each_entry(Breaks(&text.as_bytes()[..second]), |entry| {
        seen.push(entry["_genapi"]["operation"].clone());
        Ok(())
    });
    assert!(read.unwrap_err().contains("the disk went away"));
    assert_eq!(seen, [json!("gen_2_pro")]);

    // The same findings from the file as from the value, with the head
    // written after the entries (as other tools may).
    let dir = std::env::temp_dir().join(format!("xtask-drift-stream-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut planted = recording();
    planted["log"]["entries"][1]["response"]["content"]["text"] =
        json!(json!({"id": "t1", "status": "Pending", "progress": "half"}).to_string());
    let log = planted["log"].as_object().unwrap();
    let head_last = format!(
        "{{\"log\":{{\"entries\":{},\"version\":\"1.2\",\"creator\":{},\"_genapi\":{}}}}}",
        log["entries"], log["creator"], log["_genapi"]
    );
    let file = dir.join("head-last.har");
    std::fs::write(&file, head_last).unwrap();
    let mut streamed = drift::Report::default();
    drift::check_file(&document(), &file, &mut streamed).unwrap();
    let whole = check(&planted);
    assert_eq!(streamed.render(), whole.render());
    assert_eq!(streamed.exchanges, 4);
    assert!(streamed.drifted());

    let fifo = dir.join("fifo.har");
    let _ = std::fs::remove_file(&fifo);
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for path in [std::path::Path::new("/dev/zero"), fifo.as_path()] {
        let error = drift::check_file(&document(), path, &mut drift::Report::default()).unwrap_err();
        assert!(error.contains("not a regular file"), "{error}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A name or value the service sent with characters that act on a
/// terminal (or hide text) is reported, never written into the document.
#[test]
fn propose_leaves_names_and_values_with_control_characters_to_a_person() {
    let mut har = recording();
    let entries = har["log"]["entries"].as_array_mut().unwrap();
    entries[2]["response"]["content"]["text"] = json!({
        "id": "t1", "status": "Up\u{1b}[2Jscaling",
        "result": {"sample": SAMPLE, "water\u{202e}mark": true, "plain_new": 1}
    })
    .to_string()
    .into();
    let report = check(&har);
    assert!(report.drifted());
    let (patched, applied) = drift::propose::patched(&document(), &report.findings);
    assert_eq!(applied, 1, "only plain_new: {}", report.render());
    let written = patched.to_string();
    assert!(!written.contains('\u{1b}') && !written.contains('\u{202e}'));
    assert!(patched["components"]["schemas"]["TaskResult"]["properties"]["plain_new"].is_object());
    // The report printed quotes them without the characters.
    let (ok, text) = run("control-characters", &har, &[]);
    assert!(!ok, "{text}");
    assert!(text.contains("/result/water mark"), "{text}");
    assert!(!text.contains('\u{1b}') && !text.contains('\u{202e}'), "{text}");
}
