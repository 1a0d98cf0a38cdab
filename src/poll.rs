//! One poll of a task, at the address the service named, and the lenient
//! reading of its answer. [`crate::Task`] polls through it, and so does
//! [`crate::Output`] when a signed address expired and a fresh one is needed.

use reqwest::{StatusCode, Url};
use serde_json::{Map, Value};

use crate::api::types::{HttpValidationError, PollResult, TaskResult};
use crate::call::{Call, Reply};
use crate::error::{Error, Result, TaskRef};
use crate::response::{decode_error, error_for_task};
use crate::session::Session;
use crate::transport::{Answer, Purpose, Transport};
use crate::trust::origin_text;
use crate::TaskStatus;

/// Polls an accepted task once: errors carry the task, and a final status
/// frees its place under the active-task limit. `Task not found` is left to
/// the caller: right after a submission it is not final yet (the not-found
/// grace period), and only the task knows when it was submitted.
pub(crate) async fn poll_task(session: &Session, polling_url: &Url, task: &TaskRef) -> Result<PollResult> {
    let result = poll_at(session, polling_url, task)
        .await
        .map_err(|e| e.for_task(task))?;
    if result.status.is_final() && result.status != TaskStatus::TaskNotFound {
        session.seen_final(&task.id);
    }
    Ok(result)
}

/// Polls `polling_url` once by the generated `get_result`. A 202 reads as
/// `Pending`; a 404 as `Task not found`. Errors carry no task yet: the
/// caller decides whether the answer is the task's.
///
/// The client's first poll goes through the generated code; every later
/// one sends the request it built, at its own address (see
/// [`crate::poll_request::PollRequest`]).
pub(crate) async fn poll_at(session: &Session, polling_url: &Url, task: &TaskRef) -> Result<PollResult> {
    let transport = &session.transport;
    let kept = &session.poll_request;
    if let Some(request) = kept.to(polling_url) {
        let answer = transport
            .exchange_bytes(request, Purpose::Poll, GET_RESULT, transport.max_response_bytes)
            .await?;
        return read_answer(transport, polling_url, task, answer);
    }
    // The generated `get_result` for the polling host, sent to the polling
    // URL exactly as given (the `pre` hook sets it). The origin is a slice
    // of the URL's text: nothing is parsed or built again for it.
    let origin = &polling_url[..url::Position::BeforePath];
    let api = Call::poll(transport, origin, polling_url.clone(), !kept.is_kept());
    let sent = api.get_result().id(&task.id).send().await;
    kept.keep(Call::sent_request(&api));
    match Call::reply(&api, GET_RESULT, sent).await? {
        Reply::Typed(result) => Ok(result),
        // A 422 about an accepted task is not about the user's request.
        Reply::Invalid(detail) => Err(Error::UnexpectedStatus {
            status: StatusCode::UNPROCESSABLE_ENTITY.as_u16(),
            operation: GET_RESULT.into(),
            message: transport.scrub(&crate::error::summary(&detail.detail)),
            task: Some(task.clone()),
        }),
        Reply::Raw(answer) => read_answer(transport, polling_url, task, answer),
    }
}

/// The operation every poll is.
const GET_RESULT: &str = "get_result";

/// What a poll answer means, read leniently: a 200 (or a 422 carrying a
/// task) is the task's state, a 202 `Pending`, a 404 `Task not found`, and
/// anything else the matching error.
fn read_answer(transport: &Transport, polling_url: &Url, task: &TaskRef, answer: Answer) -> Result<PollResult> {
    let placeholder = |status: TaskStatus| PollResult {
        id: task.id.clone(),
        status,
        result: None,
        progress: None,
        details: None,
        preview: None,
        cost: None,
    };
    match answer.status {
        StatusCode::OK => lenient_poll_result(&answer.body, &task.id)
            .map_err(|message| decode_error(transport, GET_RESULT, message, &answer.body)),
        StatusCode::ACCEPTED => Ok(placeholder(TaskStatus::Pending)),
        StatusCode::NOT_FOUND => Ok(placeholder(TaskStatus::TaskNotFound)),
        // The document's 422 first, as the generated code reads it for a
        // client's first poll: a body in its shape is an error even when it
        // also names a status.
        StatusCode::UNPROCESSABLE_ENTITY if serde_json::from_slice::<HttpValidationError>(&answer.body).is_ok() => {
            Err(error_for_task(transport, GET_RESULT, &answer, task))
        }
        // Seen live: a 422 carrying a task body.
        StatusCode::UNPROCESSABLE_ENTITY => lenient_poll_result(&answer.body, &task.id)
            .map_err(|_| error_for_task(transport, GET_RESULT, &answer, task)),
        StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN if !transport.is_trusted(polling_url) => {
            Err(Error::UntrustedOrigin {
                origin: origin_text(polling_url),
                task: task.clone(),
            })
        }
        _ => Err(error_for_task(transport, GET_RESULT, &answer, task)),
    }
}

