//! One caller's request, from its arrival to its answer.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Method, StatusCode};

use crate::addresses::{route, Route};
use crate::delivery::Delivered;
use crate::handover::Handover;
use crate::identity::SubmissionId;
use crate::memory::Owner;
use crate::relay::relayed_headers;
use crate::remembered::{Answer, Claim, Claimed};
use crate::summary::Count;
use crate::Shared;

/// The header the proxy marks its own answers with.
pub const PROXY_HEADER: &str = "x-genapi-proxy";

/// The largest request body relayed: the service's own bound (eight large
/// base64 images fit).
pub(crate) const MOST_REQUEST_BYTES: usize = 128 * 1024 * 1024;

/// The largest JSON answer read to rewrite its addresses.
const MOST_JSON_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// Why an answer read whole is not passed on, when it could not be read.
const BROKE_OFF: &str = "its answer broke off or was too large";

/// How long a caller may take to send its body.
const BODY_WITHIN: Duration = Duration::from_secs(120);

/// Answers one request.
pub(crate) async fn answer(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    shared.counters.add(Count::Request);
    let (mut parts, body) = request.into_parts();
    if let Some(refused) = refused_before_reading(&shared, &mut parts.headers) {
        return refused;
    }
    let body = match tokio::time::timeout(BODY_WITHIN, axum::body::to_bytes(body, MOST_REQUEST_BYTES)).await {
        Ok(Ok(body)) => body,
        Ok(Err(_)) => {
            return own(
                StatusCode::PAYLOAD_TOO_LARGE,
                "refused",
                &format!("a body over {} bytes is not relayed", MOST_REQUEST_BYTES),
            )
        }
        Err(_) => {
            return own(
                StatusCode::REQUEST_TIMEOUT,
                "refused",
                "the body did not arrive in time",
            )
        }
    };
    let path_and_query = parts.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    if path_and_query == "/_genapi/summary" && parts.method == Method::GET {
        return json(StatusCode::OK, &shared.counters.summary());
    }
    // A 429 asks its caller to wait before submitting again: a poll or a
    // download meanwhile ignores nothing.
    if parts.method == Method::POST {
        shared.note_retry_after(&parts.headers);
    }
    let target = match route(&path_and_query) {
        Route::Base => shared.service.at_base(&path_and_query),
        Route::Origin { origin, path_and_query } => {
            // Only where the service sent its callers, or where the client
            // would send its key: never a host a caller names.
            let allowed = url::Url::parse(&origin).is_ok_and(|url| shared.service.client.sends_key_to(&url))
                || shared.memory.knows_origin(&origin).await;
            if !allowed {
                return own(
                    StatusCode::FORBIDDEN,
                    "refused",
                    "the proxy relays only to the service's hosts and the addresses it handed out",
                );
            }
            url::Url::parse(&format!("{origin}{path_and_query}")).ok()
        }
        Route::Unreadable => None,
    };
    let Some(target) = target else {
        return own(StatusCode::NOT_FOUND, "refused", "not an address the proxy relays");
    };
    let to_base = matches!(route(&path_and_query), Route::Base);
    if !to_base && !matches!(parts.method, Method::GET | Method::HEAD) {
        // Another host gets polls and downloads only: what the service's
        // addresses are for, and nothing a caller could turn against it.
        return own(
            StatusCode::METHOD_NOT_ALLOWED,
            "refused",
            "the proxy relays only GET to hosts other than the service's base URL",
        );
    }
    shared.mismatched(crate::contract::request(&parts.method, target.path(), &body));
    let caller = Caller {
        origin: shared.origin_for(&parts.headers),
        handover: parts.extensions.get::<Handover>().cloned().unwrap_or_default(),
    };
    if parts.method == Method::POST && to_base {
        submission(&shared, target, &path_and_query, parts.headers, body, &caller).await
    } else {
        relay(&shared, parts.method, target, &parts.headers, body, &caller.origin).await
    }
}

