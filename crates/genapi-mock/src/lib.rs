//! **A test double of the service**: an in-process HTTP
//! emulator on loopback. It is not the service and never claims to be: every
//! answer carries `x-genapi-mock: true`, and its images say "MOCK".
//!
//! It behaves as the contract and the service's known behaviour say, so the
//! client, your own code and clients in other languages can be tested
//! against it:
//!
//! - **Auth**: `x-key` must be a configured key (403 otherwise); a key can be
//!   limited to some operations (403 elsewhere).
//! - **Validation** from `openapi.json` itself (or a document you pass), all
//!   errors at once, as 422 `{"detail":[{"type","loc","msg","input"}]}`;
//!   an expand whose result (the image plus the four sides) would be above
//!   4 MP is a 422 that names the bound.
//! - **Three hosts**, as the service has: submissions on the API origin
//!   ([`MockService::base_url`]); an absolute `polling_url` on a second,
//!   "regional" listener ([`MockService::regional_url`]), which takes the key
//!   and which a client must trust ([`MockService::trusted_origins`]); result
//!   samples on a third, "delivery" listener that needs no key (one sent there
//!   is counted in [`MockStats::keys_sent_to_delivery`]). The API origin
//!   answers 404 for a regional task; it serves `GET /v1/get_result?id=` for
//!   webhook submissions, whose answer has no `polling_url`.
//! - **Lifecycle**: UUID ids, `Pending` (with `progress`) → the final status
//!   after a configurable duration; `Task not found` for unknown ids and for
//!   tasks expired `task_ttl` after finishing. The observed extras
//!   (`Reasoning`/`Generating`, video's `Queued`/`Uploading`) only with
//!   [`MockConfig::observed_statuses`].
//! - **Results**: a deterministic image per (seed, prompt, size) in the
//!   requested format and size (area capped at the contract's 4 MP, rendered
//!   off the async threads), behind a signed address that stops working 10
//!   minutes after issue on the mock clock ([`MockService::advance`]); video
//!   results are a minimal `video/mp4` valid about 2 hours. The seed given is
//!   echoed as given (any integer up to 2^64−1).
//! - **Prices** (illustrative only, not the service's): cost =
//!   `price_per_mp` × (input + output megapixels). The older families
//!   (dev, pro-1.1, ultra, fill, expand, kontext) report cost only on the poll
//!   result, as the live service does.
//! - **Scripted outcomes** by a marker in the prompt: `[mock:error]`,
//!   `[mock:request-moderated]`, `[mock:content-moderated]`, and
//!   `[mock:status=NAME]` for an in-progress status the client does not know,
//!   `[mock:duration_ms=N]` for one task's duration (at most an hour).
//!   Neither moderation outcome is charged.
//! - **Limits**: 402 once a configured credit balance is spent; 429 beyond
//!   `max_active_tasks` active tasks per key; 413 (JSON) for a body over
//!   `max_body_bytes` (128 MiB: eight large base64 images fit).
//! - **Faults** ([`Fault`]): delays (on the mock clock, which
//!   [`MockService::advance`] moves past them), any status (e.g. 503 with
//!   `Retry-After`), a dropped connection, a malformed body, a redirect.
//! - **Webhooks**: on completion, a JSON POST carrying both known schemes (the
//!   `X-Webhook-Secret` echo and Standard Webhooks signature headers, signed
//!   with the real wall clock however far the mock clock was moved),
//!   retried with bounded backoff, redirects never followed, and only to the
//!   origins listed in [`MockConfig::webhook_targets`] (the secret goes with
//!   it). A few workers share one HTTP client and a bounded queue
//!   ([`MockConfig::webhook_workers`], [`MockConfig::webhook_queue`]), so a
//!   receiver that never answers delays webhooks, not submissions.
//! - **Request log** ([`MockService::requests`]), a ring bounded in entries
//!   and in bytes ([`MockConfig::request_log_bytes`]), with the key and
//!   webhook secret redacted and long bodies truncated; counters of what
//!   the service saw ([`MockService::stats`], `GET /mock/stats`).
//! - **Control over HTTP** (with the mock's key in `x-key`), for tests in other
//!   languages: `POST /mock/faults`
//!   with `{"path_prefix": "/v1/get_result", "status": 503, "retry_after": 1,
//!   "times": 2}` (or `delay_ms`, `drop_connection`, `lose_answer`, `truncated_answer`,
//!   `stall_ms`, `malformed_body`, `redirect` instead of `status`), and `POST /mock/clock/advance` with
//!   `{"seconds": 601}` (at most a century in all), `GET /mock/stats`, and
//!   `GET /mock/tasks` (the tasks created: id, prompt, submission time, size, seed).
//! - **Bounded state**: tasks are forgotten once their results expire, and it
//!   listens only on loopback unless [`MockConfig::allow_remote`] is set
//!   (then it needs a key of its own and relays webhooks to listed origins
//!   only, answering a `webhook_url` elsewhere with a 422).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use genapi::api::types::Gen2ProRequest;
//! let mock = genapi_mock::MockService::start().await?;
//! let output = mock.client()?.run(Gen2ProRequest::builder().prompt("a lighthouse")).await?;
//! let image = output.bytes().await?;
//! let size = image::ImageReader::new(std::io::Cursor::new(&image)).with_guessed_format()?.into_dimensions()?;
//! assert_eq!(size, (1024, 1024));
//! mock.stop().await;
//! # Ok(()) }
//! ```

