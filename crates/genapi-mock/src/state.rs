//! What the mock remembers: keys, tasks, credits, faults, the request log,
//! counters and its clock. Everything here is bounded: tasks are pruned once
//! their results have expired, the log is a ring, and the active-task count
//! is a counter settled from a heap of finishing times.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use super::outbox::{Outbox, WebhookSecret};

use super::{Fault, LoggedRequest, MockConfig, MockStats};

/// Furthest the mock clock can be moved ahead (about a century): beyond it,
/// `advance` saturates, so no later time computation can overflow.
pub(crate) const MAX_CLOCK_OFFSET: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// How often a wait on the mock clock looks at it again: how soon a move
/// ahead ends such a wait.
const CLOCK_STEP: Duration = Duration::from_millis(20);

/// The mock's clock: the runtime's time plus an offset tests can advance, so
/// a signed address can expire without waiting ten minutes. It reads tokio's
/// clock, so a test on a paused clock moves the service's time too.
#[derive(Debug)]
pub(crate) struct Clock {
    offset: Mutex<Duration>,
    /// The wall time at a known instant, to tell wall time on the same clock.
    origin: (Instant, SystemTime),
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            offset: Mutex::default(),
            origin: (tokio::time::Instant::now().into_std(), SystemTime::now()),
        }
    }
}

impl Clock {
    fn runtime_now() -> Instant {
        tokio::time::Instant::now().into_std()
    }
    pub(crate) fn now(&self) -> Instant {
        let now = Clock::runtime_now();
        now.checked_add(self.offset()).unwrap_or(now)
    }
    pub(crate) fn wall(&self) -> SystemTime {
        let (at, wall) = self.origin;
        let now = wall
            .checked_add(Clock::runtime_now().saturating_duration_since(at))
            .unwrap_or(wall);
        now.checked_add(self.offset()).unwrap_or(now)
    }
    /// Seconds since the Unix epoch on the mock clock.
    pub(crate) fn unix_secs_f64(&self) -> f64 {
        self.wall()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map(|d| d.as_secs_f64())
            .unwrap_or(0.0)
    }
    /// Waits until `until` on this clock: in short steps of the runtime's
    /// clock, so a move ahead ([`Clock::advance`]) ends the wait within a
    /// step; on a paused runtime clock the steps pass as it auto-advances.
    pub(crate) async fn sleep_until(&self, until: Instant) {
        loop {
            let left = until.saturating_duration_since(self.now());
            if left.is_zero() {
                return;
            }
            tokio::time::sleep(left.min(CLOCK_STEP)).await;
        }
    }
    /// Waits until `by` after `from` (an instant of this clock); a wait past
    /// the furthest the clock can be moved ends there.
    pub(crate) async fn sleep_past(&self, from: Instant, by: Duration) {
        let until = from.checked_add(by.min(MAX_CLOCK_OFFSET)).unwrap_or(from);
        self.sleep_until(until).await;
    }
    /// Moves the clock ahead, saturating at [`MAX_CLOCK_OFFSET`].
    pub(crate) fn advance(&self, by: Duration) {
        if let Ok(mut offset) = self.offset.lock() {
            *offset = offset.saturating_add(by).min(MAX_CLOCK_OFFSET);
        }
    }
    fn offset(&self) -> Duration {
        self.offset.lock().map(|o| *o).unwrap_or_default()
    }
}

/// How a task is scripted to end.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    Ready,
    Error(String),
    RequestModerated,
    ContentModerated,
}

impl Outcome {
    /// Scripted by a marker in the prompt (documented in the module docs).
    pub(crate) fn from_prompt(prompt: &str) -> Outcome {
        if prompt.contains("[mock:error]") {
            Outcome::Error("Mock failure requested by the [mock:error] marker".into())
        } else if prompt.contains("[mock:request-moderated]") {
            Outcome::RequestModerated
        } else if prompt.contains("[mock:content-moderated]") {
            Outcome::ContentModerated
        } else {
            Outcome::Ready
        }
    }
    pub(crate) fn status(&self) -> &'static str {
        match self {
            Outcome::Ready => "Ready",
            Outcome::Error(_) => "Error",
            Outcome::RequestModerated => "Request Moderated",
            Outcome::ContentModerated => "Content Moderated",
        }
    }
    /// Neither moderation outcome is charged.
    pub(crate) fn is_charged(&self) -> bool {
        !matches!(self, Outcome::RequestModerated | Outcome::ContentModerated)
    }
}

