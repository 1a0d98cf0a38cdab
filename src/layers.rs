//! The user's own tower layers, beneath genapi's guarantee.
//!
//! [`crate::ClientBuilder::layer`] wraps every exchange (submissions, polls
//! and downloads) in the program's own [`tower::Layer`]s: metrics, tracing,
//! rate limits, tower-http's layers, even a retry layer. They run *beneath*
//! the transport's retry loop (`transport.rs`): genapi still decides, per
//! purpose, what may be sent again, and the layers see each attempt it makes.
//!
//! # Why tower, on `http` types
//!
//! Tower's `Layer` is the vocabulary type of the ecosystem genapi stands on
//! (reqwest, hyper, axum and tower-http speak it; tower is already built as
//! reqwest's dependency), so any layer a program already has fits, with no
//! second client type. The service speaks `http::Request` and
//! `http::Response` (with reqwest's body), not reqwest's own request type,
//! so tower-http's layers, written for `http`, fit too. reqwest-middleware
//! would add its own client and trait, and its retry middleware refuses a
//! request it cannot clone with an error instead of sending it once.
//!
//! # Why a retry layer cannot pay twice
//!
//! A layer that retries must copy the request before it sends it: the sent
//! request is consumed by the service beneath. A submission's body is
//! therefore given to the layers as a [`SealedBody`]: a body of one chunk
//! that reqwest cannot clone (`reqwest::Body::as_bytes` is `None`, so
//! `reqwest::Request::try_clone` is too) and whose bytes cannot be reached
//! through the request. A retry layer can only send it once; genapi, which
//! keeps the bytes, sends a submission again itself only when the service
//! surely did not accept it (see [`crate::RetryPolicy`]). Polls and
//! downloads are idempotent GETs, free for a layer to retry. A layer that
//! takes the body stream apart and builds a new body from what it read
//! steps out of this guarantee on purpose: that is code written to resend.
//!
//! # Where the key goes
//!
//! Beneath the layers: the innermost service ([`Wire`]) adds the key as the
//! request goes onto the wire, and only when the address it finally goes to
//! is trusted, so no layer sees the key (a tracing layer cannot log it), and
//! a layer that points a request elsewhere sends it without the key.
//!
//! # Deadlines
//!
//! reqwest's own timeouts bound what happens on the wire. A layer may also
//! hold a request (a rate limit, a backoff), so genapi bounds each attempt's
//! wait for an answer by the request timeout and one second more
//! ([`LAYER_GRACE`]): reqwest's timeout, which names what timed out, speaks
//! first when no layer holds the request.
//!
//! # Without layers
//!
//! A client given no layer sends each attempt to the innermost service
//! directly ([`Route::Direct`]), as reqwest's own request: the conversions
//! to `http` types and back, the boxed service, the mark and the deadline
//! exist for layers, and cost a few microseconds an attempt with cold
//! caches. What they guard is kept by other means there: the sealed body
//! still cannot be cloned, the key is added by the same [`Wire`] code, and
//! nothing but the HTTP client can fail or hold the request.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderValue, CONTENT_LENGTH};
use tower::util::BoxCloneSyncService;
use tower::{BoxError, Layer, Service, ServiceExt};

use crate::error::Unaddressed;
use crate::trust::TrustPolicy;

/// A request as the layers see it.
pub type HttpRequest = http::Request<reqwest::Body>;

/// An answer as the layers give it back.
pub type HttpResponse = http::Response<reqwest::Body>;

/// The service every exchange is sent through, and what a layer given to
/// [`crate::ClientBuilder::layer`] wraps: the HTTP client (and the layers
/// added after this one) as one clonable tower service.
pub type HttpService = BoxCloneSyncService<HttpRequest, HttpResponse, BoxError>;

/// A layer as the builder keeps it: applied once to the API client and once
/// to the download client.
pub(crate) type AddLayer = Arc<dyn Fn(HttpService) -> HttpService + Send + Sync>;

/// How much longer than the request timeout genapi waits for the layers'
/// answer (see the module's "Deadlines").
pub(crate) const LAYER_GRACE: Duration = Duration::from_secs(1);

/// Boxes a user's layer; its answers' bodies become reqwest's body (a
/// tower-http layer wraps them in its own type) and its errors a
/// [`BoxError`].
pub(crate) fn add_layer<L, B>(layer: L) -> AddLayer
where
    L: Layer<HttpService> + Send + Sync + 'static,
    L::Service: Service<HttpRequest, Response = http::Response<B>> + Clone + Send + Sync + 'static,
    <L::Service as Service<HttpRequest>>::Error: Into<BoxError>,
    <L::Service as Service<HttpRequest>>::Future: Send + 'static,
    B: http_body::Body + Send + Sync + 'static,
    B::Data: Into<Bytes>,
    B::Error: Into<BoxError>,
{
    Arc::new(move |inner| {
        let wrapped = layer
            .layer(inner)
            .map_response(|response: http::Response<B>| response.map(reqwest::Body::wrap))
            .map_err(Into::into);
        BoxCloneSyncService::new(wrapped)
    })
}

