//! The mock's HTTP surface: one handler that routes by the document's
//! operations, so every path of `openapi.json` is served without a route
//! table of its own.

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::State as Shared;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::Router;
use serde_json::{json, Value};

use super::state::{MockTask, Outcome, State};
use super::{deliver, render, FaultKind, LoggedRequest};
use crate::input::{decode_head, dimensions};

#[derive(Clone)]
struct Ctx {
    state: Arc<State>,
    base_url: String,
}

pub(super) fn router(state: Arc<State>, base_url: String) -> Router {
    Router::new().fallback(handle).with_state(Ctx { state, base_url })
}

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

async fn handle(Shared(ctx): Shared<Ctx>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    log(&ctx.state, &method, &uri, &headers, &body);
    let mut response = match ctx.state.take_fault(method.as_str(), uri.path()) {
        Some(fault) => match fault.kind {
            FaultKind::Delay(delay) => {
                tokio::time::sleep(delay).await;
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
            FaultKind::MalformedBody => (
                StatusCode::OK,
                [("content-type", "application/json")],
                "{\"id\": \"trunc",
            )
                .into_response(),
            FaultKind::Redirect(location) => (StatusCode::TEMPORARY_REDIRECT, [("location", location)]).into_response(),
        },
        None => route(&ctx, &method, &uri, &headers, &body).await,
    };
    response
        .headers_mut()
        .insert("x-genapi-mock", HeaderValue::from_static("true"));
    response
}

fn log(state: &State, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) {
    let headers = headers
        .iter()
        .map(|(name, value)| {
            let value = if name.as_str() == "x-key" {
                "[redacted]".to_string()
            } else {
                String::from_utf8_lossy(value.as_bytes()).into_owned()
            };
            (name.as_str().to_string(), value)
        })
        .collect();
    if let Ok(mut log) = state.log.lock() {
        log.push(LoggedRequest {
            method: method.to_string(),
            path: uri.path().to_string(),
            query: uri.query().map(str::to_string),
            headers,
            body: redact_body(body),
        });
    }
}

/// The body as text, with any `webhook_secret` value replaced, so the log
/// never holds a secret.
fn redact_body(body: &Bytes) -> String {
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(mut object)) if object.get("webhook_secret").is_some_and(Value::is_string) => {
            object.insert("webhook_secret".into(), json!("[redacted]"));
            Value::Object(object).to_string()
        }
        _ => String::from_utf8_lossy(body).into_owned(),
    }
}

async fn route(ctx: &Ctx, method: &Method, uri: &Uri, headers: &HeaderMap, body: &Bytes) -> Response {
    let path = uri.path();
    if *method == Method::GET && path.starts_with("/mock/results/") {
        return deliver_result(ctx, uri);
    }
    if *method == Method::POST && path.starts_with("/mock/") {
        return control(&ctx.state, path, body);
    }
    let Some(key) = authenticate(&ctx.state, headers) else {
        return json_response(
            StatusCode::FORBIDDEN,
            json!({"detail": "Not authenticated: missing or unknown x-key"}),
        );
    };
    if *method == Method::GET && path == "/v1/credits" {
        let credits = ctx.state.credits.lock().ok().and_then(|c| *c).unwrap_or(1_000_000.0);
        return json_response(StatusCode::OK, json!({"credits": credits}));
    }
    let operation = ctx
        .state
        .operations
        .iter()
        .find(|op| op.path == path && op.method == method.as_str());
    let Some(operation) = operation else {
        return json_response(StatusCode::NOT_FOUND, json!({"detail": "Not Found"}));
    };
    if !allowed(&ctx.state, &key, &operation.id) {
        return json_response(
            StatusCode::FORBIDDEN,
            json!({"detail": "This key's project has no access to this endpoint"}),
        );
    }
    if operation.id == "get_result" {
        return poll(ctx, uri);
    }
    submit(ctx, &key, &operation.id, operation.request_schema.as_deref(), body)
}

/// Control endpoints, so tests in any language can script the mock:
/// `POST /mock/faults` with a fault as JSON, `POST /mock/clock/advance` with
/// `{"seconds": N}`.
fn control(state: &State, path: &str, body: &Bytes) -> Response {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let outcome = match path {
        "/mock/faults" => fault_from_json(&request).map(|fault| {
            if let Ok(mut faults) = state.faults.lock() {
                faults.push(fault);
            }
        }),
        "/mock/clock/advance" => request["seconds"]
            .as_f64()
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| state.clock.advance(Duration::from_secs_f64(s)))
            .ok_or_else(|| "expected {\"seconds\": N} with N >= 0".to_string()),
        _ => return json_response(StatusCode::NOT_FOUND, json!({"detail": "Not Found"})),
    };
    match outcome {
        Ok(()) => json_response(StatusCode::OK, json!({"ok": true})),
        Err(message) => json_response(StatusCode::BAD_REQUEST, json!({"detail": message})),
    }
}