/// The header the mock puts on every answer, `x-genapi-mock: true`, so a
/// program can tell a test double's answers from the service's (with
/// `genapi::ClientBuilder::observe_headers`) and never present mock results
/// as real ones.
pub const MOCK_HEADER: &str = "x-genapi-mock";

mod deliver;
mod image_size;
mod outbox;
mod render;
mod replay;
mod results;
mod routes;
mod state;
mod validate;
mod webhook_targets;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub use replay::Replay;
use state::{Clock, State};
pub use state::{CreatedTask, Delivery};
pub use webhook_targets::{WebhookTarget, WebhookTargetError};

/// The key a mock takes unless given others: fine on loopback, refused on a
/// mock others can reach ([`MockConfig::allow_remote`]), where anyone who
/// read these docs could use it.
pub const DEFAULT_KEY: &str = "mock-key";

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(Error);

/// Why a mock could not start.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A listener could not be bound (the address is taken or not local).
    #[error("the mock cannot listen on {addr}: {source}")]
    Listen {
        /// The address asked for.
        addr: SocketAddr,
        /// What the system said.
        source: std::io::Error,
    },
    /// The settings cannot work (no key, a non-loopback address not
    /// allowed, a mock others can reach with the default key or relaying to
    /// loopback, an unusable webhook target, a document that cannot be read).
    #[error("the mock's settings: {0}")]
    Config(String),
}

/// The mock's result.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Bytes of a request body kept in the request log.
pub const LOGGED_BODY_LIMIT: usize = 16 * 1024;

/// A request the mock received.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct LoggedRequest {
    /// Which listener took it: `"api"`, `"regional"` or `"delivery"`.
    pub origin: String,
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
    /// `[redacted]`, and only the first [`LOGGED_BODY_LIMIT`] bytes are kept.
    pub body: String,
}

impl LoggedRequest {
    /// Memory the entry holds, as counted against
    /// [`MockConfig::request_log_bytes`].
    fn held_bytes(&self) -> usize {
        let strings = [&self.origin, &self.method, &self.path, &self.body]
            .into_iter()
            .chain(&self.query)
            .chain(self.headers.iter().flat_map(|(name, value)| [name, value]));
        std::mem::size_of::<LoggedRequest>()
            + self.headers.capacity() * std::mem::size_of::<(String, String)>()
            + strings.map(String::capacity).sum::<usize>()
    }

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
#[non_exhaustive]
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
    /// Wait this long on the mock clock, then handle the request normally.
    /// [`MockService::advance`] (or `POST /mock/clock/advance`) cuts the
    /// wait short: a test can hold a request for an hour and release it
    /// when it chooses.
    Delay(Duration),
    /// Send headers, then break the connection mid-body.
    DropConnection,
    /// Handle the request normally (a submission creates its task), then
    /// break the connection before the answer's body arrives: the service
    /// acted, and the client never hears of it.
    LoseAnswer,
    /// Answer 200 with a body that is not JSON.
    MalformedBody,
    /// Handle the request normally (a submission creates its task), then
    /// send the answer's headers (its full `Content-Length` included) and
    /// the first half of its body, and break the connection: an answer
    /// truncated in flight.
    TruncatedAnswer,
    /// Handle the request normally (a submission creates its task), then
    /// send the answer's headers and the first half of its body, and hold
    /// the rest this long on the mock clock: an answer that stalls midway.
    StalledAnswer(Duration),
    /// Answer 307 to this address.
    Redirect(String),
}

