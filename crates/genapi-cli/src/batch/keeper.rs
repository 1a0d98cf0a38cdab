//! Where a batch is kept between runs: the journal in `--out`, for one
//! process, or a PostgreSQL ledger (`--ledger`), for workers sharing the
//! batch and the account's seats. Both are a [`genapi_batch::Store`]; the
//! rest of the command does not know which it has, except that a ledger
//! comes with the seats its workers share.
//!
//! Opening refuses, before anything is sent, what would pay twice or strand
//! tasks: a journal that lost its records beside results naming tasks, tasks
//! of a built-in mock that ended, and a ledger shared through a built-in
//! mock no other worker can reach. `--status` opens either to read only
//! ([`read_status`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use genapi_batch::{safe_stem, FileJournal, JournalStore, JournalView, ReadStore, Standing, Status, Store, StoreError};
use genapi_ledger::{Ledger, LedgerError, LedgerOptions, ReadOnlyLedger, SharedSeats};

use super::results::lines_that_may_have_paid;
use super::standing;
use super::{folder, shown, BatchArgs, Run, DEFAULT_MAX_ACTIVE, JOURNAL, LEDGER_MARK, RESULTS};
use crate::{code, connect_with, out, Connection, Failure, Global};

/// A batch's store, opened for a run.
pub(super) struct Keeper {
    /// The journal's store or the ledger.
    pub(super) store: Box<dyn Store>,
    /// With a ledger, the seats its workers share.
    pub(super) seats: Option<SharedSeats>,
    /// With a ledger, the folder held shared for the run ([`folder`]).
    pub(super) folder: Option<folder::Shared>,
}

impl Keeper {
    /// The service, with the active-task limit the batch keeps to: the
    /// shared seats with a ledger, else `--max-active`.
    pub(super) async fn connect(&self, run: &Run<'_>) -> Result<Connection, Failure> {
        let max_active = run.args.max_active.map_or(DEFAULT_MAX_ACTIVE, |n| n as usize);
        match &self.seats {
            Some(seats) => connect_with(run.global, |builder| builder.shared_seats(seats.pool(), seats.limit())).await,
            None => connect_with(run.global, |builder| builder.max_active_tasks(max_active)).await,
        }
    }
}

/// The ledger's address when the batch is shared (`--ledger`, else
/// `GENAPI_LEDGER_URL`); refuses what makes no sense without one, or with
/// the built-in mock.
pub(super) fn ledger_url(run: &Run<'_>) -> Result<Option<String>, Failure> {
    let args = &run.args;
    let url = args
        .ledger
        .clone()
        .or_else(|| std::env::var(crate::config::LEDGER_VARIABLE).ok())
        .filter(|url| !url.trim().is_empty());
    match url {
        None if args.batch_name.is_some() => Err(Failure::usage(
            "--batch-name names the batch in a ledger: it needs --ledger URL (or GENAPI_LEDGER_URL)",
        )),
        Some(_) if crate::uses_builtin_mock(run.global) && !args.status => Err(Failure::usage(
            "--ledger shares a batch between workers of one service, but this run would use its own built-in \
             mock, which no other worker can see and which ends with it (its tasks and seats would be stranded \
             in the ledger): set GENAPI_BASE_URL and GENAPI_API_KEY, for instance to a `genapi mock` all the \
             workers share; nothing was sent",
        )),
        url => Ok(url),
    }
}

/// The batch's name in the ledger: `--batch-name`, else named after the job
/// file, not its contents, so a job file that changes under the same name
/// is refused (its lines would be paid for again in a new batch) rather than
/// silently a new batch.
fn batch_name(run: &Run<'_>) -> String {
    run.args.batch_name.clone().unwrap_or_else(|| {
        let file = run
            .jobs_file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("jobs:{}", safe_stem(&file))
    })
}

