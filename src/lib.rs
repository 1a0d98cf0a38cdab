//! # genapi
//!
//! Rust client for the Image Generation and Editing Service.
//!
//! The types and the low-level client in [`api`] are generated at compile time
//! from `openapi.json`; the layer around them adds what every program needs:
//! configuration and auth ([`Client`]), validation before sending
//! ([`validate`]), waiting for results ([`Task::wait`]), downloads
//! ([`Output`]), typed errors ([`Error`]), safe retries, webhook
//! verification ([`webhook`]); batches that survive any interruption
//! without paying twice for a task are the `genapi-batch` crate.
//!
//! [`Client`] is cheap to clone and, like [`Task`], [`Output`] and [`Error`],
//! `Send + Sync`: share it between tasks and threads.
//!
//! **Secrets stay out of what you show or store.** The key and webhook
//! secrets print as `[redacted]` ([`ApiKey`], [`WebhookSecret`]), and every
//! answer of the service, headers and body, and every webhook notification
//! is scrubbed as it arrives of the key and of every secret the client has
//! sent: fields the document marks `x-secret`, and the passwords and tokens
//! of the addresses a request names (a `webhook_url`'s, a signed image
//! address's signature), in every spelling JSON or an address gives them.
//! Errors, task details, [`Output`]s and recordings never hold them. A task
//! submitted by another process is scrubbed of its request's secrets once
//! they are handed over with [`Client::learn_secrets`]. Secrets shorter than
//! eight bytes are not searched for (they protect little, and words that
//! short appear in the fields the client reads).
//!
//! ```no_run
//! # async fn demo() -> genapi::Result<()> {
//! use genapi::api::types::Gen2ProRequest;
//!
//! let client = genapi::Client::from_env()?;
//! let request = Gen2ProRequest::builder().prompt("a lighthouse at dusk").width(1024).height(768);
//! let output = client.run(request).await?;
//! output.save("lighthouse").await?; // saved as lighthouse.jpg
//! # Ok(()) }
//! ```
//!
//! ## In your program
//!
//! The client runs on tokio; your program chooses the runtime. The crates
//! are not on crates.io yet, so a program depends on a checkout of this
//! repository (replace `/path/to/genapi` with the folder it was cloned
//! into; a `git` dependency on the repository's address works the same
//! way):
//!
//! ```toml
//! [dependencies]
//! genapi = { path = "/path/to/genapi" }
//! tokio = { version = "1", features = ["macros", "rt-multi-thread"] }
//! ```
//!
//! Once they are published, the line is `genapi = "0.1"`. The library's
//! guide (`docs/library.md`, "Building") has the lines of `genapi-batch`
//! and of `genapi-mock`, the test double of the service, too.
//!
//! ## Without a key
//!
//! The `genapi-mock` crate is a test double of the service, on loopback
//! ports: `genapi_mock::MockService::start().await?.client()?` is a client
//! of it, for trying the library or for your own tests. `genapi mock` runs
//! it standalone for programs in any language (it prints the `export` lines
//! that point a shell's commands at it).
//!
//! ## Features
//!
//! - `schema`: JSON Schema (`schemars`) for [`TaskStatus`] and
//!   [`WebhookSecret`].
//! - `fuzzing`: `genapi::fuzzing`, entry points that run the handling of an
//!   answer on bytes given directly, for fuzzers.
//!
//! ## More
//!
//! The repository's `docs/` folder: `library.md` (the library in detail:
//! waiting, errors, retries, limits, secrets, webhooks, batches),
//! `command.md` (the `genapi` command), `batch.md`, `mock.md`,
//! `spec-corrections.md` (where the document differs from the reference)
//! and `development.md` (the crates, and how to measure).

