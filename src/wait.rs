//! When to poll.
//!
//! Fixed-interval polling either wastes requests (short interval) or notices
//! `Ready` late (long interval). The schedule here aims its polls at the
//! moment the task is expected to finish:
//!
//! 1. **Progress**: when the service reports `progress` (a fraction), the end
//!    is extrapolated from the elapsed time and the next poll aimed just past
//!    it; every poll refines the estimate.
//! 2. **Learned durations**: otherwise the client uses the durations the
//!    service *reported* for earlier tasks of the same operation
//!    (`result.duration`, or `end_time − start_time`), never the moment the
//!    client happened to notice `Ready` (which would feed a late poll back
//!    into the next wait). Quartiles of the last [`WINDOW`] durations are
//!    robust: one outlier moves them little, and it leaves the window.
//! 3. **Nothing known**: a poll every second, on a grid from submission, as a
//!    fixed 1 s interval would.
//!
//! Past the expected end the interval grows from 0.2 s to 1 s. Every aimed
//! sleep is capped (a wrong guess costs at most [`MAX_AIM`]), every sleep is
//! clamped to the deadline, and the task is polled once more at the deadline
//! before a wait gives up. Delays get up to 5 % jitter, only ever later (an
//! aimed poll that lands early costs a round), so many tasks do not poll in
//! lockstep; the jitter's draw is an input, so tests pin it.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::TaskStatus;

/// What a progress callback receives after each poll.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
pub(crate) type ProgressCallback = Arc<dyn Fn(&Progress) + Send + Sync>;

/// Options of [`crate::Task::wait_with`].
///
/// ```
/// use std::time::Duration;
/// let options = genapi::WaitOptions::default()
///     .timeout(Duration::from_secs(120))
///     .not_found_grace(Duration::from_secs(5));
/// let forever = genapi::WaitOptions::default().no_timeout();
/// ```
#[derive(Clone)]
pub struct WaitOptions {
    timeout: Option<Duration>,
    not_found_grace: Duration,
    fixed_interval: Option<Duration>,
    on_progress: Option<ProgressCallback>,
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
            timeout: Some(Duration::from_secs(600)),
            not_found_grace: Duration::from_secs(10),
            fixed_interval: None,
            on_progress: None,
        }
    }
}

impl WaitOptions {
    /// Gives up this long after submission (default 10 minutes). Any
    /// duration is accepted; one too large to add to the clock means "no
    /// deadline".
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Waits without a deadline (dropping the future still cancels it).
    pub fn no_timeout(mut self) -> Self {
        self.timeout = None;
        self
    }
    /// Right after submission the service may not know the task yet (404, or
    /// `Task not found`); polling goes on for this long (default 10 s).
    pub fn not_found_grace(mut self, grace: Duration) -> Self {
        self.not_found_grace = grace;
        self
    }
    /// Polls at a fixed interval instead of the adaptive schedule (at
    /// least [`WaitOptions::MIN_INTERVAL`], so a zero cannot flood the
    /// service).
    pub fn fixed_interval(mut self, interval: Duration) -> Self {
        self.fixed_interval = Some(interval.max(Self::MIN_INTERVAL));
        self
    }
    /// The shortest fixed interval: 10 ms.
    pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
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

    /// The deadline, `None` for none.
    pub(crate) fn deadline_after(&self) -> Option<Duration> {
        self.timeout
    }
    /// The not-found grace period.
    pub(crate) fn grace_period(&self) -> Duration {
        self.not_found_grace
    }
    pub(crate) fn fixed(&self) -> Option<Duration> {
        self.fixed_interval
    }
    pub(crate) fn callback(&self) -> Option<&ProgressCallback> {
        self.on_progress.as_ref()
    }
}

/// `from + after`, or `None` when that is past what the clock can hold
/// ("no deadline").
pub(crate) fn deadline(from: Instant, after: Option<Duration>) -> Option<Instant> {
    from.checked_add(after?)
}

/// Durations kept per operation.
pub const WINDOW: usize = 32;

/// Task durations the service reported, per operation: what the schedule
/// aims with. Serializable, so a program can keep it across runs
/// ([`crate::Client::learned`], [`crate::ClientBuilder::learned`]).
///
/// ```
/// let mut learned = genapi::Learned::default();
/// learned.observe("gen_2_pro", 4.0);
/// let text = serde_json::to_string(&learned)?;
/// let again: genapi::Learned = serde_json::from_str(&text)?;
/// assert_eq!(again, learned);
/// # Ok::<(), serde_json::Error>(())
/// ```
///
/// What is read is trimmed as it is read, to what [`Learned::observe`] would
/// keep: the last 32 plausible durations of each operation, for at most 256
/// operations, so a large or hostile file costs no more memory or time than
/// a kept one.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Learned {
    #[serde(default, deserialize_with = "trimmed")]
    operations: BTreeMap<String, VecDeque<f64>>,
}

/// Operations whose durations a [`Learned`] read from elsewhere keeps (the
/// document has a few dozen).
const MAX_OPERATIONS: usize = 256;

