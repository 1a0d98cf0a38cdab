//! What the command learned about task durations, kept across runs in a
//! small file in the user's cache directory, per service address, so the
//! first wait of a new run is already well aimed.
//!
//! The file is a convenience: a missing, corrupt or foreign one is ignored,
//! and failing to write it never fails a command.

use std::collections::BTreeMap;
use std::path::PathBuf;

use genapi::Learned;

/// `$XDG_CACHE_HOME/genapi/learned.json`, else `~/.cache/genapi/learned.json`.
fn path() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })?;
    Some(base.join("genapi").join("learned.json"))
}

/// Every service's durations, as kept in the file.
fn read_all() -> BTreeMap<String, Learned> {
    let Some(path) = path() else { return BTreeMap::new() };
    let Ok(text) = std::fs::read_to_string(&path) else {
        return BTreeMap::new();
    };
    serde_json::from_str(&text).unwrap_or_else(|error| {
        tracing::debug!(%error, file = %path.display(), "ignoring an unreadable durations file");
        BTreeMap::new()
    })
}

/// What was learned for this service address.
pub fn load(service: &str) -> Learned {
    read_all().remove(service).unwrap_or_default()
}

/// Keeps what `learned` holds for this service address.
pub fn save(service: &str, learned: Learned) {
    let Some(path) = path() else { return };
    let mut all = read_all();
    all.insert(service.to_string(), learned);
    let Ok(text) = serde_json::to_string(&all) else { return };
    let written = path.parent().map_or(Ok(()), std::fs::create_dir_all).and_then(|()| {
        // Written beside it, then renamed: a reader never sees half a file.
        let partial = path.with_extension("json.partial");
        std::io::Write::write_all(&mut genapi::create_temporary(&partial)?, text.as_bytes())?;
        std::fs::rename(&partial, &path)
    });
    if let Err(error) = written {
        tracing::debug!(%error, file = %path.display(), "cannot keep learned durations");
    }
}
