//! The key `genapi login` is given: typed at a terminal, which does not
//! show it, or read from standard input (one line) when that is a pipe or
//! a file, so a script or a secret manager can hand it over. The key is
//! never shown, logged or put in an error.

use std::io::{BufRead, IsTerminal, Read};

use crate::{out, Failure};
use genapi::profiles::KEY_FILE_LIMIT as KEY_LIMIT;

/// The key, from the terminal (asked for as `prompt`, without echo) or
/// from standard input; trimmed, and refused when empty or not one word of
/// visible characters.
pub fn read_key(prompt: &str) -> Result<String, Failure> {
    let stdin = std::io::stdin();
    let line = if stdin.is_terminal() {
        out::err_raw(prompt);
        let typed = without_echo(|| read_line(&mut stdin.lock()));
        // The Enter typed was not echoed either.
        out::err("");
        typed
    } else {
        read_line(&mut stdin.lock())
    }
    .map_err(|e| Failure::usage(format!("cannot read the key from standard input: {e}")))?;
    let key = line.trim();
    if key.is_empty() {
        return Err(Failure::usage(
            "no key given: type it when asked, or pipe it in (`genapi login < key.txt`)",
        ));
    }
    if key.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(Failure::usage(
            "what was given is not one key (it has spaces or control characters); it is not saved",
        ));
    }
    Ok(key.to_string())
}

/// The first line of `input`, read within [`KEY_LIMIT`].
fn read_line(input: &mut impl BufRead) -> std::io::Result<String> {
    let mut line = String::new();
    input.take(KEY_LIMIT + 1).read_line(&mut line)?;
    if line.len() as u64 > KEY_LIMIT {
        return Err(std::io::Error::other(format!(
            "the first line is longer than {KEY_LIMIT} bytes, more than any key"
        )));
    }
    Ok(line)
}

/// Runs `read` with the terminal's echo off, put back as it was after; a
/// terminal whose echo cannot be turned off is not read from at all.
#[cfg(unix)]
fn without_echo(read: impl FnOnce() -> std::io::Result<String>) -> std::io::Result<String> {
    use rustix::termios::{tcgetattr, tcsetattr, LocalModes, OptionalActions};
    let stdin = std::io::stdin();
    let cannot = |e: rustix::io::Errno| {
        std::io::Error::other(format!(
            "the terminal's echo cannot be turned off ({e}); pipe the key in instead"
        ))
    };
    let before = tcgetattr(&stdin).map_err(cannot)?;
    let mut quiet = before.clone();
    quiet.local_modes.remove(LocalModes::ECHO);
    // Ctrl-C at the prompt ends the command, and must not leave the
    // terminal without echo: the interrupt is taken here first.
    let restorer = restore_on_interrupt(before.clone());
    tcsetattr(&stdin, OptionalActions::Flush, &quiet).map_err(cannot)?;
    let typed = read();
    let _ = tcsetattr(&stdin, OptionalActions::Flush, &before);
    if let Some(restorer) = restorer {
        restorer.abort();
    }
    typed
}

/// A task that, on Ctrl-C, puts the terminal back as `before` and ends the
/// command as interrupted, nothing saved. The interrupt is listened for
/// before this returns, so none is missed while the key is typed. None
/// outside a runtime (the read is then interrupted as any program is).
#[cfg(unix)]
fn restore_on_interrupt(before: rustix::termios::Termios) -> Option<tokio::task::JoinHandle<()>> {
    use tokio::signal::unix::{signal, SignalKind};
    let handle = tokio::runtime::Handle::try_current().ok()?;
    let _entered = handle.enter();
    let mut interrupt = signal(SignalKind::interrupt()).ok()?;
    Some(handle.spawn(async move {
        if interrupt.recv().await.is_some() {
            let _ = rustix::termios::tcsetattr(std::io::stdin(), rustix::termios::OptionalActions::Flush, &before);
            out::err("");
            out::err("error: interrupted; nothing was saved");
            std::process::exit(i32::from(crate::code::INTERRUPTED));
        }
    }))
}

/// Elsewhere the platform's console is read as it is.
#[cfg(not(unix))]
fn without_echo(read: impl FnOnce() -> std::io::Result<String>) -> std::io::Result<String> {
    read()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_is_read_within_the_limit() {
        assert_eq!(read_line(&mut &b"sk-1\nmore\n"[..]).unwrap(), "sk-1\n");
        let long = vec![b'a'; KEY_LIMIT as usize + 10];
        assert!(read_line(&mut &long[..]).is_err());
    }
}
