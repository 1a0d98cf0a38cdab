//! Who may change a file that steers a secret.
//!
//! A config file that names the service (and the variable or file its key
//! comes from) decides where the key goes: whoever can change that file can
//! send the key to an address of theirs, without reading anything. A file
//! holding a key gives it to whoever can read it. So one rule covers every
//! file that says where a secret goes or what it is, checked on the file
//! actually opened (after links, so a link planted in a shared folder to
//! someone else's file is judged by that file):
//!
//! - it is owned by the user running the program, or by root;
//! - neither its group nor others may write it;
//! - for a file that holds the secret itself, neither may read it either.
//!
//! A refusal says what to run (`chmod`) or to use a file of one's own; the
//! file is read only once it passes, before anything is sent.

use std::fs::Metadata;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use crate::{Bounded, FileError};

/// What a file tells about a secret, and so who else may touch it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sensitivity {
    /// A file that decides where a secret goes or which secret is used
    /// (a config file naming a service and its key's variable or file,
    /// the CA certificates a password is sent under): others may read it,
    /// but only its owner (the user, or root) may change it.
    SteersASecret,
    /// A file that holds a secret (a key file): only its owner may read or
    /// change it.
    HoldsASecret,
    /// A file a program keeps for itself ([`read_private`]: what it learned
    /// or sent, in a cache), which what it does next rests on (the secrets
    /// it scrubs, how it polls, what it reports): others may read it, but
    /// only its owner may change it.
    SteersTheProgram,
}

impl Sensitivity {
    /// The permission bits others must not have, and the mode that fixes it.
    fn forbidden(self) -> (u32, &'static str) {
        match self {
            Sensitivity::SteersASecret | Sensitivity::SteersTheProgram => (0o022, "go-w"),
            Sensitivity::HoldsASecret => (0o077, "600"),
        }
    }

    /// What the file does, for a refusal.
    fn what(self) -> &'static str {
        match self {
            Sensitivity::SteersASecret => "it decides where a secret goes",
            Sensitivity::HoldsASecret => "it holds a secret",
            Sensitivity::SteersTheProgram => "what the program does next rests on it",
        }
    }
}

/// Why a file that steers a secret was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exposure {
    /// Owned by someone other than the user (and not by root).
    NotOwned {
        /// The owner's user id.
        owner: u32,
    },
    /// Its group or others may change it (or, for a secret, read it).
    OpenToOthers {
        /// The file's permission bits.
        mode: u32,
    },
    /// A link, where a file a program keeps for itself was to be
    /// ([`read_private`]): that program never writes one, and whoever did
    /// chose what it reads.
    Link,
}

/// Opens `path` as [`crate::open`] does (a regular file within `limit`,
/// links followed), then refuses it unless the file opened passes the rule
/// of the module for `sensitivity`.
///
/// ```
/// # #[cfg(unix)] {
/// use std::os::unix::fs::PermissionsExt as _;
/// use genapi_files::{FileError, Sensitivity};
///
/// let path = std::env::temp_dir().join(format!("genapi-files-secret-{}", std::process::id()));
/// std::fs::write(&path, "base_url = \"https://api.example.com\"")?;
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o666))?;
/// let refused = genapi_files::open_sensitive(&path, 1024, Sensitivity::SteersASecret).unwrap_err();
/// assert!(matches!(refused, FileError::Exposed { .. }));
/// assert!(refused.reason().contains("chmod go-w"), "{refused}");
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
/// assert!(genapi_files::open_sensitive(&path, 1024, Sensitivity::SteersASecret).is_ok());
/// # std::fs::remove_file(&path)?;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_sensitive(path: &Path, limit: u64, sensitivity: Sensitivity) -> Result<Bounded, FileError> {
    let opened = crate::open(path, limit)?;
    let metadata = opened.metadata().map_err(|e| FileError::io(path, e))?;
    check(path, &metadata, sensitivity)?;
    Ok(opened)
}

/// The text of a file that steers a secret: [`open_sensitive`], then read
/// whole as UTF-8.
pub fn read_sensitive_text(path: &Path, limit: u64, sensitivity: Sensitivity) -> Result<String, FileError> {
    let bytes = read_whole(open_sensitive(path, limit, sensitivity)?)?;
    String::from_utf8(bytes).map_err(|_| FileError::NotText {
        path: path.to_path_buf(),
    })
}

