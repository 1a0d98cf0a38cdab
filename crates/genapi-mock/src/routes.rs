//! The mock's HTTP surface: one handler per host (API, regional, delivery)
//! that routes by the document's operations, so every path of `openapi.json`
//! is served without a route table of its own.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State as Shared};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::StreamExt;
use serde_json::{json, Value};

use super::render::{clamp_size, MAX_OUTPUT_PIXELS, MAX_OUTPUT_SIDE};
use super::replay::{Delivered, Replay};
use super::results::{poll_body, signature};
use super::state::{Media, MockTask, Outcome, State, MAX_CLOCK_OFFSET};
use super::webhook_targets::refused_webhook_url;
use super::{deliver, render, FaultKind, LoggedRequest, LOGGED_BODY_LIMIT};

/// Which of the mock's hosts a listener plays.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Origin {
    /// Takes submissions (the base URL) and the control routes.
    Api,
    /// Named in `polling_url`.
    Regional,
    /// Serves `result.sample`; takes no key.
    Delivery,
}

impl Origin {
    fn name(self) -> &'static str {
        match self {
            Origin::Api => "api",
            Origin::Regional => "regional",
            Origin::Delivery => "delivery",
        }
    }
}

#[derive(Clone)]
struct Ctx {
    state: Arc<State>,
    origin: Origin,
}

pub(super) fn router(state: Arc<State>, origin: Origin) -> Router {
    Router::new().fallback(handle).with_state(Ctx { state, origin })
}

/// An oversize body is read (and discarded) up to this much before the 413,
/// so the client sees the answer rather than a broken pipe.
const DRAIN_LIMIT: usize = 1024 * 1024 * 1024;

/// Operations that report their cost only on the poll result.
const COST_ON_POLL: [&str; 8] = [
    "gen_dev",
    "gen_pro_1_1",
    "gen_pro_1_1_ultra",
    "gen_pro_1_1_ultra_finetuned",
    "gen_pro_1_0_fill",
    "gen_pro_1_0_fill_finetuned",
    "gen_pro_1_0_expand",
    "gen_kontext_pro",
];

/// Control routes of the API host: never subject to faults.
fn is_control(origin: Origin, path: &str) -> bool {
    origin == Origin::Api && matches!(path, "/mock/faults" | "/mock/clock/advance" | "/mock/stats")
}

/// Reads the body up to `limit` bytes; `None` when it is larger (the rest
/// is drained and dropped) or broken.
async fn read_body(body: Body, limit: usize) -> Result<Bytes, StatusCode> {
    let mut stream = body.into_data_stream();
    let mut buffer = Vec::new();
    let mut total = 0usize;
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|_| StatusCode::BAD_REQUEST)?;
        total = total.saturating_add(chunk.len());
        if total > DRAIN_LIMIT {
            return Err(StatusCode::PAYLOAD_TOO_LARGE);
        }
        if total <= limit {
            buffer.extend_from_slice(&chunk);
        } else if !buffer.is_empty() {
            buffer = Vec::new();
        }
    }
    if total > limit {
        return Err(StatusCode::PAYLOAD_TOO_LARGE);
    }
    Ok(Bytes::from(buffer))
}

