//! A line's life, as its store's events tell it.
//!
//! A line of a batch is in exactly one of four situations, and each is a
//! variant of [`Line`] carrying only what that situation has:
//!
//! | situation | what the next run does |
//! |---|---|
//! | [`Line::Unsent`]: nothing was sent, or what was sent surely created nothing | sends it |
//! | [`Line::Unanswered`]: a submission was sent and no answer came back | nothing on its own: the service may have charged it |
//! | [`Line::Accepted`]: its task was accepted (or adopted) and has not ended | polls the task, never sends the line again |
//! | [`Line::Ended`]: it reached an [`Ending`] | reports it; sends it again only after a refusal, when asked |
//!
//! The events are read from journals and ledger rows as every release wrote
//! them: the fold below is the one reading of them.

use serde::Serialize;

use crate::journal::Event;

/// Where one line of a batch stands.
#[derive(Clone, Debug, PartialEq)]
pub enum Line {
    /// Never sent, or sent and surely not accepted (the service refused
    /// it in a way that may be tried again, or a stop kept it from
    /// leaving): it may be sent.
    Unsent {
        /// The submission tried last, when one was recorded.
        tried: Option<Sent>,
    },
    /// A submission was sent and no answer came back (or an event of the
    /// line could not be read): the service may have accepted and charged
    /// it, so it is never sent again unless the user asks.
    Unanswered {
        /// The submission.
        sent: Sent,
    },
    /// Its task was accepted and has not ended: it is polled, never sent
    /// again.
    Accepted {
        /// The submission, when the batch sent it (an adopted task may
        /// have none).
        sent: Option<Sent>,
        /// The task.
        task: AcceptedTask,
    },
    /// It ended, for good unless the ending is a refusal and the user asks
    /// to try refused lines again.
    Ended {
        /// The submission, when one was recorded.
        sent: Option<Sent>,
        /// The task, when one was accepted.
        task: Option<AcceptedTask>,
        /// How it ended.
        ending: Ending,
    },
}

/// A submission the store recorded before it was sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Sent {
    /// Fingerprint of the job sent, to notice a changed job file (none for
    /// an event that could not be read).
    pub digest: Option<String>,
    /// When it was sent (Unix seconds), when recorded.
    pub sent_at: Option<u64>,
    /// It went to a service that ended with the run that used it.
    pub ephemeral: bool,
    /// A record after it could not be read: it may have been its
    /// acceptance (a task made and charged), so the line is never sent
    /// again, even when unanswered lines may be.
    pub damaged: bool,
}

/// A task the service accepted for a line.
#[derive(Clone, Debug, PartialEq)]
pub struct AcceptedTask {
    /// The task's id.
    pub id: String,
    /// The address it is polled at.
    pub polling_url: String,
    /// The cost the acceptance reported, if any.
    pub cost: Option<f64>,
    /// The user gave the task to the line ([`crate::adopt`]); the batch
    /// did not submit it.
    pub adopted: bool,
}

/// How a line ended, as recorded in its `finished` event.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    /// Its result was saved (`Ready`).
    Saved {
        /// The file, relative to the output directory.
        file: Option<String>,
        /// The seed the service reported.
        seed: Option<serde_json::Number>,
        /// The cost in credits.
        cost: Option<f64>,
        /// The task's duration in seconds.
        duration: Option<f64>,
    },
    /// The service ended it without a result.
    Failed {
        /// Which of the service's endings.
        status: FailedStatus,
        /// What went wrong.
        error: Option<String>,
        /// The class of failure.
        class: Option<genapi::FailureClass>,
    },
}

/// The endings without a result, one each: the service's task statuses and
/// the client's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FailedStatus {
    /// The service refused the submission with an answer that created no
    /// task (`Refused`, the client's word): sent again only when asked.
    Refused,
    /// The task failed at the service (`Error`).
    Error,
    /// The request was moderated (`Request Moderated`).
    RequestModerated,
    /// The result was moderated (`Content Moderated`).
    ContentModerated,
    /// The service no longer knows the task (`Task not found`).
    TaskNotFound,
    /// The result expired before it was saved (`Expired`, the client's
    /// word).
    Expired,
    /// A word this release does not know, written by another: ended all
    /// the same, never sent again.
    Other(String),
}

impl FailedStatus {
    /// Every status this release writes, in the words of its journals.
    pub const KNOWN: [FailedStatus; 6] = [
        FailedStatus::Refused,
        FailedStatus::Error,
        FailedStatus::RequestModerated,
        FailedStatus::ContentModerated,
        FailedStatus::TaskNotFound,
        FailedStatus::Expired,
    ];