/// The bytes of a file a program keeps for itself, as [`write_private`]
/// wrote it (a cache's: what the program learned or sent), read within
/// `limit`. What the program does next rests on such a file, so it is
/// read only when no one else could have put it there:
///
/// - its folder passes [`may_write_private`] (a folder others may change is
///   one where the program keeps nothing);
/// - a link at its name is refused ([`Exposure::Link`]), never followed;
/// - the file opened passes the rule of the module for
///   [`Sensitivity::SteersTheProgram`]: the user's (or root's), and
///   writable by no one else. That is judged on the file opened, not on
///   its name, so a folder swapped for another user's between the check
///   and the read gives a file of theirs, which is refused.
///
/// ```
/// # #[cfg(unix)] {
/// use genapi_files::{Existing, Exposure, FileError};
///
/// let dir = std::env::temp_dir().join(format!("genapi-files-read-private-{}", std::process::id()));
/// let kept = dir.join("genapi").join("learned.json");
/// genapi_files::write_private(&kept, b"{}", Existing::Replace)?;
/// assert_eq!(genapi_files::read_private(&kept, 1024)?, b"{}");
/// let link = dir.join("genapi").join("history.jsonl");
/// std::os::unix::fs::symlink(&kept, &link)?;
/// let refused = genapi_files::read_private(&link, 1024).unwrap_err();
/// assert!(matches!(refused, FileError::Exposed { exposure: Exposure::Link, .. }), "{refused}");
/// # std::fs::remove_dir_all(&dir)?;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn read_private(path: &Path, limit: u64) -> Result<Vec<u8>, FileError> {
    may_write_private(path)?;
    let opened = open_written(path, limit)?;
    let metadata = opened.metadata().map_err(|e| FileError::io(path, e))?;
    check(path, &metadata, Sensitivity::SteersTheProgram)?;
    read_whole(opened)
}

/// A file the program keeps for itself ([`write_private`] made it), opened
/// to add to its end: a log whose lines are written one at a time between
/// whole rewrites (what a proxy remembers, at each change). Opened under
/// the rule of [`read_private`]: its folder passes [`may_write_private`], a
/// link at its name is refused ([`Exposure::Link`]), and the file opened is
/// a regular file, the user's (or root's) and writable by no one else.
///
/// ```
/// # #[cfg(unix)] {
/// use genapi_files::Existing;
///
/// let dir = std::env::temp_dir().join(format!("genapi-files-append-{}", std::process::id()));
/// let log = dir.join("genapi").join("memory.json");
/// genapi_files::write_private(&log, b"one\n", Existing::Replace)?;
/// let mut appending = genapi_files::append_private(&log)?;
/// appending.append(b"two\n")?;
/// assert_eq!(genapi_files::read_private(&log, 1024)?, b"one\ntwo\n");
/// # std::fs::remove_dir_all(&dir)?;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn append_private(path: &Path) -> Result<Appending, FileError> {
    may_write_private(path)?;
    let mut options = std::fs::OpenOptions::new();
    options.append(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let file = options
        .open(path)
        .map_err(|e| crate::read::opened_without_links(path, e))?;
    let metadata = file.metadata().map_err(|e| FileError::io(path, e))?;
    if !metadata.is_file() {
        return Err(FileError::NotRegular {
            path: path.to_path_buf(),
            writing: true,
        });
    }
    check(path, &metadata, Sensitivity::SteersTheProgram)?;
    Ok(Appending {
        file,
        path: path.to_path_buf(),
    })
}

/// A private file open to add to its end ([`append_private`]).
#[derive(Debug)]
pub struct Appending {
    file: std::fs::File,
    path: PathBuf,
}

impl Appending {
    /// Adds `bytes` at the end of the file, on the disk when it returns: a
    /// crash of the machine then finds them.
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), FileError> {
        use std::io::Write as _;
        self.file.write_all(bytes).map_err(|e| FileError::io(&self.path, e))?;
        self.file.sync_data().map_err(|e| FileError::io(&self.path, e))
    }
}

/// Opens a file the program itself has just written, to read back what it
/// holds (a download it saved beside its final name), as [`crate::open`]
/// does (a regular file within `limit`, opened without blocking, so a pipe
/// put at its name is refused at once), but never through a link
/// ([`Exposure::Link`]): whatever came to have its name, what is read is
/// no file elsewhere. Its owner and mode are not judged: a folder on a
/// file system that maps owners (sshfs, CIFS, NFS with root squashed)
/// shows the program's own files as another user's, and its mode is as the
/// umask made it.
///
/// ```
/// # #[cfg(unix)] {
/// use std::io::Read as _;
/// use genapi_files::{Existing, Exposure, FileError};
///
/// let dir = std::env::temp_dir().join(format!("genapi-files-open-written-{}", std::process::id()));
/// std::fs::create_dir_all(&dir)?;
/// let path = dir.join("download.partial");
/// genapi_files::write_whole(&path, b"\xff\xd8\xff", Existing::Replace)?;
/// let mut head = Vec::new();
/// genapi_files::open_written(&path, u64::MAX)?.read_to_end(&mut head)?;
/// assert_eq!(head, b"\xff\xd8\xff");
/// let link = dir.join("link.partial");
/// std::os::unix::fs::symlink(&path, &link)?;
/// let refused = genapi_files::open_written(&link, u64::MAX).unwrap_err();
/// assert!(matches!(refused, FileError::Exposed { exposure: Exposure::Link, .. }), "{refused}");
/// # std::fs::remove_dir_all(&dir)?;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn open_written(path: &Path, limit: u64) -> Result<Bounded, FileError> {
    crate::read::open_as(path, limit, crate::read::Links::Refused)
}

