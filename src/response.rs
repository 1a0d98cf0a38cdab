//! What an answer of the service means: decoding a success, and turning
//! every other status into the matching [`Error`].
//!
//! Text that came from the service is treated as hostile: the key is removed
//! from it (a hostile service may echo request headers), long values are cut,
//! and a 422's echo of the request (`input`, which for a missing field is the
//! whole body, webhook secret and base64 images included) is scrubbed before
//! it is stored in an error.

use reqwest::StatusCode;
use serde_json::Value;

use crate::api::types::{HttpValidationError, ValidationErrorLocItem};
use crate::error::{Checked, Error, TaskRef};
use crate::transport::{Answer, Transport};

/// An [`Error::Decode`] for this body.
pub(crate) fn decode_error(transport: &Transport, operation: &str, message: String, body: &[u8]) -> Error {
    Error::Decode {
        operation: operation.to_string(),
        message,
        body: transport.scrub(&String::from_utf8_lossy(body)),
        task: None,
    }
}

/// Turns a non-success answer into the matching error.
pub(crate) fn error_from(transport: &Transport, operation: &str, answer: &Answer) -> Error {
    let message = transport.scrub(&service_message(&answer.body));
    match answer.status {
        StatusCode::UNPROCESSABLE_ENTITY => match serde_json::from_slice::<HttpValidationError>(&answer.body) {
            Ok(detail) => validation_from_service(transport, detail),
            Err(_) => unexpected(operation, answer.status, message),
        },
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => Error::Forbidden { message, task: None },
        StatusCode::PAYMENT_REQUIRED => Error::InsufficientCredits { message },
        StatusCode::TOO_MANY_REQUESTS => Error::RateLimited {
            retry_after: answer.retry_after(),
            message,
            task: None,
        },
        s if s.is_server_error() => Error::Server {
            status: s.as_u16(),
            message,
            task: None,
        },
        s if s.is_redirection() => Error::Redirected {
            operation: operation.to_string(),
            location: answer
                .headers
                .get(reqwest::header::LOCATION)
                .and_then(|v| v.to_str().ok())
                .map(|l| transport.scrub(l))
                .unwrap_or_default(),
            task: None,
        },
        s => unexpected(operation, s, message),
    }
}

/// Turns a non-success answer about an accepted task (a poll, a download)
/// into an error that carries the task. A 422 or 402 there is not about the
/// user's request (which was accepted and will be charged), so it is reported
/// as an unexpected answer, never as "fix your request" or "no credits".
pub(crate) fn error_for_task(transport: &Transport, operation: &str, answer: &Answer, task: &TaskRef) -> Error {
    match error_from(transport, operation, answer) {
        Error::Validation { errors, .. } => Error::UnexpectedStatus {
            status: answer.status.as_u16(),
            operation: operation.to_string(),
            message: transport.scrub(&crate::error::summary(&errors)),
            task: Some(task.clone()),
        },
        Error::InsufficientCredits { message } => Error::UnexpectedStatus {
            status: answer.status.as_u16(),
            operation: operation.to_string(),
            message,
            task: Some(task.clone()),
        },
        other => other.for_task(task),
    }
}

fn unexpected(operation: &str, status: StatusCode, message: String) -> Error {
    Error::UnexpectedStatus {
        status: status.as_u16(),
        operation: operation.to_string(),
        message,
        task: None,
    }
}

/// A service 422, with its echoes of the input scrubbed, and the key
/// removed from every text in it (a service may echo request headers).
pub(crate) fn validation_from_service(transport: &Transport, detail: HttpValidationError) -> Error {
    let mut errors = detail.detail;
    for error in &mut errors {
        error.msg = transport.scrub(&error.msg);
        for item in &mut error.loc {
            if let ValidationErrorLocItem::String(text) = item {
                *text = transport.scrub(text);
            }
        }
        if let Some(input) = error.input.as_mut() {
            scrub_input(input, 0);
            remove_key(transport, input);
        }
    }
    Error::Validation {
        errors,
        checked: Checked::ByService,
    }
}

/// Removes the key from every string of an echoed value.
fn remove_key(transport: &Transport, value: &mut Value) {
    match value {
        Value::String(text) => *text = transport.scrub(text),
        Value::Array(items) => items.iter_mut().for_each(|item| remove_key(transport, item)),
        Value::Object(map) => map.values_mut().for_each(|field| remove_key(transport, field)),
        _ => {}
    }
}

