//! One folder, one store, held while a run uses it.
//!
//! A folder's lines belong to one store: its journal, or one ledger batch
//! (the `.ledger-batch` mark says which). Checking the folder and then
//! using it would leave a moment in which another run finds it free too,
//! and both would pay for the same lines. So the checks are made under
//! locks, held as long as they must be:
//!
//! - **A run by the journal holds the folder alone**: the journal locks its
//!   directory for the run ([`genapi_batch::FileJournal::open`]), and looks
//!   for a ledger's mark only once it holds it.
//! - **A run by a ledger holds the folder shared** with the batch's other
//!   workers, for the whole run, so no run by the journal starts beside
//!   them.
//! - **A ledger run's checks and its mark are made one run at a time**,
//!   under a lock of their own (`.ledger-batch.lock`), so two batches
//!   started in one new folder at once do not both find it unmarked.

use std::fs::File;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;

use super::shown;
use crate::{code, Failure};

/// The lock taken while a ledger run checks and marks its folder.
const MARKING_LOCK: &str = ".ledger-batch.lock";

/// How often a lock held elsewhere is tried again.
const TRY_EVERY: Duration = Duration::from_millis(20);

/// How long a ledger run tries for the folder a run by the journal may be
/// leaving: a run that has just ended may still be seen holding it for an
/// instant (a child process holds a copy of its open files until it runs
/// its own program).
const LEAVING_WITHIN: Duration = Duration::from_millis(500);

/// The folder, held for a ledger run's length (shared with the batch's
/// other workers); released when dropped.
pub(super) struct Shared(#[allow(dead_code)] Option<File>);

/// The marking lock, held while a ledger run checks and marks the folder.
pub(super) struct Marking(#[allow(dead_code)] Option<File>);

/// Holds `out_dir` for a ledger run: refused while a run by the journal
/// holds it.
pub(super) async fn share(out_dir: &Path) -> Result<Shared, Failure> {
    let Ok(folder) = File::open(out_dir) else {
        // A folder that cannot be opened to be locked cannot be locked:
        // the marks still guard it, as before locks.
        return Ok(Shared(None));
    };
    let until = Instant::now() + LEAVING_WITHIN;
    loop {
        match folder.try_lock_shared() {
            Ok(()) => return Ok(Shared(Some(folder))),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < until => tokio::time::sleep(TRY_EVERY).await,
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Failure::usage(format!(
                    "--out {}: a run without --ledger is using this folder, and its journal's lines are tasks the \
                     ledger knows nothing of: running with --ledger would send (and pay for) them again; let that \
                     run end and finish the batch as it was run (without --ledger); nothing was sent",
                    shown(out_dir)
                )))
            }
            // A file system without locks: the marks still guard it.
            Err(std::fs::TryLockError::Error(_)) => return Ok(Shared(None)),
        }
    }
}

/// Takes the marking lock of `out_dir`, waiting (until `deadline`) for
/// another ledger run checking the folder.
pub(super) async fn marking(out_dir: &Path, deadline: Instant) -> Result<Marking, Failure> {
    let path = out_dir.join(MARKING_LOCK);
    let cannot = |e: &dyn std::fmt::Display| Failure::new(code::OTHER, format!("cannot open {}: {e}", shown(&path)));
    match genapi_files::write_private(&path, b"", genapi_files::Existing::Keep) {
        Ok(_) | Err(genapi_files::FileError::Exists { .. }) => {}
        Err(e) => return Err(cannot(&e)),
    }
    // Open for writing: some file systems (NFS) lock a file for one
    // writer only when it is open for writing.
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&path)
        .map_err(|e| cannot(&e))?;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(Marking(Some(lock))),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => tokio::time::sleep(TRY_EVERY).await,
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(Failure::new(
                    code::TIMEOUT,
                    format!(
                        "--timeout passed while another run with --ledger was checking --out {} (it holds {}); \
                         nothing was sent",
                        shown(out_dir),
                        MARKING_LOCK
                    ),
                ))
            }
            Err(std::fs::TryLockError::Error(_)) => return Ok(Marking(None)),
        }
    }
}
