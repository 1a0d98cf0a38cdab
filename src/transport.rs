//! Every HTTP exchange of the crate goes through one function,
//! `Transport::exchange`: submissions, polls and downloads alike. That one
//! place decides who gets the key, what is retried, how much of an answer is
//! read, and what is logged. API operations reach it from the generated
//! client's `exec` hook (see `call.rs`); downloads of signed result
//! addresses, which are no operation of the document, call it directly.
//!
//! # Where the key goes
//!
//! The key is added per request, only to trusted origins (see the trust rules
//! in `ClientBuilder::trust_origin`), never to a download. It is added at the
//! very bottom, beneath the user's layers (`layers.rs`), to the address the
//! request finally goes to: no layer sees it, and a layer that points a
//! request elsewhere sends it without the key. API requests do not follow
//! redirects, so the key cannot be carried to another host; downloads follow
//! them without sending a `Referer` (the signed address stays private).
//!
//! # The user's layers
//!
//! Each attempt goes through the program's own tower layers
//! ([`crate::ClientBuilder::layer`]) on its way to the HTTP client. They run
//! beneath this loop, so the retry rules below still hold: a submission's
//! bytes are kept here, and each attempt carries them in a sealed body that
//! no layer can clone, so a layer that retries everything still sends a
//! submission once per attempt of this loop. A layer's own error (or a
//! request it holds past the request timeout) may hide a request that left:
//! a submission is not sent again after it, a poll or download is.
//!
//! A client without layers (the usual one) does none of the layers' work:
//! each attempt goes straight to the innermost service, as reqwest's own
//! request, with the same sealed body and the same key rule
//! (`layers::Route`); every error it meets is then the HTTP client's.
//!
//! # Bounded answers
//!
//! Bodies are read in chunks up to a limit: JSON answers to
//! `ClientBuilder::max_response_bytes` (1 MiB by default), downloads to
//! `ClientBuilder::max_download_bytes`. A larger answer is an
//! [`crate::Error::TooLarge`], never an allocation the service chose.
//!
//! # Secrets in answers
//!
//! Every answer is scrubbed as it is read, headers and body alike, by the
//! client's one scrubber (`scrub.rs`): the key and every secret the client
//! has sent are gone before anything decodes, records, shows or returns
//! it. Only a downloaded image's bytes are not searched.
//!
//! # Recording
//!
//! With [`crate::ClientBuilder::record`], each attempt of the loop is also
//! written to a HAR file (see `record/mod.rs`): the request as sent (key
//! included, so it is redacted there), and the answer once read, or why
//! there was none. Without it, the loop does no more than a check of an
//! `Option` per attempt.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderValue, RETRY_AFTER};
use reqwest::{Method, Request, StatusCode, Url};
use tower::BoxError;
use tracing::Instrument;

use crate::error::{Error, Result, Unaddressed};
use crate::layer_error::LayerError;
use crate::layers::{AddLayer, Failed, Keying, Route, Wire, LAYER_GRACE};
use crate::received::Received;
use crate::record::{Attempt, Body, Recorder, Sent};
use crate::scrub::Scrubber;
use crate::telemetry;
use crate::trust::TrustPolicy;
use crate::ApiKey;

