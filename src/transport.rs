//! Every HTTP exchange of the crate goes through one function, `Transport::execute`: the
//! generated client (through progenitor's `exec` hook), polls and downloads.
//! That one place decides who gets the key, what is retried, and what is
//! logged.
//!
//! # Retry policy
//!
//! - **Submissions (POST)** are retried only when the service surely did not
//!   accept them: a connection that could not be opened, or `429 Too Many
//!   Requests` (the task was refused), after `Retry-After` when given. Never
//!   after a 5xx, a reset or a read timeout: the task may exist, and sending it
//!   again would create and charge a second one.
//! - **Polls and downloads (GET)** are safe to repeat: network errors,
//!   timeouts, 408, 429, 500, 502, 503 and 504 are retried with jittered
//!   exponential backoff, honouring `Retry-After`.
//!
//! # Where the key goes
//!
//! The key is added per request, only to trusted origins (the base and regional
//! URLs and those added with `ClientBuilder::trust_origin`), never to a
//! download. API requests do not follow redirects, so the key cannot be
//! carried to another host.

use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{HeaderValue, RETRY_AFTER};
use reqwest::{Method, Request, Response, StatusCode, Url};
use tracing::Instrument;

use crate::ApiKey;

/// How failed exchanges are retried (see the module documentation for which).
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, the first included; 1 disables retries.
    pub max_attempts: u32,
    /// Delay before the first retry; doubles each time, with jitter.
    pub initial_backoff: Duration,
    /// Upper bound of one backoff.
    pub max_backoff: Duration,
    /// Upper bound of a `Retry-After` the client will honour by sleeping.
    pub max_retry_after: Duration,
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

    /// Full-jitter exponential backoff for retry number `retry` (1-based).
    pub(crate) fn backoff(&self, retry: u32) -> Duration {
        let exp = self
            .initial_backoff
            .saturating_mul(1u32 << retry.saturating_sub(1).min(16));
        let cap = exp.min(self.max_backoff);
        let lower = cap / 2;
        lower + cap.mul_f64(fastrand::f64() * 0.5)
    }
}

/// What an exchange is for; it decides the key and the retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Purpose {
    /// A POST that may create a task.
    Submit,
    /// A GET of a task's state, or any other idempotent API call.
    Poll,
    /// A GET of a signed delivery address: no key.
    Download,
}

impl Purpose {
    fn of(method: &Method) -> Purpose {
        if method == Method::POST {
            Purpose::Submit
        } else {
            Purpose::Poll
        }
    }

    fn retries_status(self, status: StatusCode) -> bool {
        match self {
            Purpose::Submit => status == StatusCode::TOO_MANY_REQUESTS,
            Purpose::Poll | Purpose::Download => matches!(status.as_u16(), 408 | 429 | 500 | 502 | 503 | 504),
        }
    }

    fn retries_error(self, error: &reqwest::Error) -> bool {
        match self {
            Purpose::Submit => error.is_connect(),
            Purpose::Poll | Purpose::Download => {
                error.is_connect() || error.is_timeout() || error.is_request() || error.is_body()
            }
        }
    }
}

