//! Reading a file a user names: a regular file, within a stated limit.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::FileError;

/// A reader of a regular file that stops at its limit: reading past it is
/// an error ([`FileError::TooLarge`]), even when the file grew after it was
/// opened.
#[derive(Debug)]
pub struct Bounded {
    file: File,
    path: PathBuf,
    limit: u64,
    read: u64,
}

impl Bounded {
    /// The file being read.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The metadata of the file opened (not of whatever is at its path
    /// now): its permissions, for a reader that needs a file only its owner
    /// can read.
    pub fn metadata(&self) -> std::io::Result<std::fs::Metadata> {
        self.file.metadata()
    }

    /// The error for a file found larger than its limit while reading.
    fn too_large(&self) -> FileError {
        FileError::TooLarge {
            path: self.path.clone(),
            size: self.read,
            limit: self.limit,
        }
    }
}

impl Read for Bounded {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        // One byte past the limit may be read, so growth is noticed.
        let room = self.limit.saturating_add(1).saturating_sub(self.read);
        let wanted = buffer.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        let count = self.file.read(&mut buffer[..wanted])?;
        self.read += count as u64;
        if self.read > self.limit {
            return Err(std::io::Error::other(self.too_large()));
        }
        Ok(count)
    }
}

/// Opens `path` for reading when it is a regular file of at most `limit`
/// bytes (a link is followed to one). The file is opened without blocking,
/// so a named pipe is refused instead of waiting for a writer.
///
/// ```
/// use std::io::Read as _;
/// let path = std::env::temp_dir().join(format!("genapi-files-open-{}", std::process::id()));
/// std::fs::write(&path, "line 1\nline 2\n")?;
/// let mut text = String::new();
/// genapi_files::open(&path, 1024)?.read_to_string(&mut text)?;
/// assert_eq!(text.lines().count(), 2);
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open(path: &Path, limit: u64) -> Result<Bounded, FileError> {
    open_as(path, limit, Links::Followed)
}

/// Whether a link at a file's name is followed to the file it leads to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Links {
    /// A file the user names may be a link (a dotfile kept elsewhere).
    Followed,
    /// A file a program keeps for itself never is one.
    Refused,
}

/// [`open`], following a link at `path` or refusing it.
pub(crate) fn open_as(path: &Path, limit: u64, links: Links) -> Result<Bounded, FileError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NONBLOCK
            | match links {
                Links::Followed => 0,
                Links::Refused => libc::O_NOFOLLOW,
            },
    );
    let file = options.open(path).map_err(|e| match links {
        Links::Refused => opened_without_links(path, e),
        Links::Followed => FileError::io(path, e),
    })?;
    let metadata = file.metadata().map_err(|e| FileError::io(path, e))?;
    if !metadata.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            writing: false,
        });
    }
    if metadata.len() > limit {
        return Err(FileError::TooLarge {
            path: path.to_path_buf(),
            size: metadata.len(),
            limit,
        });
    }
    Ok(Bounded {
        file,
        path: path.to_path_buf(),
        limit,
        read: 0,
    })
}

/// Why a file opened with `O_NOFOLLOW` could not be: a link at its name
/// (`ELOOP`) is said as such.
pub(crate) fn opened_without_links(path: &Path, e: std::io::Error) -> FileError {
    #[cfg(unix)]
    if e.raw_os_error() == Some(libc::ELOOP) {
        return FileError::Exposed {
            path: path.to_path_buf(),
            sensitivity: crate::Sensitivity::SteersTheProgram,
            exposure: crate::Exposure::Link,
        };
    }
    FileError::io(path, e)
}

/// The bytes of a regular file of at most `limit` bytes.
pub fn read(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    read_until_stopped(path, limit, &AtomicBool::new(false), None)
}

/// The text of a regular file of at most `limit` bytes, which must be UTF-8.
pub fn read_text(path: &Path, limit: u64) -> Result<String, FileError> {
    String::from_utf8(read(path, limit)?).map_err(|_| FileError::NotText {
        path: path.to_path_buf(),
    })
}

