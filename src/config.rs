//! Configuration: [`ClientBuilder`], from code or from the environment.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::layers::{add_layer, AddLayer, HttpRequest, HttpService};
use crate::limit::ActiveTasks;
use crate::profiles;
use crate::record::{Origins, RecordOptions, Recorder};
use crate::scrub::Scrubber;
use crate::transport::HeaderObserver;
use crate::transport::{RetryPolicy, Transport, TransportParts};
use crate::trust::{is_loopback, TrustPolicy};
use crate::wait::{Learned, WaitOptions};
use crate::ApiKey;

/// The service's default limit of active tasks per account.
const DEFAULT_MAX_ACTIVE_TASKS: usize = 24;

/// Makes the reqwest builder the client starts from.
type HttpFactory = Box<dyn Fn() -> reqwest::ClientBuilder + Send + Sync>;

/// Builds a [`Client`]; every setting has a default but the key and base URL.
///
/// ```
/// use std::time::Duration;
/// let client = genapi::Client::builder()
///     .api_key("my-key")
///     .base_url("https://api.example.com")
///     .trust_origin("https://poll.partner.example.net")
///     .request_timeout(Duration::from_secs(30))
///     .build()?;
/// # Ok::<(), genapi::Error>(())
/// ```
pub struct ClientBuilder {
    key: Option<ApiKey>,
    /// Where the key came from, in words, for the message of a refused key.
    key_origin: Option<String>,
    base_url: Option<String>,
    regional_base_url: Option<String>,
    trusted: Vec<String>,
    request_timeout: Duration,
    connect_timeout: Duration,
    download_timeout: Duration,
    retry: RetryPolicy,
    user_agent: String,
    max_active_tasks: Option<usize>,
    max_response_bytes: u64,
    max_download_bytes: u64,
    allow_insecure_http: bool,
    http: Option<HttpFactory>,
    wait: WaitOptions,
    learned: Learned,
    /// An active-task limit shared with other processes, and its size.
    shared_seats: Option<(Arc<dyn crate::SeatPool>, usize)>,
    /// Where to record exchanges, and what to keep.
    record: Option<(PathBuf, RecordOptions)>,
    /// Called with the headers of every answer.
    observers: Vec<HeaderObserver>,
    /// The user's layers around every exchange, the first outermost.
    layers: Vec<AddLayer>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            key: None,
            key_origin: None,
            base_url: None,
            regional_base_url: None,
            trusted: Vec::new(),
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            download_timeout: Duration::from_secs(15 * 60),
            retry: RetryPolicy::default(),
            user_agent: format!("genapi-rust/{}", env!("CARGO_PKG_VERSION")),
            max_active_tasks: Some(DEFAULT_MAX_ACTIVE_TASKS),
            shared_seats: None,
            max_response_bytes: 1 << 20,
            max_download_bytes: 2 << 30,
            allow_insecure_http: false,
            http: None,
            wait: WaitOptions::default(),
            learned: Learned::default(),
            record: None,
            observers: Vec::new(),
            layers: Vec::new(),
        }
    }
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("key", &self.key)
            .field("base_url", &self.base_url)
            .field("regional_base_url", &self.regional_base_url)
            .field("trusted", &self.trusted)
            .field("request_timeout", &self.request_timeout)
            .field("download_timeout", &self.download_timeout)
            .field("retry", &self.retry)
            .field("max_active_tasks", &self.max_active_tasks)
            .field("record", &self.record)
            .field("layers", &self.layers.len())
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// The project API key (required). A key the service refuses is
    /// spoken of as "the API key the client was built with"; a program
    /// that reads its key from somewhere a user can name says where with
    /// [`ClientBuilder::api_key_from`].
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(ApiKey::new(key));
        self.key_origin = None;
        self
    }

    /// The project API key, with where it came from in words, which the
    /// message of a key the service refuses ([`Error::Forbidden`]) names
    /// as the key to check: `forbidden (403): check {origin} and that its
    /// project may use this endpoint`, so the words read after "check" (a
    /// noun: `the key in ~/.config/acme/key`, not a bare path).
    /// [`ClientBuilder::from_env`] says `the key in GENAPI_API_KEY`; empty
    /// words are taken as none. The key comes first: words that hold the
    /// key are shown with it redacted.
    ///
    /// ```
    /// let builder = genapi::Client::builder().api_key_from("k-123", "the key in ~/.config/acme/key");
    /// # let _ = builder;
    /// ```
    pub fn api_key_from(mut self, key: impl Into<String>, origin: impl Into<String>) -> Self {
        self.key = Some(ApiKey::new(key));
        self.key_origin = Some(origin.into());
        self
    }
    /// The service address, e.g. `https://api.example.com` (required). Plain
    /// http is accepted only for loopback addresses (a local mock) unless
    /// [`ClientBuilder::allow_insecure_http`] is set.
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }
    /// The regional address of the fine-tuned endpoints; defaults to the base URL.
    pub fn regional_base_url(mut self, url: impl Into<String>) -> Self {
        self.regional_base_url = Some(url.into());
        self
    }
    /// Another origin the key may be sent to.
    ///
    /// By default the key goes to the base and regional origins and to https
    /// hosts inside the base host's registrable domain (base
    /// `https://api.example.com` trusts `https://api.eu4.example.com`, never
    /// `https://example.com.evil.net`), which covers the service's regional
    /// polling hosts. Add an origin here when the service polls from another
    /// domain. A `polling_url` outside the trusted set is polled without the
    /// key.
    pub fn trust_origin(mut self, url: impl Into<String>) -> Self {
        self.trusted.push(url.into());
        self
    }
    /// Timeout of one API exchange (default 60 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
    /// Timeout to open a connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
    /// Timeout of one whole download of a result: every attempt, the waits
    /// between them and the poll for a fresh address included (default 15
    /// minutes, for large videos). Past it, [`crate::Error::DownloadTimeout`].
    pub fn download_timeout(mut self, timeout: Duration) -> Self {
        self.download_timeout = timeout;
        self
    }
    /// How failed exchanges are retried (see [`RetryPolicy`] for which).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }
    /// The `User-Agent` header.
    pub fn user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = agent.into();
        self
    }
    /// At most this many tasks active at once (default 24, the service's
    /// limit; at least 1). It only keeps the client clear of 429 storms: a
    /// submission beyond it waits until the client sees a task finish
    /// (polling tasks nobody waits for, so it can never wait forever), and
    /// the service's 429 stays the arbiter.
    pub fn max_active_tasks(mut self, limit: usize) -> Self {
        self.max_active_tasks = Some(limit.max(1));
        self
    }
    /// Shares the active-task limit with every client, in any process, given
    /// the same places: together they keep at most `limit` tasks active
    /// (`genapi-batch`'s `SharedSeats` gives both, from PostgreSQL). This
    /// replaces [`ClientBuilder::max_active_tasks`].
    pub fn shared_seats(mut self, places: Arc<dyn crate::SeatPool>, limit: usize) -> Self {
        self.shared_seats = Some((places, limit.max(1)));
        self
    }
    /// No client-side limit on active tasks: every submission is sent at
    /// once, and the service's 429 is the only limit.
    pub fn unlimited_active_tasks(mut self) -> Self {
        self.max_active_tasks = None;
        self
    }
    /// Largest JSON answer read (default 1 MiB).
    pub fn max_response_bytes(mut self, bytes: u64) -> Self {
        self.max_response_bytes = bytes;
        self
    }
    /// Largest download (default 2 GiB, room for the longest video).
    /// [`crate::Output::save`] streams to disk; [`crate::Output::bytes`]
    /// holds the result in memory.
    pub fn max_download_bytes(mut self, bytes: u64) -> Self {
        self.max_download_bytes = bytes;
        self
    }
    /// Accept plain-http base and trusted origins that are not loopback. The
    /// key then crosses the network unencrypted: only for a trusted network.
    pub fn allow_insecure_http(mut self, allow: bool) -> Self {
        self.allow_insecure_http = allow;
        self
    }
    /// Start from reqwest builders made by `factory` (proxies, TLS roots, …).
    /// The client still sets its own timeouts, user agent and redirect rules
    /// on them, so the key can never follow a redirect. A factory also owns
    /// the TLS setup (genapi's reqwest has no process-wide default provider:
    /// configure one with `tls_backend_preconfigured`, or install rustls's
    /// process-wide default, `rustls::crypto::ring::default_provider().install_default()`).
    ///
    /// ```
    /// let builder = genapi::Client::builder().reqwest_builder(|| genapi::reqwest::Client::builder().no_proxy());
    /// ```
    pub fn reqwest_builder(mut self, factory: impl Fn() -> reqwest::ClientBuilder + Send + Sync + 'static) -> Self {
        self.http = Some(Box::new(factory));
        self
    }
    /// Default options of [`crate::Task::wait`].
    pub fn wait_options(mut self, options: WaitOptions) -> Self {
        self.wait = options;
        self
    }
    /// Task durations learned earlier (see [`Client::learned`]), so the first
    /// waits of a new process are already well aimed.
    pub fn learned(mut self, learned: Learned) -> Self {
        self.learned = learned;
        self
    }

    /// Calls `observer` with the headers of every answer the client reads
    /// (each attempt's, downloads too), once every secret the client holds
    /// or sent is out of them: for a request id to log, a rate-limit header
    /// to watch, or a test double's mark to recognise. It runs on the task
    /// that reads the answer, so it should be quick.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicBool, Ordering};
    /// use std::sync::Arc;
    /// let marked = Arc::new(AtomicBool::new(false));
    /// let seen = marked.clone();
    /// let client = genapi::Client::builder()
    ///     .api_key("k")
    ///     .base_url("https://api.example.com")
    ///     .observe_headers(move |headers| {
    ///         if headers.contains_key("x-request-id") {
    ///             seen.store(true, Ordering::Relaxed);
    ///         }
    ///     })
    ///     .build()?;
    /// # Ok::<(), genapi::Error>(())
    /// ```
    pub fn observe_headers(mut self, observer: impl Fn(&http::HeaderMap) + Send + Sync + 'static) -> Self {
        self.observers.push(Arc::new(observer));
        self
    }

    /// Wraps every exchange (submissions, polls, downloads; each attempt)
    /// in `layer`, a tower layer of the program's own: metrics, tracing, a
    /// rate limit, tower-http's layers. Repeatable: the first layer added is
    /// the outermost, as in tower's `ServiceBuilder`.
    ///
    /// The layers run beneath genapi's retries, which still decide what may
    /// be sent again, and above the wire, where the key is added (no layer
    /// sees it). A submission's body reaches them sealed: it cannot be
    /// cloned, so even a layer that retries everything sends a submission
    /// once and never pays twice; polls and downloads it may retry. Each
    /// attempt of a submission also carries a send-once mark
    /// ([`crate::SEND_ONCE_HEADER`]) that lets one copy of it leave, so a
    /// layer that copies it (and sends the copies from tasks of their own)
    /// cannot pay twice either ([`crate::SendOnceRefused`]). A
    /// layer's own error, or a layer holding a request past the request
    /// timeout, is an [`crate::Error::Layer`]. See `docs/library.md`.
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// use std::sync::Arc;
    /// let exchanges = Arc::new(AtomicUsize::new(0));
    /// let counted = exchanges.clone();
    /// let client = genapi::Client::builder()
    ///     .api_key("k")
    ///     .base_url("https://api.example.com")
    ///     .layer(genapi::tower::util::MapRequestLayer::new(move |request: genapi::HttpRequest| {
    ///         counted.fetch_add(1, Ordering::Relaxed);
    ///         request
    ///     }))
    ///     .build()?;
    /// # Ok::<(), genapi::Error>(())
    /// ```
    pub fn layer<L, B>(mut self, layer: L) -> Self
    where
        L: tower::Layer<HttpService> + Send + Sync + 'static,
        L::Service: tower::Service<HttpRequest, Response = http::Response<B>> + Clone + Send + Sync + 'static,
        <L::Service as tower::Service<HttpRequest>>::Error: Into<tower::BoxError>,
        <L::Service as tower::Service<HttpRequest>>::Future: Send + 'static,
        B: http_body::Body + Send + Sync + 'static,
        B::Data: Into<bytes::Bytes>,
        B::Error: Into<tower::BoxError>,
    {
        self.layers.push(add_layer(layer));
        self
    }

    /// Records every exchange of the client (submissions, polls, downloads,
    /// errors and retries, each attempt with its number) to `path` in HAR
    /// 1.2, without secrets or image bytes (see [`RecordOptions`]). The file
    /// is created, or emptied, when the client is built, and is valid HAR
    /// after every exchange: a process killed at any moment loses at most
    /// the exchange in flight. `cargo xtask drift FILE` checks a recording
    /// against the document.
    ///
    /// ```no_run
    /// let client = genapi::ClientBuilder::from_env()?.record("run.har").build()?;
    /// # Ok::<(), genapi::Error>(())
    /// ```
    pub fn record(self, path: impl Into<PathBuf>) -> Self {
        self.record_with(path, RecordOptions::default())
    }
    /// [`ClientBuilder::record`], keeping what `options` say.
    pub fn record_with(mut self, path: impl Into<PathBuf>, options: RecordOptions) -> Self {
        self.record = Some((path.into(), options));
        self
    }

    /// Checks the settings and builds the client.
    #[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
    pub fn build(self) -> Result<Client> {
        let key = self
            .key
            .ok_or_else(|| Error::Config("no API key: set GENAPI_API_KEY or call api_key()".into()))?;
        if key.expose().is_empty() || reqwest::header::HeaderValue::from_str(key.expose()).is_err() {
            return Err(Error::Config(
                "the API key is empty or has characters a header cannot carry".into(),
            ));
        }
        let insecure = self.allow_insecure_http;
        let base_text = self
            .base_url
            .ok_or_else(|| Error::Config("no base URL: set GENAPI_BASE_URL or call base_url()".into()))?;
        let base_url = parse_origin(&base_text, "base URL", insecure)?;
        let regional_url = match &self.regional_base_url {
            Some(text) => parse_origin(text, "regional base URL", insecure)?,
            None => base_url.clone(),
        };
        let extra = self
            .trusted
            .iter()
            .map(|text| parse_origin(text, "trusted origin", insecure))
            .collect::<Result<Vec<_>>>()?;
        let configure = |builder: reqwest::ClientBuilder, timeout: Duration| {
            builder
                .timeout(timeout)
                .connect_timeout(self.connect_timeout)
                .user_agent(self.user_agent.clone())
        };
        let fresh = || -> Result<reqwest::ClientBuilder> {
            match &self.http {
                Some(make) => Ok(make()),
                None => crate::transport::http_builder(),
            }
        };
        let api = build_http(configure(fresh()?, self.request_timeout).redirect(reqwest::redirect::Policy::none()))?;
        let downloads = build_http(
            configure(fresh()?, self.download_timeout)
                .read_timeout(self.request_timeout)
                .referer(false),
        )?;
        let addresses: Vec<&str> = [base_url.as_str(), regional_url.as_str()]
            .into_iter()
            .chain(extra.iter().map(Url::as_str))
            .collect();
        let scrubber = Arc::new(Scrubber::new(key.expose()).serving(&addresses));
        // Words that quote the key never show it.
        let key_origin = self.key_origin.filter(|origin| !origin.trim().is_empty()).map_or_else(
            || "the API key the client was built with".into(),
            |origin| scrubber.scrub(&origin),
        );
        let recorder = match &self.record {
            Some((path, options)) => {
                let origins = Origins {
                    base_url: base_url.as_str(),
                    regional_base_url: regional_url.as_str(),
                    trusted: extra.iter().map(Url::as_str).collect(),
                };
                let recorder = Recorder::create(path, options, scrubber.clone(), origins).map_err(Error::Config)?;
                Some(recorder)
            }
            None => None,
        };
        let transport = Transport::new(TransportParts {
            recorder,
            scrubber,
            api,
            downloads,
            key,
            key_origin,
            trust: TrustPolicy::new(&base_url, &regional_url, &extra),
            retry: self.retry,
            max_response_bytes: self.max_response_bytes,
            max_download_bytes: self.max_download_bytes,
            download_timeout: self.download_timeout,
            observers: self.observers,
            layers: self.layers,
            request_timeout: self.request_timeout,
        })?;
        Ok(Client::from_parts(
            Arc::new(transport),
            base_url,
            regional_url,
            match self.shared_seats {
                Some((shared, limit)) => Some(ActiveTasks::new(limit, Some(shared))),
                None => self.max_active_tasks.map(|limit| ActiveTasks::new(limit, None)),
            },
            self.wait,
            self.learned,
        ))
    }
}

