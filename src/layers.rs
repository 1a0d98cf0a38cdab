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
//! downloads are idempotent GETs, free for a layer to retry.
//!
//! A layer that reads the body and puts the bytes back (to sign or log
//! it) makes it copyable again, so each attempt of a submission also
//! carries a send-once mark, which the innermost service ([`Wire`]) checks
//! and takes off before the request goes onto the wire: a request whose
//! mark has gone to the wire already, or whose mark this client did not
//! give to an attempt still in flight, is refused there, unsent, with a
//! [`SendOnceRefused`]. The mark is a random token, one per attempt, known
//! only to the client that made it and good once, until the attempt ends.
//! It travels three ways, so whatever a layer does with the request one
//! of them reaches the wire with it:
//!
//! - in the request's extensions, which a layer that passes the request
//!   on (to another task too, as a buffer does) keeps;
//! - in the [`SEND_ONCE_HEADER`] header, which any copy of a request keeps
//!   (a copy is its method, address, headers and body), so a layer that
//!   copies the request without its extensions and sends each copy from a
//!   task of its own still sends it once;
//! - in the task that is sending the attempt, for a copy of a POST made on
//!   that task without either.
//!
//! The client marks every POST it sends, so a POST that reaches the wire
//! with none of the three (a copy that kept only some headers, sent from a
//! task of its own) is refused too, unsent ([`SendOnceRefused::Unmarked`]):
//! it cannot be told from a second copy.
//!
//! The header is the mark a layer can see and copy, so it cannot be made
//! up: a token the client did not give is refused, not sent, and one it
//! gave is good for one request. A layer that signs headers leaves this
//! one out (it is taken off beneath the layers).
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
//! nothing but the HTTP client can fail or hold the request; no mark is
//! given, since nothing could copy the request.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_LENGTH};
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
    /// The program's layers around the wire, how long an attempt waits
    /// for their answer, and the send-once marks the wire checks.
    Layered {
        service: HttpService,
        deadline: Duration,
        marks: Arc<Marks>,
    },
}

