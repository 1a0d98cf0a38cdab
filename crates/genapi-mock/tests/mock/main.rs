//! The mock service against the contract: what it answers, how it holds up
//! under abuse, and that it behaves as the live service does by default.

/// The workspace's shared test helpers.
mod common {
    pub use genapi_test_common::*;
}

mod broken_answers;
mod delays;
mod documented_notification;
mod fidelity;
mod hardening;
mod service;
mod soak;
mod webhooks;