/// Who an answer goes to: the proxy's origin as the caller reached it (the
/// addresses it is given name it), and its connection, which says when an
/// acceptance was delivered.
struct Caller {
    origin: String,
    handover: Handover,
}

/// A request refused before its body is read: a caller the proxy does not
/// admit ([`Shared::admits`]), or a key no service could read.
fn refused_before_reading(shared: &Shared, headers: &mut HeaderMap) -> Option<Response> {
    if let Err(refusal) = shared.admits(headers) {
        return Some(match refusal {
            crate::Refusal::NoProxyKey => own(
                StatusCode::UNAUTHORIZED,
                "refused",
                "this proxy needs its own key in the x-key header",
            ),
            crate::Refusal::NotThisMachine => own(
                StatusCode::FORBIDDEN,
                "refused",
                "the proxy serves programs of this machine: a web page, or a request naming another host, is refused",
            ),
        });
    }
    if headers
        .get(crate::relay::KEY_HEADER)
        .is_some_and(|key| key.to_str().is_err())
    {
        // Never read as no key (the configured one sent, another account
        // paying): said, and nothing sent.
        return Some(own(
            StatusCode::BAD_REQUEST,
            "refused",
            "the x-key header holds bytes no key has (beyond visible ASCII): send your key as it is, or none to \
             use the proxy's; nothing was sent",
        ));
    }
    None
}

/// A submission: sent once per job, whatever its callers do.
async fn submission(
    shared: &Arc<Shared>,
    target: url::Url,
    path_and_query: &str,
    headers: HeaderMap,
    body: Bytes,
    caller: &Caller,
) -> Response {
    let key = shared.service.key_of(&headers).unwrap_or_default().to_string();
    // Its bytes: a key of characters beyond ASCII (`commande-été`) is a key
    // too, and must never fall back to naming the job by its body.
    let idempotency_key = headers
        .get("idempotency-key")
        .map(HeaderValue::as_bytes)
        .filter(|key| !key.trim_ascii().is_empty());
    // Named as it is sent: `/v1/./gen-2-pro` is `/v1/gen-2-pro`.
    let (id, naming) = SubmissionId::of(&key, &as_sent(path_and_query), &body, idempotency_key);
    loop {
        let mut changes = shared.memory.watch();
        match shared.memory.claim(&id, naming).await {
            Claimed::Wait => {
                if !shared.memory.changed(&mut changes).await {
                    return own(StatusCode::SERVICE_UNAVAILABLE, "stopping", "the proxy is stopping");
                }
            }
            Claimed::Unavailable(why) => {
                tracing::warn!(why = %genapi_text::clean(&why), "a submission refused: the proxy's memory cannot be read");
                return own(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "unavailable",
                    &format!(
                        "the proxy cannot keep what it remembers{}, so it sends nothing that could be paid twice; \
                         try again later",
                        // The file's own words; a database's may name where
                        // it lives, which callers are not told.
                        if why.starts_with(crate::memory_local::FILE_TROUBLE) {
                            format!(" ({})", genapi_text::clean(&why))
                        } else {
                            String::new()
                        }
                    ),
                );
            }
            Claimed::RefuseUnknown => {
                shared.counters.add(Count::UnknownRefused);
                return own(
                    StatusCode::CONFLICT,
                    "unknown",
                    "an identical submission was sent and no answer naming its task came (none, or one the proxy \
                     could not read as an acceptance): the service may have made (and charged for) its task, so it \
                     is not sent again. If it was made, its webhook (when the job named one) says so; to pay for the \
                     job again anyway, send it with a new Idempotency-Key",
                );
            }
            Claimed::Replay(claim, answer) => {
                shared.counters.duplicate_stopped(answer.cost());
                let owner = Owner::new(shared.memory.clone(), claim);
                return acceptance(shared, &answer, owner, "replayed", caller).await;
            }
            Claimed::Send(claim) => return send(shared, target, headers, body, claim, caller).await,
        }
    }
}

