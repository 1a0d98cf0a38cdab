//! `--open`: a saved image, or a batch's gallery, shown by the desktop's
//! own opener, the program a file manager opens a file with.
//!
//! Opening is a convenience after the work is done: the file is saved
//! whether or not it can be opened, so a missing or failing opener is said
//! on stderr and never changes the exit code. Nor does the command wait
//! for it: a viewer that stays in front (rather than handing the file to
//! one already running) holds neither a batch nor the command's end. The
//! opener is the desktop's, or the user's choice, and needs no key: it is
//! handed only the variables a desktop program needs to find the screen,
//! the session and the user's settings ([`DESKTOP_VARIABLES`]), never the
//! rest of the environment. A list of what to keep, not of what to drop:
//! a secret can sit under any name and in any spelling (`DB_PASS`,
//! `CREDENTIALS`, a cookie, a base64 key), and no list of such names is
//! ever whole. Even a kept variable is dropped when its value holds the
//! run's key or an address with a password.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::config::Settings;
use crate::out;

/// The variable naming the program that opens files instead of the
/// desktop's (it is run with the file as its one argument, and not waited
/// for).
pub const VARIABLE: &str = "GENAPI_OPENER";

/// The program that opens a file, and the arguments it takes before the
/// file: [`VARIABLE`] if set, else the desktop's.
fn opener() -> (OsString, Vec<&'static str>) {
    if let Some(named) = std::env::var_os(VARIABLE).filter(|value| !value.is_empty()) {
        return (named, Vec::new());
    }
    if cfg!(target_os = "macos") {
        ("open".into(), Vec::new())
    } else if cfg!(windows) {
        // `start` is a builtin of cmd; its first quoted argument is a
        // window title, so an empty one comes before the file.
        ("cmd".into(), vec!["/c", "start", ""])
    } else {
        ("xdg-open".into(), Vec::new())
    }
}

/// The desktop's opener as this run starts it: what it withholds from it
/// beside the variables that may hold a secret.
#[derive(Clone, Debug)]
pub struct Opener {
    /// The variable the chosen profile's `key_env` names.
    key_variable: Option<String>,
    /// The key the run uses, wherever it came from: a variable holding it
    /// under any name is withheld too.
    key: Option<crate::config::Key>,
}

impl Opener {
    /// The opener for a run with `settings`: it is never handed the
    /// variable holding the profile's key.
    pub fn of(settings: &Settings) -> Opener {
        Opener {
            key_variable: settings.key_variable.clone(),
            key: settings.key.as_ref().map(|key| key.value.clone()),
        }
    }

    /// Whether the opener is not handed the variable `name` set to `value`.
    fn withholds(&self, name: &str, value: &str) -> bool {
        !is_a_desktop_variable(name)
            || crate::config::may_hold_a_secret(name, value)
            || holds_a_credential(value)
            || self
                .key_variable
                .as_deref()
                .is_some_and(|key| key.eq_ignore_ascii_case(name))
            || self.key.as_ref().is_some_and(|key| key.is_in(value))
    }

    /// Starts the opener on `file`, without the secrets of the
    /// environment; says on stderr when it cannot be started, or (while
    /// the command still runs) when it fails.
    pub fn open(&self, file: &Path) {
        open(file, |name, value| self.withholds(name, value));
    }
}

/// The variables a desktop's opener needs, by name (compared without
/// case, as Windows does): where programs are, who and where the user is,
/// the screen and session to show the file on, the language.
const DESKTOP_VARIABLES: [&str; 27] = [
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "PWD",
    "TMPDIR",
    "LANG",
    "LANGUAGE",
    "DISPLAY",
    "WAYLAND_DISPLAY",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "DESKTOP_SESSION",
    "BROWSER",
    "KDE_FULL_SESSION",
    "KDE_SESSION_VERSION",
    "GNOME_DESKTOP_SESSION_ID",
    // Windows: `cmd /c start` finds programs and file types with these.
    "SYSTEMROOT",
    "WINDIR",
    "COMSPEC",
    "PATHEXT",
    "USERPROFILE",
    "APPDATA",
    "LOCALAPPDATA",
    "TEMP",
];

