//! One API call, sent by the generated client.
//!
//! Every operation of the document (the submissions and `get_result`) is sent
//! by the generated client's own operation method. The generated client is
//! built for one call around a [`Call`] (its "inner value"), and its hooks
//! hand the request to the [`Transport`], which decides who gets the key,
//! retries by purpose, reads the answer within its limit and traces it:
//!
//! - `pre` puts the request where the service said (a task is polled at its
//!   `polling_url` as given, never rebuilt) and, for [`crate::Client::submit_raw`],
//!   the caller's own JSON on the wire, so fields the document does not know
//!   yet still reach the service;
//! - `exec` is the transport's one exchange: it answers with the status,
//!   headers and the body it read, and the generated code decodes them;
//! - `post` stops the generated code when the transport failed: the typed
//!   [`Error`] it gave is kept in the [`Call`] and taken back by
//!   [`Call::reply`], since the generator's error type only carries text.
//!
//! Polls after a client's first are the one exception: that first poll keeps
//! the request the generated `get_result` built, and every later poll sends
//! it at its own task's polling URL through the same exchange
//! (`poll_request.rs` says why).
//!
//! The generated answers are then sorted into a [`Reply`]: the document's
//! type, the document's 422, or the raw answer for everything the document
//! does not describe (another status, a body that does not fit), which the
//! callers decode leniently or turn into typed errors.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use progenitor_client::{ClientHooks, ClientInfo, OperationInfo, ResponseValue};
use reqwest::{StatusCode, Url};

use crate::api::types::HttpValidationError;
use crate::error::{Error, Result, Unaddressed};
use crate::transport::{bodiless_copy, Answer, Purpose, Transport};

/// The generated client, for one call.
pub(crate) type Generated = crate::api::generated::Client;

/// What the generated operation methods return.
pub(crate) type Sent<T> = std::result::Result<ResponseValue<T>, progenitor_client::Error<HttpValidationError>>;

/// The inner value of the generated client: one call's transport, address,
/// body and outcome.
#[derive(Clone)]
pub(crate) struct Call {
    transport: Arc<Transport>,
    /// The exact address to send to, when the service named one.
    address: Option<Url>,
    /// The exact body to send, when the caller wrote it.
    body: Option<Bytes>,
    /// What the exchange is for, when its method alone does not say: a
    /// submission its caller records is sent once.
    purpose: Option<Purpose>,
    /// Whether a copy of the request sent is kept for the caller (the
    /// client's poll request, see `poll_request.rs`).
    keep_request: bool,
    /// What the exchange ended in, when it was not an HTTP answer, and the
    /// status of the last answer (the generator keeps neither).
    outcome: Arc<Mutex<Outcome>>,
}

#[derive(Default)]
struct Outcome {
    failed: Option<Error>,
    status: Option<StatusCode>,
    /// The request as sent, when the call keeps it.
    sent: Option<reqwest::Request>,
}

impl std::fmt::Debug for Call {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Call")
            .field("address", &self.address.as_ref().map(Url::path))
            .field("body_bytes", &self.body.as_ref().map(Bytes::len))
            .finish_non_exhaustive()
    }
}

/// A generated answer, sorted.
pub(crate) enum Reply<T> {
    /// A 200 whose body is the document's type.
    Typed(T),
    /// A 422 in the document's validation shape.
    Invalid(HttpValidationError),
    /// Anything else, as read: another status, or a body that does not fit
    /// the document's type (kept for lenient decoding).
    Raw(Answer),
}

impl Call {
    /// A generated client for one poll of `address` on `base` (an origin, as
    /// text), keeping a copy of the request sent when `keep_request` (see
    /// [`Call::sent_request`]).
    pub(crate) fn poll(transport: &Arc<Transport>, base: &str, address: Url, keep_request: bool) -> Generated {
        let mut call = Call::new(transport, Some(address), None, None);
        call.keep_request = keep_request;
        Call::around(base, call)
    }

    /// The request a call made by [`Call::poll`] sent, as the generated code
    /// and the `pre` hook built it (without the key, which the exchange adds
    /// beneath).
    pub(crate) fn sent_request(client: &Generated) -> Option<reqwest::Request> {
        client.inner().outcome.lock().ok()?.sent.take()
    }

    /// A generated client for one submission to `base` (a base URL, as
    /// text), optionally with the exact `body` the caller wrote, sent for
    /// `purpose`: retried as any (`Submit`), or sent once (`SubmitOnce`).
    pub(crate) fn submission(
        transport: &Arc<Transport>,
        base: &str,
        body: Option<Bytes>,
        purpose: Purpose,
    ) -> Generated {
        Call::around(base, Call::new(transport, None, body, Some(purpose)))
    }

