//! Webhook delivery: when a task with a `webhook_url` ends, POST a
//! notification carrying both schemes the client verifies.
//!
//! Body: `{"task_id", "id", "status": "SUCCESS"|"FAILED", "result", "error",
//! "progress", "cost"}`. Headers: `X-Webhook-Secret` (the live service's echo)
//! and `webhook-id`, `webhook-timestamp`, `webhook-signature` (Standard
//! Webhooks, signed with the real wall clock), when the request carried a
//! secret. Redirects are never followed; failures are retried with doubling
//! backoff, a bounded number of times. Where a notification may go is
//! `webhook_targets`' rule; when it goes, the outbox's.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::{mpsc, Mutex};

use serde_json::{json, Value};

use super::outbox::{Inbound, Notification};
use super::results::poll_body;
use super::results::sleep_until_final;
use super::state::{Delivery, MockTask, Outcome, State};
use base64::Engine as _;

// The header names as the live service and Standard Webhooks spell them,
// written here rather than taken from the client: a client that misread a
// name would otherwise agree with its own mock and pass every test.
const SECRET_HEADER: &str = "x-webhook-secret";
const ID_HEADER: &str = "webhook-id";
const TIMESTAMP_HEADER: &str = "webhook-timestamp";
const SIGNATURE_HEADER: &str = "webhook-signature";

/// The Standard Webhooks signature of a message: `v1,` and the base64 of
/// HMAC-SHA256 over `{id}.{timestamp}.{body}`, keyed with the decoded part
/// of a `whsec_` secret (any other secret is used as it is). Written apart
/// from the client's verifier for the same reason as the header names.
fn sign(secret: &str, id: &str, timestamp: i64, body: &[u8]) -> Option<String> {
    let engine = base64::engine::general_purpose::STANDARD;
    let key = match secret.strip_prefix("whsec_") {
        Some(encoded) => engine.decode(encoded).ok()?,
        None => secret.as_bytes().to_vec(),
    };
    if key.is_empty() {
        return None;
    }
    let message = [id.as_bytes(), b".", timestamp.to_string().as_bytes(), b".", body].concat();
    let tag = ring::hmac::sign(&ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key), &message);
    Some(format!("v1,{}", engine.encode(tag.as_ref())))
}

/// The notification of a task that ended, as JSON text.
pub(crate) fn body(state: &State, task: &MockTask) -> String {
    let poll = poll_body(state, &task.id);
    let ready = task.outcome == Outcome::Ready;
    let error = if ready {
        Value::Null
    } else {
        json!({"status": poll["status"], "details": poll["details"]})
    };
    json!({
        "task_id": task.id,
        "id": task.id,
        "status": if ready { "SUCCESS" } else { "FAILED" },
        "result": poll["result"],
        "error": error,
        "progress": 1.0,
        "cost": task.charged(),
    })
    .to_string()
}

/// Sends a notification until a 2xx answers or the attempts run out.
pub(crate) async fn send(state: &State, notification: Notification) -> Delivery {
    let Notification {
        task_id,
        target,
        secret,
        body,
    } = notification;
    let mut delivery = Delivery::none(&task_id, target.as_str());
    let Some(client) = state.outbox.client() else {
        return delivery;
    };
    let message_id = format!("msg_{task_id}");
    let mut backoff = state.config.webhook_backoff;
    for attempt in 1..=state.config.webhook_attempts.max(1) {
        delivery.attempts = attempt;
        let mut request = client
            .post(target.clone())
            .header("content-type", "application/json")
            .body(body.clone());
        if let Some(secret) = &secret {
            // The receiver checks the timestamp against its own clock: the
            // real one, never the mock's, which a test may have moved ahead.
            let timestamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs() as i64)
                .unwrap_or(0);
            request = request
                .header(SECRET_HEADER, secret.expose())
                .header(ID_HEADER, &message_id)
                .header(TIMESTAMP_HEADER, timestamp.to_string());
            if let Some(signature) = sign(secret.expose(), &message_id, timestamp, body.as_bytes()) {
                request = request.header(SIGNATURE_HEADER, signature);
            }
        }
        match request.send().await {
            Ok(response) => {
                delivery.last_status = Some(response.status().as_u16());
                if response.status().is_success() {
                    delivery.delivered = true;
                    return delivery;
                }
            }
            Err(error) => tracing::debug!(%error, attempt, "mock webhook delivery failed"),
        }
        tokio::time::sleep(backoff).await;
        backoff *= 2;
    }
    delivery
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
            delivery = send(&state, notification) => delivery,
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
            body: body(&state, &task),
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

#[cfg(test)]
mod tests {
    #[test]
    fn signs_the_published_standard_webhooks_vector() {
        let signature = super::sign(
            "whsec_C2FVsBQIhrscChlQIMV+b5sSYspob7oD",
            "msg_27UH4WbU6Z5A5EzD8u03UvzRbpk",
            1649367553,
            br#"{"email":"test@example.com","username":"test_user"}"#,
        );
        assert_eq!(
            signature.as_deref(),
            Some("v1,tZ1I4/hDygAJgO5TYxiSd6Sd0kDW6hPenDe+bTa3Kkw=")
        );
    }
}
