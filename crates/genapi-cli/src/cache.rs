//! The command's folder in the user's cache: what it keeps between runs
//! (learned task durations, the secrets of tasks `genapi submit` sent).
//! Nothing there is needed: a missing or unusable file is passed over.

use std::path::PathBuf;

/// `$XDG_CACHE_HOME/genapi`, else `~/.cache/genapi`.
pub fn dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|home| PathBuf::from(home).join(".cache"))
        })?;
    Some(base.join("genapi"))
}
