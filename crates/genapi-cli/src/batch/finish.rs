//! The end of a run: the seats given back reach the ledger, results.jsonl
//! is put in place (a complete run only), and the summary says what the
//! lines came to. A run that stopped early says, line by line, what the next
//! run will do, read from the journal it left; the exit code is that of the
//! most serious failure, or 10 when stdout lost a task's id.

use std::path::Path;
use std::time::Duration;

use genapi_batch::ReadStore;
use genapi_ledger::SharedSeats;
use tokio::time::Instant;

use super::drive::Ended;
use super::keeper::journal_view;
use super::standing::{self, Lines};
use super::tally::{say, summary};
use super::{shown, Run, RESULTS};
use crate::{code, out, Failure};

/// How long the seats given back may take to reach the ledger at the end.
const SEATS_FLUSH: Duration = Duration::from_secs(5);

/// Ends the run in `out_dir` that came to `ended`, with the `seats` of its
/// ledger; `mock_prices` when a mock (built in or standalone) served it,
/// whose prices are illustrative.
pub(super) async fn finish(
    run: &Run<'_>,
    ended: Ended,
    seats: Option<SharedSeats>,
    out_dir: &Path,
    mock_prices: bool,
) -> Result<(), Failure> {
    let Ended {
        tally,
        mut reports,
        results,
        stopped,
    } = ended;
    // The seats this worker gave back are free for the others at once (a
    // database that does not answer gets a few seconds: they come back
    // with their lease instead).
    if let Some(seats) = &seats {
        let flush_for = SEATS_FLUSH.min(run.deadline.saturating_duration_since(Instant::now()));
        if tokio::time::timeout(flush_for, seats.flush()).await.is_err() {
            out::err(
                "note: the seats this worker gave back could not all be written to the ledger; they come back to the \
                 pool when their lease lapses",
            );
        }
    }
    let mut results = results;
    if stopped.is_some() {
        // Lines in flight at the stop stand as the store has them now.
        if let Some(standings) = super::keeper::standings_now(run, out_dir).await {
            results.restate(super::results::standing_before(out_dir, &standings, run.job_lines()));
        }
    }
    let lost = results.close()?;
    reports.close();
    summary(&tally, out_dir, run.global.json, mock_prices, stopped.is_none());
    let stopped = match stopped {
        Some(failure) => Some(what_next(run, failure, seats.is_some(), out_dir).await),
        None => None,
    };
    if let Some(error) = lost {
        let message = format!(
            "the results could not be written to stdout ({error}); they are in {}, and the task of each line is \
             named above",
            shown(&out_dir.join(RESULTS))
        );
        return Err(match stopped {
            Some(failure) => {
                out::err(&format!("error: {message}"));
                failure
            }
            None => Failure::new(code::ID_NOT_WRITTEN, message),
        });
    }
    match (stopped, tally.exit_code()) {
        (Some(failure), _) => Err(failure),
        (None, 0) => Ok(()),
        (None, code) => Err(Failure::new(code, "")),
    }
}

/// A run that stopped early says what the next one does with each line, as
/// the journal has it; a shared batch's `--status` says it for all its
/// workers.
async fn what_next(run: &Run<'_>, mut failure: Failure, shared: bool, out_dir: &Path) -> Failure {
    if shared {
        failure.message = format!(
            "{}; run the same command again to resume (accepted tasks are polled, not submitted again; --status \
             shows where the batch stands)",
            failure.message
        );
        return failure;
    }
    let job_lines = run.job_lines();
    let status = journal_view(out_dir).status(job_lines).await.unwrap_or_default();
    let lines = Lines::new(&status.lines, job_lines.iter().copied());
    let json = run.global.json;
    if lines.gone().is_empty() {
        let said: Vec<String> = lines
            .next_run(out_dir, run.asked())
            .iter()
            .map(|sentence| format!("  {sentence}"))
            .collect();
        say(&said, json);
        failure.message = format!(
            "{}; run the same command again to resume, as said above (accepted tasks are polled, not submitted \
             again)",
            failure.message
        );
    } else {
        say(&[standing::gone_advice(lines.gone(), out_dir, true)], json);
        failure.message = format!("{}; start over in another folder, as said above", failure.message);
    }
    failure
}
