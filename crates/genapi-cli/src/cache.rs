//! The command's folder in the user's cache: what it keeps between runs,
//! listed once in [`FILES`] (for the README, the man page and the code that
//! writes each). Nothing there is needed: a missing or unusable file is
//! passed over, so deleting the folder is always safe, and costs only what
//! each entry says.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// `genapi` in the platform's cache folder (`$XDG_CACHE_HOME`, else
/// `~/.cache`, on Linux).
pub fn dir() -> Option<PathBuf> {
    Some(dirs::cache_dir()?.join("genapi"))
}

/// A file or folder the command keeps in its cache folder.
#[derive(Clone, Copy, Debug)]
pub struct CacheFile {
    /// Its name in the folder.
    pub name: &'static str,
    /// What it holds.
    pub holds: &'static str,
    /// What deleting it costs.
    pub deleting_costs: &'static str,
    /// What a run that cannot keep or read it costs, when that is not what
    /// deleting it costs.
    pub unkept_costs: Option<&'static str>,
}

impl CacheFile {
    /// What a run that cannot keep or read it costs.
    fn unkept_costs(&self) -> &'static str {
        self.unkept_costs.unwrap_or(self.deleting_costs)
    }
}

/// Task durations learned from the services used.
pub const DURATIONS: CacheFile = CacheFile {
    name: "learned.json",
    holds: "how long each operation's tasks took, per service address (the ones used last; nothing for the built-in \
            mock)",
    deleting_costs: "the next run polls on a one-second grid until its first task of each kind ends, so tasks of a \
                     fraction of a second are seen about a second after they were sent",
    unkept_costs: None,
};

/// Prices the account was charged.
pub const PRICES: CacheFile = CacheFile {
    name: "prices.json",
    holds: "the most the account was charged for each kind of line (model, sizes, inputs), per service (the mock's \
            under one name whatever its port; the ones used last)",
    deleting_costs: "batch --estimate lists every line as of unknown price, and --max-credits sends each kind's \
                     first line alone, until a run prices the kinds again",
    unkept_costs: None,
};

/// The secrets of tasks sent by `genapi submit` and `genapi generate`.
pub const TASK_SECRETS: CacheFile = CacheFile {
    name: "tasks",
    holds: "a file per task genapi submit or generate sent until a command saves its result (one that failed, for \
            30 days): the \
            short text fields of its request (webhook secret and addresses among them), and one per batch output \
            folder run with --webhook-url (its notification secret); readable by the user alone",
    deleting_costs: "a later wait or get of such a task cannot scrub its webhook secret from what it shows, and a \
                     batch's next run makes a new notification secret and cannot scrub the old one",
    unkept_costs: None,
};

/// The recent submissions `genapi tasks` lists.
pub const HISTORY: CacheFile = CacheFile {
    name: "history.jsonl",
    holds: "the last 200 tasks generate and submit sent: id, model, when, last known status, where the result was \
            saved and the service's address; never a key, prompt or polling address",
    deleting_costs: "genapi tasks lists nothing sent before",
    unkept_costs: Some("genapi tasks lists no task sent while it is not kept"),
};

/// What `genapi proxy` remembers of the submissions it sent.
pub const PROXY: CacheFile = CacheFile {
    name: "proxy",
    holds: "a file per service genapi proxy relayed to: for a day, a digest of each submission it sent (never its key \
            or body), the service's acceptance of it, and whether that reached its caller; readable by the user alone",
    deleting_costs: "a stopped proxy's restart no longer knows the submissions it sent: an SDK retrying one whose \
                     answer it never received is sent to the service again, and pays again",
    unkept_costs: None,
};

/// Everything the command keeps in its cache folder: `--help` and the man
/// page's FILES section list it, and the README's is checked against it.
pub const FILES: [CacheFile; 5] = [DURATIONS, PRICES, TASK_SECRETS, HISTORY, PROXY];

