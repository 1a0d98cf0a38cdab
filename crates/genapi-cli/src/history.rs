//! The recent submissions, for `genapi tasks`: each task `generate` or
//! `submit` sent, its model, when, its status as last known and where its
//! result was saved, newest first, in `history.jsonl` of the command's
//! cache folder (one object a line, the newest [`CAP`] kept).
//!
//! Only what the command may show is kept: never the key, a prompt, a
//! polling URL (which may be signed) or a result's address; the service as
//! shown, without the secrets an address may carry. Keeping it is best
//! effort, as the cache's other files: a file that cannot be read is
//! started again, one that cannot be written is passed over, and two
//! commands ending at the same moment may each keep only their own change.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use clap::Args;
use serde::{Deserialize, Serialize};

use crate::{out, Failure, Global};

/// The most submissions kept.
pub const CAP: usize = 200;

/// The most characters a field keeps ([`FIELD_MOST`] and the mark of a
/// cut): a task id longer than it is not kept at all (cut, it could not be
/// used), any other field is cut.
const FIELD_MOST: usize = 256;

/// The most characters a field shows in `genapi tasks`' lines.
const SHOWN_MOST: usize = 80;

/// Largest history file read: [`CAP`] lines of six fields of at most
/// [`FIELD_MOST`] characters (and a cut's mark), four bytes each, with room.
const FILE_LIMIT: u64 = 2 * 1024 * 1024;

/// `genapi tasks`' options.
#[derive(Args)]
pub struct TasksArgs {
    /// Show at most this many, newest first.
    #[arg(long, value_name = "N", default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=CAP as i64))]
    pub limit: u32,
}

/// One submission, as kept and as `genapi tasks --json` prints it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    /// The task's id.
    pub id: String,
    /// The model it was sent to.
    pub model: String,
    /// When it was accepted (RFC 3339, UTC).
    pub submitted: String,
    /// Its status as last known, in plain words ([`plain_status`]).
    pub status: String,
    /// Where its result was saved, once it was.
    pub saved: Option<String>,
    /// Its result was written to standard output (`-o -`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub written_to_stdout: bool,
    /// The service it was sent to, as shown.
    pub service: String,
}

/// `history.jsonl` in the command's cache folder.
fn path() -> Option<PathBuf> {
    Some(crate::cache::dir()?.join(crate::cache::HISTORY.name))
}

/// A status of the service in plain words.
pub fn plain_status(status: &str) -> String {
    match genapi::TaskStatus::from(status) {
        genapi::TaskStatus::Ready => "ready".into(),
        genapi::TaskStatus::Error => "failed".into(),
        genapi::TaskStatus::RequestModerated => "refused by moderation (the request)".into(),
        genapi::TaskStatus::ContentModerated => "refused by moderation (the result)".into(),
        genapi::TaskStatus::TaskNotFound => "not found (expired, or unknown to the service)".into(),
        _ => "in progress".into(),
    }
}

/// The kept submissions, newest first (none when there is no file, or
/// when it is in a folder others may change, where none are kept: see
/// [`crate::cache::read_kept`]; a line that is not an entry is passed
/// over); why the file cannot be read (too large, not a regular file, a
/// link, others may change it), when it cannot: it is then never written
/// over, so what it holds is not erased.
fn read(path: &Path) -> Result<Vec<Entry>, Unreadable> {
    let kept = crate::cache::read_kept(&crate::cache::HISTORY, path, FILE_LIMIT).map_err(|refused| Unreadable {
        problem: refused.problem(),
        // Giving it back to the user alone keeps what it holds; any other
        // fix of the file policy (another name, another file) is none for
        // a file of a fixed name.
        fix: match refused {
            genapi_files::FileError::Exposed {
                exposure: genapi_files::Exposure::OpenToOthers { .. },
                ..
            } => refused.fix(),
            _ => None,
        },
    })?;
    let text = String::from_utf8(kept.unwrap_or_default()).map_err(|_| Unreadable {
        problem: "not UTF-8 text".into(),
        fix: None,
    })?;
    Ok(text
        .lines()
        .filter_map(|line| serde_json::from_str(line).ok())
        .collect())
}

