//! The secrets of a task `genapi submit` or `genapi generate` sent, kept
//! for the `genapi wait` or `genapi get` that picks the task up in another
//! process.
//!
//! The client scrubs every answer of the secrets a submission carried (its
//! webhook secret, the tokens of its webhook address), but a process that
//! only polls never sent them. So `submit` keeps the short text fields of
//! the body it sent (secrets and addresses among them; never images) in a
//! file of the cache readable by the user alone, `wait` and `get` hand them
//! to their client before polling, and the file goes once the task's
//! result is saved. A failed task's stays (a later `genapi get` of it shows
//! its answer, which may quote what it was sent) until it is older than
//! [`KEPT_FOR`]. Keeping it is best effort: a file that cannot be written
//! or read is passed over, and the task is polled all the same (a folder the
//! file policy refuses is said, with what to run: see
//! [`crate::cache::keep_private`]).

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::out;

/// Longest field kept: far above a webhook secret or an address, far below
/// an image.
const FIELD_LIMIT: usize = 4096;

/// Largest file read back.
const FILE_LIMIT: u64 = 256 * 1024;

fn path(task_id: &str) -> Option<PathBuf> {
    Some(
        crate::cache::dir()?
            .join(crate::cache::TASK_SECRETS.name)
            .join(format!("{}.json", out::safe_component(task_id, 64))),
    )
}

/// How long the secrets of a task whose result was never saved are kept.
pub const KEPT_FOR: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Keeps the short text fields of `body`, sent as task `task_id`; the
/// files of tasks older than [`KEPT_FOR`] go.
pub fn keep(task_id: &str, body: &Map<String, Value>) {
    forget_the_old();
    let kept: Map<String, Value> = body
        .iter()
        .filter(|(_, value)| value.as_str().is_some_and(|text| text.len() <= FIELD_LIMIT))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    let Some(path) = path(task_id) else { return };
    // Readable by the user alone, before a byte is written.
    crate::cache::keep_private(
        &crate::cache::TASK_SECRETS,
        &path,
        Value::Object(kept).to_string().as_bytes(),
    );
}

/// Hands the kept secrets of task `task_id` to `client`, when there are.
pub fn learn(client: &genapi::Client, task_id: &str) {
    if let Some(body) = kept(task_id) {
        client.learn_secrets(&Value::Object(body));
    }
}

/// The fields kept for task `task_id`, when there are and can be read.
pub fn kept(task_id: &str) -> Option<Map<String, Value>> {
    let path = path(task_id)?;
    let kept = crate::cache::read_kept(&crate::cache::TASK_SECRETS, &path, FILE_LIMIT);
    match kept.map(|bytes| bytes.map(|bytes| serde_json::from_slice::<Value>(&bytes))) {
        Ok(None) => None,
        Ok(Some(Ok(Value::Object(body)))) => Some(body),
        // Someone else could have written it: said, as what it would have
        // scrubbed is then shown.
        Err(refused @ genapi_files::FileError::Exposed { .. }) => {
            out::err(&format!(
                "warning: not reading the secrets kept for task {}, so its webhook secret is not scrubbed from what \
                 is shown: {}",
                out::clean(task_id),
                crate::files::said(&refused)
            ));
            None
        }
        _ => {
            tracing::debug!(file = %path.display(), "the kept secrets of the task cannot be read");
            None
        }
    }
}

/// Removes the kept secrets older than [`KEPT_FOR`].
fn forget_the_old() {
    let Some(folder) = crate::cache::dir().map(|dir| dir.join(crate::cache::TASK_SECRETS.name)) else {
        return;
    };
    let Ok(entries) = std::fs::read_dir(folder) else { return };
    for entry in entries.flatten() {
        let old = entry
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .and_then(|metadata| metadata.modified().ok())
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > KEPT_FOR);
        if old {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Forgets the kept secrets of task `task_id`: its result is saved.
pub fn forget(task_id: &str) {
    if let Some(path) = path(task_id) {
        let _ = std::fs::remove_file(path);
    }
}
