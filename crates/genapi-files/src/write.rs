//! Writing a file at a name a user gives: never through a link, never over
//! a file that is not to be replaced, only ever a regular file.

use std::fs::File;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use crate::FileError;

/// What happens to a file already at the name a file is written to.
#[derive(Clone, Copy, Debug)]
pub enum Existing {
    /// It stays; the write is refused with [`FileError::Exists`]. A link at
    /// the name, even one to nothing, takes the name too.
    Keep,
    /// It is replaced (the command's `--force`): a regular file, or a link
    /// as a link (never the file it points to). A pipe, a device or a
    /// folder is never replaced, nor a link to one.
    Replace,
    /// It is replaced only when it is a regular file whose first bytes (at
    /// most 64 KiB) `ours` says `writer` wrote; anything else stays, with
    /// [`FileError::NotOurs`]. For files a program rewrites as it goes, in a
    /// folder a user may have put files of their own in.
    ReplaceOurs {
        /// Who writes the file, for the message (`the gallery`).
        writer: &'static str,
        /// Whether a file's first bytes show the writer made it.
        ours: fn(&[u8]) -> bool,
    },
}

/// The first bytes of an existing file that [`Existing::ReplaceOurs`] looks at.
const HEAD_BYTES: usize = 64 * 1024;

/// What has a name now.
enum There {
    Nothing,
    Link,
    Regular,
    Other,
}

fn there(path: &Path) -> Result<There, FileError> {
    if names_a_process_file(path) {
        return Ok(There::Other);
    }
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(There::Nothing),
        Err(e) => Err(FileError::io(path, e)),
        // A link to a pipe, a device or a folder names that thing
        // (`/dev/stdout`): it is never replaced as if it were a plain link.
        Ok(metadata) if metadata.file_type().is_symlink() => match std::fs::metadata(path) {
            Ok(target) if !target.is_file() => Ok(There::Other),
            _ => Ok(There::Link),
        },
        Ok(metadata) if metadata.file_type().is_file() => Ok(There::Regular),
        Ok(_) => Ok(There::Other),
    }
}

/// Whether `path` is a name in `/proc`, or leads there through links: one
/// of a process's open files (`/dev/stdout` is `/proc/self/fd/1`, and
/// `/dev/fd` is `/proc/self/fd`). That is a stream, never a file of the
/// user's, whatever it points to now (a file the shell's `>` opened looks
/// like a regular one): it is neither written nor replaced as a link.
fn names_a_process_file(path: &Path) -> bool {
    let in_proc = |name: &Path| name.starts_with("/proc");
    let mut name = path.to_path_buf();
    // As the kernel does, a chain longer than 40 links is not followed:
    // nothing can be written through it, and it is the user's own link.
    for _ in 0..40 {
        let folder = match name.parent() {
            Some(folder) if !folder.as_os_str().is_empty() => folder.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if in_proc(&name) || std::fs::canonicalize(&folder).is_ok_and(|folder| in_proc(&folder)) {
            return true;
        }
        match std::fs::read_link(&name) {
            Ok(target) => name = folder.join(target),
            Err(_) => return false,
        }
    }
    false
}

/// Whether anything has the name `path`: a file, a folder, or a link (one
/// to nothing included, which `Path::exists` would call free).
pub fn is_taken(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// Whether `path` may be written as `existing` allows, without writing it:
/// for a program that checks its outputs before costly work (a batch, before
/// it pays for its first task). The write itself checks again.
///
/// ```
/// use genapi_files::{Existing, FileError};
/// let here = std::env::temp_dir().join(format!("genapi-files-may-{}", std::process::id()));
/// std::fs::write(&here, "mine")?;
/// assert!(matches!(genapi_files::may_write(&here, Existing::Keep), Err(FileError::Exists { .. })));
/// genapi_files::may_write(&here, Existing::Replace)?;
/// # std::fs::remove_file(&here)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn may_write(path: &Path, existing: Existing) -> Result<(), FileError> {
    replaceable(path, existing).map(drop)
}

/// What is at `path`, once `existing` says it may be replaced.
fn replaceable(path: &Path, existing: Existing) -> Result<There, FileError> {
    let found = there(path)?;
    let taken = |link| FileError::Exists {
        path: path.to_path_buf(),
        link,
    };
    match (&found, existing) {
        (There::Nothing, _) => Ok(found),
        (There::Other, _) => Err(FileError::NotRegular {
            path: path.to_path_buf(),
            writing: true,
        }),
        (There::Link, Existing::Keep) => Err(taken(true)),
        (There::Regular, Existing::Keep) => Err(taken(false)),
        (_, Existing::Replace) => Ok(found),
        (There::Link, Existing::ReplaceOurs { writer, .. }) => Err(FileError::NotOurs {
            path: path.to_path_buf(),
            writer,
        }),
        (There::Regular, Existing::ReplaceOurs { writer, ours }) => {
            let mut head = Vec::new();
            open_existing(path, false)?
                .take(HEAD_BYTES as u64)
                .read_to_end(&mut head)
                .map_err(|e| FileError::io(path, e))?;
            if ours(&head) {
                Ok(found)
            } else {
                Err(FileError::NotOurs {
                    path: path.to_path_buf(),
                    writer,
                })
            }
        }
    }
}

/// Opens an existing regular file without following a link in its last
/// component and without blocking, for reading or for writing.
fn open_existing(path: &Path, write: bool) -> Result<File, FileError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(!write).write(write);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = options.open(path).map_err(|e| FileError::io(path, e))?;
    let regular = file.metadata().map_err(|e| FileError::io(path, e))?.is_file();
    if !regular {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            writing: write,
        });
    }
    Ok(file)
}

