//! Notifications of the batch's tasks, sent to a receiver of the caller's.
//!
//! A seat stays taken until the task's end is seen, and with tasks of a
//! fraction of a second most of that wait is the time between the end and
//! the poll that sees it. A receiver the service can call ends that wait:
//! each submission names it (`webhook_url` and `webhook_secret`), and the
//! receiver's [`genapi::webhook::Inbox`], handed to the waits
//! ([`genapi::WaitOptions::woken_by`]), brings the poll forward to the
//! notification. Polling stays the source of truth, so a notification
//! lost, late or forged costs nothing but a poll.
//!
//! The fields are added as the request leaves, to the copy sent: the job
//! (its body, its digest in the journal, what the results say) is the
//! line's own, and the secret is written nowhere. A line that names its
//! own `webhook_url` keeps its own, and an operation whose request has no
//! `webhook_url` is sent as it was.

use std::sync::Arc;

use genapi::webhook::Inbox;
use genapi::WebhookSecret;
use serde_json::Value;

/// Where the service sends the batch's notifications, the secret they are
/// checked with, and the inbox the receiver hands the verified ones to.
///
/// Only the waits of tasks whose submission named the receiver are woken
/// through the inbox: a line naming a webhook of its own, an operation
/// without webhooks, or a task an earlier run accepted (with another
/// secret) waits as it would without notifications.
///
/// ```
/// let inbox = std::sync::Arc::new(genapi::webhook::Inbox::new());
/// let notify = genapi_batch::NotifyAt::new(
///     "https://hooks.example.com/batch",
///     genapi::WebhookSecret::new("a secret of at least sixteen bytes"),
///     inbox,
/// );
/// assert_eq!(notify.url(), "https://hooks.example.com/batch");
/// ```
#[derive(Clone)]
pub struct NotifyAt {
    url: String,
    secret: WebhookSecret,
    inbox: Arc<Inbox>,
}

impl std::fmt::Debug for NotifyAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NotifyAt")
            .field("url", &self.url)
            .finish_non_exhaustive()
    }
}

impl NotifyAt {
    /// Notifications to `url`, which the service calls, carrying `secret`;
    /// the receiver there hands the verified ones to `inbox`.
    pub fn new(url: impl Into<String>, secret: WebhookSecret, inbox: Arc<Inbox>) -> NotifyAt {
        NotifyAt {
            url: url.into(),
            secret,
            inbox,
        }
    }

    /// The inbox the waits of notified tasks are woken through.
    pub fn inbox(&self) -> &Arc<Inbox> {
        &self.inbox
    }

    /// The address the service calls.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// `body` as sent to the operation at `path`: with this receiver named,
    /// unless the line names a webhook of its own (or a secret for one) or
    /// the operation takes none; and whether it was named.
    pub(crate) fn added_to(&self, path: &str, mut body: Value) -> (Value, bool) {
        if !takes_webhooks(path) {
            return (body, false);
        }
        let mut named = false;
        if let Value::Object(fields) = &mut body {
            if !fields.contains_key("webhook_url") && !fields.contains_key("webhook_secret") {
                fields.insert("webhook_url".into(), Value::String(self.url.clone()));
                fields.insert("webhook_secret".into(), Value::String(self.secret.expose().to_string()));
                named = true;
            }
        }
        (body, named)
    }
}

/// Whether the model at `path` takes a `webhook_url`, as the document's
/// catalog reads its fields.
fn takes_webhooks(path: &str) -> bool {
    genapi::validate::Document::embedded()
        .catalog()
        .find(path)
        .is_ok_and(|model| model.fields.iter().any(|field| field.name == "webhook_url"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn notify() -> NotifyAt {
        NotifyAt::new(
            "https://hooks.example.com/b",
            WebhookSecret::new("s3cret-of-sixteen-bytes"),
            Arc::new(Inbox::new()),
        )
    }

    #[test]
    fn a_line_is_sent_naming_the_receiver_unless_it_names_its_own() {
        let sent = notify().added_to("/v1/gen-2-pro", json!({"prompt": "a fox"}));
        assert_eq!(
            sent,
            (
                json!({"prompt": "a fox", "webhook_url": "https://hooks.example.com/b", "webhook_secret": "s3cret-of-sixteen-bytes"}),
                true
            )
        );
        let own = json!({"prompt": "a fox", "webhook_url": "https://mine.example.com", "webhook_secret": "mine-of-sixteen-bytes"});
        assert_eq!(notify().added_to("/v1/gen-2-pro", own.clone()), (own, false));
        let own_secret = json!({"prompt": "a fox", "webhook_secret": "mine-of-sixteen-bytes"});
        assert_eq!(
            notify().added_to("/v1/gen-2-pro", own_secret.clone()),
            (own_secret, false)
        );
    }

    #[test]
    fn an_operation_without_webhooks_is_sent_as_it_was() {
        // The reference shows no webhook fields for outpainting.
        let sent = notify().added_to("/v1/gen-tools/outpainting-v1", json!({"mode": "fast"}));
        assert_eq!(sent, (json!({"mode": "fast"}), false));
        assert_eq!(
            notify().added_to("/v1/not-an-operation", json!({"x": 1})),
            (json!({"x": 1}), false)
        );
        assert!(takes_webhooks("/v1/gen-2-pro"));
    }

    #[test]
    fn the_secret_is_never_shown() {
        assert!(!format!("{:?}", notify()).contains("s3cret"));
    }
}