/// Generated from `openapi.json` by `build.rs`: request and response types
/// ([`api::types`], with their builders in [`api::types::builder`]) and the
/// table of operations. The generated client that sends them is the crate's
/// own (every [`Client`] call goes through it). Never edited by hand.
pub mod api {
    // The generated client is the crate's own road to the service (see
    // `call.rs`): every operation is sent by its methods, inside the
    // transport's rules. It is not public, so there is no second road.
    #[allow(
        missing_docs,
        unused_imports,
        unreachable_pub,
        dead_code,
        clippy::all,
        clippy::too_many_lines,
        rustdoc::all
    )]
    pub(crate) mod generated {
        include!(concat!(env!("OUT_DIR"), "/codegen.rs"));
    }

    /// Request and response types of the document.
    pub mod types {
        pub use super::generated::types::*;

        /// Builders of the request and response types
        /// (`Gen2ProRequest::builder()` returns [`builder::Gen2ProRequest`]).
        pub mod builder {
            pub use super::super::generated::types::builder::*;

            crate::renamed::aliases!();
        }

        crate::renamed::aliases!();
    }

    use crate::submit::OperationSpec;
    #[allow(clippy::all, clippy::too_many_lines)]
    pub(crate) mod table {
        use super::types;
        use crate::submit::OperationSpec;
        include!(concat!(env!("OUT_DIR"), "/operations.rs"));
    }
    /// Every operation of `openapi.json`, in the order the document lists
    /// them: its paths in the order of `paths`, and each path's methods in
    /// the order of its path item: the same list, in the same order, as the
    /// document's [`crate::validate::Catalog::operations`], which it is
    /// built from.
    pub const OPERATIONS: &[OperationSpec] = table::OPERATIONS;
}

mod renamed;

mod call;
mod client;
mod config;
mod error;
mod expiry;
mod failure;
mod field;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod input;
mod layer_error;
mod layers;
mod limit;
mod output;
mod poll;
mod poll_request;
pub mod profiles;
mod received;
mod record;
mod response;
mod scrub;
mod secret;
mod session;
mod status;
mod submit;
mod task;
mod telemetry;
mod transport;
mod trust;
pub mod validate;
mod wait;
pub mod webhook;

pub use client::Unsent;
pub use client::{check_request_type, Client};
pub use config::ClientBuilder;
pub use error::{Checked, Error, Moderation, Result, TaskRef};
pub use failure::FailureClass;
pub use field::{FieldValue, Unparsed};
pub use input::{ImageFormat, ImageInput};
pub use layer_error::LayerError;
pub use layers::{HttpRequest, HttpResponse, HttpService, SendOnceRefused, SEND_ONCE_HEADER};
pub use limit::SeatPool;
pub use output::Output;
pub use record::{RecordOptions, RecordedExchange, RelayRecording};
pub use secret::{ApiKey, WebhookSecret};
pub use status::TaskStatus;
pub use submit::{IntoRequest, OperationSpec, Submit};
pub use task::Task;
pub use transport::RetryPolicy;

/// A reqwest builder with the TLS this crate was built with (rustls with
/// ring and the platform's roots, or `native-tls`), set on the builder
/// alone: nothing process-wide changes. For a program that talks to the
/// service's hosts beside its [`Client`], as a proxy relaying an SDK's
/// requests does; the [`Client`] builds its own.
///
/// ```
/// let http = genapi::http_client_builder()?.build()?;
/// # drop(http);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn http_client_builder() -> Result<reqwest::ClientBuilder> {
    transport::http_builder()
}
pub use wait::{Learned, Progress, WaitOptions};

/// The `http` crate, whose `HeaderMap` [`webhook::Verifier::verify`] takes.
pub use http;
/// The HTTP client crate genapi is built on; its types appear in
/// [`ClientBuilder::reqwest_builder`] and [`Error::Transport`].
pub use reqwest;
/// The service abstraction of [`ClientBuilder::layer`]'s layers.
pub use tower;

/// The handles a program shares between tasks and threads are `Send + Sync`;
/// this fails to compile the day one of them stops being so.
const _: () = {
    const fn shared_between_threads<T: Send + Sync>() {}
    shared_between_threads::<Client>();
    shared_between_threads::<ClientBuilder>();
    shared_between_threads::<Task>();
    shared_between_threads::<Output>();
    shared_between_threads::<Error>();
    shared_between_threads::<webhook::Inbox>();
    shared_between_threads::<webhook::Verifier>();
};