/// Opens the batch's store for a run in `out_dir` (which exists): the
/// ledger at `ledger_url` ([`ledger_url`]), else the folder's journal.
pub(super) async fn open(run: &Run<'_>, ledger_url: Option<String>, out_dir: &Path) -> Result<Keeper, Failure> {
    match ledger_url {
        None => open_journal(out_dir).await,
        Some(url) => {
            // Held before anything is checked, so nothing checked changes
            // under the run ([`folder`]).
            let shared = folder::share(out_dir).await?;
            let marking = folder::marking(out_dir, run.deadline).await?;
            refuse_a_journal_beside_the_ledger(out_dir).await?;
            let name = batch_name(run);
            // The folder's mark: the batch and the database it holds lines
            // of (by the database's own name, which no spelling of an
            // address changes), then the address as shown, for a reader.
            // Another batch (or database) in it knows none of its lines.
            refuse_another_ledgers_folder(out_dir, &name, None)?;
            let opening = open_ledger(run.global, &run.args, &url, &name, run.checked.digest(), out_dir);
            let (mut keeper, database) = tokio::time::timeout_at(run.deadline, opening)
                .await
                .map_err(|_| ledger_late(run.global))??;
            keeper.folder = Some(shared);
            let shown_url = genapi_text::shown_address(&url);
            refuse_another_ledgers_folder(out_dir, &name, Some((&database, &shown_url)))?;
            let mark = format!("{name}\nledger {database}\n{shown_url}");
            // Results of lines that may have been paid for, here or by
            // another worker, the ledger holds no record of (a journal
            // moved away, records lost): running would pay again.
            let status = keeper.store.status(run.job_lines()).await.map_err(store_failure)?;
            refuse_lost_records(
                out_dir,
                lines_that_may_have_paid(out_dir),
                &status,
                "the ledger's batch",
            )?;
            // Marked once the ledger took the batch, before anything is
            // sent: a run without the ledger here is refused from now on.
            genapi_files::write_private(
                &out_dir.join(LEDGER_MARK),
                mark.as_bytes(),
                genapi_files::Existing::Replace,
            )
            .map_err(|e| {
                Failure::new(
                    code::OTHER,
                    format!("cannot write {}: {e}", shown(&out_dir.join(LEDGER_MARK))),
                )
            })?;
            drop(marking);
            Ok(keeper)
        }
    }
}

/// A folder a run with another ledger's batch marked (another batch, or
/// the same name in another database: `database`, its id and its address
/// as shown, once the ledger is open) is refused, finished or not: that
/// batch's records say which of its jobs were paid for, and this batch
/// does not read them. A copy of its job file (edited, or only renamed,
/// which names another batch) would pay again for every job they share,
/// its line numbers moved or not.
fn refuse_another_ledgers_folder(out_dir: &Path, name: &str, database: Option<(&str, &str)>) -> Result<(), Failure> {
    let Some(found) = ledger_mark(out_dir)? else {
        return Ok(());
    };
    let mut lines = found.lines();
    let (found_name, found_database) = (lines.next().unwrap_or_default(), lines.next().unwrap_or_default());
    let other_batch = found_name != name;
    // A mark of an earlier release names the database by its address as
    // shown, which is compared as it was then (and the mark rewritten).
    let other_database = database.is_some_and(|(id, shown)| match found_database.strip_prefix("ledger ") {
        Some(found_id) => found_id != id,
        None => found_database != shown,
    });
    if !(other_batch || other_database) {
        return Ok(());
    }
    let whose = if other_batch {
        format!("another ledger batch ({:?})", out::clean(found_name))
    } else {
        format!("batch {:?} in another ledger database", out::clean(found_name))
    };
    Err(Failure::usage(format!(
        "--out {}: a run of {whose} used this folder, whose records of paid tasks this batch does not read: a job \
         of that batch here (its job file copied, renamed or edited) would be sent (and paid for) again; give that \
         batch's --batch-name and ledger, or put only new jobs in a job file of their own, with another --out \
         folder; nothing was sent",
        shown(out_dir),
    )))
}

/// A folder whose journal holds records of a run without the ledger is
/// refused for a run with it: the ledger knows nothing of those lines'
/// tasks, and would send (and pay for) them again.
async fn refuse_a_journal_beside_the_ledger(out_dir: &Path) -> Result<(), Failure> {
    if !genapi_files::is_taken(&out_dir.join(JOURNAL)) {
        return Ok(());
    }
    let recorded = journal_view(out_dir).status(&[]).await.map(|status| status.lines.len());
    if matches!(recorded, Ok(0)) {
        return Ok(());
    }
    Err(Failure::usage(format!(
        "--out {}: its {JOURNAL} holds the lines of a run without --ledger, whose tasks the ledger knows nothing of: \
         running with --ledger would send (and pay for) them again; finish that batch as it was run (without \
         --ledger): another --out folder would start it over, every line sent and paid for again; nothing was \
         sent",
        shown(out_dir)
    )))
}

