//! The client and its configuration.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::{StatusCode, Url};
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

use crate::api::types::{HttpValidationError, SubmissionResponse};
use crate::error::{Checked, Error, Result};
use crate::submit::sealed::Sealed as _;
use crate::submit::{IntoRequest, Submit};
use crate::task::Task;
use crate::transport::{retry_after, Purpose, RetryPolicy, Transport};
use crate::validate::Document;
use crate::wait::{Learned, WaitOptions};
use crate::ApiKey;

/// The service's default limit of active tasks per account.
pub const DEFAULT_MAX_ACTIVE_TASKS: usize = 24;

/// A client of the service. Cheap to clone; clones share connections, the
/// active-task limit and what the client has learned about task durations.
///
/// ```no_run
/// # async fn demo() -> genapi::Result<()> {
/// use genapi::api::types::GenDevRequest;
/// let client = genapi::Client::builder()
///     .api_key("my-key")
///     .base_url("https://api.example.com")
///     .build()?;
/// let output = client.run(GenDevRequest::builder().prompt("a red fox".to_string())).await?;
/// let png = output.bytes().await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Client {
    pub(crate) shared: Arc<Shared>,
}

#[derive(Debug)]
pub(crate) struct Shared {
    global: crate::api::Client,
    regional: crate::api::Client,
    pub(crate) transport: Arc<Transport>,
    pub(crate) base_url: Url,
    regional_url: Url,
    slots: Option<Arc<Semaphore>>,
    pub(crate) wait: WaitOptions,
    pub(crate) learned: Mutex<HashMap<String, Learned>>,
}

/// Makes the reqwest builder the client starts from.
type HttpFactory = Box<dyn Fn() -> reqwest::ClientBuilder + Send + Sync>;