/// What is left to read of `opened`, within its limit.
fn read_whole(mut opened: Bounded) -> Result<Vec<u8>, FileError> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    opened
        .read_to_end(&mut bytes)
        .map_err(|e| match e.downcast::<FileError>() {
            Ok(refused) => refused,
            Err(e) => FileError::io(opened.path(), e),
        })?;
    Ok(bytes)
}

/// Writes `bytes` as the whole file `target` ([`crate::stage`], then
/// [`crate::Staged::publish`] as `existing` allows), made to pass the rule
/// of the module for either sensitivity: the file is its writer's,
/// readable and writable by its owner alone (mode 600) from the call that
/// creates it, so no one else can ever open it. It is on the disk when the
/// call returns ([`crate::Staged::sync`], and its folder's entry too): a
/// crash of the machine then finds it.
///
/// Whoever may change the folder it goes in may replace it, so each
/// folder made for it is made the user's alone (mode 700), and a folder
/// already there must be the user's and changed by no one else: one that
/// is a link or another user's is refused ([`FileError::ForeignFolder`]),
/// and so is one its group or others may write
/// ([`FileError::OpenFolder`]), before anything is written. A folder that
/// others may only enter or list (a home folder, mode 755) is left as it
/// is: the file in it is still its owner's alone. An existing folder's
/// mode is never changed.
///
/// ```
/// # #[cfg(unix)] {
/// use std::os::unix::fs::PermissionsExt as _;
/// use genapi_files::{Existing, Sensitivity};
///
/// let dir = std::env::temp_dir().join(format!("genapi-files-private-{}", std::process::id()));
/// let path = dir.join("genapi").join("config.toml");
/// genapi_files::write_private(&path, b"[profiles.work]\n", Existing::Keep)?;
/// assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
/// assert_eq!(std::fs::metadata(path.parent().unwrap())?.permissions().mode() & 0o777, 0o700);
/// genapi_files::read_sensitive_text(&path, 1024, Sensitivity::HoldsASecret)?;
/// # std::fs::remove_dir_all(&dir)?;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn write_private(target: &Path, bytes: &[u8], existing: crate::Existing) -> Result<PathBuf, FileError> {
    let folder = folder_of(target);
    private_folder(&folder)?;
    let mut staged = stage_private(target)?;
    staged.write_all(bytes).map_err(|e| FileError::io(target, e))?;
    // What is kept private is what a program must find again (a key, what
    // a proxy remembers it sent): on the disk before its name moves, and
    // its name with it.
    staged.sync()?;
    let published = staged.publish(existing)?;
    if let Ok(folder) = std::fs::File::open(&folder) {
        let _ = folder.sync_all();
    }
    Ok(published)
}

/// Whether [`write_private`] would accept the folder of `target`, without
/// making or writing anything: for a program that writes other files
/// first (a key, before the config file that names it), so that a refused
/// folder leaves nothing behind. A folder not there yet passes, as it
/// would be made the user's alone. The write itself checks again.
///
/// ```
/// # #[cfg(unix)] {
/// use std::os::unix::fs::PermissionsExt as _;
/// use genapi_files::FileError;
///
/// let dir = std::env::temp_dir().join(format!("genapi-files-may-private-{}", std::process::id()));
/// genapi_files::may_write_private(&dir.join("genapi").join("config.toml"))?;
/// std::fs::create_dir(&dir)?;
/// std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o775))?;
/// let refused = genapi_files::may_write_private(&dir.join("config.toml")).unwrap_err();
/// assert!(matches!(refused, FileError::OpenFolder { .. }));
/// # std::fs::remove_dir(&dir)?;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn may_write_private(target: &Path) -> Result<(), FileError> {
    let folder = folder_of(target);
    if crate::is_taken(&folder) {
        changed_by_user_alone(&folder)?;
    }
    Ok(())
}

/// The folder `target` goes in, made absolute so that a refusal names a
/// folder whose `chmod` works from anywhere (a bare name's folder is the
/// current one, not `.`).
fn folder_of(target: &Path) -> PathBuf {
    let folder = match target.parent() {
        Some(folder) if !folder.as_os_str().is_empty() => folder,
        _ => Path::new("."),
    };
    std::path::absolute(folder).unwrap_or_else(|_| folder.to_path_buf())
}

/// The permission bits of a private file: its owner's alone.
const OWNER_FILE: u32 = 0o600;

