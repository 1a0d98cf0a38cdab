//! `--open`: a saved image, or a batch's gallery, shown by the desktop's
//! own opener, the program a file manager opens a file with.
//!
//! Opening is a convenience after the work is done: the file is saved
//! whether or not it can be opened, so a missing or failing opener is said
//! on stderr and never changes the exit code.

use std::ffi::OsString;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::out;

/// The variable naming the program that opens files instead of the
/// desktop's (it is run with the file as its one argument, and waited for).
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

/// Opens `file` with the opener and waits for it (the desktop's openers
/// return once the viewer is started); says on stderr when it cannot.
pub fn open(file: &Path) {
    let (program, leading) = opener();
    let shown_program = out::clean(&program.to_string_lossy());
    let shown_file = out::clean(&file.display().to_string());
    let run = Command::new(&program)
        .args(leading)
        .arg(file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    match run {
        Ok(status) if status.success() => {}
        Ok(status) => out::err(&format!(
            "warning: --open: {shown_program} could not open {shown_file} ({status}); the file is saved"
        )),
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
