//! The limits of the files the command reads; every path is read and
//! written by the one file policy of `genapi-files` (a regular file within
//! its limit, never a pipe or a device; nothing replaced without `--force`,
//! nothing written through a link). Image files and job files are read by
//! the library (`ImageInput`, `genapi_batch::JobFile`), under the same
//! policy.

use std::path::Path;

/// Largest prompt read from a file or stdin.
pub const PROMPT_LIMIT: u64 = 1024 * 1024;
/// Largest OpenAPI document (`GENAPI_DOCUMENT`).
pub const DOCUMENT_LIMIT: u64 = 16 * 1024 * 1024;
/// Largest recording `genapi mock --replay` serves.
pub const RECORDING_LIMIT: u64 = 256 * 1024 * 1024;

/// The text of a regular file of at most `limit` bytes; the error says
/// what is wrong and what to do, without the file's name (the caller
/// names it with the option it came from).
pub fn read_to_string(path: &Path, limit: u64) -> Result<String, String> {
    genapi_files::read_text(path, limit).map_err(|refused| refused.reason())
}

/// A refusal of the file policy in the command's words: one to replace an
/// existing file says how (`--force`).
pub fn said(refused: &genapi_files::FileError) -> String {
    let text = crate::out::clean(&refused.to_string());
    match refused {
        // The library's words say to allow replacing; the command's way is --force.
        genapi_files::FileError::Exists { link, path } => format!(
            "{} {}; choose another name, or pass --force to replace it",
            crate::out::clean(&path.display().to_string()),
            if *link {
                "is a link (never written through)"
            } else {
                "exists"
            }
        ),
        _ => text,
    }
}

/// What `--force` means for a file the user named: replaced, or kept.
pub fn existing(force: bool) -> genapi_files::Existing {
    if force {
        genapi_files::Existing::Replace
    } else {
        genapi_files::Existing::Keep
    }
}