/// How failed exchanges are retried.
///
/// One loop: a call sends at most [`RetryPolicy::max_attempts`] requests in
/// all, whatever mix of refused connections, retried statuses and answers
/// that broke off it meets.
///
/// - **Submissions (POST)** are retried only when the service surely did not
///   accept them: a connection that could not be opened, or `429 Too Many
///   Requests` (the task was refused), after `Retry-After` when given. Never
///   after a 5xx, a reset or a read timeout: the task may exist, and sending it
///   again would create and charge a second one.
/// - **Submissions whose caller records each sending**
///   ([`crate::Client::submit_raw_recorded`], a batch's journal) are sent
///   once, whatever this policy says: a 429 or a connection that could not be
///   opened comes back as the error ([`crate::Error::is_safe_to_resubmit`])
///   for the caller to record and send again itself. A retry here would leave
///   under the one record written before the first request, unseen by the
///   caller: it could neither write down that nothing was created between
///   attempts (a run killed then would leave a sent, unanswered submission,
///   not sent again on its own) nor keep further attempts from leaving once
///   it stops (a stopped batch would go on sending, and be charged for, what
///   it stopped).
/// - **Polls and downloads (GET)** are safe to repeat: network errors
///   (including an answer whose body breaks off), timeouts, 408, 429, 500,
///   502, 503 and 504 are retried with jittered exponential backoff,
///   honouring `Retry-After`.
///
/// ```
/// use std::time::Duration;
/// let policy = genapi::RetryPolicy::default().max_attempts(6).initial_backoff(Duration::from_millis(100));
/// assert_ne!(policy, genapi::RetryPolicy::default());
/// ```
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 1 disables retries.
    pub(crate) max_attempts: u32,
    /// Delay before the first retry; doubles each time, with jitter.
    pub(crate) initial_backoff: Duration,
    /// Upper bound of one backoff.
    pub(crate) max_backoff: Duration,
    /// Upper bound of a `Retry-After` the client will honour by sleeping.
    pub(crate) max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            initial_backoff: Duration::from_millis(250),
            max_backoff: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn never() -> Self {
        RetryPolicy {
            max_attempts: 1,
            ..RetryPolicy::default()
        }
    }
    /// Attempts in all, the first included (at least 1).
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }
    /// Delay before the first retry.
    pub fn initial_backoff(mut self, delay: Duration) -> Self {
        self.initial_backoff = delay;
        self
    }
    /// Upper bound of one backoff.
    pub fn max_backoff(mut self, delay: Duration) -> Self {
        self.max_backoff = delay;
        self
    }
    /// Upper bound of a `Retry-After` honoured by sleeping.
    pub fn max_retry_after(mut self, delay: Duration) -> Self {
        self.max_retry_after = delay;
        self
    }

    /// "Equal jitter" exponential backoff for retry number `retry` (1-based):
    /// half the capped exponential delay, plus a random part of the other
    /// half. `unit` is the random draw in `[0, 1)`.
    pub(crate) fn backoff(&self, retry: u32, unit: f64) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << retry.saturating_sub(1).min(16));
        let cap = exp.min(self.max_backoff);
        cap / 2 + cap.mul_f64(unit.clamp(0.0, 1.0) * 0.5)
    }
}

/// What an exchange is for; it decides the key and the retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A POST that may create a task.
    Submit,
    /// A POST that may create a task, each sending of which its caller
    /// records: sent once (see [`RetryPolicy`]).
    SubmitOnce,
    /// A GET of a task's state, or any other idempotent API call.
    Poll,
    /// A GET of a signed delivery address: no key.
    Download,
}

impl Purpose {
    /// An API request's purpose, from its method.
    pub(crate) fn of(method: &Method) -> Purpose {
        if method == Method::POST {
            Purpose::Submit
        } else {
            Purpose::Poll
        }
    }

    /// Attempts in all for an exchange of this purpose.
    fn attempts(self, policy: &RetryPolicy) -> u32 {
        match self {
            Purpose::SubmitOnce => 1,
            Purpose::Submit | Purpose::Poll | Purpose::Download => policy.max_attempts,
        }
    }

    fn retries_status(self, status: StatusCode) -> bool {
        match self {
            Purpose::SubmitOnce => false,
            Purpose::Submit => status == StatusCode::TOO_MANY_REQUESTS,
            Purpose::Poll | Purpose::Download => matches!(status.as_u16(), 408 | 429 | 500 | 502 | 503 | 504),
        }
    }

    /// Whether a failure that may have left the request is asked again:
    /// only when asking again is harmless.
    fn retries_unknown(self) -> bool {
        matches!(self, Purpose::Poll | Purpose::Download)
    }

    fn retries_error(self, error: &reqwest::Error) -> bool {
        match self {
            Purpose::SubmitOnce => false,
            Purpose::Submit => error.is_connect(),
            Purpose::Poll | Purpose::Download => {
                error.is_connect() || error.is_timeout() || error.is_request() || error.is_body() || error.is_decode()
            }
        }
    }
}

/// A reqwest builder with the TLS the crate was built with: rustls (the
/// `rustls` feature, the default) or the platform's library (`native-tls`).
pub(crate) fn http_builder() -> Result<reqwest::ClientBuilder> {
    #[cfg(feature = "rustls")]
    return Ok(reqwest::Client::builder().tls_backend_preconfigured(tls_config()?));
    #[cfg(all(feature = "native-tls", not(feature = "rustls")))]
    return Ok(reqwest::Client::builder().tls_backend_native());
}

#[cfg(not(any(feature = "rustls", feature = "native-tls")))]
compile_error!("genapi needs a TLS stack: its default feature `rustls`, or `native-tls`");

