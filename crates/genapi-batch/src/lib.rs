//! Batch generation that never loses or doubles a paid task.
//!
//! [`Batch`] turns an iterator of [`Job`]s into a stream of [`JobOutcome`]s,
//! keeping up to the active-task limit in flight, and keeps a [`Journal`]
//! ([`FileJournal`] on disk, [`MemoryJournal`] in memory, or your own) so that
//! running the same batch again after a crash, a Ctrl-C or a lost network
//! polls what was accepted instead of submitting it again. A line whose
//! submission was sent but never answered is not sent again on its own; if
//! its task id turns up, [`adopt`] gives it back to the line.
//!
//! A job file ([`JobFile`]) holds one [`JobLine`] per line: checked against
//! the document before anything is sent, then read as [`Job`]s. The
//! `genapi batch` command reads its job files so; with the `schema` feature,
//! [`JobLine::schema`] gives a line's JSON Schema.

mod adopt;
pub(crate) mod budget;
mod job;
mod job_file;
mod journal;
mod outcome;
mod result_line;
mod run;
mod standing;
mod store;

pub use adopt::{adopt, AdoptError, Adopted};
pub use job::{safe_stem, GridCell, Job, JobLine};
pub use job_file::{InvalidLine, JobFile, Jobs, LineProblem, INVALID_LINES_KEPT, JOB_FILE_LIMIT};
#[cfg(feature = "postgres")]
pub(crate) use journal::{line_state, LineState};
pub use journal::{FileJournal, Journal, MemoryJournal, Record};
pub use outcome::{JobOutcome, JobStatus, Requested};
pub use result_line::ResultLine;
pub use run::{Batch, Counters, Stopper};
pub use standing::{standings, Standing};
pub use store::SharedStore;

#[cfg(feature = "postgres")]
pub mod ledger;
