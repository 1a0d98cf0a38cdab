//! Notifications on their way out: a bounded queue and one HTTP client for
//! every delivery (the fixed number of workers that drain the queue are
//! `deliver`'s). A receiver that is slow, or
//! accepts and never answers, holds at most one connection per worker for at
//! most the attempt timeout; it delays webhooks, never submissions, and the
//! mock's file descriptors stay bounded whatever it does.
//!
//! A notification that finds the queue full is dropped, recorded as a
//! delivery of no attempts and counted in `webhooks_dropped`.

use std::sync::OnceLock;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::MockConfig;

/// What the workers share with the routes: the queue's sending end, and the
/// client every delivery goes through.
pub(crate) struct Outbox {
    pub(crate) queue: mpsc::Sender<Notification>,
    /// Built on the first delivery: it reads the system's certificates,
    /// which a mock that sends no webhook should not wait for.
    client: OnceLock<Option<reqwest::Client>>,
    timeout: Duration,
    pub(crate) workers: usize,
    pub(crate) stopped: watch::Receiver<bool>,
}

/// The queue's receiving end, until the workers take it.
pub(crate) struct Inbound(pub(crate) mpsc::Receiver<Notification>);

impl Outbox {
    /// An outbox for these settings, stopped when `stopped` turns true.
    pub(crate) fn new(config: &MockConfig, stopped: watch::Receiver<bool>) -> (Outbox, Inbound) {
        let (queue, inbound) = mpsc::channel(config.webhook_queue.max(1));
        let outbox = Outbox {
            queue,
            client: OnceLock::new(),
            timeout: config.webhook_timeout,
            workers: config.webhook_workers.max(1),
            stopped,
        };
        (outbox, Inbound(inbound))
    }

    /// The one client of every delivery; `None` if it cannot be built.
    pub(crate) fn client(&self) -> Option<&reqwest::Client> {
        self.client
            .get_or_init(|| {
                // genapi's reqwest has no TLS provider compiled in: the
                // process's default is ring, unless the program chose another.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let built = reqwest::Client::builder()
                    .redirect(reqwest::redirect::Policy::none())
                    .timeout(self.timeout)
                    .pool_max_idle_per_host(self.workers)
                    .build();
                built
                    .inspect_err(|error| tracing::warn!(%error, "the mock cannot build its webhook client"))
                    .ok()
            })
            .as_ref()
    }

    /// Notifications waiting for a worker.
    pub(crate) fn waiting(&self) -> usize {
        self.queue.max_capacity() - self.queue.capacity()
    }
}

/// A task's notification, ready to send to a permitted target.
pub(crate) struct Notification {
    pub(crate) task_id: String,
    pub(crate) target: reqwest::Url,
    pub(crate) secret: Option<WebhookSecret>,
    pub(crate) body: String,
}

/// A task's `webhook_secret`, kept to sign its notification and never shown
/// (a task's Debug, the request log).
#[derive(Clone)]
pub(crate) struct WebhookSecret(String);

impl From<&str> for WebhookSecret {
    fn from(secret: &str) -> Self {
        WebhookSecret(secret.to_string())
    }
}

impl WebhookSecret {
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("WebhookSecret([redacted])")
    }
}
