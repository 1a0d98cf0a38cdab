//! Reading a file a user names (an image, a prompt, a job file, a cache the
//! user may have replaced): only a regular file is read, opened without
//! blocking so a named pipe cannot hang the reader, and never past a limit,
//! even if the file grows while it is read. The library's image inputs and
//! the command's other inputs share this one rule.

use std::fs::File;
use std::io::{Read, Take};
use std::path::Path;

/// Why a file was not read.
#[doc(hidden)]
#[derive(Debug)]
pub enum Unread {
    /// It could not be opened or read.
    Io(std::io::Error),
    /// It is a pipe, a device or a directory.
    NotRegular,
    /// It has more bytes than the limit (the size seen).
    TooLarge(u64),
}

/// Opens `path` as a regular file of at most `limit` bytes; the reader stops
/// one byte past the limit, so a file that grew can be noticed.
#[doc(hidden)]
pub fn open_regular_file(path: &Path, limit: u64) -> Result<Take<File>, Unread> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NONBLOCK);
    let file = options.open(path).map_err(Unread::Io)?;
    let metadata = file.metadata().map_err(Unread::Io)?;
    if !metadata.is_file() {
        return Err(Unread::NotRegular);
    }
    if metadata.len() > limit {
        return Err(Unread::TooLarge(metadata.len()));
    }
    Ok(file.take(limit.saturating_add(1)))
}

/// The bytes of a regular file of at most `limit` bytes.
#[doc(hidden)]
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, Unread> {
    let mut reader = open_regular_file(path, limit)?;
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(Unread::Io)?;
    if bytes.len() as u64 > limit {
        return Err(Unread::TooLarge(bytes.len() as u64));
    }
    Ok(bytes)
}