/// A TLS configuration with ring and the platform's certificate verifier,
/// for one client: building a genapi client changes nothing process-wide.
#[cfg(feature = "rustls")]
fn tls_config() -> Result<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = rustls_platform_verifier::Verifier::new(provider.clone())
        .map_err(|e| Error::Config(format!("cannot load the platform's TLS roots: {e}")))?;
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS versions: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(config)
}

/// Where the body of a successful answer goes.
pub(crate) enum Sink {
    /// Kept in memory (JSON answers, `Output::bytes`).
    Memory(Received),
    /// Streamed to a file (`Output::save`); truncated on a retry.
    File(tokio::fs::File),
}

impl Sink {
    async fn reset(&mut self) -> std::io::Result<()> {
        match self {
            Sink::Memory(body) => {
                body.clear();
                Ok(())
            }
            Sink::File(file) => {
                use tokio::io::AsyncSeekExt;
                file.set_len(0).await?;
                file.seek(std::io::SeekFrom::Start(0)).await.map(drop)
            }
        }
    }

    async fn write(&mut self, chunk: Bytes) -> std::io::Result<()> {
        match self {
            Sink::Memory(body) => {
                body.push(chunk);
                Ok(())
            }
            Sink::File(file) => tokio::io::AsyncWriteExt::write_all(file, &chunk).await,
        }
    }
}

/// An answer read within its limit.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    /// The body of a non-success answer, or of a success read into memory.
    pub(crate) body: Bytes,
}

impl Answer {
    /// The answer again as a response whose body is already read, for the
    /// generated code to decode. `url` is the address it came from (given,
    /// since reqwest would otherwise parse a placeholder address for it).
    pub(crate) fn into_response(self, url: Url) -> reqwest::Response {
        use reqwest::ResponseBuilderExt;
        let mut response = http::Response::new(self.body);
        *response.status_mut() = self.status;
        *response.headers_mut() = self.headers;
        // reqwest's own way to attach an address is through a builder; only
        // its extensions are taken (the builder has nothing that can fail).
        if let Ok(addressed) = http::Response::builder().url(url).body(()) {
            *response.extensions_mut() = addressed.into_parts().0.extensions;
        }
        reqwest::Response::from(response)
    }

    /// The `Retry-After` of this answer.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        retry_after(&self.headers)
    }
}

/// Most memory reserved ahead for an announced length.
const MAX_RESERVE: u64 = 8 * 1024 * 1024;

/// Error bodies are read for their message only.
const ERROR_BODY_LIMIT: u64 = 64 * 1024;

/// The shared HTTP machinery behind a [`crate::Client`] (and the inner value
/// of the generated [`crate::api::Client`]); built only by the client builder.
pub struct Transport {
    /// The client the generated code builds requests with (no redirects).
    api: reqwest::Client,
    /// Where API requests go: the client that adds the key, beneath the
    /// user's layers if there are any.
    api_route: Route,
    /// Where downloads go: the download client (no key), beneath the
    /// user's layers if there are any.
    download_route: Route,
    key: ApiKey,
    /// Where the key came from, in words: the key a refusal names.
    pub(crate) key_origin: String,
    trust: TrustPolicy,
    retry: RetryPolicy,
    pub(crate) max_response_bytes: u64,
    pub(crate) max_download_bytes: u64,
    /// Bounds one whole download, every attempt included.
    pub(crate) download_timeout: Duration,
    /// Called with every answer's headers, once scrubbed.
    observers: Vec<HeaderObserver>,
    /// Where exchanges are recorded, when they are.
    recorder: Option<Recorder>,
    /// Every secret the client holds or has sent; every answer passes it.
    scrubber: Arc<Scrubber>,
}

/// What [`crate::ClientBuilder::observe_headers`] was given.
pub(crate) type HeaderObserver = Arc<dyn Fn(&http::HeaderMap) + Send + Sync>;

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("key", &self.key)
            .field("trust", &self.trust)
            .field("retry", &self.retry)
            .field("recorder", &self.recorder)
            .finish_non_exhaustive()
    }
}

/// The pieces a [`Transport`] is made of.
pub(crate) struct TransportParts {
    pub(crate) api: reqwest::Client,
    pub(crate) downloads: reqwest::Client,
    pub(crate) key: ApiKey,
    /// Where the key came from, in words.
    pub(crate) key_origin: String,
    pub(crate) trust: TrustPolicy,
    pub(crate) retry: RetryPolicy,
    pub(crate) max_response_bytes: u64,
    pub(crate) max_download_bytes: u64,
    pub(crate) download_timeout: Duration,
    pub(crate) recorder: Option<Recorder>,
    pub(crate) scrubber: Arc<Scrubber>,
    pub(crate) observers: Vec<HeaderObserver>,
    /// The user's layers, the first outermost.
    pub(crate) layers: Vec<AddLayer>,
    /// Timeout of one API exchange.
    pub(crate) request_timeout: Duration,
}

