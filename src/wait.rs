//! When to poll.
//!
//! Fixed-interval polling either wastes requests (short interval) or notices
//! `Ready` late (long interval). The schedule here aims its polls at the
//! moment the task is expected to finish and polls densely only around it:
//!
//! 1. **Progress**: when the service reports `progress` (a fraction), the end
//!    is extrapolated from the elapsed time, and re-estimated at every poll.
//! 2. **Learned durations**: otherwise the client uses what it saw for earlier
//!    tasks of the same operation (a moving average and spread).
//! 3. **Nothing known**: a short first poll, then intervals growing to 1 s.
//!
//! Near the expected end it polls every 0.2 s; past it the interval grows again
//! to bound the requests spent on a wrong guess. Every delay gets ±10 %
//! jitter so many tasks do not poll in lockstep. `Retry-After` and 503
//! backoff are honoured by the transport underneath.

use std::sync::Arc;
use std::time::Duration;

use crate::TaskStatus;

/// What a progress callback receives after each poll.
#[derive(Clone, Debug, PartialEq)]
pub struct Progress {
    /// Task id.
    pub id: String,
    /// Status seen.
    pub status: TaskStatus,
    /// Fraction done, when the service reports it.
    pub progress: Option<f64>,
    /// Time since submission.
    pub elapsed: Duration,
    /// Polls made so far.
    pub polls: u32,
}

/// Callback for [`WaitOptions::on_progress`].
pub type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Options of [`crate::Task::wait_with`].
#[derive(Clone)]
pub struct WaitOptions {
    /// Give up after this long since submission (default 10 minutes).
    pub timeout: Duration,
    /// After submission the service may not know the task yet (404, or
    /// `Task not found`) for this long; polling goes on meanwhile (default 10 s).
    pub not_found_grace: Duration,
    /// Fixed interval instead of the adaptive schedule (for comparison).
    pub fixed_interval: Option<Duration>,
    /// Called after every poll.
    pub on_progress: Option<ProgressCallback>,
}

impl std::fmt::Debug for WaitOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitOptions")
            .field("timeout", &self.timeout)
            .field("not_found_grace", &self.not_found_grace)
            .field("fixed_interval", &self.fixed_interval)
            .field("on_progress", &self.on_progress.is_some())
            .finish()
    }
}

impl Default for WaitOptions {
    fn default() -> Self {
        WaitOptions {
            timeout: Duration::from_secs(600),
            not_found_grace: Duration::from_secs(10),
            fixed_interval: None,
            on_progress: None,
        }
    }
}

impl WaitOptions {
    /// Sets the overall deadline.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
    /// Polls at a fixed interval instead of the adaptive schedule.
    pub fn fixed_interval(mut self, interval: Duration) -> Self {
        self.fixed_interval = Some(interval);
        self
    }
    /// Calls `callback` after every poll.
    ///
    /// ```
    /// let options = genapi::WaitOptions::default().on_progress(|p| {
    ///     eprintln!("{} {:?} after {:?}", p.status, p.progress, p.elapsed);
    /// });
    /// ```
    pub fn on_progress(mut self, callback: impl Fn(&Progress) + Send + Sync + 'static) -> Self {
        self.on_progress = Some(Arc::new(callback));
        self
    }
}

/// Durations seen for one operation: a moving mean and mean deviation.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Learned {
    mean: f64,
    deviation: f64,
    samples: u32,
}

impl Learned {
    /// Adds a task's duration (submission to `Ready`) in seconds.
    pub(crate) fn observe(&mut self, seconds: f64) {
        if self.samples == 0 {
            self.mean = seconds;
            self.deviation = seconds * 0.1;
        } else {
            let weight = 0.2;
            self.deviation = (1.0 - weight) * self.deviation + weight * (seconds - self.mean).abs();
            self.mean = (1.0 - weight) * self.mean + weight * seconds;
        }
        self.samples = self.samples.saturating_add(1);
    }
}

const DENSE: f64 = 0.2;
const FIRST: f64 = 0.5;
const CEILING: f64 = 1.0;

/// The next delay before polling, in seconds.
pub(crate) struct Schedule {
    learned: Option<Learned>,
    fixed: Option<Duration>,
    /// Interval used once past the expected end; grows on every miss.
    late: f64,
}

impl Schedule {
    pub(crate) fn new(learned: Option<Learned>, fixed: Option<Duration>) -> Self {
        Schedule {
            learned: learned.filter(|l| l.samples > 0),
            fixed,
            late: DENSE,
        }
    }

    /// Delay before the next poll, given the time since submission and the
    /// last reported progress.
    pub(crate) fn next(&mut self, elapsed: Duration, progress: Option<f64>, polls: u32) -> Duration {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        let t = elapsed.as_secs_f64();
        // Expected end and how early to start dense polling.
        let estimate = match progress.filter(|p| *p > 0.02 && *p < 1.0) {
            Some(p) => Some((t / p, (t / p - t) * 0.1)),
            None => self.learned.map(|l| (l.mean, l.deviation.max(l.mean * 0.05))),
        };
        let seconds = match estimate {
            Some((end, margin)) if t < end - margin - DENSE => (end - margin - t).max(DENSE),
            Some(_) => {
                let interval = self.late;
                self.late = (self.late * 1.25).min(CEILING);
                interval
            }
            None if polls == 0 => FIRST,
            None => (FIRST * 1.25f64.powi(polls as i32)).min(CEILING),
        };
        jitter(seconds)
    }
}

fn jitter(seconds: f64) -> Duration {
    Duration::from_secs_f64(seconds * (0.9 + fastrand::f64() * 0.2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_aims_at_the_extrapolated_end() {
        let mut schedule = Schedule::new(None, None);
        // Half done after 2 s: the end is about 4 s, dense polling starts before.
        let delay = schedule.next(Duration::from_secs(2), Some(0.5), 1).as_secs_f64();
        assert!((1.4..2.0).contains(&delay), "{delay}");
    }

    #[test]
    fn learned_durations_skip_the_early_polls() {
        let mut learned = Learned::default();
        for _ in 0..5 {
            learned.observe(3.0);
        }
        let mut schedule = Schedule::new(Some(learned), None);
        let first = schedule.next(Duration::ZERO, None, 0).as_secs_f64();
        assert!(first > 2.3 && first < 3.1, "{first}");
    }

    #[test]
    fn late_polls_back_off_to_the_ceiling() {
        let mut learned = Learned::default();
        learned.observe(1.0);
        let mut schedule = Schedule::new(Some(learned), None);
        let delays: Vec<f64> = (0..20)
            .map(|i| schedule.next(Duration::from_secs(5), None, i).as_secs_f64())
            .collect();
        assert!(delays[0] < 0.25);
        assert!(delays[19] > 0.85 && delays[19] < 1.15, "{delays:?}");
    }

    #[test]
    fn unknown_tasks_start_fast_and_settle_at_one_second() {
        let mut schedule = Schedule::new(None, None);
        assert!(schedule.next(Duration::ZERO, None, 0).as_secs_f64() < 0.6);
        assert!(schedule.next(Duration::from_secs(9), None, 9).as_secs_f64() > 0.85);
    }
}