/// Creates the file `path` anew; the name must be free (a name taken
/// meanwhile is [`FileError::Exists`], never followed).
fn create_new(path: &Path) -> Result<File, FileError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    options.open(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => FileError::Exists {
            path: path.to_path_buf(),
            link: std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()),
        },
        _ => FileError::io(path, e),
    })
}

/// Opens `path` to be written in place, as it goes (a recording, a
/// journal): created when free, else opened as `existing` allows. A file
/// opened again is **not emptied**: the caller empties it once it holds it
/// (a recording first takes its lock, so a file another process is writing
/// is not cut under it).
///
/// ```
/// use genapi_files::{Existing, FileError};
/// let path = std::env::temp_dir().join(format!("genapi-files-create-{}", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// genapi_files::create(&path, Existing::Keep)?;
/// assert!(matches!(genapi_files::create(&path, Existing::Keep), Err(FileError::Exists { .. })));
/// genapi_files::create(&path, Existing::Replace)?.set_len(0)?;
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn create(path: &Path, existing: Existing) -> Result<File, FileError> {
    match replaceable(path, existing)? {
        There::Nothing => create_new(path),
        There::Link => {
            // Replaced as a link: the link goes, never what it points to.
            std::fs::remove_file(path).map_err(|e| FileError::io(path, e))?;
            create_new(path)
        }
        There::Regular | There::Other => open_existing(path, true),
    }
}

/// Puts the finished file `temporary` at `target`, as `existing` allows, in
/// one step: a reader of `target` never sees half a file. Where nothing had
/// the name it is taken by a hard link, which fails rather than replace a
/// file put there meanwhile (on a file system without hard links, by a
/// rename once the name is seen free). `temporary` is gone afterwards,
/// whatever the outcome.
pub fn publish(temporary: &Path, target: &Path, existing: Existing) -> Result<(), FileError> {
    let published = publish_kept(temporary, target, existing);
    let _ = std::fs::remove_file(temporary);
    published
}

fn publish_kept(temporary: &Path, target: &Path, existing: Existing) -> Result<(), FileError> {
    let rename = || std::fs::rename(temporary, target).map_err(|e| FileError::io(target, e));
    match replaceable(target, existing)? {
        There::Nothing => match std::fs::hard_link(temporary, target) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Taken meanwhile: judged again as it is now.
                match replaceable(target, existing)? {
                    There::Nothing => Err(FileError::io(target, e)),
                    _ => rename(),
                }
            }
            Err(_) if !is_taken(target) => rename(),
            Err(e) => Err(FileError::io(target, e)),
        },
        There::Link | There::Regular | There::Other => rename(),
    }
}

/// A whole file being written beside its name, to be published with
/// [`Staged::publish`]; dropped unpublished, its temporary file is removed.
#[derive(Debug)]
pub struct Staged {
    target: PathBuf,
    temporary: PathBuf,
    file: Option<File>,
}

/// Starts writing the whole file `target`: a temporary file of this
/// writer's own is created beside it ([`temporary_name`]).
///
/// ```
/// use std::io::Write as _;
/// use genapi_files::Existing;
/// let path = std::env::temp_dir().join(format!("genapi-files-stage-{}.txt", std::process::id()));
/// let _ = std::fs::remove_file(&path);
/// let mut staged = genapi_files::stage(&path)?;
/// writeln!(staged, "written whole, then published")?;
/// staged.publish(Existing::Keep)?;
/// assert!(std::fs::read_to_string(&path)?.starts_with("written whole"));
/// # std::fs::remove_file(&path)?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn stage(target: &Path) -> Result<Staged, FileError> {
    stage_with_mode(target, EVERYONES)
}

