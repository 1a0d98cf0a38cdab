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

/// Largest history file read: [`CAP`] lines of a few hundred bytes, with room.
const FILE_LIMIT: u64 = 1024 * 1024;

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

/// The kept submissions, newest first; none when there is no usable file.
fn read(path: &Path) -> Vec<Entry> {
    if !genapi_files::is_taken(path) {
        return Vec::new();
    }
    match crate::files::read_to_string(path, FILE_LIMIT) {
        Ok(text) => text
            .lines()
            .filter_map(|line| serde_json::from_str(line).ok())
            .collect(),
        Err(why) => {
            tracing::debug!(%why, "the history of submissions is started again");
            Vec::new()
        }
    }
}

/// Keeps `entries`, the newest [`CAP`] of them.
fn write(path: &Path, mut entries: Vec<Entry>) {
    entries.truncate(CAP);
    let mut text = String::new();
    for entry in &entries {
        if let Ok(line) = serde_json::to_string(entry) {
            text.push_str(&line);
            text.push('\n');
        }
    }
    if let Err(error) = genapi_files::write_private(path, text.as_bytes(), genapi_files::Existing::Replace) {
        tracing::debug!(%error, "the history of submissions is not kept");
    }
}

/// Adds `entry` as the newest submission of the history at `path`.
fn add_at(path: &Path, entry: Entry) {
    let mut entries = read(path);
    entries.retain(|kept| kept.id != entry.id);
    entries.insert(0, entry);
    write(path, entries);
}

/// Notes the status (and saved file) of task `id` in the history at `path`,
/// when the task is there.
fn note_at(path: &Path, id: &str, status: &str, saved: Option<&Path>) {
    let mut entries = read(path);
    let Some(entry) = entries.iter_mut().find(|entry| entry.id == id) else {
        return;
    };
    if !status.is_empty() {
        entry.status = plain_status(status);
    }
    if let Some(saved) = saved {
        entry.saved = Some(saved.display().to_string());
    }
    write(path, entries);
}

/// Keeps task `id`, just accepted for `model`.
pub fn submitted(global: &Global, id: &str, model: &str) {
    let Some(path) = path() else { return };
    let entry = Entry {
        id: id.to_string(),
        model: model.to_string(),
        submitted: crate::progress::utc(SystemTime::now()),
        status: "submitted".into(),
        saved: None,
        service: crate::service_shown(global),
    };
    add_at(&path, entry);
}

/// Notes what is now known of task `id`: its service status (empty when
/// unknown) and the file its result was saved to.
pub fn note(id: &str, status: &str, saved: Option<&Path>) {
    // Absolute: the list is read from any folder.
    let saved = saved.map(|file| std::path::absolute(file).unwrap_or_else(|_| file.to_path_buf()));
    if let Some(path) = path() {
        note_at(&path, id, status, saved.as_deref());
    }
}

/// `genapi tasks`: the newest submissions, one a line (with `--json`, one
/// object a line).
pub fn list(global: &Global, args: &TasksArgs) -> Result<(), Failure> {
    let Some(path) = path() else {
        return Err(Failure::usage("there is no cache folder, so no submissions are kept"));
    };
    let entries = read(&path);
    if entries.is_empty() && !global.json {
        out::err(&format!(
            "no submissions yet (the newest {CAP} are kept in {})",
            out::clean(&path.display().to_string())
        ));
    }
    for entry in entries.iter().take(args.limit as usize) {
        if global.json {
            out::out(&serde_json::to_string(entry).unwrap_or_default());
        } else {
            let saved = entry
                .saved
                .as_deref()
                .map_or_else(|| "not saved".into(), |file| format!("saved {file}"));
            let model = if entry.model.is_empty() { "-" } else { &entry.model };
            out::out(&out::clean(&format!(
                "{}  {model}  {}  {}  {saved}  ({})",
                entry.id, entry.submitted, entry.status, entry.service
            )));
        }
    }
    Ok(())
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
            service: "the built-in mock".into(),
        }
    }

    #[test]
    fn the_history_keeps_the_newest_within_its_cap() {
        let dir = std::env::temp_dir().join(format!("genapi-history-{}", std::process::id()));
        let path = dir.join("history.jsonl");
        for n in 0..CAP + 30 {
            add_at(&path, entry(n));
        }
        let kept = read(&path);
        assert_eq!(kept.len(), CAP);
        assert_eq!(kept[0].id, format!("task-{}", CAP + 29), "newest first");
        assert_eq!(kept[CAP - 1].id, "task-30", "the oldest went");
        note_at(&path, "task-40", "Ready", Some(Path::new("shots/fox.jpg")));
        note_at(&path, "task-41", "Content Moderated", None);
        note_at(&path, "task-0", "Ready", None);
        let kept = read(&path);
        let found = |id: &str| kept.iter().find(|e| e.id == id).cloned();
        assert_eq!(found("task-40").unwrap().status, "ready");
        assert_eq!(found("task-40").unwrap().saved.as_deref(), Some("shots/fox.jpg"));
        assert_eq!(found("task-41").unwrap().status, "refused by moderation (the result)");
        assert!(found("task-0").is_none(), "a task no longer kept is not added back");
        assert_eq!(kept.len(), CAP);
        std::fs::remove_dir_all(dir).unwrap();
    }
}