/// Where each attempt of one client (the API's or the downloads') goes:
/// through the program's layers, or, when it added none, to the wire
/// itself (see the module's "Without layers"). Nothing stands between the
/// transport and the wire then: no layer can hold a request (reqwest's own
/// timeouts bound it) or send it again (a submission's sealed body cannot
/// be cloned, so not even reqwest's retry of protocol refusals can), and
/// every error is the wire's.
pub(crate) enum Route {
    /// No layer: the wire itself.
    Direct(Wire),
    /// The program's layers around the wire, and how long an attempt waits
    /// for their answer.
    Layered { service: HttpService, deadline: Duration },
}

impl Route {
    /// The wire under `layers` (the first added outermost); `deadline`
    /// bounds each attempt's wait for an answer through them.
    pub(crate) fn new(wire: Wire, layers: &[AddLayer], deadline: Duration) -> Route {
        if layers.is_empty() {
            return Route::Direct(wire);
        }
        let service = layers
            .iter()
            .rev()
            .fold(BoxCloneSyncService::new(wire), |inner, layer| layer(inner));
        Route::Layered { service, deadline }
    }

    /// Sends one attempt; `sealed` is a submission's body, sent sealed.
    pub(crate) async fn send(
        &self,
        mut request: reqwest::Request,
        sealed: Option<Bytes>,
    ) -> Result<reqwest::Response, Failed> {
        let once = sealed.is_some();
        if let Some(bytes) = sealed {
            seal(&mut request, bytes);
        }
        match self {
            Route::Direct(wire) => wire.send(request).await.map_err(Failed::Http),
            Route::Layered { service, deadline } => match for_layers(request, once) {
                Ok(request) => send(service, request, *deadline).await,
                Err(error) => Err(Failed::Http(Unaddressed::new(error, None))),
            },
        }
    }
}

/// The key, and where it may go.
pub(crate) struct Keying {
    /// The key as a sensitive header value.
    pub(crate) header: HeaderValue,
    pub(crate) trust: TrustPolicy,
}

/// The innermost service: a reqwest client, which adds the key (when it
/// has one) to requests bound for a trusted address.
#[derive(Clone)]
pub(crate) struct Wire {
    client: reqwest::Client,
    key: Option<Arc<Keying>>,
}

impl Wire {
    /// The service of `client`; `key` is `None` for downloads.
    pub(crate) fn new(client: reqwest::Client, key: Option<Arc<Keying>>) -> Wire {
        Wire { client, key }
    }

    /// Sends `request` as it is, with the key when it has one and the
    /// address the request finally goes to is trusted: the one place the
    /// key is added, with layers or without. An error leaves without the
    /// address (see [`crate::Error::Transport`]): no layer above, log or
    /// message gets a signed query from it.
    async fn send(&self, mut request: reqwest::Request) -> Result<reqwest::Response, Unaddressed> {
        if let Some(key) = self.key.as_ref().filter(|key| key.trust.trusts(request.url())) {
            request.headers_mut().insert(KEY_HEADER, key.header.clone());
        }
        self.client
            .execute(request)
            .await
            .map_err(|error| Unaddressed::new(error, None))
    }
}

/// The header that carries the API key.
pub(crate) const KEY_HEADER: http::HeaderName = http::HeaderName::from_static("x-key");

impl Service<HttpRequest> for Wire {
    type Response = HttpResponse;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<HttpResponse, BoxError>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: HttpRequest) -> Self::Future {
        let wire = self.clone();
        Box::pin(async move {
            // A sealed submission leaves once, whatever a layer above did to
            // its body (one that read it and put the bytes back in a body of
            // its own made it clonable again for a retry layer): the attempt
            // is known by the mark its request carries, or, for a copy made
            // without it, by the attempt this task is sending.
            let once = request.extensions().get::<SendOnce>().cloned().or_else(|| {
                (request.method() == http::Method::POST).then(|| ATTEMPT.try_with(SendOnce::clone).ok())?
            });
            if once.is_some_and(|once| once.0.swap(true, Ordering::SeqCst)) {
                return Err(Box::new(SentAlready) as BoxError);
            }
            let request = reqwest::Request::try_from(request)
                .map_err(|error| FromTheWire::boxed(Unaddressed::new(error, None)))?;
            let response = wire.send(request).await.map_err(FromTheWire::boxed)?;
            Ok(http::Response::from(response))
        })
    }
}

