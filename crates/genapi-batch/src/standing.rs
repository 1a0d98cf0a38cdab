//! Where each line of a batch stands, as its journal tells: what the next
//! run does with it. A run that stops says this, and only this, about its
//! lines, so what it says is what the next run does.

use std::collections::{BTreeMap, HashMap};

use serde::Serialize;

use super::line::Line;
use super::line::Standing;
use crate::decide::{refused_for_the_edit, Seen};
use crate::identity::{Claims, JobAt};
use crate::job::Job;

/// Where a batch stands, as its store says ([`crate::ReadStore::status`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct Status {
    /// How each line the store knows of stands: what the next run does with
    /// it (a line it does not know of is sent).
    pub lines: BTreeMap<u64, Standing>,
    /// For a store workers share: where the workers are, and the credits.
    pub shared: Option<SharedStatus>,
}

impl Status {
    /// The status of a store that knows these lines' states.
    pub fn of_lines(lines: &BTreeMap<u64, Line>) -> Status {
        Status {
            lines: lines.iter().map(|(number, line)| (*number, line.standing())).collect(),
            shared: None,
        }
    }

    /// This status, with the job file as it is now: each line a run would
    /// refuse for an edit of the file ([`crate::decide`]'s first two rules:
    /// its job changed since its record, or its job was recorded under
    /// another line) stands [`Standing::Changed`], and a line whose record
    /// is of another job that holds no task stands [`Standing::Unsent`]
    /// (the run sends its new job). `lines` are the store's
    /// records ([`crate::ReadStore::lines`]), `jobs` the file's valid jobs.
    ///
    /// ```
    /// use std::collections::BTreeMap;
    /// use genapi_batch::{Event, Job, Line, Standing, Status};
    /// # let job = |line: u64, prompt: &str| Job::new(line, "/v1/gen-2-pro", serde_json::json!({"prompt": prompt}));
    /// // Line 1 sent "alpha"; then a line was inserted on top.
    /// let sent = job(1, "alpha");
    /// let intent = Event::Intent { line: 1, name: "a".into(), digest: sent.digest(), sent_at: None, ephemeral: false };
    /// let lines = BTreeMap::from([(1, Line::of([intent.clone()]))]);
    /// let status = Status::of_lines(&lines).with_job_file(&lines, [job(1, "zulu"), job(2, "alpha")]);
    /// assert_eq!(status.lines[&1], Standing::Changed);
    /// assert_eq!(status.lines[&2], Standing::Changed);
    ///
    /// // Line 1 sent "alpha", which was refused; "zulu" took its place: a
    /// // new job, which the next run sends.
    /// let refused = Event::Refused { line: 1, error: "402".into() };
    /// let lines = BTreeMap::from([(1, Line::of([intent, refused]))]);
    /// let status = Status::of_lines(&lines).with_job_file(&lines, [job(1, "zulu")]);
    /// assert_eq!(status.lines[&1], Standing::Unsent);
    /// ```
    pub fn with_job_file(mut self, lines: &BTreeMap<u64, Line>, jobs: impl IntoIterator<Item = Job>) -> Status {
        let current: HashMap<u64, String> = jobs.into_iter().map(|job| (job.line, job.digest())).collect();
        let claims = Claims::of(lines.iter().map(|(number, line)| (*number, line)));
        let mut held: HashMap<&str, usize> = HashMap::new();
        for digest in current.values() {
            *held.entry(digest.as_str()).or_default() += 1;
        }
        for (&number, digest) in &current {
            let line = lines.get(&number).cloned().unwrap_or_default();
            let sent = line.sent().and_then(|sent| sent.digest.as_deref());
            let seen = Seen {
                changed: sent.is_some_and(|sent| sent != digest),
                moved: claims
                    .refusing(
                        number,
                        digest,
                        |at| JobAt::in_file(&current, at, digest, true),
                        |job| held.get(job).copied().unwrap_or(0),
                        true,
                    )
                    .is_some(),
                saved_file: true,
                ..Seen::default()
            };
            if refused_for_the_edit(&line, seen).is_some() {
                self.lines.insert(number, Standing::Changed);
            } else if seen.changed {
                // Its record is of another job, which holds no task (a
                // refusal created nothing): the line's job is a new one,
                // which the next run sends.
                self.lines.insert(number, Standing::Unsent);
            }
        }
        self
    }

    /// The status of a store workers share.
    pub fn of_shared(lines: BTreeMap<u64, Standing>, shared: SharedStatus) -> Status {
        Status {
            lines,
            shared: Some(shared),
        }
    }
}

/// What the workers of a shared batch share besides its lines' standings:
/// the credits, and who holds which lines. How many lines stand where is
/// counted from [`Status::lines`], the one classification.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
#[non_exhaustive]
pub struct SharedStatus {
    /// The batch's name.
    pub batch: String,
    /// Credits the service reported charging.
    pub credits_charged: f64,
    /// Credits held for submissions whose cost is not known yet.
    pub credits_held: f64,
    /// Lines held by each live worker.
    pub workers: BTreeMap<String, Vec<u64>>,
}

impl SharedStatus {
    /// The batch `batch`, with nothing charged, held or taken yet.
    pub fn new(batch: &str) -> SharedStatus {
        SharedStatus {
            batch: batch.to_string(),
            ..SharedStatus::default()
        }
    }
}
