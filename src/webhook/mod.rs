//! Verifying webhook notifications, recognising replays, and waiting for a
//! task by its notification.
//!
//! The contract leaves the scheme open. Two are accepted, and
//! [`Verifier::verify`] says which one vouched for a notification:
//!
//! - **Standard Webhooks**: `webhook-id`, `webhook-timestamp` and
//!   `webhook-signature` (`v1,` + base64 HMAC-SHA256 of `id.timestamp.body`,
//!   up to [`MAX_SIGNATURES`] space-separated signatures). The key is the
//!   base64 part of a `whsec_` secret, or the raw secret. Timestamps outside
//!   the tolerance window (default 300 s) are refused, which stops replays.
//! - **Shared-secret echo**: the live service sends the request's
//!   `webhook_secret` back in `X-Webhook-Secret`. It carries no timestamp, so
//!   replays must be stopped by the receiver: see [`DuplicateGuard`]. Anyone who
//!   saw one delivery knows the secret, so a verifier built with a `whsec_`
//!   secret refuses echo-only deliveries unless told otherwise
//!   ([`Verifier::require_signature`]).
//!
//! When a signature header is present it must verify: the client never falls
//! back to the weaker echo check. Every comparison is constant-time, the HMAC
//! is computed at most once per notification, and header sizes are bounded
//! ([`MAX_HEADER_BYTES`]), so a flood of forged notifications costs the
//! receiver little.
//!
//! The module is laid out by concern:
//!
//! | file | holds |
//! |---|---|
//! | `verify` | [`Verifier`], [`sign`], [`Rejection`], [`SecretError`], the header names |
//! | `event` | [`Event`] and [`Scheme`], what a verified notification says |
//! | `replay` | [`DuplicateGuard`] |
//! | `inbox` | [`Inbox`], waiting for a task by its notification |
//! | `bounded` | the map bounded by capacity and age that the last two share |
//!
//! A framework-free receiver (the secret is checked once, at construction):
//!
//! ```
//! use genapi::webhook::Verifier;
//! fn handle(verifier: &Verifier, headers: &http::HeaderMap, body: &[u8]) -> http::StatusCode {
//!     match verifier.verify(headers, body) {
//!         Ok(event) if event.status.is_success() => { /* use event.sample() */ http::StatusCode::OK }
//!         Ok(_failed) => http::StatusCode::OK,
//!         Err(_rejected) => http::StatusCode::UNAUTHORIZED,
//!     }
//! }
//! let verifier = Verifier::new("whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD")?;
//! assert_eq!(handle(&verifier, &http::HeaderMap::new(), b"{}"), http::StatusCode::UNAUTHORIZED);
//! # Ok::<(), genapi::webhook::SecretError>(())
//! ```
//!
//! With axum (the whole program is `examples/webhook_receiver.rs`):
//!
//! ```ignore
//! async fn receive(verifier: Arc<Verifier>, inbox: Arc<Inbox>, headers: HeaderMap, body: Bytes) -> StatusCode {
//!     match verifier.verify(&headers, &body) {
//!         Ok(event) => { inbox.deliver(event); StatusCode::NO_CONTENT }
//!         Err(_) => StatusCode::UNAUTHORIZED,
//!     }
//! }
//! ```

mod bounded;
mod duplicates;
mod event;
mod inbox;
mod verify;

pub use duplicates::DuplicateGuard;
pub use event::{Event, Scheme};
pub use inbox::Inbox;
pub use verify::{
    sign, Clock, Rejection, SecretError, Verifier, ID_HEADER, MAX_HEADER_BYTES, MAX_SIGNATURES, MIN_SECRET_BYTES,
    SECRET_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
