//! One error type for everything the client does.
//!
//! Every variant says what went wrong in words a user can act on; the raw
//! material (the service's 422 detail, a task's `details`, an undecodable body)
//! is kept so a program can look closer. Nothing here ever holds the API key
//! or a webhook secret.

use std::time::Duration;

use crate::api::types::{ValidationError, ValidationErrorLocItem};
use crate::TaskStatus;

/// Result of the client's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a validation error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// By this crate, before anything was sent.
    Locally,
    /// By the service, which answered 422.
    ByService,
}

/// Which stage of moderation stopped a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moderation {
    /// The input was flagged before processing (`Request Moderated`).
    Request,
    /// The output was flagged (`Content Moderated`).
    Content,
}

/// Everything that can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request is invalid; `errors` has the service's 422 shape whether it
    /// was found locally or by the service, so both are handled alike.
    #[error("invalid request ({}): {}; fix the fields named and send again", checked_by(*.checked), summary(.errors))]
    Validation {
        /// Every problem found.
        errors: Vec<ValidationError>,
        /// Found before sending, or by the service.
        checked: Checked,
    },
    /// 403: the key is missing or wrong, or its project has no access.
    #[error("forbidden (403): check GENAPI_API_KEY and that its project may use this endpoint{}", detail(.message))]
    Forbidden {
        /// The service's message, if any.
        message: String,
    },
    /// 402: the organization has no credits left.
    #[error("insufficient credits (402): add credits or raise the project's spending limit{}", detail(.message))]
    InsufficientCredits {
        /// The service's message, if any.
        message: String,
    },
    /// 429: too many active tasks; the task was not accepted.
    #[error("rate limited (429): too many active tasks; retry {}{}", retry_hint(*.retry_after), detail(.message))]
    RateLimited {
        /// The service's `Retry-After`, when given.
        retry_after: Option<Duration>,
        /// The service's message, if any.
        message: String,
    },
    /// 5xx from the service.
    #[error("service error ({status}): try again later{}", detail(.message))]
    Server {
        /// HTTP status.
        status: u16,
        /// The body, if any.
        message: String,
    },
    /// Any other status the contract does not describe.
    #[error("unexpected response ({status}) from {operation}{}", detail(.message))]
    UnexpectedStatus {
        /// HTTP status.
        status: u16,
        /// What was being done.
        operation: String,
        /// The body, if any.
        message: String,
    },
    /// The request could not be sent, or the answer not read.
    #[error("network error during {operation}: {source}; check the base URL and your connection")]
    Transport {
        /// What was being done.
        operation: String,
        /// The underlying error (never carries the key).
        #[source]
        source: reqwest::Error,
    },
    /// The deadline passed before the task reached a final status.
    #[error("no final status after {}s (last seen: {}); raise the timeout or check the task later with its id", .after.as_secs_f64(), show_status(.last_status))]
    Timeout {
        /// The deadline.
        after: Duration,
        /// The last status polling saw.
        last_status: Option<TaskStatus>,
    },
    /// The task ended with `Error`.
    #[error("task {id} failed{}", details_text(.details))]
    TaskFailed {
        /// Task id.
        id: String,
        /// The service's `details`, usually `{"error": "…"}`.
        details: Option<serde_json::Value>,
    },
    /// The task was stopped by moderation (not charged).
    #[error("task {id} was moderated ({}): change the {} or raise safety_tolerance", match .stage { Moderation::Request => "input", Moderation::Content => "output" }, match .stage { Moderation::Request => "prompt or input images", Moderation::Content => "prompt" })]
    Moderated {
        /// Task id.
        id: String,
        /// Input or output moderation.
        stage: Moderation,
        /// The service's `details`, if any.
        details: Option<serde_json::Value>,
    },
    /// The service does not know the task, or it has expired.
    #[error("task {id} not found: it expired or was never accepted; submit it again")]
    TaskNotFound {
        /// Task id.
        id: String,
    },
    /// The signed result address no longer works, even after polling again.
    #[error("the result of task {id} has expired (addresses are valid 10 minutes); submit the task again")]
    ResultExpired {
        /// Task id.
        id: String,
    },
    /// A `polling_url` points at an origin the key must not go to.
    #[error("refusing to send the API key to {origin}: add it with ClientBuilder::trust_origin if it belongs to the service")]
    UntrustedOrigin {
        /// `scheme://host:port` of the refused address.
        origin: String,
    },
    /// A redirect from the API; the key is never forwarded to follow it.
    #[error("the service redirected {operation} to {location}; not followed, so the key stays on trusted origins")]
    Redirected {
        /// What was being done.
        operation: String,
        /// The `Location` header.
        location: String,
    },
    /// A body could not be decoded; the raw text is kept.
    #[error("cannot decode the answer to {operation}: {message}")]
    Decode {
        /// What was being done.
        operation: String,
        /// What did not fit.
        message: String,
        /// The raw body, as received.
        body: String,
    },
    /// An image input could not be used.
    #[error("image input {source_name}: {message}")]
    Input {
        /// The path, URL or "bytes".
        source_name: String,
        /// What to fix.
        message: String,
    },
    /// The client configuration is incomplete or wrong.
    #[error("configuration: {0}")]
    Config(String),
}

fn checked_by(checked: Checked) -> &'static str {
    match checked {
        Checked::Locally => "checked before sending",
        Checked::ByService => "422 from the service",
    }
}

/// `body.width: Input should be …; body.prompt: Field required`.
pub(crate) fn summary(errors: &[ValidationError]) -> String {
    errors
        .iter()
        .map(|e| format!("{}: {}", location(&e.loc), e.msg))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `body.input_image_2` for `["body", "input_image_2"]`.
pub(crate) fn location(loc: &[ValidationErrorLocItem]) -> String {
    loc.iter().map(ToString::to_string).collect::<Vec<_>>().join(".")
}

fn detail(message: &str) -> String {
    if message.trim().is_empty() {
        String::new()
    } else {
        format!(" ({})", truncate(message.trim(), 300))
    }
}

fn retry_hint(after: Option<Duration>) -> String {
    match after {
        Some(after) => format!("after {}s", after.as_secs()),
        None => "later".to_string(),
    }
}

fn show_status(status: &Option<TaskStatus>) -> String {
    status.as_ref().map_or_else(|| "none".to_string(), ToString::to_string)
}

fn details_text(details: &Option<serde_json::Value>) -> String {
    match details {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(text)) => format!(": {}", truncate(text, 300)),
        Some(value) => match value.get("error").and_then(|e| e.as_str()) {
            Some(text) => format!(": {}", truncate(text, 300)),
            None => format!(": {}", truncate(&value.to_string(), 300)),
        },
    }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl Error {
    /// Whether the same call may succeed later without changes (rate limits,
    /// server errors, network errors, timeouts).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::RateLimited { .. } | Error::Server { .. } | Error::Transport { .. } | Error::Timeout { .. }
        )
    }

    /// The validation errors, local or from the service.
    pub fn validation_errors(&self) -> Option<&[ValidationError]> {
        match self {
            Error::Validation { errors, .. } => Some(errors),
            _ => None,
        }
    }
}