/// [`read`] on a blocking thread, for a caller with a deadline: when the
/// future is dropped (a `tokio::time::timeout` ran out), the read stops at
/// its next chunk instead of going on unseen. Needs a tokio runtime.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let path = std::env::temp_dir().join(format!("genapi-files-stoppable-{}", std::process::id()));
/// std::fs::write(&path, "-----BEGIN CERTIFICATE-----")?;
/// let read = tokio::time::timeout(std::time::Duration::from_secs(5), genapi_files::read_stoppable(&path, 1 << 20));
/// assert_eq!(read.await??.len(), 27);
/// # std::fs::remove_file(&path)?;
/// # Ok(()) }
/// ```
pub async fn read_stoppable(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    read_stoppable_as(path, limit, None).await
}

/// [`read_stoppable`] of a file that steers a secret (a CA bundle a
/// password is sent under): refused as [`crate::open_sensitive`] refuses.
pub async fn read_sensitive_stoppable(
    path: &Path,
    limit: u64,
    sensitivity: crate::Sensitivity,
) -> Result<Vec<u8>, FileError> {
    read_stoppable_as(path, limit, Some(sensitivity)).await
}

async fn read_stoppable_as(
    path: &Path,
    limit: u64,
    sensitivity: Option<crate::Sensitivity>,
) -> Result<Vec<u8>, FileError> {
    /// Tells the reading thread to stop when the caller goes away.
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Relaxed);
        }
    }
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let flag = stop.0.clone();
    let owned = path.to_path_buf();
    let reading = tokio::task::spawn_blocking(move || read_until_stopped(&owned, limit, &flag, sensitivity));
    let read = reading.await.map_err(|e| FileError::io(path, std::io::Error::other(e)));
    drop(stop);
    read?
}

/// Bytes read between two looks at the stop flag.
const CHUNK: usize = 64 * 1024;

fn read_until_stopped(
    path: &Path,
    limit: u64,
    stop: &AtomicBool,
    sensitivity: Option<crate::Sensitivity>,
) -> Result<Vec<u8>, FileError> {
    let mut reader = match sensitivity {
        Some(sensitivity) => crate::open_sensitive(path, limit, sensitivity)?,
        None => open(path, limit)?,
    };
    let mut bytes = Vec::new();
    let mut chunk = vec![0u8; CHUNK];
    loop {
        if stop.load(Ordering::Relaxed) {
            return Err(FileError::Stopped {
                path: path.to_path_buf(),
            });
        }
        match reader.file.read(&mut chunk) {
            Ok(0) => return Ok(bytes),
            Ok(count) => {
                reader.read += count as u64;
                if reader.read > limit {
                    return Err(reader.too_large());
                }
                bytes.extend_from_slice(&chunk[..count]);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FileError::io(path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("genapi-files-read-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_file_that_grows_past_its_limit_while_read_is_refused() {
        let dir = scratch("grows");
        let path = dir.join("grows.txt");
        std::fs::write(&path, "1234").unwrap();
        let mut reader = open(&path, 8).unwrap();
        std::fs::write(&path, "123456789012").unwrap();
        let mut bytes = Vec::new();
        let error = reader.read_to_end(&mut bytes).unwrap_err();
        assert!(error.to_string().contains("above the 8 bytes"), "{error}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn devices_and_pipes_are_refused_before_a_byte_is_read() {
        let dir = scratch("devices");
        let fifo = dir.join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        for path in [Path::new("/dev/zero"), fifo.as_path(), dir.as_path()] {
            let error = read(path, 1 << 30).unwrap_err();
            assert!(matches!(error, FileError::NotRegular { writing: false, .. }), "{error}");
            assert!(error.to_string().contains("never read"), "{error}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[tokio::test]
    async fn a_stoppable_read_stops_when_its_caller_gives_up() {
        let dir = scratch("stoppable");
        let path = dir.join("big");
        std::fs::write(&path, vec![7u8; 4 * CHUNK]).unwrap();
        let stop = AtomicBool::new(true);
        assert!(matches!(
            read_until_stopped(&path, 1 << 20, &stop, None),
            Err(FileError::Stopped { .. })
        ));
        assert_eq!(read_stoppable(&path, 1 << 20).await.unwrap().len(), 4 * CHUNK);
        assert!(matches!(
            read_stoppable(&path, CHUNK as u64).await,
            Err(FileError::TooLarge { .. })
        ));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
