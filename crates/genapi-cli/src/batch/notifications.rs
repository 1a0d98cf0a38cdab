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
//! The batch in an output folder has a secret of its own (192 random
//! bits), sent with its submissions; a notification that does not carry it
//! (or a signature made with it) is answered 401 and wakes nothing. It is
//! kept with the secrets of tasks `genapi submit` sent ([`crate::task_secrets`],
//! a file of the cache only the user reads), so every later run over the
//! folder, with these flags or without, has its client scrub it from what
//! the service says of the tasks accepted before, and takes it again for
//! its own submissions. It is written nowhere else.
//!
//! The receiver may face anyone who can reach `ADDR`, so what they can make
//! it hold is bounded: [`MOST_CONNECTIONS`] connections at once (one more is
//! closed as it comes), each for [`CONNECTION_TIME`] at most, and
//! [`LARGEST_NOTIFICATION`] bytes of body. The batch's own connections to
//! the service never wait for a file descriptor a stranger holds.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use genapi::webhook::{Inbox, Verifier};
use genapi::WebhookSecret;
use genapi_batch::NotifyAt;
use tokio::sync::Semaphore;

use crate::{out, Failure};

/// The largest notification read; the service's are a few hundred bytes.
const LARGEST_NOTIFICATION: usize = 64 * 1024;

/// Connections served at once; the service's deliveries need a few.
const MOST_CONNECTIONS: usize = 64;

/// How long one connection is served, however slowly it sends; the service
/// opens another for its next notification.
const CONNECTION_TIME: Duration = Duration::from_secs(30);

/// A receiver listening for the batch's notifications; it stops when
/// dropped.
pub struct Receiver {
    receiving: Arc<Receiving>,
    /// The address it listens on (the port the system chose, when
    /// `--webhook-listen` gave 0).
    listening_on: SocketAddr,
    notify: NotifyAt,
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
    /// Notifications that verified, and the requests refused.
    verified: AtomicU64,
    refused: AtomicU64,
}

impl Receiver {
    /// Listens on `listen` for notifications the service sends to `url`,
    /// about the batch in `out_dir` (whose secret they carry).
    pub async fn start(url: &str, listen: SocketAddr, out_dir: &Path) -> Result<Receiver, Failure> {
        let url = checked_url(url)?;
        Receiver::listen(url, listen, secret_of(out_dir)?).await
    }

    /// Listens on `listen` for notifications to `url` carrying `secret`.
    async fn listen(url: String, listen: SocketAddr, secret: String) -> Result<Receiver, Failure> {
        let secret = WebhookSecret::new(secret);
        let verifier = Verifier::new(secret.clone())
            .map_err(|e| Failure::usage(format!("cannot check notifications: {}", out::clean(&e.to_string()))))?;
        let listener = tokio::net::TcpListener::bind(listen).await.map_err(|e| {
            Failure::usage(format!(
                "--webhook-listen {listen}: cannot listen there ({e}); give a free port on an address of this machine"
            ))
        })?;
        let listening_on = listener.local_addr().unwrap_or(listen);
        warn_of_a_port_elsewhere(&url, listening_on);
        let inbox = Arc::new(Inbox::new());
        let receiving = Arc::new(Receiving {
            verifier,
            inbox: inbox.clone(),
            verified: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        });
        let router = axum::Router::new()
            .fallback(receive)
            .layer(DefaultBodyLimit::max(LARGEST_NOTIFICATION))
            .with_state(receiving.clone());
        let serving = tokio::spawn(serve(listener, router));
        out::progress(&format!(
            "note: listening on {listening_on} for the service's notifications to {}",
            genapi_text::shown_address(&url)
        ));
        Ok(Receiver {
            receiving,
            listening_on,
            notify: NotifyAt::new(url, secret, inbox),
            serving,
        })
    }

    /// What every submission names.
    pub fn notify_at(&self) -> NotifyAt {
        self.notify.clone()
    }

    /// Says how many notifications came, after a run that sent `submitted`
    /// tasks; none at all is a warning, since then `--webhook-url` likely
    /// does not lead here (the run polled instead).
    pub fn say_what_came(&self, submitted: usize) {
        let verified = self.receiving.verified.load(Ordering::Relaxed);
        let refused = self.receiving.refused.load(Ordering::Relaxed);
        if verified == 0 && submitted > 0 {
            out::err(&format!(
                "warning: no notification came to {} for the {submitted} tasks sent ({refused} requests refused): \
                 check that --webhook-url {} leads here; the batch polled instead",
                self.listening_on,
                genapi_text::shown_address(self.notify.url())
            ));
        } else {
            out::progress(&format!(
                "note: {verified} notifications came and woke their tasks' waits, {refused} requests refused"
            ));
        }
    }
}

/// `--webhook-listen`: an IP address and a port.
pub fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("{text:?} is not an IP address and port: give e.g. 127.0.0.1:8090 (this machine only) or 0.0.0.0:8090")
    })
}

