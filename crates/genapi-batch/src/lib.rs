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
//! ```no_run
//! # async fn demo(client: genapi::Client) -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use futures::StreamExt;
//! use genapi_batch::{Batch, FileJournal, JobFile, JournalStore, ReadStore, Standing};
//! // Every line checked before anything is sent.
//! let file = JobFile::check("jobs.jsonl")?;
//! std::fs::create_dir_all("out")?;
//! // Kept behind an Arc to ask it where the batch stands afterwards.
//! let store = Arc::new(JournalStore::open(FileJournal::open("out/journal.jsonl")?)?);
//! let jobs = file.jobs()?.filter_map(Result::ok);
//! let outcomes: Vec<_> = Batch::new(client, store.clone(), "out").max_credits(50.0).run(jobs)?.collect().await;
//! for outcome in &outcomes {
//!     println!("line {}: {}", outcome.line, outcome.standing.as_str());
//! }
//! let status = store.status(&[]).await?;
//! let unknown = status.lines.values().filter(|s| **s == Standing::Unanswered).count();
//! println!("{unknown} lines were sent without an answer: find their tasks and `adopt` them");
//! # Ok(()) }
//! ```
//!
//! A job file ([`JobFile`]) holds one [`JobLine`] per line: checked against
//! the document before anything is sent, then read as [`Job`]s. The
//! `genapi batch` command reads its job files so; with the `schema` feature,
//! `JobLine::schema` gives a line's JSON Schema.

mod adopt;
mod answer;
mod budget;
mod cap;
mod decide;
mod identity;
mod job;
mod job_file;
mod journal;
mod line;
mod notify;
mod outcome;
mod prices;
mod result_line;
mod run;
mod standing;
mod store;

pub use adopt::{adopt, AdoptError, Adopted};
pub use cap::{cap_passed, Credits, Hold, SettledCost, LEAST_PRICE};
pub use decide::{decide, refused_for_the_edit, Action, Asked, Seen};
pub use identity::{Claims, JobAt};
pub use job::{safe_stem, GridCell, Job, JobLine};
pub use job_file::{InvalidLine, JobFile, Jobs, LineProblem, INVALID_LINES_KEPT, JOB_FILE_LIMIT};
pub use journal::{Event, FileJournal, Journal, MemoryJournal};
pub use line::{AcceptedTask, Ending, FailedStatus, Line, Sent, Standing};
pub use notify::NotifyAt;
pub use outcome::{JobOutcome, Requested};
pub use prices::{Estimate, ModelEstimate, PriceBook, Prices, Unpriced, MOST_CREDITS};
pub use result_line::ResultLine;
pub use run::{Batch, Counters, Stopper};
pub use standing::{SharedStatus, Status};
pub use store::{Claim, CreditHolds, JournalStore, JournalView, ReadStore, Store, StoreError, WriteStore};