/// A folder a run with `--ledger` marked is refused without it, by a run
/// and by `--status` alike: only the ledger knows its lines' tasks.
fn refuse_a_ledgers_folder(out_dir: &Path) -> Result<(), Failure> {
    match ledger_mark(out_dir)? {
        Some(batch) => Err(Failure::usage(format!(
            "--out {}: a run with --ledger used this folder (batch {:?}), and only the ledger knows its lines' tasks: \
             running without it would send (and pay for) them again; give the same --ledger (GENAPI_LEDGER_URL), to \
             run the batch or see where it stands: another --out folder would start the batch over, every line sent \
             and paid for again; nothing was sent",
            shown(out_dir),
            out::clean(batch.lines().next().unwrap_or_default())
        ))),
        None => Ok(()),
    }
}

/// The folder's ledger mark, if it has one. Anything at its name but a
/// mark that can be read (another owner's, a folder, a pipe, a link, even
/// to nothing) is refused, not taken for none: the folder's lines may be a
/// ledger's. Bytes that are not text are read as what they spell, which
/// names no batch.
fn ledger_mark(out_dir: &Path) -> Result<Option<String>, Failure> {
    use std::io::Read as _;
    let path = out_dir.join(LEDGER_MARK);
    if let Err(e) = std::fs::symlink_metadata(&path) {
        if e.kind() == std::io::ErrorKind::NotFound {
            return Ok(None);
        }
    }
    // Never through a link, never waiting on a pipe; a mark is three short
    // lines: more is not a mark this release wrote.
    let opened = genapi_files::open_written(&path, 64 * 1024)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|mut file| {
            let mut bytes = Vec::new();
            file.read_to_end(&mut bytes).map(|_| bytes)
        });
    match opened {
        Ok(bytes) => Ok(Some(String::from_utf8_lossy(&bytes).into_owned())),
        Err(e) => Err(Failure::usage(format!(
            "--out {}: its ledger mark ({LEDGER_MARK}) cannot be read ({e}): a run with --ledger may have used \
             this folder, whose lines' tasks only that ledger knows; make it readable again, or use the folder \
             with that batch's --batch-name and --ledger; nothing was sent",
            shown(out_dir)
        ))),
    }
}

/// The journal in `out_dir`, locked for this process; refused in a folder
/// a run with `--ledger` used, whose lines' tasks only the ledger knows.
async fn open_journal(out_dir: &Path) -> Result<Keeper, Failure> {
    refuse_a_ledgers_folder(out_dir)?;
    let new = !genapi_files::is_taken(&out_dir.join(JOURNAL));
    let journal = FileJournal::open(out_dir.join(JOURNAL)).map_err(|e| {
        if matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::InvalidData
        ) {
            // The folder may be held by a ledger batch's workers too.
            Failure::usage(format!(
                "{e}, or by the workers of a batch run with --ledger, which hold its folder while they run; nothing \
                 was sent"
            ))
        } else {
            Failure::new(
                code::OTHER,
                format!("cannot open the journal in {}: {e}", shown(out_dir)),
            )
        }
    })?;
    // Looked for again now that the journal holds the folder: a ledger run
    // may have marked it since ([`folder`]).
    if let Err(refused) = refuse_a_ledgers_folder(out_dir) {
        drop(journal);
        if new {
            let _ = std::fs::remove_file(out_dir.join(JOURNAL));
        }
        return Err(refused);
    }
    // A journal whose events cannot be read is the user's to look at (as
    // it is for --status); one the disk cannot give is another failure.
    let store = JournalStore::open(journal).map_err(|e| {
        let message = format!("cannot read the journal in {}: {e}; nothing was sent", shown(out_dir));
        match e.kind() {
            std::io::ErrorKind::InvalidData => Failure::usage(message),
            _ => Failure::new(code::OTHER, message),
        }
    })?;
    let status = store.status(&[]).await.map_err(store_failure)?;
    refuse_lost_records(out_dir, lines_that_may_have_paid(out_dir), &status, JOURNAL)?;
    // Tasks that lived in a built-in mock that ended cannot be polled by
    // anyone: said at once, instead of polling them until --timeout.
    let gone: Vec<u64> = status
        .lines
        .iter()
        .filter(|(_, standing)| **standing == Standing::Gone)
        .map(|(line, _)| *line)
        .collect();
    if !gone.is_empty() {
        return Err(Failure::usage(format!(
            "{}; nothing was sent",
            standing::gone_advice(&gone, out_dir, false)
        )));
    }
    Ok(Keeper {
        store: Box::new(store),
        seats: None,
        folder: None,
    })
}