/// Writes `bytes` as `path`, a private file of the cache (`file`). Keeping
/// it is best effort, but a folder the file policy refuses (another user's,
/// or one others may change) is one the user can fix, and what its loss
/// costs them is theirs to know: that is said once a run on stderr, with
/// what to run ([`say_unusable`]). A pipe or a device at the file's name
/// (nothing the command wrote) is removed, as an unusable file of the cache
/// is replaced. Anything else that stops the write is only logged. Whether
/// it was kept.
pub fn keep_private(file: &CacheFile, path: &Path, bytes: &[u8]) -> bool {
    if let Some(refused) = cache_folder_refused(path) {
        say_unusable(file, &refused, Use::Keeping);
        return false;
    }
    let write = || genapi_files::write_private(path, bytes, genapi_files::Existing::Replace);
    let written = match write() {
        Err(genapi_files::FileError::NotRegular { .. }) => match std::fs::remove_file(path) {
            Ok(()) => write(),
            Err(error) => Err(genapi_files::FileError::Io {
                path: path.to_path_buf(),
                source: error,
            }),
        },
        written => written,
    };
    match written {
        Ok(_) => return true,
        Err(refused) if is_folder_refusal(&refused) || is_unmakeable(&refused) => {
            say_unusable(file, &refused, Use::Keeping)
        }
        Err(error) => tracing::debug!(%error, file = file.name, "a file of the cache is not kept"),
    }
    false
}

/// The bytes of `path`, a private file of the cache (`file`), as the file
/// policy reads back a file a program keeps for itself
/// ([`genapi_files::read_private`]: never through a link, and only while no
/// one else may change it); `None` when there is none. A folder the policy
/// refuses holds nothing the command kept (it keeps nothing there), so
/// nothing of it is read: that is said once a run, as when keeping
/// ([`say_unusable`]), and the file counts as missing; so does a folder
/// that is not there and cannot be made ([`cannot_be_made`]). Why the file
/// itself is unusable, otherwise: the caller decides what to tell.
pub fn read_kept(file: &CacheFile, path: &Path, limit: u64) -> Result<Option<Vec<u8>>, genapi_files::FileError> {
    if let Some(refused) = cache_folder_refused(path).or_else(|| cannot_be_made(path)) {
        say_unusable(file, &refused, Use::Reading);
        return Ok(None);
    }
    let read = genapi_files::may_write_private(path).and_then(|()| match genapi_files::is_taken(path) {
        true => genapi_files::read_private(path, limit).map(Some),
        false => Ok(None),
    });
    match read {
        Err(refused) if is_folder_refusal(&refused) => {
            say_unusable(file, &refused, Use::Reading);
            Ok(None)
        }
        read => read,
    }
}

/// Why the command's cache folder, when `path` is in it, may not hold a
/// file of its own: a file in a folder of its own (a task's secrets) is
/// kept only while the cache folder above is no one else's to change
/// either, as whoever may change it may move that folder away, or put one
/// of theirs in its place. The file's own folder is judged where it is
/// written and read.
fn cache_folder_refused(path: &Path) -> Option<genapi_files::FileError> {
    let cache = dir()?;
    let below = path
        .parent()
        .is_some_and(|folder| folder != cache && folder.starts_with(&cache));
    below.then(|| genapi_files::may_write_private(&cache.join(HISTORY.name)).err())?
}

/// Whether `refused` is the system refusing the user a folder or file of
/// the cache (one made by a command run as root, a file where a folder was
/// to be made, a file system mounted read-only): theirs to fix, and so
/// said.
fn is_unmakeable(refused: &genapi_files::FileError) -> bool {
    use std::io::ErrorKind;
    matches!(
        refused,
        genapi_files::FileError::Io { source, .. }
            if matches!(
                source.kind(),
                ErrorKind::PermissionDenied | ErrorKind::NotADirectory | ErrorKind::ReadOnlyFilesystem
            )
    )
}

/// Why the folder of `path`, a file of the cache, cannot be made when it is
/// not there: the nearest folder above that is there is not a folder, or
/// the user may not make one in it. `None` when the folder is there (the
/// file policy judges it), or may be made.
pub fn cannot_be_made(path: &Path) -> Option<genapi_files::FileError> {
    let folder = path.parent()?;
    let refused = |source: std::io::Error| {
        Some(genapi_files::FileError::Io {
            path: folder.to_path_buf(),
            source,
        })
    };
    let not_a_folder = || refused(std::io::Error::from(std::io::ErrorKind::NotADirectory));
    match std::fs::metadata(folder) {
        Ok(metadata) if metadata.is_dir() => return None,
        // A file, a pipe or a device where the folder goes.
        Ok(_) => return not_a_folder(),
        // A link to nothing: the file policy judges it.
        Err(_) if std::fs::symlink_metadata(folder).is_ok() => return None,
        Err(_) => {}
    }
    let above = existing(folder);
    if !std::fs::metadata(above).is_ok_and(|metadata| metadata.is_dir()) {
        return not_a_folder();
    }
    #[cfg(unix)]
    {
        use rustix::fs::Access;
        // EACCES, or EROFS on a file system mounted read-only.
        if let Err(errno) = rustix::fs::access(above, Access::WRITE_OK | Access::EXEC_OK) {
            return refused(errno.into());
        }
    }
    None
}

