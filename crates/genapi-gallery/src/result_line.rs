//! One line of `results.jsonl`, as the gallery reads it.
//!
//! The results file is the gallery's only input, so a page made during a
//! run and one rebuilt from the folder afterwards agree. Every field but
//! the line number and the status is optional: results of older runs lack
//! the newer fields, and a line that failed before it was sent has no task.

use serde::{Deserialize, Serialize};

/// The result of one line of a batch.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ResultLine {
    /// Its number in the job file (the first line is 1).
    pub line: u64,
    /// How it ended: `succeeded`, `failed`, `moderated`, `pending`,
    /// `unknown`, `not_submitted` or `invalid`.
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
    /// Credits charged.
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

/// Where a line sits in a sweep: its row (usually the prompt) and its
/// column (the swept value, e.g. `seed 2`).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct GridCell {
    /// The row's label.
    pub row: String,
    /// The column's label.
    pub column: String,
}

impl ResultLine {
    /// Whether the line produced an image to show.
    pub fn succeeded(&self) -> bool {
        self.status == "succeeded" && self.file.is_some()
    }
}