/// `text` cut to [`FIELD_MOST`] characters, as a field is kept.
fn bounded(text: &str) -> String {
    genapi_text::cut(text, FIELD_MOST).into_owned()
}

/// `entry` as it is shown: every field scrubbed of what a terminal must
/// not be given (bidi and invisible characters, controls).
fn scrubbed(entry: &Entry) -> Entry {
    Entry {
        id: out::clean(&entry.id),
        model: out::clean(&entry.model),
        submitted: out::clean(&entry.submitted),
        status: out::clean(&entry.status),
        saved: entry.saved.as_deref().map(out::clean),
        written_to_stdout: entry.written_to_stdout,
        service: out::clean(&entry.service),
    }
}

/// Keeps `entries`, the newest [`CAP`] of them; whether they were kept.
fn write(path: &Path, mut entries: Vec<Entry>) -> bool {
    entries.truncate(CAP);
    let mut text = String::new();
    for entry in &entries {
        if let Ok(line) = serde_json::to_string(entry) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    crate::cache::keep_private(&crate::cache::HISTORY, path, text.as_bytes())
}

/// Adds `entry` as the newest submission of the history at `path`, and
/// whether it was kept (a folder the cache may not use keeps none: that is
/// said as the cache says it); why it cannot, when the file there cannot
/// be read (it is then left as it is: see [`read`]).
fn add_at(path: &Path, entry: Entry) -> Result<bool, Unreadable> {
    let mut entries = read(path)?;
    entries.retain(|kept| kept.id != entry.id);
    entries.insert(0, entry);
    Ok(write(path, entries))
}

/// Why the history cannot be read, and what keeps what it holds, when
/// something does.
#[derive(Debug)]
struct Unreadable {
    problem: String,
    fix: Option<String>,
}

/// That the history at `path` cannot be read, because of `why`, and what
/// to do: what keeps it, or else to remove it.
fn unreadable(path: &Path, why: &Unreadable) -> String {
    let shown = out::clean(&path.display().to_string());
    let fix = match &why.fix {
        Some(fix) => out::clean(fix),
        None => format!("to start again, remove it: rm {}", out::shell_quote(&shown)),
    };
    format!(
        "the history of submissions in {shown} cannot be read: {}; it is kept as it is; {fix}",
        out::clean(&why.problem)
    )
}

/// Whether `kept` and `now`, two services as shown, are one: an address
/// written with a slash after it or without, its scheme or host in
/// capitals or not, or with its scheme's own port, is the same address
/// ([`crate::address_key`]).
fn same_service(kept: &str, now: &str) -> bool {
    kept == now || crate::address_key(kept) == crate::address_key(now)
}

/// Notes the status (and saved file) of task `id` sent to `service` in the
/// history at `path`, when the task is there: another service's answer
/// about the same id (a `get` with the wrong profile) is not this task's.
fn note_at(path: &Path, id: &str, service: &str, status: &str, saved: Option<&Path>) {
    let Ok(mut entries) = read(path) else { return };
    let Some(entry) = entries
        .iter_mut()
        .find(|entry| entry.id == id && same_service(&entry.service, service))
    else {
        return;
    };
    if !status.is_empty() {
        entry.status = plain_status(status);
    }
    match saved {
        // `-o -`: no file holds it.
        Some(saved) if saved == Path::new("-") => entry.written_to_stdout = true,
        Some(saved) => entry.saved = Some(bounded(&saved.display().to_string())),
        None => {}
    }
    write(path, entries);
}

/// Keeps task `id`, just accepted for `model`. A history that cannot be
/// read is said once a run, naming the first task it costs: `genapi tasks`
/// will not list it, and its id (printed as each task is sent) is what
/// picks it up.
pub fn submitted(global: &Global, id: &str, model: &str) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let Some(path) = path() else { return };
    // One spelling of the service, however its address was written.
    let service = crate::address_key(&crate::service_shown(global));
    let Some(entry) = new_entry(id, model, &service) else {
        return;
    };
    let why = match add_at(&path, entry) {
        Ok(true) => return,
        Ok(false) => "history.jsonl could not be kept".to_string(),
        Err(why) => unreadable(&path, &why),
    };
    if !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        out::err(&format!(
            "warning: task {}, and any other this run sends, is not in the list genapi tasks shows: {why}",
            out::clean(id)
        ));
    }
}