/// Builds a [`Client`]; every setting has a default but the key and base URL.
pub struct ClientBuilder {
    key: Option<ApiKey>,
    base_url: Option<String>,
    regional_base_url: Option<String>,
    trusted: Vec<String>,
    request_timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    user_agent: String,
    max_active_tasks: Option<usize>,
    http: Option<HttpFactory>,
    wait: WaitOptions,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            key: None,
            base_url: None,
            regional_base_url: None,
            trusted: Vec::new(),
            request_timeout: Duration::from_secs(60),
            connect_timeout: Duration::from_secs(10),
            retry: RetryPolicy::default(),
            user_agent: format!("genapi-rust/{}", env!("CARGO_PKG_VERSION")),
            max_active_tasks: Some(DEFAULT_MAX_ACTIVE_TASKS),
            http: None,
            wait: WaitOptions::default(),
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
            .field("retry", &self.retry)
            .field("max_active_tasks", &self.max_active_tasks)
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    /// The project API key (required).
    pub fn api_key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(ApiKey::new(key));
        self
    }
    /// The service address, e.g. `https://api.example.com` (required).
    pub fn base_url(mut self, url: impl Into<String>) -> Self {
        self.base_url = Some(url.into());
        self
    }
    /// The regional address of the fine-tuned endpoints; defaults to the base URL.
    pub fn regional_base_url(mut self, url: impl Into<String>) -> Self {
        self.regional_base_url = Some(url.into());
        self
    }
    /// Another origin the key may be sent to, such as a regional polling host
    /// of the service (`https://api.eu.example.com`).
    pub fn trust_origin(mut self, url: impl Into<String>) -> Self {
        self.trusted.push(url.into());
        self
    }
    /// Timeout of one HTTP exchange (default 60 s).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }
    /// Timeout to open a connection (default 10 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }
    /// How failed exchanges are retried (see [`crate::transport`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }
    /// The `User-Agent` header.
    pub fn user_agent(mut self, agent: impl Into<String>) -> Self {
        self.user_agent = agent.into();
        self
    }
    /// At most this many tasks in flight at once (default 24, the service's
    /// limit); `None` removes the limit. A submission beyond it waits for a
    /// slot, which frees when a task's wait ends or its [`Task`] is dropped.
    pub fn max_active_tasks(mut self, limit: Option<usize>) -> Self {
        self.max_active_tasks = limit;
        self
    }
    /// Start from reqwest builders made by `factory` (proxies, TLS roots, …).
    /// The client still sets its own timeouts, user agent and redirect rules
    /// on them, so the key can never follow a redirect.
    ///
    /// ```
    /// let builder = genapi::Client::builder().reqwest_builder(|| reqwest::Client::builder().no_proxy());
    /// ```
    pub fn reqwest_builder(mut self, factory: impl Fn() -> reqwest::ClientBuilder + Send + Sync + 'static) -> Self {
        self.http = Some(Box::new(factory));
        self
    }
    /// Default options of [`Task::wait`].
    pub fn wait_options(mut self, options: WaitOptions) -> Self {
        self.wait = options;
        self
    }

    /// Checks the settings and builds the client.
    pub fn build(self) -> Result<Client> {
        let key = self
            .key
            .ok_or_else(|| Error::Config("no API key: set GENAPI_API_KEY or call api_key()".into()))?;
        if key.expose().is_empty() || reqwest::header::HeaderValue::from_str(key.expose()).is_err() {
            return Err(Error::Config(
                "the API key is empty or has characters a header cannot carry".into(),
            ));
        }
        let base_text = self
            .base_url
            .ok_or_else(|| Error::Config("no base URL: set GENAPI_BASE_URL or call base_url()".into()))?;
        let base_url = parse_base(&base_text, "base URL")?;
        let regional_url = match &self.regional_base_url {
            Some(text) => parse_base(text, "regional base URL")?,
            None => base_url.clone(),
        };
        let mut trusted = vec![base_url.clone(), regional_url.clone()];
        for extra in &self.trusted {
            trusted.push(parse_base(extra, "trusted origin")?);
        }
        crate::transport::ensure_tls_provider();
        let configure = |builder: reqwest::ClientBuilder| {
            builder
                .timeout(self.request_timeout)
                .connect_timeout(self.connect_timeout)
                .user_agent(self.user_agent.clone())
        };
        let fresh = || self.http.as_ref().map_or_else(reqwest::Client::builder, |make| make());
        let api_http = configure(fresh())
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| Error::Config(format!("cannot build the HTTP client: {e}")))?;
        let download_http = configure(fresh())
            .build()
            .map_err(|e| Error::Config(format!("cannot build the HTTP client: {e}")))?;
        let transport = Arc::new(Transport::new(
            api_http.clone(),
            download_http,
            key,
            &trusted,
            self.retry,
        ));
        let generated = |url: &Url| {
            crate::api::Client::new_with_client(url.as_str().trim_end_matches('/'), api_http.clone(), transport.clone())
        };
        Ok(Client {
            shared: Arc::new(Shared {
                global: generated(&base_url),
                regional: generated(&regional_url),
                transport: transport.clone(),
                base_url,
                regional_url,
                slots: self.max_active_tasks.map(|n| Arc::new(Semaphore::new(n.max(1)))),
                wait: self.wait,
                learned: Mutex::new(HashMap::new()),
            }),
        })
    }
}

