//! When to poll.
//!
//! A task holds its place under the active-task limit until the poll that
//! sees it end, so a poll that lands late costs the next task that long, and
//! one that lands early costs a request and, usually, one more round. The
//! schedule aims each poll just past the moment the task is expected to end,
//! by one rule for every duration: each margin and interval is a share of the
//! expected duration, so a task of 0.2 s is polled as a task of 20 s would be,
//! scaled down. The only amounts in seconds are a few milliseconds for a
//! request's travel, the [`WaitOptions::MIN_INTERVAL`] floor, the 1 s ceiling,
//! the [`MAX_AIM`] cap and the 1 s grid used when nothing is known.
//!
//! 1. **Learned durations**: the durations the service *reported* for earlier
//!    tasks of the same operation (`result.duration`, or
//!    `end_time − start_time`), never the moment the client happened to
//!    notice `Ready` (which would feed a late poll back into the next wait).
//!    Quartiles of the last [`WINDOW`] durations are robust: one outlier
//!    moves them little, and it leaves the window. The first poll is aimed at
//!    the lower quartile plus 1 % of it: a quarter of the tasks have ended by
//!    then, and tasks of one constant duration are polled just after they end,
//!    not a moment before (the reported duration and the moment the status
//!    changes need not agree to the millisecond, and a poll a moment early
//!    costs a whole round).
//! 2. **Progress**: after a poll that reports `progress` (a fraction), the end
//!    is extrapolated from the elapsed time and the next poll aimed past it by
//!    1 % of that end plus 3 ms for the request's travel. A fraction rounded
//!    down, as it is reported, puts the extrapolated end at or after the true
//!    one, so one such poll usually sees the end, a few percent after it.
//! 3. **Without progress**, between the quartiles, polls come evenly: a
//!    quarter of the spread apart (at least a tenth of the typical duration),
//!    so the middle half of the durations costs about four polls whatever
//!    their length.
//! 4. **Late**: once the task is past its expected end (a poll aimed at an
//!    extrapolated end found it still running, or, without progress, the
//!    upper quartile has passed), the intervals start at a tenth of the
//!    extrapolated end (without progress: at the step between the
//!    quartiles), at least [`WaitOptions::MIN_INTERVAL`], and grow by half
//!    each time up to 1 s: a task that ends soon after is seen soon after,
//!    and one that overruns, or stays at 99 %, does not get many more polls.
//!    Progress that puts the end further away than the next late interval
//!    still aims the poll, and the interval grows with every poll past an
//!    aimed end, aimed or not, so progress that keeps the end just beyond it
//!    cannot hold it short.
//! 5. **Nothing known** (no learned duration, no progress): a poll every
//!    second, on a grid from submission, as a fixed 1 s interval would; never
//!    closer than 0.2 s, so a poll out of step (after a wake-up) is not
//!    followed by another at once.
//!
//! Every aimed sleep is capped (a wrong guess costs at most [`MAX_AIM`]),
//! every sleep is clamped to the deadline, and the task is polled once more at
//! the deadline before a wait gives up. Delays get jitter, so many tasks do
//! not poll in lockstep: only ever later (an aimed poll that lands early costs
//! a round), and at most 2 % and 20 ms, so it never undoes an aim; the
//! jitter's draw is an input, so tests pin it.
//!
//! A notification may end a sleep early ([`WaitOptions::woken_by`]): the task
//! is then polled at once, and the poll, not the notification, says how the
//! task stands. While notifications come ([`crate::webhook::Inbox::is_heard`])
//! they are meant to see most ends, so the first poll by learned durations
//! waits for the upper quartile instead of the lower (three tasks in four are
//! notified before it), and is there for a notification that comes late or
//! not at all; once waits keep ending without them, the schedule is the one
//! without notifications, so a receiver nobody reaches makes no wait later.
//! A notification whose poll finds the task still going was early, replayed
//! or forged, so the next may bring a poll no sooner than twice as long after
//! the last ([`WaitOptions::MIN_INTERVAL`] at first, [`MAX_AIM`] at most).

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::webhook::Inbox;
use crate::{Error, TaskStatus};

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
/// What [`WaitOptions::on_poll_failure`] calls.
pub(crate) type FailureCallback = Arc<dyn Fn(&Error) + Send + Sync>;

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
    on_poll_failure: Option<FailureCallback>,
    woken_by: Option<Arc<Inbox>>,
}

