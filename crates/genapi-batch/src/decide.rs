//! What a run does with one line: the paying-once rules, as one pure
//! function.
//!
//! [`decide`] looks at where the line stands ([`Line`]), what the run sees
//! around it ([`Seen`]: the job file, the output folder, the cap, a stop)
//! and what the user asked ([`Asked`]), and names one [`Action`]. It reads
//! no file, sends nothing and awaits nothing, so the rules are tested as a
//! table (every situation against every flag) and the model of many
//! workers drives this very function. The runner carries the action out.
//!
//! The rules, in the order they are tried:
//!
//! 1. A line whose job changed since its submission was recorded, and
//!    whose submission may have created a task, is refused: its task is not
//!    this job's, and this job must not be sent in its place.
//! 2. A line is its job, not its number: a line whose job has a record
//!    left behind under another number ([`crate::Claims`]: the job file's
//!    lines moved, or that line was removed) is never sent, whatever its
//!    own number's history; where rule 9 would send it, it is refused.
//! 3. An ended line is reported as it ended; a saved line whose file is
//!    gone is polled again for its result (never sent), unless no task was
//!    recorded for it (refused: the file is lost) or its task lived in a
//!    service that ended (reported gone); a refusal is sent again only when
//!    asked (`--retry-refused`).
//! 4. A line whose submission went to a service that ended with its run is
//!    gone: neither polled nor sent.
//! 5. An accepted line is polled, never sent.
//! 6. An unanswered line is reported unknown, unless the user asks to send
//!    it again (`--resubmit-unknown`) and every record after its submission
//!    was read. A record that cannot be read may be its acceptance (a task
//!    made and charged), or another line's task whose claim a new
//!    submission would replace: such a line is never sent again.
//! 7. Nothing more is sent once the cap is reached, a stop was asked for or
//!    the batch halted its sending; nothing more is polled after a stop.
//! 8. A file with the line's name, with no task in the store to explain it,
//!    means the store lost its records: the line is refused rather than
//!    paid for again.
//! 9. Otherwise the line is sent, unless its job was recorded under
//!    another line (rule 2).

use serde::Serialize;

use crate::line::{Ending, Line};

/// What the run sees around a line, besides its history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Seen {
    /// The job differs from the one the store recorded as sent.
    pub changed: bool,
    /// This job has a record that may hold its task under another line,
    /// which now holds another job or is no longer in the job file
    /// ([`crate::Claims::left_behind`]): whatever this line's own history,
    /// sending it may pay twice.
    pub moved: bool,
    /// The file a saved ending names is on disk (or kept by another worker
    /// of a shared store).
    pub saved_file: bool,
    /// A file with the line's name is in the output folder.
    pub name_taken: bool,
    /// The spending cap was reached.
    pub cap_reached: bool,
    /// The batch stopped sending on its own (every later submission would
    /// meet the same refusal): tasks in flight are still polled.
    pub halted: bool,
    /// A stop was asked for (Ctrl-C, a deadline): nothing more is sent or
    /// waited for.
    pub stopping: bool,
}

/// What the user asked of a rerun.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Asked {
    /// Send refused lines again (`--retry-refused`).
    pub retry_refused: bool,
    /// Send again lines whose submission went unanswered, paying again if
    /// the service did accept them (`--resubmit-unknown`).
    pub resubmit_unknown: bool,
}

/// What happens to a line.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Reported as it ended, from the store; nothing sent.
    Report,
    /// Refused: its job changed since its submission was recorded.
    RefuseChanged,
    /// Refused: its job was recorded under another line that no longer
    /// holds it (lines moved, or removed).
    RefuseMoved,
    /// Refused: saved in an earlier run, the file is gone, and the store
    /// holds no task to fetch it again.
    RefuseLostFile,
    /// Reported failed: its task lived in a service that ended.
    ReportGone,
    /// Its task is polled (after taking a seat) and its result saved.
    Poll,
    /// Reported unknown: sent, unanswered, and not sent again.
    ReportUnknown,
    /// Not sent: the spending cap was reached.
    StopAtCap,
    /// Not sent or not waited for: a stop was asked for.
    Stop,
    /// Refused: a file has its name and the store holds no task of it.
    RefuseNameTaken,
    /// Sent (after taking a seat and, under a cap, a credit hold).
    Send,
}

