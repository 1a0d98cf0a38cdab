//! `cargo xtask check | regen | diff-upstream FILE [--map-prefix FROM=TO]… | drift FILE… [--propose OUT] | guards [NAME]`

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The largest document read (`openapi.json`, another description).
const DOCUMENT_LIMIT: u64 = 16 << 20;

/// A document's text, by the file policy of `genapi-files`: a regular file
/// within [`DOCUMENT_LIMIT`].
fn read(path: &Path) -> Result<String, String> {
    genapi_files::read_text(path, DOCUMENT_LIMIT).map_err(|refused| format!("cannot read {refused}"))
}

fn check() -> Result<(), String> {
    let path = root().join("openapi.json");
    let problems = xtask::check(&read(&path)?);
    if problems.is_empty() {
        println!("openapi.json: ok");
        Ok(())
    } else {
        Err(format!(
            "openapi.json has {} problem(s):\n{}",
            problems.len(),
            problems
                .iter()
                .map(|p| format!("  - {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        ))
    }
}

fn cargo(args: &[&str], envs: &[(&str, &str)]) -> Result<bool, String> {
    let mut command = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    command.args(args).current_dir(root());
    for (k, v) in envs {
        command.env(k, v);
    }
    command
        .status()
        .map(|s| s.success())
        .map_err(|e| format!("cannot run cargo: {e}"))
}

/// The surface part of a snapshot file (after insta's header).
fn snapshot_body(text: &str) -> String {
    text.splitn(3, "---").nth(2).unwrap_or(text).trim().to_string()
}

fn regen() -> Result<(), String> {
    check()?;
    if !cargo(&["build", "--quiet"], &[])? {
        return Err("the build failed; see above".into());
    }
    let snapshots = root().join("tests/client/snapshots");
    let surface_snap = snapshots.join("client__spec_snapshots__api_surface.snap");
    let before = read(&surface_snap).map(|t| snapshot_body(&t)).unwrap_or_default();
    let passed = cargo(
        &[
            "test",
            "--quiet",
            "-p",
            "genapi",
            "--test",
            "client",
            "spec_snapshots::",
        ],
        &[
            ("INSTA_UPDATE", "new"),
            ("INSTA_FORCE_PASS", "0"),
            ("RUST_BACKTRACE", "0"),
        ],
    )?;
    let doc: serde_json::Value =
        serde_json::from_str(&read(&root().join("openapi.json"))?).map_err(|e| e.to_string())?;
    let after = xtask::surface(&doc);
    let (old, new): (Vec<&str>, Vec<&str>) = (before.lines().collect(), after.trim().lines().collect());
    let removed: Vec<&&str> = old.iter().filter(|l| !new.contains(l)).collect();
    let added: Vec<&&str> = new.iter().filter(|l| !old.contains(l)).collect();
    println!("API surface: {} line(s) added, {} removed", added.len(), removed.len());
    for line in removed {
        println!("- {line}");
    }
    for line in added {
        println!("+ {line}");
    }
    let pending: Vec<String> = std::fs::read_dir(&snapshots)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".snap.new"))
                .collect()
        })
        .unwrap_or_default();
    if pending.is_empty() && passed {
        println!("snapshots: unchanged");
        return Ok(());
    }
    println!("snapshots to review: {}", pending.join(", "));
    if Command::new("cargo")
        .args(["insta", "--version"])
        .output()
        .is_ok_and(|o| o.status.success())
    {
        cargo(&["insta", "review"], &[])?;
    } else {
        println!(
            "review them with `cargo insta review` (cargo install cargo-insta), or accept with `cargo insta accept`"
        );
    }
    Ok(())
}

const USAGE: &str = "usage: cargo xtask TASK

The maintenance tasks of openapi.json:
  check                  the document is fit to generate from (OpenAPI 3.0, version 0.0.1,
                         every contract path, and what build.rs refuses: dangling or
                         looping $refs, shared request schemas, patterns that do not compile)
  regen                  check, rebuild, run the document's snapshot tests and print what
                         changed in the API surface
  diff-upstream FILE     operations and fields that differ from another description of the
                         service (cargo xtask diff-upstream --help)
  drift FILE...          recorded traffic checked against the document
                         (cargo xtask drift --help)
  guards [NAME]          weakens each guard of paying once in turn (xtask/src/guards.rs;
                         those whose name holds NAME) and runs the test that must catch
                         it; the file is put back after each. Minutes per guard
  -h, --help             this text";

const DIFF_USAGE: &str = "usage: cargo xtask diff-upstream FILE [--map-prefix FROM=TO]...