#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
async fn handle(Shared(ctx): Shared<Ctx>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let (method, uri, headers) = (parts.method, parts.uri, parts.headers);
    let limit = ctx.state.config.max_body_bytes;
    let declared = headers
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    // The key is checked before the body is read: a client without one
    // cannot make the mock read (or hold) a large body. The request is then
    // answered as before (faults, then 403), with an empty body.
    let keyed = ctx.origin == Origin::Delivery || authenticate(&ctx.state, &headers).is_some();
    let body = match declared {
        _ if !keyed => Ok(Bytes::new()),
        Some(length) if length > limit as u64 && length > DRAIN_LIMIT as u64 => Err(StatusCode::PAYLOAD_TOO_LARGE),
        _ => read_body(body, limit).await,
    };
    let body = match body {
        Ok(body) => body,
        Err(status) => {
            log(&ctx, &method, &uri, &headers, &Bytes::new());
            let detail = if status == StatusCode::PAYLOAD_TOO_LARGE {
                format!("Request body too large: the limit is {limit} bytes")
            } else {
                "The request body could not be read".to_string()
            };
            return mark(json_response(status, json!({ "detail": detail })));
        }
    };
    // Read before the request is logged: a test that saw it in the log and
    // then moved the clock ahead has surely moved a delay's end too.
    let arrived = ctx.state.clock.now();
    log(&ctx, &method, &uri, &headers, &body);
    let fault = if is_control(ctx.origin, uri.path()) {
        None
    } else {
        ctx.state.take_fault(method.as_str(), uri.path())
    };
    let response = match fault {
        Some(fault) => match fault.kind {
            FaultKind::Delay(delay) => {
                ctx.state.clock.sleep_past(arrived, delay).await;
                route(&ctx, &method, &uri, &headers, &body).await
            }
            FaultKind::Status {
                status,
                retry_after,
                body,
            } => {
                let mut response = (
                    StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                    body,
                )
                    .into_response();
                if let Some(value) = retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
                    response.headers_mut().insert("retry-after", value);
                }
                response
                    .headers_mut()
                    .insert("content-type", HeaderValue::from_static("application/json"));
                response
            }
            FaultKind::DropConnection => {
                let broken = futures::stream::once(async {
                    Err::<Bytes, std::io::Error>(std::io::Error::other("connection dropped (mock fault)"))
                });
                (StatusCode::OK, Body::from_stream(broken)).into_response()
            }
            FaultKind::LoseAnswer => {
                let acted = route(&ctx, &method, &uri, &headers, &body).await;
                let broken = futures::stream::once(async {
                    Err::<Bytes, std::io::Error>(std::io::Error::other("answer lost (mock fault)"))
                });
                (acted.status(), Body::from_stream(broken)).into_response()
            }
            FaultKind::TruncatedAnswer => {
                let acted = route(&ctx, &method, &uri, &headers, &body).await;
                cut_short(acted, None).await
            }
            FaultKind::StalledAnswer(stall) => {
                let acted = route(&ctx, &method, &uri, &headers, &body).await;
                cut_short(acted, Some((ctx.state.clone(), stall))).await
            }
            FaultKind::MalformedBody => (
                StatusCode::OK,
                [("content-type", "application/json")],
                "{\"id\": \"trunc",
            )
                .into_response(),
            FaultKind::Redirect(location) => match HeaderValue::from_str(&location) {
                Ok(location) => (StatusCode::TEMPORARY_REDIRECT, [("location", location)]).into_response(),
                Err(_) => json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({"detail": "bad redirect"})),
            },
        },
        None => route(&ctx, &method, &uri, &headers, &body).await,
    };
    mark(response)
}

/// How long a truncated answer waits after its first half before it breaks.
const FLUSH_PAUSE: Duration = Duration::from_millis(50);

/// `acted` with its headers and the first half of its body; then the
/// connection breaks, or, given a stall, the rest follows after it on the
/// mock clock.
async fn cut_short(acted: Response, stall: Option<(Arc<State>, Duration)>) -> Response {
    let (mut parts, whole) = acted.into_parts();
    let whole = axum::body::to_bytes(whole, usize::MAX).await.unwrap_or_default();
    parts.headers.insert("content-length", HeaderValue::from(whole.len()));
    let (first, rest) = whole.split_at(whole.len() / 2);
    let (first, rest) = (Bytes::copy_from_slice(first), Bytes::copy_from_slice(rest));
    let then = async move {
        match stall {
            Some((state, stall)) => {
                state.clock.sleep_past(state.clock.now(), stall).await;
                Ok(rest)
            }
            None => {
                // The half is flushed before the break: the server writes
                // it while this waits (on a paused clock, the wait ends
                // only once every task is idle, so surely after the write).
                tokio::time::sleep(FLUSH_PAUSE).await;
                Err(std::io::Error::other("answer truncated (mock fault)"))
            }
        }
    };
    let chunks = futures::stream::once(async { Ok::<_, std::io::Error>(first) }).chain(futures::stream::once(then));
    Response::from_parts(parts, Body::from_stream(chunks))
}

/// Every answer says it comes from a test double.
fn mark(mut response: Response) -> Response {
    response
        .headers_mut()
        .insert(crate::MOCK_HEADER, HeaderValue::from_static("true"));
    response
}

fn log(ctx: &Ctx, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) {
    if ctx.state.config.request_log_capacity == 0 {
        return;
    }
    let headers = headers
        .iter()
        .map(|(name, value)| {
            let value = if name.as_str() == "x-key" || name.as_str() == "x-webhook-secret" {
                "[redacted]".to_string()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            };
            (name.as_str().to_string(), value)
        })
        .collect();
    ctx.state.record(LoggedRequest {
        origin: ctx.origin.name().to_string(),
        method: method.to_string(),
        path: uri.path().to_string(),
        query: uri.query().map(str::to_string),
        headers,
        body: redact_body(body),
    });
}

