//! Progress of many tasks (`batch`, `generate -n`) on stderr.
//!
//! On a terminal it is a bar drawn by `indicatif` (done of all, failed, in
//! flight, rate, ETA, credits), redrawn in place and cleared at the end.
//! Anywhere else (a CI log, a file) redrawing would fill the log with
//! escape sequences, so it is a plain line with a UTC time stamp now and
//! then. `--quiet` shows neither. Nothing here is coloured, so `NO_COLOR`
//! has nothing to switch off; it is honoured by the bar's library too.

use std::time::{Duration, Instant, SystemTime};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::out;

/// What progress says.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Lines or tasks finished, however they ended.
    pub done: u64,
    /// Lines or tasks in all.
    pub total: u64,
    /// Of those done, the ones that did not succeed.
    pub failed: u64,
    /// Submitted and not yet finished.
    pub in_flight: u64,
    /// Waiting for room under the active-task limit: not sent yet.
    pub waiting: u64,
    /// Waiting for credits under the cap (`--max-credits`): not sent yet.
    pub at_the_cap: u64,
    /// Reported, and left to the next run (accepted and not finished, sent
    /// without an answer, or not sent): a stopped run's.
    pub left: u64,
    /// Finished by this run (not taken from an earlier one): the rate's count.
    pub worked: u64,
    /// Lines another worker holds (a shared batch), waited for.
    pub held: u64,
    /// Lines sent before this run (by an earlier run or another worker)
    /// that this run has not taken up yet: waiting their turn, never to be
    /// sent again.
    pub sent_earlier: u64,
    /// Credits charged so far, when known: none until a charge is seen
    /// (a task picked up by id was charged when another command sent it,
    /// and its cost is known once it ends).
    pub credits: Option<f64>,
}

impl Figures {
    /// The lines in one of the counts: done, or not done and in flight,
    /// waiting, held, left or sent earlier; the rest are not sent yet.
    pub fn accounted(&self) -> u64 {
        self.done + self.in_flight + self.waiting + self.at_the_cap + self.held + self.left + self.sent_earlier
    }
}

/// A reported cost as credits the progress counts, when it is a number of
/// them: a cost below nothing, or not a number (a hostile answer), is no
/// refund and must not hide what was charged or a cap that was passed.
pub fn credits(cost: Option<f64>) -> Option<f64> {
    cost.filter(|cost| cost.is_finite() && *cost >= 0.0)
}

/// How often a plain progress line is written.
pub const PLAIN_EVERY: Duration = Duration::from_secs(5);

/// Progress of one command (clones show the same bar).
#[derive(Clone)]
pub struct Progress {
    label: &'static str,
    bar: Option<ProgressBar>,
    plain: bool,
    started: Instant,
}