/// What kind of output a task makes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Media {
    Image,
    Video,
}

/// One task of the mock.
#[derive(Clone, Debug)]
pub(crate) struct MockTask {
    pub(crate) id: String,
    pub(crate) key: String,
    pub(crate) created: Instant,
    /// Wall time of the submission on the mock clock (Unix seconds).
    pub(crate) start_time: f64,
    pub(crate) duration: Duration,
    pub(crate) outcome: Outcome,
    /// `[mock:status=X]` makes the in-progress status X (an unknown value).
    pub(crate) working_status: Option<String>,
    /// Report the observed extra statuses (`Reasoning`/`Generating`, video's
    /// `Queued`/`Uploading`) while in progress.
    pub(crate) observed_statuses: bool,
    pub(crate) media: Media,
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) format: String,
    /// The seed as the JSON number it was given (any integer up to 2^64−1).
    pub(crate) seed: serde_json::Number,
    pub(crate) prompt: String,
    /// An edit's first input image, as sent (base64), which its result
    /// shows; decoded when the result is rendered.
    pub(crate) input: Option<std::sync::Arc<str>>,
    /// Cost announced at submission.
    pub(crate) cost: f64,
    pub(crate) webhook: Option<(String, Option<WebhookSecret>)>,
    /// Polled on the regional host (the global host answers 404 for it);
    /// `false` for webhook submissions, whose fallback is the global host.
    pub(crate) regional: bool,
    /// When the task may be forgotten (results expired).
    pub(crate) keep_until: Instant,
}

impl MockTask {
    /// Status and progress at `now`.
    pub(crate) fn status_at(&self, now: Instant) -> (String, Option<f64>) {
        if self.outcome == Outcome::RequestModerated {
            return (self.outcome.status().to_string(), None);
        }
        let elapsed = now.saturating_duration_since(self.created);
        if elapsed >= self.duration {
            return (self.outcome.status().to_string(), Some(1.0));
        }
        let fraction = elapsed.as_secs_f64() / self.duration.as_secs_f64().max(1e-9);
        let status = match (&self.working_status, self.observed_statuses, self.media) {
            (Some(custom), _, _) => custom.as_str(),
            (None, false, _) => "Pending",
            (None, true, Media::Image) if fraction < 0.2 => "Pending",
            (None, true, Media::Image) if fraction < 0.5 => "Reasoning",
            (None, true, Media::Image) => "Generating",
            (None, true, Media::Video) if fraction < 0.2 => "Queued",
            (None, true, Media::Video) if fraction < 0.8 => "Generating",
            (None, true, Media::Video) => "Uploading",
        };
        (status.to_string(), Some((fraction * 100.0).floor() / 100.0))
    }

    pub(crate) fn finished_at(&self) -> Instant {
        if self.outcome == Outcome::RequestModerated {
            self.created
        } else {
            self.created + self.duration
        }
    }

    pub(crate) fn is_final(&self, now: Instant) -> bool {
        now >= self.finished_at()
    }

    /// What the task costs once final: nothing when moderated.
    pub(crate) fn charged(&self) -> f64 {
        if self.outcome.is_charged() {
            self.cost
        } else {
            0.0
        }
    }

    /// The `result` object of a Ready task.
    pub(crate) fn result(&self, sample: &str) -> Value {
        let duration = self.duration.as_secs_f64();
        json!({
            "sample": sample,
            "seed": Value::Number(self.seed.clone()),
            "prompt": self.prompt,
            "start_time": self.start_time,
            "end_time": self.start_time + duration,
            "duration": duration,
        })
    }