/// Whether `seconds` is a duration worth learning.
fn plausible(seconds: f64) -> bool {
    seconds.is_finite() && seconds > 0.0 && seconds < 24.0 * 3600.0
}

/// The last [`WINDOW`] plausible durations of a list, never holding more.
struct Window(VecDeque<f64>);

impl<'de> serde::Deserialize<'de> for Window {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Window;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a list of durations in seconds")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Window, A::Error> {
                let mut window = VecDeque::with_capacity(WINDOW + 1);
                while let Some(seconds) = seq.next_element::<f64>()? {
                    if plausible(seconds) {
                        window.push_back(seconds);
                        if window.len() > WINDOW {
                            window.pop_front();
                        }
                    }
                }
                Ok(Window(window))
            }
        }
        deserializer.deserialize_seq(Visitor)
    }
}

/// The operations' durations, trimmed as they are read.
fn trimmed<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<BTreeMap<String, VecDeque<f64>>, D::Error> {
    struct Visitor;
    impl<'de> serde::de::Visitor<'de> for Visitor {
        type Value = BTreeMap<String, VecDeque<f64>>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("durations by operation")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let mut operations = BTreeMap::new();
            while let Some(operation) = map.next_key::<String>()? {
                let Window(window) = map.next_value()?;
                if !window.is_empty() && (operations.len() < MAX_OPERATIONS || operations.contains_key(&operation)) {
                    operations.insert(operation, window);
                }
            }
            Ok(operations)
        }
    }
    deserializer.deserialize_map(Visitor)
}

/// Quartiles of an operation's durations, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Quartiles {
    pub(crate) low: f64,
    pub(crate) high: f64,
}

impl Learned {
    /// Records a duration the service reported for a task of `operation`.
    /// Values that are not a plausible duration are ignored.
    pub fn observe(&mut self, operation: &str, seconds: f64) {
        if !plausible(seconds) {
            return;
        }
        let window = self.operations.entry(operation.to_string()).or_default();
        window.push_back(seconds);
        while window.len() > WINDOW {
            window.pop_front();
        }
    }

    /// Merges what another client learned (its samples come after ours).
    pub fn merge(&mut self, other: &Learned) {
        for (operation, samples) in &other.operations {
            for seconds in samples {
                self.observe(operation, *seconds);
            }
        }
    }

    /// The quartiles for an operation, once it has a sample.
    pub(crate) fn quartiles(&self, operation: &str) -> Option<Quartiles> {
        let mut samples: Vec<f64> = self
            .operations
            .get(operation)?
            .iter()
            .copied()
            .filter(|s| s.is_finite())
            .collect();
        if samples.is_empty() {
            return None;
        }
        samples.sort_by(f64::total_cmp);
        let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
        Some(Quartiles {
            low: at(0.25),
            high: at(0.75),
        })
    }
}

/// Closest polls ever are.
const DENSE: f64 = 0.2;
/// Widest interval when nothing aims the polls.
const CEILING: f64 = 1.0;
/// Longest single aimed sleep.
pub const MAX_AIM: Duration = Duration::from_secs(20);
/// How far past an extrapolated end to aim, so the poll lands after it.
const MARGIN: f64 = 0.05;

/// Decides the delay before each poll of one wait.
#[derive(Debug)]
pub(crate) struct Schedule {
    learned: Option<Quartiles>,
    fixed: Option<Duration>,
    /// Interval once past the expected end; grows on every miss.
    late: f64,
}

impl Schedule {
    pub(crate) fn new(learned: Option<Quartiles>, fixed: Option<Duration>) -> Self {
        Schedule {
            learned,
            fixed,
            late: DENSE,
        }
    }

    /// Delay before the next poll, before jitter. `elapsed` is the time since
    /// submission, `progress` the last reported fraction and when it was read.
    pub(crate) fn next(&mut self, elapsed: Duration, progress: Option<(f64, Duration)>) -> Duration {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        let t = elapsed.as_secs_f64();
        let seconds = if let Some((fraction, read_at)) = progress.filter(|(p, _)| *p > 0.02 && *p < 1.0) {
            let end = read_at.as_secs_f64() / fraction + MARGIN;
            self.aim_or_late(t, end)
        } else if let Some(q) = self.learned {
            if t + DENSE < q.low {
                q.low - t
            } else if t < q.high {
                ((q.high - q.low) / 4.0).clamp(DENSE, CEILING)
            } else {
                self.late()
            }
        } else {
            // Nothing known: the next whole second since submission.
            (t.floor() + 1.0 - t).max(DENSE)
        };
        Duration::from_secs_f64(seconds.clamp(0.0, MAX_AIM.as_secs_f64()))
    }

    fn aim_or_late(&mut self, t: f64, end: f64) -> f64 {
        if end - t >= DENSE {
            end - t
        } else {
            self.late()
        }
    }