Compares openapi.json with another description of the service (OpenAPI 3.0 or 3.1):
operations, request fields, query parameters, response status codes and security.
Values are compared, not spellings; differences on nodes carrying an x-correction are
listed apart as known. Exits non-zero when there are unknown differences.

  --map-prefix FROM=TO   read the other document's paths starting with FROM as TO
                         (e.g. --map-prefix /v1/flux-=/v1/gen-); repeatable
  -h, --help             this text";

fn diff_upstream(args: &[String]) -> Result<(), String> {
    let mut file = None;
    let mut rename = Vec::new();
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{DIFF_USAGE}");
                return Ok(());
            }
            "--map-prefix" => {
                let pair = rest.next().ok_or("--map-prefix needs FROM=TO")?;
                let (from, to) = pair.split_once('=').ok_or("--map-prefix needs FROM=TO")?;
                rename.push((from.to_string(), to.to_string()));
            }
            flag if flag.starts_with('-') => return Err(format!("unknown flag {flag}\n\n{DIFF_USAGE}")),
            path if file.is_none() => file = Some(PathBuf::from(path)),
            extra => return Err(format!("unexpected argument {extra}\n\n{DIFF_USAGE}")),
        }
    }
    let file = file.ok_or(DIFF_USAGE)?;
    let ours: serde_json::Value =
        serde_json::from_str(&read(&root().join("openapi.json"))?).map_err(|e| format!("openapi.json: {e}"))?;
    let theirs: serde_json::Value =
        serde_json::from_str(&read(&file)?).map_err(|e| format!("{}: {e}", file.display()))?;
    let report = xtask::diff(&ours, &theirs, &rename);
    print_quoting(&report.render());
    if report.unknown.is_empty() {
        Ok(())
    } else {
        Err(format!("{} unknown difference(s) to act on", report.unknown.len()))
    }
}

const DRIFT_USAGE: &str = "usage: cargo xtask drift FILE... [--propose OUT [--force]] [--snapshot FILE.snap]

Checks recorded traffic (HAR files from ClientBuilder::record or genapi --record) against
openapi.json: fields it does not list, required fields missing, wrong types, values its
enumerations do not list (a new task status), undocumented status codes and content types,
and polling or result addresses outside the trusted hosts. Findings are grouped by operation
and JSON pointer; those an x-correction covers are listed apart. Exits non-zero when
anything drifted. Each recording is a regular file of at most 4 GiB, read entry by entry.

  --propose OUT   write openapi.json patched for the additive findings (new optional
                  fields, new enumeration values) to OUT, to review before `cargo xtask regen`;
                  an existing OUT is replaced only with --force
  --force         replace OUT when it exists (never through a link)
  --snapshot FILE.snap
                  keep what drifted (one line per operation, place, pointer and kind; no
                  counts or examples) as an insta snapshot: the command then passes when
                  the findings are the accepted ones, and otherwise leaves FILE.snap.new
                  to review (`cargo insta review`, or INSTA_UPDATE=always to accept)
  -h, --help      this text";

fn drift(args: &[String]) -> Result<(), String> {
    let mut files = Vec::new();
    let mut propose = None;
    let mut snapshot = None;
    let mut force = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{DRIFT_USAGE}");
                return Ok(());
            }
            "--propose" => propose = Some(PathBuf::from(rest.next().ok_or("--propose needs a file to write")?)),
            "--snapshot" => snapshot = Some(PathBuf::from(rest.next().ok_or("--snapshot needs a FILE.snap")?)),
            "--force" => force = true,
            flag if flag.starts_with('-') => return Err(format!("unknown flag {flag}\n\n{DRIFT_USAGE}")),
            path => files.push(PathBuf::from(path)),
        }
    }
    if files.is_empty() {
        return Err(DRIFT_USAGE.into());
    }
    let document = read(&root().join("openapi.json"))?;
    let root: serde_json::Value = serde_json::from_str(&document).map_err(|e| format!("openapi.json: {e}"))?;
    // Each recording is read entry by entry: one entry is held at a time.
    let mut report = xtask::drift::Report::default();
    for file in &files {
        xtask::drift::check_file(&root, file, &mut report)?;
    }
    print_quoting(&report.render());
    if let Some(out) = propose {
        let (text, applied) = xtask::drift::propose::proposal(&document, &root, &report.findings)
            .map_err(|e| format!("openapi.json: {e}"))?;
        // A copy of the document as it is would be a proposal of nothing.
        if applied == 0 {
            println!(
                "\nnothing to propose: no finding is an addition openapi.json could take; {} was not written",
                out.display()
            );
            return finish_drift(snapshot, &report);
        }
        let existing = if force {
            genapi_files::Existing::Replace
        } else {
            genapi_files::Existing::Keep
        };
        genapi_files::write_whole(&out, text.as_bytes(), existing).map_err(|refused| format!("--propose {refused}"))?;
        println!("\n{applied} additive change(s) proposed in {}", out.display());
    }
    finish_drift(snapshot, &report)
}