/// The body as text, with any `webhook_secret` value replaced, so the log
/// never holds a secret, cut at [`LOGGED_BODY_LIMIT`] bytes.
fn redact_body(body: &Bytes) -> String {
    let mut text = match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut object)) if object.contains_key("webhook_secret") => {
            object.insert("webhook_secret".into(), json!("[redacted]"));
            Value::Object(object).to_string()
        }
        Ok(_) => String::from_utf8_lossy(body).into_owned(),
        // Not JSON: a secret could sit anywhere in it, and nothing reads it.
        Err(_) if body.windows(14).any(|w| w == b"webhook_secret") => "[unparsed body redacted]".to_string(),
        Err(_) => String::from_utf8_lossy(body).into_owned(),
    };
    if text.len() > LOGGED_BODY_LIMIT {
        let mut cut = LOGGED_BODY_LIMIT;
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = text.len() - cut;
        text.truncate(cut);
        text.push_str(&format!("…[{dropped} more bytes not kept]"));
        // What was cut is freed, not kept as spare capacity for the life of
        // the entry.
        text.shrink_to_fit();
    }
    text
}

async fn route(ctx: &Ctx, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Response {
    let path = uri.path();
    let not_found = || json_response(StatusCode::NOT_FOUND, json!({"detail": "Not Found"}));
    if ctx.origin == Origin::Delivery {
        if headers.contains_key("x-key") {
            ctx.state.count(|c| c.keys_sent_to_delivery += 1);
        }
        if let (&Method::GET, Some(replay), Some(id)) =
            (method, &ctx.state.config.replay, path.strip_prefix("/mock/replay/"))
        {
            return replayed_result(replay, id).await;
        }
        return match (method, path.strip_prefix("/mock/results/")) {
            (&Method::GET, Some(file)) => deliver_result(ctx, file, uri).await,
            _ => not_found(),
        };
    }
    let Some(key) = authenticate(&ctx.state, headers) else {
        return json_response(
            StatusCode::FORBIDDEN,
            json!({"detail": "Not authenticated: missing or unknown x-key"}),
        );
    };
    if let Some(replay) = ctx
        .state
        .config
        .replay
        .as_deref()
        .filter(|_| !path.starts_with("/mock/"))
    {
        return replayed(ctx, replay, method, uri, body);
    }
    if ctx.origin == Origin::Regional {
        return match (method, path) {
            (&Method::GET, "/v1/get_result") if allowed(&ctx.state, &key, "get_result") => poll(ctx, uri),
            (&Method::GET, "/v1/get_result") => no_access(),
            _ => not_found(),
        };
    }
    if path.starts_with("/mock/") {
        // Scripting the mock is for its owner: a key limited to some
        // operations cannot.
        let unrestricted = ctx.state.config.keys.iter().any(|(k, ops)| *k == key && ops.is_none());
        if !unrestricted {
            return no_access();
        }
        return control(&ctx.state, &key, method, path, body);
    }
    if *method == Method::GET && path == "/v1/credits" {
        let credits = ctx.state.credits.lock().ok().and_then(|c| *c).unwrap_or(1_000_000.0);
        return json_response(StatusCode::OK, json!({"credits": credits}));
    }
    let operation = ctx
        .state
        .document
        .operations()
        .iter()
        .find(|op| op.path == path && op.method == method.as_str());
    let Some(operation) = operation else {
        return not_found();
    };
    if !allowed(&ctx.state, &key, &operation.id) {
        return no_access();
    }
    if operation.id == "get_result" {
        return poll(ctx, uri);
    }
    submit(
        ctx,
        &key,
        &operation.id,
        path,
        operation.request_schema.as_deref(),
        body,
    )
}

/// The recorded answer to a submission or a poll (see `replay.rs`).
fn replayed(ctx: &Ctx, replay: &Replay, method: &Method, uri: &Uri, body: &Bytes) -> Response {
    let answer = match (method, uri.path()) {
        (&Method::GET, "/v1/get_result") => {
            let id = uri
                .query()
                .and_then(|q| url::form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "id"))
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default();
            replay.poll(&id, &ctx.state.delivery_url)
        }
        (&Method::POST, path) => {
            let sent = serde_json::from_slice::<Value>(body).unwrap_or(Value::Null);
            replay.submission(path, &sent, &ctx.state.regional_url)
        }
        _ => return json_response(StatusCode::NOT_FOUND, json!({"detail": "Not Found"})),
    };
    let mut response = (
        StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        answer.body,
    )
        .into_response();
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&answer.content_type) {
        headers.insert("content-type", value);
    }
    if let Some(value) = answer.retry_after.and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert("retry-after", value);
    }
    response
}