/// A journal that lost records (emptied, cut, replaced) would have their
/// lines submitted (and paid for) again: `sent` is what results.jsonl says
/// was ([`lines_that_may_have_paid`]), `status` what the journal holds.
/// Refused, by a run and by `--status` alike, with what to do.
fn refuse_lost_records(
    out_dir: &Path,
    sent: Option<BTreeSet<u64>>,
    status: &Status,
    store: &str,
) -> Result<(), Failure> {
    let lost = match sent {
        Some(sent) => {
            // A line a store knows of and never sent holds no record of a
            // submission: a ledger knows a line by its claim alone.
            let lost: Vec<u64> = sent
                .into_iter()
                .filter(|line| matches!(status.lines.get(line), None | Some(Standing::Unsent)))
                .collect();
            (!lost.is_empty()).then(|| (standing::counted(&lost), lost.len() == 1))
        }
        // Results that cannot be read beside an empty journal: any line
        // may have been sent.
        None if status.lines.is_empty() => Some(("lines".to_string(), false)),
        None => None,
    };
    if let Some((which, one)) = lost {
        let (was, it, its) = if one {
            ("was", "it", "its file")
        } else {
            ("were", "them", "their files")
        };
        return Err(Failure::usage(format!(
            "--out {}: {RESULTS} says {which} of an earlier run {was} sent, but {store} holds no record of {it}, \
             so running would submit (and pay for) {it} again and overwrite {its}; restore {JOURNAL} from a copy \
             (and run as that run did), or, to start over and pay again, move {RESULTS} and the images away (or \
             choose another --out directory); nothing was sent",
            shown(out_dir)
        )));
    }
    Ok(())
}

/// The ledger's batch `name`, with the seat pool this worker counts in,
/// and the ledger database's own name ([`Ledger::database_id`]).
async fn open_ledger(
    global: &Global,
    args: &BatchArgs,
    url: &str,
    name: &str,
    digest: &str,
    out_dir: &Path,
) -> Result<(Keeper, String), Failure> {
    let options = LedgerOptions::default()
        .lease(Duration::from_secs(args.ledger_lease))
        // Each database step ends within half of --timeout, so a database
        // that stops answering cannot hold the worker past it, and the lines
        // it kept from being sent are reported.
        .step_deadline((crate::timeout_if_given(global) / 2).min(genapi_ledger::DEFAULT_STEP_DEADLINE));
    let options = match &args.worker_name {
        Some(name) => options.worker_name(name.clone()),
        None => options.worker_for_folder(out_dir),
    };
    let hold = genapi_ledger::UNANSWERED_SEAT_HOLD;
    // The pool's size is checked first: a refused worker leaves no batch behind.
    let seats = match args.max_active {
        Some(size) => SharedSeats::connect_with(url, &args.seats_pool, size as usize, &options, hold).await,
        None => SharedSeats::join_with(url, &args.seats_pool, DEFAULT_MAX_ACTIVE, &options, hold).await,
    }
    .map_err(ledger_failure)?;
    // The batch's lines under the name the seats got: a worker whose seats
    // and lines went by two names (one of them `#2`, taken while its
    // earlier run's connection still held the other) would leave that
    // run's seats or lines to their lease, and wait for them.
    let mut ledger = Ledger::open_with(url, name, digest, options.worker_name(seats.worker()))
        .await
        .map_err(ledger_failure)?;
    // One commit per event, the seats' changes written with them.
    ledger.carry_seat_changes(&seats).map_err(ledger_failure)?;
    let database = ledger.database_id().to_string();
    let keeper = Keeper {
        store: Box::new(ledger),
        seats: Some(seats),
        folder: None,
    };
    Ok((keeper, database))
}

/// Where `--status` found the batch.
pub(super) enum Place {
    /// The journal in this `--out` folder.
    Journal(PathBuf),
    /// This batch of the ledger.
    Ledger(String),
}

