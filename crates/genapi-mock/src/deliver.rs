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
use super::state::{Delivery, Outcome, State, WebhookSecret};
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
    let listed = (loopback && state.config.webhooks_to_loopback)
        || state.config.webhook_targets.iter().any(|t| {
            reqwest::Url::parse(t)
                .map(|t| t.origin().ascii_serialization())
                .is_ok_and(|t| t == origin)
        });
    if !listed || (!loopback && !state.config.allow_remote_webhooks) {
        tracing::warn!(%origin, "mock refuses to deliver a webhook to an address the test did not configure");
        state.count(|c| c.webhooks_refused += 1);
        return delivery;
    }
    // genapi's reqwest has no TLS provider compiled in: the process's
    // default is ring, unless the program chose another.
    let _ = rustls::crypto::ring::default_provider().install_default();
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
