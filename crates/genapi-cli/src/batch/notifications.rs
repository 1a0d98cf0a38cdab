//! `--webhook-url URL --webhook-listen ADDR`: the service notifies the batch
//! when each task ends, and the task's seat goes to the next line at once.
//!
//! With tasks of a fraction of a second, most of a seat's time is the wait
//! between a task's end and the poll that sees it. Here every submission
//! names `URL` (see [`genapi_batch::NotifyAt`]), this process listens on
//! `ADDR`, and each notification that verifies wakes its task's wait
//! ([`genapi::webhook::Inbox`]), which polls at once. The poll, never the
//! notification, says how the task ended, so a notification lost, late or
//! forged costs a poll and nothing else, and the batch finishes by polling
//! alone when the service cannot reach `URL`.
//!
//! Each run makes a secret of its own (32 random bytes), sent with its
//! submissions and written nowhere; a notification that does not carry it
//! (or a signature made with it) is answered 401 and wakes nothing. Tasks a
//! run accepted before (resumed lines) carry another run's secret: their
//! notifications are refused, and they are polled as always.

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use genapi::webhook::{Inbox, Verifier};
use genapi::WebhookSecret;
use genapi_batch::NotifyAt;

use crate::{out, Failure};

/// The largest notification read; the service's are a few hundred bytes.
const LARGEST_NOTIFICATION: usize = 64 * 1024;

/// A receiver listening for the batch's notifications; it stops when
/// dropped.
pub struct Receiver {
    notify: NotifyAt,
    inbox: Arc<Inbox>,
    serving: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.serving.abort();
    }
}

/// What each notification is checked with and handed to.
struct Receiving {
    verifier: Verifier,
    inbox: Arc<Inbox>,
}

impl Receiver {
    /// Listens on `listen` for notifications the service sends to `url`.
    pub async fn start(url: &str, listen: SocketAddr) -> Result<Receiver, Failure> {
        let url = checked_url(url)?;
        let secret = WebhookSecret::new(fresh_secret()?);
        let verifier = Verifier::new(secret.clone())
            .map_err(|e| Failure::usage(format!("cannot check notifications: {}", out::clean(&e.to_string()))))?;
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
            Failure::usage(format!(
                "--webhook-listen {listen}: cannot listen there ({e}); give a free port on an address of this machine"
            ))
        })?;
        let inbox = Arc::new(Inbox::new());
        let receiving = Arc::new(Receiving {
            verifier,
            inbox: inbox.clone(),
        });
        let router = axum::Router::new()
            .fallback(receive)
            .layer(DefaultBodyLimit::max(LARGEST_NOTIFICATION))
            .with_state(receiving);
        let serving = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, router).await {
                out::err(&format!(
                    "warning: no more notifications are received ({}); the batch goes on polling",
                    out::clean(&error.to_string())
                ));
            }
        });
        Ok(Receiver {
            notify: NotifyAt::new(url, secret),
            inbox,
            serving,
        })
    }

    /// What every submission names.
    pub fn notify_at(&self) -> NotifyAt {
        self.notify.clone()
    }

    /// Where the notifications that verified go: the waits' wake-ups.
    pub fn inbox(&self) -> Arc<Inbox> {
        self.inbox.clone()
    }
}

/// One notification: handed to the inbox when it verifies, refused
/// otherwise. Whatever its method or path (a proxy in front may change
/// them), only the secret vouches for it.
async fn receive(State(receiving): State<Arc<Receiving>>, headers: HeaderMap, body: axum::body::Bytes) -> StatusCode {
    match receiving.verifier.verify(&headers, &body) {
        Ok(event) => {
            receiving.inbox.deliver(event);
            StatusCode::NO_CONTENT
        }
        Err(_) => StatusCode::UNAUTHORIZED,
    }
}

/// `--webhook-url`: an http or https URL with a host.
fn checked_url(text: &str) -> Result<String, Failure> {
    let refused = |why: &str| {
        Failure::usage(format!(
            "--webhook-url {}: {why}; give the address the service calls, e.g. https://hooks.example.com/batch",
            out::clean(text)
        ))
    };
    let url = url::Url::parse(text).map_err(|_| refused("not a URL"))?;
    if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
        return Err(refused("not an http or https URL with a host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        // Not shown back: the password is a secret of its own.
        return Err(Failure::usage(
            "--webhook-url carries a user name or password, which every submission would tell the service; give \
             the address without them",
        ));
    }
    Ok(url.to_string())
}

/// A secret no one can guess: 32 bytes from the system's random source,
/// as hex.
fn fresh_secret() -> Result<String, Failure> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Failure::usage(format!("cannot make a secret for the notifications: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_url_must_be_an_address_the_service_can_call_without_credentials() {
        assert_eq!(
            checked_url("https://hooks.example.com/b").unwrap(),
            "https://hooks.example.com/b"
        );
        for bad in ["hooks.example.com", "ftp://hooks.example.com"] {
            let refused = checked_url(bad).unwrap_err().message;
            assert!(refused.starts_with(&format!("--webhook-url {bad}: ")), "{refused}");
        }
        let refused = checked_url("https://me:pw@hooks.example.com/").unwrap_err().message;
        assert!(
            refused.contains("user name or password") && !refused.contains("pw"),
            "{refused}"
        );
    }

    #[test]
    fn each_secret_is_new_and_long_enough_to_check_notifications() {
        let (a, b) = (fresh_secret().unwrap(), fresh_secret().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 64);
        assert!(Verifier::new(a.as_str()).is_ok());
    }
}