    /// `details` of a failed task.
    pub(crate) fn details(&self) -> Value {
        match &self.outcome {
            Outcome::Error(message) => json!({"error": message}),
            Outcome::RequestModerated => json!({"moderation": "input flagged (mock)"}),
            Outcome::ContentModerated => json!({"moderation": "output flagged (mock)"}),
            Outcome::Ready => Value::Null,
        }
    }
}

/// A task the mock created, as the service's activity records would show
/// it (the live service's records are outside the reference; tests use
/// this to play a user who looks a task up there).
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
#[non_exhaustive]
pub struct CreatedTask {
    /// Task id.
    pub id: String,
    /// The prompt it was given (the first 4 KiB), empty for none.
    pub prompt: String,
    /// When it was submitted, on the mock's clock (Unix seconds).
    pub submitted_at: f64,
    /// The same moment as an HTTP date, the form `genapi batch` reports.
    pub submitted: String,
    /// Output size, to tell apart tasks of one prompt.
    pub width: u32,
    /// Output size, to tell apart tasks of one prompt.
    pub height: u32,
    /// The seed it was given or drawn.
    pub seed: serde_json::Number,
}

/// A webhook delivery attempt series, for tests to inspect.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Delivery {
    /// Task id.
    pub task_id: String,
    /// Where it was sent.
    pub url: String,
    /// Attempts made (0 when the address was refused).
    pub attempts: u32,
    /// Status of the last attempt, if any answered.
    pub last_status: Option<u16>,
    /// Whether an attempt got a 2xx.
    pub delivered: bool,
}

impl Delivery {
    /// A delivery not attempted (yet): refused, dropped, or about to start.
    pub(crate) fn none(task_id: &str, url: &str) -> Delivery {
        Delivery {
            task_id: task_id.to_string(),
            url: url.to_string(),
            attempts: 0,
            last_status: None,
            delivered: false,
        }
    }
}

/// Tasks, with the indexes that keep pruning and the active count cheap.
#[derive(Default)]
pub(crate) struct Tasks {
    map: HashMap<String, MockTask>,
    /// (time, id) at which a task may be forgotten; stale entries are checked
    /// against the task's `keep_until` when popped.
    expiry: BinaryHeap<Reverse<(Instant, String)>>,
    /// (finish time, key) of tasks still counted as active.
    finishing: BinaryHeap<Reverse<(Instant, String)>>,
    active: HashMap<String, usize>,
    /// The most tasks ever active at once, over all keys.
    peak_active: usize,
}

impl Tasks {
    /// Drops tasks whose results have expired and settles the active count.
    pub(crate) fn tidy(&mut self, now: Instant) {
        while let Some(Reverse((at, _))) = self.finishing.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse((_, key))) = self.finishing.pop() {
                if let Some(count) = self.active.get_mut(&key) {
                    *count = count.saturating_sub(1);
                    if *count == 0 {
                        self.active.remove(&key);
                    }
                }
            }
        }
        while let Some(Reverse((at, _))) = self.expiry.peek() {
            if *at > now {
                break;
            }
            if let Some(Reverse((_, id))) = self.expiry.pop() {
                if self.map.get(&id).is_some_and(|t| t.keep_until <= now) {
                    self.map.remove(&id);
                }
            }
        }
    }

    pub(crate) fn active(&self, key: &str) -> usize {
        self.active.get(key).copied().unwrap_or(0)
    }

    pub(crate) fn active_total(&self) -> usize {
        self.active.values().sum()
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn insert(&mut self, task: MockTask, now: Instant) {
        if !task.is_final(now) {
            self.tidy(now);
            *self.active.entry(task.key.clone()).or_insert(0) += 1;
            self.peak_active = self.peak_active.max(self.active_total());
            self.finishing.push(Reverse((task.finished_at(), task.key.clone())));
        }
        self.expiry.push(Reverse((task.keep_until, task.id.clone())));
        self.map.insert(task.id.clone(), task);
    }

    pub(crate) fn get(&self, id: &str) -> Option<&MockTask> {
        self.map.get(id)
    }

    /// Every task still kept.
    pub(crate) fn all(&self) -> impl Iterator<Item = &MockTask> {
        self.map.values()
    }

    /// Keeps a task at least until `until` (a result address was issued).
    /// Extended a minute at a time, so a task polled in a loop adds at most
    /// one expiry entry a minute.
    pub(crate) fn keep(&mut self, id: &str, until: Instant) {
        if let Some(task) = self.map.get_mut(id) {
            if until > task.keep_until {
                let until = until.checked_add(Duration::from_secs(60)).unwrap_or(until);
                task.keep_until = until;
                self.expiry.push(Reverse((until, id.to_string())));
            }
        }
    }
}

