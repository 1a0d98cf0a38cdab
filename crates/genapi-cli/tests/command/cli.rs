//! The `genapi` command, run as a user would run it, against the mock on loopback.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

use crate::common;
use common::{genapi_alone as genapi, Dir};

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Asserts the exit code and that nothing panicked.
pub(crate) fn assert_exit(run: &Output, code: i32) {
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert_eq!(run.status.code(), Some(code), "stdout:\n{stdout}\nstderr:\n{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// Every stdout line parsed as JSON (the test fails if one is not).
fn json_lines(run: &Output) -> Vec<Value> {
    text(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// A write end whose reader is already gone: every write fails with EPIPE.
pub(crate) fn closed_pipe() -> Stdio {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Stdio::from(writer)
}

/// A standalone `genapi mock`, killed when dropped.
/// A `genapi mock` child process, as a user starts one in another terminal.
pub(crate) struct Mock {
    child: Child,
    /// Every `NAME=VALUE` the mock printed, in order.
    variables: Vec<(String, String)>,
    key: String,
}

impl Mock {
    pub(crate) fn start(dir: &Dir, extra: &[&str]) -> Mock {
        let mut child = genapi(dir)
            .args(["mock", "--key", "k-123"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut variables = Vec::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if let Some(variable) = crate::common::mock_variable(&line) {
                variables.push(variable);
            }
            if line == "# genapi mock ready" {
                break;
            }
        }
        let value = |wanted: &str| {
            variables
                .iter()
                .find(|(name, _)| name == wanted)
                .map(|(_, v)| v.clone())
        };
        assert!(value("GENAPI_BASE_URL").is_some(), "GENAPI_BASE_URL printed");
        let key = value("GENAPI_API_KEY").expect("GENAPI_API_KEY printed");
        Mock { child, variables, key }
    }

    /// The value of a variable the mock printed.
    pub(crate) fn variable(&self, wanted: &str) -> &str {
        let found = self.variables.iter().find(|(name, _)| name == wanted);
        found
            .map(|(_, value)| value.as_str())
            .unwrap_or_else(|| panic!("{wanted} not printed"))
    }

    /// The command configured with exactly the variables the mock printed,
    /// as a user following its output would.
    pub(crate) fn command(&self, dir: &Dir) -> Command {
        let mut command = genapi(dir);
        command.envs(
            self.variables
                .iter()
                .map(|(name, value)| (name.as_str(), value.as_str())),
        );
        command
    }
}

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn decoded(path: &Path) -> (Option<genapi::ImageFormat>, Option<(u32, u32)>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    (genapi::ImageFormat::sniff(&bytes), crate::common::dimensions(&bytes))
}

#[test]
fn generate_without_configuration_uses_the_mock_and_says_so() {
    let dir = Dir::new("plain");
    let run = genapi(&dir)
        .args(["generate", "a lighthouse at dusk", "--out", "lighthouse.jpg"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    let (stdout, stderr) = (text(&run.stdout), text(&run.stderr));
    assert!(
        stderr.contains("built-in mock service") && stderr.contains("test double"),
        "{stderr}"
    );
    assert!(
        stderr.contains("submitted task "),
        "the id is printed off a terminal too: {stderr}"
    );
    assert!(
        stdout.contains("Ready by the MOCK service")
            && stdout.contains("illustrative")
            && stdout.contains("lighthouse.jpg"),
        "{stdout}"
    );
    assert!(
        !stderr.contains('\u{1b}') && !stdout.contains('\u{1b}'),
        "no escape codes off a terminal"
    );
    assert_eq!(
        decoded(&dir.join("lighthouse.jpg")),
        (Some(genapi::ImageFormat::Jpeg), Some((1024, 1024)))
    );
}

#[test]
fn json_results_with_count_size_seed_and_format_from_the_extension() {
    let dir = Dir::new("json");
    let run = genapi(&dir)
        .args([
            "generate",
            "a red fox",
            "-n",
            "2",
            "--size",
            "512x384",
            "--seed",
            "7",
            "-o",
            "fox.png",
            "--json",
        ])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    let mut results = json_lines(&run);
    assert_eq!(results.len(), 2, "one object per result");
    // Printed as each task finishes, so in any order.
    results.sort_by_key(|r| r["file"].as_str().map(str::to_string));
    for (index, result) in results.iter().enumerate() {
        assert_eq!(result["status"], "Ready");
        assert_eq!(result["seed"], 7);
        assert_eq!(result["mock"], true);
        assert!(
            result["id"].is_string() && result["polling_url"].is_string(),
            "{result}"
        );
        assert!(
            result["cost"].as_f64().is_some() && result["duration"].as_f64().is_some(),
            "{result}"
        );
        let file = PathBuf::from(result["file"].as_str().unwrap());
        assert!(file.ends_with(format!("fox-{}.png", index + 1)), "{}", file.display());
        assert_eq!(
            decoded(&dir.0.join(&file)),
            (Some(genapi::ImageFormat::Png), Some((512, 384)))
        );
    }
}

#[test]
fn output_paths_are_checked_before_anything_is_submitted() {
    let dir = Dir::new("paths");
    std::fs::write(dir.join("taken.jpg"), b"keep").unwrap();
    for args in [
        vec!["generate", "x", "-o", "missing/x.jpg"],
        vec!["generate", "x", "-o", "taken.jpg"],
        vec!["generate", "x", "-o", "notes.txt"],
        vec!["generate", "x", "-o", "x.png", "--format", "jpeg"],
    ] {
        let run = genapi(&dir).args(&args).output().unwrap();
        assert_exit(&run, 2);
        let stderr = text(&run.stderr);
        assert!(
            !stderr.contains("submitted task"),
            "{args:?}: refused before submitting: {stderr}"
        );
        assert!(stderr.contains("--out") || stderr.contains("--format"), "{stderr}");
    }
    assert_eq!(std::fs::read(dir.join("taken.jpg")).unwrap(), b"keep");

    // A link to a device (as `/dev/stdout` is) names the device: refused,
    // never the stem of `stdout.jpg`.
    std::os::unix::fs::symlink("/dev/null", dir.join("stdout")).unwrap();
    let run = genapi(&dir).args(["generate", "x", "-o", "stdout"]).output().unwrap();
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("not a regular file") && stderr.contains("-o - writes the image to standard output"),
        "{stderr}"
    );
    assert!(!stderr.contains("submitted task"), "{stderr}");
    assert!(!dir.join("stdout.jpg").exists());
    // The same when the shell sent standard output to a file: `/dev/stdout`
    // then leads to a regular file, and is still the process's stream; and
    // for a descriptor the process has not open, which leads nowhere.
    for name in ["/dev/stdout", "/dev/fd/1", "/dev/fd/9"] {
        let captured = std::fs::File::create(dir.join("captured.txt")).unwrap();
        let run = genapi(&dir)
            .args(["generate", "x", "-o", name])
            .stdout(captured)
            .output()
            .unwrap();
        assert_exit(&run, 2);
        let stderr = text(&run.stderr);
        assert!(
            stderr.contains("not a regular file") && stderr.contains("-o - writes the image to standard output"),
            "{name}: {stderr}"
        );
        assert!(!std::path::Path::new(&format!("{name}.jpg")).exists(), "{name}");
    }
    // A name the save would pick that leads to a device is said to be one,
    // not a file --force would replace.
    std::os::unix::fs::symlink("/dev/null", dir.join("nul.jpg")).unwrap();
    let run = genapi(&dir).args(["generate", "x", "-o", "nul"]).output().unwrap();
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("not a regular file") && !stderr.contains("--force"),
        "{stderr}"
    );

    // A directory gets a generated name inside it; --force overwrites.
    std::fs::create_dir(dir.join("pictures")).unwrap();
    let run = genapi(&dir)
        .args(["generate", "a cat", "-o", "pictures", "--json"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    let file = PathBuf::from(json_lines(&run)[0]["file"].as_str().unwrap().to_string());
    assert!(file.starts_with("pictures"), "{}", file.display());
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.starts_with("a-cat-") && name.ends_with(".jpg"), "{name}");
    let run = genapi(&dir)
        .args(["generate", "x", "-o", "taken.jpg", "--force"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert_eq!(decoded(&dir.join("taken.jpg")).0, Some(genapi::ImageFormat::Jpeg));
}

#[test]
fn set_refuses_unknown_fields_and_set_raw_is_the_escape_hatch() {
    let dir = Dir::new("set");
    let run = genapi(&dir)
        .args(["generate", "--set", "widht=512", "x"])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    assert!(
        text(&run.stderr).contains("did you mean width?"),
        "{}",
        text(&run.stderr)
    );
    let run = genapi(&dir).args(["generate", "--set", "=5", "x"]).output().unwrap();
    assert_exit(&run, 2);
    assert!(text(&run.stderr).contains("field name is empty"));
    let run = genapi(&dir).args(["generate", "--size", "wide", "x"]).output().unwrap();
    assert_exit(&run, 2);
    assert!(text(&run.stderr).contains("--size wide"));
    let run = genapi(&dir)
        .args(["generate", "-m", "gen-pro-1.1-ultra", "--size", "512x512", "x"])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    assert!(
        text(&run.stderr).contains("use --aspect-ratio"),
        "{}",
        text(&run.stderr)
    );

    // Validation speaks flags, not JSON paths.
    let run = genapi(&dir)
        .args(["generate", "--set", "safety_tolerance=9", "x"])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("error: invalid request")
            && stderr.contains("--set safety_tolerance:")
            && !stderr.contains("body."),
        "{stderr}"
    );
    // A field the user set by name is named by the flag that set it.
    let run = genapi(&dir)
        .args(["generate", "--set", "width=abc", "x"])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("--set width:") && !stderr.contains("--size"),
        "{stderr}"
    );
    let run = genapi(&dir)
        .args(["generate", "--set", "width=100", "--size", "512x512", "x"])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    assert!(text(&run.stderr).contains("--set width:"), "{}", text(&run.stderr));
    let run = genapi(&dir)
        .args(["generate", "--set-raw", "user=u-1", "--json", "x"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert_eq!(json_lines(&run)[0]["status"], "Ready");
}

#[test]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
fn prompt_from_stdin_or_file_and_images_by_field() {
    let dir = Dir::new("prompt");
    std::fs::write(dir.join("prompt.txt"), "a quiet harbour\n").unwrap();
    let mut from_stdin = genapi(&dir)
        .args(["generate", "-", "--seed", "3", "-o", "stdin.png"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    from_stdin
        .stdin
        .take()
        .unwrap()
        .write_all(b"a quiet harbour\n")
        .unwrap();
    let from_file = genapi(&dir)
        .args([
            "generate",
            "--prompt-file",
            "prompt.txt",
            "--seed",
            "3",
            "-o",
            "file.png",
        ])
        .output()
        .unwrap();
    let literal = genapi(&dir)
        .args(["generate", "a quiet harbour", "--seed", "3", "-o", "literal.png"])
        .output()
        .unwrap();
    let dash = genapi(&dir)
        .args([
            "generate",
            "--prompt-file",
            "prompt.txt",
            "--seed",
            "4",
            "-o",
            "other.png",
        ])
        .output()
        .unwrap();
    let stdin_run = from_stdin.wait_with_output().unwrap();
    for run in [&stdin_run, &from_file, &literal, &dash] {
        assert_exit(run, 0);
    }
    let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
    assert_eq!(
        read("stdin.png"),
        read("literal.png"),
        "stdin sends the text, not \"-\""
    );
    assert_eq!(read("file.png"), read("literal.png"));
    assert_ne!(read("other.png"), read("literal.png"));

    // Image fields are listed (and filled) in document order: person, then garment.
    let run = genapi(&dir).args(["models", "vto-v1", "--json"]).output().unwrap();
    assert_exit(&run, 0);
    let model = &json_lines(&run)[0];
    let images: Vec<&str> = model["fields"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["image"] == true)
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(images, ["person", "garment"]);
    let run = genapi(&dir)
        .args([
            "generate",
            "-m",
            "gen-pro-1.0-expand",
            "--image",
            "image=https://example.com/x.png",
            "x",
        ])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    assert!(
        text(&run.stderr).contains("takes a file, not a URL"),
        "{}",
        text(&run.stderr)
    );
    let run = genapi(&dir)
        .args(["generate", "-m", "deblur-v1", "--image", "a.png", "--image", "b.png"])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    assert!(
        text(&run.stderr).contains("takes 1 image(s) (image)"),
        "{}",
        text(&run.stderr)
    );
}

#[test]
fn models_come_from_the_document_and_a_fixture_shows_an_extra_operation() {
    let dir = Dir::new("models");
    let document: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi.json")).unwrap(),
    )
    .unwrap();
    let posts = document["paths"]
        .as_object()
        .unwrap()
        .values()
        .filter(|item| item.get("post").is_some())
        .count();
    let run = genapi(&dir).args(["models", "--json"]).output().unwrap();
    assert_exit(&run, 0);
    let models = json_lines(&run);
    assert_eq!(models.len(), posts);
    assert_eq!(models[0]["name"], "gen-2-pro", "document order");
    assert!(models
        .iter()
        .any(|m| m["name"] == "gen-pro-1.1-ultra-finetuned" && m["deprecated"] == true));
    let human = genapi(&dir).args(["models"]).output().unwrap();
    assert_exit(&human, 0);
    assert!(text(&human.stdout).contains("[deprecated]"));
    let run = genapi(&dir).args(["models", "gen-2-prp"]).output().unwrap();
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("did you mean gen-2-pro? (see `genapi models`)"),
        "{stderr}"
    );
    assert!(
        !stderr.contains("gen-tools/vto-v2"),
        "the likely fix is not buried in the list: {stderr}"
    );
    let run = genapi(&dir).args(["models", "nothing-like-any"]).output().unwrap();
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("known models: ") && stderr.contains("gen-tools/vto-v2"),
        "{stderr}"
    );

    let mut fixture = document.clone();
    fixture["paths"]["/v1/gen-fixture-extra"] = serde_json::json!({"post": {
        "operationId": "gen_fixture_extra", "summary": "An operation only the fixture has",
        "requestBody": {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/FixtureRequest"}}}},
        "responses": {}
    }});
    fixture["components"]["schemas"]["FixtureRequest"] = serde_json::json!({"type": "object", "properties": {
        "glow": {"type": "integer", "minimum": 1, "maximum": 9, "x-default": 4, "description": "How much glow."}
    }});
    std::fs::write(dir.join("fixture.json"), fixture.to_string()).unwrap();
    let run = genapi(&dir)
        .env("GENAPI_DOCUMENT", dir.join("fixture.json"))
        .args(["models"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert!(text(&run.stdout).contains("gen-fixture-extra") && text(&run.stdout).contains("only the fixture has"));
    let run = genapi(&dir)
        .env("GENAPI_DOCUMENT", dir.join("fixture.json"))
        .args(["models", "gen-fixture-extra", "--json"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    let field = &json_lines(&run)[0]["fields"][0];
    // Values as JSON values, bounds by the document's own keywords.
    assert_eq!(field["name"], "glow");
    assert_eq!(field["bounds"], serde_json::json!({"minimum": 1, "maximum": 9}));
    assert_eq!(field["default"], 4);
    assert_eq!(field["type"], "integer");
}

/// A `--timeout` of zero would pay for a task with no time to wait for it:
/// refused before anything is sent, as is one that is no whole number.
#[test]
fn a_timeout_of_zero_is_refused_before_anything_is_paid() {
    let dir = Dir::new("timeout-zero");
    for value in ["0", "1.5", "x"] {
        let run = genapi(&dir)
            .args(["generate", "x", "-o", "x.jpg", "--timeout", value])
            .output()
            .unwrap();
        assert_exit(&run, 2);
        let stderr = text(&run.stderr);
        assert!(stderr.contains("at least 1"), "{value}: {stderr}");
        assert!(!stderr.contains("submitted"), "{value}: {stderr}");
    }
}

#[test]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
fn exit_codes_by_class() {
    let dir = Dir::new("codes");
    let usage = genapi(&dir).args(["generate", "--no-such-flag"]).output().unwrap();
    assert_exit(&usage, 2);
    let moderated = genapi(&dir)
        .args(["generate", "[mock:request-moderated] x"])
        .output()
        .unwrap();
    assert_exit(&moderated, 6);
    assert!(text(&moderated.stderr).contains("moderated"));
    assert!(
        !text(&moderated.stderr).contains("resume with"),
        "nothing to resume after a final failure"
    );
    let failed = genapi(&dir)
        .args(["generate", "[mock:error] x", "--json"])
        .output()
        .unwrap();
    assert_exit(&failed, 7);
    let report = &json_lines(&failed)[0];
    assert_eq!(
        (report["status"].as_str(), report["exit_code"].as_u64()),
        (Some("Error"), Some(7))
    );
    let unknown = genapi(&dir).args(["get", "no-such-task"]).output().unwrap();
    assert_exit(&unknown, 7);
    assert!(text(&unknown.stderr).contains("not found"), "{}", text(&unknown.stderr));

    let mock = Mock::start(&dir, &[]);
    // `get -o` of a task the service does not know gives the object every
    // failure of a task gives, naming it.
    let missing = mock
        .command(&dir)
        .args(["get", "no-such-task", "-o", "x.jpg", "--json"])
        .output()
        .unwrap();
    assert_exit(&missing, 7);
    let object = &json_lines(&missing)[0];
    assert_eq!(
        (
            object["id"].as_str(),
            object["status"].as_str(),
            object["exit_code"].as_u64()
        ),
        (Some("no-such-task"), Some("Task not found"), Some(7)),
        "{object}"
    );
    assert!(
        object["polling_url"].as_str().is_some() && object["error"].is_string(),
        "{object}"
    );
    let auth = mock
        .command(&dir)
        .env("GENAPI_API_KEY", "wrong")
        .args(["generate", "x"])
        .output()
        .unwrap();
    assert_exit(&auth, 3);
    let broke = Mock::start(&dir, &["--credits", "0"]);
    let credits = broke.command(&dir).args(["generate", "x"]).output().unwrap();
    assert_exit(&credits, 4);
    let busy = Mock::start(&dir, &["--max-active", "0"]);
    let limited = busy.command(&dir).args(["generate", "x"]).output().unwrap();
    assert_exit(&limited, 5);
    let network = genapi(&dir)
        .env("GENAPI_BASE_URL", "http://127.0.0.1:1")
        .env("GENAPI_API_KEY", "k")
        .args(["generate", "x"])
        .output()
        .unwrap();
    assert_exit(&network, 9);
    assert!(
        text(&network.stderr).contains("Connection refused"),
        "the cause is kept: {}",
        text(&network.stderr)
    );
    let half = genapi(&dir)
        .env("GENAPI_API_KEY", "k")
        .args(["generate", "x"])
        .output()
        .unwrap();
    assert_exit(&half, 2);
    assert!(
        text(&half.stderr).contains("GENAPI_BASE_URL is not"),
        "{}",
        text(&half.stderr)
    );
    let help = genapi(&dir).arg("--help").output().unwrap();
    assert_exit(&help, 0);
    for needle in ["Exit codes:", "130", "GENAPI_API_KEY", "Examples:"] {
        assert!(text(&help.stdout).contains(needle), "{needle}");
    }
}

/// `genapi generate` on `slow` (whose task outlasts the test) with a
/// --timeout that passes while the task is waited for, the case a resume
/// line is for. The timeout counts from the command's start: on a loaded
/// machine 1 s may pass before the submission is answered, which the
/// command rightly says without a resume line (the task may or may not have
/// been accepted). Such a run is checked for that and the timeout doubled,
/// so the run returned surely timed out after its task was accepted.
fn timed_out_while_waiting(slow: &Mock, dir: &Dir) -> Output {
    for seconds in [1, 2, 4, 8, 16, 32] {
        let run = slow
            .command(dir)
            .args(["generate", "x", "--timeout", &seconds.to_string(), "-o", "slow.jpg"])
            .output()
            .unwrap();
        assert_exit(&run, 8);
        let stderr = text(&run.stderr);
        if !stderr.contains("passed during submission") {
            return run;
        }
        assert!(
            stderr.contains("may have been accepted") && !stderr.contains("resume with: "),
            "{stderr}"
        );
    }
    panic!("no submission was answered within 32 s");
}

#[test]
fn timeout_is_resumable_and_submit_wait_get_pick_tasks_up() {
    let dir = Dir::new("resume");
    let slow = Mock::start(&dir, &["--duration-ms", "600000"]);
    let run = timed_out_while_waiting(&slow, &dir);
    let stderr = text(&run.stderr);
    // Still running at the service, paid for: not counted as failed.
    assert!(
        stderr.contains("generate: 0/1 done, 0 failed, 1 in flight") && !stderr.contains("1 failed"),
        "{stderr}"
    );
    let resume = stderr
        .lines()
        .find_map(|l| l.strip_prefix("resume with: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    // The task comes last, after `--`: an id starting with `-` is never
    // read as an option.
    assert!(resume.starts_with("genapi wait --out slow.jpg -- "), "{resume}");
    let id = resume.split(' ').next_back().unwrap().trim_matches('\'');
    let pending = slow.command(&dir).args(["get", id, "--json"]).output().unwrap();
    assert_exit(&pending, 0);
    assert_eq!(json_lines(&pending)[0]["status"], "Pending");
    assert_eq!(json_lines(&pending)[0]["model"], "gen-2-pro", "as `generate` kept it");
    let not_yet = slow
        .command(&dir)
        .args(["get", id, "--out", "slow.jpg"])
        .output()
        .unwrap();
    assert_exit(&not_yet, 8);

    let quick = Mock::start(&dir, &["--duration-ms", "50"]);
    let submitted = quick
        .command(&dir)
        .args(["submit", "a boat", "--format", "webp", "--json"])
        .output()
        .unwrap();
    assert_exit(&submitted, 0);
    let task = &json_lines(&submitted)[0];
    let id = task["id"].as_str().unwrap();
    // The task is polled on a regional host, as with the service: resume by
    // its polling URL (the global host does not know regional tasks).
    let polling_url = task["polling_url"].as_str().unwrap();
    assert!(polling_url.contains(id));
    let waited = quick
        .command(&dir)
        .args(["wait", polling_url, "-o", "boat.webp", "--json"])
        .output()
        .unwrap();
    assert_exit(&waited, 0);
    assert_eq!(json_lines(&waited)[0]["status"], "Ready");
    // `wait` is given the task alone: its model is what the command's
    // history kept when `submit` sent it.
    assert_eq!(task["model"], "gen-2-pro", "submit knows it");
    assert_eq!(
        json_lines(&waited)[0]["model"],
        "gen-2-pro",
        "so does wait, from the history"
    );
    assert_eq!(decoded(&dir.join("boat.webp")).0, Some(genapi::ImageFormat::Webp));
    let got = quick
        .command(&dir)
        .args(["get", polling_url, "-o", "again.webp"])
        .output()
        .unwrap();
    assert_exit(&got, 0);
    assert!(dir.join("again.webp").exists(), "get downloads when Ready");
    // Ready is said once, with where the result went.
    let said = format!("{}{}", text(&got.stdout), text(&got.stderr));
    assert_eq!(said.matches("Ready").count(), 1, "{said}");
    assert!(said.contains("saved again.webp"), "{said}");
    // By its id alone it is looked for on every configured host, the
    // regional one included.
    let by_id = quick.command(&dir).args(["get", id, "--json"]).output().unwrap();
    assert_exit(&by_id, 0);
    assert_eq!(json_lines(&by_id)[0]["status"], "Ready");
    assert_eq!(json_lines(&by_id)[0]["model"], "gen-2-pro");

    let forever = genapi(&dir)
        .args(["generate", "x", "--timeout", "18446744073709551615", "--json"])
        .output()
        .unwrap();
    assert_exit(&forever, 0);
}

/// Ctrl-C (SIGINT) and SIGTERM (a service manager, `kill`) stop the same
/// way: exit 130 with the command that picks the task up again, and with
/// `--json` a line for the task on stdout that carries it.
#[test]
fn a_ctrl_c_or_sigterm_after_submission_prints_the_resume_command() {
    for (signal, name) in [(libc::SIGINT, "sigint"), (libc::SIGTERM, "sigterm")] {
        let dir = Dir::new(&format!("interrupt-{name}"));
        let slow = Mock::start(&dir, &["--duration-ms", "600000"]);
        let mut child = slow
            .command(&dir)
            .args(["generate", "x", "-o", "later.png", "--json"])
            .stderr(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = child.stdout.take().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        while !seen.contains("submitted task") {
            let mut line = String::new();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "{name}: {seen}");
            seen.push_str(&line);
        }
        // SAFETY: sending a signal to our own child process.
        assert_eq!(unsafe { libc::kill(child.id() as libc::pid_t, signal) }, 0);
        let status = child.wait().unwrap();
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        assert_eq!(status.code(), Some(130), "{name}: {seen}{rest}");
        assert!(
            rest.contains("resume with: genapi wait ") && rest.contains("--out later.png"),
            "{name}: {rest}"
        );
        let mut printed = String::new();
        std::io::Read::read_to_string(&mut stdout, &mut printed).unwrap();
        let line: serde_json::Value = serde_json::from_str(printed.trim()).unwrap_or_else(|e| panic!("{e}: {printed}"));
        assert_eq!(line["exit_code"], 130, "{name}: {printed}");
        assert!(
            line["resume"]
                .as_str()
                .is_some_and(|resume| resume.contains("--out later.png")),
            "{name}: {printed}"
        );
    }
}

#[test]
fn closed_pipes_stop_printing_but_not_the_work_and_the_exit_says_so() {
    let dir = Dir::new("pipes");
    let mock = Mock::start(&dir, &["--duration-ms", "50"]);
    let runs: Vec<(Vec<&str>, bool)> = vec![
        (vec!["models"], false),
        (vec!["models", "gen-2-pro"], false),
        (vec!["models", "--json"], false),
        (vec!["config"], false),
        (vec!["generate", "x", "-o", "a.jpg"], true),
        (vec!["generate", "x", "-o", "b.jpg", "--json"], true),
        (vec!["submit", "x"], true),
        (vec!["get", "no-such-task"], true),
        (vec!["--help"], false),
    ];
    for (args, configured) in &runs {
        for closed_stderr in [false, true] {
            let mut command = if *configured { mock.command(&dir) } else { genapi(&dir) };
            command.args(args).stdout(closed_pipe());
            if closed_stderr {
                command.stderr(closed_pipe());
            }
            let run = command.output().unwrap();
            // Output that did not arrive is no success where it named a task
            // (10: generate, submit); a failure's own code comes first (get
            // of an unknown task). A listing whose reader went away (`genapi
            // models | head -1`) gave the reader what it wanted: 0, and
            // nothing said; clap's --help is clap's.
            let expected = match args[0] {
                "get" => 7,
                "submit" | "generate" => 10,
                _ => 0,
            };
            assert_eq!(run.status.code(), Some(expected), "{args:?}: {}", text(&run.stderr));
            if expected == 0 {
                assert_eq!(text(&run.stderr), "", "{args:?}");
            }
            assert!(
                !text(&run.stderr).contains("panicked"),
                "{args:?}: {}",
                text(&run.stderr)
            );
            if args.contains(&"-o") {
                let file = dir.join(args[3]);
                assert!(file.exists(), "{args:?}: the file is saved");
                std::fs::remove_file(file).unwrap();
            }
        }
    }

    // The mock keeps serving after its stdout reader went away.
    let mut orphan = genapi(&dir)
        .args(["mock", "--key", "k-9", "--duration-ms", "50"])
        .stdout(closed_pipe())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut banner = String::new();
    BufReader::new(orphan.stderr.take().unwrap())
        .read_line(&mut banner)
        .unwrap();
    let hosts: Vec<&str> = banner
        .split_whitespace()
        .filter(|w| w.starts_with("http://"))
        .map(|w| w.trim_end_matches([';', ',', ')']))
        .collect();
    let [base, polling, ..] = hosts[..] else {
        panic!("{banner}")
    };
    let run = genapi(&dir)
        .env("GENAPI_BASE_URL", base)
        .env("GENAPI_API_KEY", "k-9")
        .args(["--trust-origin", polling, "generate", "x", "--json"])
        .output()
        .unwrap();
    assert!(orphan.try_wait().unwrap().is_none(), "the mock is still running");
    let _ = orphan.kill();
    let _ = orphan.wait();
    assert_exit(&run, 0);
    assert_eq!(json_lines(&run)[0]["status"], "Ready");
}

#[test]
fn mock_prints_its_variables_by_name_and_stays_on_loopback() {
    let dir = Dir::new("mock");
    let mock = Mock::start(&dir, &["--duration-ms", "50", "--credits", "100", "--max-active", "3"]);
    assert_eq!(mock.key, "k-123");
    let run = mock.command(&dir).args(["generate", "x", "--json"]).output().unwrap();
    assert_exit(&run, 0);
    let result = &json_lines(&run)[0];
    assert_eq!(
        result["mock"], true,
        "a standalone mock is recognised by its mark, configured or not"
    );
    let human = mock.command(&dir).args(["generate", "y"]).output().unwrap();
    assert!(text(&human.stdout).contains("MOCK"), "{}", text(&human.stdout));
    let remote = genapi(&dir).args(["mock", "--addr", "0.0.0.0:0"]).output().unwrap();
    assert_exit(&remote, 2);
    assert!(text(&remote.stderr).contains("--allow-remote"));
    let json = genapi(&dir)
        .args(["mock", "--json", "--key", "k-1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut json = ChildGuard(json);
    let mut line = String::new();
    BufReader::new(json.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let variables: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(variables["GENAPI_API_KEY"], "k-1");
    assert!(variables["GENAPI_BASE_URL"]
        .as_str()
        .unwrap()
        .starts_with("http://127.0.0.1:"));
}

/// `--allow-remote` takes no key anyone could know: without one of the
/// user's (or with the default one) the mock does not start and says how to
/// give one; one from `GENAPI_MOCK_KEY` is the key it then prints.
#[test]
fn a_mock_others_can_reach_needs_a_key_of_its_own() {
    let dir = Dir::new("mock-remote-key");
    for extra in [&[][..], &["--key", "mock-key"], &["--key", ""]] {
        let run = genapi(&dir)
            .args(["mock", "--timeout", "30", "--allow-remote"])
            .args(extra)
            .output()
            .unwrap();
        assert_exit(&run, 2);
        let stderr = text(&run.stderr);
        assert!(
            stderr.contains("--allow-remote needs a key of your own") && stderr.contains("GENAPI_MOCK_KEY"),
            "{extra:?}: {stderr}"
        );
    }
    let mock = genapi(&dir)
        .args(["mock", "--json", "--allow-remote"])
        .env("GENAPI_MOCK_KEY", "k-from-env")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut mock = ChildGuard(mock);
    let mut line = String::new();
    BufReader::new(mock.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let variables: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!(variables["GENAPI_API_KEY"], "k-from-env");
}

#[test]
fn logs_are_plain_text() {
    let dir = Dir::new("log");
    let run = genapi(&dir)
        .env("GENAPI_LOG", "genapi=debug")
        .args(["generate", "x", "--json"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    let stderr = text(&run.stderr);
    assert!(stderr.contains("DEBUG") || stderr.contains("INFO"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    assert_eq!(json_lines(&run).len(), 1, "logs stay off stdout");
}

struct ChildGuard(Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
fn learned_durations_are_kept_between_runs_and_a_corrupt_file_is_ignored() {
    let dir = Dir::new("learned");
    let mock = Mock::start(&dir, &["--duration-ms", "400"]);
    let first = mock
        .command(&dir)
        .args(["generate", "x", "-o", "one.jpg"])
        .output()
        .unwrap();
    assert_exit(&first, 0);
    let file = dir.join("cache").join("genapi").join("learned.json");
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let service = kept.as_object().unwrap().keys().next().unwrap().clone();
    assert_eq!(
        kept[&service]["learned"]["operations"]["gen_2_pro"],
        serde_json::json!([0.4]),
        "{kept}"
    );

    // A second run starts from it and adds to it.
    let second = mock
        .command(&dir)
        .args(["generate", "y", "-o", "two.jpg"])
        .output()
        .unwrap();
    assert_exit(&second, 0);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        kept[&service]["learned"]["operations"]["gen_2_pro"],
        serde_json::json!([0.4, 0.4])
    );

    // A run that sees no task end leaves the file as it was, and the same
    // service written another way (a slash after it, its host in
    // capitals) is the same entry, not a new one.
    let before = std::fs::read(&file).unwrap();
    let configured = mock.variable("GENAPI_BASE_URL");
    let base = configured.replace("127.0.0.1", "LocalHost");
    let localhost = configured.replace("127.0.0.1", "localhost");
    let submitted = mock
        .command(&dir)
        .env("GENAPI_BASE_URL", format!("{base}/"))
        .args(["submit", "w"])
        .output()
        .unwrap();
    assert_exit(&submitted, 0);
    assert_eq!(
        std::fs::read(&file).unwrap(),
        before,
        "nothing learned, nothing written"
    );
    let respelled = mock
        .command(&dir)
        .env("GENAPI_BASE_URL", format!("{base}/"))
        .args(["generate", "v", "-o", "four.jpg"])
        .output()
        .unwrap();
    assert_exit(&respelled, 0);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let services: Vec<&String> = kept.as_object().unwrap().keys().collect();
    assert_eq!(services.len(), 2, "{kept}");
    let key = services
        .iter()
        .find(|key| key.starts_with(&localhost))
        .unwrap()
        .to_string();
    assert!(
        !key.contains("LocalHost") && !key.contains(&format!("{localhost}/ ")),
        "{key}"
    );
    // The same service as `localhost` learns on; `127.0.0.1` is another name.
    let again = mock
        .command(&dir)
        .env("GENAPI_BASE_URL", &localhost)
        .args(["generate", "u", "-o", "five.jpg"])
        .output()
        .unwrap();
    assert_exit(&again, 0);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(kept.as_object().unwrap().len(), 2, "{kept}");
    assert_eq!(
        kept[key.as_str()]["learned"]["operations"]["gen_2_pro"],
        serde_json::json!([0.4, 0.4]),
        "{kept}"
    );

    // A corrupt file is ignored, never fatal, and replaced.
    std::fs::write(&file, "{not json").unwrap();
    let third = mock
        .command(&dir)
        .args(["generate", "z", "-o", "three.jpg"])
        .output()
        .unwrap();
    assert_exit(&third, 0);
    let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(
        kept[&service]["learned"]["operations"]["gen_2_pro"],
        serde_json::json!([0.4])
    );
}

#[test]
fn a_negative_seed_is_a_value_not_a_flag() {
    let dir = Dir::new("seed");
    let run = genapi(&dir)
        .args(["generate", "x", "--seed", "-5", "-o", "s.jpg", "--json"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert_eq!(json_lines(&run)[0]["seed"], -5);
}

#[test]
fn a_misspelt_image_field_is_named_and_n_with_a_seed_warns() {
    let dir = Dir::new("image-field");
    let run = genapi(&dir)
        .args(["generate", "x", "--image", "nofield=cat.png"])
        .output()
        .unwrap();
    assert_exit(&run, 2);
    let stderr = text(&run.stderr);
    assert!(
        stderr.contains("no image field") && stderr.contains("input_image"),
        "{stderr}"
    );
    let run = genapi(&dir)
        .args(["generate", "x", "-n", "2", "--seed", "7", "-o", "same.jpg"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert!(text(&run.stderr).contains("identical images"), "{}", text(&run.stderr));
}

/// `generate --help` says what files `-o` and `-n` make; the examples it
/// gives make those files.
#[test]
fn the_files_generate_help_promises_are_the_files_it_saves() {
    let dir = Dir::new("help-names");
    let help = genapi(&dir).args(["generate", "--help"]).output().unwrap();
    let help = text(&help.stdout);
    for promise in [
        "`-o fox` saves `fox.jpg`",
        "`-n 3 -o fox.png` saves `fox-1.png`, `fox-2.png` and `fox-3.png`",
    ] {
        assert!(help.contains(promise), "{promise:?} in {help}");
    }
    for args in [&["-o", "fox"][..], &["-n", "3", "-o", "fox.png"]] {
        let run = genapi(&dir).args(["generate", "x"]).args(args).output().unwrap();
        assert_exit(&run, 0);
    }
    for name in ["fox.jpg", "fox-1.png", "fox-2.png", "fox-3.png"] {
        assert!(dir.join(name).is_file(), "{name}");
    }
    assert!(!dir.join("fox").exists() && !dir.join("fox.png").exists());
}

#[test]
fn a_result_that_cannot_be_written_exits_1_and_says_how_to_resume() {
    let dir = Dir::new("unwritable");
    let out = dir.join("gone");
    std::fs::create_dir_all(&out).unwrap();
    let mut child = genapi(&dir)
        .args(["generate", "x", "-o"])
        .arg(out.join("x.jpg"))
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    // Once the task is accepted (the built-in mock takes 3 s), the directory goes.
    while !seen.contains("submitted task") {
        let mut line = String::new();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "{seen}");
        seen.push_str(&line);
    }
    std::fs::remove_dir_all(&out).unwrap();
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{seen}{rest}");
    assert!(rest.contains("cannot write"), "{rest}");
}

#[cfg(unix)]
#[test]
fn an_output_named_by_a_link_to_nothing_is_refused_before_anything_is_submitted() {
    let dir = Dir::new("dangling");
    let nowhere = dir.join("nowhere.jpg");
    std::os::unix::fs::symlink(&nowhere, dir.join("link.jpg")).unwrap();
    // The save would refuse the name (it never replaces one without
    // --force): so does the check before paying, for generate and for the
    // wait that picks a task up again.
    for args in [
        vec!["generate", "x", "-o", "link.jpg"],
        vec!["wait", "some-task", "-o", "link.jpg"],
    ] {
        let run = genapi(&dir).args(&args).output().unwrap();
        assert_exit(&run, 2);
        let stderr = text(&run.stderr);
        assert!(!stderr.contains("submitted task"), "{args:?}: {stderr}");
        // Said by the command that would have submitted, and only by it.
        assert_eq!(
            stderr.contains("nothing was submitted"),
            args[0] == "generate",
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("--out link.jpg") && stderr.contains("link to a file that does not exist"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("--force"), "says what to do: {stderr}");
    }
    // --force replaces the link itself, not what it names.
    let run = genapi(&dir)
        .args(["generate", "x", "-o", "link.jpg", "--force"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert!(!std::fs::symlink_metadata(dir.join("link.jpg")).unwrap().is_symlink());
    assert_eq!(decoded(&dir.join("link.jpg")).0, Some(genapi::ImageFormat::Jpeg));
    assert!(!nowhere.exists());
}

#[test]
fn a_submitted_tasks_id_that_cannot_be_written_is_an_error_and_goes_to_stderr() {
    let dir = Dir::new("full-disk");
    for args in [
        vec!["submit", "x", "-q"],
        vec!["submit", "x", "--json"],
        vec!["submit", "x"],
    ] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let run = genapi(&dir).args(&args).stdout(full).output().unwrap();
        assert_exit(&run, 10);
        let stderr = text(&run.stderr);
        let id = stderr
            .lines()
            .find_map(|l| l.strip_prefix("submitted task "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or_else(|| panic!("{args:?}: the id is on stderr: {stderr}"));
        assert!(!id.is_empty(), "{stderr}");
        assert!(
            stderr.contains("could not be written to stdout") && stderr.contains("ended with the built-in mock"),
            "{args:?}: {stderr}"
        );
    }
}

/// Runs the command and fails (killing it) if it has not ended within a
/// minute: a hang is a failure of the test, not a stuck run.
pub(crate) fn output_within_a_minute(command: &mut Command) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the command hung");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
fn input_files_must_be_regular_files_within_a_named_limit() {
    let dir = Dir::new("inputs");
    // One byte over each limit, sparse (nothing is written to the disk).
    let oversize = |name: &str, size: u64| {
        std::fs::File::create(dir.join(name)).unwrap().set_len(size).unwrap();
        name.to_string()
    };
    let fifo = dir.join("fifo");
    let fifo_name = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(fifo_name.as_ptr(), 0o600) }, 0);
    std::fs::write(
        dir.join("zero-image.jsonl"),
        r#"{"model": "gen-2-pro", "prompt": "x", "input_image": "/dev/zero"}"#,
    )
    .unwrap();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "generate".into(),
                "--prompt-file".into(),
                oversize("prompt.txt", (1 << 20) + 1),
            ],
            "1 MiB",
        ),
        (
            vec![
                "generate".into(),
                "x".into(),
                "--image".into(),
                oversize("big.png", (32 << 20) + 1),
            ],
            "32 MiB",
        ),
        (
            vec![
                "batch".into(),
                oversize("jobs.jsonl", (64 << 20) + 1),
                "--out".into(),
                "shots".into(),
            ],
            "64 MiB",
        ),
        (
            vec!["generate".into(), "--prompt-file".into(), "fifo".into()],
            "not a regular file",
        ),
        (
            vec!["generate".into(), "x".into(), "--image".into(), "fifo".into()],
            "not a regular file",
        ),
        (
            vec!["batch".into(), "fifo".into(), "--out".into(), "shots".into()],
            "not a regular file",
        ),
        (
            vec!["generate".into(), "--prompt-file".into(), "/dev/zero".into()],
            "not a regular file",
        ),
        (
            vec!["generate".into(), "x".into(), "--image".into(), "/dev/zero".into()],
            "not a regular file",
        ),
        (
            vec!["batch".into(), "/dev/zero".into(), "--out".into(), "shots".into()],
            "not a regular file",
        ),
        (
            vec![
                "batch".into(),
                "zero-image.jsonl".into(),
                "--out".into(),
                "shots".into(),
            ],
            "not a regular file",
        ),
    ];
    for (args, expected) in cases {
        let run = output_within_a_minute(genapi(&dir).args(&args));
        assert_exit(&run, 2);
        let stderr = text(&run.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    // A prompt on stdin has the same limit.
    let mut child = genapi(&dir)
        .args(["generate", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    // The command stops reading past the limit: the rest may not be taken.
    let _ = stdin.write_all(&vec![b'a'; (1 << 20) + 4096]);
    drop(stdin);
    let run = child.wait_with_output().unwrap();
    assert_exit(&run, 2);
    assert!(text(&run.stderr).contains("1 MiB"), "{}", text(&run.stderr));
}

#[test]
fn a_learned_durations_file_that_is_not_a_small_regular_file_is_ignored_with_a_warning() {
    let dir = Dir::new("learned-hostile");
    let mock = Mock::start(&dir, &["--duration-ms", "50"]);
    let cache = dir.join("cache").join("genapi");
    std::fs::create_dir_all(&cache).unwrap();
    let file = cache.join("learned.json");
    fn oversize(path: &Path) {
        std::fs::write(path, format!("{{}}{}", " ".repeat(1 << 20))).unwrap();
    }
    fn fifo(path: &Path) {
        let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
    }
    fn endless(path: &Path) {
        std::os::unix::fs::symlink("/dev/zero", path).unwrap();
    }
    // Valid JSON, but over the 1 MiB limit; a named pipe (no writer: reading
    // it would wait for ever); a link (never followed) to a device that
    // never ends.
    type Make = fn(&Path);
    let cases: [(&str, Make); 3] = [
        ("1 MiB", oversize),
        ("not a regular file", fifo),
        ("a link, where a file the program keeps for itself was to be", endless),
    ];
    for (n, (expected, make)) in cases.iter().enumerate() {
        let _ = std::fs::remove_file(&file);
        make(&file);
        let run =
            output_within_a_minute(
                mock.command(&dir)
                    .args(["generate", "x", "--json", "-o", &format!("{n}.jpg")]),
            );
        assert_exit(&run, 0);
        let stderr = text(&run.stderr);
        assert!(
            stderr.contains("warning: ignoring the learned task durations") && stderr.contains(expected),
            "{expected}: {stderr}"
        );
        // Replaced by the command itself: nothing for the user to remove.
        assert!(
            stderr.contains("it is replaced after the next task") && !stderr.contains("remove it"),
            "{stderr}"
        );
        assert_eq!(json_lines(&run).len(), 1);
        let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert!(kept.is_object(), "replaced by what this run learned: {kept}");
    }
}

/// The codes a table lists: the first number of each of its lines.
fn listed_codes<'a>(lines: impl Iterator<Item = &'a str>) -> Vec<u8> {
    lines
        .filter_map(|line| {
            let first = line.trim_start_matches(['|', ' ']).split([' ', '|']).next()?;
            first.parse().ok()
        })
        .collect()
}

/// The numbers of a "in that order" list, without what parentheses add.
fn order_of(text: &str) -> Vec<u8> {
    let mut depth = 0;
    let kept: String = text
        .chars()
        .filter(|c| {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                _ => return depth == 0,
            }
            false
        })
        .collect();
    kept.split(|c: char| !c.is_ascii_digit())
        .filter_map(|n| n.parse().ok())
        .collect()
}

/// The exit codes docs/command.md lists are those `genapi --help` lists
/// (the command's one list, whose mapping from each failure class is
/// tested with it), and so is a batch's order.
#[test]
fn help_and_the_command_docs_list_the_same_exit_codes() {
    let dir = Dir::new("exit-code-tables");
    let help = text(&genapi(&dir).arg("--help").output().unwrap().stdout);
    let section = help.split("Exit codes:").nth(1).expect("an exit code section");
    let (rows, order) = section.split_once("batch:").expect("the batch's order");
    let expected = listed_codes(rows.lines());
    // Success, the command's two own codes and the classes' codes.
    assert_eq!(expected, vec![0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 130], "{section}");
    // The help gives the order inside parentheses of its own.
    let listed = order
        .split("most serious failure")
        .nth(1)
        .and_then(|rest| rest.split_once('('))
        .and_then(|(_, rest)| rest.split_once(')'))
        .map_or("", |(inside, _)| inside);
    let batch_order = order_of(listed);
    assert_eq!(batch_order.len(), 10, "every failure code once: {order}");

    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/command.md")).unwrap();
    let table = readme
        .lines()
        .skip_while(|line| !line.starts_with("| exit code |"))
        .skip(2)
        .take_while(|line| line.starts_with('|'));
    assert_eq!(listed_codes(table), expected, "docs/command.md's exit code table");
    let sentence = readme
        .split("class among its lines, in this order:")
        .nth(1)
        .and_then(|rest| rest.split('.').next())
        .expect("the README says a batch's order");
    assert_eq!(order_of(sentence), batch_order, "the README's batch order: {sentence}");
}

/// A `genapi mock` restarted on the same address is the same service, as a
/// live service's address is: it prints the same variables (so a profile
/// written for it keeps working), and what the command learned of its task
/// durations is kept across the restart, the newer beside the older.
#[test]
fn a_mock_restarted_on_the_same_address_is_the_same_service() {
    let dir = Dir::new("learned-per-mock");
    let port = crate::common::free_ports(3);
    let address = format!("127.0.0.1:{port}");
    let file = dir.join("cache").join("genapi").join("learned.json");
    let learned_for = |mock: &Mock| -> Value {
        let kept: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let base = mock
            .variables
            .iter()
            .find(|(name, _)| name == "GENAPI_BASE_URL")
            .map(|(_, value)| value.clone())
            .unwrap();
        let entries: Vec<&Value> = kept
            .as_object()
            .unwrap()
            .iter()
            .filter(|(service, _)| service.starts_with(&base))
            .map(|(_, kept)| &kept["learned"]["operations"]["gen_2_pro"])
            .collect();
        serde_json::json!(entries)
    };
    let slow = Mock::start(&dir, &["--addr", &address, "--duration-ms", "1500"]);
    let run = slow
        .command(&dir)
        .args(["generate", "x", "-o", "one.jpg"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert_eq!(learned_for(&slow), serde_json::json!([[1.5]]));
    let slow_variables = slow.variables.clone();
    drop(slow);

    let quick = Mock::start(&dir, &["--addr", &address, "--duration-ms", "300"]);
    let run = quick
        .command(&dir)
        .args(["generate", "y", "-o", "two.jpg"])
        .output()
        .unwrap();
    assert_exit(&run, 0);
    assert_eq!(
        quick.variables, slow_variables,
        "the restarted mock's addresses are the earlier one's"
    );
    assert_eq!(learned_for(&quick), serde_json::json!([[1.5, 0.3]]));
}

/// Completions for three shells and the man page come from the command's
/// own definition: every subcommand and option is in them, and bash reads
/// its completions without a syntax error.
#[test]
fn completions_and_the_man_page_are_made_from_the_commands_definition() {
    let dir = Dir::new("completions");
    let made = |args: &[&str]| {
        let run = genapi(&dir).args(args).output().unwrap();
        assert_eq!(run.status.code(), Some(0), "{args:?}: {}", text(&run.stderr));
        text(&run.stdout)
    };
    let bash = made(&["completions", "bash"]);
    assert!(bash.contains("_genapi()") && bash.contains("--max-credits") && bash.contains("completions"));
    let script = dir.join("genapi.bash");
    std::fs::write(&script, &bash).unwrap();
    let checked = std::process::Command::new("bash")
        .arg("-n")
        .arg(&script)
        .output()
        .unwrap();
    assert!(checked.status.success(), "{}", text(&checked.stderr));
    assert!(made(&["completions", "zsh"]).starts_with("#compdef genapi"));
    assert!(made(&["completions", "fish"]).contains("complete -c genapi"));
    let man = made(&["man"]);
    assert!(
        man.contains(".TH genapi 1") && man.contains("batch") && man.contains("mock"),
        "{man}"
    );
    // The first page refers to one page per command; each is made.
    assert!(man.contains("genapi\\-batch(1)"), "{man}");
    let batch = made(&["man", "batch"]);
    assert!(
        batch.contains(".TH genapi-batch 1") && batch.contains("max\\-credits"),
        "{batch}"
    );
    assert_eq!(
        genapi(&dir).args(["man", "nope"]).output().unwrap().status.code(),
        Some(2)
    );
    let refused = genapi(&dir).args(["completions", "tcsh"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "an unknown shell is a usage error");
}

/// `genapi mock --help` lists the mock's own options and the global ones it
/// uses, not those that concern a client; a global option given there is
/// still accepted, as everywhere.
#[test]
fn the_mocks_help_shows_only_what_the_mock_uses() {
    let dir = Dir::new("mock-help");
    let help = text(&genapi(&dir).args(["mock", "--help"]).output().unwrap().stdout);
    for own in ["--replay", "--webhook-target", "--timeout", "--json", "--quiet"] {
        assert!(help.contains(own), "{own} missing from:\n{help}");
    }
    for client in ["--trust-origin", "--record", "--record-images", "--force", "--mock"] {
        let listed = help
            .lines()
            .any(|line| line.trim_start().starts_with(&format!("{client} ")));
        assert!(!listed, "{client} listed in:\n{help}");
    }
    let elsewhere = text(&genapi(&dir).args(["generate", "--help"]).output().unwrap().stdout);
    assert!(
        elsewhere.contains("--trust-origin") && elsewhere.contains("--force"),
        "{elsewhere}"
    );
    // The same for the other commands that do not talk to the service.
    for (command, shown, hidden) in [
        ("gallery", "--json", "--record"),
        ("completions", "--help", "--json"),
        ("man", "--force", "--record"),
        ("grid", "--force", "--trust-origin"),
        ("config", "--profile", "--record"),
    ] {
        let help = text(&genapi(&dir).args([command, "--help"]).output().unwrap().stdout);
        let listed = |flag: &str| {
            help.lines()
                .any(|line| line.trim_start().starts_with(&format!("{flag} ")))
        };
        assert!(
            listed(shown) || help.contains(shown),
            "{command}: {shown} missing from:\n{help}"
        );
        assert!(!listed(hidden), "{command}: {hidden} listed in:\n{help}");
    }
    let run = genapi(&dir)
        .args([
            "mock",
            "--force",
            "--trust-origin",
            "https://a.example",
            "--timeout",
            "1",
        ])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
}