impl Action {
    /// Every action, for tables.
    pub const ALL: [Action; 11] = [
        Action::Report,
        Action::RefuseChanged,
        Action::RefuseMoved,
        Action::RefuseLostFile,
        Action::ReportGone,
        Action::Poll,
        Action::ReportUnknown,
        Action::StopAtCap,
        Action::Stop,
        Action::RefuseNameTaken,
        Action::Send,
    ];

    /// The action's word, as the table of docs/batch-rules.md shows it.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Report => "report",
            Action::RefuseChanged => "refuse: changed",
            Action::RefuseMoved => "refuse: moved",
            Action::RefuseLostFile => "refuse: file lost",
            Action::ReportGone => "report gone",
            Action::Poll => "poll",
            Action::ReportUnknown => "report unknown",
            Action::StopAtCap => "stop at cap",
            Action::Stop => "stop",
            Action::RefuseNameTaken => "refuse: name taken",
            Action::Send => "send",
        }
    }
}

/// What the run does with `line` (see the module's rules).
///
/// ```
/// use genapi_batch::{decide, Action, Asked, Line, Seen};
/// let new = Line::default();
/// assert_eq!(decide(&new, Seen::default(), Asked::default()), Action::Send);
/// let stopping = Seen { stopping: true, ..Seen::default() };
/// assert_eq!(decide(&new, stopping, Asked::default()), Action::Stop);
/// ```
pub fn decide(line: &Line, seen: Seen, asked: Asked) -> Action {
    let refused = line.refused();
    if seen.changed && line.may_hold_a_task() {
        return Action::RefuseChanged;
    }
    if let Line::Ended { ending, task, sent } = line {
        let saved = matches!(ending, Ending::Saved { .. });
        // Its task lived in a service that ended: nothing can fetch it.
        let task_gone = sent.as_ref().is_some_and(|sent| sent.ephemeral) && task.as_ref().is_some_and(|t| !t.adopted);
        match () {
            () if saved && seen.saved_file => return Action::Report,
            () if saved && task.is_none() => return Action::RefuseLostFile,
            () if saved && task_gone => return Action::ReportGone,
            // Its file is gone: its task is polled for the result again.
            () if saved => return polled(seen),
            () if !refused => return Action::Report,
            () if !seen.changed && !asked.retry_refused => return Action::Report,
            // A refusal created nothing: the line may be sent.
            () => {}
        }
    }
    if line.gone() {
        return Action::ReportGone;
    }
    if let Line::Accepted { .. } = line {
        return polled(seen);
    }
    if let Line::Unanswered { sent } = line {
        // A record that cannot be read may be its paid task, or any job's,
        // whose claim a new intent would replace.
        if !asked.resubmit_unknown || sent.damaged {
            return Action::ReportUnknown;
        }
    }
    if seen.cap_reached {
        return Action::StopAtCap;
    }
    if seen.name_taken {
        return Action::RefuseNameTaken;
    }
    if seen.stopping || seen.halted {
        return Action::Stop;
    }
    if seen.moved {
        return Action::RefuseMoved;
    }
    Action::Send
}

/// The refusal an edit of the job file holds `line` to, when even both
/// flags (`--retry-refused`, `--resubmit-unknown`) would not send it: a
/// refused or unanswered line the file moved is reported as refused for the
/// edit, never with a flag that would not send it.
///
/// ```
/// use genapi_batch::{refused_for_the_edit, Action, Line, Seen};
/// let moved = Seen { moved: true, ..Seen::default() };
/// assert_eq!(refused_for_the_edit(&Line::default(), moved), Some(Action::RefuseMoved));
/// assert_eq!(refused_for_the_edit(&Line::default(), Seen::default()), None);
/// ```
pub fn refused_for_the_edit(line: &Line, seen: Seen) -> Option<Action> {
    let every_flag = Asked {
        retry_refused: true,
        resubmit_unknown: true,
    };
    let seen = Seen {
        cap_reached: false,
        halted: false,
        stopping: false,
        name_taken: false,
        ..seen
    };
    let action = decide(line, seen, every_flag);
    matches!(action, Action::RefuseChanged | Action::RefuseMoved).then_some(action)
}

