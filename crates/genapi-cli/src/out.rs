//! Everything the command prints, and the names it writes.
//!
//! Printing never panics: a closed stdout or stderr means nobody is
//! listening, so printing stops there and the work goes on. Text that comes
//! from the service is stripped of control characters before it is shown.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};

static STDOUT_OPEN: AtomicBool = AtomicBool::new(true);
/// Why stdout stopped taking lines, once it has.
static STDOUT_LOST: std::sync::Mutex<Option<std::io::Error>> = std::sync::Mutex::new(None);
/// Whether stdout carries an image's bytes (`-o -`), so lines go to stderr.
static STDOUT_CARRIES_BYTES: AtomicBool = AtomicBool::new(false);
static STDERR_OPEN: AtomicBool = AtomicBool::new(true);
static QUIET: AtomicBool = AtomicBool::new(false);

/// Silences progress lines (`--quiet`).
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

/// Whether progress lines are silenced.
pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// Whether stderr is a terminal (progress may then redraw one line).
pub fn stderr_is_terminal() -> bool {
    std::io::stderr().is_terminal()
}

/// One line on stdout; dropped once stdout is closed (the command then
/// ends with an error: see [`stdout_lost`]).
pub fn out(line: &str) {
    if !STDOUT_OPEN.load(Ordering::Relaxed) {
        return;
    }
    let _ = out_required(line);
}

/// One line on stdout that must arrive (a paid task's id): the error when it
/// could not be written, so the caller can say so and show it elsewhere.
pub fn out_required(line: &str) -> std::io::Result<()> {
    if STDOUT_CARRIES_BYTES.load(Ordering::Relaxed) {
        err(line);
        return Ok(());
    }
    let mut stdout = std::io::stdout().lock();
    let written = writeln!(stdout, "{line}").and_then(|()| stdout.flush());
    if let Err(error) = &written {
        STDOUT_OPEN.store(false, Ordering::Relaxed);
        if let Ok(mut lost) = STDOUT_LOST.lock() {
            lost.get_or_insert_with(|| std::io::Error::new(error.kind(), error.to_string()));
        }
    }
    written
}

/// Gives stdout to an image's bytes (`-o -`): from now on every line meant
/// for stdout is written to stderr, so the bytes arrive alone.
pub fn give_stdout_to_bytes() {
    STDOUT_CARRIES_BYTES.store(true, Ordering::Relaxed);
}

/// Copies an image's bytes to stdout (given to them by
/// [`give_stdout_to_bytes`]).
pub fn copy_bytes(bytes: &mut impl std::io::Read) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    std::io::copy(bytes, &mut stdout).and_then(|_| stdout.flush())
}

/// Why a line meant for stdout could not be written, if one could not: a
/// command whose output did not all arrive has not succeeded.
pub fn stdout_lost() -> Option<String> {
    STDOUT_LOST
        .lock()
        .ok()
        .and_then(|lost| lost.as_ref().map(ToString::to_string))
}