/// Installs ring as the process's rustls provider unless one is installed.
///
/// This crate builds reqwest without its default provider (aws-lc, a large C
/// build). [`crate::ClientBuilder::build`] calls this; call it yourself before
/// building other reqwest clients in a program where genapi is the only user
/// of reqwest, or they will refuse to start.
pub fn ensure_tls_provider() {
    if rustls::crypto::CryptoProvider::get_default().is_none() {
        // Losing a race to another thread's install is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    }
}

/// `scheme://host:port` of an address.
pub(crate) fn origin(url: &Url) -> String {
    format!(
        "{}://{}:{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port_or_known_default().unwrap_or(0)
    )
}

/// An origin as compared on every request: scheme, host, port.
type Origin = (String, String, u16);

fn origin_parts(url: &Url) -> Option<(&str, &str, u16)> {
    Some((url.scheme(), url.host_str()?, url.port_or_known_default()?))
}

/// The shared HTTP machinery behind a [`crate::Client`].
pub struct Transport {
    api: reqwest::Client,
    downloads: reqwest::Client,
    key: ApiKey,
    /// The key as a sensitive header value, built once.
    key_header: HeaderValue,
    trusted: Vec<Origin>,
    retry: RetryPolicy,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("key", &self.key)
            .field("trusted", &self.trusted)
            .field("retry", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// `key` must be a valid header value (checked by the builder); `trusted`
    /// are the origins it may be sent to.
    pub(crate) fn new(
        api: reqwest::Client,
        downloads: reqwest::Client,
        key: ApiKey,
        trusted: &[Url],
        retry: RetryPolicy,
    ) -> Self {
        let mut key_header = HeaderValue::from_str(key.expose()).unwrap_or_else(|_| HeaderValue::from_static(""));
        key_header.set_sensitive(true);
        let trusted = trusted
            .iter()
            .filter_map(origin_parts)
            .map(|(scheme, host, port)| (scheme.to_string(), host.to_string(), port))
            .collect();
        Transport {
            api,
            downloads,
            key,
            key_header,
            trusted,
            retry,
        }
    }

    /// The client for API calls (no redirects).
    pub(crate) fn api_client(&self) -> &reqwest::Client {
        &self.api
    }

    /// Whether the key may be sent to this address.
    pub(crate) fn is_trusted(&self, url: &Url) -> bool {
        origin_parts(url).is_some_and(|(scheme, host, port)| {
            self.trusted
                .iter()
                .any(|(s, h, p)| s == scheme && h == host && *p == port)
        })
    }

    /// Sends a request under the retry policy of its purpose.
    pub(crate) async fn execute(
        &self,
        request: Request,
        purpose: Purpose,
        operation: &str,
    ) -> reqwest::Result<Response> {
        let url = request.url();
        let span = tracing::debug_span!(
            "genapi.request",
            operation,
            method = %request.method(),
            origin = %origin(url),
            path = url.path(),
            status = tracing::field::Empty,
            attempts = tracing::field::Empty,
        );
        self.execute_with_retries(request, purpose).instrument(span).await
    }

    async fn execute_with_retries(&self, mut request: Request, purpose: Purpose) -> reqwest::Result<Response> {
        let client = if purpose == Purpose::Download {
            &self.downloads
        } else {
            &self.api
        };
        if purpose != Purpose::Download && self.is_trusted(request.url()) {
            request.headers_mut().insert("x-key", self.key_header.clone());
        }
        let mut attempt = 1;
        loop {
            // A body that cannot be cloned (a stream) is sent once.
            let retry_copy = if attempt < self.retry.max_attempts {
                request.try_clone()
            } else {
                None
            };
            let outcome = client.execute(request).await;
            let span = tracing::Span::current();
            span.record("attempts", attempt);
            let Some(next) = retry_copy else { return outcome };
            let wait = match &outcome {
                Ok(response) if purpose.retries_status(response.status()) => retry_after(response)
                    .map(|d| d.min(self.retry.max_retry_after))
                    .unwrap_or_else(|| self.retry.backoff(attempt)),
                Err(error) if purpose.retries_error(error) => self.retry.backoff(attempt),
                _ => {
                    if let Ok(response) = &outcome {
                        span.record("status", response.status().as_u16());
                    }
                    return outcome;
                }
            };
            tracing::debug!(attempt, wait_ms = wait.as_millis() as u64, "retrying");
            tokio::time::sleep(wait).await;
            request = next;
            attempt += 1;
        }
    }
}

/// `Retry-After` in seconds or as an HTTP date.
pub(crate) fn retry_after(response: &Response) -> Option<Duration> {
    let value = response.headers().get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return (seconds.is_finite() && seconds >= 0.0).then(|| Duration::from_secs_f64(seconds));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

impl progenitor_client::ClientHooks<Arc<Transport>> for crate::api::Client {
    async fn exec(&self, request: Request, info: &progenitor_client::OperationInfo) -> reqwest::Result<Response> {
        use progenitor_client::ClientInfo;
        let purpose = Purpose::of(request.method());
        self.inner().execute(request, purpose, info.operation_id).await
    }
}