/// Counters of what the service saw.
#[derive(Default)]
pub(crate) struct Counters {
    pub(crate) submissions: BTreeMap<String, u64>,
    pub(crate) polls: u64,
    pub(crate) too_many_requests: u64,
    pub(crate) payment_required: u64,
    pub(crate) downloads: u64,
    pub(crate) keys_sent_to_delivery: u64,
    pub(crate) webhooks_refused: u64,
    pub(crate) webhooks_dropped: u64,
}

pub(crate) struct State {
    pub(crate) config: MockConfig,
    /// The document, read once: the router looks its operations up on every
    /// request.
    pub(crate) document: Arc<crate::validate::Rules>,
    pub(crate) clock: Clock,
    pub(crate) tasks: Mutex<Tasks>,
    pub(crate) credits: Mutex<Option<f64>>,
    pub(crate) faults: Mutex<Vec<Fault>>,
    pub(crate) log: Mutex<RequestLog>,
    pub(crate) deliveries: Mutex<VecDeque<Delivery>>,
    /// The origins webhooks may be delivered to, read from the settings once.
    pub(crate) webhook_targets: Vec<crate::WebhookTarget>,
    /// Notifications waiting for delivery, and what delivers them.
    pub(crate) outbox: Outbox,
    pub(crate) counters: Mutex<Counters>,
    /// A few recently rendered results, so repeated downloads do not render
    /// again; bounded, never one per task.
    pub(crate) rendered: Mutex<VecDeque<(String, Arc<Vec<u8>>)>>,
    /// Renders running at once (each is bounded by the output limits).
    pub(crate) render_permits: tokio::sync::Semaphore,
    /// Key used to sign delivery addresses.
    pub(crate) signing_key: [u8; 32],
    /// `http://127.0.0.1:PORT` of the regional and delivery listeners.
    pub(crate) regional_url: String,
    pub(crate) delivery_url: String,
}

/// The request log: the newest requests, and the bytes they hold.
#[derive(Default)]
pub(crate) struct RequestLog {
    entries: VecDeque<LoggedRequest>,
    bytes: usize,
}

impl RequestLog {
    pub(crate) fn iter(&self) -> impl Iterator<Item = &LoggedRequest> {
        self.entries.iter()
    }
}

/// Most faults pending at once.
pub(crate) const MAX_FAULTS: usize = 1024;
/// Most webhook delivery records kept.
const MAX_DELIVERIES: usize = 4096;
/// Rendered results kept for repeated downloads.
const RENDER_CACHE: usize = 16;

impl State {
    /// Takes the first fault matching the request, counting it down.
    pub(crate) fn take_fault(&self, method: &str, path: &str) -> Option<Fault> {
        let mut faults = self.faults.lock().ok()?;
        let index = faults.iter().position(|f| f.matches(method, path))?;
        let fault = faults[index].clone();
        faults[index].times = faults[index].times.saturating_sub(1);
        if faults[index].times == 0 {
            faults.remove(index);
        }
        Some(fault)
    }

    pub(crate) fn add_fault(&self, fault: Fault) -> bool {
        match self.faults.lock() {
            Ok(mut faults) if faults.len() < MAX_FAULTS => {
                faults.push(fault);
                true
            }
            _ => false,
        }
    }