/// What the command was doing with a file of the cache when the file
/// policy refused it: the warning says which, as `genapi tasks` only reads
/// the history that `generate` keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Use {
    /// Writing it.
    Keeping,
    /// Reading it back.
    Reading,
}

/// Says, once a run for each file, that `file` is not kept (or not read)
/// because the file policy refused it or its folder, what that costs, and
/// what to run. A second file refused for its folder in the same run gets
/// one short line: the folder and its fix were said with the first (the
/// same folder: every file of the cache is in it, or in a folder of it).
fn say_unusable(file: &CacheFile, refused: &genapi_files::FileError, doing: Use) {
    /// What this run has said.
    struct Said {
        /// The files said not kept or read.
        files: Vec<&'static str>,
        /// Whether a folder's refusal was said, with its fix.
        folder: bool,
    }
    static SAID: Mutex<Said> = Mutex::new(Said {
        files: Vec::new(),
        folder: false,
    });
    let Ok(mut said) = SAID.lock() else { return };
    if said.files.contains(&file.name) {
        return;
    }
    said.files.push(file.name);
    // A folder refused, or one the system refuses the user, is the cache
    // folder's cause, not the file's: its reason is said once.
    let folder_caused = is_folder_refusal(refused) || is_unmakeable(refused);
    let warning = match folder_caused && said.folder {
        true => not_kept_either(file, doing),
        false => not_kept(file, refused, doing),
    };
    said.folder |= folder_caused;
    crate::out::err(&warning);
}

/// Whether `refused` is the file policy refusing a private file's folder.
fn is_folder_refusal(refused: &genapi_files::FileError) -> bool {
    matches!(
        refused,
        genapi_files::FileError::OpenFolder { .. } | genapi_files::FileError::ForeignFolder { .. }
    )
}

/// The warning that `file` is not kept (or not read), because of
/// `refused`: what it costs, and what to run.
fn not_kept(file: &CacheFile, refused: &genapi_files::FileError, doing: Use) -> String {
    let why = match refused {
        genapi_files::FileError::Io { path, source } if is_unmakeable(refused) => denied(path, source),
        genapi_files::FileError::ForeignFolder { path, owner: None } if dir().as_deref() == Some(path.as_path()) => {
            linked(refused, path)
        }
        _ => crate::files::said(refused),
    };
    format!(
        "warning: {} {} in the cache, so {}: {why}",
        verb(doing),
        file.name,
        file.unkept_costs()
    )
}

/// What to do when the cache folder cannot be used as it is.
const OWN_FOLDER: &str = "set XDG_CACHE_HOME to a folder of your own";

/// The cache folder is a link (`refused`): the file policy's words, and how
/// to keep the cache where the link leads, when it leads to a folder of the
/// cache's name that the policy takes (`XDG_CACHE_HOME` names the folder
/// above it); else, how to name another.
fn linked(refused: &genapi_files::FileError, path: &Path) -> String {
    let said = crate::files::said(refused);
    // Judged as the folder a file of the cache would be written in.
    let kept_there = std::fs::canonicalize(path).ok().filter(|target| {
        target.file_name() == path.file_name() && genapi_files::may_write_private(&target.join(HISTORY.name)).is_ok()
    });
    match kept_there.as_deref().and_then(Path::parent) {
        Some(above) => format!(
            "{said}; or keep it where the link leads: set XDG_CACHE_HOME={}",
            crate::out::shell_quote(&above.display().to_string())
        ),
        None => format!("{said}, or {OWN_FOLDER}"),
    }
}

/// Why the system refused the user `path` of the cache (`source`), and
/// what to do: said of the folder that refused, the nearest one that is
/// there. Giving a folder back (`sudo chown`) is offered only for one of
/// another user's below the user's home folder (a `~/.cache` a command run
/// with sudo made), never for a folder of the system (`/`, `/var/lib`) or
/// the home folder itself.
fn denied(path: &Path, source: &std::io::Error) -> String {
    let folder = existing(path);
    let shown = crate::out::shell_quote(&folder.display().to_string());
    let own = OWN_FOLDER;
    if !std::fs::metadata(folder).is_ok_and(|metadata| metadata.is_dir()) {
        return format!("{shown}: not a folder, where the cache's folder was to be: move it away, or {own}");
    }
    if source.kind() == std::io::ErrorKind::ReadOnlyFilesystem {
        return format!("{shown}: on a file system mounted read-only ({source}): {own}");
    }
    match owner(folder) {
        Some(owner) if owner == user() => {
            format!("{shown}: you may not write in this folder of yours ({source}): chmod u+rwx {shown}, or {own}")
        }
        Some(owner) => {
            let give_back = match below_home(folder) {
                Some(folder) => {
                    let folder = crate::out::shell_quote(&folder.display().to_string());
                    format!("make it yours again (sudo chown -R \"$(id -un)\" {folder}), or ")
                }
                None => String::new(),
            };
            format!(
                "{shown}: you may not write in this folder of another user's (uid {owner}; {source}): {give_back}{own}"
            )
        }
        None => format!("{shown}: you may not write there ({source}): {own}"),
    }
}