fn parse_base(text: &str, what: &str) -> Result<Url> {
    let url = Url::parse(text).map_err(|e| Error::Config(format!("{what} {text:?} is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
        return Err(Error::Config(format!("{what} {text:?} must be an http(s) address")));
    }
    Ok(url)
}

impl Client {
    /// A builder with defaults for everything but the key and base URL.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// Reads `GENAPI_API_KEY`, `GENAPI_BASE_URL` and (optionally)
    /// `GENAPI_REGIONAL_BASE_URL`.
    pub fn from_env() -> Result<Client> {
        Client::from_env_builder()?.build()
    }

    /// The builder [`Client::from_env`] uses, to adjust before building.
    pub fn from_env_builder() -> Result<ClientBuilder> {
        let read = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let (key, base) = (read("GENAPI_API_KEY"), read("GENAPI_BASE_URL"));
        let (key, base) = match (key, base) {
            (Some(key), Some(base)) => (key, base),
            (None, Some(_)) => return Err(Error::Config("GENAPI_BASE_URL is set but GENAPI_API_KEY is not".into())),
            (Some(_), None) => return Err(Error::Config("GENAPI_API_KEY is set but GENAPI_BASE_URL is not".into())),
            (None, None) => return Err(Error::Config("set GENAPI_API_KEY and GENAPI_BASE_URL".into())),
        };
        let mut builder = Client::builder().api_key(key).base_url(base);
        if let Some(regional) = read("GENAPI_REGIONAL_BASE_URL") {
            builder = builder.regional_base_url(regional);
        }
        Ok(builder)
    }

    /// The generated low-level client for the global base URL, sharing this
    /// client's auth and retries. Prefer [`Client::submit`].
    pub fn api(&self) -> &crate::api::Client {
        &self.shared.global
    }

    /// The base URL.
    pub fn base_url(&self) -> &Url {
        &self.shared.base_url
    }

    /// Validates and submits a request (or its builder), returning the task.
    ///
    /// The body is checked against `openapi.json` first: an invalid request
    /// fails with [`Error::Validation`] without being sent.
    pub async fn submit<R: IntoRequest>(&self, request: R) -> Result<Task> {
        let request = request.into_request()?;
        let spec = R::Request::OPERATION;
        let body =
            serde_json::to_value(&request).map_err(|e| Error::Config(format!("cannot encode the request: {e}")))?;
        check(spec.request_schema, &body)?;
        let span = tracing::info_span!("genapi.submit", operation = spec.id, task_id = tracing::field::Empty);
        async {
            let slot = self.take_slot().await;
            let api = if spec.regional {
                &self.shared.regional
            } else {
                &self.shared.global
            };
            let answer = match request.send(api).await {
                Ok(answer) => answer.into_inner(),
                Err(error) => return Err(from_generated(spec.id, error).await),
            };
            let task = Task::accepted(self.clone(), spec.id.to_string(), answer, slot)?;
            tracing::Span::current().record("task_id", task.id());
            Ok(task)
        }
        .instrument(span)
        .await
    }

    /// Submits, waits for the result and returns it: the one call most
    /// programs need.
    pub async fn run<R: IntoRequest>(&self, request: R) -> Result<crate::Output> {
        self.submit(request).await?.wait().await
    }

    /// Submits any JSON body to any path, for endpoints or fields the document
    /// does not know yet, with the same auth, retries, waiting and errors.
    /// Paths the document knows are validated as usual.
    ///
    /// ```no_run
    /// # async fn demo(client: genapi::Client) -> genapi::Result<()> {
    /// let task = client.submit_raw("/v1/gen-2-pro", serde_json::json!({"prompt": "a cat", "user": "u-1"})).await?;
    /// let output = task.wait().await?;
    /// # Ok(()) }
    /// ```
    pub async fn submit_raw(&self, path: &str, body: Value) -> Result<Task> {
        let known = crate::api::OPERATIONS
            .iter()
            .find(|op| op.path == path && op.method == "POST");
        if let Some(spec) = known {
            check(spec.request_schema, &body)?;
        }
        let operation = known.map_or(path, |op| op.id);
        let base = if known.is_some_and(|op| op.regional) {
            &self.shared.regional_url
        } else {
            &self.shared.base_url
        };
        let url = join(base, path)?;
        let slot = self.take_slot().await;
        let request = self
            .shared
            .transport
            .api_client()
            .post(url)
            .json(&body)
            .build()
            .map_err(|e| Error::Config(format!("cannot build the request: {e}")))?;
        let response = self
            .shared
            .transport
            .execute(request, Purpose::Submit, operation)
            .await
            .map_err(|source| Error::Transport {
                operation: operation.to_string(),
                source,
            })?;
        if !response.status().is_success() {
            return Err(from_response(operation, response).await);
        }
        let answer: SubmissionResponse = decode(operation, response).await?;
        Task::accepted(self.clone(), operation.to_string(), answer, slot)
    }

    /// A handle on an existing task, from its id or its polling URL.
    pub fn task(&self, id_or_polling_url: &str) -> Result<Task> {
        Task::existing(self.clone(), id_or_polling_url)
    }

    async fn take_slot(&self) -> Option<OwnedSemaphorePermit> {
        let slots = self.shared.slots.clone()?;
        slots.acquire_owned().await.ok()
    }
}

/// Local validation against the document.
fn check(schema: Option<&str>, body: &Value) -> Result<()> {
    let Some(schema) = schema else { return Ok(()) };
    let errors = Document::embedded().validate(schema, body);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(Error::Validation {
            errors,
            checked: Checked::Locally,
        })
    }
}

/// `base` + `path`, keeping any path prefix of the base.
pub(crate) fn join(base: &Url, path: &str) -> Result<Url> {
    let text = format!("{}{}", base.as_str().trim_end_matches('/'), path);
    Url::parse(&text).map_err(|e| Error::Config(format!("cannot form an address from {path:?}: {e}")))
}

/// Decodes a JSON body, keeping the raw text when it does not fit.
pub(crate) async fn decode<T: serde::de::DeserializeOwned>(operation: &str, response: reqwest::Response) -> Result<T> {
    let bytes = response.bytes().await.map_err(|source| Error::Transport {
        operation: operation.to_string(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|e| Error::Decode {
        operation: operation.to_string(),
        message: e.to_string(),
        body: String::from_utf8_lossy(&bytes).into_owned(),
    })
}

/// Turns a non-success answer into the matching error.
pub(crate) async fn from_response(operation: &str, response: reqwest::Response) -> Error {
    let status = response.status();
    let wait = retry_after(&response);
    let location = response
        .headers()
        .get(reqwest::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = response.text().await.unwrap_or_default();
    let message = service_message(&body);
    match status {
        StatusCode::UNPROCESSABLE_ENTITY => match serde_json::from_str::<HttpValidationError>(&body) {
            Ok(detail) => Error::Validation {
                errors: detail.detail,
                checked: Checked::ByService,
            },
            Err(_) => Error::UnexpectedStatus {
                status: 422,
                operation: operation.to_string(),
                message,
            },
        },
        StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => Error::Forbidden { message },
        StatusCode::PAYMENT_REQUIRED => Error::InsufficientCredits { message },
        StatusCode::TOO_MANY_REQUESTS => Error::RateLimited {
            retry_after: wait,
            message,
        },
        s if s.is_server_error() => Error::Server {
            status: s.as_u16(),
            message,
        },
        s if s.is_redirection() => Error::Redirected {
            operation: operation.to_string(),
            location: location.unwrap_or_default(),
        },
        s => Error::UnexpectedStatus {
            status: s.as_u16(),
            operation: operation.to_string(),
            message,
        },
    }
}

/// The `detail` or `message` of an error body, else the body itself.
fn service_message(body: &str) -> String {
    match serde_json::from_str::<Value>(body) {
        Ok(value) => ["detail", "message", "error"]
            .iter()
            .find_map(|k| {
                value
                    .get(*k)
                    .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            })
            .unwrap_or_else(|| body.to_string()),
        Err(_) => body.to_string(),
    }
}

/// Maps the generated client's error to ours.
pub(crate) async fn from_generated(operation: &str, error: crate::api::Error<HttpValidationError>) -> Error {
    use progenitor_client::Error as E;
    match error {
        E::ErrorResponse(answer) => Error::Validation {
            errors: answer.into_inner().detail,
            checked: Checked::ByService,
        },
        E::UnexpectedResponse(response) => from_response(operation, response).await,
        E::CommunicationError(source) | E::ResponseBodyError(source) => Error::Transport {
            operation: operation.to_string(),
            source,
        },
        E::InvalidResponsePayload(bytes, e) => Error::Decode {
            operation: operation.to_string(),
            message: e.to_string(),
            body: String::from_utf8_lossy(&bytes).into_owned(),
        },
        other => Error::Config(format!("{operation}: {other}")),
    }
}