/// [`stage`], the temporary file created with the permission bits `mode`
/// (less the umask) on unix.
pub(crate) fn stage_with_mode(target: &Path, mode: u32) -> Result<Staged, FileError> {
    let temporary = temporary_name(target);
    let file = create_temporary_with_mode(&temporary, mode).map_err(|e| FileError::io(&temporary, e))?;
    Ok(Staged {
        target: target.to_path_buf(),
        temporary,
        file: Some(file),
    })
}

impl Staged {
    /// Where it is written until it is published.
    pub fn temporary_path(&self) -> &Path {
        &self.temporary
    }

    /// Makes what was written so far durable: on the disk, not only in the
    /// system's cache, so a crash of the machine after [`Staged::publish`]
    /// finds it. For a file whose loss would cost money (what was paid for).
    pub fn sync(&mut self) -> Result<(), FileError> {
        let temporary = self.temporary.clone();
        let file = self.open_file().map_err(|e| FileError::io(&temporary, e))?;
        file.flush()
            .and_then(|()| file.sync_all())
            .map_err(|e| FileError::io(&temporary, e))
    }

    /// Flushes the file and publishes it at its name ([`publish`]).
    pub fn publish(mut self, existing: Existing) -> Result<PathBuf, FileError> {
        if let Some(mut file) = self.file.take() {
            file.flush().map_err(|e| FileError::io(&self.temporary, e))?;
        }
        publish(&self.temporary, &self.target, existing).map(|()| self.target.clone())
    }

    fn open_file(&mut self) -> std::io::Result<&mut File> {
        self.file
            .as_mut()
            .ok_or_else(|| std::io::Error::other("the file was published already"))
    }
}

/// The temporary file is written through the stage.
impl Write for Staged {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.open_file()?.write(bytes)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.open_file()?.flush()
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if self.file.is_some() {
            let _ = std::fs::remove_file(&self.temporary);
        }
    }
}

/// Writes `bytes` as the whole file `target` ([`stage`], then
/// [`Staged::publish`]).
pub fn write_whole(target: &Path, bytes: &[u8], existing: Existing) -> Result<PathBuf, FileError> {
    let mut staged = stage(target)?;
    staged.write_all(bytes).map_err(|e| FileError::io(target, e))?;
    staged.publish(existing)
}

/// The temporary name `target` is written under before it is published:
/// beside it, hidden, and of this writer alone (the process and a count in
/// it), since writers may share a folder (the workers of one batch share
/// its output folder) and two writers with one temporary name would rename
/// each other's file away.
pub fn temporary_name(target: &Path) -> PathBuf {
    static WRITES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let count = WRITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "output".into());
    target.with_file_name(format!(".{name}.{}-{count}.partial", std::process::id()))
}

/// Creates the temporary file `path` anew, never through what is already
/// there: whatever has the name (a leftover of an interrupted run, or a
/// link planted in its place) is removed first (a link itself, never what
/// it points to), then the file is created exclusively; a name taken again
/// in between is an error, never followed.
pub fn create_temporary(path: &Path) -> std::io::Result<File> {
    create_temporary_with_mode(path, EVERYONES)
}

/// The permission bits a file is created with unless it is private: the
/// umask decides.
const EVERYONES: u32 = 0o666;

