//! The server's bytes, watched before the driver reads them.
//!
//! tokio-postgres answers what the server asks for as soon as it reads it,
//! and reads a message whole however long the server says it is. So the
//! bytes are read here first, one layer below it:
//!
//! - the one-byte answer to the request for TLS: `S` (TLS follows, watched
//!   again once decrypted) or `N` (none: refused when the URL's `sslmode`
//!   requires TLS);
//! - then each backend message's header: a type byte and a big-endian
//!   length that counts itself. A length past [`MAX_MESSAGE`] fails the read
//!   before anything is buffered for it; an authentication request is judged
//!   by [`Security::judge_auth`] before the driver sees it, so a refused one
//!   is never answered; until the session is ready, the server may send at
//!   most [`MAX_BEFORE_READY`] bytes.
//!
//! A refusal fails the read with an error that says what happened, and is
//! kept in the connection's [`Watch`] so the caller can tell it from a
//! network failure.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::tls::{Refusal, Security};

/// The longest backend message accepted, body and length field together.
/// The driver buffers a message whole before handing it on, so the length a
/// server claims is memory this process would give it; the ledger's own rows
/// are a few kilobytes, and a server or impostor claiming gigabytes is
/// refused at the header.
pub(super) const MAX_MESSAGE: u32 = 64 << 20;

/// What the server may send before its first ReadyForQuery: parameters,
/// notices and authentication exchanges take a few kilobytes, and without a
/// bound a server that streams them for ever would fill memory until the
/// connect timeout.
pub(super) const MAX_BEFORE_READY: usize = 1 << 20;

/// One connection attempt's rules and, once refused, why.
#[derive(Debug)]
pub(super) struct Watch {
    security: Arc<Security>,
    /// `sslmode` requires TLS here (never on a Unix socket).
    tls_required: bool,
    refusal: Mutex<Option<Refusal>>,
}

impl Watch {
    pub(super) fn new(security: Arc<Security>, tls_required: bool) -> Arc<Watch> {
        Arc::new(Watch {
            security,
            tls_required,
            refusal: Mutex::new(None),
        })
    }

    /// Keeps the first refusal.
    pub(super) fn refuse(&self, refusal: Refusal) {
        if let Ok(mut kept) = self.refusal.lock() {
            kept.get_or_insert(refusal);
        }
    }

    /// The refusal, if the connection was refused.
    pub(super) fn refusal(&self) -> Option<Refusal> {
        self.refusal.lock().ok().and_then(|kept| kept.clone())
    }
}

/// Where the first byte from the server stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Start {
    /// The answer to the request for TLS.
    TlsAnswer,
    /// Backend messages in clear (`sslmode=disable`, a Unix socket).
    Plain,
    /// TLS at once (`sslnegotiation=direct`).
    Tls,
}

#[derive(Debug)]
enum Phase {
    TlsAnswer,
    /// TLS events, read by rustls; its output is watched in turn.
    Tls,
    Messages(Framing),
    /// A refusal failed a read; every later read fails too.
    Refused,
}

/// A stream whose incoming bytes are watched.
#[derive(Debug)]
pub(super) struct Guarded<S> {
    inner: S,
    phase: Phase,
    watch: Arc<Watch>,
}

impl<S> Guarded<S> {
    /// The socket, from its first byte.
    pub(super) fn new(inner: S, start: Start, watch: Arc<Watch>) -> Guarded<S> {
        let phase = match start {
            Start::TlsAnswer => Phase::TlsAnswer,
            Start::Plain => Phase::Messages(Framing::new(false)),
            Start::Tls => Phase::Tls,
        };
        Guarded { inner, phase, watch }
    }

    /// A TLS stream: backend messages, encrypted.
    pub(super) fn encrypted(inner: S, watch: Arc<Watch>) -> Guarded<S> {
        Guarded {
            inner,
            phase: Phase::Messages(Framing::new(true)),
            watch,
        }
    }

