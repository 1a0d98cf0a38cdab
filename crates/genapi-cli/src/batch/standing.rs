//! Where a batch's lines stand, said in the command's words: after a run
//! that stopped early, by `--status` for a journal folder, and when a run
//! finds tasks that lived in a built-in mock that is gone. Each sentence is
//! made from what the journal holds ([`genapi_batch::standings`]), so what
//! one run says about a line is what the next run does with it.

use std::collections::BTreeMap;
use std::path::Path;

use genapi_batch::{Asked, Standing};

use crate::out;

/// The lines of each standing, with the lines the journal does not know of
/// (the next run sends them) counted as [`Standing::Unsent`].
pub struct Lines {
    by_standing: BTreeMap<Standing, Vec<u64>>,
}

impl Lines {
    /// Groups `lines` (every valid line of the job file) by their standing.
    pub fn new(standings: &BTreeMap<u64, Standing>, lines: impl IntoIterator<Item = u64>) -> Lines {
        let mut by_standing: BTreeMap<Standing, Vec<u64>> = BTreeMap::new();
        for line in lines {
            let standing = standings.get(&line).copied().unwrap_or(Standing::Unsent);
            by_standing.entry(standing).or_default().push(line);
        }
        Lines { by_standing }
    }

    /// The lines in `standing`.
    pub fn of(&self, standing: Standing) -> &[u64] {
        self.by_standing.get(&standing).map_or(&[], Vec::as_slice)
    }

    /// Lines whose task lived in a built-in mock that ended.
    pub fn gone(&self) -> &[u64] {
        self.of(Standing::Gone)
    }

    /// Counts by standing, for `--status --json`.
    pub fn counts(&self) -> serde_json::Value {
        let mut counts = serde_json::Map::new();
        for standing in Standing::ALL {
            counts.insert(standing.as_str().into(), self.of(standing).len().into());
        }
        serde_json::Value::Object(counts)
    }

    /// One sentence per standing that has lines, each saying what the same
    /// command does with them next; a folder whose built-in mock is gone
    /// gets the one thing that can be done there.
    pub fn next_run(&self, out_dir: &Path, asked: Asked) -> Vec<String> {
        if !self.gone().is_empty() {
            return vec![gone_advice(self.gone(), out_dir, false)];
        }
        Standing::ALL
            .into_iter()
            .filter(|standing| !self.of(*standing).is_empty())
            .map(|standing| {
                let lines = self.of(standing);
                format!("{}: {}", counted(lines), next_run(standing, lines.len() == 1, asked))
            })
            .collect()
    }
}