/// Sends a submission claimed by this caller. The exchange with the service
/// runs on a task of its own: a caller that goes away does not stop it, and
/// its answer is kept for the caller's retry.
async fn send(
    shared: &Arc<Shared>,
    target: url::Url,
    headers: HeaderMap,
    body: Bytes,
    claim: Claim,
    caller: &Caller,
) -> Response {
    let owner = Owner::new(shared.memory.clone(), claim.clone());
    shared.counters.add(Count::SubmissionSent);
    let exchange = {
        let shared = shared.clone();
        let sending = shared.sending();
        tokio::spawn(async move {
            let _sending = sending;
            let path = target.path().to_string();
            let operation = crate::contract::operation_id(&path, &Method::POST).unwrap_or_else(|| path.clone());
            let answer = match shared
                .service
                .send(Method::POST, target, &headers, body, &operation)
                .await
            {
                Ok(sent) => {
                    shared.note_answer(&headers, &sent.response);
                    let answer_headers = sent.response.headers().clone();
                    let answer = read_answer(sent.response).await;
                    if let Some(record) = sent.record {
                        match &answer {
                            Ok(read) => record.answered(
                                StatusCode::from_u16(read.status).unwrap_or(StatusCode::BAD_GATEWAY),
                                &answer_headers,
                                read.body.as_bytes(),
                            ),
                            Err(unanswered) => record.failed(&unanswered.why),
                        }
                    }
                    answer
                }
                Err(error) => Err(Unanswered::of(error)),
            };
            if let Ok(answer) = &answer {
                let checked = crate::contract::answer(&Method::POST, &path, answer.status, answer.body.as_bytes());
                shared.mismatched(checked);
            }
            match &answer {
                Ok(answer) if answer.accepts_a_task() => {
                    shared.counters.add(Count::Task);
                    if let (Some(recording), Some(task)) = (&shared.service.recording, answer.task_id()) {
                        recording.task_accepted(&task);
                    }
                    // Kept as callers may read it: without the configured key.
                    let kept = Answer {
                        body: String::from_utf8_lossy(&shared.without_key(answer.body.clone().into_bytes()))
                            .into_owned(),
                        ..answer.clone()
                    };
                    shared.memory.accepted(&claim, kept).await;
                }
                // Refused (a 4xx): no task, the job may be sent again.
                Ok(answer) if (400..500).contains(&answer.status) => shared.memory.forget(&claim).await,
                // A 5xx (a gateway's timeout while the service goes on), or a
                // success that names no task, may hold one, as an answer
                // that never came may.
                Ok(_) => shared.memory.unknown(&claim).await,
                Err(unanswered) if unanswered.never_left => shared.memory.forget(&claim).await,
                Err(_) => shared.memory.unknown(&claim).await,
            }
            answer
        })
    };
    match exchange.await {
        Ok(Ok(answer)) if answer.accepts_a_task() => acceptance(shared, &answer, owner, "sent", caller).await,
        Ok(Ok(answer)) => {
            drop(owner);
            whole(shared, &answer, &caller.origin).await
        }
        Ok(Err(unanswered)) => own(
            StatusCode::BAD_GATEWAY,
            "unanswered",
            &format!("the service did not answer: {}", unanswered.why),
        ),
        Err(_) => own(
            StatusCode::BAD_GATEWAY,
            "unanswered",
            "the exchange with the service stopped",
        ),
    }
}

/// Why a submission has no answer.
#[derive(Debug)]
struct Unanswered {
    /// The request surely never reached the service (no connection).
    never_left: bool,
    /// What happened, without the address.
    why: String,
}

impl Unanswered {
    fn of(error: reqwest::Error) -> Unanswered {
        Unanswered {
            never_left: error.is_connect(),
            why: genapi_text::clean(&error_text(&error.without_url())),
        }
    }
}