/// Builds an HTTP client. A reqwest builder given by the program may carry no
/// TLS provider (genapi's reqwest compiles none in by default), and reqwest
/// then panics while building; that becomes an error saying what to do.
fn build_http(builder: reqwest::ClientBuilder) -> Result<reqwest::Client> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| builder.build())) {
        Ok(built) => built.map_err(|e| Error::Config(format!("cannot build the HTTP client: {e}"))),
        Err(_) => Err(Error::Config(
            "the reqwest builder given to ClientBuilder::reqwest_builder has no TLS provider: give it one \
             (reqwest's tls_backend_preconfigured) or install rustls's process-wide default provider before building"
                .into(),
        )),
    }
}

/// Parses a base or trusted origin: http(s), a host, no user information,
/// plain http only on loopback unless allowed.
fn parse_origin(text: &str, what: &str, allow_insecure_http: bool) -> Result<Url> {
    // Shown without anything between `://` and an `@`: a password written
    // into an address must not reach an error, and from it a log.
    let shown = shown_address(text);
    let url = Url::parse(text.trim()).map_err(|e| Error::Config(format!("{what} {shown} is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Error::Config(format!("{what} {shown} must be an http(s) address")));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::Config(format!(
            "{what} {shown} must not carry a query or fragment: paths are appended to it"
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Error::Config(format!(
            "{what} {shown} must not carry a user name or password"
        )));
    }
    if url.scheme() == "http" && !is_loopback(&url) && !allow_insecure_http {
        return Err(Error::Config(format!(
            "{what} {shown} uses plain http, which would send the key unencrypted; use https \
             (plain http is accepted on loopback, or with ClientBuilder::allow_insecure_http)"
        )));
    }
    Ok(url)
}

/// An address as an error may show it: quoted, and without what may hold a
/// secret in it (see [`genapi_text::shown_address`]).
fn shown_address(text: &str) -> String {
    format!("{:?}", genapi_text::shown_address(text))
}

impl Client {
    /// A builder with defaults for everything but the key and base URL.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The client the environment configures: `GENAPI_API_KEY` and
    /// `GENAPI_BASE_URL`, with (optionally) `GENAPI_REGIONAL_BASE_URL` and
    /// `GENAPI_TRUSTED_ORIGINS` (comma-separated origins that may receive
    /// the key); else the profile of the config file that `GENAPI_PROFILE`
    /// names, or the file's default ([`crate::profiles`]), as the `genapi`
    /// command reads it.
    pub fn from_env() -> Result<Client> {
        ClientBuilder::from_env()?.build()
    }

    /// [`Client::from_env`] when the environment or the config file names a
    /// service; `None` when nothing does (no variable, no profile chosen),
    /// where a program may start a mock instead, as the `genapi` command
    /// does. What is configured and cannot be used is an error, never
    /// `None`: a half configuration never quietly becomes a mock.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// let client = match genapi::Client::from_env_if_any()? {
    ///     Some(client) => client,
    ///     None => {
    ///         eprintln!("no service is configured: set GENAPI_API_KEY and GENAPI_BASE_URL, or make a profile");
    ///         return Ok(());
    ///     }
    /// };
    /// # let _ = client; Ok(()) }
    /// ```
    pub fn from_env_if_any() -> Result<Option<Client>> {
        ClientBuilder::from_variables_if_any(|name| std::env::var(name).ok())?
            .map(ClientBuilder::build)
            .transpose()
    }
}

/// No service is configured; what could configure one, said after "set
/// GENAPI_API_KEY and GENAPI_BASE_URL".
struct Unconfigured(String);

impl ClientBuilder {
    /// The builder [`Client::from_env`] uses, to adjust before building.
    ///
    /// ```no_run
    /// let client = genapi::ClientBuilder::from_env()?.max_active_tasks(4).build()?;
    /// # Ok::<(), genapi::Error>(())
    /// ```
    pub fn from_env() -> Result<ClientBuilder> {
        ClientBuilder::from_variables(|name| std::env::var(name).ok())
    }

    /// [`ClientBuilder::from_env`] over the variables `read` gives (a
    /// `.env` file a program read, a test's own), by the same rules: the
    /// service the variables name, else a profile of the config file
    /// (`GENAPI_CONFIG`, `GENAPI_PROFILE` and a profile's `key_env` read
    /// through `read` too).
    ///
    /// ```
    /// let vars = |name: &str| match name {
    ///     "GENAPI_API_KEY" => Some("k-123".to_string()),
    ///     "GENAPI_BASE_URL" => Some("https://api.example.com".to_string()),
    ///     _ => None,
    /// };
    /// let client = genapi::ClientBuilder::from_variables(vars)?.build()?;
    /// assert_eq!(client.base_url().host_str(), Some("api.example.com"));
    /// # Ok::<(), genapi::Error>(())
    /// ```
    pub fn from_variables(read: impl Fn(&str) -> Option<String>) -> Result<ClientBuilder> {
        ClientBuilder::configured(&read)?.map_err(|Unconfigured(or)| {
            Error::Config(format!(
                "set GENAPI_API_KEY and GENAPI_BASE_URL (the service's){or}; without a key, `genapi mock` runs a \
                 local mock service (a test double) and prints the variables to set, or a test starts one with \
                 genapi_mock::MockService"
            ))
        })
    }

    /// [`ClientBuilder::from_variables`] when the variables or the config
    /// file name a service; `None` when nothing does
    /// ([`Client::from_env_if_any`]).
    pub fn from_variables_if_any(read: impl Fn(&str) -> Option<String>) -> Result<Option<ClientBuilder>> {
        Ok(ClientBuilder::configured(&read)?.ok())
    }

    /// The service the variables `read` gives name, else the config file's
    /// chosen profile; `Ok(Err(_))` when neither names one.
    fn configured(read: &dyn Fn(&str) -> Option<String>) -> Result<std::result::Result<ClientBuilder, Unconfigured>> {
        let read = |name: &str| read(name).filter(|v| !v.trim().is_empty());
        let names_a_service = profiles::SERVICE_OVER_PROFILES.iter().any(|name| read(name).is_some());
        if !names_a_service {
            return ClientBuilder::from_profile(&read);
        }
        let (key, base) = match (read("GENAPI_API_KEY"), read("GENAPI_BASE_URL")) {
            (Some(key), Some(base)) => (key, base),
            (None, _) => return Err(Error::Config("GENAPI_BASE_URL is set but GENAPI_API_KEY is not".into())),
            (Some(_), None) => return Err(Error::Config("GENAPI_API_KEY is set but GENAPI_BASE_URL is not".into())),
        };
        let mut builder = Client::builder()
            .api_key_from(key.trim(), "the key in GENAPI_API_KEY")
            .base_url(base.trim());
        if let Some(regional) = read("GENAPI_REGIONAL_BASE_URL") {
            builder = builder.regional_base_url(regional.trim());
        }
        for origin in read("GENAPI_TRUSTED_ORIGINS").iter().flat_map(|list| list.split(',')) {
            if !origin.trim().is_empty() {
                builder = builder.trust_origin(origin.trim());
            }
        }
        Ok(Ok(builder))
    }

    /// The service of the config file's chosen profile, when the variables
    /// name none.
    fn from_profile(read: &dyn Fn(&str) -> Option<String>) -> Result<std::result::Result<ClientBuilder, Unconfigured>> {
        let Some((path, named)) = profiles::file_path(read(profiles::CONFIG_VARIABLE).map(Into::into)) else {
            return Ok(Err(Unconfigured(String::new())));
        };
        let shown = genapi_text::clean(&path.display().to_string());
        if !genapi_files::is_taken(&path) {
            return match named {
                true => Err(Error::Config(format!(
                    "{}={shown}: no such file",
                    profiles::CONFIG_VARIABLE
                ))),
                false => Ok(Err(Unconfigured(format!(", or write a profile in {shown}")))),
            };
        }
        let file = profiles::read_file(&path).map_err(Error::Config)?;
        let has_default = file.profiles.contains_key("default");
        let chosen = profiles::choose(
            None,
            read(profiles::PROFILE_VARIABLE),
            file.default_profile.as_deref(),
            has_default,
        );
        let Some((name, _)) = chosen else {
            return Ok(Err(Unconfigured(format!(
                ", or name one of the profiles of {shown} in {} (or as its default_profile)",
                profiles::PROFILE_VARIABLE
            ))));
        };
        let said = genapi_text::clean(&name);
        let profile = match file.profiles.get(&name) {
            Some(Ok(profile)) => profile,
            Some(Err(broken)) => {
                return Err(Error::Config(format!(
                    "config file {shown}, line {}: profile {said}: {}",
                    broken.line, broken.why
                )))
            }
            None => {
                let known: Vec<&str> = file.profiles.keys().map(String::as_str).collect();
                return Err(Error::Config(format!(
                    "no profile {said} in {shown}; its profiles: {}",
                    genapi_text::clean(&known.join(", "))
                )));
            }
        };
        let key = profiles::profile_key(&name, profile, read).map_err(Error::Config)?;
        let (Some(key), Some(base)) = (key, &profile.base_url) else {
            return Err(Error::Config(format!(
                "profile {said} of {shown} gives no {}: run `genapi --profile {said} {}`",
                if profile.base_url.is_none() {
                    "base_url"
                } else {
                    "key (key_env or key_file)"
                },
                if profile.base_url.is_none() {
                    "config set base_url URL"
                } else {
                    "login"
                },
            )));
        };
        let origin = format!("the key of profile {said} ({})", profiles::key_kept_in(profile));
        let mut builder = Client::builder().api_key_from(key.expose(), origin).base_url(base);
        if let Some(regional) = &profile.regional_base_url {
            builder = builder.regional_base_url(regional);
        }
        for origin in &profile.trusted_origins {
            builder = builder.trust_origin(origin);
        }
        Ok(Ok(builder))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_from_the_environment_is_named_by_its_variable() {
        let variables = |name: &str| match name {
            "GENAPI_API_KEY" => Some("k-1".to_string()),
            "GENAPI_BASE_URL" => Some("https://api.example.com".to_string()),
            _ => None,
        };
        let builder = ClientBuilder::from_variables(variables).unwrap();
        assert_eq!(builder.key_origin.as_deref(), Some("the key in GENAPI_API_KEY"));
        // A key given afterwards is no longer the variable's.
        assert_eq!(builder.api_key("k-2").key_origin, None);
    }

    #[test]
    fn plain_http_is_for_loopback_only() {
        assert!(parse_origin("http://127.0.0.1:8787", "base URL", false).is_ok());
        assert!(parse_origin("http://localhost:8787", "base URL", false).is_ok());
        let error = parse_origin("http://api.example.com", "base URL", false).unwrap_err();
        assert!(error.to_string().contains("allow_insecure_http"), "{error}");
        assert!(parse_origin("http://api.example.com", "base URL", true).is_ok());
        assert!(parse_origin("https://user:pw@api.example.com", "base URL", false).is_err());
        assert!(parse_origin("ftp://api.example.com", "base URL", false).is_err());
        for odd in [
            "https://api.example.com/?tenant=1",
            "https://api.example.com/#frag",
            "https://api.example.com?a=b",
        ] {
            assert!(parse_origin(odd, "base URL", false).is_err(), "{odd}");
        }
    }
}

#[cfg(test)]
mod address_tests {
    use super::*;

    #[test]
    fn a_password_in_an_address_never_reaches_the_error() {
        for text in [
            "http://user:secretpw@127.0.0.1:45165",
            "https://user:secretpw@api.example.com/v1?x=1",
            "user:secretpw@api.example.com",
            "https://user:secretpw@exa mple.com",
        ] {
            let error = parse_origin(text, "base URL", false).unwrap_err().to_string();
            assert!(!error.contains("secretpw"), "{error}");
        }
        assert_eq!(shown_address("https://a:b@host:1/p"), "\"https://…@host:1/p\"");
        assert_eq!(
            shown_address("https://host.example/@p/x"),
            "\"https://host.example/@p/x\""
        );
    }
}