    fn late(&mut self) -> f64 {
        let interval = self.late;
        self.late = (self.late * 1.5).min(CEILING);
        interval
    }
}

/// `delay` plus up to 5 %; `unit` is a draw in `[0, 1)`. Only ever later: a
/// poll aimed at the expected end that lands before it costs a whole extra
/// round, one that lands a little after costs a few milliseconds.
pub(crate) fn jitter(delay: Duration, unit: f64) -> Duration {
    // Added rather than multiplied, so a delay near `Duration::MAX` saturates
    // instead of overflowing.
    delay.saturating_add(
        Duration::try_from_secs_f64(delay.as_secs_f64() * unit.clamp(0.0, 1.0) * 0.05).unwrap_or(Duration::MAX),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    #[test]
    fn progress_aims_just_past_the_extrapolated_end() {
        let mut schedule = Schedule::new(None, None);
        // Half done when read at 2 s: the end is at 4 s.
        let delay = secs(schedule.next(Duration::from_secs(2), Some((0.5, Duration::from_secs(2)))));
        assert!((delay - 2.05).abs() < 1e-9, "{delay}");
    }

    #[test]
    fn learned_durations_aim_the_first_poll_at_the_lower_quartile() {
        let mut learned = Learned::default();
        for seconds in [2.0, 3.0, 3.0, 3.0, 4.0] {
            learned.observe("op", seconds);
        }
        let q = learned.quartiles("op").unwrap();
        assert_eq!((q.low, q.high), (3.0, 3.0));
        let mut schedule = Schedule::new(Some(q), None);
        assert_eq!(secs(schedule.next(Duration::ZERO, None)), 3.0);
    }

    #[test]
    fn one_outlier_barely_moves_the_aim_and_leaves_the_window() {
        let mut learned = Learned::default();
        for _ in 0..5 {
            learned.observe("op", 1.0);
        }
        learned.observe("op", 300.0);
        let q = learned.quartiles("op").unwrap();
        assert_eq!(q.low, 1.0, "the lower quartile ignores the outlier");
        for _ in 0..WINDOW {
            learned.observe("op", 1.0);
        }
        assert_eq!(
            learned.quartiles("op").unwrap().high,
            1.0,
            "the outlier has left the window"
        );
    }

    #[test]
    fn aimed_sleeps_are_capped() {
        let mut learned = Learned::default();
        learned.observe("op", 3000.0);
        let mut schedule = Schedule::new(learned.quartiles("op"), None);
        assert_eq!(schedule.next(Duration::ZERO, None), MAX_AIM);
        let mut by_progress = Schedule::new(None, None);
        assert_eq!(
            by_progress.next(Duration::from_secs(1), Some((0.03, Duration::from_secs(1)))),
            MAX_AIM
        );
    }

    #[test]
    fn late_polls_back_off_to_the_ceiling() {
        let mut learned = Learned::default();
        learned.observe("op", 1.0);
        let mut schedule = Schedule::new(learned.quartiles("op"), None);
        let delays: Vec<f64> = (0..10)
            .map(|_| secs(schedule.next(Duration::from_secs(5), None)))
            .collect();
        assert_eq!(delays[0], DENSE);
        assert!(delays.windows(2).all(|w| w[1] >= w[0]), "{delays:?}");
        assert_eq!(delays[9], CEILING);
    }

    #[test]
    fn with_nothing_known_polls_fall_on_whole_seconds() {
        let mut schedule = Schedule::new(None, None);
        assert_eq!(secs(schedule.next(Duration::ZERO, None)), 1.0);
        let after = secs(schedule.next(Duration::from_millis(1030), None));
        assert!((after - 0.97).abs() < 1e-9, "{after}");
        assert_eq!(
            secs(schedule.next(Duration::from_millis(1900), None)),
            DENSE,
            "never closer than DENSE"
        );
    }

    #[test]
    fn jitter_saturates_instead_of_overflowing() {
        assert_eq!(jitter(Duration::MAX, 1.0), Duration::MAX);
        assert_eq!(jitter(Duration::MAX, 0.0), Duration::MAX);
    }

    #[test]
    fn jitter_only_delays_and_by_at_most_five_percent() {
        let base = Duration::from_secs(2);
        assert_eq!(jitter(base, 0.0), base);
        assert_eq!(jitter(base, 1.0), Duration::from_millis(2100));
        assert_eq!(jitter(base, 0.5), Duration::from_millis(2050));
    }

    #[test]
    fn huge_timeouts_mean_no_deadline() {
        let now = Instant::now();
        assert_eq!(deadline(now, Some(Duration::MAX)), None);
        assert_eq!(deadline(now, None), None);
        assert!(deadline(now, Some(Duration::from_secs(1))).is_some());
    }

    #[test]
    fn implausible_durations_are_ignored() {
        let mut learned = Learned::default();
        for bad in [f64::NAN, f64::INFINITY, -1.0, 0.0, 1e12] {
            learned.observe("op", bad);
        }
        assert_eq!(learned.quartiles("op"), None);
    }
}
