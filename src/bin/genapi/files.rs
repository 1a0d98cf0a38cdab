//! Files the command reads that the user names or may have replaced (a
//! prompt, a job file, a document, the learned durations): only regular
//! files, opened without blocking (a named pipe cannot hang the command) and
//! read no further than a limit named in the error. Image files go through
//! the library's `ImageInput`, which keeps the same rule.

use std::fs::File;
use std::io::{Read, Take};
use std::path::Path;

/// Largest prompt read from a file or stdin.
pub const PROMPT_LIMIT: u64 = 1024 * 1024;
/// Largest job file.
pub const JOB_FILE_LIMIT: u64 = 64 * 1024 * 1024;
/// Largest OpenAPI document (`GENAPI_DOCUMENT`).
pub const DOCUMENT_LIMIT: u64 = 16 * 1024 * 1024;

/// `limit` in words, e.g. "1 MiB".
pub fn shown_limit(limit: u64) -> String {
    format!("{} MiB", limit >> 20)
}

/// Opens `path` for reading: a regular file of at most `limit` bytes, read
/// no further than that even if it grows. The error says what to fix.
pub fn open(path: &Path, limit: u64) -> Result<Take<File>, String> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| e.to_string())?;
    let metadata = file.metadata().map_err(|e| e.to_string())?;
    if !metadata.is_file() {
        return Err("not a regular file (a pipe, a device or a directory is never read); name a file".into());
    }
    if metadata.len() > limit {
        return Err(format!(
            "the file is {} bytes, above the {} this input may be",
            metadata.len(),
            shown_limit(limit)
        ));
    }
    Ok(file.take(limit))
}

/// The text of a file opened as [`open`] does.
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, String> {
    let mut text = String::new();
    open(path, limit)?
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    Ok(text)
}