/// A replayed task's result: the recorded bytes, or a placeholder.
async fn replayed_result(replay: &Replay, id: &str) -> Response {
    match replay.result(id).cloned() {
        None => json_response(
            StatusCode::NOT_FOUND,
            json!({"detail": format!("the recording has no result of task {id}")}),
        ),
        Some(Delivered::Bytes(content_type, bytes)) => {
            (StatusCode::OK, [("content-type", content_type)], bytes).into_response()
        }
        Some(Delivered::Placeholder(content_type, format, width, height)) => {
            let format = if matches!(format.as_str(), "png" | "webp") {
                format
            } else {
                "jpeg".to_string()
            };
            let id = id.to_string();
            // Encoding is CPU work: off the threads that serve requests.
            let rendered = tokio::task::spawn_blocking(move || {
                render::render(width, height, &id, "replayed result", &format, None)
            })
            .await;
            match rendered {
                Ok(Ok(bytes)) => (StatusCode::OK, [("content-type", content_type)], bytes).into_response(),
                _ => json_response(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    json!({"detail": "the placeholder could not be rendered"}),
                ),
            }
        }
    }
}

fn no_access() -> Response {
    json_response(
        StatusCode::FORBIDDEN,
        json!({"detail": "This key's project has no access to this endpoint"}),
    )
}

/// Control endpoints, so tests in any language can script the mock (all take
/// the mock's key): `POST /mock/faults` with a fault as JSON,
/// `POST /mock/clock/advance` with `{"seconds": N}`, `GET /mock/stats`,
/// `GET /mock/tasks`.
fn control(state: &State, key: &str, method: &Method, path: &str, body: &Bytes) -> Response {
    if *method == Method::GET && path == "/mock/tasks" {
        // Each key sees the tasks it created, as a project sees its own.
        return json_response(StatusCode::OK, json!({ "tasks": state.created_tasks(Some(key)) }));
    }
    if *method == Method::GET && path == "/mock/stats" {
        return match serde_json::to_value(state.stats()) {
            Ok(stats) => json_response(StatusCode::OK, stats),
            Err(_) => json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({"detail": "stats"})),
        };
    }
    if *method != Method::POST {
        return json_response(StatusCode::NOT_FOUND, json!({"detail": "Not Found"}));
    }
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let outcome = match path {
        "/mock/faults" => fault_from_json(&request).and_then(|fault| {
            state
                .add_fault(fault)
                .then_some(())
                .ok_or_else(|| format!("too many faults pending (at most {})", super::state::MAX_FAULTS))
        }),
        "/mock/clock/advance" => request["seconds"]
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0 && *s <= MAX_CLOCK_OFFSET.as_secs_f64())
            .map(|s| state.clock.advance(Duration::from_secs_f64(s)))
            .ok_or_else(|| {
                format!(
                    "expected {{\"seconds\": N}} with 0 <= N <= {}",
                    MAX_CLOCK_OFFSET.as_secs()
                )
            }),
        _ => return json_response(StatusCode::NOT_FOUND, json!({"detail": "Not Found"})),
    };
    match outcome {
        Ok(()) => json_response(StatusCode::OK, json!({"ok": true})),
        Err(message) => json_response(StatusCode::BAD_REQUEST, json!({"detail": message})),
    }
}

/// A fault's duration in milliseconds, when `field` is given: at most a
/// minute.
fn millis(request: &Value, field: &str) -> Result<Option<Duration>, String> {
    match request.get(field).filter(|v| !v.is_null()) {
        None => Ok(None),
        Some(ms) => ms
            .as_u64()
            .filter(|ms| *ms <= 60_000)
            .map(|ms| Some(Duration::from_millis(ms)))
            .ok_or_else(|| format!("{field} must be from 0 to 60000")),
    }
}

