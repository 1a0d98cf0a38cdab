//! Webhook delivery: when a task with a `webhook_url` ends, POST a
//! notification carrying both schemes the client verifies.
//!
//! Body: `{"task_id", "id", "status": "SUCCESS"|"FAILED", "result", "error",
//! "progress", "cost"}`. Headers: `X-Webhook-Secret` (the live service's echo)
//! and `webhook-id`, `webhook-timestamp`, `webhook-signature` (Standard
//! Webhooks), when the request carried a secret. Redirects are never
//! followed; only origins listed in `MockConfig::webhook_targets` are called
//! (and non-loopback ones only when allowed); failures are retried with
//! doubling backoff, a bounded number of times.

use std::sync::Arc;
use std::time::UNIX_EPOCH;

use serde_json::json;

use super::results::{poll_body, sleep_until_final};
use super::state::{Delivery, Outcome, State};
use crate::webhook::{sign, ID_HEADER, SECRET_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER};
use crate::WebhookSecret;

pub(super) fn watch(state: Arc<State>, id: String) {
    tokio::spawn(async move {
        if let Some(task) = sleep_until_final(&state, &id).await {
            let Some((url, secret)) = task.webhook.clone() else {
                return;
            };
            let poll = poll_body(&state, &id);
            let body = json!({
                "task_id": id,
                "id": id,
                "status": if task.outcome == Outcome::Ready { "SUCCESS" } else { "FAILED" },
                "result": poll["result"],
                "error": if task.outcome == Outcome::Ready { serde_json::Value::Null } else { json!({"status": poll["status"], "details": poll["details"]}) },
                "progress": 1.0,
                "cost": task.charged(),
            });
            let delivery = send(&state, &id, &url, secret, body.to_string()).await;
            state.record_delivery(delivery);
        }
    });
}

async fn send(state: &State, id: &str, url: &str, secret: Option<WebhookSecret>, body: String) -> Delivery {
    let mut delivery = Delivery {
        task_id: id.to_string(),
        url: url.to_string(),
        attempts: 0,
        last_status: None,
        delivered: false,
    };
    let target = match reqwest::Url::parse(url) {
        Ok(target) => target,
        Err(_) => return delivery,
    };
    let loopback = match target.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        Some(url::Host::Domain(name)) => name == "localhost",
        None => false,
    };
    let origin = target.origin().ascii_serialization();
    let listed = state.config.webhook_targets.iter().any(|t| {
        reqwest::Url::parse(t)
            .map(|t| t.origin().ascii_serialization())
            .is_ok_and(|t| t == origin)
    });
    if !listed || (!loopback && !state.config.allow_remote_webhooks) {
        tracing::warn!(%origin, "mock refuses to deliver a webhook to an address the test did not configure");
        state.count(|c| c.webhooks_refused += 1);
        return delivery;
    }
    crate::transport::ensure_tls_provider();
    // A receiver that never answers must not keep a delivery alive forever.
    let Ok(client) = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(std::time::Duration::from_secs(10))
        .build()
    else {
        return delivery;
    };
    let message_id = format!("msg_{id}");
    let mut backoff = state.config.webhook_backoff;
    for attempt in 1..=state.config.webhook_attempts.max(1) {
        delivery.attempts = attempt;
        let timestamp = state
            .clock
            .wall()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let mut request = client
            .post(target.clone())
            .header("content-type", "application/json")
            .body(body.clone());
        if let Some(secret) = &secret {
            request = request
                .header(SECRET_HEADER, secret.expose())
                .header(ID_HEADER, &message_id)
                .header(TIMESTAMP_HEADER, timestamp.to_string());
            if let Ok(signature) = sign(secret, &message_id, timestamp, body.as_bytes()) {
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
