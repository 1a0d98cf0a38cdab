//! One line of a results file (`results.jsonl`): the outcome of one job as
//! data, written by [`JobOutcome::to_json`] and read back by anything that
//! shows a batch (the gallery, a report).
//!
//! One type serves both directions, so what is written and what is read
//! cannot drift apart. Every field but the line number and the status is
//! optional when read: results of older runs lack the newer fields, and a
//! line that failed before it was sent has no task.

use serde::{Deserialize, Serialize};

use crate::job::GridCell;
use crate::line::Standing;
use crate::outcome::JobOutcome;

/// The result of one line of a batch.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResultLine {
    /// Its number in the job file (the first line is 1).
    pub line: u64,
    /// Where the line stands after the run, in the one word of its
    /// [`Standing`] (`saved`, `ended`, `refused`, `accepted`, `unanswered`,
    /// `gone`, `unsent`), or `invalid` for a line of a job file that is not
    /// a job.
    /// [`ResultLine::standing`] reads it, and the words of earlier
    /// releases too.
    pub status: String,
    /// The name of its output (the file's stem).
    #[serde(default)]
    pub name: Option<String>,
    /// The saved file, as the batch wrote it (inside the output folder).
    #[serde(default)]
    pub file: Option<String>,
    /// The model (its path without `/v1/`).
    #[serde(default)]
    pub model: Option<String>,
    /// The prompt, when the request had one.
    #[serde(default)]
    pub prompt: Option<String>,
    /// The requested width, when the request gave one.
    #[serde(default)]
    pub width: Option<u64>,
    /// The requested height, when the request gave one.
    #[serde(default)]
    pub height: Option<u64>,
    /// The seed the service reported.
    #[serde(default)]
    pub seed: Option<i128>,
    /// Credits charged for the line's task, by this run or the one that
    /// sent it (`from_journal`, `resumed`): a run's lines sum to what the
    /// job cost over all its runs, and summing the lines of several runs
    /// counts such a line once per run.
    #[serde(default)]
    pub cost: Option<f64>,
    /// The task's duration as the service reported it, in seconds.
    #[serde(default)]
    pub duration: Option<f64>,
    /// The time the run spent on the line, in seconds.
    #[serde(default)]
    pub elapsed: Option<f64>,
    /// When the line's outcome was known, in seconds since 1970 (with
    /// `elapsed`, it gives the batch's wall time).
    #[serde(default)]
    pub finished_at: Option<f64>,
    /// The task, once accepted.
    #[serde(default)]
    pub task_id: Option<String>,
    /// The task's polling URL, once accepted, as a shared record keeps it
    /// ([`genapi_text::task_address`]: its `id`, and no other parameter).
    #[serde(default)]
    pub polling_url: Option<String>,
    /// Finished in an earlier run: nothing was sent or downloaded in this one.
    #[serde(default)]
    pub from_journal: bool,
    /// Accepted in an earlier run, which was charged for it, and polled in
    /// this one.
    #[serde(default)]
    pub resumed: bool,
    /// What went wrong, and what to do about it.
    #[serde(default)]
    pub error: Option<String>,
    /// The class of the failure (`validation`, `moderated`, …).
    #[serde(default)]
    pub class: Option<String>,
    /// The line's place in a sweep, when it is one of its cells.
    #[serde(default)]
    pub grid: Option<GridCell>,
}

impl ResultLine {
    /// Whether the line produced an image to show.
    pub fn saved(&self) -> bool {
        self.standing() == Some(Standing::Saved) && self.file.is_some()
    }

    /// Where the line stands: `None` for a line that is not a job
    /// (`invalid`) or a word this release does not know. Results files of
    /// earlier releases said `succeeded`, `failed`, `moderated`, `pending`,
    /// `unknown` and `not_submitted`; they are read as the standing each
    /// named.
    ///
    /// ```
    /// use genapi_batch::{ResultLine, Standing};
    /// let earlier = ResultLine { line: 1, status: "pending".into(), ..ResultLine::default() };
    /// assert_eq!(earlier.standing(), Some(Standing::Accepted));
    /// ```
    pub fn standing(&self) -> Option<Standing> {
        let word = match self.status.as_str() {
            "succeeded" => "saved",
            "failed" | "moderated" => "ended",
            "pending" => "accepted",
            "unknown" => "unanswered",
            "not_submitted" => "unsent",
            word => word,
        };
        Standing::from_word(word)
    }
}

impl From<&JobOutcome> for ResultLine {
    fn from(outcome: &JobOutcome) -> ResultLine {
        let seconds = |value: f64| (value * 1000.0).round() / 1000.0;
        ResultLine {
            line: outcome.line,
            status: outcome.standing.as_str().to_string(),
            name: Some(outcome.name.clone()),
            file: outcome.file.as_ref().map(|f| f.display().to_string()),
            model: outcome.request.model.clone(),
            prompt: outcome.request.prompt.clone(),
            width: outcome.request.size.map(|(width, _)| width),
            height: outcome.request.size.map(|(_, height)| height),
            seed: outcome.seed,
            cost: outcome.cost,
            duration: outcome.duration,
            elapsed: Some(seconds(outcome.elapsed.as_secs_f64())),
            finished_at: outcome
                .finished_at
                .and_then(|at| at.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|since| seconds(since.as_secs_f64())),
            task_id: outcome.task.as_ref().map(|t| t.id.clone()),
            polling_url: outcome.task.as_ref().map(|t| genapi_text::task_address(&t.polling_url)),
            from_journal: outcome.from_journal,
            resumed: outcome.resumed,
            error: outcome.error.clone(),
            class: outcome.class.map(|class| class.as_str().to_string()),
            grid: outcome.request.cell.clone(),
        }
    }
}

impl JobOutcome {
    /// The outcome as one JSON object (`line`, `name`, `task_id`, `status`,
    /// `file`, `seed`, `cost`, `duration`, `error`, `from_journal`,
    /// `resumed`, and what was asked:
    /// `model`, `prompt`, `width`, `height`, `grid`; `finished_at` in
    /// seconds since 1970), as a results file holds it.
    pub fn to_json(&self) -> serde_json::Value {
        // A struct of plain fields always serializes.
        serde_json::to_value(ResultLine::from(self)).unwrap_or_default()
    }
}
