//! What the command learned about task durations, kept across runs in a
//! small file in the user's cache directory, per service address, so the
//! first wait of a new run is already well aimed.
//!
//! The file is a convenience: a missing one is ignored, one that is not a
//! small regular file of the expected shape is ignored with a warning (and
//! replaced), and failing to write it never fails a command. What it holds is
//! trimmed as it is read (see `genapi::Learned`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use genapi::Learned;

use crate::{files, out};

/// `learned.json` in the command's cache folder.
fn path() -> Option<PathBuf> {
    Some(crate::cache::dir()?.join("learned.json"))
}

/// Largest file read: far more than the durations of every operation of a
/// few services.
const LIMIT: u64 = 1024 * 1024;

/// Every service's durations, as kept in the file (none when there is no
/// file); why the file is not usable otherwise.
fn read_all(path: &Path) -> Result<BTreeMap<String, Learned>, String> {
    if !path.exists() {
        return Ok(BTreeMap::new());
    }
    let text = files::read_to_string(path, LIMIT)?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

/// What was learned for this service address.
pub fn load(service: &str) -> Learned {
    let Some(path) = path() else { return Learned::default() };
    match read_all(&path) {
        Ok(mut all) => all.remove(service).unwrap_or_default(),
        Err(why) => {
            out::err(&format!(
                "warning: ignoring the learned task durations in {} ({}); it is replaced after the next task",
                out::clean(&path.display().to_string()),
                out::clean(&why)
            ));
            Learned::default()
        }
    }
}

/// Keeps what `learned` holds for this service address.
pub fn save(service: &str, learned: Learned) {
    let Some(path) = path() else { return };
    // An unusable file was reported when it was loaded; it is replaced.
    let mut all = read_all(&path).unwrap_or_default();
    all.insert(service.to_string(), learned);
    let Ok(text) = serde_json::to_string(&all) else { return };
    // Written whole beside it, then put in its place: a reader never sees
    // half a file, and two commands ending at once each write their own.
    // The cache is the command's own file, so it is replaced.
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .map_err(|e| e.to_string())
        .and_then(|()| {
            let write = || genapi_files::write_whole(&path, text.as_bytes(), genapi_files::Existing::Replace);
            match write() {
                // The cache's own name holds a pipe or a device (it was
                // reported when it was read): the name is freed, as an
                // unusable cache is replaced.
                Err(genapi_files::FileError::NotRegular { .. }) => {
                    std::fs::remove_file(&path).map_err(|e| e.to_string())?;
                    write().map(drop).map_err(|e| e.to_string())
                }
                written => written.map(drop).map_err(|e| e.to_string()),
            }
        });
    if let Err(error) = written {
        tracing::debug!(%error, file = %path.display(), "cannot keep learned durations");
    }
}