/// `--status`: where the batch stands, read through its store opened to
/// read only, the ledger at `ledger_url` or else the journal in `--out`
/// (nothing is created, changed or sent). `None` when the store does not
/// hold the batch yet.
pub(super) async fn read_status(run: &Run<'_>, ledger_url: Option<String>) -> Result<(Place, Option<Status>), Failure> {
    let reading = async {
        let (place, store): (Place, Option<Box<dyn ReadStore>>) = match ledger_url {
            Some(url) => {
                let name = batch_name(run);
                // Only read: a batch no worker has started is not created.
                let ledger = ReadOnlyLedger::open(&url, &name, run.checked.digest())
                    .await
                    .map_err(ledger_failure)?;
                (Place::Ledger(name), ledger.map(|ledger| Box::new(ledger) as _))
            }
            None => {
                let out_dir = run.args.out.clone().ok_or_else(|| {
                    Failure::usage("--status reads the journal in --out DIR (or a ledger, with --ledger URL)")
                })?;
                refuse_a_ledgers_folder(&out_dir)?;
                // No journal there: no run of the batch has started in it.
                let journal = genapi_files::is_taken(&out_dir.join(JOURNAL)).then(|| journal_view(&out_dir));
                // What a run would refuse, --status says: not "not sent" of
                // lines results.jsonl says were. Results first: a run
                // records a line in the journal before its result, so a
                // journal read after them holds every line they name, even
                // while a run goes on.
                let sent = lines_that_may_have_paid(&out_dir);
                let recorded = match &journal {
                    Some(view) => view
                        .status(&[])
                        .await
                        .map_err(|error| unreadable(&Place::Journal(out_dir.clone()), error))?,
                    None => Status::default(),
                };
                refuse_lost_records(&out_dir, sent, &recorded, JOURNAL)?;
                (Place::Journal(out_dir), journal.map(|view| Box::new(view) as _))
            }
        };
        let Some(store) = store else {
            return Ok((place, None));
        };
        match store.status(run.job_lines()).await {
            // What a run would refuse for an edit of the job file, --status
            // says too. (A ledger refuses an edited file whole.)
            Ok(status) if matches!(place, Place::Journal(_)) => {
                let lines = store.lines().await.map_err(|error| unreadable(&place, error))?;
                let jobs = run.checked.jobs().into_iter().flatten().filter_map(Result::ok);
                Ok((place, Some(status.with_job_file(&lines, jobs))))
            }
            Ok(status) => Ok((place, Some(status))),
            Err(error) => Err(unreadable(&place, error)),
        }
    };
    // Only a database can keep it waiting: a journal is read at once.
    tokio::time::timeout_at(run.deadline, reading)
        .await
        .map_err(|_| ledger_late(run.global))?
}

/// How long a stopped run reads where its lines stand for its results.
const STANDINGS_WITHIN: Duration = Duration::from_secs(5);

/// Where each line stands now, as the store (the ledger, else the journal
/// in `out_dir`) has it: read for the results of a run that stopped, whose
/// lines in flight at the stop stand sent or accepted, not as before the
/// run. `None` when the store cannot say within a few seconds.
pub(super) async fn standings_now(run: &Run<'_>, out_dir: &Path) -> Option<BTreeMap<u64, Standing>> {
    let reading = async {
        let status = match ledger_url(run).ok().flatten() {
            Some(url) => {
                let ledger = ReadOnlyLedger::open(&url, &batch_name(run), run.checked.digest())
                    .await
                    .ok()??;
                ledger.status(run.job_lines()).await.ok()?
            }
            None => journal_view(out_dir).status(run.job_lines()).await.ok()?,
        };
        Some(status.lines)
    };
    tokio::time::timeout(STANDINGS_WITHIN, reading).await.ok().flatten()
}

/// The journal in `out_dir` as the library reads it without taking the
/// file, so a run may hold it meanwhile.
pub(super) fn journal_view(out_dir: &Path) -> JournalView {
    JournalView::new(out_dir.join(JOURNAL))
}

/// A store `--status` could not read: a journal is the user's to look at
/// (as a run says too), a ledger fails by its class.
fn unreadable(place: &Place, error: StoreError) -> Failure {
    match place {
        Place::Journal(_) => Failure::usage(format!("--status: {}", out::clean(&error.to_string()))),
        Place::Ledger(_) => store_failure(error),
    }
}

/// The ledger could not be opened within --timeout.
fn ledger_late(global: &Global) -> Failure {
    Failure::new(
        code::TIMEOUT,
        format!(
            "--timeout {}s passed while opening the ledger (its database did not answer in time); nothing was sent",
            global.timeout_seconds()
        ),
    )
}

/// A ledger that could not be opened, with the exit code of its class
/// (the ledger's own mapping to [`StoreError`]); a pool of another size
/// is said with the flags that fix it.
fn ledger_failure(error: LedgerError) -> Failure {
    if let LedgerError::PoolSize { pool, size, asked } = &error {
        return Failure::usage(format!(
            "--max-active {asked}: seat pool {} in the ledger has {size} seats, and a pool has one size, which all \
             its workers share; leave --max-active out (or pass --max-active {size}) to work in it, or choose another \
             --seats-pool for {asked} seats; nothing was sent",
            out::clean(&format!("{pool:?}"))
        ));
    }
    let failure = store_failure(StoreError::from(error));
    Failure::new(failure.code, format!("{}; nothing was sent", failure.message))
}

/// A store that could not do what was asked, with its class's exit code.
pub(super) fn store_failure(error: StoreError) -> Failure {
    Failure::new(code::of(error.class()), out::clean(&error.to_string()))
}