/// `options` set to create a file its owner's alone (mode 600, whatever
/// the umask), for a file a program keeps open and appends to, which
/// [`write_private`] cannot write whole: a state file holding what a later
/// run needs, a polling address with its token among it. A file that
/// exists keeps its mode.
///
/// ```
/// # #[cfg(unix)] {
/// use std::os::unix::fs::PermissionsExt as _;
///
/// let path = std::env::temp_dir().join(format!("genapi-files-owner-only-{}", std::process::id()));
/// let mut options = std::fs::OpenOptions::new();
/// genapi_files::owner_only(options.append(true).create_new(true)).open(&path)?;
/// assert_eq!(std::fs::metadata(&path)?.permissions().mode() & 0o777, 0o600);
/// # std::fs::remove_file(&path)?;
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn owner_only(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(options, OWNER_FILE);
    options
}

/// Makes the file at `path` (open as `file`, which the caller holds
/// locked or otherwise its own) its owner's alone, as [`owner_only`]
/// creates one: a state file written by an older version, or under a
/// looser rule, that others may read. Changing its mode would not do:
/// anyone who opened it while it was readable goes on reading what is
/// written next through that descriptor. So its content is copied into a
/// new file, private from its creation, which then takes its name; the
/// copy is returned, opened to read and append, and what others opened
/// keeps only what was there before. A file already private, or another
/// user's (which this user cannot make private), is returned as it is.
///
/// ```
/// # #[cfg(unix)] {
/// use std::io::Write as _;
/// use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
///
/// let path = std::env::temp_dir().join(format!("genapi-files-made-private-{}", std::process::id()));
/// std::fs::write(&path, "state\n")?;
/// std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))?;
/// let before = std::fs::metadata(&path)?.ino();
/// let file = std::fs::OpenOptions::new().read(true).append(true).open(&path)?;
/// let mut file = genapi_files::made_owner_only(&path, file)?;
/// file.write_all(b"more\n")?;
/// let after = std::fs::metadata(&path)?;
/// assert_eq!(after.permissions().mode() & 0o777, 0o600);
/// assert_ne!(after.ino(), before, "a new file, not the one others may hold open");
/// assert_eq!(std::fs::read_to_string(&path)?, "state\nmore\n");
/// # std::fs::remove_file(&path)?;
/// # }
/// # Ok::<(), std::io::Error>(())
/// ```
pub fn made_owner_only(path: &Path, file: std::fs::File) -> std::io::Result<std::fs::File> {
    #[cfg(unix)]
    {
        use std::io::{Seek as _, SeekFrom};
        use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
        let metadata = file.metadata()?;
        if !metadata.is_file() || metadata.uid() != current_user() || metadata.mode() & 0o077 == 0 {
            return Ok(file);
        }
        let copy_path = crate::write::temporary_name(path);
        let mut copy = crate::write::create_temporary_with_mode(&copy_path, OWNER_FILE)?;
        let copied = (|| {
            let mut source = &file;
            source.seek(SeekFrom::Start(0))?;
            std::io::copy(&mut source, &mut copy)?;
            copy.sync_all()?;
            std::fs::rename(&copy_path, path)?;
            if let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
                if let Ok(folder) = std::fs::File::open(folder) {
                    let _ = folder.sync_all();
                }
            }
            std::fs::OpenOptions::new()
                .read(true)
                .append(true)
                .custom_flags(libc::O_NOFOLLOW)
                .open(path)
        })();
        if copied.is_err() {
            let _ = std::fs::remove_file(&copy_path);
        }
        copied
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        Ok(file)
    }
}

/// The permission bits of a private folder: its owner's alone.
const OWNER_FOLDER: u32 = 0o700;

/// [`crate::stage`], the temporary file its owner's alone from its creation.
fn stage_private(target: &Path) -> Result<crate::Staged, FileError> {
    crate::write::stage_with_mode(target, OWNER_FILE)
}

/// Makes `folder` and the folders above it that are missing, each made its
/// owner's alone (mode 700, whatever the umask), then makes sure no one
/// else may change `folder`, as [`write_private`] does for the folder of
/// its file: for a program that keeps files of its own there by other
/// means (a download it reads back). An existing folder's mode is never
/// changed; one that is a link, another user's or one others may write is
/// refused.
///
/// ```
/// # #[cfg(unix)] {
/// use std::os::unix::fs::PermissionsExt as _;
///
/// let dir = std::env::temp_dir().join(format!("genapi-files-private-folder-{}", std::process::id()));
/// genapi_files::private_folder(&dir.join("cache").join("genapi"))?;
/// assert_eq!(std::fs::metadata(dir.join("cache"))?.permissions().mode() & 0o777, 0o700);
/// # std::fs::remove_dir_all(&dir)?;
/// # }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn private_folder(folder: &Path) -> Result<(), FileError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, OWNER_FOLDER);
    builder.create(folder).map_err(|e| FileError::io(folder, e))?;
    changed_by_user_alone(folder)
}