/// A fault applied to the next `times` requests matching `method` and `path`.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
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
    /// Matches requests whose path starts with this prefix.
    pub fn path_prefix(mut self, path_prefix: impl Into<String>) -> Fault {
        self.path_prefix = path_prefix.into();
        self
    }
    /// Does this.
    pub fn kind(mut self, kind: FaultKind) -> Fault {
        self.kind = kind;
        self
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

/// Settings of a [`MockService`], set with chained calls named after what
/// they set: `MockConfig::default().key("k").credits(Some(5.0))`.
#[derive(Clone)]
#[non_exhaustive]
pub struct MockConfig {
    /// Keys and, for each, the operationIds it may use (`None`: all).
    pub(crate) keys: Vec<(String, Option<Vec<String>>)>,
    /// Task duration when `durations` has no entry for the operation.
    pub(crate) default_duration: Duration,
    /// Task duration per operationId.
    pub(crate) durations: HashMap<String, Duration>,
    /// Credit balance; `None` for unlimited.
    pub(crate) credits: Option<f64>,
    /// Illustrative price in credits per megapixel (input + output).
    pub(crate) price_per_mp: f64,
    /// Active tasks per key before 429.
    pub(crate) max_active_tasks: usize,
    /// How long a finished task stays known (then `Task not found`).
    pub(crate) task_ttl: Duration,
    /// Validity of a signed image result address (the service: 10 minutes).
    pub(crate) result_url_validity: Duration,
    /// Validity of a signed video result address (the service: about 2 hours).
    pub(crate) video_result_url_validity: Duration,
    /// Webhook deliveries may also go to listed non-loopback hosts.
    pub(crate) allow_remote_webhooks: bool,
    pub(crate) webhooks_to_loopback: bool,
    /// Origins (`http://127.0.0.1:PORT`) webhooks may be delivered to; a
    /// `webhook_url` elsewhere is never called, since the delivery carries
    /// the secret. Empty by default.
    pub(crate) webhook_targets: Vec<String>,
    /// Delivery attempts per webhook.
    pub(crate) webhook_attempts: u32,
    /// Delay before the first webhook retry; doubles each time.
    pub(crate) webhook_backoff: Duration,
    /// Longest one delivery attempt may take, connecting included.
    pub(crate) webhook_timeout: Duration,
    /// Deliveries in flight at once.
    pub(crate) webhook_workers: usize,
    /// Notifications waiting for a worker.
    pub(crate) webhook_queue: usize,
    /// The OpenAPI document to validate with (default: the embedded one).
    pub(crate) document: Option<String>,
    /// Report `progress` while tasks run (the live service does on most models).
    pub(crate) report_progress: bool,
    /// Report the observed extra in-progress statuses (`Reasoning` then
    /// `Generating`; video: `Queued`, `Generating`, `Uploading`) instead of
    /// `Pending` only.
    pub(crate) observed_statuses: bool,
    /// Largest request body accepted; larger ones get 413.
    pub(crate) max_body_bytes: usize,
    /// Requests kept by the request log (the oldest are dropped).
    pub(crate) request_log_capacity: usize,
    /// Bytes the request log may hold in all (its entries' bodies, headers
    /// and the rest); the oldest entries are dropped to stay within it.
    /// Default 16 MiB.
    pub(crate) request_log_bytes: usize,
    /// Allow listening on a non-loopback address.
    pub(crate) allow_remote: bool,
    /// A recording to answer from, instead of simulating tasks.
    pub(crate) replay: Option<Arc<Replay>>,
}

impl Default for MockConfig {
    fn default() -> Self {
        MockConfig {
            keys: vec![(DEFAULT_KEY.to_string(), None)],
            default_duration: Duration::from_millis(300),
            durations: HashMap::new(),
            credits: None,
            price_per_mp: 1.5,
            max_active_tasks: 24,
            task_ttl: Duration::from_secs(20 * 60),
            result_url_validity: Duration::from_secs(10 * 60),
            video_result_url_validity: Duration::from_secs(2 * 3600),
            allow_remote_webhooks: false,
            webhooks_to_loopback: false,
            webhook_targets: Vec::new(),
            webhook_attempts: 4,
            webhook_backoff: Duration::from_millis(100),
            webhook_timeout: Duration::from_secs(10),
            webhook_workers: 8,
            webhook_queue: 1024,
            document: None,
            report_progress: true,
            observed_statuses: false,
            max_body_bytes: 128 * 1024 * 1024,
            request_log_capacity: 1024,
            request_log_bytes: 16 * 1024 * 1024,
            allow_remote: false,
            replay: None,
        }
    }
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, $name: $ty) -> Self {
                self.$name = $name;
                self
            }
        )*
    };
}

