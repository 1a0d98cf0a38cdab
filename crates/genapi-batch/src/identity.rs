//! Which line a job is: a job recorded under one line is never sent for
//! another.
//!
//! A store knows a line by its number, and a job by the digest of its path
//! and body ([`crate::Job::digest`]). An ordinary edit of a job file (a line
//! inserted or removed above, the lines sorted or swapped, a line copied)
//! moves jobs to other numbers, so the number alone cannot say whose task a
//! record holds. The rule here says it by the job:
//!
//! - A record that may hold a task ([`Line::may_hold_a_task`]: sent and not
//!   surely refused, accepted, ended with or without a result) is a *claim*
//!   of the job it recorded.
//! - A claim is *left behind* when the number it sits at now holds another
//!   job, or is no longer in the job file: the job moved away from its
//!   record.
//! - A line whose job has a claim left behind is never sent, whatever its
//!   own number's history (never sent, refused, unanswered): it may be that
//!   very job, and sending it would pay twice. [`crate::decide`] refuses it
//!   ([`crate::Action::RefuseMoved`]).
//!
//! A claim whose number still holds its job is that line's own, so a copy
//! of a line (a second occurrence of one job, at a number with no claim of
//! it) is a new job and is sent: two occurrences, two tasks. A run reads
//! its job file as it goes, so a claim at a number it has not reached yet
//! is [`JobAt::Unread`]: the line waits for the file to be read before it
//! is decided.
//!
//! ```
//! use genapi_batch::{Claims, JobAt, Line};
//! # fn saved(digest: &str) -> Line {
//! #     use genapi_batch::Event;
//! #     let intent = Event::Intent { line: 1, name: "l".into(), digest: digest.into(), sent_at: None, ephemeral: false };
//! #     Line::of([intent])
//! # }
//! // Line 1 sent job "alpha"; a line inserted on top moved alpha to line 2.
//! let records = [(1, saved("alpha"))];
//! let claims = Claims::of(records.iter().map(|(number, line)| (*number, line)));
//! let now = |number: u64| if number == 1 { JobAt::Other } else { JobAt::Unread };
//! assert_eq!(claims.left_behind(2, "alpha", now), Some((1, JobAt::Other)));
//! // A line that holds its own claim is its own job.
//! assert_eq!(claims.left_behind(1, "alpha", |_| JobAt::Same), None);
//! ```

use std::collections::HashMap;

use crate::line::Line;

/// What the job file holds now at a number where a claim sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobAt {
    /// The job the claim recorded: the claim is that line's own.
    Same,
    /// Another job, or nothing (the file no longer has that line).
    Other,
    /// Not known yet: the run has not read that far into the job file.
    Unread,
    /// Not known ever: the claim's record cannot be read (a damaged line
    /// of a journal), so any job may be the one it paid for.
    Unreadable,
    /// Nowhere: the job file holds the claim's job fewer times than its
    /// claims (a line edited, or removed), so a job no claim names may be
    /// that one, spelled otherwise ([`Claims::edited_away`]).
    Nowhere,
}

impl JobAt {
    /// What the job file holds at `number`, for a claim of the job
    /// `digest`: `current` is the file's jobs read so far (number to
    /// digest), and `file_read` whether that is all of them.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use genapi_batch::JobAt;
    /// let current = HashMap::from([(1, "zulu".to_string()), (2, "alpha".to_string())]);
    /// assert_eq!(JobAt::in_file(&current, 2, "alpha", false), JobAt::Same);
    /// assert_eq!(JobAt::in_file(&current, 1, "alpha", false), JobAt::Other);
    /// assert_eq!(JobAt::in_file(&current, 3, "alpha", false), JobAt::Unread);
    /// assert_eq!(JobAt::in_file(&current, 3, "alpha", true), JobAt::Other);
    /// ```
    pub fn in_file(current: &HashMap<u64, String>, number: u64, digest: &str, file_read: bool) -> JobAt {
        match current.get(&number) {
            Some(now) if now == digest => JobAt::Same,
            Some(_) => JobAt::Other,
            None if file_read => JobAt::Other,
            None => JobAt::Unread,
        }
    }
}

/// The claims of earlier runs (records that may hold a task), by the
/// digest of the job each recorded.
#[derive(Clone, Debug, Default)]
pub struct Claims {
    by_job: HashMap<String, Vec<u64>>,
    /// Lines whose records may hold a task but name no job (damaged).
    unreadable: Vec<u64>,
    /// Every line holding a claim.
    lines: std::collections::HashSet<u64>,
}