/// A transport error's text and causes, without the address it failed on.
fn error_text(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    genapi_text::addresses_shown(&text)
}

/// Reads a submission's answer whole, within its bound.
async fn read_answer(response: reqwest::Response) -> Result<Answer, Unanswered> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let bytes = read_bounded(response).await.map_err(|why| Unanswered {
        never_left: false,
        why: why.into(),
    })?;
    Ok(Answer {
        status,
        content_type,
        retry_after,
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// The acceptance of a task, its addresses through the proxy, owed to
/// `owner`'s caller until written to its end.
async fn acceptance(shared: &Shared, answer: &Answer, owner: Owner, mark: &'static str, caller: &Caller) -> Response {
    let body = passed_on(shared, &caller.origin, answer.body.as_bytes()).await;
    let delivered = Delivered::new(Bytes::from(body), owner, caller.handover.clone());
    let mut response = Response::new(Body::new(delivered));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::OK);
    set_type(response.headers_mut(), answer.content_type.as_deref());
    response
        .headers_mut()
        .insert(PROXY_HEADER, HeaderValue::from_static(mark));
    response
}

/// An answer's body as the caller gets it: its addresses through the proxy
/// (as `origin`, the proxy as the caller reached it), without the
/// configured key. The origins it names are known to every proxy sharing
/// the memory before it leaves.
async fn passed_on(shared: &Shared, origin: &str, body: &[u8]) -> Vec<u8> {
    let rewritten = shared.rewriter(origin).body(body).unwrap_or_else(|| body.to_vec());
    shared.memory.publish_origins().await;
    shared.without_key(rewritten)
}

/// A refusal's answer as it came (it names no task).
async fn whole(shared: &Shared, answer: &Answer, origin: &str) -> Response {
    let body = passed_on(shared, origin, answer.body.as_bytes()).await;
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::BAD_GATEWAY);
    set_type(response.headers_mut(), answer.content_type.as_deref());
    // A refusal's wait is the caller's to honour.
    if let Some(value) = answer
        .retry_after
        .as_deref()
        .and_then(|text| HeaderValue::from_str(text).ok())
    {
        response.headers_mut().insert(http::header::RETRY_AFTER, value);
    }
    response
}

fn set_type(headers: &mut HeaderMap, content_type: Option<&str>) {
    if let Some(value) = content_type.and_then(|text| HeaderValue::from_str(text).ok()) {
        headers.insert(http::header::CONTENT_TYPE, value);
    }
}