impl MockConfig {
    setters! {
        /// Keys and, for each, the operationIds it may use (`None`: all).
        keys: Vec<(String, Option<Vec<String>>)>;
        /// Task duration when `durations` has no entry for the operation.
        default_duration: Duration;
        /// Task duration per operationId.
        durations: HashMap<String, Duration>;
        /// Credit balance; `None` for unlimited.
        credits: Option<f64>;
        /// Illustrative price in credits per megapixel (input + output).
        price_per_mp: f64;
        /// Active tasks per key before 429.
        max_active_tasks: usize;
        /// How long a finished task stays known (then `Task not found`).
        task_ttl: Duration;
        /// Validity of a signed image result address (the service: 10 minutes).
        result_url_validity: Duration;
        /// Validity of a signed video result address (the service: about 2 hours).
        video_result_url_validity: Duration;
        /// Webhook deliveries may also go to listed non-loopback hosts.
        allow_remote_webhooks: bool;
        /// Webhook deliveries may go to any loopback address, listed or
        /// not: a receiver on this machine, as `genapi mock` on loopback
        /// serves them. Off by default (a test lists its receiver); refused
        /// with [`MockConfig::allow_remote`], where a submission from another
        /// machine would make the mock a relay to this machine's services.
        webhooks_to_loopback: bool;
        /// Origins (`http://127.0.0.1:PORT`) webhooks may be delivered to; a
        /// `webhook_url` elsewhere is never called, since the delivery carries
        /// the secret. Empty by default.
        webhook_targets: Vec<String>;
        /// Delivery attempts per webhook.
        webhook_attempts: u32;
        /// Delay before the first webhook retry; doubles each time.
        webhook_backoff: Duration;
        /// Longest one delivery attempt may take, connecting included
        /// (default 10 s): a receiver that never answers holds a worker no
        /// longer.
        webhook_timeout: Duration;
        /// Deliveries in flight at once, each on its own connection (default
        /// 8; at least 1). All go through one HTTP client.
        webhook_workers: usize;
        /// Notifications waiting for a free worker (default 1024; at least 1).
        /// One that finds the queue full is dropped: recorded as a delivery
        /// of no attempts and counted in [`MockStats::webhooks_dropped`].
        webhook_queue: usize;
        /// The OpenAPI document to validate with (default: the embedded one).
        document: Option<String>;
        /// Report `progress` while tasks run (the live service does on most models).
        report_progress: bool;
        /// Report the observed extra in-progress statuses (`Reasoning` then
        /// `Generating`; video: `Queued`, `Generating`, `Uploading`) instead of
        /// `Pending` only.
        observed_statuses: bool;
        /// Largest request body accepted; larger ones get 413.
        max_body_bytes: usize;
        /// Requests kept by the request log (the oldest are dropped).
        request_log_capacity: usize;
        /// Bytes the request log may hold in all (its entries' bodies, headers
        /// and the rest); the oldest entries are dropped to stay within it.
        /// Default 16 MiB.
        request_log_bytes: usize;
        /// Allow listening on a non-loopback address. Such a mock must have
        /// keys of its own (not [`DEFAULT_KEY`]), delivers webhooks only to
        /// [`MockConfig::webhook_targets`], and answers a `webhook_url`
        /// elsewhere with a 422 naming it.
        allow_remote: bool;
    }