/// Whether stdout was closed by its reader (`genapi config | head`): the
/// reader has what it wanted, which is no failure for a command that prints
/// no task.
pub fn stdout_closed_by_reader() -> bool {
    STDOUT_LOST.lock().ok().is_some_and(|lost| {
        lost.as_ref()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// One line on stderr; dropped once stderr is closed.
pub fn err(line: &str) {
    err_raw(&format!("{line}\n"));
}

/// A progress line on stderr, unless `--quiet`.
pub fn progress(line: &str) {
    if !quiet() {
        err(line);
    }
}

/// Text on stderr as is (for a redrawn progress line).
pub fn err_raw(text: &str) {
    if !STDERR_OPEN.load(Ordering::Relaxed) {
        return;
    }
    let mut stderr = std::io::stderr().lock();
    if stderr.write_all(text.as_bytes()).and_then(|()| stderr.flush()).is_err() {
        STDERR_OPEN.store(false, Ordering::Relaxed);
    }
}

/// Service-supplied text made safe for a terminal: control characters
/// (escape sequences included) become spaces, except nothing else changes.
pub fn clean(text: &str) -> String {
    genapi_text::clean(text)
}

/// A file-name component from text the service chose (a task id): the
/// library's safe stem (ASCII letters, digits, `-` and `_`), at most `max`
/// characters, never empty.
pub fn safe_component(text: &str, max: usize) -> String {
    let cleaned: String = genapi_batch::safe_stem(text).chars().take(max).collect();
    if cleaned.is_empty() {
        "task".to_string()
    } else {
        cleaned
    }
}

/// A short, readable file stem from the prompt: lowercase words joined by `-`.
pub fn slug(text: &str, max: usize) -> String {
    let mut slug = String::new();
    for word in text.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty()) {
        let word = word.to_lowercase();
        let extra = if slug.is_empty() { 0 } else { 1 };
        if slug.chars().count() + extra + word.chars().count() > max {
            break;
        }
        if extra == 1 {
            slug.push('-');
        }
        slug.push_str(&word);
    }
    slug
}

/// A word quoted for a POSIX shell when it needs to be.
///
/// Printed for the user to copy, so what a terminal would act on (escapes
/// from service data, a profile name holding a line break) never reaches
/// it: a word holding such a character is written `$'…'`, each of them by
/// its bytes (`\x1b`), which bash, zsh and ksh read back as the same word.
/// A cleaned word would name another profile or file than the run used.
pub fn shell_quote(word: &str) -> String {
    if word.chars().any(genapi_text::is_unsafe_to_show) {
        return escaped_quote(word);
    }
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// An option and its value as a printed command gives them, quoted:
/// `NAME VALUE`, or `NAME=VALUE` for a value that begins with `-` (a
/// profile `-x`, a file `-a.png`), which would otherwise be read as an
/// option of its own.
///
/// ```text
/// --out a.png    --out='-a b.png'
/// ```
pub fn shell_option(name: &str, value: &str) -> String {
    let quoted = shell_quote(value);
    if value.starts_with('-') {
        format!("{name}={quoted}")
    } else {
        format!("{name} {quoted}")
    }
}

/// `word` as `$'…'`, with every character unsafe to show, `\` and `'`
/// escaped.
fn escaped_quote(word: &str) -> String {
    let mut quoted = String::from("$'");
    for c in word.chars() {
        match c {
            '\\' | '\'' => {
                quoted.push('\\');
                quoted.push(c);
            }
            c if genapi_text::is_unsafe_to_show(c) => {
                let mut bytes = [0u8; 4];
                for byte in c.encode_utf8(&mut bytes).bytes() {
                    quoted.push_str(&format!("\\x{byte:02x}"));
                }
            }
            c => quoted.push(c),
        }
    }
    quoted.push('\'');
    quoted
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_from_service_data_cannot_leave_the_directory() {
        for hostile in ["../x", "/abs/x.sh", "..", "a/../../b", "C:\\x", "", "\u{1b}[31m"] {
            let name = safe_component(hostile, 12);
            assert!(
                !name.contains('/') && !name.contains('\\') && !name.contains(".."),
                "{name}"
            );
            assert!(!name.is_empty() && name.len() <= 12);
            assert_eq!(std::path::Path::new(&name).components().count(), 1);
        }
        assert_eq!(safe_component(&"a".repeat(500), 12).len(), 12);
    }

    #[test]
    fn control_characters_are_stripped() {
        assert_eq!(clean("ok\u{1b}[2J\r\nbad\u{7}"), "ok [2J  bad ");
    }

    #[test]
    fn slugs_and_quotes() {
        assert_eq!(slug("A lighthouse, at dusk!", 40), "a-lighthouse-at-dusk");
        assert_eq!(slug("abcdef ghijkl", 8), "abcdef");
        assert_eq!(shell_quote("a b'c"), r"'a b'\''c'");
        assert_eq!(shell_quote("out/x.png"), "out/x.png");
        assert!(!shell_quote("\u{1b}]0;title\u{7}\u{1b}[2Jid").contains('\u{1b}'));
        assert_eq!(shell_quote("lab\neu's \\"), r"$'lab\x0aeu\'s \\'");
        assert_eq!(shell_quote("a\u{202e}b"), r"$'a\xe2\x80\xaeb'");
    }

    /// What a shell reads back from a quoted word is the word itself.
    #[test]
    fn a_quoted_word_is_read_back_as_itself_by_a_shell() {
        for word in [
            "plain",
            "a b'c",
            "lab\neu",
            "\u{1b}[31mred\\'x",
            "a\u{202e}b",
            "tab\there",
        ] {
            let script = format!("printf '%s' {}", shell_quote(word));
            let run = std::process::Command::new("bash")
                .args(["-c", &script])
                .output()
                .expect("bash");
            assert_eq!(String::from_utf8_lossy(&run.stdout), word, "{script}");
        }
    }
}