impl Route {
    /// The wire under `layers` (the first added outermost); `deadline`
    /// bounds each attempt's wait for an answer through them.
    pub(crate) fn new(wire: Wire, layers: &[AddLayer], deadline: Duration) -> Route {
        if layers.is_empty() {
            return Route::Direct(wire);
        }
        let marks = wire.marks.clone();
        let service = layers
            .iter()
            .rev()
            .fold(BoxCloneSyncService::new(wire), |inner, layer| layer(inner));
        Route::Layered {
            service,
            deadline,
            marks,
        }
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
            Route::Layered {
                service,
                deadline,
                marks,
            } => {
                // Good until this attempt ends, however it ends (dropped
                // too): a copy that reaches the wire later is refused.
                let open = once.then(|| marks.open());
                let mark = open.as_ref().map(Open::mark);
                match for_layers(request, mark) {
                    Ok(request) => send(service, request, *deadline, mark).await,
                    Err(error) => Err(Failed::Http(Unaddressed::new(error, None))),
                }
            }
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
/// has one) to requests bound for a trusted address, and lets each
/// attempt of a sealed submission leave once.
#[derive(Clone)]
pub(crate) struct Wire {
    client: reqwest::Client,
    key: Option<Arc<Keying>>,
    /// The send-once marks of this client's attempts in flight.
    marks: Arc<Marks>,
}

impl Wire {
    /// The service of `client`; `key` is `None` for downloads.
    pub(crate) fn new(client: reqwest::Client, key: Option<Arc<Keying>>) -> Wire {
        Wire {
            client,
            key,
            marks: Arc::default(),
        }
    }

    /// Lets `request` through when it is no sealed submission's, or the
    /// first to go to the wire with its attempt's mark, and takes the
    /// mark's header off it either way (see the module's "Why a retry
    /// layer cannot pay twice").
    fn pass_once(&self, request: &mut HttpRequest) -> Result<(), SendOnceRefused> {
        let extension = request.extensions().get::<SendOnce>().copied();
        let mark = match (take_mark(request.headers_mut()), extension) {
            (Some(Ok(headed)), Some(kept)) if headed != kept => return Err(SendOnceRefused::UnknownMark),
            (Some(Err(Unreadable)), _) => return Err(SendOnceRefused::UnknownMark),
            (Some(Ok(mark)), _) | (None, Some(mark)) => mark,
            // A copy with neither, made on the task sending the attempt:
            // that attempt's, when it is this client's.
            (None, None) if request.method() == http::Method::POST => {
                return match ATTEMPT.try_with(|mark| *mark) {
                    Ok(mark) => match self.marks.take(mark) {
                        Err(SendOnceRefused::SentAlready) => Err(SendOnceRefused::SentAlready),
                        _ => Ok(()),
                    },
                    // The client marks every POST it sends: one with no mark
                    // on any of the three ways, on a task of its own, is a
                    // copy that lost them all, and may be the second.
                    Err(_) => Err(SendOnceRefused::Unmarked),
                };
            }
            (None, None) => return Ok(()),
        };
        self.marks.take(mark)
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

    fn call(&mut self, mut request: HttpRequest) -> Self::Future {
        let wire = self.clone();
        Box::pin(async move {
            // A sealed submission leaves once, whatever a layer above did to
            // its body (one that read it and put the bytes back in a body of
            // its own made it clonable again for a retry layer) or to the
            // request (copied, sent from another task).
            wire.pass_once(&mut request)
                .map_err(|refused| Box::new(refused) as BoxError)?;
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

/// The header that carries a sealed submission's send-once mark through
/// the layers (see [`crate::ClientBuilder::layer`]): a random token that
/// the client gave the attempt, good for one request while the attempt is
/// in flight. genapi's innermost service checks it and takes it off, so it
/// never reaches the network; a request whose token is made up, another
/// client's, or used already is refused there with a [`SendOnceRefused`].
/// A layer that signs headers leaves it out.
pub const SEND_ONCE_HEADER: &str = "x-genapi-send-once";

/// [`SEND_ONCE_HEADER`], as a header name.
const SEND_ONCE: HeaderName = HeaderName::from_static(SEND_ONCE_HEADER);

/// Why genapi's innermost service refused to send a sealed submission
/// that came down through the layers: nothing was sent, so the task cannot
/// be paid twice. A layer that sends a submission again meets it as the
/// inner service's error (downcast its [`tower::BoxError`]); when it comes
/// up to genapi, the call ends in an [`crate::Error::Layer`] whose source
/// it is.
#[derive(Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SendOnceRefused {
    /// This attempt of the submission has gone to the wire already: a layer
    /// sent it (or a copy of it) again.
    #[error("a layer sent the submission again: this copy was not sent, so the task cannot be paid twice")]
    SentAlready,
    /// The request carried a send-once mark that this client gave to no
    /// attempt still in flight: made up, copied from another client's
    /// request, given more than once, or its attempt has ended.
    #[error(
        "the submission carried a send-once mark (header x-genapi-send-once) that this client gave to no attempt \
         in flight (made up, another client's, repeated, or its attempt has ended): this request was not sent, so \
         the task cannot be paid twice"
    )]
    UnknownMark,
    /// A POST reached the wire with no send-once mark at all, from a task
    /// of its own: a layer made a copy without the mark's header and the
    /// request's extensions, which cannot be told from a second copy.
    #[error(
        "a layer sent a POST without its send-once mark (header x-genapi-send-once and the request's extensions both \
         dropped) from a task of its own: it was not sent, so the task cannot be paid twice; a layer that copies a \
         request keeps that header"
    )]
    Unmarked,
}

genapi_text::debug_as_report!(SendOnceRefused);

/// A sealed submission's attempt, by the token of its send-once mark.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
struct SendOnce(u128);

impl SendOnce {
    /// A token no one can guess: 128 random bits.
    fn fresh() -> SendOnce {
        use ring::rand::SecureRandom;
        let mut bytes = [0u8; 16];
        match ring::rand::SystemRandom::new().fill(&mut bytes) {
            Ok(()) => SendOnce(u128::from_le_bytes(bytes)),
            // Unguessable still matters less than good once: a token the
            // client did not give, or gave and saw used, is refused anyway.
            Err(_) => SendOnce(fastrand::u128(..)),
        }
    }

    /// The mark as its header carries it: 32 lowercase hexadecimal digits.
    fn header(self) -> HeaderValue {
        let mut value = HeaderValue::from_str(&format!("{:032x}", self.0)).unwrap_or(HeaderValue::from_static("0"));
        value.set_sensitive(true);
        value
    }
}

/// A mark's header that names no token.
struct Unreadable;

/// Takes every [`SEND_ONCE_HEADER`] off `headers`: the token they carry,
/// `None` when there was none, or [`Unreadable`] when there were several
/// or one that is no token.
fn take_mark(headers: &mut HeaderMap) -> Option<Result<SendOnce, Unreadable>> {
    let read = {
        let mut values = headers.get_all(SEND_ONCE).iter();
        let first = values.next()?;
        let token = first
            .to_str()
            .ok()
            .filter(|text| text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit()))
            .and_then(|text| u128::from_str_radix(text, 16).ok());
        match (token, values.next()) {
            (Some(token), None) => Ok(SendOnce(token)),
            _ => Err(Unreadable),
        }
    };
    headers.remove(SEND_ONCE);
    Some(read)
}

/// The send-once marks one client gave its attempts still in flight, and
/// whether each has gone to the wire.
#[derive(Default)]
pub(crate) struct Marks(Mutex<HashMap<SendOnce, bool>>);

impl Marks {
    /// The table, even after a panic elsewhere held it (a mark is one
    /// boolean: no state half made).
    fn table(&self) -> std::sync::MutexGuard<'_, HashMap<SendOnce, bool>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A fresh mark for an attempt, good until the [`Open`] is dropped.
    fn open(self: &Arc<Self>) -> Open {
        let mut table = self.table();
        let mut mark = SendOnce::fresh();
        while table.contains_key(&mark) {
            mark = SendOnce::fresh();
        }
        table.insert(mark, false);
        Open {
            marks: self.clone(),
            mark,
        }
    }

