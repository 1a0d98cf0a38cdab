//! Exit codes: the one list.
//!
//! A failure's code is its class's ([`genapi::FailureClass::exit_code`]), so
//! a program wrapping the library exits as the command does. The command
//! adds three of its own: 0 for success, 10 when a command that prints
//! tasks could not write its stdout, 130 for an interrupt (a command that
//! prints no task and could not write its stdout exits 1). A batch exits
//! with the code of the most serious class among its lines
//! ([`genapi::FailureClass::BY_SEVERITY`]). The table of `--help` is made
//! here from these lists, and a test holds the table of docs/command.md to them.

use genapi::FailureClass;

/// Anything else.
pub const OTHER: u8 = FailureClass::Other.exit_code();
/// Usage or validation.
pub const USAGE: u8 = FailureClass::Validation.exit_code();
/// Timeout.
pub const TIMEOUT: u8 = FailureClass::Timeout.exit_code();
/// Network or service.
pub const NETWORK: u8 = FailureClass::Network.exit_code();
/// A line meant for stdout of a command that prints tasks (`generate`,
/// `submit`, `wait`, `get`, `batch`) could not be written: a task may have
/// been accepted that the reader of stdout does not know of.
pub const ID_NOT_WRITTEN: u8 = 10;
/// Ctrl-C (or SIGTERM).
pub const INTERRUPTED: u8 = 130;

/// Every exit code with its meaning, in order: the command's own and the
/// library's classes (classes that share a code share its line).
pub fn table() -> Vec<(u8, String)> {
    let mut rows: Vec<(u8, String)> = vec![
        (0, "success".into()),
        (
            ID_NOT_WRITTEN,
            "stdout of generate, submit, wait, get or batch could not be written, so a task accepted may be \
             unknown to its reader (it is named on stderr)"
                .into(),
        ),
        (INTERRUPTED, "interrupted (resume with the command printed)".into()),
    ];
    for class in FailureClass::ALL {
        match rows.iter_mut().find(|(code, _)| *code == class.exit_code()) {
            Some((_, meaning)) => {
                meaning.push_str("; ");
                meaning.push_str(class.meaning());
            }
            None => rows.push((class.exit_code(), class.meaning().to_string())),
        }
    }
    rows.sort_by_key(|(code, _)| *code);
    rows
}

/// The codes a batch may exit with, from the most serious to the least.
pub fn batch_order() -> Vec<u8> {
    let mut order: Vec<u8> = Vec::new();
    for class in FailureClass::BY_SEVERITY {
        if !order.contains(&class.exit_code()) {
            order.push(class.exit_code());
        }
    }
    order
}

/// The "Exit codes" section of `--help`.
pub fn help_section() -> String {
    let mut text = String::from("Exit codes:\n");
    for (code, meaning) in table() {
        text.push_str(&format!("  {code:<3} {meaning}\n"));
    }
    let order: Vec<String> = batch_order().iter().map(u8::to_string).collect();
    text.push_str(&format!(
        "  batch: 0 when every line succeeded, else the code of the most serious failure\n  ({} in that order); \
         10 first when stdout could not be written",
        order.join(", ")
    ));
    text
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_batch_order_holds_every_failure_code_once() {
        let mut codes: Vec<u8> = super::table().into_iter().map(|(code, _)| code).collect();
        codes.retain(|code| ![0, super::ID_NOT_WRITTEN, super::INTERRUPTED].contains(code));
        let mut order = super::batch_order();
        order.sort_unstable();
        assert_eq!(order, codes);
    }
}