impl Transport {
    /// `key` must be a valid header value (checked by the builder).
    pub(crate) fn new(parts: TransportParts) -> Result<Self> {
        let mut key_header = HeaderValue::from_str(parts.key.expose())
            .map_err(|_| Error::Config("the API key has characters a header cannot carry".into()))?;
        key_header.set_sensitive(true);
        let keying = Arc::new(Keying {
            header: key_header,
            trust: parts.trust.clone(),
        });
        // How long an attempt waits for its answer's head through layers.
        let deadline = parts.request_timeout.saturating_add(LAYER_GRACE);
        Ok(Transport {
            api_route: Route::new(Wire::new(parts.api.clone(), Some(keying)), &parts.layers, deadline),
            download_route: Route::new(Wire::new(parts.downloads, None), &parts.layers, deadline),
            api: parts.api,
            key: parts.key,
            key_origin: parts.key_origin,
            trust: parts.trust,
            retry: parts.retry,
            max_response_bytes: parts.max_response_bytes,
            max_download_bytes: parts.max_download_bytes,
            download_timeout: parts.download_timeout,
            observers: parts.observers,
            recorder: parts.recorder,
            scrubber: parts.scrubber,
        })
    }

    /// Shows an answer's headers, already scrubbed, to every observer.
    fn observe(&self, headers: &HeaderMap) {
        for observer in &self.observers {
            observer(headers);
        }
    }

    /// The client for API calls (no redirects).
    pub(crate) fn api_client(&self) -> &reqwest::Client {
        &self.api
    }

    /// Whether the key may be sent to this address.
    pub(crate) fn is_trusted(&self, url: &Url) -> bool {
        self.trust.trusts(url)
    }

    /// The API hosts configured by name, base first.
    pub(crate) fn named_origins(&self) -> &[Url] {
        self.trust.named_origins()
    }

    /// The client's scrubber (see `scrub.rs`).
    pub(crate) fn scrubber(&self) -> &Scrubber {
        &self.scrubber
    }

    /// The client's scrubber, shared with what outlives a call (a
    /// recording of relayed exchanges).
    pub(crate) fn shared_scrubber(&self) -> Arc<Scrubber> {
        self.scrubber.clone()
    }

    /// Text the service sent, as an error keeps it: scrubbed of every
    /// secret (answers were scrubbed as they were read; this also covers
    /// text put together from them) and cut to a few KiB.
    pub(crate) fn scrub(&self, text: &str) -> String {
        const KEEP: usize = 4096;
        // Secrets go first, so a cut can never leave part of one behind.
        let scrubbed = self.scrubber.scrub(text);
        match scrubbed.char_indices().nth(KEEP) {
            Some((at, _)) => format!("{}…", &scrubbed[..at]),
            None => scrubbed,
        }
    }

    /// Sends a request under the retry policy of its purpose and reads its
    /// answer within `limit` bytes: a success into `sink`, anything else into
    /// the answer's body (for the error message).
    pub(crate) async fn exchange(
        &self,
        request: Request,
        purpose: Purpose,
        operation: &str,
        limit: u64,
        sink: &mut Sink,
    ) -> Result<Answer> {
        // The retry loop's state (the attempt, its answer being read) is
        // some kilobytes: kept on the heap, once per exchange, it is not
        // copied again each time a future holding it is moved on the way
        // up (the generated client, the hooks, a poll, a wait).
        Box::pin(self.exchange_with_retries(request, purpose, operation, limit, sink)).await
    }

    /// As [`Transport::exchange`], reading a success into memory.
    pub(crate) async fn exchange_bytes(
        &self,
        request: Request,
        purpose: Purpose,
        operation: &str,
        limit: u64,
    ) -> Result<Answer> {
        let mut sink = Sink::Memory(Received::default());
        let mut answer = self.exchange(request, purpose, operation, limit, &mut sink).await?;
        if answer.status.is_success() {
            if let Sink::Memory(body) = sink {
                answer.body = body.into_bytes();
            }
        }
        Ok(answer)
    }

