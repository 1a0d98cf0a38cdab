//! **A test double of the service** (feature `mock`): an in-process HTTP
//! emulator on 127.0.0.1. It is not the service and never claims to be: every
//! answer carries `x-genapi-mock: true`, and its images say "MOCK".
//!
//! It behaves as the contract and the service's known behaviour say, so the
//! client, your own code and clients in other languages can be tested
//! against it:
//!
//! - **Auth**: `x-key` must be a configured key (403 otherwise); a key can be
//!   limited to some operations (403 elsewhere).
//! - **Validation** from `openapi.json` itself (or a document you pass), all
//!   errors at once, as 422 `{"detail":[{"type","loc","msg","input"}]}`.
//! - **Lifecycle**: UUID ids, an absolute `polling_url` on the mock's origin,
//!   `Pending` → `Generating` (with `progress`) → `Ready` after a configurable
//!   duration; `Task not found` for unknown ids and for tasks expired
//!   `task_ttl` after finishing.
//! - **Results**: a deterministic image per (seed, prompt, size) in the
//!   requested format and size, behind a signed address that stops working
//!   10 minutes after issue on the mock clock ([`MockService::advance`]).
//! - **Prices** (illustrative only, not the service's): cost =
//!   `price_per_mp` × (input + output megapixels). The older families
//!   (dev, pro-1.1, ultra, fill, expand, kontext) report cost only on the poll
//!   result, as the live service does.
//! - **Scripted outcomes** by a marker in the prompt: `[mock:error]`,
//!   `[mock:request-moderated]`, `[mock:content-moderated]`, and
//!   `[mock:status=NAME]` for an in-progress status the client does not know.
//! - **Limits**: 402 once a configured credit balance is spent; 429 beyond
//!   `max_active_tasks` active tasks per key.
//! - **Faults** ([`Fault`]): delays, any status (e.g. 503 with
//!   `Retry-After`), a dropped connection, a malformed body, a redirect.
//! - **Webhooks**: on completion, a JSON POST carrying both known schemes (the
//!   `X-Webhook-Secret` echo and Standard Webhooks signature headers),
//!   retried with bounded backoff, redirects never followed, loopback only
//!   unless allowed.
//! - **Request log** ([`MockService::requests`]), with the key redacted.
//! - **Control over HTTP**, for tests in other languages: `POST /mock/faults`
//!   with `{"path_prefix": "/v1/get_result", "status": 503, "retry_after": 1,
//!   "times": 2}` (or `delay_ms`, `drop_connection`, `malformed_body`,
//!   `redirect` instead of `status`), and `POST /mock/clock/advance` with
//!   `{"seconds": 601}`.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> genapi::Result<()> {
//! use genapi::api::types::Gen2ProRequest;
//! let mock = genapi::mock::MockService::start().await?;
//! let output = mock.client()?.run(Gen2ProRequest::builder().prompt("a lighthouse")).await?;
//! let image = output.bytes().await?;
//! assert_eq!(genapi::dimensions(&image), Some((1024, 1024)));
//! mock.stop().await;
//! # Ok(()) }
//! ```

mod deliver;
mod render;
mod routes;
mod state;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use state::Delivery;
use state::{Clock, State};

use crate::error::{Error, Result};

/// A request the mock received.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggedRequest {
    /// HTTP method.
    pub method: String,
    /// Path, without the query.
    pub path: String,
    /// Query string, if any.
    pub query: Option<String>,
    /// Headers, lowercase names; the value of `x-key` is replaced by
    /// `[redacted]` so logs never hold a key.
    pub headers: Vec<(String, String)>,
    /// Body as text (lossy); a `webhook_secret` value is replaced by
    /// `[redacted]`.
    pub body: String,
}