/// The entry kept for task `id`, just accepted: none for an id longer than
/// [`FIELD_MOST`] (no service gives one; cut, it could not be used).
fn new_entry(id: &str, model: &str, service: &str) -> Option<Entry> {
    if id.chars().count() > FIELD_MOST {
        tracing::debug!("a task id too long to keep is not kept in the history");
        return None;
    }
    Some(Entry {
        id: id.to_string(),
        model: bounded(model),
        submitted: crate::progress::utc(SystemTime::now()),
        status: "submitted".into(),
        saved: None,
        written_to_stdout: false,
        service: bounded(service),
    })
}

/// The model task `id` was submitted to, when this command's history holds
/// it for the service in use: what `wait` and `get` report for a task they
/// were given only by id (`None` when the history does not know it).
pub fn model_of(global: &Global, id: &str) -> Option<String> {
    model_at(&path()?, id, &crate::service_shown(global))
}

/// The model the history at `path` keeps for task `id` sent to `service`:
/// an id another service gave names another task. A history others could
/// have written is not read ([`read`]).
fn model_at(path: &Path, id: &str, service: &str) -> Option<String> {
    read(path)
        .ok()?
        .into_iter()
        .find(|entry| entry.id == id && same_service(&entry.service, service))
        .map(|entry| bounded(&out::clean(&entry.model)))
        .filter(|model| !model.trim().is_empty())
}

/// The service, as shown, this command's history says task `id` was sent
/// to (the newest, should two services have given the same id); `None`
/// when it keeps none.
pub fn sent_to(id: &str) -> Option<String> {
    read(&path()?)
        .ok()?
        .into_iter()
        .find(|entry| entry.id == id)
        .map(|entry| bounded(&out::clean(&entry.service)))
}

/// Notes what is now known of task `id` from the service in use: its
/// status (empty when unknown) and the file its result was saved to.
pub fn note(global: &Global, id: &str, status: &str, saved: Option<&Path>) {
    // Absolute: the list is read from any folder (`-` is standard output).
    let saved = saved.map(|file| {
        if file == Path::new("-") {
            file.to_path_buf()
        } else {
            std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf())
        }
    });
    if let Some(path) = path() {
        note_at(&path, id, &crate::service_shown(global), status, saved.as_deref());
    }
}

/// `genapi tasks`: the newest submissions, one a line (with `--json`, one
/// object a line).
pub fn list(global: &Global, args: &TasksArgs) -> Result<(), Failure> {
    let Some(path) = path() else {
        return Err(Failure::usage("there is no cache folder, so no submissions are kept"));
    };
    let mut said_unreadable = false;
    let entries = read(&path).unwrap_or_else(|why| {
        said_unreadable = true;
        out::err(&format!("warning: {}", unreadable(&path, &why)));
        Vec::new()
    });
    // A folder the history may not be written in (or that cannot be made)
    // keeps none, which reading said with what to run: saying "none yet"
    // as well would hide it.
    let refused = genapi_files::may_write_private(&path).is_err() || crate::cache::cannot_be_made(&path).is_some();
    if entries.is_empty() && !global.json && !refused && !said_unreadable {
        out::err(&format!(
            "no submissions yet (the newest {CAP} are kept in {})",
            out::clean(&path.display().to_string())
        ));
    }
    for entry in entries.iter().take(args.limit as usize) {
        let entry = scrubbed(entry);
        if global.json {
            out::out(&serde_json::to_string(&entry).unwrap_or_default());
        } else {
            out::out(&line(&entry));
        }
    }
    Ok(())
}

