//! What the crate's spans say, under OpenTelemetry's names, so a collector
//! fed by `tracing-opentelemetry` shows genapi's exchanges on the standard
//! HTTP-client dashboards, and its submissions and waits beside other
//! generative work.
//!
//! - `genapi.request`, one per exchange (a submission, a poll, a
//!   download), at DEBUG: the stable HTTP-client attributes
//!   (`http.request.method`, `server.address`, `server.port`, `url.full`,
//!   `http.response.status_code`, `http.request.resend_count`,
//!   `error.type`), and genapi's own `genapi.operation` and
//!   `genapi.keyed` (whether the key went with it); one span per request
//!   sent (a retried poll has two), none for the waits between them.
//! - `genapi.submit` and `genapi.wait`, at INFO:
//!   `gen_ai.operation.name` (`generate_content`), `gen_ai.request.model`
//!   and the task's id, `gen_ai.response.id`, once known; the wait also
//!   counts its polls (`genapi.polls`, recorded once, as it ends).
//! - `genapi.download`, at INFO: the download of a task's result, every
//!   attempt's exchange inside it, with the task's id
//!   (`gen_ai.response.id`).
//!
//! No field holds a secret, a signed query or a prompt: `url.full` is an
//! address without its query, user information or fragment (by the one
//! rule every address shown follows, `genapi_text::address_alone`), passed
//! through the client's scrubber, and no body is ever a field. An event's
//! error names the host it met, never the address (see
//! [`crate::Error::Transport`]).

use reqwest::{Method, StatusCode, Url};
use tracing::field::Empty;
use tracing::Span;

use crate::scrub::Scrubber;

/// The generative operation every task of the service is, in
/// OpenTelemetry's words.
const GENERATE: &str = "generate_content";

/// The span of one exchange, its answer's fields left to
/// [`exchange_answered`] and [`exchange_ended`].
pub(crate) fn exchange_span(method: &Method, url: &Url, operation: &str, scrubber: &Scrubber) -> Span {
    tracing::debug_span!(
        "genapi.request",
        otel.name = method.as_str(),
        otel.kind = "client",
        http.request.method = method.as_str(),
        server.address = url.host_str().unwrap_or_default(),
        server.port = url.port_or_known_default(),
        url.full = genapi_text::cut(&scrubber.scrub(&genapi_text::address_alone(url.as_str())), URL_SHOWN).as_ref(),
        genapi.operation = operation,
        genapi.keyed = Empty,
        http.response.status_code = Empty,
        http.request.resend_count = Empty,
        error.type = Empty,
        otel.status_code = Empty,
    )
}

/// The most of an address a span carries: a service's polling address may
/// be as long as it likes, and every poll's span would carry it.
const URL_SHOWN: usize = 512;

/// Whether the key went with the exchange.
pub(crate) fn exchange_keyed(span: &Span, keyed: bool) {
    span.record("genapi.keyed", keyed);
}

/// An attempt of the exchange begins: the attempts after the first are
/// resends, counted as OpenTelemetry counts them (from the first resend on).
pub(crate) fn exchange_attempt(span: &Span, attempt: u32) {
    if attempt > 1 {
        span.record("http.request.resend_count", attempt - 1);
    }
}

/// An answer arrived with this status.
pub(crate) fn exchange_answered(span: &Span, status: StatusCode) {
    span.record("http.response.status_code", status.as_u16());
}

/// How the attempt ended: `error.type` is the status of an answer that is
/// an error, or the kind of failure without one (`network`, `timeout`,
/// `layer`); such an attempt's span is an error's (`otel.status_code`).
pub(crate) fn exchange_ended(span: &Span, error_type: Option<&str>) {
    if let Some(error_type) = error_type {
        span.record("error.type", error_type);
        span.record("otel.status_code", "ERROR");
    }
}

/// The span of a submission to `path`, the task's id left to
/// [`task_known`].
pub(crate) fn submit_span(operation: &str, path: &str) -> Span {
    tracing::info_span!(
        "genapi.submit",
        gen_ai.operation.name = GENERATE,
        gen_ai.request.model = model_of_path(path),
        genapi.operation = operation,
        gen_ai.response.id = Empty,
    )
}

/// The submission was accepted as this task.
pub(crate) fn task_known(span: &Span, id: &str) {
    span.record("gen_ai.response.id", id);
}

/// The span of a wait for a task of `operation`, its polls left to
/// [`polled`].
pub(crate) fn wait_span(task_id: &str, operation: &str) -> Span {
    let model = crate::api::OPERATIONS
        .iter()
        .find(|op| op.id == operation && op.method == "POST")
        .map_or(operation, |op| model_of_path(op.path));
    tracing::info_span!(
        "genapi.wait",
        gen_ai.operation.name = GENERATE,
        gen_ai.request.model = model,
        gen_ai.response.id = task_id,
        genapi.operation = operation,
        genapi.polls = Empty,
    )
}

/// The span of the download of task `task_id`'s result (each attempt's
/// exchange inside it), so a trace shows the download with its task.
pub(crate) fn download_span(task_id: &str) -> Span {
    tracing::info_span!(
        "genapi.download",
        gen_ai.operation.name = GENERATE,
        gen_ai.response.id = task_id,
        genapi.operation = "download",
    )
}

/// The wait has polled this many times.
pub(crate) fn polled(span: &Span, polls: u32) {
    span.record("genapi.polls", polls);
}

/// The model a submission path names: the service's paths are the models'
/// names (`/v1/gen-2-pro` is `gen-2-pro`).
fn model_of_path(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}
