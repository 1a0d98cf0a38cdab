//! The command's folder in the user's cache: what it keeps between runs
//! (learned task durations, the secrets of tasks `genapi submit` sent).
//! Nothing there is needed: a missing or unusable file is passed over.

use std::path::PathBuf;

/// `genapi` in the platform's cache folder (`$XDG_CACHE_HOME`, else
/// `~/.cache`, on Linux).
pub fn dir() -> Option<PathBuf> {
    Some(dirs::cache_dir()?.join("genapi"))
}