/// The end of `drift`: the snapshot compared, or the findings judged.
fn finish_drift(snapshot: Option<PathBuf>, report: &xtask::drift::Report) -> Result<(), String> {
    match snapshot {
        Some(file) => compare_snapshot(&file, &report.shape()),
        None if report.drifted() => Err("the recorded traffic drifted from openapi.json".into()),
        None => Ok(()),
    }
}

/// Prints a report that quotes text from elsewhere (another document, what
/// the service answered), without the characters that would act on a
/// terminal or hide text.
fn print_quoting(report: &str) {
    for line in report.lines() {
        println!("{}", genapi_text::clean(line));
    }
}

/// Compares `shape` with the insta snapshot `file` (`DIR/NAME.snap`).
fn compare_snapshot(file: &Path, shape: &str) -> Result<(), String> {
    let name = file
        .file_name()
        .and_then(|n| n.to_str())
        .and_then(|n| n.strip_suffix(".snap"))
        .ok_or_else(|| format!("--snapshot {}: the file's name must end in .snap", file.display()))?
        .to_string();
    let dir = match file.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::path::absolute(&dir).map_err(|e| format!("--snapshot {}: {e}", file.display()))?;
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path(dir);
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_description("cargo xtask drift: what the recorded traffic does that openapi.json does not say");
    // insta reports a difference by panicking, as in a test; here it is
    // the command's verdict.
    let shape = shape.to_string();
    // The settings are used only inside the closure and dropped with it, so
    // nothing observes them after a panic.
    let compare = std::panic::AssertUnwindSafe(move || settings.bind(|| insta::assert_snapshot!(name, shape)));
    let outcome = std::panic::catch_unwind(compare);
    outcome.map_err(|_| {
        format!(
            "the drift differs from the snapshot {}: review {}.new with `cargo insta review`, or accept it \
             with INSTA_UPDATE=always",
            file.display(),
            file.display()
        )
    })
}

/// `cargo xtask guards [NAME]`: each guard weakened in turn, its test run,
/// the file put back; a table of what caught what. Fails when a mutation
/// survives or does not build.
fn guards(only: Option<&str>) -> Result<(), String> {
    let mut survived = Vec::new();
    println!("| guard | test | verdict |\n|---|---|---|");
    for guard in xtask::guards::GUARDS
        .iter()
        .filter(|g| only.is_none_or(|name| g.name.contains(name)))
    {
        let path = root().join(guard.file);
        let original = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", guard.file))?;
        if original.matches(guard.find).count() != 1 {
            return Err(format!("{}: its text is not found once in {}", guard.name, guard.file));
        }
        let restore = Restore {
            path: &path,
            original: &original,
        };
        std::fs::write(&path, original.replacen(guard.find, guard.replace, 1)).map_err(|e| e.to_string())?;
        let (package, target, filter) = guard.test;
        let cargo = |extra: &[&str]| {
            let mut command = Command::new(env!("CARGO"));
            command
                .current_dir(root())
                .args(["test", "--quiet", "-p", package, "--all-features"]);
            match target {
                "--lib" => command.arg("--lib"),
                test => command.args(["--test", test]),
            };
            command.args(extra);
            command
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null());
            command.status().map(|status| status.success())
        };
        let built = cargo(&["--no-run"]).map_err(|e| e.to_string())?;
        let verdict = if !built {
            survived.push(guard.name);
            "the mutation does not build"
        } else if cargo(&["--", filter]).map_err(|e| e.to_string())? {
            survived.push(guard.name);
            "SURVIVED: the test passes without the guard"
        } else {
            "caught"
        };
        drop(restore);
        println!("| {} | `{target} {filter}` | {verdict} |", guard.name);
    }
    if survived.is_empty() {
        Ok(())
    } else {
        Err(format!("not caught: {}", survived.join("; ")))
    }
}

/// Puts a mutated file back as it was, however the run ends.
struct Restore<'a> {
    path: &'a Path,
    original: &'a str,
}

impl Drop for Restore<'_> {
    fn drop(&mut self) {
        if let Err(error) = std::fs::write(self.path, self.original) {
            eprintln!("cannot put {} back: {error}; restore it with git", self.path.display());
        }
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let outcome = match args.first().map(String::as_str) {
        Some("check") => check(),
        Some("regen") => regen(),
        Some("diff-upstream") => diff_upstream(&args[1..]),
        Some("drift") => drift(&args[1..]),
        Some("guards") => guards(args.get(1).map(String::as_str)),
        Some("-h" | "--help" | "help") => {
            // A closed pipe (`| head`) is not an error of the help.
            let _ = writeln!(std::io::stdout(), "{USAGE}");
            Ok(())
        }
        _ => Err(USAGE.into()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}
