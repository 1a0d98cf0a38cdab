//! Secrets that must never be printed: the API key and the webhook secret.
//!
//! Both wrap the text in a type whose `Debug` and `Display` say `[redacted]`, so
//! a request, a config or an error can be logged whole without leaking them.

use std::fmt;

/// Prints `[redacted]` in place of a secret.
macro_rules! redacted {
    ($name:ident) => {
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "([redacted])"))
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("[redacted]")
            }
        }
    };
}

/// The project API key, sent as `x-key` to trusted origins only.
///
/// ```
/// let key = genapi::ApiKey::new("sk-123");
/// assert_eq!(format!("{key:?}"), "ApiKey([redacted])");
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);
redacted!(ApiKey);

impl ApiKey {
    /// Wraps a key.
    pub fn new(key: impl Into<String>) -> Self {
        ApiKey(key.into())
    }
    /// The key itself, for the one place that puts it on the wire.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

/// The secret a request asks the service to send with its webhook
/// notification; it serializes as the plain string the service expects.
///
/// ```
/// let secret = genapi::WebhookSecret::new("whsec_abc");
/// assert_eq!(format!("{secret:?}"), "WebhookSecret([redacted])");
/// assert_eq!(serde_json::to_string(&secret).unwrap(), "\"whsec_abc\"");
/// ```
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub struct WebhookSecret(String);
redacted!(WebhookSecret);

impl WebhookSecret {
    /// Wraps a secret.
    pub fn new(secret: impl Into<String>) -> Self {
        WebhookSecret(secret.into())
    }
    /// The secret itself, for verification code.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<&str> for WebhookSecret {
    fn from(value: &str) -> Self {
        WebhookSecret::new(value)
    }
}

impl From<String> for WebhookSecret {
    fn from(value: String) -> Self {
        WebhookSecret::new(value)
    }
}

/// With the `schema` feature: a webhook secret is a plain string in a JSON Schema.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for WebhookSecret {
    fn schema_name() -> String {
        "WebhookSecret".to_string()
    }
    fn json_schema(generator: &mut schemars::r#gen::SchemaGenerator) -> schemars::schema::Schema {
        String::json_schema(generator)
    }
}
