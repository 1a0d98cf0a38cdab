//! Batch generation that never loses or doubles a paid task.
//!
//! [`Batch`] turns an iterator of [`Job`]s into a stream of [`JobOutcome`]s,
//! keeping up to the active-task limit in flight, and keeps its lines in a
//! [`Store`] so that running the same batch again after a crash, a Ctrl-C or
//! a lost network polls what was accepted instead of submitting it again:
//! a [`JournalStore`] over a [`Journal`] ([`FileJournal`] on disk,
//! [`MemoryJournal`] in memory, or your own) for one process, or the
//! PostgreSQL ledger of the `genapi-ledger` crate for many workers. A line
//! whose submission was sent but never answered is not sent again on its
//! own; if its task id turns up, [`adopt`] gives it back to the line.
//!
//! A job file ([`JobFile`]) holds one [`JobLine`] per line: checked against
//! the document before anything is sent, then read as [`Job`]s. The
//! `genapi batch` command reads its job files so; with the `schema` feature,
//! [`JobLine::schema`] gives a line's JSON Schema.

mod adopt;
mod budget;
mod job;
mod job_file;
mod journal;
mod outcome;
mod result_line;
mod run;
mod standing;
mod store;

pub use adopt::{adopt, AdoptError, Adopted};
pub use budget::{Credits, Hold};
pub use job::{safe_stem, GridCell, Job, JobLine};
pub use job_file::{InvalidLine, JobFile, Jobs, LineProblem, INVALID_LINES_KEPT, JOB_FILE_LIMIT};
pub use journal::{Event, FileJournal, Journal, LineState, MemoryJournal};
pub use outcome::{JobOutcome, JobStatus, Requested};
pub use result_line::ResultLine;
pub use run::{Batch, Counters, Stopper};
pub use standing::{SharedStatus, Standing, Status};
pub use store::{Claim, JournalStore, Store, StoreError};