    /// The word in journals and ledger rows.
    pub fn as_str(&self) -> &str {
        match self {
            FailedStatus::Refused => "Refused",
            FailedStatus::Error => "Error",
            FailedStatus::RequestModerated => "Request Moderated",
            FailedStatus::ContentModerated => "Content Moderated",
            FailedStatus::TaskNotFound => "Task not found",
            FailedStatus::Expired => "Expired",
            FailedStatus::Other(word) => word,
        }
    }

    /// The status a journal's word names.
    pub fn from_word(word: &str) -> FailedStatus {
        FailedStatus::KNOWN
            .into_iter()
            .find(|known| known.as_str() == word)
            .unwrap_or_else(|| FailedStatus::Other(word.to_string()))
    }

    /// Nothing was charged for it: no task ran, or moderation stopped it.
    pub fn charged_nothing(&self) -> bool {
        matches!(
            self,
            FailedStatus::Refused | FailedStatus::RequestModerated | FailedStatus::ContentModerated
        )
    }
}

/// Where a line stands, in one word per situation: what `--status`, a
/// run's summary, the gallery and a ledger's counts all say of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Standing {
    /// Its result was saved: reported from the store, nothing sent.
    Saved,
    /// Its task ended for good without a result (it failed, was
    /// moderated, or its result expired): reported from the store, never
    /// sent again.
    Ended,
    /// The service refused its submission with an answer that created no
    /// task (402 credits, 403 key, 422 job): reported from the store, sent
    /// again only when asked ([`crate::Batch::retry_refused`]), once its
    /// cause is fixed.
    Refused,
    /// Its task was accepted and has not ended: the next run polls it and
    /// saves its result, and never submits the line again.
    Accepted,
    /// Its submission was sent and no answer came back: the service may
    /// have accepted (and charged) it, so it is not sent again unless asked.
    Unanswered,
    /// Its submission went to a service that ended with its run (see
    /// [`crate::Batch::ephemeral_service`]): its task is gone, and no run
    /// can finish it in this store.
    Gone,
    /// Surely not accepted (never sent, refused before it was created, or
    /// stopped before it was sent): the next run sends it.
    Unsent,
    /// Not sent, because the job file changed under it since the store
    /// recorded it: its line now holds another job than the one it sent,
    /// or its job was recorded under another line (lines inserted, removed
    /// or sorted), or a damaged record may hold its task. Sending it could
    /// pay for a job twice: no run sends it until the file is restored.
    /// Said of the job file as it is now ([`crate::Status::with_job_file`],
    /// a run's outcomes), never by the store alone.
    Changed,
}

impl Standing {
    /// Every standing, in the order a summary lists them.
    pub const ALL: [Standing; 8] = [
        Standing::Saved,
        Standing::Ended,
        Standing::Changed,
        Standing::Refused,
        Standing::Accepted,
        Standing::Unanswered,
        Standing::Gone,
        Standing::Unsent,
    ];

    /// The standing's one word, as code, docs and messages use it.
    pub const fn as_str(self) -> &'static str {
        match self {
            Standing::Saved => "saved",
            Standing::Ended => "ended",
            Standing::Refused => "refused",
            Standing::Accepted => "accepted",
            Standing::Unanswered => "unanswered",
            Standing::Gone => "gone",
            Standing::Unsent => "unsent",
            Standing::Changed => "changed",
        }
    }

    /// The standing a word names: its own word ([`Standing::as_str`]).
    pub fn from_word(word: &str) -> Option<Standing> {
        Standing::ALL.into_iter().find(|standing| standing.as_str() == word)
    }
}

impl Default for Line {
    /// A line the store knows nothing of.
    fn default() -> Line {
        Line::Unsent { tried: None }
    }
}

impl Line {
    /// The line the events of one line lead to, in the order written.
    ///
    /// ```
    /// use genapi_batch::{Event, Line, Standing};
    /// let line = Line::of(vec![Event::Accepted {
    ///     line: 1,
    ///     id: "t-1".into(),
    ///     polling_url: "https://api.example.com/v1/get_result?id=t-1".into(),
    ///     cost: Some(2.0),
    ///     adopted: false,
    /// }]);
    /// assert_eq!(line.task().map(|task| task.id.as_str()), Some("t-1"));
    /// assert_eq!(line.standing(), Standing::Accepted);
    /// ```
    pub fn of(events: impl IntoIterator<Item = Event>) -> Line {
        events.into_iter().fold(Line::default(), Line::then)
    }