/// Families of desktop variables, by the start of their name: the XDG
/// folders and session (`XDG_RUNTIME_DIR`, `XDG_CURRENT_DESKTOP`) and the
/// locale's parts (`LC_ALL`).
const DESKTOP_FAMILIES: [&str; 2] = ["XDG_", "LC_"];

/// Whether `name` is one of [`DESKTOP_VARIABLES`] or of their families.
fn is_a_desktop_variable(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    DESKTOP_VARIABLES.contains(&upper.as_str()) || DESKTOP_FAMILIES.iter().any(|start| upper.starts_with(start))
}

/// Whether a value holds what credentials are written as: a token in an
/// address's query, an `Authorization` header's value. No desktop variable
/// holds one.
fn holds_a_credential(value: &str) -> bool {
    let lower = value.to_ascii_lowercase();
    ["token=", "bearer ", "basic ", "key=", "secret=", "sig="]
        .iter()
        .any(|mark| lower.contains(mark))
}

/// Starts the opener on `file`, without the variables `withheld` names.
fn open(file: &Path, withheld: impl Fn(&str, &str) -> bool) {
    let (program, leading) = opener();
    let shown_program = out::clean(&program.to_string_lossy());
    let shown_file = out::clean(&file.display().to_string());
    let mut command = Command::new(&program);
    command
        .args(leading)
        .arg(not_an_option(file))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (name, value) in std::env::vars_os() {
        if withheld(&name.to_string_lossy(), &value.to_string_lossy()) {
            command.env_remove(name);
        }
    }
    match command.spawn() {
        Ok(child) => reap(child, shown_program, shown_file),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => out::err(&format!(
            "warning: --open: no opener: {shown_program} is not installed (set {VARIABLE} to a program that \
             opens a file); {shown_file} is saved"
        )),
        Err(error) => out::err(&format!(
            "warning: --open: cannot run {shown_program} ({}); {shown_file} is saved",
            out::clean(&error.to_string())
        )),
    }
}

/// `file` as an argument no opener takes for an option: a relative path
/// that starts with `-` (an output named `-x.jpg`) gets `./` before it.
fn not_an_option(file: &Path) -> std::path::PathBuf {
    if file.as_os_str().to_string_lossy().starts_with('-') {
        Path::new(".").join(file)
    } else {
        file.to_path_buf()
    }
}

/// Waits for the opener on a thread of its own, so it is reaped when it
/// ends without the command waiting for it (an opener still running when
/// the command ends is left running).
fn reap(mut opener: Child, shown_program: String, shown_file: String) {
    let waiting = std::thread::Builder::new()
        .name("opener".into())
        .spawn(move || match opener.wait() {
            Ok(status) if status.success() => {}
            Ok(status) => out::err(&format!(
                "warning: --open: {shown_program} could not open {shown_file} ({status}); the file is saved"
            )),
            Err(_) => {}
        });
    if let Err(error) = waiting {
        tracing::debug!(%error, "the opener is not waited for");
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::{is_a_desktop_variable, not_an_option};

    #[test]
    fn only_the_desktops_variables_are_handed_over() {
        for kept in [
            "PATH",
            "HOME",
            "DISPLAY",
            "XDG_RUNTIME_DIR",
            "LC_ALL",
            "Path",
            "SystemRoot",
        ] {
            assert!(is_a_desktop_variable(kept), "{kept}");
        }
        for dropped in [
            "GENAPI_API_KEY",
            "AWS_ACCESS_KEY_ID",
            "CREDENTIALS",
            "SESSION_COOKIE",
            "PASSPHRASE",
            "HTTP_AUTHORIZATION",
            "GENAPI_BASE_URL",
            "PATH_EXTRA",
            "XDG",
        ] {
            assert!(!is_a_desktop_variable(dropped), "{dropped}");
        }
    }

    #[test]
    fn a_file_named_like_an_option_is_handed_over_as_a_path() {
        assert_eq!(not_an_option(Path::new("-rf.jpg")), PathBuf::from("./-rf.jpg"));
        assert_eq!(not_an_option(Path::new("--help")), PathBuf::from("./--help"));
        assert_eq!(not_an_option(Path::new("shots/-x.jpg")), PathBuf::from("shots/-x.jpg"));
        assert_eq!(not_an_option(Path::new("/tmp/-x.jpg")), PathBuf::from("/tmp/-x.jpg"));
    }
}
