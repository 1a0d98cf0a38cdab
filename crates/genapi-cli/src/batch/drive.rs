//! The run itself: the batch's lines go until every line has its outcome,
//! `--timeout` passes or Ctrl-C comes; each outcome is written as it
//! comes (results, gallery, stdout), counted, and said if it failed.
//!
//! A run stopped early does not simply drop what is in flight: the
//! submissions already sent get their answers recorded (for up to 15
//! seconds, within `--timeout`), so the next run polls their tasks instead
//! of calling them unknown. Nothing new is sent meanwhile, and a second
//! Ctrl-C ends it at once.

use std::time::Duration;

use futures::stream::BoxStream;
use futures::StreamExt;
use genapi_batch::{Batch, Counters, InvalidLine, JobOutcome, Stopper};
use serde_json::json;
use tokio::time::Instant;

use super::jobs::{self, Changed};
use super::report::{with_flags, Reports};
use super::results::Results;
use super::tally::Tally;
use super::Run;
use crate::progress::Progress;
use crate::{code, out, Failure};

/// How long a stopped run waits for the answers of submissions in flight.
const DRAIN_FOR: Duration = Duration::from_secs(15);

/// What a run came to.
pub(super) struct Ended {
    /// The counts.
    pub(super) tally: Tally,
    /// The failures said, to close with the lines they were repeated for.
    pub(super) reports: Reports,
    /// The results, to close.
    pub(super) results: Results,
    /// Why the run stopped early, if it did.
    pub(super) stopped: Option<Failure>,
}

/// Where each outcome goes.
struct Sink {
    results: Results,
    tally: Tally,
    reports: Reports,
}

impl Sink {
    /// Where the outcomes of `run` go, the job file's invalid lines in
    /// first.
    fn start(run: &Run<'_>, results: Results) -> Result<Sink, Failure> {
        let checked = &run.checked;
        let mut tally = Tally::new(checked.lines() - checked.invalid_lines());
        tally.capped(run.args.max_credits);
        tally.asked(run.asked());
        let mut sink = Sink {
            results,
            tally,
            reports: Reports::default(),
        };
        for invalid in checked.invalid() {
            sink.invalid(invalid)?;
        }
        // Counted whole: only the first invalid lines are listed.
        for _ in checked.invalid().len()..checked.invalid_lines() {
            sink.tally.add_invalid();
        }
        Ok(sink)
    }

    /// One line's outcome; said when `progress` is given (not while
    /// draining, when only what is recorded matters).
    fn take(&mut self, outcome: JobOutcome, progress: Option<&Progress>) -> Result<(), Failure> {
        let outcome = with_flags(outcome);
        if let Some(progress) = progress {
            self.reports.say(&outcome, progress);
        }
        self.results.write(&outcome.to_json())?;
        self.tally.add(&outcome);
        Ok(())
    }

    /// A line that was never sent because it is invalid.
    fn invalid(&mut self, line: &InvalidLine) -> Result<(), Failure> {
        let entry =
            json!({"line": line.line, "status": "invalid", "error": jobs::explained(line), "class": "validation"});
        self.results.write(&entry)?;
        self.tally.add_invalid();
        Ok(())
    }
}

/// Runs `batch` over the valid lines of the job file.
pub(super) async fn drive(
    run: &Run<'_>,
    batch: Batch,
    results: Results,
    on_builtin_mock: bool,
) -> Result<Ended, Failure> {
    // Listening for Ctrl-C before anything is sent.
    let interrupt = crate::interrupt::interrupted();
    let changed = Changed::default();
    let reader = jobs::valid_jobs(&run.checked, changed.clone())?;
    let counters = batch.counters();
    let stopper = batch.stopper();
    let stream = batch.run(reader).map_err(|e| Failure::api(&e))?.boxed();
    let sink = Sink::start(run, results)?;
    let progress = Progress::start("batch", sink.tally.jobs() as u64);
    let mut going = Going {
        stream,
        sink,
        progress,
        counters,
    };
    let stopped = going.until_stopped(run, interrupt).await?;
    if let Some(why) = &stopped {
        going.stop(&stopper, on_builtin_mock, why.code == code::TIMEOUT);
        going.drain(run.deadline).await?;
        // Where the run stood once the answers it waited for came: the
        // same lines the summary then counts.
        going.progress.stopped(&going.sink.tally.figures(&going.counters));
    }
    let Going {
        stream,
        mut sink,
        progress,
        counters,
    } = going;
    progress.finish();
    // Tasks a stop left running were charged at their acceptance, and
    // their outcomes, never taken, do not say so.
    sink.tally.charged_without_outcome(counters.charged_without_outcome());
    // Lines that changed while the batch ran were sent nowhere: each is a
    // result, and counted as an invalid line.
    for line in changed.take() {
        sink.invalid(&line)?;
    }
    // The store is closed (a journal's last events written) once the
    // stream is gone.
    drop(stream);
    Ok(Ended {
        tally: sink.tally,
        reports: sink.reports,
        results: sink.results,
        stopped,
    })
}