    fn scan(&mut self, mut data: &[u8]) -> Result<(), Refusal> {
        loop {
            match &mut self.phase {
                Phase::TlsAnswer => {
                    let Some((&answer, rest)) = data.split_first() else {
                        return Ok(());
                    };
                    match answer {
                        b'S' => self.phase = Phase::Tls,
                        b'N' if self.watch.tls_required => {
                            return Err(Refusal::Insecure {
                                reason: format!(
                                    "sslmode={} requires TLS, and the server offers none",
                                    self.watch.security.mode.name()
                                ),
                                fix: "turn ssl on at the server, or set sslmode=prefer or sslmode=disable in the \
                                      ledger URL to connect in clear"
                                    .into(),
                            })
                        }
                        b'N' => self.phase = Phase::Messages(Framing::new(false)),
                        other => {
                            return Err(Refusal::Broken(format!(
                                "the server answered the request for TLS with byte {other:#04x}, where PostgreSQL \
                                 answers S or N"
                            )))
                        }
                    }
                    data = rest;
                }
                Phase::Tls => return Ok(()),
                Phase::Messages(framing) => return framing.scan(data, &self.watch.security),
                Phase::Refused => return Err(Refusal::Broken("the connection was refused".into())),
            }
        }
    }
}

/// Where the reader stands in the backend messages.
#[derive(Debug)]
struct Framing {
    encrypted: bool,
    /// The current message's type, length and, for an authentication
    /// request, its kind.
    head: [u8; 9],
    got: usize,
    /// 5, or 9 once the header is an authentication request's.
    need: usize,
    /// Body bytes still to pass.
    skip: usize,
    /// Bytes read before the first ReadyForQuery; `None` after it.
    before_ready: Option<usize>,
    /// The server asked for a way of authentication.
    asked: bool,
}

impl Framing {
    fn new(encrypted: bool) -> Framing {
        Framing {
            encrypted,
            head: [0; 9],
            got: 0,
            need: 5,
            skip: 0,
            before_ready: Some(0),
            asked: false,
        }
    }

    fn scan(&mut self, mut data: &[u8], security: &Security) -> Result<(), Refusal> {
        while !data.is_empty() {
            let taken = if self.skip > 0 {
                let n = self.skip.min(data.len());
                self.skip -= n;
                n
            } else {
                let n = (self.need - self.got).min(data.len());
                self.head[self.got..self.got + n].copy_from_slice(&data[..n]);
                self.got += n;
                n
            };
            data = &data[taken..];
            if let Some(read) = &mut self.before_ready {
                *read += taken;
                if *read > MAX_BEFORE_READY {
                    return Err(Refusal::Broken(format!(
                        "the server sent more than {} KiB without finishing the start of the session",
                        MAX_BEFORE_READY >> 10
                    )));
                }
            }
            if self.skip == 0 && self.got == self.need {
                self.message(security)?;
            }
        }
        Ok(())
    }