/// Refuses `folder` when it is a link, another user's, or one its group or
/// others may write. Judged on the folder opened (never through a link).
/// Its mode is left as it is: taking others' access away from a folder the
/// user keeps open to them (a home folder, a shared project) would break
/// what they share in it, and a file written in it is the user's alone
/// anyway.
#[cfg(unix)]
fn changed_by_user_alone(folder: &Path) -> Result<(), FileError> {
    use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
    let link = || FileError::ForeignFolder {
        path: folder.to_path_buf(),
        owner: None,
    };
    // Judged by its name first: a folder of another user that the user may
    // not even open (root's, made by a command run with sudo) is said to be
    // theirs, not a bare "permission denied".
    let judge = |metadata: &Metadata| {
        if metadata.uid() != current_user() {
            return Err(FileError::ForeignFolder {
                path: folder.to_path_buf(),
                owner: Some(metadata.uid()),
            });
        }
        let mode = metadata.mode() & 0o7777;
        if mode & 0o022 != 0 {
            return Err(FileError::OpenFolder {
                path: folder.to_path_buf(),
                mode,
            });
        }
        Ok(())
    };
    let named = std::fs::symlink_metadata(folder).map_err(|e| FileError::io(folder, e))?;
    if named.file_type().is_symlink() {
        return Err(link());
    }
    judge(&named)?;
    // Then as opened, never through a link: what it is now, whatever took
    // its name since.
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(folder)
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP) => link(),
            _ => FileError::io(folder, e),
        })?;
    judge(&opened.metadata().map_err(|e| FileError::io(folder, e))?)
}

/// Elsewhere the platform's access lists decide; nothing is checked here.
#[cfg(not(unix))]
fn changed_by_user_alone(_: &Path) -> Result<(), FileError> {
    Ok(())
}

/// The rule, on the metadata of the file opened.
pub(crate) fn check(path: &Path, metadata: &Metadata, sensitivity: Sensitivity) -> Result<(), FileError> {
    match exposure(metadata, sensitivity, current_user()) {
        None => Ok(()),
        Some(exposure) => Err(FileError::Exposed {
            path: path.to_path_buf(),
            sensitivity,
            exposure,
        }),
    }
}

#[cfg(unix)]
fn current_user() -> u32 {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() }
}

#[cfg(not(unix))]
fn current_user() -> u32 {
    0
}

/// What is wrong with a file of this metadata for `user`, if anything.
#[cfg(unix)]
fn exposure(metadata: &Metadata, sensitivity: Sensitivity, user: u32) -> Option<Exposure> {
    use std::os::unix::fs::MetadataExt as _;
    let owner = metadata.uid();
    if owner != user && owner != 0 {
        return Some(Exposure::NotOwned { owner });
    }
    let mode = metadata.mode() & 0o7777;
    let (forbidden, _) = sensitivity.forbidden();
    (mode & forbidden != 0).then_some(Exposure::OpenToOthers { mode })
}

/// Elsewhere the platform's access lists decide; nothing is checked here.
#[cfg(not(unix))]
fn exposure(_: &Metadata, _: Sensitivity, _: u32) -> Option<Exposure> {
    None
}

/// What is wrong with a refused file, without what to do about it.
pub(crate) fn problem(sensitivity: Sensitivity, exposure: Exposure) -> String {
    let what = sensitivity.what();
    match exposure {
        Exposure::Link => format!(
            "a link, where a file the program keeps for itself was to be; the program never makes one, so whoever \
             did chose what it reads, and {what}"
        ),
        Exposure::NotOwned { owner } => format!("owned by another user (uid {owner}), and {what}"),
        Exposure::OpenToOthers { mode } => {
            let who = if mode & 0o022 != 0 {
                "others can change it"
            } else {
                "others can read it"
            };
            format!("mode {:o}: {who}, and {what}", mode & 0o777)
        }
    }
}