impl LoggedRequest {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// What an injected fault does.
#[derive(Clone, Debug, PartialEq)]
pub enum FaultKind {
    /// Answer with this status, body and optional `Retry-After` value.
    Status {
        /// HTTP status.
        status: u16,
        /// `Retry-After` header value, if any.
        retry_after: Option<String>,
        /// Body.
        body: String,
    },
    /// Wait this long, then handle the request normally.
    Delay(Duration),
    /// Send headers, then break the connection mid-body.
    DropConnection,
    /// Answer 200 with a body that is not JSON.
    MalformedBody,
    /// Answer 307 to this address.
    Redirect(String),
}

/// A fault applied to the next `times` requests matching `method` and `path`.
#[derive(Clone, Debug, PartialEq)]
pub struct Fault {
    /// Method to match, or any.
    pub method: Option<String>,
    /// Path prefix to match.
    pub path_prefix: String,
    /// How many requests it applies to.
    pub times: usize,
    /// What it does.
    pub kind: FaultKind,
}

impl Fault {
    /// A fault on requests whose path starts with `path_prefix`.
    pub fn on(path_prefix: impl Into<String>, kind: FaultKind) -> Fault {
        Fault {
            method: None,
            path_prefix: path_prefix.into(),
            times: 1,
            kind,
        }
    }
    /// Only for this method.
    pub fn method(mut self, method: &str) -> Fault {
        self.method = Some(method.to_uppercase());
        self
    }
    /// For this many requests.
    pub fn times(mut self, times: usize) -> Fault {
        self.times = times.max(1);
        self
    }
    /// A status fault with an empty JSON body.
    pub fn status(path_prefix: impl Into<String>, status: u16) -> Fault {
        Fault::on(
            path_prefix,
            FaultKind::Status {
                status,
                retry_after: None,
                body: "{}".into(),
            },
        )
    }
    /// 503 with `Retry-After` (seconds).
    pub fn unavailable(path_prefix: impl Into<String>, retry_after_secs: u64) -> Fault {
        Fault::on(
            path_prefix,
            FaultKind::Status {
                status: 503,
                retry_after: Some(retry_after_secs.to_string()),
                body: r#"{"detail":"Service overloaded (mock)"}"#.into(),
            },
        )
    }
    fn matches(&self, method: &str, path: &str) -> bool {
        self.method.as_deref().is_none_or(|m| m == method) && path.starts_with(&self.path_prefix)
    }
}

/// Settings of a [`MockService`].
#[derive(Clone)]
pub struct MockConfig {
    /// Keys and, for each, the operationIds it may use (`None`: all).
    pub keys: Vec<(String, Option<Vec<String>>)>,
    /// Task duration when `durations` has no entry for the operation.
    pub default_duration: Duration,
    /// Task duration per operationId.
    pub durations: HashMap<String, Duration>,
    /// Credit balance; `None` for unlimited.
    pub credits: Option<f64>,
    /// Illustrative price in credits per megapixel (input + output).
    pub price_per_mp: f64,
    /// Active tasks per key before 429.
    pub max_active_tasks: usize,
    /// How long a finished task stays known (then `Task not found`).
    pub task_ttl: Duration,
    /// Validity of a signed result address.
    pub result_url_validity: Duration,
    /// Webhook deliveries may go to non-loopback hosts.
    pub allow_remote_webhooks: bool,
    /// Delivery attempts per webhook.
    pub webhook_attempts: u32,
    /// Delay before the first webhook retry; doubles each time.
    pub webhook_backoff: Duration,
    /// The OpenAPI document to validate with (default: the embedded one).
    pub document: Option<String>,
    /// Report `progress` while tasks run (the live service does on most models).
    pub report_progress: bool,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            keys: vec![("mock-key".to_string(), None)],
            default_duration: Duration::from_millis(300),
            durations: HashMap::new(),
            credits: None,
            price_per_mp: 1.5,
            max_active_tasks: 24,
            task_ttl: Duration::from_secs(20 * 60),
            result_url_validity: Duration::from_secs(10 * 60),
            allow_remote_webhooks: false,
            webhook_attempts: 4,
            webhook_backoff: Duration::from_millis(100),
            document: None,
            report_progress: true,
        }
    }
}

