//! What the command says of the lines as they end: each failure once,
//! however many lines it reaches, with the flags that recover from it.
//!
//! The library says how to recover in its own terms; a command user is told
//! the flags (`--adopt`, `--resubmit-unknown`). A credit cap or a refusal
//! reaches many lines with the same words, so a message is said for its
//! first line and the others are named with it at the end.

use std::collections::HashMap;

use genapi::FailureClass;
use genapi_batch::{JobOutcome, Standing};

use super::standing;
use crate::out;
use crate::progress::Progress;

/// The library says how to recover in its own terms; a command user gets
/// the flags that do it.
pub(super) fn with_flags(mut outcome: JobOutcome) -> JobOutcome {
    let line = outcome.line;
    let flags = match (outcome.standing, outcome.class, &outcome.task) {
        // A record that cannot be read is never sent again: adoption only.
        (Standing::Unanswered, Some(FailureClass::Write), _) => format!("--adopt {line}=TASK_ID"),
        (Standing::Unanswered, _, _) => format!("--adopt {line}=TASK_ID, or --resubmit-unknown"),
        // Sent again only when asked, once the cause is fixed.
        (Standing::Refused, _, _) => "--retry-refused, once the cause is fixed".to_string(),
        // An adopted task that turned out to be another line's.
        (Standing::Accepted, Some(FailureClass::Validation), Some(_)) => format!("--adopt {line}=TASK_ID"),
        // A saved result whose paid task could not be recorded: a later
        // run would not know the task.
        (Standing::Saved, Some(FailureClass::Write), Some(task)) => {
            format!("--adopt {line}={}", out::clean(&task.id))
        }
        _ => return outcome,
    };
    if let Some(error) = &mut outcome.error {
        error.push_str(&format!(" (genapi batch: {flags})"));
    }
    outcome
}

/// Failures said as they happen (a saved result with a problem too), each
/// message once: a line whose report would repeat an earlier line's is
/// named with it at the end (a credit cap or a refusal reaches many lines
/// with the same words).
#[derive(Default)]
pub(super) struct Reports {
    /// Each message said, with the line it was said of and the lines it
    /// was not repeated for.
    said: HashMap<String, (u64, Vec<u64>)>,
    /// The messages in the order they were said.
    order: Vec<String>,
}

impl Reports {
    pub(super) fn say(&mut self, outcome: &JobOutcome, progress: &Progress) {
        if outcome.from_journal {
            return;
        }
        // Lines sent without an answer are many at once when the network
        // goes: the summary names them together, with what to do, once.
        if outcome.standing == Standing::Unanswered {
            return;
        }
        let worth_saying = outcome.standing != Standing::Saved || outcome.class.is_some();
        let (Some(error), true) = (&outcome.error, worth_saying) else {
            return;
        };
        let status = status_words(outcome);
        let error = out::clean(error);
        let error = error.strip_prefix(&format!("{status}: ")).unwrap_or(&error);
        let message = format!("{status}: {error}");
        if let Some((_, repeats)) = self.said.get_mut(&message) {
            repeats.push(outcome.line);
            return;
        }
        let task = outcome
            .task
            .as_ref()
            .map(|t| format!(" (task {})", out::clean(&t.id)))
            .unwrap_or_default();
        progress.println(&format!("line {} {}{task}: {message}", outcome.line, outcome.name));
        self.said.insert(message.clone(), (outcome.line, Vec::new()));
        self.order.push(message);
    }

    /// Names the lines whose report was the same as an earlier line's.
    pub(super) fn close(&mut self) {
        for message in &self.order {
            if let Some((first, repeats)) = self.said.get_mut(message) {
                if !repeats.is_empty() {
                    repeats.sort_unstable();
                    out::err(&format!("{}: the same as line {first}", standing::counted(repeats)));
                }
            }
        }
    }
}

/// What a line came to, as the command says it as it happens: where it
/// stands, with the class of an ending (`moderated`) where it has one.
fn status_words(outcome: &JobOutcome) -> String {
    match (outcome.standing, outcome.class) {
        (Standing::Ended, Some(class)) => format!("ended ({})", class.in_words()),
        (standing, _) => standing.as_str().to_string(),
    }
}
