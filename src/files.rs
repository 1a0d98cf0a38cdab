//! Files a user names, and files a program writes in a folder it shares.
//!
//! **Reading.** A file a user names (an image, a prompt, a job file, a cache
//! the user may have replaced) is read only if it is a regular file, opened
//! without blocking so a named pipe cannot hang the reader, and never past a
//! limit, even if it grows while it is read. The library's image inputs and
//! job files follow this rule, and so does the `genapi` command for its own
//! inputs; a program that takes paths from its users can follow it too.
//!
//! ```
//! let dir = std::env::temp_dir().join(format!("genapi-files-doc-{}", std::process::id()));
//! std::fs::create_dir_all(&dir)?;
//! let prompt = dir.join("prompt.txt");
//! std::fs::write(&prompt, "a lighthouse at dusk")?;
//! assert_eq!(genapi::files::read_regular_file(&prompt, 1024)?, b"a lighthouse at dusk");
//! assert!(matches!(
//!     genapi::files::read_regular_file(&prompt, 4),
//!     Err(genapi::files::Unread::TooLarge(20))
//! ));
//! assert!(matches!(genapi::files::read_regular_file(&dir, 1024), Err(genapi::files::Unread::NotRegular)));
//! # std::fs::remove_dir_all(&dir)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! **Writing.** A result is written to a temporary name first and renamed
//! into place, so a reader never sees half a file; the temporary file is
//! created anew by [`create_temporary`], never through a link someone left
//! under its name.

use std::fs::File;
use std::io::{Read, Take};
use std::path::Path;

/// Why a file was not read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Unread {
    /// It could not be opened or read.
    #[error("{0}")]
    Io(std::io::Error),
    /// It is a pipe, a device or a directory.
    #[error("not a regular file (a pipe, a device or a directory)")]
    NotRegular,
    /// It has more bytes than the limit (the size seen).
    #[error("{0} bytes, more than this file may have")]
    TooLarge(u64),
}

/// Opens `path` as a regular file of at most `limit` bytes; the reader stops
/// one byte past the limit, so a file that grew can be noticed.
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
pub fn read_regular_file(path: &Path, limit: u64) -> Result<Vec<u8>, Unread> {
    let mut reader = open_regular_file(path, limit)?;
    let mut bytes = Vec::new();
    reader.read_to_end(&mut bytes).map_err(Unread::Io)?;
    if bytes.len() as u64 > limit {
        return Err(Unread::TooLarge(bytes.len() as u64));
    }
    Ok(bytes)
}

/// Creates the temporary file `path` anew, never through what is already
/// there: whatever has the name (a leftover of an interrupted run, or a link
/// planted in its place) is removed first (a link itself, never what it
/// points to), then the file is created exclusively. `O_CREAT | O_EXCL`
/// refuses a link in the last component as well, so it does what
/// `O_NOFOLLOW` would; a name taken again in between is an error, never
/// followed.
pub fn create_temporary(path: &Path) -> std::io::Result<File> {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(e);
        }
    }
    std::fs::OpenOptions::new().write(true).create_new(true).open(path)
}
