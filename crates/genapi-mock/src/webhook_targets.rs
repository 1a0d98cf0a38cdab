//! Where the mock may send a webhook. A delivery carries the submitter's
//! prompt and secret, so the mock calls only the addresses it was told:
//!
//! - the origins listed with [`MockConfig::webhook_target`], a non-loopback
//!   one only with [`MockConfig::allow_remote_webhooks`];
//! - any loopback address with [`MockConfig::webhooks_to_loopback`], but never
//!   on a mock others can reach ([`MockConfig::allow_remote`]): there a
//!   submission from another machine would make the mock a relay to services
//!   that listen on this machine's loopback only.
//!
//! A mock others can reach answers a `webhook_url` it will not call with a
//! 422 naming the field, so a remote submitter learns it at once rather than
//! waiting for a notification that never comes.

use serde_json::{json, Value};

use super::state::State;
use super::MockConfig;

/// An origin webhooks may be delivered to: the scheme, host and port of an
/// `http` or `https` URL (a path or query given with it is dropped).
///
/// ```
/// let target: genapi_mock::WebhookTarget = "http://127.0.0.1:9000/hooks".parse().unwrap();
/// assert_eq!(target.origin(), "http://127.0.0.1:9000");
/// assert!(target.is_loopback());
/// assert!("not a url at all".parse::<genapi_mock::WebhookTarget>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WebhookTarget {
    origin: String,
    loopback: bool,
}

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(WebhookTargetError);

/// Why a value is not a [`WebhookTarget`].
#[derive(Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WebhookTargetError {
    /// It does not read as a URL.
    #[error("not a URL")]
    NotAUrl,
    /// A URL, but not an `http` or `https` one with a host.
    #[error("not an http or https URL with a host")]
    NotHttp,
}

impl WebhookTarget {
    /// The target a URL or origin names.
    pub fn parse(value: &str) -> Result<WebhookTarget, WebhookTargetError> {
        let url = url::Url::parse(value).map_err(|_| WebhookTargetError::NotAUrl)?;
        WebhookTarget::of(&url)
    }

    fn of(url: &url::Url) -> Result<WebhookTarget, WebhookTargetError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(WebhookTargetError::NotHttp);
        }
        let loopback = match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|ip| ip.is_loopback()),
            // Only the name itself: another name is whatever a resolver says.
            Some(url::Host::Domain(name)) => name == "localhost",
            None => return Err(WebhookTargetError::NotHttp),
        };
        Ok(WebhookTarget {
            origin: url.origin().ascii_serialization(),
            loopback,
        })
    }

    /// `scheme://host:port`, as browsers serialize an origin (the default
    /// port left out).
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Whether the host is this machine's loopback (`127.0.0.0/8`, `::1`,
    /// `localhost`).
    pub fn is_loopback(&self) -> bool {
        self.loopback
    }
}

impl std::str::FromStr for WebhookTarget {
    type Err = WebhookTargetError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        WebhookTarget::parse(value)
    }
}

impl std::fmt::Display for WebhookTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.origin)
    }
}

/// The configured targets, or what makes one unusable: not a URL, or not on
/// this machine without [`MockConfig::allow_remote_webhooks`]; and a mock
/// others can reach that would deliver to every loopback address.
pub(crate) fn configured(config: &MockConfig) -> Result<Vec<WebhookTarget>, String> {
    if config.allow_remote && config.webhooks_to_loopback {
        return Err(
            "a mock others can reach does not deliver webhooks to every loopback address \
                    (it would relay from the network to this machine): list the receivers as webhook targets"
                .into(),
        );
    }
    config
        .webhook_targets
        .iter()
        .enumerate()
        .map(|(index, value)| {
            // The value itself is not repeated: it may be anything pasted.
            let target = WebhookTarget::parse(value).map_err(|e| format!("webhook target {} is {e}", index + 1))?;
            if !target.loopback && !config.allow_remote_webhooks {
                return Err(format!(
                    "webhook target {target} is not on this machine: allow remote webhooks to deliver there"
                ));
            }
            Ok(target)
        })
        .collect()
}

/// The target of a `webhook_url` when the mock may call it, else `None`.
pub(crate) fn permitted(state: &State, webhook_url: &str) -> Option<reqwest::Url> {
    let url = reqwest::Url::parse(webhook_url).ok()?;
    let target = WebhookTarget::of(&url).ok()?;
    let listed = state.webhook_targets.iter().any(|t| t.origin == target.origin);
    let config = &state.config;
    let allowed = if listed {
        target.loopback || config.allow_remote_webhooks
    } else {
        target.loopback && config.webhooks_to_loopback && !config.allow_remote
    };
    allowed.then_some(url)
}

/// On a mock others can reach, the 422 error for a `webhook_url` it will
/// not call, in the framework's words; `None` when it will (or when the mock
/// answers as the service does, accepting it and counting the refusal).
pub(crate) fn refused_webhook_url(state: &State, request: &Value) -> Option<Value> {
    let url = request.get("webhook_url")?.as_str()?;
    if !state.config.allow_remote || permitted(state, url).is_some() {
        return None;
    }
    let what = match WebhookTarget::parse(url) {
        Ok(target) => format!("{target} is not one of them"),
        Err(e) => format!("this one is {e}"),
    };
    Some(json!({
        "type": "value_error",
        "loc": ["body", "webhook_url"],
        "msg": format!(
            "Value error, this mock (a test double others can reach) delivers webhooks only to the origins it \
             was started with (genapi mock --webhook-target ORIGIN); {what}"
        ),
        "input": url,
    }))
}

#[cfg(test)]
mod tests {
    use super::{WebhookTarget, WebhookTargetError};

    #[test]
    fn a_target_is_an_http_origin_and_loopback_is_this_machine_only() {
        let target = |value: &str| WebhookTarget::parse(value).map(|t| (t.origin().to_string(), t.is_loopback()));
        let origin = |value: &str, loopback| Ok((value.to_string(), loopback));
        assert_eq!(
            target("http://127.0.0.1:9000/hooks?x=1"),
            origin("http://127.0.0.1:9000", true)
        );
        assert_eq!(target("http://127.3.2.1:9000"), origin("http://127.3.2.1:9000", true));
        assert_eq!(target("http://[::1]:9000"), origin("http://[::1]:9000", true));
        assert_eq!(
            target("http://[::ffff:127.0.0.1]:9000"),
            origin("http://[::ffff:7f00:1]:9000", true)
        );
        assert_eq!(target("http://LocalHost:9000"), origin("http://localhost:9000", true));
        assert_eq!(
            target("https://u:p@hooks.example.com/in"),
            origin("https://hooks.example.com", false)
        );
        assert_eq!(
            target("http://localhost.example.com"),
            origin("http://localhost.example.com", false)
        );
        assert_eq!(target("http://0.0.0.0:9000"), origin("http://0.0.0.0:9000", false));
        assert_eq!(target("not a url at all"), Err(WebhookTargetError::NotAUrl));
        assert_eq!(target("127.0.0.1:9000"), Err(WebhookTargetError::NotAUrl));
        assert_eq!(target("localhost:9000"), Err(WebhookTargetError::NotHttp));
        assert_eq!(target("ftp://127.0.0.1/"), Err(WebhookTargetError::NotHttp));
        assert_eq!(target("mailto:hooks@example.com"), Err(WebhookTargetError::NotHttp));
    }
}