/// Any other request (a poll, a download, a listing): relayed as it is, a
/// JSON answer with its addresses through the proxy, anything else streamed.
async fn relay(
    shared: &Arc<Shared>,
    method: Method,
    target: url::Url,
    headers: &HeaderMap,
    body: Bytes,
    origin: &str,
) -> Response {
    let path = target.path().to_string();
    let from_the_service =
        target.origin() == shared.service.base.origin() || shared.service.client.sends_key_to(&target);
    // Named as the document names it; a GET of another address is a
    // result's download, whose bytes the recording summarises.
    let operation = crate::contract::operation_id(&path, &method).unwrap_or_else(|| match method {
        Method::GET => "download".to_string(),
        _ => path.clone(),
    });
    let (response, record) = match shared
        .service
        .send(method.clone(), target, headers, body, &operation)
        .await
    {
        Ok(sent) => (sent.response, sent.record),
        Err(error) => {
            return own(
                StatusCode::BAD_GATEWAY,
                "unanswered",
                &format!("the service did not answer: {}", Unanswered::of(error).why),
            )
        }
    };
    shared.note_answer(headers, &response);
    let status = response.status();
    let mut answer_headers = relayed_headers(response.headers());
    let is_json = answer_headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|text| text.to_ascii_lowercase().contains("json"));
    // JSON (whose addresses are rewritten) and refusals are read whole.
    // Text of a host the key is sent to (an error page, a debugging
    // answer) is read whole and passed on without it; its results (an
    // image, a video, bytes of any size) stream, searched as they go.
    let whole = is_json || !status.is_success() || (from_the_service && is_text(&answer_headers));
    let body = if whole {
        let recorded_headers = response.headers().clone();
        let read = read_bounded(response).await;
        if let Some(record) = record {
            match &read {
                Ok(bytes) => record.answered(status, &recorded_headers, bytes),
                Err(why) => record.failed(why),
            }
        }
        match read {
            Ok(bytes) => {
                if is_json {
                    shared.mismatched(crate::contract::answer(&method, &path, status.as_u16(), &bytes));
                }
                answer_headers.remove(http::header::CONTENT_LENGTH);
                // Addresses in an answer of another host (a delivery
                // host's) are not the service's to hand out: passed on
                // as they are, never opened as routes of the proxy.
                if from_the_service {
                    Body::from(passed_on(shared, origin, &bytes).await)
                } else {
                    Body::from(shared.without_key(bytes.to_vec()))
                }
            }
            Err(why) => {
                return own(
                    StatusCode::BAD_GATEWAY,
                    "unanswered",
                    &format!("the service did not answer as it should: {why}"),
                )
            }
        }
    } else {
        answer_headers.remove(http::header::CONTENT_LENGTH);
        // A host that was sent the key may quote it in any answer, an
        // image too: searched as it streams, and so never passed on
        // compressed, where no search could see it.
        let forms = (from_the_service && !shared.key_forms.is_empty()).then(|| shared.key_forms.clone());
        if forms.is_some() && encoded(response.headers()) {
            return own(
                StatusCode::BAD_GATEWAY,
                "unanswered",
                "the service did not answer as it should: its answer came compressed, which the proxy did not ask \
                 for and cannot check",
            );
        }
        streamed(response, record, forms)
    };
    let mut relayed = Response::new(body);
    *relayed.status_mut() = status;
    *relayed.headers_mut() = shared.headers_without_key(answer_headers);
    relayed
}

/// An answer's body passed on as it streams (a result's bytes), fed to its
/// record chunk by chunk. The answer of a host that was sent the key is
/// searched for it as it streams (`forms`, [`crate::key_forms`]): the end
/// of each chunk is held back by the longest spelling less one byte, so a
/// spelling cut between two chunks is seen whole, and a stream that holds
/// one is broken off there, its key never passed on.
fn streamed(response: reqwest::Response, record: Option<genapi::RecordedExchange>, forms: KeyForms) -> Body {
    let (status, recorded_headers) = (response.status(), response.headers().clone());
    let keep = forms
        .as_deref()
        .map_or(0, |forms| crate::key_forms::longest(forms).saturating_sub(1));
    let state = Streaming {
        response,
        record,
        held: Vec::new(),
        done: false,
    };
    Body::from_stream(futures::stream::unfold(state, move |mut state| {
        let (recorded_headers, forms) = (recorded_headers.clone(), forms.clone());
        async move {
            if state.done {
                return None;
            }
            match state.response.chunk().await {
                Ok(Some(chunk)) => {
                    if let Some(record) = &state.record {
                        record.feed(&chunk);
                    }
                    state.held.extend_from_slice(&chunk);
                    if forms
                        .as_deref()
                        .is_some_and(|forms| crate::key_forms::redacted(&state.held, forms).is_some())
                    {
                        if let Some(record) = state.record.take() {
                            record.failed("the answer quoted the key, and was broken off");
                        }
                        state.done = true;
                        return Some((Err(StreamError::from("the answer quoted the key")), state));
                    }
                    let passed = state.held.len().saturating_sub(keep);
                    let out: Vec<u8> = state.held.drain(..passed).collect();
                    Some((Ok(Bytes::from(out)), state))
                }
                Ok(None) => {
                    if let Some(record) = state.record.take() {
                        record.answered(status, &recorded_headers, b"");
                    }
                    state.done = true;
                    // The bytes held back, searched already.
                    let rest = std::mem::take(&mut state.held);
                    (!rest.is_empty()).then(|| (Ok(Bytes::from(rest)), state))
                }
                Err(error) => {
                    if let Some(record) = state.record.take() {
                        record.failed("the answer broke off");
                    }
                    state.done = true;
                    Some((Err(StreamError::from(error.without_url())), state))
                }
            }
        }
    }))
}