/// `{"path_prefix", "method"?, "times"?, one of: "status" (+ "retry_after",
/// "body"), "delay_ms", "drop_connection": true, "lose_answer": true, "truncated_answer": true,
/// "stall_ms", "malformed_body": true, "redirect"}`, each within sane bounds.
fn fault_from_json(request: &Value) -> Result<super::Fault, String> {
    let prefix = request["path_prefix"].as_str().ok_or("path_prefix is required")?;
    if prefix.len() > 1024 {
        return Err("path_prefix is too long".into());
    }
    let kind = if let Some(status) = request.get("status").filter(|v| !v.is_null()) {
        let status = status
            .as_u64()
            .filter(|s| (100..=599).contains(s))
            .ok_or("status must be an HTTP status from 100 to 599")? as u16;
        let retry_after = request["retry_after"]
            .as_str()
            .map(str::to_string)
            .or_else(|| request["retry_after"].as_u64().map(|s| s.to_string()));
        if retry_after
            .as_deref()
            .is_some_and(|v| v.len() > 64 || HeaderValue::from_str(v).is_err())
        {
            return Err("retry_after must be a short header value".into());
        }
        let body = request["body"].as_str().unwrap_or("{}");
        if body.len() > 64 * 1024 {
            return Err("body is limited to 64 KiB".into());
        }
        FaultKind::Status {
            status,
            retry_after,
            body: body.to_string(),
        }
    } else if let Some(delay) = millis(request, "delay_ms")? {
        FaultKind::Delay(delay)
    } else if request["drop_connection"] == true {
        FaultKind::DropConnection
    } else if request["lose_answer"] == true {
        FaultKind::LoseAnswer
    } else if request["truncated_answer"] == true {
        FaultKind::TruncatedAnswer
    } else if let Some(stall) = millis(request, "stall_ms")? {
        FaultKind::StalledAnswer(stall)
    } else if request["malformed_body"] == true {
        FaultKind::MalformedBody
    } else if let Some(location) = request["redirect"].as_str() {
        if url::Url::parse(location).is_err() || HeaderValue::from_str(location).is_err() {
            return Err("redirect must be an absolute URL".into());
        }
        FaultKind::Redirect(location.to_string())
    } else {
        return Err("give one of status, delay_ms, drop_connection, lose_answer, truncated_answer, stall_ms, malformed_body, redirect".into());
    };
    let times = match request.get("times").filter(|v| !v.is_null()) {
        None => 1,
        Some(times) => times
            .as_u64()
            .filter(|t| (1..=1_000_000).contains(t))
            .ok_or("times must be from 1 to 1000000")? as usize,
    };
    let mut fault = super::Fault::on(prefix, kind).times(times);
    if let Some(method) = request["method"].as_str() {
        fault = fault.method(method);
    }
    Ok(fault)
}

/// The caller's key, when it is one of the configured keys.
fn authenticate(state: &State, headers: &HeaderMap) -> Option<String> {
    let key = headers.get("x-key").and_then(|v| v.to_str().ok())?;
    state.config.keys.iter().any(|(k, _)| k == key).then(|| key.to_string())
}

fn allowed(state: &State, key: &str, operation: &str) -> bool {
    state
        .config
        .keys
        .iter()
        .find(|(k, _)| k == key)
        .is_some_and(|(_, ops)| ops.as_ref().is_none_or(|ops| ops.iter().any(|o| o == operation)))
}

/// The value at a validation error's `loc` (after `"body"`) in the request.
fn at<'a>(request: &'a Value, loc: &[Value]) -> Option<&'a Value> {
    loc.iter().try_fold(request, |value, step| match step {
        Value::String(name) => value.get(name.as_str()),
        Value::Number(index) => value.get(usize::try_from(index.as_u64()?).ok()?),
        _ => None,
    })
}

/// Sets `input` as the service's framework does: the containing object for a
/// missing field (for a top-level field, the whole body), else the value.
fn echo_inputs(errors: Value, request: &Value) -> Value {
    let Value::Array(errors) = errors else {
        return errors;
    };
    let errors = errors
        .into_iter()
        .map(|mut error| {
            let loc: Vec<Value> = error["loc"].as_array().cloned().unwrap_or_default();
            let path = loc.get(1..).unwrap_or(&[]);
            let input = if error["type"] == "missing" {
                at(request, &path[..path.len().saturating_sub(1)])
            } else {
                at(request, path)
            };
            if let Some(input) = input {
                error["input"] = input.clone();
            }
            error
        })
        .collect();
    Value::Array(errors)
}