    /// Replaces the keys with this one key, valid for every operation.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.keys = vec![(key.into(), None)];
        self
    }

    /// Adds a key limited to these operationIds.
    pub fn limited_key(mut self, key: impl Into<String>, operations: &[&str]) -> Self {
        self.keys
            .push((key.into(), Some(operations.iter().map(|o| o.to_string()).collect())));
        self
    }

    /// Answers from a recording instead of simulating tasks (see
    /// [`Replay`]): submissions that match recorded ones get the recorded
    /// answers, polls of their tasks step through the recorded statuses, and
    /// results are the recorded bytes or a placeholder of the recorded format
    /// and dimensions. Keys and faults work as without it.
    ///
    /// ```no_run
    /// let text = std::fs::read_to_string("run.har").unwrap();
    /// let config = genapi_mock::MockConfig::default().replay(genapi_mock::Replay::from_har(&text).unwrap());
    /// ```
    pub fn replay(mut self, replay: Replay) -> Self {
        self.replay = Some(Arc::new(replay));
        self
    }

    /// Sets the duration of one operation's tasks.
    pub fn duration_for(mut self, operation_id: impl Into<String>, duration: Duration) -> Self {
        self.durations.insert(operation_id.into(), duration);
        self
    }

    /// Adds an origin webhooks may be delivered to (see
    /// [`MockConfig::webhook_targets`]); a URL's path and query are ignored.
    /// A value that is not an `http` or `https` URL, or one off this machine
    /// without [`MockConfig::allow_remote_webhooks`], makes the mock refuse
    /// to start ([`WebhookTarget`] tells them apart beforehand).
    pub fn webhook_target(mut self, origin: impl AsRef<str>) -> Self {
        let origin = origin.as_ref();
        let origin = WebhookTarget::parse(origin)
            .map(|target| target.origin().to_string())
            .unwrap_or_else(|_| origin.to_string());
        self.webhook_targets.push(origin);
        self
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
            .field("observed_statuses", &self.observed_statuses)
            .field("webhook_targets", &self.webhook_targets)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("request_log_capacity", &self.request_log_capacity)
            .field("allow_remote", &self.allow_remote)
            .field("replay", &self.replay.is_some())
            .finish_non_exhaustive()
    }
}

/// What the mock saw, as counted by [`MockService::stats`] and served as JSON
/// by `GET /mock/stats`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct MockStats {
    /// Accepted submissions, by path.
    pub submissions: BTreeMap<String, u64>,
    /// Poll requests answered (`GET /v1/get_result`, on any host).
    pub polls: u64,
    /// Submissions refused with 429 (too many active tasks).
    pub too_many_requests: u64,
    /// Submissions refused with 402 (insufficient credits).
    pub payment_required: u64,
    /// Results served by the delivery host.
    pub downloads: u64,
    /// Requests to the delivery host that carried an `x-key` (should stay 0).
    pub keys_sent_to_delivery: u64,
    /// Webhook deliveries refused because the address was not configured.
    pub webhooks_refused: u64,
    /// Notifications waiting for a free delivery worker.
    pub webhooks_waiting: u64,
    /// Notifications dropped because [`MockConfig::webhook_queue`] were
    /// already waiting.
    pub webhooks_dropped: u64,
    /// Tasks still in progress.
    pub active_tasks: u64,
    /// The most tasks in progress at once since the mock started, over all
    /// keys: what a client's active-task limit is judged by.
    pub peak_active_tasks: u64,
    /// Tasks remembered (pruned once their results expire).
    pub tasks_kept: u64,
}

/// A running mock service.
pub struct MockService {
    base_url: String,
    regional_url: String,
    delivery_url: String,
    state: Arc<State>,
    shutdown: Option<tokio::sync::watch::Sender<bool>>,
    servers: Vec<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for MockService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MockService")
            .field("base_url", &self.base_url)
            .field("regional_url", &self.regional_url)
            .field("delivery_url", &self.delivery_url)
            .field("config", &self.state.config)
            .finish_non_exhaustive()
    }
}