/// `entry` as one line of `genapi tasks`, each field cut to [`SHOWN_MOST`]
/// characters.
fn line(entry: &Entry) -> String {
    let shown = |text: &str| genapi_text::cut(text, SHOWN_MOST).into_owned();
    let saved = match (&entry.saved, entry.written_to_stdout) {
        (_, true) => "written to standard output".to_string(),
        (Some(file), false) => format!("saved {}", shown(file)),
        (None, false) => "not saved".to_string(),
    };
    let model = if entry.model.is_empty() { "-" } else { &entry.model };
    format!(
        "{}  {}  {}  {}  {saved}  ({})",
        shown(&entry.id),
        shown(model),
        shown(&entry.submitted),
        shown(&entry.status),
        shown(&entry.service)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(n: usize) -> Entry {
        Entry {
            id: format!("task-{n}"),
            model: "gen-2-pro".into(),
            submitted: "2026-01-01T00:00:00Z".into(),
            status: "submitted".into(),
            saved: None,
            written_to_stdout: false,
            service: "the built-in mock".into(),
        }
    }

    #[test]
    fn a_huge_id_is_not_kept_and_long_fields_are_cut() {
        assert!(entry_of("x".repeat(600_000)).is_none(), "a 600 KB id is not kept");
        let kept = new_entry("task-1", &"m".repeat(10_000), &"s".repeat(10_000)).unwrap();
        assert!(kept.model.chars().count() <= FIELD_MOST + 35, "{}", kept.model.len());
        assert!(kept.service.chars().count() <= FIELD_MOST + 35);
        assert!(kept.model.ends_with("(10000 characters)"), "cut with a mark");
    }

    fn entry_of(id: String) -> Option<Entry> {
        new_entry(&id, "gen-2-pro", "the built-in mock")
    }

    #[test]
    #[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
    fn a_task_s_model_is_known_only_for_the_service_it_was_sent_to() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("genapi-history-model-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.join("history.jsonl");
        add_at(&path, entry(1)).unwrap();
        let mut elsewhere = entry(2);
        elsewhere.service = "https://api.example".into();
        elsewhere.model = "gen-2-klein-4b\u{1b}[2J".into();
        add_at(&path, elsewhere).unwrap();
        assert_eq!(
            model_at(&path, "task-1", "the built-in mock").as_deref(),
            Some("gen-2-pro")
        );
        assert_eq!(
            model_at(&path, "task-2", "the built-in mock"),
            None,
            "another service's task"
        );
        assert_eq!(
            model_at(&path, "task-3", "the built-in mock"),
            None,
            "never sent from here"
        );
        let mut blank = entry(3);
        blank.model = "\u{1b}\u{200b}".into();
        add_at(&path, blank).unwrap();
        assert_eq!(
            model_at(&path, "task-3", "the built-in mock"),
            None,
            "nothing left to show"
        );
        let mut long = entry(4);
        long.model = "m".repeat(100_000);
        add_at(&path, long).unwrap();
        let cut = model_at(&path, "task-4", "the built-in mock").unwrap();
        assert!(
            cut.chars().count() <= FIELD_MOST + 35 && cut.ends_with("characters)"),
            "{cut}"
        );
        let shown = model_at(&path, "task-2", "https://api.example").unwrap();
        assert!(
            shown.starts_with("gen-2-klein-4b") && !shown.contains('\u{1b}'),
            "{shown:?}"
        );
        // The same address, spelled another way, is the same service.
        for spelled in [
            "https://api.example/",
            "HTTPS://API.example:443",
            "https://api.example//",
        ] {
            assert_eq!(model_at(&path, "task-2", spelled), Some(shown.clone()), "{spelled}");
        }
        for other in [
            "https://api.example/v2",
            "http://api.example",
            "https://api.example:8443",
        ] {
            assert_eq!(model_at(&path, "task-2", other), None, "{other}");
        }
        // A folder others may write in: what it holds is not this command's.
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(model_at(&path, "task-1", "the built-in mock"), None);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        // Nor a history others may change, nor a link (to one elsewhere).
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(model_at(&path, "task-1", "the built-in mock"), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let moved = dir.join("elsewhere.jsonl");
        std::fs::rename(&path, &moved).unwrap();
        std::os::unix::fs::symlink(&moved, &path).unwrap();
        assert_eq!(model_at(&path, "task-1", "the built-in mock"), None);
        assert!(
            add_at(&path, entry(5)).unwrap_err().problem.contains("a link"),
            "said why"
        );
        assert!(path.is_symlink(), "a link is left for the user to remove");
        std::fs::remove_file(&path).unwrap();
        std::fs::rename(&moved, &path).unwrap();
        assert_eq!(
            model_at(&path, "task-1", "the built-in mock").as_deref(),
            Some("gen-2-pro")
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// What to do is said once: removing the file, or, for one others may
    /// change, giving it back to the user, which keeps what it holds.
    #[test]
    fn an_unreadable_history_says_what_to_do_once() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("genapi-history-unreadable-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.join("history.jsonl");
        std::os::unix::fs::symlink(dir.join("elsewhere.jsonl"), &path).unwrap();
        let said = unreadable(&path, &read(&path).unwrap_err());
        assert_eq!(said.matches("remove it").count(), 1, "{said}");
        assert!(said.contains("cannot be read: a link, where"), "{said}");
        assert!(
            said.ends_with(&format!("to start again, remove it: rm {}", path.display())),
            "{said}"
        );
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, "").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666)).unwrap();
        let said = unreadable(&path, &read(&path).unwrap_err());
        assert!(
            said.ends_with(&format!("make it yours alone: chmod go-w {}", path.display())),
            "{said}"
        );
        assert!(!said.contains("remove it"), "{said}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_file_too_large_to_read_is_not_written_over() {
        let dir = std::env::temp_dir().join(format!("genapi-history-large-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("history.jsonl");
        let big = "x".repeat(FILE_LIMIT as usize + 1);
        std::fs::write(&path, &big).unwrap();
        assert!(
            add_at(&path, entry(1)).unwrap_err().problem.contains("bytes, above"),
            "said why"
        );
        note_at(&path, "task-1", "the built-in mock", "Ready", None);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), big, "not erased");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_listed_entry_is_cut_and_scrubbed() {
        let mut long = entry(1);
        long.id = format!("{}\u{202e}gpj.exe", "i".repeat(200));
        let shown = scrubbed(&long);
        assert!(!shown.id.contains('\u{202e}'), "bidi scrubbed for --json too");
        let line = line(&shown);
        assert!(line.len() < 400 && line.contains("characters)"), "{line}");
        let mut to_stdout = entry(2);
        to_stdout.written_to_stdout = true;
        assert!(super::line(&to_stdout).contains("written to standard output"));
    }

    #[test]
    fn the_history_keeps_the_newest_within_its_cap() {
        let dir = std::env::temp_dir().join(format!("genapi-history-{}", std::process::id()));
        let path = dir.join("history.jsonl");
        for n in 0..CAP + 30 {
            add_at(&path, entry(n)).unwrap();
        }
        let kept = read(&path).unwrap();
        assert_eq!(kept.len(), CAP);
        assert_eq!(kept[0].id, format!("task-{}", CAP + 29), "newest first");
        assert_eq!(kept[CAP - 1].id, "task-30", "the oldest went");
        let here = "the built-in mock";
        note_at(&path, "task-40", here, "Ready", Some(Path::new("shots/fox.jpg")));
        note_at(&path, "task-41", here, "Content Moderated", None);
        note_at(&path, "task-0", here, "Ready", None);
        note_at(&path, "task-42", "https://elsewhere.example", "Task not found", None);
        let kept = read(&path).unwrap();
        let found = |id: &str| kept.iter().find(|e| e.id == id).cloned();
        assert_eq!(found("task-40").unwrap().status, "ready");
        assert_eq!(found("task-40").unwrap().saved.as_deref(), Some("shots/fox.jpg"));
        assert_eq!(found("task-41").unwrap().status, "refused by moderation (the result)");
        assert!(found("task-0").is_none(), "a task no longer kept is not added back");
        assert_eq!(
            found("task-42").unwrap().status,
            "submitted",
            "another service's answer is not its"
        );
        assert_eq!(kept.len(), CAP);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
