//! An answer's body that says whether its caller received it to the end.
//!
//! The acceptance of a submission is owed to whoever asked: when the
//! caller went away before the last byte was handed to its connection
//! (its timeout, a closed socket), the acceptance stays owed and a retry of
//! the same job gets it instead of a second task. The body is polled by the
//! server as it writes; when the server asks for more after the last byte,
//! the answer is handed to its connection's [`Handover`] (delivered once the
//! connection took those bytes), and it is undelivered when dropped before.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};

use crate::handover::Handover;
use crate::memory::Owner;

/// A whole answer's bytes, with the owner of its delivery.
pub(crate) struct Delivered {
    bytes: Option<Bytes>,
    owner: Option<Owner>,
    handover: Handover,
    size: u64,
}

impl Delivered {
    pub(crate) fn new(bytes: Bytes, owner: Owner, handover: Handover) -> Delivered {
        Delivered {
            size: bytes.len() as u64,
            bytes: Some(bytes),
            owner: Some(owner),
            handover,
        }
    }
}

impl Body for Delivered {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(mut self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        if let Some(bytes) = self.bytes.take() {
            return Poll::Ready(Some(Ok(Frame::data(bytes))));
        }
        // Asked for more after the last byte: the server holds it.
        if let Some(owner) = self.owner.take() {
            self.handover.after_next_flush(owner);
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        // Never ended before the server asks once more: that question is
        // the sign the bytes were taken.
        false
    }

    fn size_hint(&self) -> SizeHint {
        // Not exact: a server that knows the length stops asking after the
        // last byte, and the question that marks the delivery never comes.
        // The answer goes chunked, and ends when this body says so.
        let mut hint = SizeHint::new();
        hint.set_lower(self.size);
        hint
    }
}