impl std::fmt::Debug for MockConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys are secrets even in a test double.
        let keys: Vec<String> = self
            .keys
            .iter()
            .map(|(_, ops)| match ops {
                Some(ops) => format!("[redacted] limited to {ops:?}"),
                None => "[redacted]".to_string(),
            })
            .collect();
        f.debug_struct("MockConfig")
            .field("keys", &keys)
            .field("default_duration", &self.default_duration)
            .field("durations", &self.durations)
            .field("credits", &self.credits)
            .field("price_per_mp", &self.price_per_mp)
            .field("max_active_tasks", &self.max_active_tasks)
            .field("task_ttl", &self.task_ttl)
            .field("report_progress", &self.report_progress)
            .finish_non_exhaustive()
    }
}

/// A running mock service.
pub struct MockService {
    base_url: String,
    state: Arc<State>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    server: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for MockService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockService")
            .field("base_url", &self.base_url)
            .field("config", &self.state.config)
            .finish_non_exhaustive()
    }
}

impl MockService {
    /// Starts a mock with default settings on an ephemeral loopback port.
    pub async fn start() -> Result<MockService> {
        MockService::start_with(
            MockConfig::default(),
            "127.0.0.1:0".parse().map_err(|_| Error::Config("bad address".into()))?,
        )
        .await
    }

    /// Starts a mock with these settings on `addr` (port 0 for ephemeral).
    pub async fn start_with(config: MockConfig, addr: SocketAddr) -> Result<MockService> {
        let document = match &config.document {
            Some(text) => {
                crate::validate::Document::parse(text).map_err(|e| Error::Config(format!("mock document: {e}")))?
            }
            None => crate::validate::Document::embedded().clone(),
        };
        if config.keys.is_empty() {
            return Err(Error::Config("the mock needs at least one key".into()));
        }
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| Error::Config(format!("mock cannot listen on {addr}: {e}")))?;
        let local = listener
            .local_addr()
            .map_err(|e| Error::Config(format!("mock address: {e}")))?;
        let base_url = format!("http://{local}");
        let state = Arc::new(State {
            credits: Mutex::new(config.credits),
            config,
            operations: document.operations(),
            document,
            clock: Clock::default(),
            tasks: Mutex::new(HashMap::new()),
            faults: Mutex::new(Vec::new()),
            log: Mutex::new(Vec::new()),
            deliveries: Mutex::new(Vec::new()),
            // Signs result addresses of a test double: unpredictability per run is
            // all that is needed, not cryptographic strength.
            signing_key: std::array::from_fn(|_| fastrand::u8(..)),
        });
        let app = routes::router(state.clone(), base_url.clone());
        let (shutdown, stopped) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async {
                let _ = stopped.await;
            });
            if let Err(error) = serve.await {
                tracing::warn!(%error, "mock server stopped with an error");
            }
        });
        Ok(MockService {
            base_url,
            state,
            shutdown: Some(shutdown),
            server: Some(server),
        })
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The first configured key (valid for every operation by default).
    pub fn key(&self) -> &str {
        &self.state.config.keys[0].0
    }

    /// A client builder pointed at this mock with its key.
    pub fn client_builder(&self) -> crate::ClientBuilder {
        crate::Client::builder().api_key(self.key()).base_url(&self.base_url)
    }

    /// A client pointed at this mock.
    pub fn client(&self) -> Result<crate::Client> {
        self.client_builder().build()
    }

    /// Moves the mock clock forward (tasks finish, addresses expire).
    pub fn advance(&self, by: Duration) {
        self.state.clock.advance(by);
    }

    /// Adds a fault.
    pub fn inject(&self, fault: Fault) {
        if let Ok(mut faults) = self.state.faults.lock() {
            faults.push(fault);
        }
    }

    /// Sets the credit balance (`None`: unlimited).
    pub fn set_credits(&self, credits: Option<f64>) {
        if let Ok(mut balance) = self.state.credits.lock() {
            *balance = credits;
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.state.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Requests matching a method and a path.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.requests()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count()
    }

    /// Webhook deliveries so far.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.state.deliveries.lock().map(|d| d.clone()).unwrap_or_default()
    }

    /// Stops the server and waits for it.
    pub async fn stop(mut self) {
        self.shutdown_now();
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
    }

    fn shutdown_now(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

impl Drop for MockService {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}