#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
fn submit(ctx: &Ctx, key: &str, operation: &str, path: &str, schema: Option<&str>, body: &Bytes) -> Response {
    let state = &ctx.state;
    let request: Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(e) => {
            return json_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"detail": [{"type": "json_invalid", "loc": ["body", e.column()], "msg": "JSON decode error", "input": {}, "ctx": {"error": e.to_string()}}]}),
            )
        }
    };
    let schema_value = schema.and_then(|s| state.document.schema(s));
    if let Some(schema) = schema {
        let errors = state.document.problems(schema, &request);
        if !errors.is_empty() {
            let errors = Value::Array(errors);
            return json_response(
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({ "detail": echo_inputs(errors, &request) }),
            );
        }
    }
    let refused = expand_beyond_limit(operation, &request).or_else(|| refused_webhook_url(state, &request));
    if let Some(error) = refused {
        return json_response(StatusCode::UNPROCESSABLE_ENTITY, json!({ "detail": [error] }));
    }
    let media = if operation == "gen_3_video" {
        Media::Video
    } else {
        Media::Image
    };
    let default_ratio = schema_value.and_then(|s| s["properties"]["aspect_ratio"]["x-default"].as_str());
    let (width, height) = match media {
        Media::Image => output_size(operation, &request, default_ratio),
        Media::Video => (0, 0),
    };
    let input_mp = round2(input_pixels(&request) / 1e6);
    let output_mp = round2(width as f64 * height as f64 / 1e6);
    // What a task keeps of its prompt is bounded, so a client cannot make the
    // mock hold a 100 MiB prompt per task for the task's lifetime.
    let prompt: String = request["prompt"]
        .as_str()
        .unwrap_or("")
        .chars()
        .take(KEPT_PROMPT_CHARS)
        .collect();
    let outcome = Outcome::from_prompt(&prompt);
    let cost = round2((input_mp + output_mp) * state.config.price_per_mp);
    let format = match media {
        Media::Video => "mp4".to_string(),
        Media::Image => request["output_format"]
            .as_str()
            .or_else(|| schema_value.and_then(|s| s["properties"]["output_format"]["x-default"].as_str()))
            .unwrap_or("jpeg")
            .to_string(),
    };
    let webhook = request["webhook_url"].as_str().map(|url| {
        (
            url.to_string(),
            request["webhook_secret"]
                .as_str()
                .map(super::outbox::WebhookSecret::from),
        )
    });
    let working_status = prompt
        .split("[mock:status=")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(str::to_string);
    let seed = request
        .get("seed")
        .and_then(Value::as_number)
        .filter(|n| n.is_u64() || n.is_i64())
        .cloned()
        .unwrap_or_else(|| serde_json::Number::from(fastrand::u32(..)));
    let now = state.clock.now();
    // `[mock:duration_ms=N]` sets this task's duration (at most an hour).
    let scripted = prompt
        .split("[mock:duration_ms=")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .and_then(|ms| ms.parse::<u64>().ok())
        .map(|ms| Duration::from_millis(ms.min(3_600_000)));
    let duration = scripted.unwrap_or_else(|| {
        state
            .config
            .durations
            .get(operation)
            .copied()
            .unwrap_or(state.config.default_duration)
    });
    // Kept as sent, and decoded only when the result is rendered (on a
    // blocking thread, for an accepted task alone).
    let input = first_input(&request).map(Arc::<str>::from);
    let id = uuid::Uuid::new_v4().to_string();
    let mut task = MockTask {
        id: id.clone(),
        key: key.to_string(),
        created: now,
        start_time: state.clock.unix_secs_f64(),
        duration,
        outcome,
        working_status,
        observed_statuses: state.config.observed_statuses,
        media,
        width,
        height,
        format,
        seed,
        prompt,
        input,
        cost,
        webhook: webhook.clone(),
        regional: webhook.is_none(),
        keep_until: now,
    };
    task.keep_until = task.finished_at() + state.config.task_ttl;
    {
        let Ok(mut tasks) = state.tasks.lock() else {
            return json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({"detail": "mock state"}));
        };
        tasks.tidy(now);
        if tasks.active(key) >= state.config.max_active_tasks {
            drop(tasks);
            state.count(|c| c.too_many_requests += 1);
            let mut response = json_response(
                StatusCode::TOO_MANY_REQUESTS,
                json!({"detail": "Too many active tasks (mock limit)"}),
            );
            response
                .headers_mut()
                .insert("retry-after", HeaderValue::from_static("1"));
            return response;
        }
        if let Ok(mut credits) = state.credits.lock() {
            if let Some(balance) = credits.as_mut() {
                if *balance < cost {
                    drop(credits);
                    drop(tasks);
                    state.count(|c| c.payment_required += 1);
                    return json_response(StatusCode::PAYMENT_REQUIRED, json!({"detail": "Insufficient credits"}));
                }
                // Neither moderation outcome is charged.
                *balance -= task.charged();
            }
        }
        tasks.insert(task, now);
    }
    state.count(|c| *c.submissions.entry(path.to_string()).or_insert(0) += 1);
    let mut answer = match &webhook {
        // AsyncWebhookResponse: no polling_url; the fallback is the global host.
        Some((url, _)) => json!({"id": id, "status": "Pending", "webhook_url": url}),
        None => json!({"id": id, "polling_url": format!("{}/v1/get_result?id={id}", state.regional_url)}),
    };
    if !COST_ON_POLL.contains(&operation) {
        answer["cost"] = json!(cost);
        answer["input_mp"] = json!(input_mp);
        answer["output_mp"] = json!(output_mp);
    }
    if let Some((url, _)) = &webhook {
        deliver::watch(state.clone(), id, url);
    }
    json_response(StatusCode::OK, answer)
}

