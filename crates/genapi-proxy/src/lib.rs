//! # genapi-proxy
//!
//! A reverse proxy in front of the Image Generation and Editing Service that
//! gives any language's SDK genapi's promise: **a submission is paid for
//! once**. Point an SDK's base URL at it (`genapi proxy` starts one); the SDK
//! works unmodified.
//!
//! - **A repeat whose first answer never arrived is answered, not sent.**
//!   An SDK that timed out, or whose connection broke, sends the same
//!   submission again (the same key, path and body). If the first one's
//!   acceptance did not reach its caller, the repeat gets it — the same task,
//!   marked `x-genapi-proxy: replayed` — and the service never sees the
//!   repeat. The proxy never abandons a submission it sent because its
//!   caller went away: it waits for the answer and keeps it. A submission
//!   whose acceptance *was* delivered is another variation when sent again,
//!   and is sent. A submission with an `Idempotency-Key` is one job at its
//!   path for as long as it is remembered, whatever its body.
//! - **An answer that never came is never guessed.** When the request left
//!   and no answer came (the connection broke mid-way, the proxy stopped),
//!   the service may have made the task: a repeat is refused with 409
//!   (`x-genapi-proxy: unknown`) rather than paid again.
//! - **It remembers across restarts**, in a private file
//!   ([`ProxyBuilder::memory_file`]), for a day.
//! - **Polling and result addresses pass through it.** Answers' `polling_url`
//!   and `result.sample` are rewritten to the proxy's own address; the key
//!   goes only where the client's trust rule sends it
//!   ([`genapi::Client::sends_key_to`]), and a caller that sends no key gets
//!   the configured one.
//!
//! It listens on loopback; beyond it only with a key of its own that
//! callers send instead of the service's ([`ProxyBuilder::allow_remote`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let client = genapi::Client::from_env()?;
//! let proxy = genapi_proxy::Proxy::builder(client)
//!     .key(std::env::var("GENAPI_API_KEY")?)
//!     .start("127.0.0.1:8787".parse()?)
//!     .await?;
//! println!("point your SDK at {}", proxy.address());
//! // … later:
//! let summary = proxy.stop().await;
//! println!("{summary}");
//! # Ok(()) }
//! ```

mod addresses;
mod contract;
mod decide;
mod delivery;
mod exchange;
mod handover;
mod identity;
mod key_forms;
mod memory;
mod memory_local;
mod memory_shared;
mod relay;
mod remembered;
mod serving;
mod summary;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use tokio::time::Instant;

pub use contract::Mismatch;
pub use exchange::PROXY_HEADER;
pub use memory_local::MemoryError;
pub use serving::{HEAD_WITHIN, MOST_CONNECTIONS};
pub use summary::Summary;

use addresses::Rewriter;
use memory::Memory;
use relay::Service;
use summary::{Count, Counters};

/// Why a proxy could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The address to listen on is not on this machine's loopback, and
    /// the proxy has no key of its own ([`ProxyBuilder::allow_remote`]).
    #[error(
        "{0} is not a loopback address: anyone who reaches the proxy would spend your credits; give it a key of its \
         own to listen there"
    )]
    NotLoopback(SocketAddr),
    /// The proxy's own key is too short to keep anyone out.
    #[error("the proxy's own key must be at least {MIN_PROXY_KEY} characters")]
    WeakProxyKey,
    /// The address could not be listened on.
    #[error("cannot listen on {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The memory file could not be read.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The ledger database that keeps the shared memory could not be
    /// opened ([`ProxyBuilder::ledger`]).
    #[error("the proxy's shared memory: {0}")]
    Ledger(#[from] genapi_ledger::LedgerError),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] genapi::Error),
}

/// How long [`Proxy::stop`] waits for the answers to submissions it sent.
pub const STOP_WAITS_FOR: std::time::Duration = std::time::Duration::from_secs(60);

/// The fewest bytes of a configured key searched for in answers: shorter
/// words stand in ordinary text, as the client's scrubber holds too.
const SEARCHED_KEY: usize = 8;

/// The fewest characters of the proxy's own key.
pub const MIN_PROXY_KEY: usize = 16;

/// What is told each mismatch of the traffic with the document.
type OnMismatch = Arc<dyn Fn(&Mismatch) + Send + Sync>;

