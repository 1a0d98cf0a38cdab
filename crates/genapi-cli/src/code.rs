//! Exit codes: the one list.
//!
//! A failure's code is its class's ([`of`]: the library says what kind of
//! failure an error is, the command what number that kind exits with). The
//! command adds three of its own: 0 for success, 10 when a command that
//! prints tasks could not write its stdout, 130 for an interrupt (a command
//! that prints no task and could not write its stdout exits 1). A batch
//! exits with the code of the most serious class among its lines
//! ([`genapi::FailureClass::BY_SEVERITY`]). The table of `--help` is made
//! here from these lists, and a test holds the table of docs/command.md to
//! it.

use genapi::FailureClass;

/// The exit code of a failure of `class`: 2 validation, 3 auth, 4 credits,
/// 5 rate limited, 6 moderated, 7 task failed, 8 timeout, 9 network or
/// unknown, 11 a batch at (or past) its credit cap, 1 anything else.
pub const fn of(class: FailureClass) -> u8 {
    match class {
        FailureClass::Validation => 2,
        FailureClass::Auth => 3,
        FailureClass::Credits => 4,
        FailureClass::RateLimited => 5,
        FailureClass::Moderated => 6,
        FailureClass::TaskFailed => 7,
        FailureClass::Timeout => 8,
        FailureClass::Network | FailureClass::Unknown => 9,
        FailureClass::CreditCap => 11,
        // A class the library adds later is "another failure" until it is
        // given a code here (a test fails until it is).
        _ => 1,
    }
}

/// What a class means, in a line: the text of the exit-code tables of
/// `genapi --help`, the man page and the command's documentation.
pub const fn meaning(class: FailureClass) -> &'static str {
    match class {
        FailureClass::Validation => "usage or validation (fix the command or the request; nothing was charged)",
        FailureClass::Auth => "authentication (403, or a host the key may not go to)",
        FailureClass::Credits => "insufficient credits (402)",
        FailureClass::RateLimited => "rate limited (429: too many active tasks; try again later)",
        FailureClass::Moderated => "moderated (not charged)",
        FailureClass::TaskFailed => "task failed, not found, or its result expired",
        FailureClass::Timeout => "timeout (the task may still finish: resume with the command printed)",
        FailureClass::Network => "network or service error",
        FailureClass::Unknown => "a submission got no answer: it may have created a task",
        FailureClass::Write => "the result could not be written (the task is paid for: resume it)",
        FailureClass::CreditCap => "a batch stopped submitting at its spending cap, or was charged more than its cap",
        _ => "any other failure",
    }
}

/// Anything else.
pub const OTHER: u8 = of(FailureClass::Other);
/// Usage or validation.
pub const USAGE: u8 = of(FailureClass::Validation);
/// Timeout.
pub const TIMEOUT: u8 = of(FailureClass::Timeout);
/// Network or service.
pub const NETWORK: u8 = of(FailureClass::Network);
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
        match rows.iter_mut().find(|(code, _)| *code == of(class)) {
            Some((_, shared)) => {
                shared.push_str("; ");
                shared.push_str(meaning(class));
            }
            None => rows.push((of(class), meaning(class).to_string())),
        }
    }
    rows.sort_by_key(|(code, _)| *code);
    rows
}

/// The codes a batch may exit with, from the most serious to the least.
pub fn batch_order() -> Vec<u8> {
    let mut order: Vec<u8> = Vec::new();
    for class in FailureClass::BY_SEVERITY {
        if !order.contains(&of(class)) {
            order.push(of(class));
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
    text.push_str(&format!("  batch: {}", batch_rule()));
    text
}

/// The code a batch exits with.
pub fn batch_rule() -> String {
    let order: Vec<String> = batch_order().iter().map(u8::to_string).collect();
    format!(
        "0 when every line was saved, else the code of the most serious failure ({} in that order); 10 first when \
         stdout could not be written",
        order.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use genapi::FailureClass;

    #[test]
    fn every_class_has_its_own_code_and_meaning() {
        for class in FailureClass::ALL {
            let (code, meaning) = (super::of(class), super::meaning(class));
            if class != FailureClass::Other {
                assert_ne!(meaning, "any other failure", "{class:?} has no meaning of its own");
            }
            if !matches!(class, FailureClass::Other | FailureClass::Write) {
                assert_ne!(code, 1, "{class:?} has no code of its own");
            }
        }
        assert_eq!(
            super::of(FailureClass::Write),
            1,
            "a write failure is the disk's, not the service's"
        );
    }

    #[test]
    fn the_batch_order_holds_every_failure_code_once() {
        let mut codes: Vec<u8> = super::table().into_iter().map(|(code, _)| code).collect();
        codes.retain(|code| ![0, super::ID_NOT_WRITTEN, super::INTERRUPTED].contains(code));
        let mut order = super::batch_order();
        order.sort_unstable();
        assert_eq!(order, codes);
    }
}