fn poll(ctx: &Ctx, uri: &Uri) -> Response {
    ctx.state.count(|c| c.polls += 1);
    let id = uri
        .query()
        .and_then(|q| q.split('&').find_map(|pair| pair.strip_prefix("id=")))
        .map(|v| v.to_string());
    let Some(id) = id.filter(|v| !v.is_empty()) else {
        return json_response(
            StatusCode::UNPROCESSABLE_ENTITY,
            json!({"detail": [{"type": "missing", "loc": ["query", "id"], "msg": "Field required", "input": null}]}),
        );
    };
    if ctx.origin == Origin::Api {
        // The global host answers 404 for a regional task.
        let regional = ctx
            .state
            .tasks
            .lock()
            .ok()
            .and_then(|t| t.get(&id).map(|t| t.regional))
            .unwrap_or(false);
        if regional {
            return json_response(StatusCode::NOT_FOUND, json!({"detail": "Not Found"}));
        }
    }
    json_response(StatusCode::OK, poll_body(&ctx.state, &id))
}

async fn deliver_result(ctx: &Ctx, file: &str, uri: &Uri) -> Response {
    let state = &ctx.state;
    let id = file.split('.').next().unwrap_or("");
    let query = uri.query().unwrap_or("");
    let param = |name: &str| query.split('&').find_map(|p| p.strip_prefix(name)).map(str::to_string);
    let expires: u64 = param("expires=").and_then(|v| v.parse().ok()).unwrap_or(0);
    let valid_signature = param("signature=").is_some_and(|s| !s.is_empty() && s == signature(state, id, expires));
    let now = state
        .clock
        .wall()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(u64::MAX);
    if !valid_signature {
        return json_response(StatusCode::FORBIDDEN, json!({"detail": "Signature does not match"}));
    }
    if now >= expires {
        return json_response(StatusCode::FORBIDDEN, json!({"detail": "Request has expired"}));
    }
    let task = state.tasks.lock().ok().and_then(|t| t.get(id).cloned());
    let Some(task) = task else {
        return json_response(StatusCode::NOT_FOUND, json!({"detail": "No such result"}));
    };
    state.count(|c| c.downloads += 1);
    if task.media == Media::Video {
        return (StatusCode::OK, [("content-type", "video/mp4")], render::mp4()).into_response();
    }
    let bytes = match state.cached_render(id) {
        Some(bytes) => bytes,
        None => {
            let Ok(_permit) = state.render_permits.acquire().await else {
                return json_response(StatusCode::SERVICE_UNAVAILABLE, json!({"detail": "mock stopping"}));
            };
            let (width, height, seed, prompt, format, input) = (
                task.width,
                task.height,
                task.seed.to_string(),
                task.prompt.clone(),
                task.format.clone(),
                task.input.clone(),
            );
            let rendered = tokio::task::spawn_blocking(move || {
                let input = input.and_then(|text| render::input_copy(&decoded_image(&text)?));
                render::render(width, height, &seed, &prompt, &format, input.as_ref())
            })
            .await;
            match rendered {
                Ok(Ok(bytes)) => {
                    let bytes = Arc::new(bytes);
                    state.cache_render(id, bytes.clone());
                    bytes
                }
                Ok(Err(message)) => {
                    return json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({"detail": message}))
                }
                Err(_) => {
                    return json_response(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        json!({"detail": "mock render failed"}),
                    )
                }
            }
        }
    };
    let content_type = match task.format.as_str() {
        "png" => "image/png",
        "webp" => "image/webp",
        _ => "image/jpeg",
    };
    (
        StatusCode::OK,
        [("content-type", content_type)],
        Body::from(bytes.as_ref().clone()),
    )
        .into_response()
}

/// Longest prompt a task keeps; its `[mock:…]` markers are read from this
/// part.
const KEPT_PROMPT_CHARS: usize = 4096;

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Size of a base64 image field, if it is one.
fn image_size(value: &Value) -> Option<(u32, u32)> {
    super::image_size::of(&super::image_size::head(value.as_str()?)?)
}

const IMAGE_FIELDS: [&str; 12] = [
    "image",
    "input_image",
    "input_image_2",
    "input_image_3",
    "input_image_4",
    "input_image_5",
    "input_image_6",
    "input_image_7",
    "input_image_8",
    "person",
    "garment",
    "image_prompt",
];

/// The longest base64 input an edit's result shows (about 3 MB of image),
/// kept with its task and decoded, within a memory bound, on a blocking
/// thread when the result is rendered; a larger one is billed and checked
/// as any, its result drawn without the box.
const SHOWN_INPUT_CHARS: usize = 4 << 20;

