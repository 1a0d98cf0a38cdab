//! Verifying webhook notifications.
//!
//! The contract leaves the scheme open. Two are accepted, and
//! [`Verifier::verify`] says which one vouched for a notification:
//!
//! - **Standard Webhooks**: `webhook-id`, `webhook-timestamp` and
//!   `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`,
//!   several space-separated signatures allowed). The key is the base64 part of
//!   a `whsec_` secret, or the raw secret. Timestamps outside the tolerance
//!   window (default 300 s) are refused, which stops replays.
//! - **Shared-secret echo**: the live service sends the request's
//!   `webhook_secret` back in `X-Webhook-Secret`. It carries no timestamp, so
//!   replays must be stopped by the receiver: see [`ReplayGuard`].
//!
//! When a signature header is present it must verify: the client never falls
//! back to the weaker echo check. Every comparison is constant-time.
//!
//! A framework-free receiver:
//!
//! ```
//! use genapi::webhook::Verifier;
//! fn handle(headers: &http::HeaderMap, body: &[u8]) -> http::StatusCode {
//!     let verifier = Verifier::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD");
//!     match verifier.verify(headers, body) {
//!         Ok(event) if event.status.is_success() => { /* use event.sample() */ http::StatusCode::OK }
//!         Ok(_failed) => http::StatusCode::OK,
//!         Err(_rejected) => http::StatusCode::UNAUTHORIZED,
//!     }
//! }
//! ```
//!
//! With axum (the whole program is `examples/webhook_receiver.rs`):
//!
//! ```ignore
//! async fn receive(inbox: Arc<Inbox>, headers: HeaderMap, body: Bytes) -> StatusCode {
//!     match Verifier::new(SECRET).verify(&headers, &body) {
//!         Ok(event) => { inbox.deliver(event); StatusCode::NO_CONTENT }
//!         Err(_) => StatusCode::UNAUTHORIZED,
//!     }
//! }
//! ```

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::api::types::{PollResult, TaskResult};
use crate::{Output, Task};

use base64::Engine as _;
use serde_json::Value;

use crate::{TaskStatus, WebhookSecret};

/// Header carrying the shared secret (echo scheme).
pub const SECRET_HEADER: &str = "x-webhook-secret";
/// Standard Webhooks message id header.
pub const ID_HEADER: &str = "webhook-id";
/// Standard Webhooks timestamp header (unix seconds).
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// Standard Webhooks signature header.
pub const SIGNATURE_HEADER: &str = "webhook-signature";

/// Which scheme vouched for a notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// A Standard Webhooks signature verified.
    StandardWebhooks,
    /// The `X-Webhook-Secret` header matched.
    SharedSecret,
}

/// Why a notification was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// Neither a signature nor a secret header.
    #[error("no webhook-signature or x-webhook-secret header")]
    Unsigned,
    /// A header of the signature scheme is missing or empty.
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// The timestamp is not a unix time in seconds.
    #[error("webhook-timestamp is not a number of seconds")]
    BadTimestamp,
    /// The timestamp is older than the tolerance.
    #[error("timestamp is {0} s old, outside the tolerance window")]
    Stale(u64),
    /// The timestamp is ahead of the clock by more than the tolerance.
    #[error("timestamp is {0} s in the future, outside the tolerance window")]
    Future(u64),
    /// No signature matched.
    #[error("no signature matches")]
    BadSignature,
    /// The echoed secret does not match.
    #[error("x-webhook-secret does not match")]
    BadSecret,
    /// The configured `whsec_` secret is not valid base64.
    #[error("the configured whsec_ secret is not valid base64")]
    InvalidSecret,
    /// The body is larger than allowed.
    #[error("body of {0} bytes is over the limit")]
    TooLarge(usize),
    /// The body is not a JSON object with a task id.
    #[error("body is not a notification: {0}")]
    Malformed(String),
}