/// What to run about a refused file.
pub(crate) fn fix(path: &Path, sensitivity: Sensitivity, exposure: Exposure) -> String {
    match exposure {
        Exposure::Link => format!("remove it: rm {}", path.display()),
        Exposure::NotOwned { .. } => "use a file of your own, not writable by others".into(),
        Exposure::OpenToOthers { .. } => {
            let (_, fix) = sensitivity.forbidden();
            format!("make it yours alone: chmod {fix} {}", path.display())
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("genapi-files-secret-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn with_mode(path: &Path, mode: u32) -> Metadata {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        std::fs::metadata(path).unwrap()
    }

    /// Each mode against each sensitivity: what is refused and what passes.
    #[test]
    fn the_mode_rule_as_a_table() {
        let dir = scratch("table");
        let path = dir.join("file");
        std::fs::write(&path, "x").unwrap();
        let me = current_user();
        let steers = Sensitivity::SteersASecret;
        let holds = Sensitivity::HoldsASecret;
        for (mode, steers_ok, holds_ok) in [
            (0o600, true, true),
            (0o400, true, true),
            (0o644, true, false),
            (0o640, true, false),
            (0o604, true, false),
            (0o620, false, false),
            (0o602, false, false),
            (0o660, false, false),
            (0o666, false, false),
            (0o777, false, false),
        ] {
            let metadata = with_mode(&path, mode);
            assert_eq!(
                exposure(&metadata, steers, me).is_none(),
                steers_ok,
                "{mode:o} steering"
            );
            assert_eq!(exposure(&metadata, holds, me).is_none(), holds_ok, "{mode:o} holding");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// `path` is refused by `read` once it is another user's: given away
    /// for real where the test runs as root (who can, and then judges it as
    /// its user), else judged by the rule as another user's.
    fn refused_as_another_users(path: &Path, sensitivity: Sensitivity, read: impl Fn(&Path) -> Result<(), FileError>) {
        use std::os::unix::fs::MetadataExt as _;
        if current_user() == 0 {
            std::os::unix::fs::chown(path, Some(4242), None).unwrap();
            let refused = read(path).unwrap_err();
            assert!(
                matches!(
                    refused,
                    FileError::Exposed {
                        exposure: Exposure::NotOwned { owner: 4242 },
                        ..
                    }
                ),
                "{refused}"
            );
        } else {
            let theirs = std::fs::metadata(path).unwrap();
            assert_eq!(
                exposure(&theirs, sensitivity, theirs.uid() + 1),
                Some(Exposure::NotOwned { owner: theirs.uid() })
            );
        }
    }

    #[test]
    fn a_file_of_another_user_is_refused_whatever_its_mode() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = scratch("owner");
        let path = dir.join("file");
        std::fs::write(&path, "x").unwrap();
        let mine = with_mode(&path, 0o600);
        // Root owns what it writes and is trusted as anyone's own.
        assert_eq!(
            exposure(&mine, Sensitivity::HoldsASecret, mine.uid() + 4242).is_none(),
            mine.uid() == 0
        );
        refused_as_another_users(&path, Sensitivity::SteersASecret, |path| {
            open_sensitive(path, 1024, Sensitivity::SteersASecret).map(drop)
        });
        if current_user() == 0 {
            let refused = open_sensitive(&path, 1024, Sensitivity::SteersASecret).unwrap_err();
            assert!(
                refused.reason().contains("owned by another user (uid 4242)"),
                "{refused}"
            );
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// Set in the copy of the test binary that runs a test under umask 0.
    const UMASK_ZERO: &str = "GENAPI_FILES_TEST_UMASK_ZERO";

    /// Runs the test `name` again in a copy of this binary whose umask is
    /// 0, so modes are exactly what the code asks for; whether this is that
    /// copy.
    fn under_umask_zero(name: &str) -> bool {
        if std::env::var_os(UMASK_ZERO).is_some() {
            // SAFETY: umask cannot fail; it is read by setting it again.
            assert_eq!(unsafe { libc::umask(0) }, 0, "the copy runs under umask 0");
            return true;
        }
        let run = std::process::Command::new("sh")
            .args(["-c", "umask 000 && exec \"$0\" \"$@\""])
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", &format!("secret::tests::{name}"), "--test-threads=1"])
            .env(UMASK_ZERO, "1")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success() && said.contains("1 passed"),
            "{said}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        false
    }

    /// Set, to the folder to judge, in the copy of the test binary that
    /// runs as another user.
    const AS_NOBODY: &str = "GENAPI_FILES_TEST_AS_NOBODY";

    /// A folder of root's that the user may not even open (a command run
    /// with sudo made the cache folder) is said to be another user's, with
    /// what to do, not a bare "permission denied". Run as root, the test
    /// makes one and judges it from a copy of itself run as `nobody`; run
    /// as anyone else, it judges `/root`.
    #[test]
    fn a_folder_of_roots_the_user_cannot_open_is_said_to_be_roots() {
        use std::os::unix::process::CommandExt as _;
        let judged = |folder: &Path| {
            let refused = may_write_private(&folder.join("history.jsonl")).unwrap_err();
            assert!(
                matches!(refused, FileError::ForeignFolder { owner: Some(0), .. }),
                "{refused}"
            );
        };
        if let Some(folder) = std::env::var_os(AS_NOBODY) {
            return judged(Path::new(&folder));
        }
        if current_user() != 0 {
            if std::fs::read_dir("/root").is_err() && std::fs::symlink_metadata("/root").is_ok() {
                judged(Path::new("/root/."));
            }
            return;
        }
        let dir = scratch("roots");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let folder = dir.join("genapi");
        std::fs::create_dir(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700)).unwrap();
        let copy = dir.join("test-binary");
        // Copied by another process: a file this one wrote could still be
        // open in a child another test is starting, and running it would
        // then fail ("text file busy").
        let copied = std::process::Command::new("cp")
            .arg(std::env::current_exe().unwrap())
            .arg(&copy)
            .status()
            .unwrap();
        assert!(copied.success());
        std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut command = std::process::Command::new(&copy);
        command
            .args([
                "--exact",
                "secret::tests::a_folder_of_roots_the_user_cannot_open_is_said_to_be_roots",
                "--test-threads=1",
            ])
            .env(AS_NOBODY, &folder);
        // SAFETY: setgid and setuid are async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let run = command.output().unwrap();
        let said = String::from_utf8_lossy(&run.stdout);
        assert!(
            run.status.success() && said.contains("1 passed"),
            "{said}{}",
            String::from_utf8_lossy(&run.stderr)
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    fn mode_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().permissions().mode() & 0o7777
    }

    /// A new folder `path` that others may enter (mode 755).
    fn open_folder(path: &Path) -> PathBuf {
        std::fs::create_dir(path).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.to_path_buf()
    }

    /// Under umask 0, a file created with the default mode is anyone's: the
    /// temporary a private file is written in is its owner's alone from
    /// the call that creates it, before a byte is written and before any
    /// later change of mode could close it.
    #[test]
    fn a_private_file_is_its_owners_alone_from_its_creation() {
        if !under_umask_zero("a_private_file_is_its_owners_alone_from_its_creation") {
            return;
        }
        let dir = scratch("from-creation");
        let target = dir.join("keys").join("work.key");
        private_folder(target.parent().unwrap()).unwrap();
        let staged = stage_private(&target).unwrap();
        assert_eq!(mode_of(staged.temporary_path()), 0o600, "as created");
        drop(staged);
        write_private(&target, b"key\n", crate::Existing::Replace).unwrap();
        assert_eq!(mode_of(&target), 0o600);
        assert_eq!(mode_of(target.parent().unwrap()), 0o700);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_folder_of_ones_own_that_others_may_only_enter_is_left_as_it_is() {
        let dir = scratch("open-folder");
        let keys = open_folder(&dir.join("keys"));
        std::fs::write(keys.join("old.key"), "kept").unwrap();
        write_private(&keys.join("work.key"), b"key\n", crate::Existing::Replace).unwrap();
        assert_eq!(mode_of(&keys), 0o755, "an existing folder's mode is never changed");
        assert_eq!(mode_of(&keys.join("work.key")), 0o600);
        assert_eq!(std::fs::read_to_string(keys.join("old.key")).unwrap(), "kept");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_folder_others_may_change_is_refused_and_left_as_it_is() {
        let dir = scratch("writable-folder");
        for mode in [0o775, 0o757, 0o1777] {
            let keys = dir.join(format!("keys-{mode:o}"));
            std::fs::create_dir(&keys).unwrap();
            std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(mode)).unwrap();
            let refused = write_private(&keys.join("work.key"), b"key\n", crate::Existing::Replace).unwrap_err();
            assert!(
                matches!(&refused, FileError::OpenFolder { path, mode: m } if *path == keys && *m == mode),
                "{refused}"
            );
            // A shared folder (sticky, like /tmp) is to stay open to others.
            let fix = format!("chmod go-w {}", keys.display());
            assert_eq!(refused.reason().contains(&fix), mode & 0o1000 == 0, "{refused}");
            assert!(refused.reason().contains("a folder of your own"), "{refused}");
            assert!(
                refused.to_string().starts_with(&keys.display().to_string()),
                "{refused}"
            );
            assert_eq!(std::fs::read_dir(&keys).unwrap().count(), 0, "nothing written");
            assert_eq!(mode_of(&keys), mode, "left as it is");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_linked_folder_is_refused_and_nothing_is_written_through_it() {
        let dir = scratch("linked-folder");
        let elsewhere = open_folder(&dir.join("elsewhere"));
        let keys = dir.join("keys");
        std::os::unix::fs::symlink(&elsewhere, &keys).unwrap();
        let refused = write_private(&keys.join("work.key"), b"key\n", crate::Existing::Replace).unwrap_err();
        assert!(
            matches!(&refused, FileError::ForeignFolder { path, owner: None } if *path == keys),
            "{refused}"
        );
        assert!(refused.reason().contains("a link to a folder"), "{refused}");
        assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0, "nothing written");
        assert_eq!(mode_of(&elsewhere), 0o755, "left as it is");
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_folder_of_another_user_is_refused() {
        use std::os::unix::fs::MetadataExt as _;
        let dir = scratch("foreign-folder");
        let folder = if current_user() == 0 {
            // Root can give a folder away, and then judges it as its user.
            let keys = dir.join("keys");
            std::fs::create_dir(&keys).unwrap();
            std::os::unix::fs::chown(&keys, Some(4242), None).unwrap();
            keys
        } else {
            // Root's, where anyone else runs the test.
            PathBuf::from("/")
        };
        let owner = std::fs::metadata(&folder).unwrap().uid();
        let target = folder.join(format!("genapi-files-foreign-{}.key", std::process::id()));
        let refused = write_private(&target, b"key\n", crate::Existing::Replace).unwrap_err();
        assert!(
            matches!(refused, FileError::ForeignFolder { owner: Some(o), .. } if o == owner),
            "{refused}"
        );
        assert!(
            refused.reason().contains(&format!("another user (uid {owner})")),
            "{refused}"
        );
        assert!(!target.exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// What a program reads back of the files it keeps for itself: each
    /// way someone else could have put the file there is refused, and why.
    #[test]
    fn a_kept_file_is_read_only_when_no_one_else_could_have_put_it_there() {
        let dir = scratch("kept");
        let kept = |name: &str| {
            let folder = dir.join(name);
            let path = folder.join("history.jsonl");
            write_private(&path, b"{}\n", crate::Existing::Replace).unwrap();
            (folder, path)
        };
        let (_, mine) = kept("mine");
        assert_eq!(read_private(&mine, 1024).unwrap(), b"{}\n");
        assert!(matches!(read_private(&mine, 2), Err(FileError::TooLarge { .. })));

        let (_, linked) = kept("linked");
        std::fs::remove_file(&linked).unwrap();
        std::os::unix::fs::symlink(&mine, &linked).unwrap();
        let refused = read_private(&linked, 1024).unwrap_err();
        assert!(
            matches!(
                refused,
                FileError::Exposed {
                    exposure: Exposure::Link,
                    ..
                }
            ),
            "{refused}"
        );
        assert!(
            refused.reason().contains(&format!("rm {}", linked.display())),
            "{refused}"
        );

        let (_, changeable) = kept("changeable");
        with_mode(&changeable, 0o666);
        let refused = read_private(&changeable, 1024).unwrap_err();
        assert!(
            matches!(
                refused,
                FileError::Exposed {
                    sensitivity: Sensitivity::SteersTheProgram,
                    exposure: Exposure::OpenToOthers { mode: 0o666 },
                    ..
                }
            ),
            "{refused}"
        );
        assert!(refused.reason().contains("chmod go-w"), "{refused}");
        // A file just written under umask 002 is opened to be read back,
        // but is not one kept for later.
        with_mode(&changeable, 0o664);
        assert!(open_written(&changeable, 1024).is_ok());
        assert!(read_private(&changeable, 1024).is_err());
        // Others may read it: the rule is about who may change it.
        with_mode(&changeable, 0o644);
        assert!(read_private(&changeable, 1024).is_ok());

        let (open, in_open_folder) = kept("open");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let refused = read_private(&in_open_folder, 1024).unwrap_err();
        assert!(
            matches!(refused, FileError::OpenFolder { mode: 0o777, .. }),
            "{refused}"
        );
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o700)).unwrap();

        let (_, piped) = kept("piped");
        std::fs::remove_file(&piped).unwrap();
        let made = std::process::Command::new("mkfifo").arg(&piped).status().unwrap();
        assert!(made.success());
        assert!(matches!(
            read_private(&piped, 1024),
            Err(FileError::NotRegular { writing: false, .. })
        ));

        // A file just written is read back whoever the file system says
        // owns it (one that maps owners shows the user's files as another's).
        if current_user() == 0 {
            let (_, mapped) = kept("mapped");
            std::os::unix::fs::chown(&mapped, Some(4242), None).unwrap();
            assert!(open_written(&mapped, 1024).is_ok());
        }

        // A folder swapped for another user's gives a file of theirs.
        let (_, theirs) = kept("theirs");
        refused_as_another_users(&theirs, Sensitivity::SteersTheProgram, |path| {
            read_private(path, 1024).map(drop)
        });
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn a_link_is_judged_by_the_file_it_leads_to() {
        let dir = scratch("link");
        let target = dir.join("shared.toml");
        std::fs::write(&target, "x").unwrap();
        with_mode(&target, 0o666);
        let link = dir.join("config.toml");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let refused = open_sensitive(&link, 1024, Sensitivity::SteersASecret).unwrap_err();
        assert!(
            matches!(
                refused,
                FileError::Exposed {
                    exposure: Exposure::OpenToOthers { mode: 0o666 },
                    ..
                }
            ),
            "{refused}"
        );
        assert!(refused.reason().contains("chmod go-w"), "{refused}");
        with_mode(&target, 0o644);
        assert_eq!(
            read_sensitive_text(&link, 1024, Sensitivity::SteersASecret).unwrap(),
            "x"
        );
        let refused = read_sensitive_text(&link, 1024, Sensitivity::HoldsASecret).unwrap_err();
        assert!(refused.reason().contains("chmod 600"), "{refused}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
