//! The proxy's listener: connections served within bounds, and a stop that
//! lets the exchanges under way finish.
//!
//! A caller the proxy cannot trust (one beyond loopback, or a program gone
//! wrong on this machine) must not be able to hold it:
//!
//! - **A request's head arrives within [`HEAD_WITHIN`].** A caller that
//!   sends its headers a byte at a time is cut off then, and holds no
//!   connection longer. Its body has a bound of its own.
//! - **At most so many connections at once** ([`MOST_CONNECTIONS`] unless
//!   the builder says otherwise). One past it is answered at once with a 503
//!   (`x-genapi-proxy: busy`, `Retry-After: 1`) and closed: nothing of it
//!   was sent, and an SDK's retry is safe. Each
//!   connection may hold one to the service too, so the bound keeps the
//!   proxy's file descriptors bounded.
//! - **No bound on a connection's whole life**: a submission's answer may
//!   take minutes, and is kept for its caller.

use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch, Semaphore};

/// How long a caller may take to send a request's head.
pub const HEAD_WITHIN: Duration = Duration::from_secs(30);

/// How many connections a proxy serves at once, unless told otherwise
/// ([`crate::ProxyBuilder::most_connections`]).
pub const MOST_CONNECTIONS: usize = 256;

/// How long a connection past the bound may take to be told so.
const BUSY_FOR: Duration = Duration::from_secs(5);

/// Serves `app` on what `listener` accepts, at most `most` connections at
/// once, until `stop`; then waits for every connection's exchange under way.
pub(crate) async fn serve(listener: TcpListener, app: axum::Router, most: usize, stop: oneshot::Receiver<()>) {
    let permits = Arc::new(Semaphore::new(most));
    // Those told to come back are bounded too; past both, a connection is
    // closed unread.
    let busy_permits = Arc::new(Semaphore::new(most));
    let (closing, closed) = watch::channel(false);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                // Out of file descriptors, or a connection reset before it
                // was taken: the next one may do.
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            if let Ok(told) = busy_permits.clone().try_acquire_owned() {
                tokio::spawn(async move {
                    busy(stream, most).await;
                    drop(told);
                });
            }
            continue;
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let mut closed = closed.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEAD_WITHIN);
            let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::pin!(connection);
            tokio::select! {
                _ = connection.as_mut() => return,
                _ = closed.wait_for(|closing| *closing) => connection.as_mut().graceful_shutdown(),
            }
            let _ = connection.await;
        });
    }
    drop(listener);
    let _ = closing.send(true);
    // Every permit back: every connection's exchange finished.
    let _ = permits.acquire_many(u32::try_from(most).unwrap_or(u32::MAX)).await;
}

/// Answers every request of a connection past the bound with a 503, and
/// closes it: its head is read (an HTTP client takes no answer before its
/// request), nothing else.
async fn busy(stream: TcpStream, most: usize) {
    let body = format!(
        r#"{{"detail":"the proxy serves {most} connections at once and all are in use: nothing was sent; try again in a moment"}}"#
    );
    let answer = move |_: http::Request<hyper::body::Incoming>| {
        let mut response = http::Response::new(axum::body::Body::from(body.clone()));
        *response.status_mut() = http::StatusCode::SERVICE_UNAVAILABLE;
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        headers.insert(http::header::RETRY_AFTER, http::HeaderValue::from_static("1"));
        headers.insert(crate::PROXY_HEADER, http::HeaderValue::from_static("busy"));
        std::future::ready(Ok::<_, std::convert::Infallible>(response))
    };
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(BUSY_FOR)
        .keep_alive(false);
    let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(stream), hyper::service::service_fn(answer));
    let _ = tokio::time::timeout(BUSY_FOR, connection).await;
}
