//! What a batch reports for each job.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use serde_json::Value;

use crate::job::{GridCell, Job};
use crate::line::Standing;

use genapi::FailureClass;
use genapi::TaskRef;

/// What a batch reports for one job.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct JobOutcome {
    /// Line of the job.
    pub line: u64,
    /// File stem of the job.
    pub name: String,
    /// The task, once accepted.
    pub task: Option<TaskRef>,
    /// Where the line stands after this run: what the next run does with
    /// it, in the words `--status` and the store use ([`Standing`]). A line
    /// that ended without a result says why in [`JobOutcome::class`]
    /// (moderation, a refusal, …).
    pub standing: Standing,
    /// The saved file.
    pub file: Option<PathBuf>,
    /// Seed reported by the service.
    pub seed: Option<i128>,
    /// Cost in credits: the one the service settled when the task ended,
    /// else the one its acceptance reported.
    pub cost: Option<f64>,
    /// Task duration reported by the service, in seconds.
    pub duration: Option<f64>,
    /// Time this run spent on the job.
    pub elapsed: Duration,
    /// What went wrong, and what to do about it.
    pub error: Option<String>,
    /// The class of failure.
    pub class: Option<FailureClass>,
    /// Finished in an earlier run: nothing was sent or downloaded now.
    pub from_journal: bool,
    /// The task was accepted in an earlier run and polled in this one.
    pub resumed: bool,
    /// What was asked, as a gallery or a report shows it.
    pub request: Requested,
    /// When the outcome was known.
    pub finished_at: Option<SystemTime>,
    /// The cost the service settled when the task ended, if it reported
    /// one: the only one a price is learned from.
    pub(crate) settled: Option<f64>,
}

/// What a job asked for, in the words of its result line: enough to show
/// the line beside its image without the job file.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Requested {
    /// The model: its path without `/v1/`.
    pub model: Option<String>,
    /// The prompt, when the request has one.
    pub prompt: Option<String>,
    /// The requested width and height, when the request gives both.
    pub size: Option<(u64, u64)>,
    /// Its place in a sweep.
    pub cell: Option<GridCell>,
}

impl Requested {
    /// What `job` asks for.
    pub fn of(job: &Job) -> Requested {
        let number = |field: &str| job.body.get(field).and_then(Value::as_u64);
        Requested {
            model: Some(job.path.strip_prefix("/v1/").unwrap_or(&job.path).to_string()),
            prompt: job.body.get("prompt").and_then(Value::as_str).map(str::to_string),
            size: number("width").zip(number("height")),
            cell: job.cell.clone(),
        }
    }
}

impl JobOutcome {
    /// Whether the cap counts this line at all it held for good: its task
    /// ended (saved, or failed other than by moderation, which charges
    /// nothing) without a settled cost of at least
    /// [`LEAST_PRICE`](crate::LEAST_PRICE), as against a service that
    /// reports a cost only when it accepts a task.
    pub fn counted_at_its_hold(&self) -> bool {
        let ended = match self.standing {
            Standing::Saved => true,
            Standing::Ended => self.class != Some(FailureClass::Moderated),
            _ => false,
        };
        ended && self.task.is_some() && !self.settled.is_some_and(crate::cap::plausible)
    }

    pub(crate) fn new(line: u64, name: &str, standing: Standing) -> JobOutcome {
        JobOutcome {
            line,
            name: name.to_string(),
            task: None,
            standing,
            file: None,
            seed: None,
            cost: None,
            duration: None,
            elapsed: Duration::ZERO,
            error: None,
            class: None,
            from_journal: false,
            resumed: false,
            request: Requested::default(),
            finished_at: None,
            settled: None,
        }
    }
}
