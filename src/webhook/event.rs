//! What a verified notification says.

use serde_json::Value;

use crate::TaskStatus;

/// Which scheme vouched for a notification.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// A Standard Webhooks signature verified.
    StandardWebhooks,
    /// The `X-Webhook-Secret` header matched.
    SharedSecret,
}

/// A verified notification.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// The task it is about (from `task_id` or `id`).
    pub task_id: String,
    /// Normalised status: `SUCCESS` reads as `Ready`, `FAILED` as `Error`.
    pub status: TaskStatus,
    /// The `result` object, when present.
    pub result: Option<Value>,
    /// `error` or `details`, when present.
    pub details: Option<Value>,
    /// `progress`, when present.
    pub progress: Option<f64>,
    /// `cost`, when present.
    pub cost: Option<f64>,
    /// Which scheme verified it.
    pub scheme: Scheme,
    /// The Standard Webhooks message id, when signed.
    pub message_id: Option<String>,
    /// The whole body.
    pub raw: Value,
}

impl Event {
    /// `result.sample`, the output address, when present.
    ///
    /// ```
    /// # use genapi::webhook::Verifier;
    /// let verifier = Verifier::new("a-shared-secret-of-24-b")?;
    /// let headers: http::HeaderMap = [(
    ///     http::header::HeaderName::from_static("x-webhook-secret"),
    ///     http::HeaderValue::from_static("a-shared-secret-of-24-b"),
    /// )]
    /// .into_iter()
    /// .collect();
    /// let body = br#"{"task_id":"t-1","status":"SUCCESS","result":{"sample":"https://cdn.example/t-1.jpg"}}"#;
    /// let event = verifier.verify(&headers, body).expect("authentic");
    /// assert_eq!(event.sample(), Some("https://cdn.example/t-1.jpg"));
    /// # Ok::<(), genapi::webhook::SecretError>(())
    /// ```
    pub fn sample(&self) -> Option<&str> {
        self.result.as_ref()?.get("sample")?.as_str()
    }
}