/// The first image field given as base64 (an address is not fetched: the
/// mock reaches nothing outside): the input an edit's result shows.
fn first_input(request: &Value) -> Option<&str> {
    IMAGE_FIELDS.iter().find_map(|field| {
        let text = request.get(*field)?.as_str()?;
        let head = super::image_size::head(text)?;
        (super::image_size::is_image(&head) && text.len() <= SHOWN_INPUT_CHARS).then_some(text)
    })
}

/// The bytes of a base64 image.
fn decoded_image(text: &str) -> Option<Vec<u8>> {
    use base64::Engine as _;
    let compact: String = text.chars().filter(|c| !c.is_ascii_whitespace()).collect();
    base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(compact.trim_end_matches('='))
        .ok()
}

fn input_pixels(request: &Value) -> f64 {
    // A fold from +0.0: an empty float sum is -0.0.
    IMAGE_FIELDS
        .iter()
        .filter_map(|f| request.get(*f).filter(|v| v.is_string()))
        .map(|v| image_size(v).map_or(1_000_000.0, |(w, h)| w as f64 * h as f64))
        .fold(0.0, |sum, pixels| sum + pixels)
}

/// An expand whose result (the image plus the four sides) would be above
/// the contract's 4 MP output bound: the 422 the service answers, else
/// `None`. An image whose size cannot be read is left to the task.
fn expand_beyond_limit(operation: &str, request: &Value) -> Option<Value> {
    if operation != "gen_pro_1_0_expand" {
        return None;
    }
    let (w, h) = request.get("image").and_then(image_size)?;
    let side = |k: &str| request.get(k).and_then(Value::as_u64).unwrap_or(0);
    let width = u64::from(w) + side("left") + side("right");
    let height = u64::from(h) + side("top") + side("bottom");
    let area = u128::from(width) * u128::from(height);
    (area > u128::from(MAX_OUTPUT_PIXELS)).then(|| {
        json!({
            "type": "value_error",
            "loc": ["body"],
            "msg": format!(
                "Value error, the expanded image ({w} x {h} plus left {}, right {}, top {}, bottom {}) would be \
                 {width} x {height} = {area} pixels, above the limit of {MAX_OUTPUT_PIXELS} (4 MP): expand less \
                 or send a smaller image",
                side("left"),
                side("right"),
                side("top"),
                side("bottom"),
            ),
        })
    })
}

fn ratio_size(ratio: &str) -> Option<(u32, u32)> {
    let (w, h) = ratio.split_once(':')?;
    let (w, h) = (w.parse::<f64>().ok()?, h.parse::<f64>().ok()?);
    if !(w > 0.0 && h > 0.0 && w.is_finite() && h.is_finite()) {
        return None;
    }
    let height = (1_048_576.0 * h / w).sqrt();
    let round = |x: f64| ((x / 32.0).round() * 32.0).clamp(32.0, MAX_OUTPUT_SIDE as f64) as u64;
    Some(clamp_size(round(height * w / h), round(height)))
}

/// The size the "model" chooses: explicit width/height, else the operation's
/// default, else the aspect ratio (given, else the document's default when
/// there is no input image), else the input image's size, else 1024².
/// Always within the mock's output limits.
fn output_size(operation: &str, request: &Value, default_ratio: Option<&str>) -> (u32, u32) {
    let number = |k: &str| request.get(k).and_then(Value::as_u64).filter(|v| *v > 0);
    if let (Some(w), Some(h)) = (number("width"), number("height")) {
        return clamp_size(w, h);
    }
    if matches!(operation, "gen_dev" | "gen_pro_1_1") {
        return clamp_size(number("width").unwrap_or(1024), number("height").unwrap_or(768));
    }
    if let Some(size) = request["aspect_ratio"].as_str().and_then(ratio_size) {
        return size;
    }
    if let Some((w, h)) = ["image", "input_image", "person"]
        .iter()
        .find_map(|f| request.get(*f).and_then(image_size))
    {
        let side = |k: &str| request.get(k).and_then(Value::as_u64).unwrap_or(0).min(2048);
        return clamp_size(
            w as u64 + side("left") + side("right"),
            h as u64 + side("top") + side("bottom"),
        );
    }
    if let Some(size) = default_ratio.and_then(ratio_size) {
        return size;
    }
    (1024, 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_body_holds_only_its_prefix() {
        let body = Bytes::from(json!({ "prompt": "x".repeat(2 << 20) }).to_string());
        let kept = redact_body(&body);
        assert!(kept.ends_with("more bytes not kept]"), "{}", &kept[kept.len() - 40..]);
        assert!(
            kept.capacity() <= LOGGED_BODY_LIMIT + 64,
            "a 2 MiB body holds {} bytes in the log",
            kept.capacity()
        );
    }
}