/// Settings of a [`Proxy`].
pub struct ProxyBuilder {
    client: genapi::Client,
    key: Option<genapi::ApiKey>,
    memory_file: Option<PathBuf>,
    ledger: Option<String>,
    on_mismatch: Option<OnMismatch>,
    proxy_key: Option<genapi::ApiKey>,
    record: Option<(PathBuf, genapi::RecordOptions)>,
    most_connections: usize,
    handed_over: std::time::Duration,
}

impl ProxyBuilder {
    /// Writes that an answer reached its caller `after` the caller's
    /// connection took its last bytes (one second unless told): a proxy
    /// killed before leaves the answer owed, and the caller's retry gets it
    /// rather than a second task. A
    /// repeat of a job named by its content waits that long after the first
    /// answer before it is sent as a new one.
    pub fn delivery_written_after(mut self, after: std::time::Duration) -> Self {
        self.handed_over = after;
        self
    }

    /// Serves at most `most` connections at once (from 1 to 65,536;
    /// [`MOST_CONNECTIONS`] unless told): one past it is answered 503
    /// (`x-genapi-proxy: busy`) at once, and nothing of it is sent.
    pub fn most_connections(mut self, most: usize) -> Self {
        self.most_connections = most.clamp(1, 65_536);
        self
    }

    /// Records every exchange relayed to the service in a HAR file at
    /// `path`, as the client records its own
    /// ([`genapi::Client::record_relayed`]): redacted, downloads
    /// summarised; `cargo xtask drift FILE` checks it against the document.
    pub fn record(mut self, path: impl Into<PathBuf>, options: genapi::RecordOptions) -> Self {
        self.record = Some((path.into(), options));
        self
    }

    /// Lets the proxy listen beyond loopback, to callers that send
    /// `proxy_key` as their `x-key`: the proxy checks it, and sends the
    /// configured key ([`ProxyBuilder::key`]) to the service instead. Any
    /// request without it is refused (401), the proxy's own routes
    /// included. At least [`MIN_PROXY_KEY`] characters.
    pub fn allow_remote(mut self, proxy_key: impl Into<String>) -> Self {
        self.proxy_key = Some(genapi::ApiKey::new(proxy_key));
        self
    }

    /// The key given to callers that send none.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(genapi::ApiKey::new(key));
        self
    }

    /// Keeps what the proxy remembers in `path` (a private file, under the
    /// file policy of `genapi-files`), read back at the next start.
    pub fn memory_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.memory_file = Some(path.into());
        self
    }

    /// Shares what the proxy remembers with every proxy given the same
    /// PostgreSQL database at `url` (the ledger of `genapi-ledger`), instead
    /// of a memory file. A memory file given too
    /// ([`ProxyBuilder::memory_file`]) is held, not written: shared with the
    /// other ledger proxies of this machine, refused beside a proxy that
    /// remembers in it alone, and refused while it remembers submissions of
    /// the last day, which the ledger knows nothing of: a caller's retry that reaches another proxy is
    /// answered as the first would answer it, and a proxy that died leaves
    /// nothing another waits on for long (a submission it sent reads as
    /// unknown after the service's longest answer; an acceptance it was
    /// writing is owed to the next caller after a minute).
    pub fn ledger(mut self, url: impl Into<String>) -> Self {
        self.ledger = Some(url.into());
        self
    }

    /// Calls `report` with each new way the traffic differs from
    /// `openapi.json` (a request the document would refuse, an answer it
    /// does not describe), once per operation, direction, field and kind.
    /// The traffic is never changed; [`Summary::contract_mismatches`]
    /// counts them all.
    pub fn on_mismatch(mut self, report: impl Fn(&Mismatch) + Send + Sync + 'static) -> Self {
        self.on_mismatch = Some(Arc::new(report));
        self
    }

    /// Starts the proxy on `address` (port 0: any free port), on loopback
    /// only.
    pub async fn start(self, address: SocketAddr) -> Result<Proxy, StartError> {
        if let Some(key) = &self.proxy_key {
            if key.expose().chars().count() < MIN_PROXY_KEY {
                return Err(StartError::WeakProxyKey);
            }
        } else if !address.ip().is_loopback() {
            return Err(StartError::NotLoopback(address));
        }
        let memory = Arc::new(
            match &self.ledger {
                Some(url) => {
                    let beside = self
                        .memory_file
                        .as_deref()
                        .map(memory_local::hold_beside_a_ledger)
                        .transpose()?;
                    let memory = Memory::shared(url, &memory::scope_of(self.client.base_url())).await?;
                    match beside {
                        Some(file) => memory.holding(file),
                        None => memory,
                    }
                }
                None => Memory::local(self.memory_file)?,
            }
            .handed_over_after(self.handed_over),
        );
        let recording = match &self.record {
            Some((path, options)) => Some(self.client.record_relayed(path, options.clone())?),
            None => None,
        };
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .map_err(|source| StartError::Listen { address, source })?;
        let local = listener
            .local_addr()
            .map_err(|source| StartError::Listen { address, source })?;
        let key_forms = self
            .key
            .as_ref()
            .map(genapi::ApiKey::expose)
            .filter(|key| key.len() >= SEARCHED_KEY)
            .map(key_forms::of)
            .unwrap_or_default();
        let key_forms = Arc::new(key_forms);
        let shared = Arc::new(Shared {
            key_forms,
            service: Service {
                base: self.client.base_url().clone(),
                key: self.key,
                http: Service::http()?,
                client: self.client,
                recording,
            },
            memory,
            counters: Counters::default(),
            proxy_origin: format!("http://{local}"),
            waits: Mutex::new(HashMap::new()),
            mismatches: Mutex::new(std::collections::BTreeSet::new()),
            on_mismatch: self.on_mismatch,
            proxy_key: self.proxy_key,
            in_flight: tokio::sync::watch::Sender::new(0),
        });
        let app = axum::Router::new()
            .fallback(exchange::answer)
            .with_state(shared.clone())
            .layer(axum::extract::DefaultBodyLimit::disable());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let serving = tokio::spawn(serving::serve(listener, app, self.most_connections, stopped));
        Ok(Proxy {
            address: local,
            shared,
            stop: Some(stop),
            serving: Some(serving),
        })
    }
}