impl std::fmt::Debug for WaitOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitOptions")
            .field("timeout", &self.timeout)
            .field("not_found_grace", &self.not_found_grace)
            .field("fixed_interval", &self.fixed_interval)
            .field("on_progress", &self.on_progress.is_some())
            .field("on_poll_failure", &self.on_poll_failure.is_some())
            .field("woken_by", &self.woken_by)
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
            on_poll_failure: None,
            woken_by: None,
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
    /// `Task not found`); polling goes on for this long (default 10 s) from
    /// the submission (for a task picked up again, see
    /// [`crate::Task::sent_at`]).
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
    /// The shortest interval between polls, 10 ms: of a fixed interval, of
    /// the adaptive schedule, and after a wake-up ([`WaitOptions::woken_by`]).
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

    /// Calls `callback` with every poll that failed and is tried again (a
    /// network error, a 5xx, a 429, after the transport's own retries): the
    /// task goes on at the service, so the wait goes on until its deadline,
    /// and without this a service that cannot be reached looks like a task
    /// still running. Its error names the task and says what went wrong.
    ///
    /// ```
    /// let options = genapi::WaitOptions::default().on_poll_failure(|error| {
    ///     eprintln!("polling again after: {error}");
    /// });
    /// ```
    pub fn on_poll_failure(mut self, callback: impl Fn(&Error) + Send + Sync + 'static) -> Self {
        self.on_poll_failure = Some(Arc::new(callback));
        self
    }

    /// Polls at once when `inbox` receives a notification of the task's end,
    /// instead of sleeping until the next scheduled poll.
    ///
    /// The poll's answer decides, never the notification: one that says the
    /// task is ready while the poll says it is still running only means
    /// polling goes on as scheduled (a notification may be early, replayed,
    /// or forged by someone who learned the secret; the poll is the service's
    /// own word). Polling never waits for a notification either, so a lost
    /// one, or a receiver nobody can reach, costs nothing but the wake-up:
    /// the first poll is left to notifications (aimed past most tasks' ends)
    /// only while they come ([`Inbox::is_heard`]).
    /// A woken poll comes at least [`WaitOptions::MIN_INTERVAL`] after the
    /// last poll, and each woken poll that finds the task still going
    /// doubles that gap for the next wake-up (up to 20 s), so a flood
    /// of notifications costs a few polls more than the schedule's, not one
    /// each.
    ///
    /// Set on [`crate::ClientBuilder::wait_options`], it wakes every wait of
    /// the client; [`Inbox::wait`] is the short-hand for one task.
    ///
    /// ```no_run
    /// # async fn demo(task: genapi::Task) -> genapi::Result<()> {
    /// use std::sync::Arc;
    /// // Your webhook receiver hands each verified notification to `inbox.deliver`.
    /// let inbox = Arc::new(genapi::webhook::Inbox::new());
    /// let options = genapi::WaitOptions::default().woken_by(inbox.clone());
    /// let output = task.wait_with(options).await?;
    /// # Ok(()) }
    /// ```
    pub fn woken_by(mut self, inbox: Arc<Inbox>) -> Self {
        self.woken_by = Some(inbox);
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
    pub(crate) fn failure_callback(&self) -> Option<&FailureCallback> {
        self.on_poll_failure.as_ref()
    }
    pub(crate) fn inbox(&self) -> Option<&Inbox> {
        self.woken_by.as_deref()
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
/// Serialized, it is `{"operations": {"gen_2_klein_4b": [0.12, 0.15]}}`:
/// each operationId with its durations in seconds, oldest first.
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
    ///
    /// `operation` is the document's operationId, as [`crate::Task::operation`]
    /// and [`crate::OperationSpec::id`] give it: `gen_2_klein_4b`, with
    /// underscores, not the model's name as a job file writes it
    /// (`gen-2-klein-4b`) nor its path. Durations under any other name are
    /// kept but aim no wait. A program that knows how long its model's tasks
    /// take can take the name from the request type:
    ///
    /// ```
    /// use genapi::api::types::Gen2Klein4bRequest;
    /// use genapi::Submit;
    ///
    /// let operation = <Gen2Klein4bRequest as Submit>::OPERATION.id;
    /// assert_eq!(operation, "gen_2_klein_4b");
    /// let mut learned = genapi::Learned::default();
    /// for seconds in [0.12, 0.15, 0.2] {
    ///     learned.observe(operation, seconds);
    /// }
    /// let builder = genapi::Client::builder().learned(learned);
    /// ```
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

    /// The operations something was learned of, by operationId.
    ///
    /// ```
    /// let mut learned = genapi::Learned::default();
    /// learned.observe("gen_2_klein_4b", 0.15);
    /// learned.observe("gen_2_klein_4b", 0.18);
    /// assert_eq!(learned.operations().collect::<Vec<_>>(), ["gen_2_klein_4b"]);
    /// assert_eq!(learned.durations("gen_2_klein_4b").collect::<Vec<_>>(), [0.15, 0.18]);
    /// assert_eq!(learned.durations("gen-2-klein-4b").count(), 0);
    /// ```
    pub fn operations(&self) -> impl Iterator<Item = &str> {
        self.operations.keys().map(String::as_str)
    }

    /// The durations kept for `operation`, oldest first, in seconds (none for
    /// a name nothing was learned under).
    pub fn durations(&self, operation: &str) -> impl Iterator<Item = f64> + '_ {
        self.operations.get(operation).into_iter().flatten().copied()
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

/// Widest interval once late.
const CEILING: f64 = 1.0;
/// Closest step of the grid when nothing is known.
const GRID_NEAREST: f64 = 0.2;
/// Longest single aimed sleep.
pub const MAX_AIM: Duration = Duration::from_secs(20);
/// How far past an expected end to aim, as a share of it.
const MARGIN: f64 = 0.01;
/// A poll request's travel, added to an end extrapolated from progress.
const TRAVEL: f64 = 0.003;
/// The first interval once late, as a share of the expected duration.
const LATE_START: f64 = 0.1;
/// How much each late interval grows over the last.
const GROWTH: f64 = 1.5;
/// Polls spread through the middle half of the learned durations when no
/// progress is reported.
const SPREAD_POLLS: f64 = 4.0;
/// Progress at or below this share is too coarse to extrapolate from.
const LEAST_PROGRESS: f64 = 0.02;
/// Most jitter, as a share of the delay and in all.
const JITTER_SHARE: f64 = 0.02;
const JITTER_MOST: Duration = Duration::from_millis(20);

/// Decides the delay before each poll of one wait.
#[derive(Debug)]
pub(crate) struct Schedule {
    learned: Option<Quartiles>,
    fixed: Option<Duration>,
    /// When the last poll aimed at an extrapolated end was due: once past
    /// it, the task is late.
    aimed_end: Option<f64>,
    /// The next interval once late (`None` until the first); grows on use.
    late: Option<f64>,
    /// How long after a poll a notification may bring the next one.
    wake_gap: Duration,
    /// A notification is expected to end the wait's sleep: the first poll
    /// by learned durations waits for the upper quartile.
    notified: bool,
}

impl Schedule {
    pub(crate) fn new(learned: Option<Quartiles>, fixed: Option<Duration>) -> Self {
        Schedule {
            learned,
            fixed,
            aimed_end: None,
            late: None,
            wake_gap: WaitOptions::MIN_INTERVAL,
            notified: false,
        }
    }

    /// A schedule for a wait that notifications wake: they, not the first
    /// poll, are meant to see most ends, so that poll comes just past the
    /// upper quartile rather than the lower one (three tasks in four are
    /// notified first), and is there for a notification late or lost.
    pub(crate) fn woken(mut self) -> Self {
        self.notified = true;
        self
    }

    /// How long after the last poll a notification may bring the next one
    /// forward: [`WaitOptions::MIN_INTERVAL`] at first.
    pub(crate) fn wake_gap(&self) -> Duration {
        self.wake_gap
    }

    /// A poll a notification brought forward found the task still going:
    /// that notification was early, replayed or forged, and the next one
    /// must wait twice as long after a poll, up to [`MAX_AIM`], so a flood
    /// of them costs a few polls, not one each.
    pub(crate) fn woken_in_vain(&mut self) {
        self.wake_gap = self.wake_gap.saturating_mul(2).min(MAX_AIM);
    }

    /// Delay before the next poll, before jitter. `elapsed` is the time since
    /// submission, `progress` the last reported fraction and when it was read.
    pub(crate) fn next(&mut self, elapsed: Duration, progress: Option<(f64, Duration)>) -> Duration {
        if let Some(fixed) = self.fixed {
            return fixed;
        }
        let t = elapsed.as_secs_f64();
        let seconds = match (extrapolated_end(progress), self.learned) {
            (Some(end), _) => self.toward_end(t, end),
            (None, Some(quartiles)) => self.by_quartiles(t, quartiles),
            (None, None) => grid(t),
        };
        Duration::from_secs_f64(seconds.clamp(WaitOptions::MIN_INTERVAL.as_secs_f64(), MAX_AIM.as_secs_f64()))
    }

    /// Just past an extrapolated end, or the next late interval when the
    /// task is already past an aimed end and this one is nearer than that.
    fn toward_end(&mut self, t: f64, end: f64) -> f64 {
        let aim = end * (1.0 + MARGIN) + TRAVEL - t;
        if self.aimed_end.is_some_and(|due| t >= due) {
            // Every poll past an aimed end lengthens the late interval,
            // aimed or not: progress that puts the end just beyond it each
            // time could otherwise hold it at its first, short length.
            let interval = self.late(end * LATE_START);
            if aim < interval {
                return interval;
            }
        }
        self.aimed_end = Some(t + aim);
        aim
    }

    /// Just past the lower quartile, then evenly through the middle half of
    /// the learned durations, then late.
    fn by_quartiles(&mut self, t: f64, quartiles: Quartiles) -> f64 {
        let aimed_at = if self.notified { quartiles.high } else { quartiles.low };
        let first = aimed_at * (1.0 + MARGIN);
        // A quarter of the spread keeps the polls through the middle half
        // to about four, whatever the durations; a tenth of the typical
        // duration keeps tasks of one duration from being polled densely.
        let middle = (quartiles.low + quartiles.high) / 2.0;
        let step = ((quartiles.high - quartiles.low) / SPREAD_POLLS).max(middle * LATE_START);
        if t < first {
            first - t
        } else if t < quartiles.high {
            step.clamp(WaitOptions::MIN_INTERVAL.as_secs_f64(), CEILING)
        } else {
            self.late(step)
        }
    }

    /// The next late interval (the first is `start`), growing the one after
    /// it.
    fn late(&mut self, start: f64) -> f64 {
        let interval = self
            .late
            .unwrap_or(start)
            .clamp(WaitOptions::MIN_INTERVAL.as_secs_f64(), CEILING);
        self.late = Some((interval * GROWTH).min(CEILING));
        interval
    }
}

/// The end `progress` points at: when it was read over the fraction done.
fn extrapolated_end(progress: Option<(f64, Duration)>) -> Option<f64> {
    let (fraction, read_at) = progress?;
    (fraction > LEAST_PROGRESS && fraction < 1.0).then(|| read_at.as_secs_f64() / fraction)
}

/// Nothing known: the next whole second since submission.
fn grid(t: f64) -> f64 {
    (t.floor() + 1.0 - t).max(GRID_NEAREST)
}

/// `delay` plus up to 2 % of it and at most 20 ms; `unit` is a draw in
/// `[0, 1)`. Only ever later: a poll aimed at the expected end that lands
/// before it costs a whole extra round, one that lands a little after costs
/// a few milliseconds.
pub(crate) fn jitter(delay: Duration, unit: f64) -> Duration {
    let most = Duration::try_from_secs_f64(delay.as_secs_f64() * JITTER_SHARE)
        .unwrap_or(Duration::MAX)
        .min(JITTER_MOST);
    // Added rather than multiplied, so a delay near `Duration::MAX` saturates
    // instead of overflowing.
    let unit = if unit.is_nan() { 0.0 } else { unit.clamp(0.0, 1.0) };
    delay.saturating_add(most.mul_f64(unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secs(d: Duration) -> f64 {
        d.as_secs_f64()
    }

    fn quartiles(low: f64, high: f64) -> Quartiles {
        Quartiles { low, high }
    }

    /// Progress `fraction` read at `at` seconds.
    fn read(fraction: f64, at: f64) -> Option<(f64, Duration)> {
        Some((fraction, Duration::from_secs_f64(at)))
    }

    #[test]
    fn the_delay_by_elapsed_time_progress_and_learned_durations() {
        #[rustfmt::skip]
        let table = [
            // (elapsed, progress (fraction, read at), learned quartiles) → delay
            // Learned: the lower quartile plus 1 % of it, at every scale.
            (0.0, None, Some((0.15, 0.25)), 0.1515),
            (0.0, None, Some((1.0, 1.0)), 1.01),
            (0.0, None, Some((15.0, 25.0)), 15.15),
            (0.1, None, Some((0.15, 0.25)), 0.0515),
            // Between the quartiles without progress: a quarter of the
            // spread, at least a tenth of the middle, at most 1 s; past the
            // upper quartile the same step, growing.
            (0.16, None, Some((0.15, 0.25)), 0.025),
            (3.1, None, Some((3.0, 5.0)), 0.5),
            (3.1, None, Some((3.0, 3.2)), 0.31),
            (16.0, None, Some((15.0, 25.0)), 1.0),
            (0.3, None, Some((0.15, 0.25)), 0.025),
            // Progress: 1 % past the extrapolated end, plus 3 ms; it outranks
            // learned durations.
            (0.2, Some((0.8, 0.2)), None, 0.25 * 1.01 + 0.003 - 0.2),
            (0.2, Some((0.8, 0.2)), Some((0.15, 0.25)), 0.25 * 1.01 + 0.003 - 0.2),
            (2.0, Some((0.5, 2.0)), None, 4.0 * 1.01 + 0.003 - 2.0),
            // Progress too coarse to extrapolate from counts as none.
            (1.0, Some((0.02, 1.0)), None, 1.0),
            (0.16, Some((0.01, 0.16)), Some((0.15, 0.25)), 0.025),
            // Nothing known: the whole-second grid, never closer than 0.2 s.
            (0.0, None, None, 1.0),
            (1.03, None, None, 0.97),
            (1.9, None, None, 0.2),
            // Never longer than MAX_AIM, never shorter than MIN_INTERVAL.
            (0.0, None, Some((3000.0, 3000.0)), 20.0),
            (1.0, Some((0.03, 1.0)), None, 20.0),
            (0.0, None, Some((0.005, 0.005)), 0.01),
            (0.2, Some((0.99, 0.2)), None, 0.01),
        ];
        for (elapsed, progress, learned, expected) in table {
            let progress = progress.and_then(|(fraction, at)| read(fraction, at));
            let learned = learned.map(|(low, high)| quartiles(low, high));
            let delay = secs(Schedule::new(learned, None).next(Duration::from_secs_f64(elapsed), progress));
            assert!(
                (delay - expected).abs() < 1e-6,
                "at {elapsed} s with {progress:?} and {learned:?}: {delay}, not {expected}"
            );
        }
    }

    #[test]
    fn a_wait_woken_by_notifications_polls_first_past_the_upper_quartile() {
        let learned = Some(quartiles(0.15, 0.25));
        let first = secs(Schedule::new(learned, None).woken().next(Duration::ZERO, None));
        assert!((first - 0.25 * 1.01).abs() < 1e-9, "{first}");
        let unwoken = secs(Schedule::new(learned, None).next(Duration::ZERO, None));
        assert!((unwoken - 0.15 * 1.01).abs() < 1e-9, "{unwoken}");
        // Past it, the late intervals, as for any task past the quartiles.
        let mut schedule = Schedule::new(learned, None).woken();
        let late = secs(schedule.next(Duration::from_secs_f64(0.26), None));
        assert!(late > 0.0 && late < 0.1, "{late}");
        // Progress still aims at the extrapolated end.
        let aimed = secs(
            Schedule::new(learned, None)
                .woken()
                .next(Duration::from_secs_f64(0.1), read(0.5, 0.1)),
        );
        assert!((aimed - (0.2 * 1.01 + 0.003 - 0.1)).abs() < 1e-9, "{aimed}");
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
        assert!((secs(schedule.next(Duration::ZERO, None)) - 3.03).abs() < 1e-9);
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
    fn late_polls_without_progress_grow_from_a_tenth_of_the_duration_to_the_ceiling() {
        let mut schedule = Schedule::new(Some(quartiles(1.0, 1.0)), None);
        let delays: Vec<f64> = (0..10)
            .map(|_| secs(schedule.next(Duration::from_secs(5), None)))
            .collect();
        assert!((delays[0] - 0.1).abs() < 1e-9, "{delays:?}");
        assert!((delays[1] - 0.15).abs() < 1e-9, "{delays:?}");
        assert!(delays.windows(2).all(|w| w[1] >= w[0]), "{delays:?}");
        assert_eq!(delays[9], CEILING);
    }

    /// A task that stays at 99 % past its extrapolated end is polled ever
    /// more sparsely, not every few milliseconds; progress that moves the end
    /// further away than the next late interval still aims the poll.
    #[test]
    fn past_an_aimed_end_progress_aims_only_beyond_the_late_interval() {
        let mut schedule = Schedule::new(None, None);
        let first = secs(schedule.next(Duration::from_secs_f64(0.2), read(0.8, 0.2)));
        let mut t = 0.2 + first;
        let mut delays = Vec::new();
        while t < 10.0 {
            let delay = secs(schedule.next(Duration::from_secs_f64(t), read(0.99, t)));
            delays.push(delay);
            t += delay;
        }
        assert!((delays[0] - 0.1 * t_end(0.2 + first)).abs() < 1e-9, "{delays:?}");
        assert!(delays.windows(2).all(|w| w[1] >= w[0]), "{delays:?}");
        assert_eq!(*delays.last().unwrap(), CEILING);
        assert!(delays.len() <= 20, "{} polls in 10 s: {delays:?}", delays.len());
        let further = secs(schedule.next(Duration::from_secs(10), read(0.5, 10.0)));
        assert!((further - (20.0 * 1.01 + 0.003 - 10.0)).abs() < 1e-9, "{further}");
    }

    /// A service that, once the task is late, reports progress putting the
    /// end just beyond the next late interval (so the aim, not the interval,
    /// decides) cannot hold the late intervals at their first, short length:
    /// they grow with every poll past an aimed end, aimed or not.
    #[test]
    fn progress_that_always_outbids_the_late_interval_does_not_keep_it_short() {
        let mut schedule = Schedule::new(None, None);
        let (mut t, mut polls) = (0.3, 0);
        let mut progress = read(0.99, t);
        while t < 10.0 {
            t += secs(schedule.next(Duration::from_secs_f64(t), progress));
            polls += 1;
            // At 99 % twice, so the task is late with a short first
            // interval; then the fraction that aims 48 ms ahead, just over
            // it (once none below 1 can, the nearest one).
            let fraction = if polls < 2 {
                0.99
            } else {
                (1.01 * t / (t + 0.045)).min(0.999_999)
            };
            progress = read(fraction, t);
        }
        assert!(polls <= 25, "{polls} polls in 10 s");
    }

    /// The end extrapolated from 99 % read at `t`.
    fn t_end(t: f64) -> f64 {
        t / 0.99
    }

    /// Polls a task of `duration` as the service would answer: progress
    /// rounded down to a hundredth, on the client's clock. Returns the polls
    /// made and when the one that saw the end was made.
    fn simulate(duration: f64, learned: Option<Quartiles>, draws: &mut fastrand::Rng) -> (u32, f64) {
        let mut schedule = Schedule::new(learned, None);
        let (mut t, mut progress, mut polls) = (0.0, None, 0);
        loop {
            t += secs(jitter(schedule.next(Duration::from_secs_f64(t), progress), draws.f64()));
            polls += 1;
            if t >= duration {
                return (polls, t);
            }
            progress = read((t / duration * 100.0).floor() / 100.0, t);
        }
    }

    /// Polls per task, and the time tasks ran on after their end until a
    /// poll saw it over their durations, of every task but the first (which,
    /// with nothing learned, is polled on the grid).
    fn batch(durations: &[f64]) -> (f64, f64) {
        let mut draws = fastrand::Rng::with_seed(5);
        let mut learned = Learned::default();
        let (mut polls, mut overrun) = (0, 0.0);
        for (n, duration) in durations.iter().enumerate() {
            let (made, seen) = simulate(*duration, learned.quartiles("op"), &mut draws);
            if n > 0 {
                polls += made;
                overrun += seen - duration;
            }
            learned.observe("op", *duration);
        }
        let tasks = (durations.len() - 1) as f64;
        (f64::from(polls) / tasks, overrun / durations[1..].iter().sum::<f64>())
    }

    /// One rule for every duration: tasks of 0.1-0.3 s are seen as promptly,
    /// relative to their length, as tasks of 1-3 s (the few milliseconds of
    /// a request's travel aside), with fewer than two polls each; tasks of
    /// one constant length are seen with one poll each, just after their end.
    #[test]
    fn short_tasks_are_seen_as_promptly_as_long_ones() {
        let mut rng = fastrand::Rng::with_seed(5);
        let uniform: Vec<f64> = (0..2000).map(|_| 0.1 + 0.2 * rng.f64()).collect();
        let mut overruns = Vec::new();
        for scale in [1.0, 10.0] {
            let mixed: Vec<f64> = uniform.iter().map(|seconds| seconds * scale).collect();
            let (polls, overrun) = batch(&mixed);
            assert!(polls < 1.8, "{polls} polls per task at scale {scale}");
            assert!(overrun < 0.08, "overrun {overrun} at scale {scale}");
            overruns.push(overrun);
            let (polls, overrun) = batch(&vec![scale; 200]);
            assert_eq!(polls, 1.0, "at scale {scale}");
            assert!(overrun < 0.025, "overrun {overrun} at scale {scale}");
        }
        assert!((overruns[0] - overruns[1]).abs() < 0.02, "{overruns:?}");
    }

    #[test]
    fn jitter_saturates_instead_of_overflowing() {
        assert_eq!(jitter(Duration::MAX, 1.0), Duration::MAX);
        assert_eq!(jitter(Duration::MAX, 0.0), Duration::MAX);
    }

    #[test]
    fn jitter_only_delays_and_by_at_most_two_percent_and_twenty_milliseconds() {
        let short = Duration::from_millis(500);
        assert_eq!(jitter(short, 0.0), short);
        assert_eq!(jitter(short, 1.0), Duration::from_millis(510));
        assert_eq!(jitter(short, 0.5), Duration::from_millis(505));
        let long = Duration::from_secs(20);
        assert_eq!(jitter(long, 1.0), Duration::from_millis(20_020));
        assert_eq!(jitter(long, f64::NAN), long);
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