impl Claims {
    /// The claims among a store's lines: each line whose record may hold a
    /// task, by the job it sent; a record that may hold a task and names
    /// no job (a damaged line) is a claim of any job.
    pub fn of<'a>(lines: impl IntoIterator<Item = (u64, &'a Line)>) -> Claims {
        let mut claims = Claims::default();
        for (number, line) in lines.into_iter().filter(|(_, line)| line.may_hold_a_task()) {
            claims.lines.insert(number);
            match line.sent().and_then(|sent| sent.digest.as_ref()) {
                Some(digest) => claims.by_job.entry(digest.clone()).or_default().push(number),
                None => claims.unreadable.push(number),
            }
        }
        for numbers in claims.by_job.values_mut() {
            numbers.sort_unstable();
        }
        claims.unreadable.sort_unstable();
        claims
    }

    /// The lines whose records may hold a task, in no order.
    pub fn lines(&self) -> impl Iterator<Item = u64> + '_ {
        self.lines.iter().copied()
    }

    /// Whether no record may hold a task: nothing an edit could pay twice.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Whether a claim names the job `digest` (the run notes where the file
    /// holds such jobs, for [`Claims::edited_away`]).
    pub fn names(&self, digest: &str) -> bool {
        self.by_job.contains_key(digest)
    }

    /// What keeps the job `digest` at `line` from being sent, if anything:
    /// a claim of it left behind ([`Claims::left_behind`]), or, for a job
    /// no claim names, a claim edited away ([`Claims::edited_away`]).
    pub fn refusing(
        &self,
        line: u64,
        digest: &str,
        now: impl Fn(u64) -> JobAt,
        held: impl Fn(&str) -> usize,
        file_read: bool,
    ) -> Option<(u64, JobAt)> {
        self.left_behind(line, digest, now)
            .or_else(|| self.edited_away(digest, held, file_read))
    }

    /// For a job no claim names (new to the store, or a claimed job
    /// edited): the first claim of a job the job file holds fewer times
    /// than it has claims, its line edited or removed
    /// ([`JobAt::Nowhere`]). The job may be that one spelled otherwise (a
    /// number written `5.0` for `5`, text in another Unicode form, an
    /// image file saved again), whose task was paid for; sending it could
    /// pay twice. `held` says how many lines of the file read so far hold a
    /// job; until `file_read`, a job held too few times may come further
    /// on ([`JobAt::Unread`]).
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use genapi_batch::{Claims, Event, JobAt, Line};
    /// let sent = |line| Event::Intent { line, name: "b".into(), digest: "bravo".into(), sent_at: None, ephemeral: false };
    /// let lines = BTreeMap::from([(2, Line::of([sent(2)])), (3, Line::of([sent(3)]))]);
    /// let claims = Claims::of(lines.iter().map(|(n, l)| (*n, l)));
    /// let held = |times: usize| move |job: &str| if job == "bravo" { times } else { 0 };
    /// // "bravo", sent twice, is in the file once: a new job may be the other copy, edited.
    /// assert_eq!(claims.edited_away("bravo, edited", held(1), true), Some((2, JobAt::Nowhere)));
    /// assert_eq!(claims.edited_away("zulu", held(2), true), None);
    /// assert_eq!(claims.edited_away("zulu", held(1), false), Some((2, JobAt::Unread)));
    /// // A job a claim names is judged by its own claims.
    /// assert_eq!(claims.edited_away("bravo", held(0), true), None);
    /// ```
    pub fn edited_away(&self, digest: &str, held: impl Fn(&str) -> usize, file_read: bool) -> Option<(u64, JobAt)> {
        if self.names(digest) {
            return None;
        }
        let (mut nowhere, mut unread): (Option<u64>, Option<u64>) = (None, None);
        for (claimed, numbers) in &self.by_job {
            if held(claimed) >= numbers.len() {
                continue;
            }
            let first = numbers.first().copied().unwrap_or_default();
            let earliest = |kept: Option<u64>| Some(kept.map_or(first, |kept| kept.min(first)));
            if file_read {
                nowhere = earliest(nowhere);
            } else {
                unread = earliest(unread);
            }
        }
        nowhere
            .map(|number| (number, JobAt::Nowhere))
            .or(unread.map(|number| (number, JobAt::Unread)))
    }

    /// Whether `line` holds a claim (the run keeps the job the file holds
    /// there, to compare).
    pub fn holds(&self, line: u64) -> bool {
        self.lines.contains(&line)
    }

    /// A claim of the job `digest`, held by another number than `line`,
    /// that its number no longer holds: where it sits and what is there
    /// now. A claim left behind ([`JobAt::Other`]) is preferred to one not
    /// read yet ([`JobAt::Unread`]), so a line waits for the file only when
    /// nothing already refuses it.
    /// A claim whose record cannot be read, at another line, is left
    /// behind by any job ([`JobAt::Unreadable`]).
    pub fn left_behind(&self, line: u64, digest: &str, now: impl Fn(u64) -> JobAt) -> Option<(u64, JobAt)> {
        let mut unread = None;
        for &number in self
            .by_job
            .get(digest)
            .into_iter()
            .flatten()
            .filter(|number| **number != line)
        {
            match now(number) {
                JobAt::Same => {}
                JobAt::Unread => unread = unread.or(Some((number, JobAt::Unread))),
                other => return Some((number, other)),
            }
        }
        let unreadable = self.unreadable.iter().find(|number| **number != line);
        unreadable.map(|number| (*number, JobAt::Unreadable)).or(unread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::Event;

    fn intent(line: u64, digest: &str) -> Event {
        Event::Intent {
            line,
            name: format!("l{line}"),
            digest: digest.into(),
            sent_at: None,
            ephemeral: false,
        }
    }

    fn finished(line: u64, status: &str) -> Event {
        Event::Finished {
            line,
            status: status.into(),
            file: None,
            seed: None,
            cost: None,
            duration: None,
            error: None,
            class: None,
        }
    }

    #[test]
    fn only_records_that_may_hold_a_task_are_claims() {
        let lines = [
            (1, Line::of([intent(1, "sent")])),
            (2, Line::of([intent(2, "refused"), finished(2, "Refused")])),
            (
                3,
                Line::of([
                    intent(3, "retried"),
                    Event::Refused {
                        line: 3,
                        error: "429".into(),
                    },
                ]),
            ),
            (4, Line::of([intent(4, "saved"), finished(4, "Ready")])),
            (5, Line::of([intent(5, "failed"), finished(5, "Error")])),
            (6, Line::of([Event::Damaged { line: 6 }])),
            (7, Line::default()),
        ];
        let claims = Claims::of(lines.iter().map(|(number, line)| (*number, line)));
        let mut jobs: Vec<_> = claims.by_job.keys().cloned().collect();
        jobs.sort();
        assert_eq!(jobs, ["failed", "saved", "sent"]);
        // The damaged line may hold a task of any job.
        assert_eq!(claims.unreadable, [6]);
        assert!(claims.holds(6) && claims.holds(1) && !claims.holds(2) && !claims.holds(7));
        assert_eq!(
            claims.left_behind(9, "b", |_| JobAt::Same),
            Some((6, JobAt::Unreadable))
        );
        assert_eq!(claims.left_behind(6, "b", |_| JobAt::Same), None, "not its own");
    }

    #[test]
    fn a_claim_is_left_behind_when_its_number_holds_another_job_or_is_gone() {
        let lines = [(1, Line::of([intent(1, "a")])), (3, Line::of([intent(3, "a")]))];
        let claims = Claims::of(lines.iter().map(|(number, line)| (*number, line)));
        // Line 1 still holds a, line 3 now holds b: line 3's claim of a is
        // left behind, and a line 2 holding a is not sent.
        let now = |number: u64| if number == 1 { JobAt::Same } else { JobAt::Other };
        assert_eq!(claims.left_behind(2, "a", now), Some((3, JobAt::Other)));
        // Both still hold a: a third a is a new occurrence.
        assert_eq!(claims.left_behind(2, "a", |_| JobAt::Same), None);
        // A claim not read yet waits; one left behind answers first.
        let unread_first = |number: u64| if number == 1 { JobAt::Unread } else { JobAt::Other };
        assert_eq!(claims.left_behind(2, "a", unread_first), Some((3, JobAt::Other)));
        assert_eq!(claims.left_behind(2, "a", |_| JobAt::Unread), Some((1, JobAt::Unread)));
        // A line's own claim is never another's.
        assert_eq!(
            claims.left_behind(1, "a", |number| if number == 3 { JobAt::Same } else { JobAt::Other }),
            None
        );
        // A job nobody claimed.
        assert_eq!(claims.left_behind(2, "b", |_| JobAt::Other), None);
    }
}