/// Decodes a poll answer so that only `status` (and, once Ready,
/// `result.sample`) can make it fail: any other field that does not fit its
/// type is dropped with a trace event. A missing `id` is the task's own.
pub(crate) fn lenient_poll_result(body: &[u8], id: &str) -> std::result::Result<PollResult, String> {
    // The usual answer decodes as it is: one pass.
    if let Ok(result) = serde_json::from_slice::<PollResult>(body) {
        return Ok(result);
    }
    let value: Value = serde_json::from_slice(body).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut object) = value else {
        return Err("not a JSON object".into());
    };
    if !object.get("status").is_some_and(Value::is_string) {
        return Err("no status".into());
    }
    if !object.get("id").is_some_and(Value::is_string) {
        object.insert("id".into(), Value::String(id.to_string()));
    }
    if let Some(Value::Object(result)) = object.get_mut("result") {
        keep_fitting::<TaskResult>(result, &[]);
    }
    keep_fitting::<PollResult>(&mut object, &["id", "status"]);
    serde_json::from_value(Value::Object(object)).map_err(|e| e.to_string())
}

/// Drops every field of `object` (but `required`) that does not decode on
/// its own as part of a `T`.
fn keep_fitting<T: serde::de::DeserializeOwned>(object: &mut Map<String, Value>, required: &[&str]) {
    if serde_json::from_value::<T>(Value::Object(object.clone())).is_ok() {
        return;
    }
    let base: Map<String, Value> = object
        .iter()
        .filter(|(k, _)| required.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let misfits: Vec<String> = object
        .iter()
        .filter(|(name, _)| !required.contains(&name.as_str()))
        .filter(|(name, value)| {
            let mut alone = base.clone();
            alone.insert((*name).clone(), (*value).clone());
            serde_json::from_value::<T>(Value::Object(alone)).is_err()
        })
        .map(|(name, _)| name.clone())
        .collect();
    for name in misfits {
        tracing::trace!(field = %name, "dropping a field of unexpected type from a poll result");
        object.remove(&name);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn odd_optional_fields_are_dropped_and_the_result_kept() {
        let body = br#"{"id":"t","status":"Ready","progress":"half","details":null,"cost":"cheap",
            "result":{"sample":"https://d/x.jpg","seed":"a string","duration":[1],"prompt":"ok"}}"#;
        let result = lenient_poll_result(body, "t").unwrap();
        assert_eq!(result.status, TaskStatus::Ready);
        assert_eq!(result.progress, None);
        assert_eq!(result.cost, None);
        let output = result.result.unwrap();
        assert_eq!(output.sample.as_deref(), Some("https://d/x.jpg"));
        assert_eq!(output.prompt.as_deref(), Some("ok"));
        assert_eq!(output.duration, None);
    }

    #[test]
    fn status_is_required_and_a_missing_id_is_filled() {
        assert!(lenient_poll_result(br#"{"id":"t"}"#, "t").is_err());
        assert!(lenient_poll_result(br#"{"status":7}"#, "t").is_err());
        assert!(lenient_poll_result(b"[]", "t").is_err());
        let result = lenient_poll_result(br#"{"status":"Pending"}"#, "t-1").unwrap();
        assert_eq!(result.id, "t-1");
    }
}