    /// Lets `mark` go to the wire once.
    fn take(&self, mark: SendOnce) -> Result<(), SendOnceRefused> {
        match self.table().get_mut(&mark) {
            Some(sent) if !*sent => {
                *sent = true;
                Ok(())
            }
            Some(_) => Err(SendOnceRefused::SentAlready),
            None => Err(SendOnceRefused::UnknownMark),
        }
    }
}

/// An attempt's mark, in the table while its attempt is in flight.
struct Open {
    marks: Arc<Marks>,
    mark: SendOnce,
}

impl Open {
    fn mark(&self) -> SendOnce {
        self.mark
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.marks.table().remove(&self.mark);
    }
}

tokio::task_local! {
    /// The sealed submission the task is sending, for copies of its request
    /// made on this task without its mark's header or extension.
    static ATTEMPT: SendOnce;
}

/// Sends one attempt through `service`, waiting at most `deadline` for its
/// answer's head; `mark` is a sealed submission's.
async fn send(
    service: &HttpService,
    request: HttpRequest,
    deadline: Duration,
    mark: Option<SendOnce>,
) -> Result<reqwest::Response, Failed> {
    let sending = service.clone().oneshot(request);
    let sent = match mark {
        Some(mark) => tokio::time::timeout(deadline, ATTEMPT.scope(mark, sending)).await,
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

/// A request for the layers; a sealed submission's carries its attempt's
/// `mark`, in its extensions and its headers, which lets it leave once.
fn for_layers(request: reqwest::Request, mark: Option<SendOnce>) -> reqwest::Result<HttpRequest> {
    let mut request = HttpRequest::try_from(request)?;
    if let Some(mark) = mark {
        request.headers_mut().insert(SEND_ONCE, mark.header());
        request.extensions_mut().insert(mark);
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

    /// A client of the transport's own TLS setup: `reqwest::Client::new()`
    /// needs a process-wide provider, which genapi never installs.
    fn wire_client() -> reqwest::Client {
        crate::http_client_builder().unwrap().build().unwrap()
    }

    #[test]
    fn a_sealed_submission_cannot_be_cloned_or_read_back() {
        let mut request = reqwest::Request::new(reqwest::Method::POST, "https://api.example.com/v1/x".parse().unwrap());
        seal(&mut request, Bytes::from_static(b"{\"prompt\":\"a fox\"}"));
        assert_eq!(request.headers()[CONTENT_LENGTH], "18");
        assert!(
            request.try_clone().is_none(),
            "sent straight to the wire, it cannot be copied either"
        );
        let mark = SendOnce::fresh();
        let sealed = for_layers(request, Some(mark)).unwrap();
        assert!(
            sealed.extensions().get::<SendOnce>() == Some(&mark),
            "marked to leave once"
        );
        assert_eq!(
            sealed.headers()[SEND_ONCE_HEADER].to_str().unwrap(),
            format!("{:032x}", mark.0),
            "and the mark travels in a header too"
        );
        assert!(sealed.body().as_bytes().is_none(), "the bytes are out of reach");
        let back = reqwest::Request::try_from(sealed).unwrap();
        assert!(back.try_clone().is_none(), "no layer can copy it to send again");
    }

    /// A request as a layer would copy it: method, address and headers,
    /// without the extensions.
    fn copied(request: &HttpRequest) -> HttpRequest {
        let mut copy = http::Request::post(request.uri().clone())
            .body(reqwest::Body::from("{}"))
            .unwrap();
        *copy.headers_mut() = request.headers().clone();
        copy
    }

    fn marked(marks: &Arc<Marks>) -> (Open, HttpRequest) {
        let open = marks.open();
        let request = reqwest::Request::new(reqwest::Method::POST, "https://api.example.com/v1/x".parse().unwrap());
        let request = for_layers(request, Some(open.mark())).unwrap();
        (open, request)
    }

    #[test]
    fn a_mark_lets_one_copy_through_and_is_taken_off_it() {
        let wire = Wire::new(wire_client(), None);
        let (_open, request) = marked(&wire.marks);
        let (mut first, mut second) = (copied(&request), copied(&request));
        assert_eq!(wire.pass_once(&mut first), Ok(()));
        assert!(!first.headers().contains_key(SEND_ONCE_HEADER), "never sent on");
        assert_eq!(wire.pass_once(&mut second), Err(SendOnceRefused::SentAlready));
        let mut original = request;
        assert_eq!(
            wire.pass_once(&mut original),
            Err(SendOnceRefused::SentAlready),
            "the original, with its extension, is the same attempt"
        );
    }

    #[test]
    fn a_mark_not_given_or_no_longer_in_flight_is_refused() {
        let wire = Wire::new(wire_client(), None);
        let other = Wire::new(wire_client(), None);
        let (open, request) = marked(&wire.marks);
        let mut made_up = copied(&request);
        made_up
            .headers_mut()
            .insert(SEND_ONCE, SendOnce(open.mark().0 ^ 1).header());
        assert_eq!(wire.pass_once(&mut made_up), Err(SendOnceRefused::UnknownMark));
        let mut twice = copied(&request);
        twice.headers_mut().append(SEND_ONCE, open.mark().header());
        assert_eq!(wire.pass_once(&mut twice), Err(SendOnceRefused::UnknownMark));
        let mut garbled = copied(&request);
        garbled
            .headers_mut()
            .insert(SEND_ONCE, HeaderValue::from_static("let me through"));
        assert_eq!(wire.pass_once(&mut garbled), Err(SendOnceRefused::UnknownMark));
        let mut elsewhere = copied(&request);
        assert_eq!(
            other.pass_once(&mut elsewhere),
            Err(SendOnceRefused::UnknownMark),
            "another client's"
        );
        // Those refusals sent nothing: the mark is still good, once.
        let mut good = copied(&request);
        assert_eq!(wire.pass_once(&mut good), Ok(()));
        drop(open);
        let mut late = copied(&request);
        assert_eq!(
            wire.pass_once(&mut late),
            Err(SendOnceRefused::UnknownMark),
            "its attempt has ended"
        );
        let mut poll = http::Request::get("https://api.example.com/v1/get_result?id=1")
            .body(reqwest::Body::from(""))
            .unwrap();
        assert_eq!(wire.pass_once(&mut poll), Ok(()), "an unmarked request goes as it is");
    }
}