/// The configured key's spellings an answer is searched for as it streams,
/// when its host was sent the key.
type KeyForms = Option<Arc<Vec<Vec<u8>>>>;

/// Why a streamed answer broke off.
type StreamError = Box<dyn std::error::Error + Send + Sync>;

/// A streamed answer, as far as it went.
struct Streaming {
    response: reqwest::Response,
    record: Option<genapi::RecordedExchange>,
    /// Bytes read and not passed on yet.
    held: Vec<u8>,
    done: bool,
}

/// A request's path and query as an address reads them (dot segments
/// resolved, characters escaped), which is where it is sent.
fn as_sent(path_and_query: &str) -> String {
    let Ok(base) = url::Url::parse("http://proxy.invalid") else {
        return path_and_query.to_string();
    };
    match base.join(path_and_query) {
        Ok(read) => match read.query() {
            Some(query) => format!("{}?{query}", read.path()),
            None => read.path().to_string(),
        },
        Err(_) => path_and_query.to_string(),
    }
}

/// Whether an answer is text (`text/…`).
fn is_text(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|text| text.trim_start().to_ascii_lowercase().starts_with("text/"))
}

/// Whether an answer came compressed: a content coding but `identity` in
/// any line of its header, or a transfer coding but `chunked` (which the
/// client undoes; another would reach the caller as it came, unchecked).
/// A coding that is not text counts as one.
fn encoded(headers: &reqwest::header::HeaderMap) -> bool {
    let codings = |name| {
        headers.get_all(name).iter().flat_map(|value| {
            let text = value.to_str().unwrap_or("unreadable");
            text.split(',')
                .map(|coding| coding.trim().to_ascii_lowercase())
                .collect::<Vec<_>>()
        })
    };
    let plain = |coding: &String, also: &str| coding.is_empty() || coding == "identity" || coding == also;
    codings(http::header::CONTENT_ENCODING).any(|coding| !plain(&coding, "identity"))
        || codings(http::header::TRANSFER_ENCODING).any(|coding| !plain(&coding, "chunked"))
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Bytes, &'static str> {
    // The proxy asks for answers plain (`Accept-Encoding: identity`): one
    // that comes compressed anyway cannot be checked for the key or have
    // its addresses rewritten, so it is not passed on.
    if encoded(response.headers()) {
        return Err("its answer came compressed, which the proxy did not ask for and cannot check");
    }
    if response
        .content_length()
        .is_some_and(|n| n > MOST_JSON_ANSWER_BYTES as u64)
    {
        return Err(BROKE_OFF);
    }
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) if bytes.len() + chunk.len() <= MOST_JSON_ANSWER_BYTES => bytes.extend_from_slice(&chunk),
            Ok(Some(_)) | Err(_) => return Err(BROKE_OFF),
            Ok(None) => return Ok(Bytes::from(bytes)),
        }
    }
}

/// An answer of the proxy's own: `{"detail": …}`, marked `mark`.
fn own(status: StatusCode, mark: &'static str, detail: &str) -> Response {
    let mut response = json(status, &serde_json::json!({ "detail": detail }));
    response
        .headers_mut()
        .insert(PROXY_HEADER, HeaderValue::from_static(mark));
    response
}

fn json(status: StatusCode, value: &impl serde::Serialize) -> Response {
    let body = serde_json::to_vec(value).unwrap_or_default();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(http::header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}