/// A running proxy.
pub struct Proxy {
    address: SocketAddr,
    shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    serving: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// A proxy for `client`'s service: its base URL and trust rule.
    pub fn builder(client: genapi::Client) -> ProxyBuilder {
        ProxyBuilder {
            client,
            key: None,
            memory_file: None,
            ledger: None,
            on_mismatch: None,
            proxy_key: None,
            record: None,
            most_connections: MOST_CONNECTIONS,
            handed_over: memory::HANDED_OVER,
        }
    }

    /// The address it listens on.
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Its base URL, for an SDK: `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        self.shared.proxy_origin.clone()
    }

    /// What it saw so far.
    pub fn summary(&self) -> Summary {
        self.shared.counters.summary()
    }

    /// Stops listening, lets the exchanges under way finish, waits (up to
    /// [`STOP_WAITS_FOR`]) for the answers to submissions it sent, which it
    /// keeps for their callers' retries, and for what it writes of their
    /// deliveries, and says what it saw. A submission
    /// still unanswered then is remembered as one whose answer never came.
    pub async fn stop(mut self) -> Summary {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // One bound for it all: callers still connected, then the answers
        // owed to callers gone.
        let until = tokio::time::Instant::now() + STOP_WAITS_FOR;
        if let Some(mut serving) = self.serving.take() {
            if tokio::time::timeout_at(until, &mut serving).await.is_err() {
                // Connections still open past the bound are closed.
                serving.abort();
            }
        }
        let mut in_flight = self.shared.in_flight.subscribe();
        let _ = tokio::time::timeout_at(until, in_flight.wait_for(|sent| *sent == 0)).await;
        let _ = tokio::time::timeout_at(until, self.shared.memory.settled()).await;
        self.shared.counters.summary()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(serving) = self.serving.take() {
            serving.abort();
        }
    }
}

/// What every exchange of one proxy shares.
pub(crate) struct Shared {
    service: Service,
    memory: Arc<Memory>,
    counters: Counters,
    /// `http://127.0.0.1:PORT`: where callers reach the proxy.
    proxy_origin: String,
    /// Until when each caller (by the key it uses) was asked to wait by a
    /// 429's `Retry-After`.
    waits: Mutex<HashMap<String, Instant>>,
    /// The mismatches seen, each told once.
    mismatches: Mutex<std::collections::BTreeSet<Mismatch>>,
    on_mismatch: Option<OnMismatch>,
    /// The key callers must send when the proxy listens beyond loopback.
    proxy_key: Option<genapi::ApiKey>,
    /// Submissions sent and not answered yet: a stop waits for them.
    in_flight: tokio::sync::watch::Sender<usize>,
    /// The configured key's spellings, searched for in answers
    /// ([`Shared::searched_key`]; none for no key, or a short one).
    key_forms: Arc<Vec<Vec<u8>>>,
}