/// A task is polled unless a stop was asked for.
fn polled(seen: Seen) -> Action {
    if seen.stopping {
        Action::Stop
    } else {
        Action::Poll
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Event;
    use crate::line::{AcceptedTask, FailedStatus, Sent};

    fn sent(ephemeral: bool) -> Sent {
        Sent {
            digest: Some("d".into()),
            sent_at: Some(1),
            ephemeral,
            damaged: false,
        }
    }

    fn task(adopted: bool) -> AcceptedTask {
        AcceptedTask {
            id: "t".into(),
            polling_url: "https://api.example.com/v1/get_result?id=t".into(),
            cost: None,
            adopted,
        }
    }

    fn ended(status: Option<FailedStatus>, with_task: bool) -> Line {
        Line::Ended {
            sent: Some(sent(false)),
            task: with_task.then(|| task(false)),
            ending: match status {
                None => Ending::Saved {
                    file: Some("l.jpg".into()),
                    seed: None,
                    cost: None,
                    duration: None,
                },
                Some(status) => Ending::Failed {
                    status,
                    error: None,
                    class: None,
                },
            },
        }
    }

    fn ended_on_a_service_that_ended() -> Line {
        let Line::Ended { task, ending, .. } = ended(None, true) else {
            unreachable!("ended makes an ended line")
        };
        Line::Ended {
            sent: Some(sent(true)),
            task,
            ending,
        }
    }

    /// Every situation a line can be in, by name.
    fn situations() -> Vec<(&'static str, Line)> {
        vec![
            ("never sent", Line::default()),
            (
                "refused, may be tried again",
                Line::Unsent {
                    tried: Some(sent(false)),
                },
            ),
            ("sent, no answer", Line::Unanswered { sent: sent(false) }),
            (
                "a record that cannot be read",
                Line::Unanswered {
                    sent: Sent {
                        digest: None,
                        sent_at: None,
                        ephemeral: false,
                        damaged: true,
                    },
                },
            ),
            (
                "sent, a later record that cannot be read",
                Line::Unanswered {
                    sent: Sent {
                        damaged: true,
                        ..sent(false)
                    },
                },
            ),
            (
                "sent to a service that ended, no answer",
                Line::Unanswered { sent: sent(true) },
            ),
            (
                "accepted",
                Line::Accepted {
                    sent: Some(sent(false)),
                    task: task(false),
                },
            ),
            (
                "adopted",
                Line::Accepted {
                    sent: Some(sent(true)),
                    task: task(true),
                },
            ),
            (
                "accepted by a service that ended",
                Line::Accepted {
                    sent: Some(sent(true)),
                    task: task(false),
                },
            ),
            ("saved", ended(None, true)),
            ("saved, no task recorded", ended(None, false)),
            ("saved by a service that ended", ended_on_a_service_that_ended()),
            ("refused for good", ended(Some(FailedStatus::Refused), false)),
            ("failed", ended(Some(FailedStatus::Error), true)),
            ("moderated", ended(Some(FailedStatus::ContentModerated), true)),
        ]
    }

    /// The flags of a rerun, as the table's columns.
    const FLAGS: [(&str, Asked); 4] = [
        (
            "(none)",
            Asked {
                retry_refused: false,
                resubmit_unknown: false,
            },
        ),
        (
            "--retry-refused",
            Asked {
                retry_refused: true,
                resubmit_unknown: false,
            },
        ),
        (
            "--resubmit-unknown",
            Asked {
                retry_refused: false,
                resubmit_unknown: true,
            },
        ),
        (
            "both",
            Asked {
                retry_refused: true,
                resubmit_unknown: true,
            },
        ),
    ];

    /// What the run sees, as the table's second column: nothing unusual,
    /// each fact alone, and the edit of a job file that moves a job onto a
    /// line holding another job's record (both facts at once).
    fn sights() -> Vec<(&'static str, Seen)> {
        let usual = Seen {
            saved_file: true,
            ..Seen::default()
        };
        vec![
            ("as usual", usual),
            ("job changed", Seen { changed: true, ..usual }),
            ("job moved", Seen { moved: true, ..usual }),
            (
                "job changed and moved",
                Seen {
                    changed: true,
                    moved: true,
                    ..usual
                },
            ),
            (
                "saved file gone",
                Seen {
                    saved_file: false,
                    ..usual
                },
            ),
            (
                "name taken",
                Seen {
                    name_taken: true,
                    ..usual
                },
            ),
            (
                "cap reached",
                Seen {
                    cap_reached: true,
                    ..usual
                },
            ),
            ("sending halted", Seen { halted: true, ..usual }),
            (
                "stopping",
                Seen {
                    stopping: true,
                    ..usual
                },
            ),
        ]
    }

    /// The rules as a table: each situation, as usual and with each fact
    /// seen alone, under each combination of flags. A row whose four
    /// columns agree is written once.
    const TABLE: &str = "\
| line | seen | (none) | --retry-refused | --resubmit-unknown | both |
|---|---|---|---|---|---|
| never sent | as usual | send | send | send | send |
| never sent | job changed | send | send | send | send |
| never sent | job moved | refuse: moved | refuse: moved | refuse: moved | refuse: moved |
| never sent | job changed and moved | refuse: moved | refuse: moved | refuse: moved | refuse: moved |
| never sent | saved file gone | send | send | send | send |
| never sent | name taken | refuse: name taken | refuse: name taken | refuse: name taken | refuse: name taken |
| never sent | cap reached | stop at cap | stop at cap | stop at cap | stop at cap |
| never sent | sending halted | stop | stop | stop | stop |
| never sent | stopping | stop | stop | stop | stop |
| refused, may be tried again | as usual | send | send | send | send |
| refused, may be tried again | job changed | send | send | send | send |
| refused, may be tried again | job moved | refuse: moved | refuse: moved | refuse: moved | refuse: moved |
| refused, may be tried again | job changed and moved | refuse: moved | refuse: moved | refuse: moved | refuse: moved |
| refused, may be tried again | saved file gone | send | send | send | send |
| refused, may be tried again | name taken | refuse: name taken | refuse: name taken | refuse: name taken | refuse: name taken |
| refused, may be tried again | cap reached | stop at cap | stop at cap | stop at cap | stop at cap |
| refused, may be tried again | sending halted | stop | stop | stop | stop |
| refused, may be tried again | stopping | stop | stop | stop | stop |
| sent, no answer | as usual | report unknown | report unknown | send | send |
| sent, no answer | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| sent, no answer | job moved | report unknown | report unknown | refuse: moved | refuse: moved |
| sent, no answer | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| sent, no answer | saved file gone | report unknown | report unknown | send | send |
| sent, no answer | name taken | report unknown | report unknown | refuse: name taken | refuse: name taken |
| sent, no answer | cap reached | report unknown | report unknown | stop at cap | stop at cap |
| sent, no answer | sending halted | report unknown | report unknown | stop | stop |
| sent, no answer | stopping | report unknown | report unknown | stop | stop |
| a record that cannot be read | as usual | report unknown | report unknown | report unknown | report unknown |
| a record that cannot be read | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| a record that cannot be read | job moved | report unknown | report unknown | report unknown | report unknown |
| a record that cannot be read | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| a record that cannot be read | saved file gone | report unknown | report unknown | report unknown | report unknown |
| a record that cannot be read | name taken | report unknown | report unknown | report unknown | report unknown |
| a record that cannot be read | cap reached | report unknown | report unknown | report unknown | report unknown |
| a record that cannot be read | sending halted | report unknown | report unknown | report unknown | report unknown |
| a record that cannot be read | stopping | report unknown | report unknown | report unknown | report unknown |
| sent, a later record that cannot be read | as usual | report unknown | report unknown | report unknown | report unknown |
| sent, a later record that cannot be read | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| sent, a later record that cannot be read | job moved | report unknown | report unknown | report unknown | report unknown |
| sent, a later record that cannot be read | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| sent, a later record that cannot be read | saved file gone | report unknown | report unknown | report unknown | report unknown |
| sent, a later record that cannot be read | name taken | report unknown | report unknown | report unknown | report unknown |
| sent, a later record that cannot be read | cap reached | report unknown | report unknown | report unknown | report unknown |
| sent, a later record that cannot be read | sending halted | report unknown | report unknown | report unknown | report unknown |
| sent, a later record that cannot be read | stopping | report unknown | report unknown | report unknown | report unknown |
| sent to a service that ended, no answer | as usual | report gone | report gone | report gone | report gone |
| sent to a service that ended, no answer | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| sent to a service that ended, no answer | job moved | report gone | report gone | report gone | report gone |
| sent to a service that ended, no answer | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| sent to a service that ended, no answer | saved file gone | report gone | report gone | report gone | report gone |
| sent to a service that ended, no answer | name taken | report gone | report gone | report gone | report gone |
| sent to a service that ended, no answer | cap reached | report gone | report gone | report gone | report gone |
| sent to a service that ended, no answer | sending halted | report gone | report gone | report gone | report gone |
| sent to a service that ended, no answer | stopping | report gone | report gone | report gone | report gone |
| accepted | as usual | poll | poll | poll | poll |
| accepted | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| accepted | job moved | poll | poll | poll | poll |
| accepted | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| accepted | saved file gone | poll | poll | poll | poll |
| accepted | name taken | poll | poll | poll | poll |
| accepted | cap reached | poll | poll | poll | poll |
| accepted | sending halted | poll | poll | poll | poll |
| accepted | stopping | stop | stop | stop | stop |
| adopted | as usual | poll | poll | poll | poll |
| adopted | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| adopted | job moved | poll | poll | poll | poll |
| adopted | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| adopted | saved file gone | poll | poll | poll | poll |
| adopted | name taken | poll | poll | poll | poll |
| adopted | cap reached | poll | poll | poll | poll |
| adopted | sending halted | poll | poll | poll | poll |
| adopted | stopping | stop | stop | stop | stop |
| accepted by a service that ended | as usual | report gone | report gone | report gone | report gone |
| accepted by a service that ended | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| accepted by a service that ended | job moved | report gone | report gone | report gone | report gone |
| accepted by a service that ended | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| accepted by a service that ended | saved file gone | report gone | report gone | report gone | report gone |
| accepted by a service that ended | name taken | report gone | report gone | report gone | report gone |
| accepted by a service that ended | cap reached | report gone | report gone | report gone | report gone |
| accepted by a service that ended | sending halted | report gone | report gone | report gone | report gone |
| accepted by a service that ended | stopping | report gone | report gone | report gone | report gone |
| saved | as usual | report | report | report | report |
| saved | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| saved | job moved | report | report | report | report |
| saved | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| saved | saved file gone | poll | poll | poll | poll |
| saved | name taken | report | report | report | report |
| saved | cap reached | report | report | report | report |
| saved | sending halted | report | report | report | report |
| saved | stopping | report | report | report | report |
| saved, no task recorded | as usual | report | report | report | report |
| saved, no task recorded | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| saved, no task recorded | job moved | report | report | report | report |
| saved, no task recorded | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| saved, no task recorded | saved file gone | refuse: file lost | refuse: file lost | refuse: file lost | refuse: file lost |
| saved, no task recorded | name taken | report | report | report | report |
| saved, no task recorded | cap reached | report | report | report | report |
| saved, no task recorded | sending halted | report | report | report | report |
| saved, no task recorded | stopping | report | report | report | report |
| saved by a service that ended | as usual | report | report | report | report |
| saved by a service that ended | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| saved by a service that ended | job moved | report | report | report | report |
| saved by a service that ended | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| saved by a service that ended | saved file gone | report gone | report gone | report gone | report gone |
| saved by a service that ended | name taken | report | report | report | report |
| saved by a service that ended | cap reached | report | report | report | report |
| saved by a service that ended | sending halted | report | report | report | report |
| saved by a service that ended | stopping | report | report | report | report |
| refused for good | as usual | report | send | report | send |
| refused for good | job changed | send | send | send | send |
| refused for good | job moved | report | refuse: moved | report | refuse: moved |
| refused for good | job changed and moved | refuse: moved | refuse: moved | refuse: moved | refuse: moved |
| refused for good | saved file gone | report | send | report | send |
| refused for good | name taken | report | refuse: name taken | report | refuse: name taken |
| refused for good | cap reached | report | stop at cap | report | stop at cap |
| refused for good | sending halted | report | stop | report | stop |
| refused for good | stopping | report | stop | report | stop |
| failed | as usual | report | report | report | report |
| failed | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| failed | job moved | report | report | report | report |
| failed | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| failed | saved file gone | report | report | report | report |
| failed | name taken | report | report | report | report |
| failed | cap reached | report | report | report | report |
| failed | sending halted | report | report | report | report |
| failed | stopping | report | report | report | report |
| moderated | as usual | report | report | report | report |
| moderated | job changed | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| moderated | job moved | report | report | report | report |
| moderated | job changed and moved | refuse: changed | refuse: changed | refuse: changed | refuse: changed |
| moderated | saved file gone | report | report | report | report |
| moderated | name taken | report | report | report | report |
| moderated | cap reached | report | report | report | report |
| moderated | sending halted | report | report | report | report |
| moderated | stopping | report | report | report | report |
";

    /// The table as [`decide`] makes it.
    fn table() -> String {
        let mut table = String::from("| line | seen |");
        for (flag, _) in FLAGS {
            table.push_str(&format!(" {flag} |"));
        }
        table.push_str("\n|---|---|---|---|---|---|\n");
        for (name, line) in situations() {
            for (sight, seen) in sights() {
                table.push_str(&format!("| {name} | {sight} |"));
                for (_, asked) in FLAGS {
                    table.push_str(&format!(" {} |", decide(&line, seen, asked).as_str()));
                }
                table.push('\n');
            }
        }
        table
    }

    #[test]
    fn the_rules_are_the_table() {
        let made = table();
        for (expected, got) in TABLE.lines().zip(made.lines()) {
            assert_eq!(expected, got);
        }
        assert_eq!(TABLE, made);
    }

    /// The table is the documentation of the rules: docs/batch-rules.md shows it
    /// as it is here.
    #[test]
    fn the_documentation_shows_the_table() {
        let docs = include_str!("../../../docs/batch-rules.md");
        assert!(
            docs.contains(TABLE),
            "docs/batch-rules.md must hold the table of decide's tests"
        );
    }

    /// Every event a store may hold of one line: intents (sent or not yet,
    /// to a lasting service or one that ends with its run), acceptances
    /// (submitted or adopted), a refusal that created nothing, each ending,
    /// and a record that cannot be read.
    fn alphabet() -> Vec<Event> {
        let intent = |sent_at: Option<u64>, ephemeral: bool| Event::Intent {
            line: 1,
            name: "l1".into(),
            digest: "d".into(),
            sent_at,
            ephemeral,
        };
        let accepted = |adopted: bool| Event::Accepted {
            line: 1,
            id: "t".into(),
            polling_url: "https://api.example.com/v1/get_result?id=t".into(),
            cost: None,
            adopted,
        };
        let finished = |status: &str, file: Option<&str>| Event::Finished {
            line: 1,
            status: status.into(),
            file: file.map(str::to_string),
            seed: None,
            cost: None,
            duration: None,
            error: None,
            class: None,
        };
        vec![
            intent(Some(1), false),
            intent(None, false),
            intent(Some(1), true),
            accepted(false),
            accepted(true),
            Event::Refused {
                line: 1,
                error: "429".into(),
            },
            finished("Ready", Some("l1.jpg")),
            finished("Refused", None),
            finished("Error", None),
            finished("Content Moderated", None),
            finished("Task not found", None),
            Event::Damaged { line: 1 },
        ]
    }

    /// Every line a store can fold from up to `length` events of the
    /// alphabet, in any order, each once.
    fn reachable_lines(length: u32) -> Vec<Line> {
        let alphabet = alphabet();
        let mut lines: Vec<Line> = vec![Line::default()];
        let mut histories: Vec<Vec<usize>> = vec![Vec::new()];
        for _ in 0..length {
            let mut longer = Vec::new();
            for history in &histories {
                for next in 0..alphabet.len() {
                    let mut history = history.clone();
                    history.push(next);
                    let line = Line::of(history.iter().map(|at| alphabet[*at].clone()));
                    if !lines.contains(&line) {
                        lines.push(line);
                    }
                    longer.push(history);
                }
            }
            histories = longer;
        }
        lines
    }

    /// A paid task is never forgotten by the fold: in every history of up
    /// to four events, once an acceptance is folded the line keeps a task
    /// and may hold one, whatever comes after (a late refusal, another
    /// intent, a damaged record, an ending), so no table row can send it.
    #[test]
    fn a_task_once_folded_is_never_forgotten() {
        let alphabet = alphabet();
        let accepted = |event: &Event| matches!(event, Event::Accepted { .. });
        let mut histories: Vec<Vec<usize>> = vec![Vec::new()];
        for _ in 0..4 {
            histories = histories
                .iter()
                .flat_map(|history| {
                    (0..alphabet.len()).map(move |next| {
                        let mut longer = history.clone();
                        longer.push(next);
                        longer
                    })
                })
                .collect();
            for history in &histories {
                let events: Vec<Event> = history.iter().map(|at| alphabet[*at].clone()).collect();
                let Some(first) = events.iter().position(accepted) else {
                    continue;
                };
                let mut line = Line::default();
                for (at, event) in events.iter().enumerate() {
                    line.apply(event.clone());
                    if at >= first {
                        assert!(
                            line.task().is_some() && line.may_hold_a_task(),
                            "a task forgotten after {:?}: {line:?}",
                            &events[..=at]
                        );
                    }
                }
            }
        }
    }

    /// Every combination of what a run may see and be asked.
    fn every_sight() -> impl Iterator<Item = (Seen, Asked)> {
        (0..(1u32 << 7)).flat_map(|bits| {
            let bit = |n: u32| bits & (1 << n) != 0;
            let seen = Seen {
                changed: bit(0),
                moved: bit(1),
                saved_file: bit(2),
                name_taken: bit(3),
                cap_reached: bit(4),
                halted: bit(5),
                stopping: bit(6),
            };
            FLAGS.map(|(_, asked)| (seen, asked))
        })
    }

    /// What `decide` does with `line` over every sight: two lines alike
    /// here are one row of the table.
    fn behaviour(line: &Line) -> Vec<Action> {
        every_sight().map(|(seen, asked)| decide(line, seen, asked)).collect()
    }

    /// The table's rows are not picked: every line a store can fold from
    /// four events (damaged records, refusals, endings and adoptions in any
    /// order) behaves as one of its situations under every sight and flag,
    /// so a history the table misses fails here, named.
    #[test]
    fn every_reachable_history_is_a_row_of_the_table() {
        let rows: Vec<(&str, Vec<Action>)> = situations()
            .into_iter()
            .map(|(name, line)| (name, behaviour(&line)))
            .collect();
        let reachable = reachable_lines(4);
        assert!(reachable.len() > 10, "{} lines", reachable.len());
        for line in &reachable {
            let acts = behaviour(line);
            assert!(
                rows.iter().any(|(_, row)| *row == acts),
                "a reachable line no row of the table describes: {line:?}"
            );
        }
    }

    /// The invariant over every line a store can fold from four events.
    #[test]
    fn no_reachable_history_pays_twice_or_sends_past_a_stop() {
        for line in reachable_lines(4) {
            for (seen, asked) in every_sight() {
                assert_never_pays_twice(&line, "a reachable history", seen, asked);
            }
        }
    }

    /// What may never happen, over every combination of what is seen and
    /// asked (2^7 × 4 for each situation): a task is never sent again, a
    /// job recorded under another line is never sent for this one, a line
    /// is never polled without a task, and nothing is sent past a stop or
    /// the cap.
    #[test]
    fn no_combination_pays_twice_or_sends_past_a_stop() {
        let mut combinations = 0;
        for (name, line) in situations() {
            for (seen, asked) in every_sight() {
                combinations += 1;
                assert_never_pays_twice(&line, name, seen, asked);
            }
        }
        assert_eq!(combinations, 15 * 128 * 4);
    }

    /// A task is never sent again, a job recorded under another line is
    /// never sent for this one, a line is never polled without a task, and
    /// nothing is sent past a stop or the cap.
    fn assert_never_pays_twice(line: &Line, name: &str, seen: Seen, asked: Asked) {
        let action = decide(line, seen, asked);
        let why = format!("{name} {line:?}, {seen:?}, {asked:?}: {action:?}");
        if action == Action::Send {
            let unanswered = matches!(line, Line::Unanswered { .. });
            assert!(line.task().is_none(), "{why}");
            assert!(!unanswered || asked.resubmit_unknown, "{why}");
            // A record that cannot be read may be another job's task: a
            // new submission would hide its claim.
            let read_whole = line.sent().is_none_or(|sent| sent.digest.is_some() && !sent.damaged);
            assert!(!unanswered || read_whole, "{why}");
            assert!(!line.refused() || asked.retry_refused || seen.changed, "{why}");
            assert!(
                !(seen.stopping || seen.halted || seen.cap_reached || seen.name_taken),
                "{why}"
            );
            // A job recorded under another line is never sent for this
            // one, whatever this line's history.
            assert!(!seen.moved, "{why}");
            assert!(!matches!(line.ending(), Some(Ending::Saved { .. })), "{why}");
        }
        if action == Action::Poll {
            assert!(line.task().is_some() && !seen.stopping, "{why}");
        }
    }
}
