//! Authenticating a notification and reading its body.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use serde_json::Value;

use super::event::{Event, Scheme};
use crate::scrub::Scrubber;
use crate::{TaskStatus, WebhookSecret};

/// Header carrying the shared secret (echo scheme).
pub const SECRET_HEADER: &str = "x-webhook-secret";
/// Standard Webhooks message id header.
pub const ID_HEADER: &str = "webhook-id";
/// Standard Webhooks timestamp header (unix seconds).
pub const TIMESTAMP_HEADER: &str = "webhook-timestamp";
/// Standard Webhooks signature header.
pub const SIGNATURE_HEADER: &str = "webhook-signature";

/// Longest value, in bytes, accepted for any of the four webhook headers;
/// longer ones are refused before any work is done.
pub const MAX_HEADER_BYTES: usize = 2048;
/// Most space-separated entries read from `webhook-signature` (senders list
/// several only while rotating keys); more are refused.
pub const MAX_SIGNATURES: usize = 16;
/// Shortest key accepted, in bytes: the decoded part of a `whsec_` secret,
/// or the raw secret. The longest secret is [`MAX_HEADER_BYTES`], since the
/// service may echo it in a header.
pub const MIN_SECRET_BYTES: usize = 16;

/// Why a notification was rejected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Rejection {
    /// Neither a signature nor a secret header.
    #[error("no webhook-signature or x-webhook-secret header")]
    Unsigned,
    /// Only the echoed secret, while the verifier requires a signature (see
    /// [`Verifier::require_signature`]).
    #[error("a webhook-signature is required; the echoed secret alone is not enough")]
    SignatureRequired,
    /// A header of the signature scheme is missing or empty.
    #[error("missing header {0}")]
    MissingHeader(&'static str),
    /// A header is longer than [`MAX_HEADER_BYTES`].
    #[error("header {0} is over the size limit")]
    HeaderTooLarge(&'static str),
    /// `webhook-signature` lists more than [`MAX_SIGNATURES`] entries.
    #[error("webhook-signature lists more than the allowed number of signatures")]
    TooManySignatures,
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
    /// The body is larger than allowed.
    #[error("body of {0} bytes is over the limit")]
    TooLarge(usize),
    /// The body is not a JSON object with a task id.
    #[error("body is not a notification: {0}")]
    Malformed(String),
}

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(SecretError);

/// Why a secret cannot be used; found when the [`Verifier`] is built, not when
/// the first notification arrives. Never shows the secret.
///
/// ```
/// use genapi::webhook::{SecretError, Verifier};
/// assert_eq!(Verifier::new("").unwrap_err(), SecretError::Empty);
/// assert_eq!(Verifier::new("whsec_").unwrap_err(), SecretError::Empty);
/// assert_eq!(Verifier::new("short").unwrap_err(), SecretError::TooShort(5));
/// assert_eq!(Verifier::new("whsec_%%%").unwrap_err(), SecretError::InvalidBase64);
/// ```
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SecretError {
    /// No key at all (an unset variable, or a bare `whsec_`).
    #[error("the webhook secret is empty")]
    Empty,
    /// Fewer than [`MIN_SECRET_BYTES`] bytes of key; the count is given.
    #[error("the webhook secret has {0} bytes of key, fewer than the 16 required")]
    TooShort(usize),
    /// The part after `whsec_` is not standard base64.
    #[error("the whsec_ secret is not valid base64")]
    InvalidBase64,
    /// Longer than [`MAX_HEADER_BYTES`]: its echo in `X-Webhook-Secret` would
    /// be refused as oversize; the length is given.
    #[error("the webhook secret is {0} bytes long, over the 2048 a header may carry")]
    TooLong(usize),
}

/// Reads the current time; replaceable for tests.
pub type Clock = Arc<dyn Fn() -> SystemTime + Send + Sync>;

/// Verifies notifications with one secret.
///
/// ```
/// use genapi::webhook::Verifier;
/// // A Standard Webhooks secret: signatures are required.
/// let signed_only = Verifier::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")?;
/// // The live service only echoes the secret: accept that explicitly.
/// let echo_too = Verifier::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")?.require_signature(false);
/// # let _ = (signed_only, echo_too);
/// # Ok::<(), genapi::webhook::SecretError>(())
/// ```
#[derive(Clone)]
pub struct Verifier {
    secret: WebhookSecret,
    key: ring::hmac::Key,
    /// Scrubs an event's texts of the secret (see `scrub.rs`): a service may
    /// echo it in the body it signs.
    scrubber: Arc<Scrubber>,
    require_signature: bool,
    tolerance: Duration,
    max_body: usize,
    clock: Clock,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("secret", &self.secret)
            .field("require_signature", &self.require_signature)
            .field("tolerance", &self.tolerance)
            .field("max_body", &self.max_body)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// A verifier for this secret (`whsec_…` or raw), 300 s tolerance, 1 MiB
    /// body limit, system clock. Signatures are required when the secret is a
    /// `whsec_` one, else the echoed secret is also accepted.
    ///
    /// Refuses an empty secret, one with fewer than [`MIN_SECRET_BYTES`] bytes
    /// of key, one longer than [`MAX_HEADER_BYTES`], and a `whsec_` secret
    /// that is not base64.
    pub fn new(secret: impl Into<WebhookSecret>) -> Result<Self, SecretError> {
        let secret = secret.into();
        let key = hmac_key(&secret)?;
        let require_signature = secret.expose().starts_with("whsec_");
        let scrubber = Scrubber::new(secret.expose());
        if let Some(key_part) = secret.expose().strip_prefix("whsec_") {
            scrubber.learn(key_part);
        }
        Ok(Verifier {
            secret,
            key,
            scrubber: Arc::new(scrubber),
            require_signature,
            tolerance: Duration::from_secs(300),
            max_body: 1 << 20,
            clock: Arc::new(SystemTime::now),
        })
    }
    /// Whether a Standard Webhooks signature is required (echo-only
    /// deliveries refused with [`Rejection::SignatureRequired`]). The default
    /// is `true` for a `whsec_` secret, `false` for a raw one; the live
    /// service only echoes, so a receiver for it sets `false`.
    pub fn require_signature(mut self, required: bool) -> Self {
        self.require_signature = required;
        self
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
    /// Uses another wall clock (tests). A signature's timestamp is wall-clock
    /// time (seconds since 1970, as the sender's clock read it), so this is
    /// a `SystemTime`, unlike the monotonic `Instant` clocks of
    /// [`super::Inbox::clock`] and [`super::DuplicateGuard::clock`], which only
    /// measure how long something was kept.
    pub fn wall_clock(mut self, clock: impl Fn() -> SystemTime + Send + Sync + 'static) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Verifies a notification from its headers and raw body. A signature
    /// header that is there but not plain text is a bad signature, never a
    /// reason to fall back to the echoed-secret check.
    pub fn verify(&self, headers: &http::HeaderMap, body: &[u8]) -> Result<Event, Rejection> {
        if headers.get(SIGNATURE_HEADER).is_some_and(|v| v.to_str().is_err()) {
            return Err(Rejection::BadSignature);
        }
        self.verify_lookup(|name| headers.get(name).and_then(|v| v.to_str().ok()), body)
    }

    /// As [`Verifier::verify`], reading headers through `header(name)` (names
    /// are passed lowercase), for frameworks without `http::HeaderMap`.
    pub fn verify_lookup<'h>(&self, header: impl Fn(&str) -> Option<&'h str>, body: &[u8]) -> Result<Event, Rejection> {
        let (scheme, message_id) = self.authenticate_lookup(header, body)?;
        // Authentic: the body is read scrubbed of the secret it may echo.
        match self.scrubber.scrub_body(body) {
            Some(scrubbed) => parse_event(&scrubbed, scheme, message_id),
            None => parse_event(body, scheme, message_id),
        }
    }

    /// Checks only that the notification is authentic (any JSON body), and
    /// returns the scheme and, when signed, the message id.
    pub fn authenticate_lookup<'h>(
        &self,
        header: impl Fn(&str) -> Option<&'h str>,
        body: &[u8],
    ) -> Result<(Scheme, Option<String>), Rejection> {
        if body.len() > self.max_body {
            return Err(Rejection::TooLarge(body.len()));
        }
        let read = |name: &'static str| match header(name) {
            Some(value) if value.len() > MAX_HEADER_BYTES => Err(Rejection::HeaderTooLarge(name)),
            value => Ok(value),
        };
        match read(SIGNATURE_HEADER)? {
            Some(signatures) => {
                let id = read(ID_HEADER)?
                    .filter(|v| !v.is_empty())
                    .ok_or(Rejection::MissingHeader(ID_HEADER))?;
                let timestamp = read(TIMESTAMP_HEADER)?
                    .filter(|v| !v.is_empty())
                    .ok_or(Rejection::MissingHeader(TIMESTAMP_HEADER))?;
                self.check_signature(id, timestamp, signatures, body)?;
                Ok((Scheme::StandardWebhooks, Some(id.to_string())))
            }
            None => {
                let echoed = read(SECRET_HEADER)?.ok_or(Rejection::Unsigned)?;
                if self.require_signature {
                    return Err(Rejection::SignatureRequired);
                }
                if !constant_time_eq(echoed.as_bytes(), self.secret.expose().as_bytes()) {
                    return Err(Rejection::BadSecret);
                }
                Ok((Scheme::SharedSecret, None))
            }
        }
    }

    fn check_signature(&self, id: &str, timestamp: &str, signatures: &str, body: &[u8]) -> Result<(), Rejection> {
        let sent: i64 = timestamp.trim().parse().map_err(|_| Rejection::BadTimestamp)?;
        let now = (self.clock)()
            .duration_since(UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
            .unwrap_or(0);
        let tolerance = i64::try_from(self.tolerance.as_secs()).unwrap_or(i64::MAX);
        if now.saturating_sub(sent) > tolerance {
            return Err(Rejection::Stale(now.saturating_sub(sent) as u64));
        }
        if sent.saturating_sub(now) > tolerance {
            return Err(Rejection::Future(sent.saturating_sub(now) as u64));
        }
        let entries: Vec<&str> = signatures.split_whitespace().take(MAX_SIGNATURES + 1).collect();
        if entries.len() > MAX_SIGNATURES {
            return Err(Rejection::TooManySignatures);
        }
        let engine = &base64::engine::general_purpose::STANDARD;
        let candidates: Vec<Vec<u8>> = entries
            .iter()
            .filter_map(|s| s.strip_prefix("v1,"))
            .filter_map(|s| engine.decode(s).ok())
            .collect();
        if candidates.is_empty() {
            return Err(Rejection::BadSignature);
        }
        // One HMAC over the body, whatever the number of candidates.
        let expected = tag(&self.key, id, timestamp.trim(), body);
        // Every candidate is compared, so the time does not tell which one
        // matched; the length check makes a bare `v1,` (empty) never match.
        let matched = candidates.iter().fold(false, |matched, candidate| {
            matched | constant_time_eq(candidate, expected.as_ref())
        });
        if matched {
            Ok(())
        } else {
            Err(Rejection::BadSignature)
        }
    }
}

/// The HMAC key: the base64 part of a `whsec_` secret, or the raw secret.
fn hmac_key(secret: &WebhookSecret) -> Result<ring::hmac::Key, SecretError> {
    if secret.expose().len() > MAX_HEADER_BYTES {
        return Err(SecretError::TooLong(secret.expose().len()));
    }
    let bytes = match secret.expose().strip_prefix("whsec_") {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| SecretError::InvalidBase64)?,
        None => secret.expose().as_bytes().to_vec(),
    };
    match bytes.len() {
        0 => Err(SecretError::Empty),
        n if n < MIN_SECRET_BYTES => Err(SecretError::TooShort(n)),
        _ => Ok(ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &bytes)),
    }
}