/// Serves `router` on the connections `listener` accepts, within the
/// bounds the module states.
async fn serve(listener: tokio::net::TcpListener, router: axum::Router) {
    let permits = Arc::new(Semaphore::new(MOST_CONNECTIONS));
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            // Out of file descriptors, or a connection reset before it was
            // taken: the next one may do.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Ok(permit) = permits.clone().try_acquire_owned() else {
            continue; // dropped: closed at once
        };
        let service = hyper_util::service::TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            let connection = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_TIME, connection).await;
            drop(permit);
        });
    }
}

/// One notification: handed to the inbox when it verifies, refused
/// otherwise. Whatever its method or path (a proxy in front may change
/// them), only the secret vouches for it.
async fn receive(State(receiving): State<Arc<Receiving>>, headers: HeaderMap, body: axum::body::Bytes) -> StatusCode {
    match receiving.verifier.verify(&headers, &body) {
        Ok(event) => {
            receiving.verified.fetch_add(1, Ordering::Relaxed);
            receiving.inbox.deliver(event);
            StatusCode::NO_CONTENT
        }
        Err(_) => {
            receiving.refused.fetch_add(1, Ordering::Relaxed);
            StatusCode::UNAUTHORIZED
        }
    }
}

/// `--webhook-url`: an http or https URL with a host. An `http` one off
/// this machine is said: the secret would cross the network in clear.
fn checked_url(text: &str) -> Result<String, Failure> {
    let refused = |why: &str| {
        Failure::usage(format!(
            "--webhook-url {}: {why}; give the address the service calls, e.g. https://hooks.example.com/batch",
            genapi_text::shown_address(text)
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
    if let Some(longest) = longest_webhook_url() {
        if url.as_str().len() > longest {
            return Err(refused(&format!(
                "longer than the {longest} characters a request's webhook_url may have"
            )));
        }
    }
    if url.scheme() == "http" && !on_this_machine(&url) {
        out::err(
            "warning: --webhook-url is http, not https: the secret each submission gives for the notifications, and \
             the notifications, cross the network unencrypted",
        );
    }
    Ok(url.to_string())
}

/// The longest `webhook_url` a request accepts: the document's
/// `WebhookUrl`, which every request's `webhook_url` refers to.
fn longest_webhook_url() -> Option<usize> {
    let longest = genapi::validate::Document::embedded()
        .schema("WebhookUrl")?
        .get("maxLength")?
        .as_u64()?;
    usize::try_from(longest).ok()
}

/// Whether `url`'s host is this machine (a loopback address, or
/// `localhost`).
fn on_this_machine(url: &url::Url) -> bool {
    match url.host() {
        Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    }
}

/// Says when `url` names this machine on another port than `listen`:
/// notifications sent there cannot come here.
fn warn_of_a_port_elsewhere(url: &str, listen: SocketAddr) {
    let Ok(parsed) = url::Url::parse(url) else { return };
    if on_this_machine(&parsed) && parsed.port_or_known_default() != Some(listen.port()) {
        out::err(&format!(
            "warning: --webhook-url names this machine on port {}, and the batch listens on port {}: notifications \
             cannot come; give both the same port",
            parsed.port_or_known_default().unwrap_or(0),
            listen.port()
        ));
    }
}

/// What the secret of the batch in `out_dir` is kept under.
fn kept_under(out_dir: &Path) -> String {
    let folder = std::path::absolute(out_dir).unwrap_or_else(|_| out_dir.to_path_buf());
    // FNV-1a of the folder's path: a short name, the same in every run.
    let digest = folder
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3)
        });
    format!("batch-notifications-{digest:016x}")
}

/// The secret of the batch in `out_dir`: the one kept for it, or a new one,
/// kept.
fn secret_of(out_dir: &Path) -> Result<String, Failure> {
    let key = kept_under(out_dir);
    let kept = crate::task_secrets::kept(&key)
        .and_then(|fields| fields.get("webhook_secret")?.as_str().map(str::to_string))
        .filter(|secret| Verifier::new(secret.as_str()).is_ok());
    if let Some(secret) = kept {
        return Ok(secret);
    }
    let secret = fresh_secret()?;
    let mut fields = serde_json::Map::new();
    fields.insert("webhook_secret".into(), secret.clone().into());
    crate::task_secrets::keep(&key, &fields);
    Ok(secret)
}

/// Has `client` scrub the secret of the batch in `out_dir` from what the
/// service says, when one is kept: the tasks an earlier run accepted
/// carry it, whether this run receives notifications or not.
pub fn learn_kept_secret(client: &genapi::Client, out_dir: &Path) {
    crate::task_secrets::learn(client, &kept_under(out_dir));
}