/// Why a request is refused before anything else is read.
pub(crate) enum Refusal {
    /// Beyond loopback, without the proxy's own key.
    NoProxyKey,
    /// On loopback, from a web page or through another name.
    NotThisMachine,
}

/// Whether a request to a proxy on loopback comes from a program of this
/// machine, not from a web page its browser shows: its `Host` names
/// loopback (a page on another name rebound to 127.0.0.1 sends its own),
/// and a browser's `Origin` and `Sec-Fetch-Site`, when sent, say the page
/// is this machine's too. Without this any site the user visits could post
/// submissions, paid with the configured key.
fn from_this_machine(headers: &http::HeaderMap) -> bool {
    let text = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    let loopback_host = |host: &str| {
        let name = match host.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or_default(),
            None => host.rsplit_once(':').map_or(host, |(name, _)| name),
        };
        name.eq_ignore_ascii_case("localhost") || name.parse::<std::net::IpAddr>().is_ok_and(|ip| ip.is_loopback())
    };
    let host_ok = text("host").is_none_or(loopback_host);
    let origin_ok = text("origin").is_none_or(|origin| {
        url::Url::parse(origin)
            .ok()
            .and_then(|url| url.host_str().map(str::to_string))
            .is_some_and(|host| loopback_host(&host))
    });
    let site_ok = text("sec-fetch-site").is_none_or(|site| site != "cross-site");
    host_ok && origin_ok && site_ok
}

/// Replaces `key` in every string of `value` (its names included); whether
/// any held it.
fn redact_strings(value: &mut serde_json::Value, key: &str) -> bool {
    let redact = |text: &mut String| {
        let found = text.contains(key);
        if found {
            *text = text.replace(key, "[redacted]");
        }
        found
    };
    match value {
        serde_json::Value::String(text) => redact(text),
        serde_json::Value::Array(items) => items
            .iter_mut()
            .fold(false, |found, item| redact_strings(item, key) | found),
        serde_json::Value::Object(fields) => {
            let named: Vec<String> = fields.keys().filter(|name| name.contains(key)).cloned().collect();
            for name in &named {
                if let Some(field) = fields.remove(name) {
                    fields.insert(name.replace(key, "[redacted]"), field);
                }
            }
            fields
                .values_mut()
                .fold(!named.is_empty(), |found, field| redact_strings(field, key) | found)
        }
        _ => false,
    }
}

/// A submission sent and not answered yet ([`Shared::sending`]).
pub(crate) struct InFlight(Arc<Shared>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.in_flight.send_modify(|sent| *sent = sent.saturating_sub(1));
    }
}

impl Shared {
    /// Rewrites the service's addresses to `origin`, the proxy as a caller
    /// reached it.
    fn rewriter<'a>(&'a self, origin: &'a str) -> Rewriter<'a> {
        Rewriter {
            base: &self.service.base,
            proxy: origin,
            memory: &self.memory,
        }
    }