    /// The one retry loop: at most `RetryPolicy::max_attempts` requests in
    /// all (one for a submission its caller records), whether an attempt
    /// failed to connect, answered a status its purpose retries, or broke off
    /// while its body was read.
    async fn exchange_with_retries(
        &self,
        mut request: Request,
        purpose: Purpose,
        operation: &str,
        limit: u64,
        sink: &mut Sink,
    ) -> Result<Answer> {
        let route = if purpose == Purpose::Download {
            &self.download_route
        } else {
            &self.api_route
        };
        // Added beneath the layers, by the service (see `layers.rs`).
        let keyed = purpose != Purpose::Download && self.is_trusted(request.url());
        // A submission's bytes stay here: each attempt carries them sealed,
        // so only this loop can send them again.
        let sealed = match purpose {
            Purpose::Submit | Purpose::SubmitOnce => request
                .body_mut()
                .take()
                .map(|body| Bytes::copy_from_slice(body.as_bytes().unwrap_or_default())),
            Purpose::Poll | Purpose::Download => None,
        };
        // What a layer's error may quote of the address, left out of it.
        let address = request.url().clone();
        let failed = |why: Read| why.into_error(operation, limit, &self.scrubber, &address);
        let attempts = purpose.attempts(&self.retry);
        let mut attempt = 1;
        loop {
            // A span per request sent, as OpenTelemetry counts them; the
            // waits between attempts are in none. It is handed down as well
            // as entered: looking the current one up again costs a
            // thread-local lookup per request.
            let span = telemetry::exchange_span(request.method(), request.url(), operation, &self.scrubber);
            telemetry::exchange_keyed(&span, keyed);
            telemetry::exchange_attempt(&span, attempt);
            // A body that cannot be cloned (a stream) is sent once.
            let again = if attempt < attempts {
                copy_to_resend(&request)
            } else {
                None
            };
            let exchange = Exchange {
                route,
                sealed: sealed.clone(),
                purpose,
                operation,
                attempt,
                keyed,
                may_retry: again.is_some(),
            };
            let tried = self
                .attempt(exchange, request, limit, sink, &span)
                .instrument(span.clone())
                .await;
            telemetry::exchange_ended(&span, tried.error_type().as_deref());
            let Some(next) = again else {
                // The last attempt: its answer, whatever it is.
                return tried.finished().map_err(failed);
            };
            let wait = match tried {
                Tried::Read(Ok(answer)) => return Ok(answer),
                // Only idempotent exchanges are asked again after their
                // answer broke off: `retries_error` refuses it for a
                // submission, which may have been accepted.
                Tried::Read(Err(Read::Body(error))) if purpose.retries_error(&error.error) => {
                    tracing::debug!(%error, attempt, "the answer broke off; asking again");
                    sink.reset().await.map_err(|e| failed(Read::Sink(e)))?;
                    self.retry.backoff(attempt, fastrand::f64())
                }
                Tried::Read(Err(why)) => return Err(failed(why)),
                Tried::Retried { after, .. } => after
                    .map(|d| d.min(self.retry.max_retry_after))
                    .unwrap_or_else(|| self.retry.backoff(attempt, fastrand::f64())),
                Tried::Unsent(error) if purpose.retries_error(&error.error) => {
                    self.retry.backoff(attempt, fastrand::f64())
                }
                Tried::Unsent(error) => return Err(failed(Read::Body(error))),
                // A layer's own failure: the request may have left, so it
                // is asked again only when idempotent.
                Tried::Layer(_) if purpose.retries_unknown() => self.retry.backoff(attempt, fastrand::f64()),
                Tried::Layer(error) => return Err(failed(Read::Layer(error))),
            };
            tracing::debug!(attempt, wait_ms = wait.as_millis() as u64, "retrying");
            tokio::time::sleep(wait).await;
            request = next;
            attempt += 1;
        }
    }