/// A secret no one can guess: 32 bytes from the system's random source,
/// in the 64 letters, digits, `-` and `_` of URL-safe base64. Not hex: a
/// service echoing it in capitals would give back a hex secret whole.
fn fresh_secret() -> Result<String, Failure> {
    const LETTERS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)
        .map_err(|e| Failure::usage(format!("cannot make a secret for the notifications: {e}")))?;
    // Each byte's low six bits: 192 random bits, 32 letters.
    Ok(bytes.iter().map(|b| char::from(LETTERS[usize::from(b & 63)])).collect())
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
        let long = format!(
            "https://hooks.example.com/{}",
            "a".repeat(longest_webhook_url().unwrap())
        );
        let refused = checked_url(&long).unwrap_err().message;
        assert!(refused.contains("longer than the 2083 characters"), "{refused}");
        assert_eq!(
            parse_listen("localhost:8090").unwrap_err(),
            "\"localhost:8090\" is not an IP address and port: give e.g. 127.0.0.1:8090 (this machine only) or \
             0.0.0.0:8090"
        );
        let long_with_token = format!("https://hooks.example.com/h?token=t0k3n{}", "a".repeat(3000));
        let refused = checked_url(&long_with_token).unwrap_err().message;
        assert!(
            !refused.contains("t0k3n"),
            "a URL is shown without its query: {refused}"
        );
        let refused = checked_url("https://me:pw@hooks.example.com/").unwrap_err().message;
        assert!(
            refused.contains("user name or password") && !refused.contains("pw"),
            "{refused}"
        );
    }

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    use tokio::net::TcpStream;

    async fn receiver() -> Receiver {
        // A secret of its own: the tests keep nothing in the user's cache.
        Receiver::listen(
            "http://127.0.0.1:9/hooks".into(),
            "127.0.0.1:0".parse().unwrap(),
            fresh_secret().unwrap(),
        )
        .await
        .unwrap()
    }

    /// Whether the receiver closes `stream` (its read ends) rather than
    /// keeping it open for a request.
    async fn closed(stream: &mut TcpStream) -> bool {
        let mut byte = [0u8; 1];
        matches!(
            tokio::time::timeout(Duration::from_secs(5), stream.read(&mut byte)).await,
            Ok(Ok(0) | Err(_))
        )
    }

    /// A notification's answer on a new connection: its status line.
    async fn answer_to(address: SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(address).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer).await;
        answer.lines().next().unwrap_or_default().to_string()
    }

    const FORGED: &str = "POST /hooks HTTP/1.1\r\nhost: x\r\nx-webhook-secret: not-it-at-all-not-it\r\n\
                          content-length: 2\r\nconnection: close\r\n\r\n{}";

    /// Strangers holding connections open take at most its share: one more
    /// is closed as it comes, and a connection given up frees its place.
    #[tokio::test]
    async fn connections_held_open_are_bounded_in_number() {
        let receiver = receiver().await;
        let address = receiver.listening_on;
        let mut held = Vec::new();
        for _ in 0..MOST_CONNECTIONS {
            held.push(TcpStream::connect(address).await.unwrap());
        }
        let mut one_more = TcpStream::connect(address).await.unwrap();
        assert!(closed(&mut one_more).await, "one past the bound is closed");
        drop(held.pop());
        // The freed place is found once the server has seen the close.
        let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let status = answer_to(address, FORGED).await;
            if status.starts_with("HTTP/1.1 401") {
                break;
            }
            assert!(tokio::time::Instant::now() < give_up, "no place freed: {status:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A connection that sends nothing is closed after its time.
    #[tokio::test(start_paused = true)]
    async fn a_connection_that_sends_nothing_is_closed_after_its_time() {
        let receiver = receiver().await;
        let started = tokio::time::Instant::now();
        let mut idle = TcpStream::connect(receiver.listening_on).await.unwrap();
        let mut byte = [0u8; 1];
        let read = idle.read(&mut byte).await;
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert!(started.elapsed() >= CONNECTION_TIME, "{:?}", started.elapsed());
    }

    #[tokio::test]
    async fn a_notification_without_the_secret_is_refused_and_a_large_one_is_not_read() {
        let receiver = receiver().await;
        assert!(answer_to(receiver.listening_on, FORGED)
            .await
            .starts_with("HTTP/1.1 401"));
        let large = format!(
            "POST /hooks HTTP/1.1\r\nhost: x\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{}",
            LARGEST_NOTIFICATION + 1,
            "x".repeat(LARGEST_NOTIFICATION + 1)
        );
        assert!(answer_to(receiver.listening_on, &large)
            .await
            .starts_with("HTTP/1.1 413"));
        assert!(receiver.notify.inbox().is_empty());
    }

    #[test]
    fn each_secret_is_new_and_long_enough_to_check_notifications() {
        let (a, b) = (fresh_secret().unwrap(), fresh_secret().unwrap());
        assert_ne!(a, b);
        assert_eq!(a.len(), 32);
        assert!(a.chars().any(|c| c.is_ascii_lowercase()) || a.chars().any(|c| c.is_ascii_uppercase()));
        assert!(Verifier::new(a.as_str()).is_ok());
    }
}