/// A batch under way: its outcomes, where they go, and the progress said.
struct Going {
    stream: BoxStream<'static, JobOutcome>,
    sink: Sink,
    progress: Progress,
    counters: Counters,
}

impl Going {
    /// Takes outcomes until the last, the deadline or an interrupt; the
    /// progress line and the gallery are refreshed meanwhile. Returns why
    /// it stopped early, if it did.
    async fn until_stopped(
        &mut self,
        run: &Run<'_>,
        interrupt: impl std::future::Future<Output = std::io::Result<()>>,
    ) -> Result<Option<Failure>, Failure> {
        tokio::pin!(interrupt);
        let mut ticker = tokio::time::interval(if self.progress.is_bar() {
            Duration::from_secs(1)
        } else {
            crate::progress::PLAIN_EVERY
        });
        ticker.tick().await;
        loop {
            tokio::select! {
                next = self.stream.next() => match next {
                    Some(outcome) => self.sink.take(outcome, Some(&self.progress))?,
                    None => return Ok(None),
                },
                _ = ticker.tick() => {
                    self.progress.show(&self.sink.tally.figures(&self.counters));
                    self.sink.results.refresh_gallery();
                    if self.sink.results.publish_due() {
                        let out_dir = self.sink.results.out_dir().to_path_buf();
                        let standings = super::keeper::standings_now(run, &out_dir).await;
                        if let Some(standings) = &standings {
                            self.sink.tally.store_read(standings);
                        }
                        let now = standings
                            .map(|standings| super::results::standing_before(&out_dir, &standings, run.job_lines()));
                        self.sink.results.publish(now);
                    }
                }
                _ = tokio::time::sleep_until(run.deadline) => return Ok(Some(Failure::new(code::TIMEOUT, format!(
                    "--timeout {}s passed", run.global.timeout_seconds()
                )))),
                _ = &mut interrupt => return Ok(Some(Failure::new(code::INTERRUPTED, "interrupted"))),
            }
        }
    }

    /// Sends nothing more: the bar goes before anything else is said
    /// (where the run stood is said once the answers in flight are taken).
    /// At its `--timeout` the run has no time left to wait for answers,
    /// and says so.
    fn stop(&self, stopper: &Stopper, on_builtin_mock: bool, timed_out: bool) {
        self.progress.finish();
        stopper.stop();
        if timed_out {
            out::progress(
                "stopping at --timeout: answers to submissions still in flight are not waited for; the next run \
                 sends none of them again, and says which got no answer (they may have been accepted, and charged)",
            );
            return;
        }
        out::progress(if on_builtin_mock {
            "stopping: recording the answers of submissions in flight (Ctrl-C again to quit now)"
        } else {
            "stopping: recording the answers of submissions in flight (Ctrl-C again to quit now; submissions still \
             unanswered then are not sent again by the next run, which says so)"
        });
    }

    /// Takes the outcomes of submissions in flight after a stop, for up to
    /// [`DRAIN_FOR`] (within `deadline`, which bounds the whole command) or
    /// until a second interrupt.
    async fn drain(&mut self, deadline: Instant) -> Result<(), Failure> {
        let until = (Instant::now() + DRAIN_FOR).min(deadline);
        let again = crate::interrupt::interrupted();
        tokio::pin!(again);
        loop {
            tokio::select! {
                next = self.stream.next() => match next {
                    Some(outcome) => self.sink.take(outcome, None)?,
                    None => return Ok(()),
                },
                _ = tokio::time::sleep_until(until) => return Ok(()),
                _ = &mut again => return Ok(()),
            }
        }
    }
}