    /// Every line's state, from the events of a whole batch in the order
    /// written.
    pub fn of_each(events: impl IntoIterator<Item = Event>) -> std::collections::BTreeMap<u64, Line> {
        let mut lines = std::collections::BTreeMap::new();
        for event in events {
            let line: &mut Line = lines.entry(event.line()).or_default();
            line.apply(event);
        }
        lines
    }

    /// Moves the line on by `event`, its next ([`Line::then`] in place).
    pub fn apply(&mut self, event: Event) {
        *self = std::mem::take(self).then(event);
    }

    /// The line once `event`, its next, is written.
    pub fn then(self, event: Event) -> Line {
        match event {
            // A new submission: what an earlier one ended with (a refusal)
            // no longer says anything about the line. A task it had stays
            // its own: a paid task is never forgotten.
            Event::Intent {
                digest,
                sent_at,
                ephemeral,
                ..
            } => {
                let sent = Sent {
                    digest: Some(digest),
                    sent_at,
                    ephemeral,
                    damaged: false,
                };
                match self.task().cloned() {
                    Some(task) => Line::Accepted { sent: Some(sent), task },
                    None => Line::Unanswered { sent },
                }
            }
            Event::Accepted {
                id,
                polling_url,
                cost,
                adopted,
                ..
            } => self.accepted(AcceptedTask {
                id,
                polling_url,
                cost,
                adopted,
            }),
            // Surely not accepted: the line may be sent.
            Event::Refused { .. } => match self {
                Line::Unanswered { sent } => Line::Unsent { tried: Some(sent) },
                other => other,
            },
            Event::Damaged { .. } => self.damaged(),
            Event::Finished {
                status,
                file,
                seed,
                cost,
                duration,
                error,
                class,
                ..
            } => {
                let ending = if status == "Ready" {
                    Ending::Saved {
                        file,
                        seed,
                        cost,
                        duration,
                    }
                } else {
                    Ending::Failed {
                        status: FailedStatus::from_word(&status),
                        error,
                        class,
                    }
                };
                self.ended(ending)
            }
        }
    }

    /// The line once a record of it could not be read: whatever it was,
    /// it may have been an accepted task, so a line that may be sent (or
    /// sent again after a refusal) no longer may. It keeps the line's job
    /// only right after that job's intent, whose acceptance it may be;
    /// after anything else (a refusal of any kind, or another record that
    /// could not be read, which may itself have been a refusal) it may have
    /// been the intent of another job: its job is not known, so it claims
    /// any. Either way the submission is marked damaged
    /// ([`Sent::damaged`]): never sent again.
    fn damaged(self) -> Line {
        let free = self.task().is_none() && self.ending().is_none_or(|_| self.refused());
        if !free {
            return self;
        }
        let sent = match self {
            Line::Unanswered { sent } if !sent.damaged => Sent { damaged: true, ..sent },
            _ => Sent {
                digest: None,
                sent_at: None,
                ephemeral: false,
                damaged: true,
            },
        };
        Line::Unanswered { sent }
    }

    /// The line once `task` was accepted (or adopted) for it.
    fn accepted(self, task: AcceptedTask) -> Line {
        // An acceptance of another task for a line whose task is known (no
        // run submits such a line; the user adopts in its place): a record
        // of another line, renumbered by damage. The first task stays, and
        // the line claims any job, as a record that cannot be read does.
        if let Some(known) = self.task().filter(|known| !task.adopted && known.id != task.id) {
            let task = known.clone();
            let sent = Some(Sent {
                digest: None,
                sent_at: None,
                ephemeral: false,
                damaged: true,
            });
            return match self {
                Line::Ended { ending, .. } => Line::Ended {
                    sent,
                    task: Some(task),
                    ending,
                },
                _ => Line::Accepted { sent, task },
            };
        }
        let mut sent = self.into_sent();
        // An adopted task is one the user found at the service in use,
        // whatever the submission went to.
        if let (true, Some(sent)) = (task.adopted, sent.as_mut()) {
            sent.ephemeral = false;
        }
        Line::Accepted { sent, task }
    }

    /// The line once it reached `ending`, keeping its submission and task.
    fn ended(self, ending: Ending) -> Line {
        let task = self.task().cloned();
        Line::Ended {
            sent: self.into_sent(),
            task,
            ending,
        }
    }

