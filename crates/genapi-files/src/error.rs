//! Why a file was not read or written, in words that say what to do.

use std::path::{Path, PathBuf};

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(FileError);

/// Why a file was not read or written. Each message names the file, then
/// says what is wrong and what to do about it ([`FileError::reason`] is
/// that second part alone, for a caller that names the file itself).
#[non_exhaustive]
pub enum FileError {
    /// The system refused (no such file, no permission, a full disk…).
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
    /// A pipe, a device or a folder, where a regular file was wanted.
    NotRegular {
        /// The name.
        path: PathBuf,
        /// Whether it was to be written.
        writing: bool,
    },
    /// Larger than the limit of what it is.
    TooLarge {
        /// The file.
        path: PathBuf,
        /// Its size, or as much of it as was read.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// Something has the name, and it is not to be replaced.
    Exists {
        /// The name.
        path: PathBuf,
        /// Whether what has it is a link.
        link: bool,
    },
    /// A file at the name was not written by the program that would replace
    /// it, so it is left as it is.
    NotOurs {
        /// The name.
        path: PathBuf,
        /// Who would have written it (`the gallery`).
        writer: &'static str,
    },
    /// Not UTF-8 text, where text was wanted.
    NotText {
        /// The file.
        path: PathBuf,
    },
    /// The reader was stopped (its caller gave up, a deadline passed).
    Stopped {
        /// The file.
        path: PathBuf,
    },
    /// A file that steers a secret is someone else's, or others may change
    /// it (or read it, when it holds the secret), or it is a link where a
    /// file a program keeps for itself was to be: see
    /// [`crate::open_sensitive`] and [`crate::read_private`].
    Exposed {
        /// The file opened (a link's name, when a link led to it).
        path: PathBuf,
        /// What the file tells about a secret.
        sensitivity: crate::Sensitivity,
        /// What is wrong with it.
        exposure: crate::Exposure,
    },
    /// The folder a private file was to be written in is a link, or another
    /// user's: see [`crate::write_private`].
    ForeignFolder {
        /// The folder.
        path: PathBuf,
        /// Its owner's user id when it is another user's; none when it is a
        /// link.
        owner: Option<u32>,
    },
    /// The folder a private file was to be written in is the user's, but
    /// its group or others may write it: replace the file once written,
    /// or, in a folder shared on purpose (sticky, like `/tmp`), add files
    /// of theirs. See [`crate::write_private`].
    OpenFolder {
        /// The folder.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.path().display(), self.reason())
    }
}

impl std::error::Error for FileError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FileError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Why a file that is not a regular one is never read.
const NOT_REGULAR_READ: &str = "not a regular file (a pipe, a device or a folder is never read)";

/// Why it is never written: a process's open file (`/dev/stdout`,
/// `/dev/fd/N`) may lead to a regular file, or to nothing, and is named too.
const NOT_REGULAR_WRITTEN: &str = "not a regular file (a pipe, a device, a folder or a process's stream such as \
                                   /dev/stdout is never written)";

impl FileError {
    /// What is wrong and what to do, without the file's name: the
    /// [`FileError::problem`], then what to run or choose where the policy
    /// has a fix.
    ///
    /// ```
    /// let error = genapi_files::read(std::path::Path::new("/dev/zero"), 1024).unwrap_err();
    /// assert_eq!(
    ///     error.reason(),
    ///     "not a regular file (a pipe, a device or a folder is never read); name a file"
    /// );
    /// assert_eq!(error.to_string(), format!("/dev/zero: {}", error.reason()));
    /// ```
    pub fn reason(&self) -> String {
        match self.fix() {
            Some(fix) => format!("{}; {fix}", self.problem()),
            None => self.problem(),
        }
    }

