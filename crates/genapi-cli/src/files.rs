//! Files the command reads that the user names or may have replaced (a
//! prompt, a document, the learned durations): only regular
//! files, opened without blocking (a named pipe cannot hang the command) and
//! read no further than a limit named in the error. Image files and job
//! files are read by the library (`ImageInput`, `batch::JobFile`), which keeps
//! the same rule.

use std::path::Path;

/// Largest prompt read from a file or stdin.
pub const PROMPT_LIMIT: u64 = 1024 * 1024;
/// Largest OpenAPI document (`GENAPI_DOCUMENT`).
pub const DOCUMENT_LIMIT: u64 = 16 * 1024 * 1024;

/// `limit` in words, e.g. "1 MiB".
pub fn shown_limit(limit: u64) -> String {
    format!("{} MiB", limit >> 20)
}

/// The text of a regular file of at most `limit` bytes (the library's
/// rule). The error says what to fix.
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, String> {
    let bytes = genapi::files::read_regular_file(path, limit).map_err(|unread| said(unread, limit))?;
    String::from_utf8(bytes).map_err(|_| "the file is not UTF-8 text".into())
}

fn said(unread: genapi::files::Unread, limit: u64) -> String {
    match unread {
        genapi::files::Unread::Io(e) => e.to_string(),
        genapi::files::Unread::NotRegular => {
            "not a regular file (a pipe, a device or a directory is never read); name a file".into()
        }
        genapi::files::Unread::TooLarge(size) => {
            format!(
                "the file is {size} bytes, above the {} this input may be",
                shown_limit(limit)
            )
        }
        other => other.to_string(),
    }
}