    /// The submission recorded, if any.
    pub fn sent(&self) -> Option<&Sent> {
        match self {
            Line::Unanswered { sent } => Some(sent),
            Line::Unsent { tried: sent } | Line::Accepted { sent, .. } | Line::Ended { sent, .. } => sent.as_ref(),
        }
    }

    fn into_sent(self) -> Option<Sent> {
        match self {
            Line::Unanswered { sent } => Some(sent),
            Line::Unsent { tried: sent } | Line::Accepted { sent, .. } | Line::Ended { sent, .. } => sent,
        }
    }

    /// The task accepted for it, if any.
    pub fn task(&self) -> Option<&AcceptedTask> {
        match self {
            Line::Accepted { task, .. } => Some(task),
            Line::Ended { task, .. } => task.as_ref(),
            Line::Unsent { .. } | Line::Unanswered { .. } => None,
        }
    }

    /// How it ended, if it did.
    pub fn ending(&self) -> Option<&Ending> {
        match self {
            Line::Ended { ending, .. } => Some(ending),
            _ => None,
        }
    }

    /// Whether it ended in a refusal (which created nothing): never for a
    /// line with a task recorded, whatever a later record says (a paid
    /// task is never forgotten).
    pub fn refused(&self) -> bool {
        self.task().is_none()
            && matches!(
                self.ending(),
                Some(Ending::Failed {
                    status: FailedStatus::Refused,
                    ..
                })
            )
    }

    /// Whether its record may hold a task of the job it sent: anything but
    /// a line never sent or surely refused. Such a line is its job's claim
    /// ([`crate::Claims`]): the job is never sent for another line while the
    /// claim is left behind.
    pub fn may_hold_a_task(&self) -> bool {
        !matches!(self, Line::Unsent { .. }) && !self.refused()
    }

    /// Whether what it sent last went to a service that ended with its run
    /// and nothing ended it since: its task cannot be found by any run.
    pub fn gone(&self) -> bool {
        match self {
            Line::Unanswered { sent } => sent.ephemeral,
            // An adopted task is one the user found at the service in use.
            Line::Accepted { sent: Some(sent), task } => sent.ephemeral && !task.adopted,
            _ => false,
        }
    }