/// Field names whose values are never kept: secrets and keys.
fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    ["secret", "key", "token", "password", "authorization", "credential"]
        .iter()
        .any(|word| name.contains(word))
}

/// Longest string kept from an echoed input.
const ECHO_STRING: usize = 120;
/// Deepest nesting kept from an echoed input.
const ECHO_DEPTH: usize = 8;

/// A JSON value as genapi shows one in messages and `Debug` output: fields
/// whose name says secret, key, token, password, authorization or
/// credential replaced, long strings (images) cut, deep nesting folded. A
/// program logging a request body can show it the same way.
///
/// ```
/// let shown = genapi::scrubbed(&serde_json::json!({"prompt": "a fox", "webhook_secret": "s3cret"}));
/// assert_eq!(shown["prompt"], "a fox");
/// assert!(!shown.to_string().contains("s3cret"));
/// ```
pub fn scrubbed(value: &Value) -> Value {
    let mut shown = value.clone();
    scrub_input(&mut shown, 0);
    shown
}

/// Redacts secret-like fields and cuts long values of an echoed input.
pub(crate) fn scrub_input(value: &mut Value, depth: usize) {
    if depth > ECHO_DEPTH {
        *value = Value::String("…".into());
        return;
    }
    match value {
        Value::String(text) => {
            if let Some((cut, _)) = text.char_indices().nth(ECHO_STRING) {
                let kept = text.chars().count();
                *text = format!("{}… ({kept} characters)", &text[..cut]);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(|item| scrub_input(item, depth + 1)),
        Value::Object(map) => {
            for (name, field) in map.iter_mut() {
                if is_secret_name(name) && !field.is_null() {
                    *field = Value::String("[redacted]".into());
                } else {
                    scrub_input(field, depth + 1);
                }
            }
        }
        _ => {}
    }
}

/// The `detail`, `message` or `error` of an error body, else the body
/// itself; nothing for an empty body or an empty JSON object.
fn service_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(map)) if map.is_empty() => String::new(),
        Ok(Value::Null) => String::new(),
        Ok(value) => ["detail", "message", "error"]
            .iter()
            .find_map(|k| {
                value
                    .get(*k)
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            })
            .unwrap_or_else(|| text.into_owned()),
        Err(_) => text.into_owned(),
    }
}

/// Whether a character should not reach a terminal as it is: control
/// characters, and the invisible ones that reorder or hide text (bidi
/// controls, zero-width characters, the byte-order mark). genapi replaces
/// them in what it shows of an answer; a program printing a prompt, a name
/// or a message that came from the service or a file can do the same.
///
/// ```
/// assert!(genapi::is_unsafe_to_show('\u{1b}'));
/// assert!(genapi::is_unsafe_to_show('\u{202e}'));
/// assert!(!genapi::is_unsafe_to_show('é'));
/// ```
pub fn is_unsafe_to_show(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}' | '\u{061c}')
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_echoed_body_loses_its_secrets_and_long_values() {
        let image = "A".repeat(10_000);
        let mut input = json!({
            "prompt": "a cat",
            "webhook_secret": "whsec_canary",
            "x-key": "key-canary",
            "input_image": image,
            "nested": {"api_token": "t", "ok": [1, 2]},
        });
        scrub_input(&mut input, 0);
        let text = input.to_string();
        assert!(!text.contains("canary"), "{text}");
        assert_eq!(input["webhook_secret"], "[redacted]");
        assert_eq!(input["nested"]["api_token"], "[redacted]");
        assert_eq!(input["nested"]["ok"], json!([1, 2]));
        assert!(input["input_image"].as_str().unwrap().len() < 200);
        assert!(input["input_image"].as_str().unwrap().ends_with("(10000 characters)"));
    }

    #[test]
    fn empty_bodies_make_no_message() {
        assert_eq!(service_message(b"{}"), "");
        assert_eq!(service_message(b""), "");
        assert_eq!(service_message(b"null"), "");
        assert_eq!(service_message(br#"{"detail":"Too many"}"#), "Too many");
        assert_eq!(service_message(b"<html>down</html>"), "<html>down</html>");
    }
}