/// A verified notification.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The task it is about (from `task_id` or `id`).
    pub task_id: String,
    /// Normalised status: `SUCCESS` reads as `Ready`, `FAILED` as `Error`.
    pub status: TaskStatus,
    /// The `result` object, when present.
    pub result: Option<Value>,
    /// `error` or `details`, when present.
    pub details: Option<Value>,
    /// `progress`, when present.
    pub progress: Option<f64>,
    /// `cost`, when present.
    pub cost: Option<f64>,
    /// Which scheme verified it.
    pub scheme: Scheme,
    /// The Standard Webhooks message id, when signed.
    pub message_id: Option<String>,
    /// The whole body.
    pub raw: Value,
}

impl Event {
    /// `result.sample`, the output address, when present.
    pub fn sample(&self) -> Option<&str> {
        self.result.as_ref()?.get("sample")?.as_str()
    }
}

/// Reads the current time; replaceable for tests.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// Verifies notifications with one secret.
#[derive(Clone)]
pub struct Verifier {
    secret: WebhookSecret,
    tolerance: Duration,
    max_body: usize,
    clock: Clock,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("secret", &self.secret)
            .field("tolerance", &self.tolerance)
            .field("max_body", &self.max_body)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier for this secret (`whsec_…` or raw), 300 s tolerance, 1 MiB
    /// body limit, system clock.
    pub fn new(secret: impl Into<WebhookSecret>) -> Self {
        Verifier {
            secret: secret.into(),
            tolerance: Duration::from_secs(300),
            max_body: 1 << 20,
            clock: Arc::new(SystemTime::now),
        }
    }
    /// Accepted clock difference for signed notifications.
    pub fn tolerance(mut self, tolerance: Duration) -> Self {
        self.tolerance = tolerance;
        self
    }
    /// Largest body accepted.
    pub fn max_body(mut self, bytes: usize) -> Self {
        self.max_body = bytes;
        self
    }
    /// Uses another clock (tests).
    pub fn clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Verifies a notification from its headers and raw body.
    pub fn verify(&self, headers: &http::HeaderMap, body: &[u8]) -> Result<Event, Rejection> {
        self.verify_with(|name| headers.get(name).and_then(|v| v.to_str().ok()), body)
    }

    /// As [`Verifier::verify`], reading headers through `header(name)` (names
    /// are passed lowercase), for frameworks without `http::HeaderMap`.
    pub fn verify_with<'h>(&self, header: impl Fn(&str) -> Option<&'h str>, body: &[u8]) -> Result<Event, Rejection> {
        let (scheme, message_id) = self.authenticate_with(header, body)?;
        parse_event(body, scheme, message_id)
    }

    /// Checks only that the notification is authentic (any JSON body), and
    /// returns the scheme and, when signed, the message id.
    pub fn authenticate_with<'h>(
        &self,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
    ) -> Result<(Scheme, Option<String>), Rejection> {
        if body.len() > self.max_body {
            return Err(Rejection::TooLarge(body.len()));
        }
        let (scheme, message_id) = match header(SIGNATURE_HEADER) {
            Some(signatures) => {
                let id = header(ID_HEADER)
                    .filter(|v| !v.is_empty())
                    .ok_or(Rejection::MissingHeader(ID_HEADER))?;
                let timestamp = header(TIMESTAMP_HEADER)
                    .filter(|v| !v.is_empty())
                    .ok_or(Rejection::MissingHeader(TIMESTAMP_HEADER))?;
                self.check_signature(id, timestamp, signatures, body)?;
                (Scheme::StandardWebhooks, Some(id.to_string()))
            }
            None => {
                let echoed = header(SECRET_HEADER).ok_or(Rejection::Unsigned)?;
                if !constant_time_eq(echoed.as_bytes(), self.secret.expose().as_bytes()) {
                    return Err(Rejection::BadSecret);
                }
                (Scheme::SharedSecret, None)
            }
        };
        Ok((scheme, message_id))
    }

    fn check_signature(&self, id: &str, timestamp: &str, signatures: &str, body: &[u8]) -> Result<(), Rejection> {
        let sent: i64 = timestamp.trim().parse().map_err(|_| Rejection::BadTimestamp)?;
        let now = (self.clock)()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let tolerance = self.tolerance.as_secs() as i64;
        if now.saturating_sub(sent) > tolerance {
            return Err(Rejection::Stale(now.saturating_sub(sent) as u64));
        }
        if sent.saturating_sub(now) > tolerance {
            return Err(Rejection::Future(sent.saturating_sub(now) as u64));
        }
        let key = key(&self.secret)?;
        let message = signed_content(id, timestamp.trim(), body);
        let engine = &base64::engine::general_purpose::STANDARD;
        let any_match = signatures
            .split_whitespace()
            .filter_map(|s| s.strip_prefix("v1,"))
            .filter_map(|s| engine.decode(s).ok())
            // ring's verify is constant-time and fails on any other length,
            // so a bare `v1,` (an empty signature) can never match.
            .any(|candidate| ring::hmac::verify(&key, &message, &candidate).is_ok());
        if any_match {
            Ok(())
        } else {
            Err(Rejection::BadSignature)
        }
    }
}