async fn listen(addr: SocketAddr) -> Result<(tokio::net::TcpListener, String)> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Listen { addr, source })?;
    let local = listener.local_addr().map_err(|source| Error::Listen { addr, source })?;
    Ok((listener, format!("http://{local}")))
}

/// The address `offset` ports after `addr`, where a host of the mock other
/// than the API's listens: ephemeral when `addr`'s port is.
fn beside(addr: SocketAddr, offset: u16) -> Result<SocketAddr> {
    if addr.port() == 0 {
        return Ok(SocketAddr::new(addr.ip(), 0));
    }
    match addr.port().checked_add(offset) {
        Some(port) => Ok(SocketAddr::new(addr.ip(), port)),
        None => Err(Error::Config(format!(
            "the mock's polling and delivery hosts listen on the two ports after {addr}'s; choose a port below 65534"
        ))),
    }
}

/// What a mock needs from its settings before it listens (the document it
/// validates with, the webhook targets), or why they cannot work: no key, a
/// non-loopback address not allowed, a mock others can reach with a key
/// anyone knows, an unusable webhook target, a document that cannot be read.
fn checked(config: &MockConfig, addr: SocketAddr) -> Result<(Arc<validate::Rules>, Vec<WebhookTarget>)> {
    if !addr.ip().is_loopback() {
        if !config.allow_remote {
            return Err(Error::Config(format!(
                "the mock listens only on loopback; {addr} is not (allow remote binding explicitly to use it)"
            )));
        }
        tracing::warn!(%addr, "the mock (a test double) is listening on a non-loopback address");
    }
    if config.keys.is_empty() {
        return Err(Error::Config("the mock needs at least one key".into()));
    }
    if config.allow_remote && config.keys.iter().any(|(key, _)| key.is_empty() || key == DEFAULT_KEY) {
        return Err(Error::Config(format!(
            "a mock others can reach needs keys of its own: the default {DEFAULT_KEY:?} is in its docs, and an \
             empty key is none"
        )));
    }
    let targets = webhook_targets::configured(config).map_err(Error::Config)?;
    let document = match &config.document {
        Some(text) => Arc::new(validate::Rules::parse(text).map_err(|e| Error::Config(format!("mock document: {e}")))?),
        None => validate::Rules::embedded().map_err(|e| Error::Config(format!("the embedded document: {e}")))?,
    };
    Ok((document, targets))
}