    /// Where the line stands.
    pub fn standing(&self) -> Standing {
        match self {
            _ if self.gone() => Standing::Gone,
            Line::Unsent { .. } => Standing::Unsent,
            Line::Unanswered { .. } => Standing::Unanswered,
            Line::Accepted { .. } => Standing::Accepted,
            Line::Ended {
                ending: Ending::Saved { .. },
                ..
            } => Standing::Saved,
            _ if self.refused() => Standing::Refused,
            Line::Ended { .. } => Standing::Ended,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn intent(line: u64, ephemeral: bool) -> Event {
        Event::Intent {
            line,
            name: format!("l{line}"),
            digest: "d".into(),
            sent_at: Some(7),
            ephemeral,
        }
    }

    fn accepted(line: u64, adopted: bool) -> Event {
        Event::Accepted {
            line,
            id: format!("t{line}"),
            polling_url: format!("http://127.0.0.1:1/v1/get_result?id=t{line}"),
            cost: None,
            adopted,
        }
    }

    fn finished(line: u64, status: &str) -> Event {
        Event::Finished {
            line,
            status: status.into(),
            file: (status == "Ready").then(|| format!("l{line}.jpg")),
            seed: None,
            cost: None,
            duration: None,
            error: None,
            class: None,
        }
    }

    fn refused(line: u64) -> Event {
        Event::Refused {
            line,
            error: "429".into(),
        }
    }

    #[test]
    fn each_history_stands_where_the_next_run_takes_it() {
        let lines = Line::of_each(vec![
            intent(1, true),
            accepted(1, false),
            intent(2, true),
            intent(3, true),
            accepted(3, false),
            finished(3, "Ready"),
            intent(4, false),
            accepted(4, false),
            intent(5, true),
            accepted(5, true),
            intent(6, false),
            refused(6),
            intent(7, false),
            finished(7, "Refused"),
            intent(8, false),
            Event::Damaged { line: 8 },
            Event::Damaged { line: 9 },
            intent(10, false),
            accepted(10, false),
            Event::Damaged { line: 10 },
            intent(11, false),
            accepted(11, false),
            finished(11, "Content Moderated"),
            intent(12, false),
            finished(12, "Refused"),
            intent(12, false),
            intent(13, false),
            accepted(13, false),
            finished(13, "Refused"),
            intent(14, false),
            finished(14, "Refused"),
            Event::Damaged { line: 14 },
        ]);
        let standing = |line: u64| lines[&line].standing();
        assert_eq!(standing(1), Standing::Gone);
        assert_eq!(standing(2), Standing::Gone, "unanswered on a mock that ended");
        assert_eq!(standing(3), Standing::Saved);
        assert_eq!(standing(4), Standing::Accepted);
        assert_eq!(standing(5), Standing::Accepted, "a task adopted later is the user's");
        assert_eq!(
            standing(6),
            Standing::Unsent,
            "refused in a way that may be tried again"
        );
        assert_eq!(standing(7), Standing::Refused, "sent again only when asked");
        assert_eq!(
            standing(8),
            Standing::Unanswered,
            "a damaged event may have been an acceptance"
        );
        assert_eq!(standing(9), Standing::Unanswered);
        assert_eq!(standing(10), Standing::Accepted, "what is known stays known");
        assert_eq!(standing(11), Standing::Ended);
        assert_eq!(standing(12), Standing::Unanswered, "a new submission after a refusal");
        assert!(!lines[&13].refused(), "a refusal recorded after a task is no refusal");
        assert_eq!(standing(13), Standing::Ended, "never sent again: its task may be paid");
        assert_eq!(
            standing(14),
            Standing::Unanswered,
            "a damaged record after a refusal may have been an acceptance"
        );

        assert_eq!(lines[&3].task().map(|t| t.id.as_str()), Some("t3"));
        assert!(lines[&7].refused());
        assert_eq!(lines[&4].sent().and_then(|s| s.sent_at), Some(7));
    }

    /// Another task's acceptance for a line whose task is known (a record
    /// of another line, renumbered by damage) keeps the first task and
    /// claims any job; an adoption replaces the task, as the user asked.
    #[test]
    fn a_second_acceptance_of_another_task_is_damage() {
        let other = Event::Accepted {
            line: 1,
            id: "t2".into(),
            polling_url: "http://127.0.0.1:1/v1/get_result?id=t2".into(),
            cost: None,
            adopted: false,
        };
        let saved = Line::of([
            intent(1, false),
            accepted(1, false),
            finished(1, "Ready"),
            other.clone(),
        ]);
        assert_eq!(saved.task().map(|t| t.id.as_str()), Some("t1"), "{saved:?}");
        assert!(saved.sent().is_some_and(|sent| sent.damaged && sent.digest.is_none()));
        assert_eq!(saved.standing(), Standing::Saved);
        let polled = Line::of([intent(1, false), accepted(1, false), other]);
        assert_eq!(polled.task().map(|t| t.id.as_str()), Some("t1"));
        assert!(polled.sent().is_some_and(|sent| sent.damaged));
        let adopted = Line::of([intent(1, false), accepted(1, false), accepted(2, true)]);
        assert_eq!(
            adopted.task().map(|t| t.id.as_str()),
            Some("t2"),
            "an adoption replaces it"
        );
    }

    /// A record that cannot be read keeps its line's job only right after
    /// that job's intent (it may be its acceptance); after anything else it
    /// may have been another job's intent, and claims any.
    #[test]
    fn a_record_that_cannot_be_read_keeps_a_job_only_after_its_intent() {
        let lines = Line::of_each(vec![
            intent(1, false),
            Event::Damaged { line: 1 },
            intent(2, false),
            finished(2, "Refused"),
            Event::Damaged { line: 2 },
            intent(3, false),
            refused(3),
            Event::Damaged { line: 3 },
            intent(4, false),
            Event::Damaged { line: 4 },
            Event::Damaged { line: 4 },
        ]);
        let job = |line: u64| lines[&line].sent().map(|sent| sent.digest.clone());
        assert_eq!(job(1), Some(Some("d".to_string())), "after its intent: that job's");
        for (line, after) in [
            (2, "a refusal"),
            (3, "a refusal that may be sent again"),
            (4, "another record that cannot be read"),
        ] {
            assert_eq!(job(line), Some(None), "after {after}: any job's");
            assert_eq!(lines[&line].standing(), Standing::Unanswered);
        }
    }

    #[test]
    fn every_status_word_reads_back_as_itself() {
        for status in FailedStatus::KNOWN {
            assert_eq!(FailedStatus::from_word(status.as_str()), status);
        }
        assert_eq!(
            FailedStatus::from_word("Something New"),
            FailedStatus::Other("Something New".into())
        );
        let words: Vec<&str> = Standing::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            words,
            [
                "saved",
                "ended",
                "changed",
                "refused",
                "accepted",
                "unanswered",
                "gone",
                "unsent"
            ]
        );
    }
}