/// [`create_temporary`], the file created with the permission bits `mode`
/// (less the umask) on unix: set by the call that creates it, so no one
/// else can open it before it has them.
pub(crate) fn create_temporary_with_mode(path: &Path, mode: u32) -> std::io::Result<File> {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            return Err(e);
        }
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, mode);
    #[cfg(not(unix))]
    let _ = mode;
    options.open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("genapi-files-write-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn marked(head: &[u8]) -> bool {
        head.starts_with(b"MARK")
    }

    const OURS: Existing = Existing::ReplaceOurs {
        writer: "the test",
        ours: marked,
    };

    #[test]
    fn a_file_is_kept_unless_replacing_is_allowed_and_only_ours_when_so_asked() {
        let dir = scratch("existing");
        let path = dir.join("page.html");
        std::fs::write(&path, "the user's page").unwrap();
        assert!(matches!(
            write_whole(&path, b"MARK new", Existing::Keep),
            Err(FileError::Exists { link: false, .. })
        ));
        let refused = write_whole(&path, b"MARK new", OURS).unwrap_err();
        assert!(refused.to_string().contains("not written by the test"), "{refused}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "the user's page");
        write_whole(&path, b"MARK ours", Existing::Replace).unwrap();
        write_whole(&path, b"MARK ours again", OURS).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "MARK ours again");
        let leftovers: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file is left: {leftovers:?}");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn a_link_is_never_written_through() {
        let dir = scratch("links");
        let victim = dir.join("victim.txt");
        std::fs::write(&victim, "keep me").unwrap();
        for (name, existing) in [("a", Existing::Keep), ("b", OURS), ("c", Existing::Replace)] {
            let link = dir.join(name);
            std::os::unix::fs::symlink(&victim, &link).unwrap();
            let created = create(&link, existing);
            let whole = write_whole(&link, b"MARK", existing);
            match existing {
                Existing::Replace => {
                    created.unwrap();
                    whole.unwrap();
                    assert!(!std::fs::symlink_metadata(&link).unwrap().file_type().is_symlink());
                }
                _ => assert!(created.is_err() && whole.is_err()),
            }
            assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        }
        let dangling = dir.join("dangling");
        std::os::unix::fs::symlink(dir.join("nothing"), &dangling).unwrap();
        assert!(matches!(
            create(&dangling, Existing::Keep),
            Err(FileError::Exists { link: true, .. })
        ));
        assert!(!dir.join("nothing").exists());
        // A loop of links leads nowhere: a link of the user's like any.
        std::os::unix::fs::symlink(dir.join("loop-b"), dir.join("loop-a")).unwrap();
        std::os::unix::fs::symlink(dir.join("loop-a"), dir.join("loop-b")).unwrap();
        assert!(matches!(
            create(&dir.join("loop-a"), Existing::Keep),
            Err(FileError::Exists { link: true, .. })
        ));
        create(&dir.join("loop-a"), Existing::Replace).unwrap();
        assert!(std::fs::symlink_metadata(dir.join("loop-a")).unwrap().is_file());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[cfg(unix)]
    #[test]
    fn pipes_devices_and_folders_are_never_written_even_when_replacing() {
        let dir = scratch("special");
        let fifo = dir.join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        // A process's open file, even one the shell opened as a regular
        // file, directly or through a link: `/dev/stdout` is one.
        let out = dir.join("opened.txt");
        std::fs::write(&out, "the shell's").unwrap();
        let opened = File::open(&out).unwrap();
        let fd = std::os::unix::io::AsRawFd::as_raw_fd(&opened);
        let by_process = PathBuf::from(format!("/proc/self/fd/{fd}"));
        let by_link = dir.join("my-stdout");
        std::os::unix::fs::symlink(&by_process, &by_link).unwrap();
        for path in [
            by_process.as_path(),
            by_link.as_path(),
            Path::new("/dev/stdout"),
            Path::new("/dev/fd/1"),
        ] {
            for existing in [Existing::Keep, Existing::Replace, OURS] {
                assert!(
                    matches!(create(path, existing), Err(FileError::NotRegular { .. })),
                    "{}",
                    path.display()
                );
            }
        }
        assert!(
            std::fs::symlink_metadata(&by_link).unwrap().file_type().is_symlink(),
            "kept"
        );
        assert_eq!(std::fs::read_to_string(&out).unwrap(), "the shell's");
        drop(opened);
        // Named through a link as well (`/dev/stdout` is one).
        let links: Vec<PathBuf> = [fifo.as_path(), dir.as_path(), Path::new("/dev/null")]
            .iter()
            .enumerate()
            .map(|(i, target)| {
                let link = dir.join(format!("link-{i}"));
                std::os::unix::fs::symlink(target, &link).unwrap();
                link
            })
            .collect();
        let named = [fifo.as_path(), dir.as_path(), Path::new("/dev/null")];
        for path in named.into_iter().chain(links.iter().map(PathBuf::as_path)) {
            for existing in [Existing::Keep, Existing::Replace, OURS] {
                let error = create(path, existing).unwrap_err();
                assert!(
                    matches!(
                        error,
                        FileError::NotRegular { writing: true, .. } | FileError::Exists { .. }
                    ),
                    "{error}"
                );
            }
            assert!(matches!(
                create(path, Existing::Replace),
                Err(FileError::NotRegular { .. })
            ));
        }
        assert!(std::fs::symlink_metadata(&fifo).unwrap().file_type().is_fifo_like());
        for link in &links {
            assert!(
                std::fs::symlink_metadata(link).unwrap().file_type().is_symlink(),
                "kept"
            );
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    trait FifoLike {
        fn is_fifo_like(&self) -> bool;
    }
    #[cfg(unix)]
    impl FifoLike for std::fs::FileType {
        fn is_fifo_like(&self) -> bool {
            std::os::unix::fs::FileTypeExt::is_fifo(self)
        }
    }

    #[test]
    fn temporary_names_differ_per_write_and_stay_beside_the_target() {
        let a = temporary_name(Path::new("out/index.html"));
        let b = temporary_name(Path::new("out/index.html"));
        assert_ne!(a, b);
        assert_eq!(a.parent(), Some(Path::new("out")));
        assert!(a.file_name().unwrap().to_string_lossy().starts_with(".index.html."));
    }
}