/// reqwest's error as the wire gave it: only an error in this wrapper tells
/// what happened to the request (a `reqwest::Error` a layer made with a
/// client of its own, say one that could not reach its metrics collector,
/// says nothing about the submission, which may have left).
#[derive(Debug)]
struct FromTheWire(Unaddressed);

impl FromTheWire {
    fn boxed(error: Unaddressed) -> BoxError {
        Box::new(FromTheWire(error))
    }
}

impl std::fmt::Display for FromTheWire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for FromTheWire {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.error.source()
    }
}

/// Marks a sealed submission's attempt: set once it has gone to the wire.
#[derive(Clone)]
struct SendOnce(Arc<AtomicBool>);

tokio::task_local! {
    /// The sealed submission the task is sending, for copies of its request
    /// made without its mark (a layer that moves the request to another
    /// task and copies it without its extensions escapes both: the
    /// documentation says so).
    static ATTEMPT: SendOnce;
}

/// A layer sent a sealed submission a second time.
#[derive(Debug)]
struct SentAlready;

impl std::fmt::Display for SentAlready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a layer tried to send the submission again; it was not sent, so the task cannot be paid twice")
    }
}

impl std::error::Error for SentAlready {}

/// Sends one attempt through `service`, waiting at most `deadline` for its
/// answer's head.
async fn send(service: &HttpService, request: HttpRequest, deadline: Duration) -> Result<reqwest::Response, Failed> {
    let once = request.extensions().get::<SendOnce>().cloned();
    let sending = service.clone().oneshot(request);
    let sent = match once {
        Some(once) => tokio::time::timeout(deadline, ATTEMPT.scope(once, sending)).await,
        None => tokio::time::timeout(deadline, sending).await,
    };
    match sent {
        Ok(Ok(response)) => Ok(reqwest::Response::from(response)),
        Ok(Err(error)) => Err(match error.downcast::<FromTheWire>() {
            Ok(error) => Failed::Http(error.0),
            Err(error) => Failed::Layer(error),
        }),
        Err(_) => Err(Failed::Layer(Box::new(NoAnswerInTime(deadline)))),
    }
}

/// Why an attempt through the layers got no answer.
#[derive(Debug)]
pub(crate) enum Failed {
    /// reqwest's own error, classified as it always is (without the
    /// address it named).
    Http(Unaddressed),
    /// A layer's own error, or no answer within the deadline: the request
    /// may have left.
    Layer(BoxError),
}

/// The layers held a request past the deadline.
#[derive(Debug)]
struct NoAnswerInTime(Duration);

impl std::fmt::Display for NoAnswerInTime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no answer came through the layers within {}s (the request timeout and a second)",
            self.0.as_secs_f64()
        )
    }
}

impl std::error::Error for NoAnswerInTime {}

/// A submission's body put in `request` sealed (see the module's "Why a
/// retry layer cannot pay twice"), with its length.
fn seal(request: &mut reqwest::Request, bytes: Bytes) {
    request
        .headers_mut()
        .insert(CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    *request.body_mut() = Some(reqwest::Body::wrap(SealedBody(Some(bytes))));
}

/// A request for the layers; a sealed submission's (`once`) carries the
/// mark that lets it leave once.
fn for_layers(request: reqwest::Request, once: bool) -> reqwest::Result<HttpRequest> {
    let mut request = HttpRequest::try_from(request)?;
    if once {
        request
            .extensions_mut()
            .insert(SendOnce(Arc::new(AtomicBool::new(false))));
    }
    Ok(request)
}

/// A body sent once: one chunk of known length, which reqwest cannot clone
/// and no one can read back out of the request.
pub(crate) struct SealedBody(Option<Bytes>);

impl http_body::Body for SealedBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        Poll::Ready(self.0.take().map(|bytes| Ok(http_body::Frame::data(bytes))))
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.0.as_ref().map_or(0, |bytes| bytes.len() as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_submission_cannot_be_cloned_or_read_back() {
        let mut request = reqwest::Request::new(reqwest::Method::POST, "https://api.example.com/v1/x".parse().unwrap());
        seal(&mut request, Bytes::from_static(b"{\"prompt\":\"a fox\"}"));
        assert_eq!(request.headers()[CONTENT_LENGTH], "18");
        assert!(
            request.try_clone().is_none(),
            "sent straight to the wire, it cannot be copied either"
        );
        let sealed = for_layers(request, true).unwrap();
        assert!(sealed.extensions().get::<SendOnce>().is_some(), "marked to leave once");
        assert!(sealed.body().as_bytes().is_none(), "the bytes are out of reach");
        let back = reqwest::Request::try_from(sealed).unwrap();
        assert!(back.try_clone().is_none(), "no layer can copy it to send again");
    }
}