impl Progress {
    /// Progress of `total` things called `label` (`batch`, `generate`).
    pub fn start(label: &'static str, total: u64) -> Progress {
        let quiet = out::quiet();
        let bar = (!quiet && out::stderr_is_terminal()).then(|| {
            let style = ProgressStyle::with_template("{prefix} [{bar:28}] {pos}/{len} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
                .with_style(style)
                .with_prefix(label)
        });
        Progress {
            label,
            plain: !quiet && bar.is_none(),
            bar,
            started: Instant::now(),
        }
    }

    /// Whether it redraws a bar (a terminal) rather than writing lines.
    pub fn is_bar(&self) -> bool {
        self.bar.is_some()
    }

    /// Shows `figures`: the bar redrawn, or one time-stamped line.
    pub fn show(&self, figures: &Figures) {
        let details = details(figures, self.started.elapsed());
        if let Some(bar) = &self.bar {
            bar.set_length(figures.total);
            bar.set_position(figures.done);
            bar.set_message(details);
        } else if self.plain {
            out::err(&format!(
                "{} {}: {}/{} done, {details}",
                utc(SystemTime::now()),
                self.label,
                figures.done,
                figures.total
            ));
        }
    }

    /// One thing's own news (a task's status): a time-stamped line when
    /// progress is plain; on a terminal the bar already says enough.
    pub fn note(&self, text: &str) {
        if self.plain {
            out::err(&format!("{} {}: {text}", utc(SystemTime::now()), self.label));
        }
    }

    /// One thing's trouble (a poll that failed): a time-stamped line when
    /// progress is plain, and a line above the bar on a terminal, where
    /// the bar says nothing of it. `--quiet` shows neither.
    pub fn warn(&self, text: &str) {
        match &self.bar {
            Some(_) => self.println(&format!("{}: {text}", self.label)),
            None => self.note(text),
        }
    }

    /// A line of its own on stderr, above the bar.
    pub fn println(&self, line: &str) {
        self.suspend(|| out::err(line));
    }

    /// Runs `write` (which prints) with the bar out of the way.
    pub fn suspend<R>(&self, write: impl FnOnce() -> R) -> R {
        match &self.bar {
            Some(bar) => bar.suspend(write),
            None => write(),
        }
    }

    /// Takes the bar away (lines written stay).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }

    /// Ends the progress of a run that stopped before its end, with one
    /// line of where it stood (what the next line of progress would have
    /// said), bar or not, unless `--quiet`: a run stopped between two plain
    /// lines, or under a bar about to be cleared, still says it.
    pub fn stopped(&self, figures: &Figures) {
        self.finish();
        // The command ends here: every line not done (in flight, waiting,
        // or a task the stop left running, whose outcome never came) is the
        // next run's now, as the summary says; other workers' lines stay
        // theirs.
        let figures = &Figures {
            left: figures.total.saturating_sub(figures.done + figures.held),
            in_flight: 0,
            sent_earlier: 0,
            waiting: 0,
            at_the_cap: 0,
            ..*figures
        };
        out::progress(&format!(
            "{}{}: stopped at {}/{} done, {}",
            stamp(self.is_bar(), SystemTime::now()),
            self.label,
            figures.done,
            figures.total,
            details(figures, self.started.elapsed())
        ));
    }
}

/// What opens a line of progress: the time, in a log (plain lines, read
/// later); nothing on a terminal, where the line is read as it comes.
fn stamp(on_a_terminal: bool, at: SystemTime) -> String {
    if on_a_terminal {
        String::new()
    } else {
        format!("{} ", utc(at))
    }
}

/// `2 failed, 5 in flight, 1.3/s, ETA 21s, 0.60 credits`: every line not
/// done is in one of the counts after `failed` (in flight: being sent or
/// its task followed; waiting for a seat; held at the cap; held by other
/// workers; sent earlier, its turn to be followed not come; not sent yet),
/// each said only when it has lines; the credits are left out while none
/// are known.
fn details(figures: &Figures, elapsed: Duration) -> String {
    let rate = figures.worked as f64 / elapsed.as_secs_f64().max(0.001);
    let remaining = figures.total.saturating_sub(figures.done);
    let eta = if remaining == 0 {
        "ETA 0s".to_string()
    } else if rate > 0.0 {
        format!("ETA {:.0}s", remaining as f64 / rate)
    } else {
        "ETA unknown".to_string()
    };
    let held = match figures.held {
        0 => String::new(),
        n => format!(", {n} held by other workers"),
    };
    let waiting = match figures.waiting {
        0 => String::new(),
        n => format!(", {n} waiting for a seat"),
    };
    let at_the_cap = match figures.at_the_cap {
        0 => String::new(),
        n => format!(", {n} held at the cap"),
    };
    let left = match figures.left {
        0 => String::new(),
        n => format!(", {n} left to the next run"),
    };
    let sent_earlier = match figures.sent_earlier {
        0 => String::new(),
        n => format!(", {n} sent earlier"),
    };
    let not_sent = match figures.total.saturating_sub(figures.accounted()) {
        0 => String::new(),
        n => format!(", {n} not sent yet"),
    };
    let credits = match figures.credits {
        Some(credits) => format!(", {credits:.2} credits"),
        None => String::new(),
    };
    format!(
        "{} failed, {} in flight{waiting}{at_the_cap}{held}{sent_earlier}{left}{not_sent}, {rate:.1}/s, {eta}{credits}",
        figures.failed, figures.in_flight
    )
}

/// `2026-11-25T09:40:01Z`.
pub fn utc(at: SystemTime) -> String {
    humantime::format_rfc3339_seconds(at).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_stamps_are_utc_calendar_dates() {
        use std::time::UNIX_EPOCH;
        assert_eq!(utc(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(
            utc(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            utc(UNIX_EPOCH + Duration::from_secs(1_795_606_861)),
            "2026-11-25T11:41:01Z"
        );
    }

    #[test]
    fn a_line_read_as_it_comes_carries_no_date() {
        use std::time::UNIX_EPOCH;
        assert_eq!(stamp(true, UNIX_EPOCH), "");
        assert_eq!(stamp(false, UNIX_EPOCH), "1970-01-01T00:00:00Z ");
    }

    #[test]
    fn the_details_give_rate_eta_and_credits() {
        let figures = Figures {
            done: 10,
            total: 15,
            failed: 2,
            in_flight: 5,
            waiting: 0,
            at_the_cap: 0,
            left: 0,
            worked: 10,
            held: 0,
            sent_earlier: 0,
            credits: Some(0.6),
        };
        assert_eq!(
            details(&figures, Duration::from_secs(5)),
            "2 failed, 5 in flight, 2.0/s, ETA 2s, 0.60 credits"
        );
        let waiting = Figures {
            held: 3,
            total: 18,
            ..figures
        };
        assert_eq!(
            details(&waiting, Duration::from_secs(5)),
            "2 failed, 5 in flight, 3 held by other workers, 2.0/s, ETA 4s, 0.60 credits"
        );
        let seatless = Figures {
            waiting: 4,
            total: 19,
            ..figures
        };
        assert_eq!(
            details(&seatless, Duration::from_secs(5)),
            "2 failed, 5 in flight, 4 waiting for a seat, 2.0/s, ETA 4s, 0.60 credits"
        );
        // A capped run: one line sent, fifteen held at the cap, three not
        // taken up yet; none of them is in flight.
        let capped = Figures {
            done: 1,
            total: 20,
            failed: 0,
            in_flight: 1,
            at_the_cap: 15,
            worked: 1,
            ..figures
        };
        // A run stopped while its two tasks ran: nothing done, both left to
        // the next run, as its summary says.
        let stopped = Figures {
            done: 0,
            total: 2,
            failed: 0,
            in_flight: 0,
            left: 2,
            worked: 2,
            ..figures
        };
        assert_eq!(
            details(&stopped, Duration::from_secs(1)),
            "0 failed, 0 in flight, 2 left to the next run, 2.0/s, ETA 1s, 0.60 credits"
        );
        assert_eq!(
            details(&capped, Duration::from_secs(1)),
            "0 failed, 1 in flight, 15 held at the cap, 3 not sent yet, 1.0/s, ETA 19s, 0.60 credits"
        );
        let idle = Figures { worked: 0, ..figures };
        assert!(details(&idle, Duration::from_secs(5)).contains("ETA unknown"));
        // A task picked up by id: its charge is not known until it ends.
        let picked_up = Figures {
            credits: None,
            ..figures
        };
        assert_eq!(
            details(&picked_up, Duration::from_secs(5)),
            "2 failed, 5 in flight, 2.0/s, ETA 2s"
        );
    }

    #[test]
    fn lines_an_earlier_run_sent_are_not_said_unsent() {
        // A resumed run following one line of twenty an earlier run sent:
        // the other nineteen are sent, not "not sent yet".
        let resumed = Figures {
            done: 0,
            total: 20,
            failed: 0,
            in_flight: 1,
            sent_earlier: 19,
            worked: 0,
            credits: Some(0.6),
            ..Figures::default()
        };
        assert_eq!(
            details(&resumed, Duration::from_secs(1)),
            "0 failed, 1 in flight, 19 sent earlier, 0.0/s, ETA unknown, 0.60 credits"
        );
    }
}