    /// One attempt of an exchange, recorded whole when exchanges are
    /// recorded: the request as sent, then its answer as read, or why there
    /// was none. The retry loop above sees only what came of it.
    async fn attempt(
        &self,
        exchange: Exchange<'_>,
        request: Request,
        limit: u64,
        sink: &mut Sink,
        span: &tracing::Span,
    ) -> Tried {
        let download = exchange.purpose == Purpose::Download;
        let body = exchange
            .sealed
            .as_deref()
            .or_else(|| request.body().and_then(reqwest::Body::as_bytes));
        let mut noted = self.recorder.as_ref().map(|recorder| {
            let sent = Sent {
                request: &request,
                body,
                operation: exchange.operation,
                attempt: exchange.attempt,
                keyed: exchange.keyed,
                download,
            };
            (recorder, recorder.begin(sent))
        });
        let response = match exchange.route.send(request, exchange.sealed).await {
            Ok(response) => response,
            Err(failed) => {
                record_failure(noted, &failed);
                return match failed {
                    Failed::Http(error) => Tried::Unsent(error),
                    Failed::Layer(error) => Tried::Layer(error),
                };
            }
        };
        let status = response.status();
        telemetry::exchange_answered(span, status);
        if exchange.may_retry && exchange.purpose.retries_status(status) {
            // Left unread, but its headers are shown to the observers too
            // (a 429's are the ones a rate watcher wants), scrubbed first.
            if !self.observers.is_empty() {
                let mut headers = response.headers().clone();
                self.scrubber.scrub_headers(&mut headers);
                self.observe(&headers);
            }
            if let Some((recorder, attempt)) = noted {
                let why = Body::Unread("not read: the status is retried");
                recorder.answered(attempt, status, response.headers(), why);
            }
            return Tried::Retried {
                status,
                after: retry_after(response.headers()),
            };
        }
        let read = self
            .read(response, exchange.purpose, limit, sink, noted.as_mut().map(|(_, a)| a))
            .await;
        record_read(noted, &read, sink);
        Tried::Read(read)
    }

    /// Reads an answer's body in chunks, within `limit` for a success and a
    /// small limit for anything else, and scrubs it of every secret: the
    /// headers and any body but a downloaded result's bytes, which are never
    /// shown as text.
    async fn read(
        &self,
        mut response: reqwest::Response,
        purpose: Purpose,
        limit: u64,
        sink: &mut Sink,
        mut noted: Option<&mut Attempt>,
    ) -> Result<Answer, Read> {
        let status = response.status();
        if let Some(attempt) = noted.as_deref_mut() {
            attempt.saw(response.version());
        }
        let mut headers = std::mem::take(response.headers_mut());
        self.scrubber.scrub_headers(&mut headers);
        self.observe(&headers);
        let success = status.is_success();
        let limit = if success { limit } else { ERROR_BODY_LIMIT };
        if response.content_length().is_some_and(|length| length > limit) && success {
            return Err(Read::TooLarge);
        }
        if let (true, Sink::Memory(body), Some(length)) = (success, &mut *sink, response.content_length()) {
            // Announced and within the limit: one allocation instead of
            // doubling as chunks arrive, but never more than a few MiB on
            // the service's word (the limit may be far above memory).
            body.expect(usize::try_from(length.min(MAX_RESERVE)).unwrap_or(0));
        }
        let mut error_body = Vec::new();
        let mut cut = false;
        let mut read: u64 = 0;
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| Read::Body(Unaddressed::new(error, Some(response.url()))))?
        {
            read = read.saturating_add(chunk.len() as u64);
            if read > limit {
                if success {
                    return Err(Read::TooLarge);
                }
                // An error message past its limit is cut, not refused.
                cut = true;
                break;
            }
            if success {
                if let Some(attempt) = noted.as_deref_mut() {
                    attempt.feed(&chunk);
                }
                sink.write(chunk).await.map_err(Read::Sink)?;
            } else {
                error_body.extend_from_slice(&chunk);
            }
        }
        if cut {
            // Whatever a cut left of a secret goes too.
            error_body = self.scrubber.scrub_cut(&error_body);
        } else if !error_body.is_empty() {
            // (Empty for a success, whose body went to the sink.)
            if let Some(scrubbed) = self.scrubber.scrub_body(&error_body) {
                error_body = scrubbed;
            }
        }
        if let (true, false, Sink::Memory(body)) = (success, purpose == Purpose::Download, &mut *sink) {
            if let Some(scrubbed) = self.scrubber.scrub_body(body.as_slice()) {
                body.replace(scrubbed);
            }
        }
        Ok(Answer {
            status,
            headers,
            body: Bytes::from(error_body),
        })
    }
}

/// A copy of `request` to send if this attempt fails, or `None` when its
/// body cannot be copied (a stream is sent once). reqwest's own
/// `try_clone` also gives every copy a map of extensions, an allocation
/// for each attempt, made in case it fails; a request without a body
/// (a poll, a download, a submission whose bytes are kept sealed) is
/// copied by [`bodiless_copy`].
fn copy_to_resend(request: &Request) -> Option<Request> {
    if request.body().is_some() {
        return request.try_clone();
    }
    Some(bodiless_copy(request, request.url().clone()))
}