/// The HMAC key: the base64 part of a `whsec_` secret, or the raw secret.
fn key(secret: &WebhookSecret) -> Result<ring::hmac::Key, Rejection> {
    let bytes = match secret.expose().strip_prefix("whsec_") {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| Rejection::InvalidSecret)?,
        None => secret.expose().as_bytes().to_vec(),
    };
    Ok(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &bytes))
}

/// `{id}.{timestamp}.{body}`, what Standard Webhooks signs.
fn signed_content(id: &str, timestamp: &str, body: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(id.len() + timestamp.len() + body.len() + 2);
    message.extend_from_slice(id.as_bytes());
    message.push(b'.');
    message.extend_from_slice(timestamp.as_bytes());
    message.push(b'.');
    message.extend_from_slice(body);
    message
}

/// Equality whose time depends only on the lengths, not on where the bytes
/// differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The Standard Webhooks signature (`v1,…`) of a message, as a sender puts it
/// in `webhook-signature`.
///
/// ```
/// use genapi::webhook::sign;
/// let signature = sign(
///     &"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".into(),
///     "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
///     1649367553,
///     br#"{"email":"test@example.com","username":"test_user"}"#,
/// ).unwrap();
/// assert_eq!(signature, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
/// ```
pub fn sign(secret: &WebhookSecret, id: &str, timestamp: i64, body: &[u8]) -> Result<String, Rejection> {
    let tag = ring::hmac::sign(&key(secret)?, &signed_content(id, &timestamp.to_string(), body));
    Ok(format!(
        "v1,{}",
        base64::engine::general_purpose::STANDARD.encode(tag.as_ref())
    ))
}

fn parse_event(body: &[u8], scheme: Scheme, message_id: Option<String>) -> Result<Event, Rejection> {
    let raw: Value = serde_json::from_slice(body).map_err(|e| Rejection::Malformed(e.to_string()))?;
    let object = raw
        .as_object()
        .ok_or_else(|| Rejection::Malformed("not a JSON object".into()))?;
    let task_id = ["task_id", "id"]
        .iter()
        .find_map(|k| object.get(*k).and_then(Value::as_str))
        .ok_or_else(|| Rejection::Malformed("no task_id or id".into()))?
        .to_string();
    let status = match object.get("status").and_then(Value::as_str).unwrap_or("") {
        "SUCCESS" => TaskStatus::Ready,
        "FAILED" => TaskStatus::Error,
        other => TaskStatus::from(other),
    };
    let present = |k: &str| object.get(k).filter(|v| !v.is_null()).cloned();
    Ok(Event {
        task_id,
        status,
        result: present("result"),
        details: present("error").or_else(|| present("details")),
        progress: object.get("progress").and_then(Value::as_f64),
        cost: object.get("cost").and_then(Value::as_f64),
        scheme,
        message_id,
        raw,
    })
}

/// Remembers notifications already processed, so a captured one replayed
/// later is recognised. Keys expire after `ttl`; at most `capacity` are kept.
///
/// ```
/// let guard = genapi::webhook::ReplayGuard::new(std::time::Duration::from_secs(3600), 10_000);
/// assert!(guard.first_time("task-1:Ready"));
/// assert!(!guard.first_time("task-1:Ready"));
/// ```
#[derive(Debug)]
pub struct ReplayGuard {
    seen: Mutex<HashMap<String, std::time::Instant>>,
    ttl: Duration,
    capacity: usize,
}