/// `{"path_prefix", "method"?, "times"?, one of: "status" (+ "retry_after",
/// "body"), "delay_ms", "drop_connection": true, "malformed_body": true,
/// "redirect"}`.
fn fault_from_json(request: &Value) -> Result<super::Fault, String> {
    let prefix = request["path_prefix"].as_str().ok_or("path_prefix is required")?;
    let kind = if let Some(status) = request["status"].as_u64() {
        FaultKind::Status {
            status: u16::try_from(status).map_err(|_| "status is not an HTTP status")?,
            retry_after: request["retry_after"]
                .as_str()
                .map(str::to_string)
                .or_else(|| request["retry_after"].as_u64().map(|s| s.to_string())),
            body: request["body"].as_str().unwrap_or("{}").to_string(),
        }
    } else if let Some(ms) = request["delay_ms"].as_u64() {
        FaultKind::Delay(Duration::from_millis(ms))
    } else if request["drop_connection"] == true {
        FaultKind::DropConnection
    } else if request["malformed_body"] == true {
        FaultKind::MalformedBody
    } else if let Some(location) = request["redirect"].as_str() {
        FaultKind::Redirect(location.to_string())
    } else {
        return Err("give one of status, delay_ms, drop_connection, malformed_body, redirect".into());
    };
    let mut fault = super::Fault::on(prefix, kind).times(request["times"].as_u64().unwrap_or(1) as usize);
    if let Some(method) = request["method"].as_str() {
        fault = fault.method(method);
    }
    Ok(fault)
}