    pub(crate) fn count(&self, update: impl FnOnce(&mut Counters)) {
        if let Ok(mut counters) = self.counters.lock() {
            update(&mut counters);
        }
    }

    /// Keeps a request in the log, dropping (and freeing) the oldest ones
    /// beyond [`MockConfig::request_log_capacity`] entries or
    /// [`MockConfig::request_log_bytes`] bytes. A request larger than the
    /// whole budget is not kept.
    pub(crate) fn record(&self, request: LoggedRequest) {
        let (capacity, budget) = (self.config.request_log_capacity, self.config.request_log_bytes);
        let size = request.held_bytes();
        if capacity == 0 || size > budget {
            return;
        }
        if let Ok(mut log) = self.log.lock() {
            while log.entries.len() >= capacity || log.bytes + size > budget {
                let Some(dropped) = log.entries.pop_front() else { break };
                log.bytes = log.bytes.saturating_sub(dropped.held_bytes());
            }
            log.bytes += size;
            log.entries.push_back(request);
        }
    }

    pub(crate) fn record_delivery(&self, delivery: Delivery) {
        if let Ok(mut deliveries) = self.deliveries.lock() {
            if deliveries.len() >= MAX_DELIVERIES {
                deliveries.pop_front();
            }
            deliveries.push_back(delivery);
        }
    }

    pub(crate) fn cached_render(&self, id: &str) -> Option<Arc<Vec<u8>>> {
        let cache = self.rendered.lock().ok()?;
        cache
            .iter()
            .find(|(cached, _)| cached == id)
            .map(|(_, bytes)| bytes.clone())
    }

    pub(crate) fn cache_render(&self, id: &str, bytes: Arc<Vec<u8>>) {
        if let Ok(mut cache) = self.rendered.lock() {
            if cache.len() >= RENDER_CACHE {
                cache.pop_front();
            }
            cache.push_back((id.to_string(), bytes));
        }
    }

    /// The tasks still kept (those of `key` only, if given), oldest first.
    pub(crate) fn created_tasks(&self, key: Option<&str>) -> Vec<CreatedTask> {
        let mut tasks: Vec<CreatedTask> = self
            .tasks
            .lock()
            .map(|tasks| {
                tasks
                    .all()
                    .filter(|task| key.is_none_or(|key| task.key == key))
                    .map(|task| CreatedTask {
                        id: task.id.clone(),
                        prompt: task.prompt.clone(),
                        submitted_at: task.start_time,
                        submitted: http_date(task.start_time),
                        width: task.width,
                        height: task.height,
                        seed: task.seed.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        tasks.sort_by(|a, b| a.submitted_at.total_cmp(&b.submitted_at));
        tasks
    }

    pub(crate) fn stats(&self) -> MockStats {
        let now = self.clock.now();
        let (active_tasks, peak_active_tasks, tasks_kept) = self
            .tasks
            .lock()
            .map(|mut tasks| {
                tasks.tidy(now);
                (
                    tasks.active_total() as u64,
                    tasks.peak_active as u64,
                    tasks.len() as u64,
                )
            })
            .unwrap_or((0, 0, 0));
        let counters = self.counters.lock();
        let Ok(c) = counters else {
            return MockStats::default();
        };
        MockStats {
            submissions: c.submissions.clone(),
            polls: c.polls,
            too_many_requests: c.too_many_requests,
            payment_required: c.payment_required,
            downloads: c.downloads,
            keys_sent_to_delivery: c.keys_sent_to_delivery,
            webhooks_refused: c.webhooks_refused,
            webhooks_waiting: self.outbox.waiting() as u64,
            webhooks_dropped: c.webhooks_dropped,
            active_tasks,
            peak_active_tasks,
            tasks_kept,
        }
    }
}

/// Unix seconds as an HTTP date (whole seconds; the mock's clock stays within
/// a century of now).
fn http_date(unix_seconds: f64) -> String {
    let seconds = Duration::try_from_secs_f64(unix_seconds.max(0.0)).unwrap_or_default();
    httpdate::fmt_http_date(std::time::UNIX_EPOCH + seconds)
}