impl ReplayGuard {
    /// A guard keeping keys for `ttl`, at most `capacity` of them.
    pub fn new(ttl: Duration, capacity: usize) -> Self {
        ReplayGuard {
            seen: Mutex::new(HashMap::new()),
            ttl,
            capacity: capacity.max(1),
        }
    }

    /// True the first time `key` is seen within the ttl.
    pub fn first_time(&self, key: &str) -> bool {
        let now = std::time::Instant::now();
        let Ok(mut seen) = self.seen.lock() else { return false };
        seen.retain(|_, at| now.duration_since(*at) < self.ttl);
        if seen.contains_key(key) {
            return false;
        }
        if seen.len() >= self.capacity {
            if let Some(oldest) = seen.iter().min_by_key(|(_, at)| **at).map(|(k, _)| k.clone()) {
                seen.remove(&oldest);
            }
        }
        seen.insert(key.to_string(), now);
        true
    }

    /// Checks an event: the message id when signed, else task id and status.
    pub fn first_time_event(&self, event: &Event) -> bool {
        match &event.message_id {
            Some(id) => self.first_time(id),
            None => self.first_time(&format!("{}:{}", event.task_id, event.status)),
        }
    }
}

/// Where a receiver hands over verified notifications, so a program can wait
/// for a task by its webhook instead of polling.
///
/// Your receiver calls [`Inbox::deliver`] with each verified [`Event`];
/// [`Inbox::wait`] returns the task's output as soon as its final event
/// arrives (zero polls), and falls back to polling when none has arrived
/// within `fallback_after`, so a program still finishes when the receiver is
/// unreachable.
///
/// ```no_run
/// # async fn demo(client: genapi::Client, inbox: std::sync::Arc<genapi::webhook::Inbox>) -> genapi::Result<()> {
/// use genapi::api::types::{Gen2ProRequest, WebhookUrl};
/// let request = Gen2ProRequest::builder()
///     .prompt("a lighthouse")
///     .webhook_url(WebhookUrl::try_from("https://hooks.example.com/genapi").map_err(|e| genapi::Error::Config(e.to_string()))?)
///     .webhook_secret(genapi::WebhookSecret::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD"));
/// let task = client.submit(request).await?;
/// let output = inbox.wait(task, std::time::Duration::from_secs(30)).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Default)]
pub struct Inbox {
    events: Mutex<HashMap<String, Event>>,
    arrived: tokio::sync::Notify,
}

impl Inbox {
    /// An empty inbox, shared between the receiver and the waiters.
    pub fn new() -> Arc<Inbox> {
        Arc::new(Inbox::default())
    }

    /// Hands over a verified event (only final ones are kept).
    pub fn deliver(&self, event: Event) {
        if !event.status.is_final() {
            return;
        }
        if let Ok(mut events) = self.events.lock() {
            events.insert(event.task_id.clone(), event);
        }
        self.arrived.notify_waiters();
    }

    fn take(&self, task_id: &str) -> Option<Event> {
        self.events.lock().ok()?.remove(task_id)
    }

    /// Waits for the task's final notification; polls if none arrives within
    /// `fallback_after`.
    pub async fn wait(&self, task: Task, fallback_after: Duration) -> crate::Result<Output> {
        let deadline = tokio::time::Instant::now() + fallback_after;
        loop {
            let arrived = self.arrived.notified();
            tokio::pin!(arrived);
            // Register before looking, so an event delivered in between wakes us.
            arrived.as_mut().enable();
            if let Some(event) = self.take(task.id()) {
                let result = PollResult {
                    id: event.task_id,
                    status: event.status,
                    result: event.result.and_then(|r| serde_json::from_value::<TaskResult>(r).ok()),
                    progress: event.progress,
                    details: event.details,
                    preview: None,
                    cost: event.cost,
                };
                if let Some(outcome) = task.settle(result, Duration::ZERO) {
                    return outcome;
                }
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                tracing::debug!(task_id = task.id(), "no webhook in time; polling instead");
                return task.wait().await;
            }
        }
    }
}
