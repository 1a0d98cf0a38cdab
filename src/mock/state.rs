//! What the mock remembers: keys, tasks, credits, faults, the request log and
//! its clock.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{json, Value};

use super::{Fault, LoggedRequest, MockConfig};

/// The mock's clock: real time plus an offset tests can advance, so a signed
/// address can expire without waiting ten minutes.
#[derive(Debug, Default)]
pub(crate) struct Clock {
    offset: Mutex<Duration>,
}

impl Clock {
    pub(crate) fn now(&self) -> Instant {
        Instant::now() + self.offset()
    }
    pub(crate) fn wall(&self) -> SystemTime {
        SystemTime::now() + self.offset()
    }
    pub(crate) fn advance(&self, by: Duration) {
        if let Ok(mut offset) = self.offset.lock() {
            *offset += by;
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
    fn status(&self) -> &'static str {
        match self {
            Outcome::Ready => "Ready",
            Outcome::Error(_) => "Error",
            Outcome::RequestModerated => "Request Moderated",
            Outcome::ContentModerated => "Content Moderated",
        }
    }
}

/// One task of the mock.
#[derive(Clone, Debug)]
pub(crate) struct MockTask {
    pub(crate) id: String,
    pub(crate) key: String,
    pub(crate) created: Instant,
    pub(crate) duration: Duration,
    pub(crate) outcome: Outcome,
    /// `[mock:status=X]` makes the in-progress status X (an unknown value).
    pub(crate) working_status: Option<String>,
    pub(crate) width: u32,
    pub(crate) height: u32,
    pub(crate) format: String,
    pub(crate) seed: i64,
    pub(crate) prompt: String,
    pub(crate) cost: f64,
    pub(crate) webhook: Option<(String, Option<String>)>,
    pub(crate) image: Option<std::sync::Arc<Vec<u8>>>,
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
        let status = match &self.working_status {
            Some(custom) => custom.clone(),
            None if fraction < 0.2 => "Pending".to_string(),
            None => "Generating".to_string(),
        };
        (status, Some((fraction * 100.0).floor() / 100.0))
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

    /// The `result` object of a Ready task.
    pub(crate) fn result(&self, sample: &str) -> Value {
        let start = 1_700_000_000.0;
        json!({
            "sample": sample,
            "seed": self.seed,
            "prompt": self.prompt,
            "start_time": start,
            "end_time": start + self.duration.as_secs_f64(),
            "duration": self.duration.as_secs_f64(),
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

/// A webhook delivery attempt series, for tests to inspect.
#[derive(Clone, Debug, PartialEq)]
pub struct Delivery {
    /// Task id.
    pub task_id: String,
    /// Where it was sent.
    pub url: String,
    /// Attempts made.
    pub attempts: u32,
    /// Status of the last attempt, if any answered.
    pub last_status: Option<u16>,
    /// Whether an attempt got a 2xx.
    pub delivered: bool,
}

pub(crate) struct State {
    pub(crate) config: MockConfig,
    pub(crate) document: crate::validate::Document,
    /// The document's operations, read once: the router looks them up on
    /// every request.
    pub(crate) operations: Vec<crate::validate::DocumentOperation>,
    pub(crate) clock: Clock,
    pub(crate) tasks: Mutex<HashMap<String, MockTask>>,
    pub(crate) credits: Mutex<Option<f64>>,
    pub(crate) faults: Mutex<Vec<Fault>>,
    pub(crate) log: Mutex<Vec<LoggedRequest>>,
    pub(crate) deliveries: Mutex<Vec<Delivery>>,
    /// Key used to sign delivery addresses.
    pub(crate) signing_key: [u8; 32],
}

impl State {
    pub(crate) fn active_tasks(&self, key: &str) -> usize {
        let now = self.clock.now();
        self.tasks
            .lock()
            .map(|t| t.values().filter(|t| t.key == key && !t.is_final(now)).count())
            .unwrap_or(0)
    }

    /// Takes the first fault matching the request, counting it down.
    pub(crate) fn take_fault(&self, method: &str, path: &str) -> Option<Fault> {
        let mut faults = self.faults.lock().ok()?;
        let index = faults.iter().position(|f| f.matches(method, path))?;
        let fault = faults[index].clone();
        faults[index].times -= 1;
        if faults[index].times == 0 {
            faults.remove(index);
        }
        Some(fault)
    }
}