/// `request` without its body, sent to `url`: what reqwest's public
/// interface sets of a request (method, address, headers, version and
/// timeout), and nothing else.
pub(crate) fn bodiless_copy(request: &Request, url: Url) -> Request {
    let mut copy = Request::new(request.method().clone(), url);
    *copy.headers_mut() = request.headers().clone();
    *copy.version_mut() = request.version();
    *copy.timeout_mut() = request.timeout().copied();
    copy
}

/// Records an attempt whose answer was read (or broke off).
fn record_read(noted: Option<(&Recorder, Attempt)>, read: &Result<Answer, Read>, sink: &Sink) {
    let Some((recorder, attempt)) = noted else {
        return;
    };
    match read {
        Ok(answer) => {
            // A success's body is in its sink; anything else's in the answer.
            let body = match sink {
                Sink::Memory(body) if answer.status.is_success() => body.as_slice(),
                _ => &answer.body,
            };
            recorder.answered(attempt, answer.status, &answer.headers, Body::Read(body));
        }
        Err(Read::Body(error)) => recorder.failed(attempt, error.to_string()),
        Err(Read::Layer(error)) => recorder.failed(attempt, error.to_string()),
        Err(Read::TooLarge) => recorder.failed(attempt, "the answer was larger than the limit".into()),
        Err(Read::Sink(error)) => recorder.failed(attempt, format!("the answer could not be stored: {error}")),
        Err(Read::Status(status)) => recorder.failed(attempt, format!("{status} left unread")),
    }
}

/// Records an attempt that got no answer.
fn record_failure(noted: Option<(&Recorder, Attempt)>, failed: &Failed) {
    if let Some((recorder, attempt)) = noted {
        let why = match failed {
            Failed::Http(error) => error.to_string(),
            Failed::Layer(error) => error.to_string(),
        };
        recorder.failed(attempt, why);
    }
}

/// One attempt of an exchange, as the retry loop hands it to
/// [`Transport::attempt`].
struct Exchange<'a> {
    /// Where it goes: the wire, or the user's layers around it.
    route: &'a Route,
    /// A submission's body, sent sealed (see `layers.rs`).
    sealed: Option<Bytes>,
    purpose: Purpose,
    operation: &'a str,
    /// Its number, from 1.
    attempt: u32,
    /// Whether the key goes with it.
    keyed: bool,
    /// Whether another attempt is left, so a status the purpose retries is
    /// left unread (the last attempt's answer is read whatever it is).
    may_retry: bool,
}

/// What came of one attempt.
enum Tried {
    /// Its answer, read, or why it could not be.
    Read(Result<Answer, Read>),
    /// A status its purpose retries, left unread (only while another
    /// attempt is left), with the service's `Retry-After`.
    Retried {
        status: StatusCode,
        after: Option<Duration>,
    },
    /// No answer: the request was not sent, or broke off before a status.
    Unsent(Unaddressed),
    /// No answer, by a layer's own error or past the deadline: the request
    /// may have left.
    Layer(BoxError),
}

impl Tried {
    /// What went wrong, as OpenTelemetry's `error.type` says it: the status
    /// of an answer that is an error, else the kind of failure.
    fn error_type(&self) -> Option<std::borrow::Cow<'static, str>> {
        let status = |status: StatusCode| {
            (status.is_client_error() || status.is_server_error()).then(|| status.as_str().to_string().into())
        };
        match self {
            Tried::Read(Ok(answer)) => status(answer.status),
            Tried::Retried { status: code, .. } | Tried::Read(Err(Read::Status(code))) => status(*code),
            Tried::Read(Err(Read::Body(network))) | Tried::Unsent(network) if network.error.is_timeout() => {
                Some("timeout".into())
            }
            Tried::Read(Err(Read::Body(_))) | Tried::Unsent(_) => Some("network".into()),
            Tried::Read(Err(Read::Layer(_))) | Tried::Layer(_) => Some("layer".into()),
            Tried::Read(Err(Read::TooLarge)) => Some("too_large".into()),
            Tried::Read(Err(Read::Sink(_))) => Some("write".into()),
        }
    }

    /// What the last attempt allowed comes to.
    fn finished(self) -> Result<Answer, Read> {
        match self {
            Tried::Read(read) => read,
            Tried::Unsent(error) => Err(Read::Body(error)),
            Tried::Layer(error) => Err(Read::Layer(error)),
            // The last attempt's answer is read whatever its status, so
            // this is not met; were it, the status is said as it is.
            Tried::Retried { status, .. } => Err(Read::Status(status)),
        }
    }
}

