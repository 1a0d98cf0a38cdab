//! The proxy's listener: connections served within bounds, and a stop that
//! lets the exchanges under way finish.
//!
//! A caller the proxy cannot trust (one beyond loopback, or a program gone
//! wrong on this machine) must not be able to hold it:
//!
//! - **A request's head arrives within [`HEAD_WITHIN`].** A caller that
//!   sends its headers a byte at a time is cut off then, and holds no
//!   connection longer. Its body has a bound of its own.
//! - **Its answers are taken** at least once every
//!   [`ANSWER_TAKEN_WITHIN`]: a caller that stops reading is cut off, and an
//!   acceptance it never took is owed to its retry.
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

use crate::handover::Flushed;

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch, Semaphore};

/// How long a caller may take to send a request's head.
pub const HEAD_WITHIN: Duration = Duration::from_secs(30);

/// How long a caller may take none of its answers' bytes: one that stops
/// reading (or pipelines requests it never reads the answers of) is cut
/// off then, and holds no connection longer.
pub const ANSWER_TAKEN_WITHIN: Duration = Duration::from_secs(30);

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
        let app = app.clone();
        let closed = closed.clone();
        tokio::spawn(async move {
            let _permit = permit;
            connection(stream, app, closed).await;
        });
    }
    drop(listener);
    let _ = closing.send(true);
    // Every permit back: every connection's exchange finished.
    let _ = permits.acquire_many(u32::try_from(most).unwrap_or(u32::MAX)).await;
}

/// Serves one caller's connection until it ends, or until `closed` says the
/// proxy is stopping and its exchange under way is answered. Its requests
/// carry the connection's [`Handover`](crate::handover::Handover), which says when an acceptance was
/// delivered.
pub(crate) async fn connection<IO>(io: IO, app: axum::Router, mut closed: watch::Receiver<bool>)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (io, handover) = Flushed::new(io, ANSWER_TAKEN_WITHIN);
    let service = hyper_util::service::TowerToHyperService::new(app.layer(axum::Extension(handover)));
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(hyper_util::rt::TokioTimer::new())
        .header_read_timeout(HEAD_WITHIN);
    let connection = builder.serve_connection(hyper_util::rt::TokioIo::new(io), service);
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => return,
        _ = closed.wait_for(|closing| *closing) => connection.as_mut().graceful_shutdown(),
    }
    let _ = connection.await;
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

#[cfg(test)]
mod tests {
    use std::io;
    use std::pin::Pin;
    use std::sync::{Arc, Mutex};
    use std::task::{Context, Poll};

    use tokio::io::ReadBuf;

    use super::*;
    use crate::delivery::Delivered;
    use crate::identity::SubmissionId;
    use crate::memory::{Memory, Owner};
    use crate::remembered::{Answer, Claimed};

    /// A caller's socket: it sends one request, then waits; it takes
    /// `takes` bytes of the answer, and its write past them (or its flush,
    /// when `flush_fails`) fails, as a socket reset by its caller does.
    struct Socket {
        request: Option<Vec<u8>>,
        takes: usize,
        flush_fails: bool,
        taken: Arc<Mutex<Vec<u8>>>,
        /// Takes nothing more once `takes` bytes are taken, and never
        /// says so: a caller that stopped reading.
        stuck: bool,
        /// What the caller does once the answer is in its socket.
        after: After,
        /// The server's read, woken as the answer comes in.
        reader: Option<std::task::Waker>,
    }

    /// What a caller does once its answer is in its socket.
    #[derive(Clone, Copy, PartialEq)]
    enum After {
        /// Nothing: it keeps the connection, quiet.
        Waits,
        /// It resets the connection (a read timeout, a process that died,
        /// with the answer unread).
        Resets,
        /// It closes in order, having read the answer.
        Closes,
    }

    impl AsyncRead for Socket {
        fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            if let Some(request) = self.request.take() {
                buf.put_slice(&request);
                return Poll::Ready(Ok(()));
            }
            let answered = self.taken.lock().unwrap().ends_with(b"0\r\n\r\n");
            match (answered, self.after) {
                (true, After::Resets) => Poll::Ready(Err(io::ErrorKind::ConnectionReset.into())),
                (true, After::Closes) => Poll::Ready(Ok(())),
                _ => {
                    self.reader = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        }
    }

    impl AsyncWrite for Socket {
        fn poll_write(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
            let took = {
                let mut taken = self.taken.lock().unwrap();
                let room = self.takes - taken.len();
                if room == 0 && self.stuck {
                    return Poll::Pending;
                }
                if room == 0 {
                    return Poll::Ready(Err(io::ErrorKind::ConnectionReset.into()));
                }
                let took = room.min(buf.len());
                taken.extend_from_slice(&buf[..took]);
                took
            };
            // Bytes came: the caller's side may have something to say.
            if let Some(reader) = self.reader.take() {
                reader.wake();
            }
            Poll::Ready(Ok(took))
        }

        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            if self.flush_fails {
                return Poll::Ready(Err(io::ErrorKind::BrokenPipe.into()));
            }
            Poll::Ready(Ok(()))
        }

        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    const ACCEPTANCE: &str = r#"{"id":"task-1","polling_url":"http://127.0.0.1:1/v1/get_result?id=task-1"}"#;

    /// A job the service accepted, and the owner of its acceptance.
    async fn accepted() -> (Arc<Memory>, SubmissionId, crate::identity::Naming, Owner) {
        let memory = Arc::new(Memory::local(None).unwrap().handed_over_after(Duration::ZERO));
        let (id, naming) = SubmissionId::of("k", "/v1/x", b"{}", None);
        let Claimed::Send(claim) = memory.claim(&id, naming).await else {
            panic!("the first is sent")
        };
        let answer = Answer {
            status: 200,
            content_type: Some("application/json".into()),
            retry_after: None,
            body: ACCEPTANCE.into(),
        };
        memory.accepted(&claim, answer).await;
        let owner = Owner::new(memory.clone(), claim);
        (memory, id, naming, owner)
    }