/// What the same command (with the flags it was `asked`) does next with
/// lines that stand so, said of one line or of many: every place that
/// reports lines (a stopped run, `--status`, the summary) says this.
pub fn next_run(standing: Standing, one: bool, asked: Asked) -> &'static str {
    let (of_one, of_many) = match standing {
        Standing::Refused if asked.retry_refused => (
            "refused by the service with an answer that created no task (402: credits, 403: the key, 422: the job, \
             as results.jsonl says); the same command, with --retry-refused, sends it again",
            "refused by the service with an answer that created no task (402: credits, 403: the key, 422: the job, \
             as results.jsonl says); the same command, with --retry-refused, sends them again",
        ),
        Standing::Unanswered if asked.resubmit_unknown => (
            "sent, and no answer came back, so the service may have accepted (and charged) it; the same command, \
             with --resubmit-unknown, sends it again, which may pay for it twice (without that flag it is not sent; \
             nor when its journal record cannot be read)",
            "sent, and no answer came back, so the service may have accepted (and charged) them; the same command, \
             with --resubmit-unknown, sends them again, which may pay for them twice (without that flag they are not \
             sent; nor is one whose journal record cannot be read)",
        ),
        Standing::Saved => ("saved; not sent again", "saved; not sent again"),
        Standing::Ended => (
            "ended for good (failed, moderated or expired, as results.jsonl says); not sent again",
            "ended for good (failed, moderated or expired, as results.jsonl says); not sent again",
        ),
        Standing::Refused => (
            "refused by the service with an answer that created no task (402: credits, 403: the key, 422: the job, \
             as results.jsonl says); the same command does not send it again: fix the cause, then run it with \
             --retry-refused to send it",
            "refused by the service with an answer that created no task (402: credits, 403: the key, 422: the job, \
             as results.jsonl says); the same command does not send them again: fix the cause, then run it with \
             --retry-refused to send them",
        ),
        Standing::Accepted => (
            "accepted, not finished; the same command polls its task and saves the result (never submits it again)",
            "accepted, not finished; the same command polls their tasks and saves the results (never submits them \
             again)",
        ),
        Standing::Unanswered => (
            "sent, and no answer came back, so the service may have accepted (and charged) it; the same command \
             does not send it again: --adopt LINE=TASK_ID gives it the task you find (e.g. in the project's \
             activity records), --resubmit-unknown sends it again (risking paying twice) unless its journal record \
             cannot be read",
            "sent, and no answer came back, so the service may have accepted (and charged) them; the same command \
             does not send them again: --adopt LINE=TASK_ID gives a line the task you find (e.g. in the project's \
             activity records), --resubmit-unknown sends them again (risking paying twice), but not one whose \
             journal record cannot be read",
        ),
        Standing::Gone => (
            "its task lived in a built-in mock that ended; no run can finish it here",
            "their tasks lived in a built-in mock that ended; no run can finish them here",
        ),
        Standing::Changed => (
            "not sent, because the job file changed under it since the journal recorded it (a line edited, \
             inserted or removed at or above it, the lines sorted), or a journal record that cannot be read may \
             hold its task, and sending it could pay for a job twice (a run's results.jsonl says which and what to \
             do); no run sends it: restore the file as it was, and add new jobs at its end",
            "not sent, because the job file changed under them since the journal recorded them (a line edited, \
             inserted or removed at or above them, the lines sorted), or a journal record that cannot be read may \
             hold their tasks, and sending them could pay for jobs twice (a run's results.jsonl says which and what \
             to do); no run sends them: restore the file as it was, and add new jobs at its end",
        ),
        // Stopped before sending, or held back by the cap: the same
        // command sends them while its cap allows. (A standing of a later
        // release is said as this one, the next run's default.)
        _ => (
            "not sent; the same command sends it (while its --max-credits, if any, allows)",
            "not sent; the same command sends them (while its --max-credits, if any, allows)",
        ),
    };
    if one {
        of_one
    } else {
        of_many
    }
}

/// What to say of lines whose tasks lived in a built-in mock that ended:
/// `now` when it ends with this run.
pub fn gone_advice(lines: &[u64], out_dir: &Path, now: bool) -> String {
    let when = if now {
        "the built-in mock, which ends with this command"
    } else {
        "the built-in mock of an earlier run, which ended with that run"
    };
    let (their_tasks_are, them) = match lines {
        [_] => ("its task is", "it"),
        _ => ("their tasks are", "them"),
    };
    format!(
        "{} went to {when}: {their_tasks_are} gone, and no run can finish {them} in {}. Start over in another \
         folder (another --out), or, to be able to resume after an interruption, run `genapi mock` in another \
         terminal, set the variables it prints, and run the batch there",
        counted(lines),
        out::clean(&out_dir.display().to_string())
    )
}

/// "line 3" or "lines 1-4, 7 (5)": consecutive lines as ranges, the first
/// twenty ranges at most.
pub fn counted(lines: &[u64]) -> String {
    let mut ranges: Vec<(u64, u64)> = Vec::new();
    for &line in lines {
        match ranges.last_mut() {
            Some((_, end)) if *end + 1 == line => *end = line,
            _ => ranges.push((line, line)),
        }
    }
    let shown: Vec<String> = ranges
        .iter()
        .take(20)
        .map(|(start, end)| {
            if start == end {
                start.to_string()
            } else {
                format!("{start}-{end}")
            }
        })
        .collect();
    let more = if ranges.len() > shown.len() { ", …" } else { "" };
    match lines {
        [one] => format!("line {one}"),
        _ => format!("lines {}{more} ({})", shown.join(", "), lines.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_lines_are_said_as_ranges() {
        assert_eq!(counted(&[3]), "line 3");
        assert_eq!(counted(&[1, 2, 3, 4, 7, 9, 10]), "lines 1-4, 7, 9-10 (7)");
    }

    #[test]
    fn lines_gone_with_a_mock_are_said_of_one_or_of_many() {
        let one = gone_advice(&[4], Path::new("out"), true);
        assert!(one.starts_with("line 4 went to the built-in mock, which ends with this command: its task is gone, and no run can finish it in out."), "{one}");
        let many = gone_advice(&[1, 2], Path::new("out"), false);
        assert!(many.starts_with("lines 1-2 (2) went to the built-in mock of an earlier run, which ended with that run: their tasks are gone, and no run can finish them in out."), "{many}");
    }
}