/// Why an exchange failed.
enum Read {
    /// The request could not be sent, or its answer broke off.
    Body(Unaddressed),
    /// A layer failed, or held the request past the deadline.
    Layer(BoxError),
    /// A status left unread with no attempt left to retry it.
    Status(StatusCode),
    TooLarge,
    Sink(std::io::Error),
}

impl Read {
    fn into_error(self, operation: &str, limit: u64, scrubber: &Scrubber, address: &reqwest::Url) -> Error {
        let operation = operation.to_string();
        match self {
            Read::Body(network) => Error::transport(&operation, network),
            Read::Layer(source) => Error::Layer {
                operation,
                source: LayerError::scrubbed(source, scrubber, address),
                task: None,
            },
            Read::Status(status) => Error::UnexpectedStatus {
                status: status.as_u16(),
                operation,
                message: "no attempt was left to ask again".into(),
                task: None,
            },
            Read::TooLarge => Error::TooLarge {
                operation,
                limit,
                task: None,
            },
            Read::Sink(e) => Error::Write {
                target: format!("the answer to {operation}"),
                message: e.to_string(),
                task: None,
            },
        }
    }
}

/// Longest `Retry-After` taken from a service: a day. Larger values (or ones
/// too large for a `Duration`) are cut to it, never a panic.
const LONGEST_RETRY_AFTER: Duration = Duration::from_secs(24 * 60 * 60);

/// `Retry-After` in seconds or as an HTTP date, at most a day.
pub(crate) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        if !(seconds.is_finite() && seconds >= 0.0) {
            return None;
        }
        return Some(
            Duration::try_from_secs_f64(seconds)
                .unwrap_or(LONGEST_RETRY_AFTER)
                .min(LONGEST_RETRY_AFTER),
        );
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO)
            .min(LONGEST_RETRY_AFTER),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_equal_jitter_within_its_bounds() {
        let policy = RetryPolicy::default();
        // Retry 1: cap 250 ms, so between 125 and 250 ms.
        assert_eq!(policy.backoff(1, 0.0), Duration::from_millis(125));
        assert_eq!(policy.backoff(1, 1.0), Duration::from_millis(250));
        // Retry 3: 1 s cap.
        assert_eq!(policy.backoff(3, 0.0), Duration::from_millis(500));
        // Far retries stay under max_backoff, whatever the draw.
        assert_eq!(policy.backoff(40, 1.0), Duration::from_secs(8));
        assert_eq!(policy.backoff(40, 0.0), Duration::from_secs(4));
    }

    #[test]
    fn a_request_to_resend_is_copied_whole() {
        let mut request = Request::new(
            Method::GET,
            "https://api.example.com/v1/get_result?id=1".parse().unwrap(),
        );
        request
            .headers_mut()
            .insert("api-version", HeaderValue::from_static("0.0.1"));
        *request.version_mut() = reqwest::Version::HTTP_11;
        *request.timeout_mut() = Some(Duration::from_secs(7));
        let copy = copy_to_resend(&request).unwrap();
        assert_eq!(copy.method(), request.method());
        assert_eq!(copy.url(), request.url());
        assert_eq!(copy.headers(), request.headers());
        assert_eq!(copy.version(), request.version());
        assert_eq!(copy.timeout(), Some(&Duration::from_secs(7)));
        let untimed = Request::new(Method::GET, "https://api.example.com/x".parse().unwrap());
        assert_eq!(copy_to_resend(&untimed).unwrap().timeout(), None);
        let mut with_body = Request::new(Method::POST, "https://api.example.com/x".parse().unwrap());
        *with_body.body_mut() = Some(reqwest::Body::from("{}"));
        let copied = copy_to_resend(&with_body).unwrap();
        assert_eq!(copied.body().and_then(reqwest::Body::as_bytes), Some(&b"{}"[..]));
    }

    #[test]
    fn retry_after_never_overflows() {
        let header = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(RETRY_AFTER, HeaderValue::from_str(value).unwrap());
            retry_after(&headers)
        };
        assert_eq!(header("2"), Some(Duration::from_secs(2)));
        assert_eq!(header("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(header("1e20"), Some(LONGEST_RETRY_AFTER));
        assert_eq!(header("99999999999999999999"), Some(LONGEST_RETRY_AFTER));
        assert_eq!(header("-1"), None);
        assert_eq!(header("NaN"), None);
        assert_eq!(header("inf"), None);
        assert_eq!(header("soon"), None);
        assert_eq!(
            header("Wed, 21 Oct 2015 07:28:00 GMT"),
            Some(Duration::ZERO),
            "a date in the past"
        );
    }
}
