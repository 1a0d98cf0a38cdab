//! # genapi-ledger
//!
//! A batch, its active-task seats and its spending shared by many workers,
//! through PostgreSQL: the shared [`genapi_batch::Store`] of genapi's
//! batches, and a [`genapi::SeatPool`] for any client.
//!
//! One process with a [`genapi_batch::FileJournal`] already runs a batch
//! without ever paying twice. Several processes, on one machine or many,
//! share one batch through a [`Ledger`]:
//!
//! - each line is **claimed** by one worker at a time, with a lease the
//!   worker renews while it lives. A line whose lease lapsed, or whose
//!   worker's session ended (its process died: see `liveness`), is
//!   claimed by another, which reads the line's events as a
//!   restarted run reads its journal: an accepted task is polled and saved,
//!   never submitted again; a submission sent but never answered is
//!   reported unknown, never sent again on its own;
//! - the events are the file journal's ([`genapi_batch::Event`]), one row
//!   each; an intent is written only while the worker still holds the line,
//!   so a worker that lost its lease (a pause, a partition) sends nothing;
//! - [`SharedSeats`] share the active-task limit: a seat is a row, taken
//!   with `FOR UPDATE SKIP LOCKED` (never by counting rows, which races),
//!   and a dead worker's seat comes back only once its task can no longer
//!   be running;
//! - the spending cap ([`genapi_batch::Batch::max_credits`]) holds credits
//!   per line in the ledger, by the batch's one rule
//!   ([`genapi_batch::Credits`]: a kind is priced only by costs the service
//!   settled), so all workers together stay under it;
//! - lines are claimed a block at a time, in one statement that skips the
//!   lines another worker is claiming (`FOR UPDATE SKIP LOCKED`), so
//!   workers walking the same job file do not wait on each other;
//! - a worker may keep its name from one run to the next
//!   ([`LedgerOptions::worker_name`], [`LedgerOptions::worker_for_folder`]):
//!   started again, it takes back its lines at once instead of waiting for
//!   their lease. One live process holds a name at a time; a name still
//!   held (its earlier run's connections not yet ended by the database) is
//!   waited for a moment ([`LedgerOptions::name_wait`]);
//! - every database step has a deadline ([`LedgerOptions::step_deadline`]),
//!   and a connection that broke (the server restarted) is opened again
//!   with a growing pause, the step run again on it;
//! - a line costs the database two commits: its intent and its acceptance,
//!   each carrying the worker's seat changes
//!   ([`Ledger::carry_seat_changes`]); its end waits a moment for the next
//!   event to carry it, and its caller still waits until it is stored.
//!
//! The same database keeps [`SharedRecords`]: small records that several
//! processes share, each written only on the version its writer read (the
//! memory `genapi proxy` shares with its peers).
//!
//! The ledger owns its schema: numbered migrations applied on first use. It
//! never stores the API key or images.
//!
//! The connection is protected as the URL's `sslmode`, `sslrootcert` and
//! `require_auth` ask, read as libpq reads them: see [`tls`] for what each
//! checks, and when the password may be sent.

#[macro_use]
mod liveness;
mod carried;
mod connect;
mod dial;
mod ends;
mod error;
mod guard;
mod lines;
mod link;
mod naming;
mod options;
mod records;
mod schema;
mod seats;
mod store;
pub mod tls;
mod wants;

pub use error::LedgerError;
pub use lines::Ledger;
pub use link::DEFAULT_STEP_DEADLINE;
pub use naming::DEFAULT_NAME_WAIT;
pub use options::{LedgerOptions, DEFAULT_LEASE, DEFAULT_RESCUE_GRACE};
pub use records::{Record, RecordHold, SharedRecords};
pub use seats::{SharedSeats, UNANSWERED_SEAT_HOLD};
pub use store::ReadOnlyLedger;