/// `folder` as the system finds it (links and `..` resolved), when that is
/// strictly below the user's home folder (found the same way), and the
/// home folder is not the root of the file system: the only folder a
/// command giving it back is offered for.
fn below_home(folder: &Path) -> Option<PathBuf> {
    strictly_below(folder, &dirs::home_dir()?)
}

/// `folder` resolved, when it is strictly below `home` resolved, and
/// `home` is not the root ([`below_home`]).
fn strictly_below(folder: &Path, home: &Path) -> Option<PathBuf> {
    let home = std::fs::canonicalize(home).ok()?;
    let folder = std::fs::canonicalize(folder).ok()?;
    (home.parent().is_some() && folder != home && folder.starts_with(&home)).then_some(folder)
}

/// `path`, or the nearest folder above it that is there: the one the
/// system refused the user, when `path` could not be made.
fn existing(path: &Path) -> &Path {
    path.ancestors()
        // A relative path's last folder is the one it is relative to.
        .map(|folder| match folder.as_os_str().is_empty() {
            true => Path::new("."),
            false => folder,
        })
        .find(|folder| std::fs::symlink_metadata(folder).is_ok())
        .unwrap_or(path)
}

/// Who owns `path` (what a link at it leads to), where the system says.
fn owner(path: &Path) -> Option<u32> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        std::fs::metadata(path).ok().map(|metadata| metadata.uid())
    }
    #[cfg(not(unix))]
    {
        let _ = path;
        None
    }
}

/// The user running the command.
fn user() -> u32 {
    #[cfg(unix)]
    {
        rustix::process::geteuid().as_raw()
    }
    #[cfg(not(unix))]
    {
        0
    }
}

/// The warning that `file` is not kept (or read) either, its folder
/// refused as was said just before.
fn not_kept_either(file: &CacheFile, doing: Use) -> String {
    format!(
        "warning: {} {} in the cache either, so {}",
        verb(doing),
        file.name,
        file.unkept_costs()
    )
}