impl MockService {
    /// Starts a mock with default settings on ephemeral loopback ports.
    pub async fn start() -> Result<MockService> {
        MockService::start_with(
            MockConfig::default(),
            SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, 0)),
        )
        .await
    }

    /// Starts a mock with these settings: the API origin on `addr`, the
    /// regional and delivery hosts on the two ports after it of the same
    /// address (all three ephemeral when `addr`'s port is 0), so a mock
    /// started again on the same port has the same origins, and a client
    /// configured for it once keeps working. A non-loopback `addr` is
    /// refused unless [`MockConfig::allow_remote`] is set.
    pub async fn start_with(config: MockConfig, addr: SocketAddr) -> Result<MockService> {
        let (document, webhook_targets) = checked(&config, addr)?;
        let (shutdown, stopped) = tokio::sync::watch::channel(false);
        let (outbox, inbound) = outbox::Outbox::new(&config, stopped.clone());
        let (api, base_url) = listen(addr).await?;
        let (regional, regional_url) = listen(beside(addr, 1)?).await?;
        let (delivery, delivery_url) = listen(beside(addr, 2)?).await?;
        let state = Arc::new(State {
            credits: Mutex::new(config.credits),
            config,
            document,
            clock: Clock::default(),
            tasks: Mutex::new(Default::default()),
            faults: Mutex::new(Vec::new()),
            log: Mutex::new(state::RequestLog::default()),
            deliveries: Mutex::new(VecDeque::new()),
            webhook_targets,
            outbox,
            counters: Mutex::new(Default::default()),
            rendered: Mutex::new(VecDeque::new()),
            render_permits: tokio::sync::Semaphore::new(2),
            // Signs result addresses of a test double: unpredictability per run is
            // all that is needed, not cryptographic strength.
            signing_key: std::array::from_fn(|_| fastrand::u8(..)),
            regional_url: regional_url.clone(),
            delivery_url: delivery_url.clone(),
        });
        let mut servers: Vec<_> = [
            (api, routes::Origin::Api),
            (regional, routes::Origin::Regional),
            (delivery, routes::Origin::Delivery),
        ]
        .into_iter()
        .map(|(listener, origin)| {
            let app = routes::router(state.clone(), origin);
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                    let _ = stopped.wait_for(|stop| *stop).await;
                });
                if let Err(error) = serve.await {
                    tracing::warn!(%error, "mock server stopped with an error");
                }
            })
        })
        .collect();
        servers.extend(deliver::start_workers(&state, inbound));
        Ok(MockService {
            base_url,
            regional_url,
            delivery_url,
            state,
            shutdown: Some(shutdown),
            servers,
        })
    }

    /// The API origin, `http://127.0.0.1:PORT`: the base URL a client uses.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The regional host's origin, where `polling_url` points.
    pub fn regional_url(&self) -> &str {
        &self.regional_url
    }

    /// The delivery host's origin, where `result.sample` points (no key).
    pub fn delivery_url(&self) -> &str {
        &self.delivery_url
    }

    /// Origins a client must trust besides the base URL to send its key
    /// (the regional host: loopback ports are not one registrable domain).
    pub fn trusted_origins(&self) -> Vec<String> {
        vec![self.regional_url.clone()]
    }

    /// The first configured key (valid for every operation by default).
    pub fn key(&self) -> &str {
        &self.state.config.keys[0].0
    }

    /// A client builder configured as a user configures one for the service:
    /// base URL, key, and the regional origin trusted.
    pub fn client_builder(&self) -> genapi::ClientBuilder {
        self.trusted_origins().into_iter().fold(
            genapi::Client::builder().api_key(self.key()).base_url(&self.base_url),
            |builder, origin| builder.trust_origin(origin),
        )
    }

    /// A client pointed at this mock.
    pub fn client(&self) -> genapi::Result<genapi::Client> {
        self.client_builder().build()
    }

    /// Moves the mock clock forward (tasks finish, addresses expire); it
    /// saturates at about a century ahead.
    pub fn advance(&self, by: Duration) {
        self.state.clock.advance(by);
    }

    /// Adds a fault (at most 1024 pending; more are ignored).
    pub fn inject(&self, fault: Fault) {
        self.state.add_fault(fault);
    }

    /// Sets the credit balance (`None`: unlimited).
    pub fn set_credits(&self, credits: Option<f64>) {
        if let Ok(mut balance) = self.state.credits.lock() {
            *balance = credits;
        }
    }

    /// The credit balance (`None`: unlimited).
    pub fn credits(&self) -> Option<f64> {
        self.state.credits.lock().ok().and_then(|c| *c)
    }

    /// The requests still in the log (the newest, within
    /// [`MockConfig::request_log_capacity`] and
    /// [`MockConfig::request_log_bytes`]).
    pub fn requests(&self) -> Vec<LoggedRequest> {
        self.state
            .log
            .lock()
            .map(|l| l.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Logged requests matching a method and a path.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.state
            .log
            .lock()
            .map(|l| l.iter().filter(|r| r.method == method && r.path == path).count())
            .unwrap_or(0)
    }

    /// Counters of what the mock saw (as `GET /mock/stats` serves them).
    pub fn stats(&self) -> MockStats {
        self.state.stats()
    }

    /// The tasks created and not yet forgotten (a task is forgotten once its
    /// results expire), oldest first (as `GET /mock/tasks` serves them).
    pub fn created_tasks(&self) -> Vec<CreatedTask> {
        self.state.created_tasks(None)
    }

    /// Webhook deliveries so far (the last 4096).
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.state
            .deliveries
            .lock()
            .map(|d| d.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Stops the servers and waits for them.
    pub async fn stop(mut self) {
        self.shutdown_now();
        for server in self.servers.drain(..) {
            let _ = server.await;
        }
    }

    fn shutdown_now(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(true);
        }
    }
}

impl Drop for MockService {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}