/// The caller's key, when it is one of the configured keys.
fn authenticate(state: &State, headers: &HeaderMap) -> Option<String> {
    let key = headers.get("x-key").and_then(|v| v.to_str().ok()).unwrap_or("");
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

fn submit(ctx: &Ctx, key: &str, operation: &str, schema: Option<&str>, body: &Bytes) -> Response {
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
    if let Some(schema) = schema {
        let errors = state.document.validate(schema, &request);
        if !errors.is_empty() {
            return json_response(StatusCode::UNPROCESSABLE_ENTITY, json!({ "detail": errors }));
        }
    }
    if state.active_tasks(key) >= state.config.max_active_tasks {
        let mut response = json_response(
            StatusCode::TOO_MANY_REQUESTS,
            json!({"detail": "Too many active tasks (mock limit)"}),
        );
        response
            .headers_mut()
            .insert("retry-after", HeaderValue::from_static("1"));
        return response;
    }
    let (width, height) = output_size(operation, &request);
    let input_mp = round2(input_pixels(&request) / 1e6);
    let output_mp = round2(width as f64 * height as f64 / 1e6);
    let prompt = request["prompt"].as_str().unwrap_or("").to_string();
    let outcome = Outcome::from_prompt(&prompt);
    let cost = round2((input_mp + output_mp) * state.config.price_per_mp);
    if let Ok(mut credits) = state.credits.lock() {
        if let Some(balance) = credits.as_mut() {
            if *balance < cost {
                return json_response(StatusCode::PAYMENT_REQUIRED, json!({"detail": "Insufficient credits"}));
            }
            // Moderated requests are not charged.
            if outcome != Outcome::RequestModerated {
                *balance -= cost;
            }
        }
    }
    let id = uuid::Uuid::new_v4().to_string();
    let format = request["output_format"]
        .as_str()
        .or_else(|| {
            schema
                .and_then(|s| state.document.schema(s))
                .and_then(|s| s["properties"]["output_format"]["x-default"].as_str())
        })
        .unwrap_or("jpeg")
        .to_string();
    let webhook = request["webhook_url"]
        .as_str()
        .map(|url| (url.to_string(), request["webhook_secret"].as_str().map(str::to_string)));
    let working_status = prompt
        .split("[mock:status=")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .map(str::to_string);
    let task = MockTask {
        id: id.clone(),
        key: key.to_string(),
        created: state.clock.now(),
        duration: state
            .config
            .durations
            .get(operation)
            .copied()
            .unwrap_or(state.config.default_duration),
        outcome,
        working_status,
        width,
        height,
        format,
        seed: request["seed"].as_i64().unwrap_or_else(|| fastrand::u32(..) as i64),
        prompt,
        cost,
        webhook: webhook.clone(),
        image: None,
    };
    if let Ok(mut tasks) = state.tasks.lock() {
        tasks.insert(id.clone(), task);
    }
    let polling_url = format!("{}/v1/get_result?id={id}", ctx.base_url);
    let mut answer = json!({"id": id, "polling_url": polling_url});
    if !COST_ON_POLL.contains(&operation) {
        answer["cost"] = json!(cost);
        answer["input_mp"] = json!(input_mp);
        answer["output_mp"] = json!(output_mp);
    }
    if let Some((url, _)) = webhook {
        answer["status"] = json!("Pending");
        answer["webhook_url"] = json!(url);
        deliver::watch(state.clone(), id, ctx.base_url.clone());
    }
    json_response(StatusCode::OK, answer)
}

fn poll(ctx: &Ctx, uri: &Uri) -> Response {
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
    json_response(StatusCode::OK, poll_body(&ctx.state, &ctx.base_url, &id))
}

/// The poll result of a task, as the service would answer it now.
pub(super) fn poll_body(state: &State, base_url: &str, id: &str) -> Value {
    let now = state.clock.now();
    let task = state.tasks.lock().ok().and_then(|t| t.get(id).cloned());
    let Some(task) = task.filter(|t| now < t.finished_at() + state.config.task_ttl) else {
        return json!({"id": id, "status": "Task not found", "result": null, "progress": null, "details": null, "preview": null});
    };
    let (status, progress) = task.status_at(now);
    let progress = progress.filter(|_| state.config.report_progress);
    let mut body =
        json!({"id": id, "status": status, "result": null, "progress": progress, "details": null, "preview": null});
    match (task.is_final(now), &task.outcome) {
        (true, Outcome::Ready) => {
            body["result"] = task.result(&signed_address(state, base_url, &task));
            body["cost"] = json!(task.cost);
        }
        (true, _) => body["details"] = task.details(),
        (false, _) => {}
    }
    body
}

fn signature(state: &State, id: &str, expires: u64) -> String {
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &state.signing_key);
    let tag = ring::hmac::sign(&key, format!("{id}:{expires}").as_bytes());
    tag.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

fn signed_address(state: &State, base_url: &str, task: &MockTask) -> String {
    let expires = (state.clock.wall() + state.config.result_url_validity)
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let ext = if task.format == "jpeg" {
        "jpg"
    } else {
        task.format.as_str()
    };
    format!(
        "{base_url}/mock/results/{}.{ext}?expires={expires}&signature={}",
        task.id,
        signature(state, &task.id, expires)
    )
}

fn deliver_result(ctx: &Ctx, uri: &Uri) -> Response {
    let state = &ctx.state;
    let file = uri.path().trim_start_matches("/mock/results/");
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
    let bytes = match &task.image {
        Some(bytes) => bytes.clone(),
        None => match render::render(task.width, task.height, task.seed, &task.prompt, &task.format) {
            Ok(bytes) => {
                let bytes = Arc::new(bytes);
                if let Ok(mut tasks) = state.tasks.lock() {
                    if let Some(stored) = tasks.get_mut(id) {
                        stored.image = Some(bytes.clone());
                    }
                }
                bytes
            }
            Err(message) => return json_response(StatusCode::INTERNAL_SERVER_ERROR, json!({"detail": message})),
        },
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

fn json_response(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Size of a base64 image field, if it is one.
fn image_size(value: &Value) -> Option<(u32, u32)> {
    decode_head(value.as_str()?).and_then(|head| dimensions(&head))
}

const IMAGE_FIELDS: [&str; 13] = [
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
    "mask",
];

fn input_pixels(request: &Value) -> f64 {
    IMAGE_FIELDS[..12]
        .iter()
        .filter_map(|f| request.get(*f).filter(|v| v.is_string()))
        .map(|v| image_size(v).map_or(1_000_000.0, |(w, h)| w as f64 * h as f64))
        .sum()
}

/// The size the "model" chooses: explicit width/height, else the operation's
/// default, else the aspect ratio, else the input image's size, else 1024².
fn output_size(operation: &str, request: &Value) -> (u32, u32) {
    let number = |k: &str| {
        request
            .get(k)
            .and_then(Value::as_u64)
            .filter(|v| *v > 0)
            .map(|v| v.min(8192) as u32)
    };
    if let (Some(w), Some(h)) = (number("width"), number("height")) {
        return (w, h);
    }
    if matches!(operation, "gen_dev" | "gen_pro_1_1") {
        return (number("width").unwrap_or(1024), number("height").unwrap_or(768));
    }
    if let Some((w, h)) = request["aspect_ratio"].as_str().and_then(|r| r.split_once(':')) {
        if let (Ok(w), Ok(h)) = (w.parse::<f64>(), h.parse::<f64>()) {
            if w > 0.0 && h > 0.0 {
                let height = (1_048_576.0 * h / w).sqrt();
                let round = |x: f64| ((x / 32.0).round() * 32.0).max(32.0) as u32;
                return (round(height * w / h), round(height));
            }
        }
    }
    if let Some((w, h)) = ["image", "input_image", "person"]
        .iter()
        .find_map(|f| request.get(*f).and_then(image_size))
    {
        let side = |k: &str| request.get(k).and_then(Value::as_u64).unwrap_or(0).min(2048) as u32;
        return (w + side("left") + side("right"), h + side("top") + side("bottom"));
    }
    (1024, 1024)
}

/// Waits (in real time) for a duration measured on the mock clock.
pub(super) async fn sleep_until_final(state: &State, id: &str) -> Option<MockTask> {
    loop {
        let task = state.tasks.lock().ok().and_then(|t| t.get(id).cloned())?;
        if task.is_final(state.clock.now()) {
            return Some(task);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