    /// What is wrong, without what to do about it: for a caller that does
    /// something else about it, such as a program that replaces a file of
    /// its own it refused to read.
    ///
    /// ```
    /// let error = genapi_files::read(std::path::Path::new("/dev/zero"), 1024).unwrap_err();
    /// assert_eq!(error.problem(), "not a regular file (a pipe, a device or a folder is never read)");
    /// ```
    pub fn problem(&self) -> String {
        match self {
            FileError::Io { source, .. } => source.to_string(),
            FileError::NotRegular { writing: false, .. } => NOT_REGULAR_READ.into(),
            FileError::NotRegular { writing: true, .. } => NOT_REGULAR_WRITTEN.into(),
            FileError::TooLarge { size, limit, .. } => {
                format!("{size} bytes, above the {} this file may have", shown_size(*limit))
            }
            FileError::Exists { link: true, .. } => "the name is taken by a link (never written through)".into(),
            FileError::Exists { link: false, .. } => "exists".into(),
            FileError::NotOurs { writer, .. } => format!("not written by {writer}, so it is left as it is"),
            FileError::NotText { .. } => "not UTF-8 text".into(),
            FileError::Stopped { .. } => "the read was stopped before it ended".into(),
            FileError::Exposed {
                sensitivity, exposure, ..
            } => crate::secret::problem(*sensitivity, *exposure),
            FileError::ForeignFolder { owner: None, .. } => {
                "a link to a folder, where a file of yours alone was to go (the link could lead anywhere)".into()
            }
            FileError::ForeignFolder { owner: Some(owner), .. } => {
                format!("a folder of another user (uid {owner}), where a file of yours alone was to go")
            }
            // A sticky folder is shared on purpose (like /tmp): closing it would break what others keep there.
            FileError::OpenFolder { mode, .. } if mode & 0o1000 != 0 => format!(
                "a folder shared with others (mode {mode:o}: they may add files to it), where a file of yours alone \
                 was to go"
            ),
            FileError::OpenFolder { mode, .. } => format!(
                "a folder others may change (mode {mode:o}: they could replace what is written in it), where a file \
                 of yours alone was to go"
            ),
        }
    }

    /// What to run or choose about it, where the policy has a fix: the
    /// second part of [`FileError::reason`].
    ///
    /// ```
    /// let error = genapi_files::read(std::path::Path::new("/dev/zero"), 1024).unwrap_err();
    /// assert_eq!(error.fix().as_deref(), Some("name a file"));
    /// ```
    pub fn fix(&self) -> Option<String> {
        match self {
            FileError::Io { .. }
            | FileError::TooLarge { .. }
            | FileError::NotText { .. }
            | FileError::Stopped { .. } => None,
            FileError::NotRegular { .. } => Some("name a file".into()),
            FileError::Exists { .. } => Some("choose another name, or allow replacing it".into()),
            FileError::NotOurs { .. } => Some("move it away, or choose another folder".into()),
            FileError::Exposed {
                path,
                sensitivity,
                exposure,
            } => Some(crate::secret::fix(path, *sensitivity, *exposure)),
            FileError::ForeignFolder { owner: None, .. } => Some("put a folder of your own in its place".into()),
            FileError::ForeignFolder { owner: Some(_), .. } => Some("use a folder of your own".into()),
            // Shared on purpose: not the user's to close.
            FileError::OpenFolder { mode, .. } if mode & 0o1000 != 0 => Some("use a folder of your own".into()),
            FileError::OpenFolder { path, .. } => Some(format!(
                "stop them: chmod go-w {}, or use a folder of your own",
                path.display()
            )),
        }
    }

    pub(crate) fn io(path: &Path, source: std::io::Error) -> FileError {
        FileError::Io {
            path: path.to_path_buf(),
            source,
        }
    }

    /// The file the error is about.
    pub fn path(&self) -> &Path {
        match self {
            FileError::Io { path, .. }
            | FileError::NotRegular { path, .. }
            | FileError::TooLarge { path, .. }
            | FileError::Exists { path, .. }
            | FileError::NotOurs { path, .. }
            | FileError::NotText { path }
            | FileError::Stopped { path }
            | FileError::Exposed { path, .. }
            | FileError::ForeignFolder { path, .. }
            | FileError::OpenFolder { path, .. } => path,
        }
    }
}

/// A size in the largest whole unit that shows it: `64 MiB`, `512 KiB`,
/// `100 bytes`.
///
/// ```
/// assert_eq!(genapi_files::shown_size(64 << 20), "64 MiB");
/// assert_eq!(genapi_files::shown_size(1536), "1.5 KiB");
/// assert_eq!(genapi_files::shown_size(100), "100 bytes");
/// ```
pub fn shown_size(bytes: u64) -> String {
    let units = [(1u64 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (unit, name) in units {
        if bytes >= unit {
            let whole = bytes / unit;
            let tenths = (bytes % unit) * 10 / unit;
            return match tenths {
                0 => format!("{whole} {name}"),
                t => format!("{whole}.{t} {name}"),
            };
        }
    }
    format!("{bytes} bytes")
}