    /// The proxy's origin as the caller of `headers` reached it: its `Host`
    /// when it names a host (a proxy listening on every address is reached
    /// by a name of its own), else the address it listens on. Beyond
    /// loopback, behind a front that ends TLS and says so
    /// (`X-Forwarded-Proto: https`, or `Forwarded: proto=https`), it is an
    /// `https` origin: the addresses handed out must not send callers (and
    /// the proxy's key) back in clear.
    fn origin_for(&self, headers: &http::HeaderMap) -> String {
        let host = headers.get(http::header::HOST).and_then(|value| value.to_str().ok());
        let text = |name: &str| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .map(str::to_ascii_lowercase)
        };
        let forwarded_https = text("x-forwarded-proto")
            .is_some_and(|proto| proto.split(',').next().map(str::trim) == Some("https"))
            || text("forwarded").is_some_and(|forwarded| {
                forwarded
                    .split([';', ','])
                    .any(|part| part.trim().trim_matches('"') == "proto=https" || part.trim() == "proto=\"https\"")
            });
        let scheme = if self.proxy_key.is_some() && forwarded_https {
            "https"
        } else {
            "http"
        };
        match host
            .filter(|host| !host.is_empty() && host.chars().all(|c| c.is_ascii_alphanumeric() || "-._:[]".contains(c)))
        {
            Some(host) => format!("{scheme}://{host}"),
            None => self.proxy_origin.clone(),
        }
    }

    /// The configured key, as searched for in answers: one shorter than
    /// eight bytes is not (as the client's scrubber does not), since such
    /// words stand in ordinary text.
    fn searched_key(&self) -> Option<&str> {
        self.service
            .key
            .as_ref()
            .map(genapi::ApiKey::expose)
            .filter(|key| key.len() >= SEARCHED_KEY)
    }

    /// `headers` without a value that quotes the configured key (a
    /// `Location`, a service's debugging header), in any of its spellings
    /// ([`key_forms`]): such a value is dropped.
    fn headers_without_key(&self, mut headers: http::HeaderMap) -> http::HeaderMap {
        if self.key_forms.is_empty() {
            return headers;
        }
        let quoting: Vec<http::HeaderName> = headers
            .iter()
            .filter(|(_, value)| key_forms::redacted(value.as_bytes(), &self.key_forms).is_some())
            .map(|(name, _)| name.clone())
            .collect();
        for name in quoting {
            headers.remove(name);
        }
        headers
    }

    /// `body` without the configured key: a service that quotes the key
    /// it was sent would otherwise hand it to a caller that never had it.
    /// A JSON body is searched string by string, so the key is found however
    /// its characters were escaped (`\u0073k-…`); then every body, as bytes,
    /// for the key's other spellings ([`key_forms`]).
    fn without_key(&self, body: Vec<u8>) -> Vec<u8> {
        let Some(key) = self.searched_key() else {
            return body;
        };
        let redacted_json = serde_json::from_slice::<serde_json::Value>(&body)
            .ok()
            .and_then(|mut value| redact_strings(&mut value, key).then(|| serde_json::to_vec(&value).ok())?);
        let body = redacted_json.unwrap_or(body);
        key_forms::redacted(&body, &self.key_forms).unwrap_or(body)
    }

    /// Whether `headers` may pass: on loopback, from a program of this
    /// machine ([`from_this_machine`]); beyond it, only with the proxy's own
    /// key, which is then taken off (the service gets the configured one).
    fn admits(&self, headers: &mut http::HeaderMap) -> Result<(), Refusal> {
        let Some(key) = &self.proxy_key else {
            return from_this_machine(headers).then_some(()).ok_or(Refusal::NotThisMachine);
        };
        let given = headers.remove(relay::KEY_HEADER);
        // Digests compared, not the keys: how long the comparison takes
        // tells nothing of how much of a guess was right.
        let digest = |bytes: &[u8]| ring::digest::digest(&ring::digest::SHA256, bytes);
        let right =
            given.is_some_and(|given| digest(given.as_bytes()).as_ref() == digest(key.expose().as_bytes()).as_ref());
        right.then_some(()).ok_or(Refusal::NoProxyKey)
    }

    /// Counts a submission sent, until the guard it gets is dropped.
    fn sending(self: &Arc<Self>) -> InFlight {
        self.in_flight.send_modify(|sent| *sent += 1);
        InFlight(self.clone())
    }

    /// Counts `found`, and tells the new ones.
    fn mismatched(&self, found: Vec<Mismatch>) {
        for mismatch in found {
            self.counters.add(Count::ContractMismatch);
            let new = self
                .mismatches
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(mismatch.clone());
            if new {
                tracing::warn!(%mismatch, "the traffic differs from openapi.json");
                if let Some(report) = &self.on_mismatch {
                    report(&mismatch);
                }
            }
        }
    }

    fn caller(&self, headers: &http::HeaderMap) -> String {
        identity::SubmissionId::of(self.service.key_of(headers).unwrap_or_default(), "", b"", None)
            .0
            .as_str()
            .to_string()
    }

    /// Counts a request sent before the wait a 429 asked of its caller.
    fn note_retry_after(&self, headers: &http::HeaderMap) {
        let caller = self.caller(headers);
        let mut waits = self.waits.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(until) = waits.get(&caller) {
            if Instant::now() < *until {
                self.counters.add(Count::RetryAfterIgnored);
            } else {
                waits.remove(&caller);
            }
        }
    }

    /// Notes a 429's `Retry-After` for the caller it answers.
    fn note_answer(&self, headers: &http::HeaderMap, response: &reqwest::Response) {
        if response.status() != reqwest::StatusCode::TOO_MANY_REQUESTS {
            return;
        }
        let seconds = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|text| text.trim().parse::<u64>().ok());
        if let Some(seconds) = seconds {
            let until = Instant::now() + std::time::Duration::from_secs(seconds.min(3600));
            self.waits
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(self.caller(headers), until);
        }
    }
}