    fn new(transport: &Arc<Transport>, address: Option<Url>, body: Option<Bytes>, purpose: Option<Purpose>) -> Call {
        Call {
            transport: transport.clone(),
            address,
            body,
            purpose,
            keep_request: false,
            outcome: Arc::default(),
        }
    }

    /// The generated client for `base`, around `call`.
    fn around(base: &str, call: Call) -> Generated {
        let api = call.transport.api_client().clone();
        Generated::new_with_client(base.trim_end_matches('/'), api, call)
    }

    /// Sorts what an operation method of `client` returned.
    pub(crate) async fn reply<T>(client: &Generated, operation: &str, sent: Sent<T>) -> Result<Reply<T>> {
        client.inner().sort(operation, sent).await
    }

    async fn sort<T>(&self, operation: &str, sent: Sent<T>) -> Result<Reply<T>> {
        let (failed, status) = match self.outcome.lock() {
            Ok(mut outcome) => (outcome.failed.take(), outcome.status),
            Err(_) => (None, None),
        };
        if let Some(error) = failed {
            return Err(error);
        }
        use progenitor_client::Error as Generated;
        // The address a generated error names is left out of it.
        let transport_error = |source| Error::transport(operation, Unaddressed::new(source, self.address.as_ref()));
        match sent {
            Ok(value) => Ok(Reply::Typed(value.into_inner())),
            Err(Generated::ErrorResponse(value)) => Ok(Reply::Invalid(value.into_inner())),
            Err(Generated::InvalidResponsePayload(body, _)) => Ok(Reply::Raw(Answer {
                status: status.unwrap_or(StatusCode::OK),
                headers: Default::default(),
                body,
            })),
            Err(Generated::UnexpectedResponse(mut response)) => {
                let headers = std::mem::take(response.headers_mut());
                let status = response.status();
                // The transport read this body already; this takes it back.
                let body = response.bytes().await.map_err(transport_error)?;
                Ok(Reply::Raw(Answer { status, headers, body }))
            }
            Err(Generated::CommunicationError(source) | Generated::ResponseBodyError(source)) => {
                Err(transport_error(source))
            }
            // The generated code met a request it could not build, or a hook
            // refused it without saying why; neither happens with the typed
            // bodies and text ids this crate gives it.
            Err(other) => Err(Error::refused_locally(format!(
                "the generated client refused {operation}: {other}"
            ))),
        }
    }

    fn keep(&self, update: impl FnOnce(&mut Outcome)) {
        if let Ok(mut outcome) = self.outcome.lock() {
            update(&mut outcome);
        }
    }
}

impl ClientHooks<Call> for Generated {
    async fn pre<E>(
        &self,
        request: &mut reqwest::Request,
        _info: &OperationInfo,
    ) -> std::result::Result<(), progenitor_client::Error<E>> {
        let call = self.inner();
        // Usually the generated address is the polling URL already.
        if let Some(address) = call.address.as_ref().filter(|address| *address != request.url()) {
            *request.url_mut() = address.clone();
        }
        if let Some(body) = &call.body {
            *request.body_mut() = Some(reqwest::Body::from(body.clone()));
        }
        Ok(())
    }

    async fn exec(&self, request: reqwest::Request, info: &OperationInfo) -> reqwest::Result<reqwest::Response> {
        let call = self.inner();
        let purpose = call.purpose.unwrap_or_else(|| Purpose::of(request.method()));
        let url = request.url().clone();
        if call.keep_request {
            // A poll has no body (see `poll_request.rs`).
            let sent = bodiless_copy(&request, url.clone());
            call.keep(|outcome| outcome.sent = Some(sent));
        }
        let transport = &call.transport;
        match transport
            .exchange_bytes(request, purpose, info.operation_id, transport.max_response_bytes)
            .await
        {
            Ok(answer) => {
                call.keep(|outcome| outcome.status = Some(answer.status));
                Ok(answer.into_response(url))
            }
            Err(error) => {
                call.keep(|outcome| outcome.failed = Some(error));
                // Never read: `post` stops the generated code first.
                Ok(reqwest::Response::from(http::Response::new(Bytes::new())))
            }
        }
    }

    async fn post<E>(
        &self,
        _result: &reqwest::Result<reqwest::Response>,
        info: &OperationInfo,
    ) -> std::result::Result<(), progenitor_client::Error<E>> {
        let failed = self
            .inner()
            .outcome
            .lock()
            .map(|outcome| outcome.failed.is_some())
            .unwrap_or(false);
        if failed {
            return Err(progenitor_client::Error::Custom(format!(
                "{} failed in the transport",
                info.operation_id
            )));
        }
        Ok(())
    }
}
