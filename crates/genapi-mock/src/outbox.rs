//! Notifications on their way out: a bounded queue, a fixed number of
//! workers and one HTTP client for them all. A receiver that is slow, or
//! accepts and never answers, holds at most one connection per worker for at
//! most the attempt timeout; it delays webhooks, never submissions, and the
//! mock's file descriptors stay bounded whatever it does.
//!
//! A notification that finds the queue full is dropped, recorded as a
//! delivery of no attempts and counted in `webhooks_dropped`.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::{mpsc, watch, Mutex};

use super::deliver::{self, Notification};
use super::results::sleep_until_final;
use super::state::{Delivery, State};
use super::MockConfig;

/// What the workers share with the routes: the queue's sending end, and the
/// client every delivery goes through.
pub(crate) struct Outbox {
    queue: mpsc::Sender<Notification>,
    /// Built on the first delivery: it reads the system's certificates,
    /// which a mock that sends no webhook should not wait for.
    client: OnceLock<Option<reqwest::Client>>,
    timeout: Duration,
    workers: usize,
    stopped: watch::Receiver<bool>,
}

/// The queue's receiving end, until the workers take it.
pub(crate) struct Inbound(mpsc::Receiver<Notification>);

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

/// Starts the workers; each ends when the mock stops.
pub(crate) fn start_workers(state: &Arc<State>, inbound: Inbound) -> Vec<tokio::task::JoinHandle<()>> {
    let inbound = Arc::new(Mutex::new(inbound.0));
    (0..state.outbox.workers)
        .map(|_| tokio::spawn(work(state.clone(), inbound.clone())))
        .collect()
}

async fn work(state: Arc<State>, inbound: Arc<Mutex<mpsc::Receiver<Notification>>>) {
    let mut stopped = state.outbox.stopped.clone();
    loop {
        let next = async { inbound.lock().await.recv().await };
        let notification = tokio::select! {
            next = next => match next {
                Some(notification) => notification,
                None => return,
            },
            _ = stopped.wait_for(|stop| *stop) => return,
        };
        let delivery = tokio::select! {
            delivery = deliver::send(&state, notification) => delivery,
            _ = stopped.wait_for(|stop| *stop) => return,
        };
        state.record_delivery(delivery);
    }
}

/// Sends a task's notification once it ends, if its `webhook_url` is one
/// the mock may call; a refused one is recorded and counted at once.
pub(crate) fn watch(state: Arc<State>, id: String, url: &str) {
    let Some(target) = super::webhook_targets::permitted(&state, url) else {
        let origin = reqwest::Url::parse(url).map(|u| u.origin().ascii_serialization());
        tracing::warn!(
            origin = origin.as_deref().unwrap_or("(not a URL)"),
            "mock refuses to deliver a webhook to an address the test did not configure"
        );
        state.count(|c| c.webhooks_refused += 1);
        state.record_delivery(Delivery::none(&id, url));
        return;
    };
    let mut stopped = state.outbox.stopped.clone();
    tokio::spawn(async move {
        let ended = tokio::select! {
            ended = sleep_until_final(&state, &id) => ended,
            _ = stopped.wait_for(|stop| *stop) => return,
        };
        let Some(task) = ended else { return };
        let Some((_, secret)) = task.webhook.clone() else {
            return;
        };
        let notification = Notification {
            body: deliver::body(&state, &task),
            task_id: id,
            target,
            secret,
        };
        if let Err(full) = state.outbox.queue.try_send(notification) {
            let notification = full.into_inner();
            tracing::warn!(task_id = %notification.task_id, "mock drops a webhook: too many are waiting");
            state.count(|c| c.webhooks_dropped += 1);
            state.record_delivery(Delivery::none(&notification.task_id, notification.target.as_str()));
        }
    });
}
