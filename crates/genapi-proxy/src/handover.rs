//! An answer is delivered when its caller took it, not when the server
//! wrote it.
//!
//! The server asks an answer's body for more once the last bytes are in its
//! own buffer ([`crate::delivery`]); they have yet to be written to the
//! socket, and a write that fails there (the caller reset the connection,
//! the socket broke) leaves them undelivered. So an answer whose body ended
//! waits here, beside its connection, for the connection's next flush that
//! succeeds: the server writes out everything it holds before it flushes,
//! so every byte of the answer was then taken by the operating system.
//!
//! Taken by the operating system is not yet read by the caller: a caller
//! whose read timed out, or whose process died, leaves the answer unread in
//! its socket, and closing such a socket resets the connection. So a
//! flushed answer waits for the caller's sign: the next bytes it sends (a
//! client sends its next request once it read the answer) or its orderly
//! close deliver it; a reset, or a read or write that fails, leaves it owed
//! to the caller's retry. A connection the proxy ends itself (an idle
//! caller past [`crate::serving::HEAD_WITHIN`], a stop) delivers what was
//! flushed: its caller was reading, or hung.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use std::future::Future;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::memory::Owner;

/// The answers of one connection whose last bytes the server took and the
/// connection has yet to flush. Every request of the connection carries it
/// (an extension); a request served on no connection of the proxy's gets
/// one that never flushes, and its answers stay owed.
#[derive(Clone, Default)]
pub(crate) struct Handover {
    waiting: Arc<Mutex<Waiting>>,
}

#[derive(Default)]
struct Waiting {
    /// Answers in the server's buffer.
    owners: Vec<Owner>,
    /// Answers the operating system took, waiting for the caller's sign.
    flushed: Vec<Owner>,
    /// The connection ended: nothing more of it will be flushed.
    ended: bool,
}

impl Handover {
    /// `owner`'s answer is in the server's buffer: delivered at the
    /// connection's next flush, owed if it ends first.
    pub(crate) fn after_next_flush(&self, owner: Owner) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        if waiting.ended {
            // Dropped: owed.
            return;
        }
        waiting.owners.push(owner);
    }

    /// Everything the server held was taken by the operating system.
    fn flushed(&self) {
        let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
        let owners = std::mem::take(&mut waiting.owners);
        waiting.flushed.extend(owners);
    }

    /// The caller sent bytes or closed in order: it read what was flushed.
    fn caller_read(&self) {
        let owners = std::mem::take(&mut self.waiting.lock().unwrap_or_else(PoisonError::into_inner).flushed);
        for owner in owners {
            owner.delivered();
        }
    }

    /// The connection failed (a reset, a read or write that failed):
    /// nothing of it reached the caller for sure.
    fn ended(&self) {
        let owners = {
            let mut waiting = self.waiting.lock().unwrap_or_else(PoisonError::into_inner);
            waiting.ended = true;
            let mut owners = std::mem::take(&mut waiting.owners);
            owners.append(&mut waiting.flushed);
            owners
        };
        // Dropped outside the lock: each writes that its answer is owed.
        drop(owners);
    }

    /// The proxy ended the connection itself: what was flushed was
    /// delivered, what was not is owed.
    fn closed_here(&self) {
        self.caller_read();
        self.ended();
    }
}

/// A caller's connection, telling its [`Handover`] of each flush that
/// succeeded and of its end; a caller that takes none of its answers' bytes
/// for `taken_within` is cut off (its writes fail), so it holds no place of
/// the proxy's, and no retry waits on an answer it will never read.
pub(crate) struct Flushed<IO> {
    io: IO,
    handover: Handover,
    taken_within: Duration,
    /// Since the socket last took nothing.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<IO> Flushed<IO> {
    /// `io`, with the handover its requests carry.
    pub(crate) fn new(io: IO, taken_within: Duration) -> (Flushed<IO>, Handover) {
        let handover = Handover::default();
        (
            Flushed {
                io,
                handover: handover.clone(),
                taken_within,
                stalled: None,
            },
            handover,
        )
    }

    /// `outcome` of a write or a flush: one that waits on the caller
    /// counts toward the stall, past which it fails; any other ends it.
    fn progress<T>(&mut self, cx: &mut Context<'_>, outcome: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if outcome.is_pending() {
            let within = self.taken_within;
            let stalled = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(within)));
            if stalled.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            let outcome = Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the caller took none of its answer for too long",
            )));
            self.failed_if(&outcome);
            return outcome;
        }
        self.stalled = None;
        self.failed_if(&outcome);
        outcome
    }
}

impl<IO> Flushed<IO> {
    /// A write that failed ends what this connection can deliver: a flush
    /// after it (which a socket answers at once) proves nothing.
    fn failed_if<T>(&self, outcome: &Poll<io::Result<T>>) {
        if let Poll::Ready(Err(_)) = outcome {
            self.handover.ended();
        }
    }
}

impl<IO> Drop for Flushed<IO> {
    fn drop(&mut self) {
        self.handover.closed_here();
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Flushed<IO> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let read = Pin::new(&mut self.io).poll_read(cx, buf);
        match &read {
            // Bytes, or the caller's orderly close: it read the answers
            // before (a reset is an error).
            Poll::Ready(Ok(())) => self.handover.caller_read(),
            Poll::Ready(Err(_)) => self.handover.ended(),
            Poll::Pending => {}
        }
        read
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Flushed<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write(cx, buf);
        self.progress(cx, written)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let written = Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
        self.progress(cx, written)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let flushed = Pin::new(&mut self.io).poll_flush(cx);
        if let Poll::Ready(Ok(())) = flushed {
            self.handover.flushed();
        }
        self.progress(cx, flushed)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}
