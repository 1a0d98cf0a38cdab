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
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => Error::Forbidden {
            message,
            key_origin: transport.key_origin.clone(),
            task: None,
        },
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
                .map(|l| genapi_text::shown_address(&transport.scrub(l)))
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
        // The service's words may quote an address (an input image it
        // could not fetch): shown by the address rule, as every address.
        error.msg = genapi_text::addresses_shown(&transport.scrub(&error.msg));
        for item in &mut error.loc {
            if let ValidationErrorLocItem::String(text) = item {
                *text = transport.scrub(text);
            }
        }
        if let Some(input) = error.input.as_mut() {
            genapi_text::scrub(input);
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
        genapi_text::scrub(&mut input);
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