#[cfg(test)]
thread_local! {
    /// HMACs computed on this thread, for the tests that bound the work.
    static HMACS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// HMAC of `{id}.{timestamp}.{body}`, what Standard Webhooks signs, without
/// copying the body.
fn tag(key: &ring::hmac::Key, id: &str, timestamp: &str, body: &[u8]) -> ring::hmac::Tag {
    #[cfg(test)]
    HMACS.with(|count| count.set(count.get() + 1));
    let mut context = ring::hmac::Context::with_key(key);
    for part in [id.as_bytes(), b".", timestamp.as_bytes(), b".", body] {
        context.update(part);
    }
    context.sign()
}

/// Equality whose time depends only on the lengths, not on where the bytes
/// differ.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The Standard Webhooks signature (`v1,…`) of a message, as a sender puts it
/// in `webhook-signature`. The secret is checked as [`Verifier::new`] does.
///
/// ```
/// use genapi::webhook::sign;
/// let signature = sign(
///     &"whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD".into(),
///     "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
///     1649367553,
///     br#"{"email":"test@example.com","username":"test_user"}"#,
/// )?;
/// assert_eq!(signature, "v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=");
/// # Ok::<(), genapi::webhook::SecretError>(())
/// ```
pub fn sign(secret: &WebhookSecret, id: &str, timestamp: i64, body: &[u8]) -> Result<String, SecretError> {
    let tag = tag(&hmac_key(secret)?, id, &timestamp.to_string(), body);
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
        // A failure may say which one in its `error`, in the poll's words
        // (`Content Moderated`): read with the same mapping as a poll, so
        // a moderated task is `Moderated` on both roads.
        "FAILED" => object
            .get("error")
            .and_then(|error| error.get("status"))
            .and_then(Value::as_str)
            .map(TaskStatus::from)
            .filter(|status| status.is_final() && !status.is_success())
            .unwrap_or(TaskStatus::Error),
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

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD";
    const NOW: u64 = 1_649_367_553;

    #[test]
    fn a_failure_names_its_status_as_a_poll_would() {
        let event = |body: &str| parse_event(body.as_bytes(), Scheme::SharedSecret, None).unwrap().status;
        assert_eq!(
            event(r#"{"task_id":"t","status":"FAILED","error":{"status":"Content Moderated","details":null}}"#),
            TaskStatus::ContentModerated
        );
        assert_eq!(
            event(r#"{"task_id":"t","status":"FAILED","error":{"status":"Request Moderated"}}"#),
            TaskStatus::RequestModerated
        );
        assert_eq!(
            event(r#"{"task_id":"t","status":"FAILED","error":"boom"}"#),
            TaskStatus::Error
        );
        // A status that is not a failure cannot turn a failure into something else.
        assert_eq!(
            event(r#"{"task_id":"t","status":"FAILED","error":{"status":"Ready"}}"#),
            TaskStatus::Error
        );
        assert_eq!(event(r#"{"task_id":"t","status":"SUCCESS"}"#), TaskStatus::Ready);
    }

    /// A signature header of bytes that are not text once let the echoed
    /// secret decide; the module promises a present signature is checked.
    #[test]
    fn a_signature_header_that_is_not_text_is_refused_not_ignored() {
        let shared = "a-shared-secret-long-enough-for-the-check";
        let verifier = Verifier::new(shared).unwrap();
        let mut headers = http::HeaderMap::new();
        headers.insert(SECRET_HEADER, http::HeaderValue::from_static(shared));
        let body = br#"{"task_id":"t","status":"Ready"}"#;
        assert!(verifier.verify(&headers, body).is_ok(), "the echo alone is accepted");
        headers.insert(SIGNATURE_HEADER, http::HeaderValue::from_bytes(b"v1,\xff\xfe").unwrap());
        assert_eq!(verifier.verify(&headers, body).unwrap_err(), Rejection::BadSignature);
    }

    /// A flood of well-formed but wrong candidates over a 1 MiB body costs
    /// one HMAC, not one per candidate.
    #[test]
    fn the_hmac_is_computed_once_whatever_the_number_of_candidates() {
        let verifier = Verifier::new(SECRET)
            .unwrap()
            .wall_clock(|| UNIX_EPOCH + Duration::from_secs(NOW));
        let body = vec![b' '; 1 << 20];
        let wrong = format!("v1,{}", base64::engine::general_purpose::STANDARD.encode([0u8; 32]));
        let signatures = vec![wrong.as_str(); MAX_SIGNATURES].join(" ");
        let timestamp = NOW.to_string();
        let header = |name: &str| match name {
            ID_HEADER => Some("msg_1"),
            TIMESTAMP_HEADER => Some(timestamp.as_str()),
            SIGNATURE_HEADER => Some(signatures.as_str()),
            _ => None,
        };
        HMACS.with(|count| count.set(0));
        assert_eq!(
            verifier.authenticate_lookup(header, &body),
            Err(Rejection::BadSignature)
        );
        assert_eq!(
            HMACS.with(|count| count.get()),
            1,
            "one HMAC for {MAX_SIGNATURES} candidates"
        );
    }

    /// Refusals on size, count or shape cost no HMAC at all.
    #[test]
    fn oversize_headers_and_undecodable_candidates_cost_no_hmac() {
        let verifier = Verifier::new(SECRET)
            .unwrap()
            .wall_clock(|| UNIX_EPOCH + Duration::from_secs(NOW));
        let timestamp = NOW.to_string();
        let many = vec!["v1,AAAA"; MAX_SIGNATURES + 1].join(" ");
        let huge = "v".repeat(MAX_HEADER_BYTES + 1);
        HMACS.with(|count| count.set(0));
        for (signatures, expected) in [
            (many.as_str(), Rejection::TooManySignatures),
            (huge.as_str(), Rejection::HeaderTooLarge(SIGNATURE_HEADER)),
            ("v1,not-base64! v2,AAAA", Rejection::BadSignature),
        ] {
            let header = |name: &str| match name {
                ID_HEADER => Some("msg_1"),
                TIMESTAMP_HEADER => Some(timestamp.as_str()),
                SIGNATURE_HEADER => Some(signatures),
                _ => None,
            };
            assert_eq!(verifier.authenticate_lookup(header, b"{}"), Err(expected));
        }
        assert_eq!(HMACS.with(|count| count.get()), 0);
    }
}