/// What the command is not doing with a file, in a warning.
fn verb(doing: Use) -> &'static str {
    match doing {
        Use::Keeping => "not keeping",
        Use::Reading => "not reading",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cache folder that is a link is kept where it leads only when that
    /// is a folder of the cache's name the file policy takes: then the
    /// setting that names it is said.
    #[cfg(unix)]
    #[test]
    fn a_linked_cache_folder_is_offered_where_it_leads_when_that_may_hold_it() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = std::env::temp_dir().join(format!("genapi-cache-linked-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let (real, other) = (dir.join("disk").join("genapi"), dir.join("disk").join("elsewhere"));
        for folder in [&real, &other] {
            std::fs::create_dir_all(folder).unwrap();
            std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let link = dir.join("genapi");
        std::os::unix::fs::symlink(&real, &link).unwrap();
        let refused = genapi_files::may_write_private(&link.join("history.jsonl")).unwrap_err();
        assert!(matches!(
            refused,
            genapi_files::FileError::ForeignFolder { owner: None, .. }
        ));
        let above = std::fs::canonicalize(dir.join("disk")).unwrap();
        let said = linked(&refused, &link);
        assert!(
            said.ends_with(&format!(
                "keep it where the link leads: set XDG_CACHE_HOME={}",
                above.display()
            )),
            "{said}"
        );
        // Open to others there: the policy would refuse it too.
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o777)).unwrap();
        let said = linked(&refused, &link);
        assert!(
            said.ends_with("or set XDG_CACHE_HOME to a folder of your own"),
            "{said}"
        );
        // Another name: XDG_CACHE_HOME cannot name it.
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(&other, &link).unwrap();
        let said = linked(&refused, &link);
        assert!(
            said.ends_with("or set XDG_CACHE_HOME to a folder of your own"),
            "{said}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    /// A folder the system refuses is said as the user's own (its mode to
    /// fix) or another user's, of the nearest folder that is there; giving
    /// one back is never offered outside the user's home folder.
    #[cfg(unix)]
    #[test]
    fn a_refused_folder_is_said_by_whose_it_is() {
        let denied_here = |path: &Path| denied(path, &std::io::Error::from(std::io::ErrorKind::PermissionDenied));
        let dir = std::env::temp_dir().join(format!("genapi-cache-denied-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let said = denied_here(&dir.join("genapi/tasks"));
        assert!(
            said.starts_with(&format!("{}: you may not write in this folder of yours", dir.display()))
                && said.contains(&format!("chmod u+rwx {}", dir.display())),
            "{said}"
        );
        if user() == 0 {
            std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
            let said = denied_here(&dir.join("genapi"));
            assert!(said.contains("of another user's (uid 65534;"), "{said}");
            let below_home = dirs::home_dir().is_some_and(|home| dir.starts_with(home));
            assert!(
                below_home || !said.contains("chown"),
                "not below the home folder: {said}"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A folder that is not there is judged by the nearest one that is; a
    /// file or a pipe where a folder goes is no folder, said at once.
    #[cfg(unix)]
    #[test]
    fn a_folder_that_cannot_be_made_is_known_before_anything_is_read() {
        use std::io::ErrorKind;
        let kind = |path: &Path| match cannot_be_made(path) {
            Some(genapi_files::FileError::Io { source, .. }) => Some(source.kind()),
            _ => None,
        };
        let dir = std::env::temp_dir().join(format!("genapi-cache-unmade-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(kind(&dir.join("genapi/history.jsonl")), None, "may be made");
        assert_eq!(
            kind(&dir.join("a/b/genapi/history.jsonl")),
            None,
            "may be made, folders and all"
        );
        std::fs::write(dir.join("file"), "").unwrap();
        assert_eq!(
            kind(&dir.join("file/genapi/history.jsonl")),
            Some(ErrorKind::NotADirectory)
        );
        assert_eq!(kind(&dir.join("file/history.jsonl")), Some(ErrorKind::NotADirectory));
        let pipe = dir.join("pipe");
        let made = std::process::Command::new("mkfifo").arg(&pipe).status();
        if made.is_ok_and(|status| status.success()) {
            assert_eq!(kind(&pipe.join("history.jsonl")), Some(ErrorKind::NotADirectory));
            let said = denied(&pipe, &std::io::Error::from(ErrorKind::NotADirectory));
            assert!(
                said.contains("not a folder, where the cache's folder was to be"),
                "{said}"
            );
        }
        // Relative, with nothing of it there: made where the command runs.
        assert_eq!(existing(Path::new("no-such-folder/.cache/genapi")), Path::new("."));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// Giving a folder back is offered only for one strictly below the
    /// home folder as the system finds both: never the home folder, the
    /// root, or a folder a `..` or a link leads out to.
    #[cfg(unix)]
    #[test]
    fn only_a_folder_below_the_home_folder_may_be_given_back() {
        let dir = std::env::temp_dir().join(format!("genapi-cache-below-{}", std::process::id()));
        let home = dir.join("home");
        std::fs::create_dir_all(home.join(".cache")).unwrap();
        std::fs::create_dir_all(dir.join("etc")).unwrap();
        std::os::unix::fs::symlink(dir.join("etc"), home.join("out")).unwrap();
        let resolved = std::fs::canonicalize(home.join(".cache")).unwrap();
        assert_eq!(strictly_below(&home.join(".cache"), &home), Some(resolved.clone()));
        assert_eq!(strictly_below(&home.join("./.cache/"), &home.join(".")), Some(resolved));
        for outside in [
            home.clone(),
            home.join(".."),
            home.join(".cache/../../etc"),
            home.join("out"),
        ] {
            assert_eq!(strictly_below(&outside, &home), None, "{}", outside.display());
        }
        assert_eq!(
            strictly_below(&dir.join("etc"), Path::new("/")),
            None,
            "the root is no home"
        );
        assert_eq!(strictly_below(&home.join("missing"), &home), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// The README's section on what the command keeps names every file of
    /// the cache folder, so the list and the prose cannot drift apart.
    #[test]
    fn the_readme_names_every_cache_file() {
        let readme = include_str!("../../../README.md");
        let section = readme
            .split("## What the command keeps")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("the README has a section on what the command keeps");
        for file in FILES {
            assert!(
                section.contains(&format!("`{}", file.name)),
                "{} is not in the README",
                file.name
            );
        }
    }
}