    /// A header is complete.
    fn message(&mut self, security: &Security) -> Result<(), Refusal> {
        let kind = self.head[0];
        let length = u32::from_be_bytes([self.head[1], self.head[2], self.head[3], self.head[4]]);
        if self.need == 5 {
            if length < 4 {
                return Err(Refusal::Broken(format!(
                    "the server sent a message whose length is {length}, which no PostgreSQL server sends"
                )));
            }
            if length > MAX_MESSAGE {
                return Err(Refusal::Broken(format!(
                    "the server sent a message of {length} bytes, more than the {} MiB a ledger connection \
                     accepts",
                    MAX_MESSAGE >> 20
                )));
            }
            if kind == b'R' && length >= 8 && self.before_ready.is_some() {
                self.need = 9;
                return Ok(());
            }
        } else {
            let code = u32::from_be_bytes([self.head[5], self.head[6], self.head[7], self.head[8]]);
            security.judge_auth(code, self.encrypted, self.asked)?;
            self.asked |= code != 0;
        }
        if kind == b'Z' {
            self.before_ready = None;
        }
        // The header's bytes past the length field are the body's first.
        self.skip = length as usize - 4 - (self.need - 5);
        self.got = 0;
        self.need = 5;
        Ok(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Guarded<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if matches!(this.phase, Phase::Refused) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the connection was refused",
            )));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        let watched = this.scan(&buf.filled()[before..]);
        match watched {
            Ok(()) => Poll::Ready(Ok(())),
            Err(refusal) => {
                // The driver never sees the refused bytes.
                buf.set_filled(before);
                let error = refusal.to_io();
                this.watch.refuse(refusal);
                this.phase = Phase::Refused;
                Poll::Ready(Err(error))
            }
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Guarded<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn security() -> Arc<Security> {
        Arc::new(crate::tls::read_url("postgres://u@db/x").unwrap().1)
    }

    fn message(kind: u8, body: &[u8]) -> Vec<u8> {
        let mut bytes = vec![kind];
        bytes.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
        bytes.extend_from_slice(body);
        bytes
    }

    /// Fed one byte at a time and whole, the same verdict.
    fn verdict(start: Start, bytes: &[u8]) -> (Result<(), Refusal>, Result<(), Refusal>) {
        let mut whole = Guarded::new((), start, Watch::new(security(), false));
        let mut single = Guarded::new((), start, Watch::new(security(), false));
        let one_by_one = bytes
            .iter()
            .try_for_each(|byte| single.scan(std::slice::from_ref(byte)));
        (whole.scan(bytes), one_by_one)
    }

    #[test]
    fn messages_are_followed_across_reads() {
        let mut bytes = b"N".to_vec();
        bytes.extend(message(b'R', &10u32.to_be_bytes()));
        bytes.extend(message(b'R', &0u32.to_be_bytes()));
        bytes.extend(message(b'S', b"client_encoding\0UTF8\0"));
        bytes.extend(message(b'Z', b"I"));
        bytes.extend(message(b'D', &[7; 100]));
        let (whole, single) = verdict(Start::TlsAnswer, &bytes);
        assert!(whole.is_ok() && single.is_ok(), "{whole:?} {single:?}");
    }

    #[test]
    fn a_clear_text_request_in_clear_is_refused_however_it_is_split() {
        let mut bytes = message(b'S', b"a\0b\0");
        bytes.extend(message(b'R', &3u32.to_be_bytes()));
        let (whole, single) = verdict(Start::Plain, &bytes);
        assert!(matches!(whole, Err(Refusal::Insecure { .. })), "{whole:?}");
        assert!(matches!(single, Err(Refusal::Insecure { .. })), "{single:?}");
    }

    #[test]
    fn a_message_claiming_more_than_the_bound_is_refused_at_its_header() {
        let mut bytes = b"N".to_vec();
        bytes.push(b'R');
        bytes.extend_from_slice(&0x8000_0000u32.to_be_bytes());
        let (whole, single) = verdict(Start::TlsAnswer, &bytes);
        assert!(matches!(whole, Err(Refusal::Broken(_))), "{whole:?}");
        assert!(matches!(single, Err(Refusal::Broken(_))), "{single:?}");
        let mut bytes = vec![b'D'];
        bytes.extend_from_slice(&MAX_MESSAGE.to_be_bytes());
        assert!(verdict(Start::Plain, &bytes).0.is_ok(), "the bound itself is accepted");
    }

    #[test]
    fn endless_notices_before_the_session_is_ready_are_cut_off() {
        let notice = message(b'N', &[b'x'; 1000]);
        let mut guarded = Guarded::new((), Start::Plain, Watch::new(security(), false));
        let cut = (0..2_000).find_map(|_| guarded.scan(&notice).err());
        assert!(matches!(cut, Some(Refusal::Broken(_))), "{cut:?}");
        let mut ready = Guarded::new((), Start::Plain, Watch::new(security(), false));
        ready.scan(&message(b'Z', b"I")).unwrap();
        for _ in 0..2_000 {
            ready.scan(&notice).unwrap();
        }
    }

    #[test]
    fn an_answer_to_the_tls_request_other_than_s_or_n_is_refused() {
        let (whole, _) = verdict(Start::TlsAnswer, b"E");
        assert!(matches!(whole, Err(Refusal::Broken(_))), "{whole:?}");
        let mut required = Guarded::new((), Start::TlsAnswer, Watch::new(security(), true));
        assert!(matches!(required.scan(b"N"), Err(Refusal::Insecure { .. })));
        let mut tls = Guarded::new((), Start::TlsAnswer, Watch::new(security(), true));
        assert!(
            tls.scan(b"S\x16\x03\x03\xff\xff\xff").is_ok(),
            "TLS records are rustls's to read"
        );
    }
}