    /// Serves one submission's acceptance to a socket that takes `takes`
    /// bytes; says whether the same job is then sent again (`true`: its
    /// acceptance counted as delivered) and what the socket took.
    async fn served_to(takes: usize, flush_fails: bool) -> (bool, Vec<u8>) {
        served_to_a(takes, flush_fails, false, After::Waits).await.0
    }

    /// [`served_to`], a `stuck` socket among them, its caller doing
    /// `after` once the answer is in; says too whether the connection
    /// ended on its own.
    async fn served_to_a(takes: usize, flush_fails: bool, stuck: bool, after: After) -> ((bool, Vec<u8>), bool) {
        let (memory, id, naming, owner) = accepted().await;
        let owner = Arc::new(Mutex::new(Some(owner)));
        let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
            let handover = request.extensions().get().cloned().unwrap_or_default();
            let owner = owner.lock().unwrap().take().unwrap();
            let body = Delivered::new(bytes::Bytes::from_static(ACCEPTANCE.as_bytes()), owner, handover);
            std::future::ready(axum::response::Response::new(axum::body::Body::new(body)))
        });
        let taken = Arc::new(Mutex::new(Vec::new()));
        let socket = Socket {
            request: Some(b"POST /v1/x HTTP/1.1\r\nhost: proxy\r\ncontent-length: 2\r\n\r\n{}".to_vec()),
            takes,
            flush_fails,
            taken: taken.clone(),
            stuck,
            after,
            reader: None,
        };
        let (_closing, closed) = watch::channel(false);
        // The caller keeps its connection open: served until idle (its
        // next request's head is due within HEAD_WITHIN).
        let ended = tokio::time::timeout(
            ANSWER_TAKEN_WITHIN + Duration::from_secs(1),
            connection(socket, app, closed),
        )
        .await
        .is_ok();
        memory.settled().await;
        let sent_again = matches!(memory.claim(&id, naming).await, Claimed::Send(_));
        let taken = taken.lock().unwrap().clone();
        ((sent_again, taken), ended)
    }

    #[tokio::test(start_paused = true)]
    async fn an_acceptance_the_connection_took_to_its_end_is_delivered() {
        let (sent_again, taken) = served_to(usize::MAX, false).await;
        assert!(
            String::from_utf8_lossy(&taken).contains("task-1"),
            "the whole answer went out"
        );
        assert!(sent_again, "delivered: the same job again is a new variation");
    }

    /// The server took the last bytes into its buffer; the socket failed
    /// as they were written (the caller reset it): owed to its retry.
    #[tokio::test(start_paused = true)]
    async fn an_acceptance_whose_last_byte_the_socket_refused_stays_owed() {
        let (_, whole) = served_to(usize::MAX, false).await;
        let (sent_again, taken) = served_to(whole.len() - 1, false).await;
        assert_eq!(taken.len(), whole.len() - 1);
        assert!(!sent_again, "owed: the retry gets the first acceptance");
    }

    /// A caller that stopped reading (its socket takes nothing, and never
    /// fails) is cut off once the bound passes: its place is free, and its
    /// acceptance owed to its retry.
    #[tokio::test(start_paused = true)]
    async fn a_caller_that_takes_nothing_is_cut_off_and_its_acceptance_stays_owed() {
        let ((sent_again, taken), ended) = served_to_a(16, false, true, After::Waits).await;
        assert_eq!(taken.len(), 16);
        assert!(ended, "the connection ended on its own");
        assert!(!sent_again, "owed: the retry gets the first acceptance");
    }

    /// An answer in the caller's socket that the caller never read (its
    /// read timed out, its process died): closing such a socket resets the
    /// connection, and the answer stays owed to the retry. Read, then
    /// closed in order: delivered.
    #[tokio::test(start_paused = true)]
    async fn an_acceptance_the_caller_reset_unread_stays_owed_and_one_read_is_delivered() {
        let ((sent_again, taken), _) = served_to_a(usize::MAX, false, false, After::Resets).await;
        assert!(
            String::from_utf8_lossy(&taken).contains("task-1"),
            "the whole answer went out"
        );
        assert!(!sent_again, "reset unread: owed, the retry gets the first acceptance");
        let ((sent_again, _), ended) = served_to_a(usize::MAX, false, false, After::Closes).await;
        assert!(ended);
        assert!(
            sent_again,
            "read and closed: delivered, the same job again is a new variation"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn an_acceptance_whose_flush_failed_stays_owed() {
        let (sent_again, _) = served_to(usize::MAX, true).await;
        assert!(!sent_again, "owed: the retry gets the first acceptance");
    }

    /// A socket answers a flush at once, even after a write failed: that
    /// flush proves nothing was taken.
    #[tokio::test]
    async fn a_flush_after_a_failed_write_delivers_nothing() {
        use tokio::io::AsyncWriteExt;
        let (memory, id, naming, owner) = accepted().await;
        let socket = Socket {
            request: None,
            takes: 0,
            flush_fails: false,
            taken: Arc::default(),
            stuck: false,
            after: After::Waits,
            reader: None,
        };
        let (mut socket, handover) = Flushed::new(socket, ANSWER_TAKEN_WITHIN);
        handover.after_next_flush(owner);
        assert!(socket.write(b"0\r\n\r\n").await.is_err());
        socket.flush().await.unwrap();
        memory.settled().await;
        assert!(!matches!(memory.claim(&id, naming).await, Claimed::Send(_)), "owed");
    }
}
