//! The client: one road from a request to a [`Task`].
//!
//! Typed requests and raw JSON take the same path ([`Client::submit`] and
//! [`Client::submit_raw`] both end in `Client::send_submission`): the body is
//! serialized once, validated once against the document, sent once under the
//! submission retry rules, and its answer mapped to errors in one place,
//! inside one `genapi.submit` span.

use std::sync::{Arc, Mutex};

use reqwest::Url;
use serde_json::Value;
use tracing::Instrument;

use crate::api::table::AnySubmission;
use crate::call::{Call, Reply};
use crate::error::{Checked, Error, Result};
use crate::limit::{ActiveTasks, Reservation, RECHECK};
use crate::output::Output;
use crate::response::{error_from, validation_from_service};
use crate::session::{join, Session};
use crate::submit::sealed::Sealed as _;
use crate::submit::{IntoRequest, OperationSpec, Submit};
use crate::task::Task;
use crate::transport::{Purpose, Transport};
use crate::validate::Document;
use crate::wait::{Learned, WaitOptions};

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
    pub(crate) shared: Arc<Session>,
}

/// Where a submission goes.
struct Target<'a> {
    /// operationId, or the path for one the document lacks.
    operation: &'a str,
    path: &'a str,
    regional: bool,
    schema: Option<&'a str>,
}

impl Target<'_> {
    /// The submission to `path`: an operation of the document, or a path
    /// it lacks.
    fn of_path(path: &str) -> Target<'_> {
        match OperationSpec::by_path(path) {
            Some(op) => Target {
                operation: op.id,
                path: op.path,
                regional: op.regional,
                schema: op.request_schema,
            },
            None => Target {
                operation: path,
                path,
                regional: false,
                schema: None,
            },
        }
    }
}

impl Client {
    pub(crate) fn from_parts(
        transport: Arc<Transport>,
        base_url: Url,
        regional_url: Url,
        active: Option<Arc<ActiveTasks>>,
        wait: WaitOptions,
        learned: Learned,
    ) -> Client {
        Client {
            shared: Arc::new(Session {
                transport,
                base_url,
                regional_url,
                active,
                wait,
                learned: Mutex::new(learned),
                poll_request: Default::default(),
            }),
        }
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
        let spec: &OperationSpec = <R::Request as Submit>::OPERATION;
        let body = crate::submit::encode(&request)?;
        let target = Target {
            operation: spec.id,
            path: spec.path,
            regional: spec.regional,
            schema: spec.request_schema,
        };
        self.send_submission(target, body, Some(request.into_any()), Purpose::Submit, ready)
            .await
            .map_err(Unsent::into_error)
    }

    /// Submits, waits for the result and returns it: the one call most
    /// programs need.
    pub async fn run<R: IntoRequest>(&self, request: R) -> Result<Output> {
        self.submit(request).await?.wait().await
    }

    /// Submits any JSON body to a path of the service, for endpoints or
    /// fields the document does not know yet, with the same key rules,
    /// retries, waiting and errors. Paths the document knows are validated as
    /// usual. `path` must be a path (`/v1/…`), never an address: the body can
    /// only go to the configured service.
    ///
    /// ```no_run
    /// # async fn demo(client: genapi::Client) -> genapi::Result<()> {
    /// let task = client.submit_raw("/v1/gen-2-pro", serde_json::json!({"prompt": "a cat", "user": "u-1"})).await?;
    /// let output = task.wait().await?;
    /// # Ok(()) }
    /// ```
    pub async fn submit_raw(&self, path: &str, body: Value) -> Result<Task> {
        self.send_submission(Target::of_path(path), body, None, Purpose::Submit, ready)
            .await
            .map_err(Unsent::into_error)
    }

    /// [`Client::submit_raw`], awaiting `before_send` once the body is
    /// checked and a seat under the limit is held, just before the request
    /// leaves. A journal that records the submission there leaves the least
    /// room for "recorded, never sent". When it holds the submission back,
    /// nothing is sent and its reason comes back as [`Unsent::HeldBack`].
    ///
    /// A program that keeps its own record of submissions (a batch journal)
    /// writes it here, so a crash leaves at most one submission recorded
    /// and not sent, never one sent and not recorded.
    ///
    /// One record, one request: the request is sent once, whatever the
    /// client's [`crate::RetryPolicy`]. A 429, or a connection that could not
    /// be opened, comes back as its error ([`Error::is_safe_to_resubmit`]):
    /// the caller records that nothing was created and, unless it is
    /// stopping, submits again under a new record.
    pub async fn submit_raw_recorded<F, Fut, H>(
        &self,
        path: &str,
        body: Value,
        before_send: F,
    ) -> Result<Task, Unsent<H>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(), H>>,
    {
        self.send_submission(Target::of_path(path), body, None, Purpose::SubmitOnce, before_send)
            .await
    }

    /// Treats a request body sent earlier, perhaps by another process, as
    /// one this client sent: its webhook secret and the tokens of the
    /// addresses it names are scrubbed from everything the service sends
    /// from now on, as they are for every body this client submits. Call it
    /// before picking up a task submitted elsewhere whose answers may quote
    /// them (a batch does, for each line it takes up again).
    ///
    /// ```
    /// # fn demo(client: genapi::Client) {
    /// let sent = serde_json::json!({"prompt": "a fox", "webhook_secret": "whsec-kept-in-the-job-file"});
    /// client.learn_secrets(&sent);
    /// # }
    /// ```
    pub fn learn_secrets(&self, body: &Value) {
        self.shared.transport.scrubber().learn_request(body);
    }

    /// How many submissions and resumed tasks of this client (and its
    /// clones) wait now for room under the active-task limit, a shared one
    /// included: none have been sent, so a progress display does not count
    /// them as in flight. Always 0 without a limit.
    ///
    /// ```
    /// # fn demo(client: genapi::Client) {
    /// println!("{} waiting for a seat", client.waiting_for_room());
    /// # }
    /// ```
    pub fn waiting_for_room(&self) -> usize {
        self.shared.active.as_ref().map_or(0, |active| active.waiting())
    }

    /// A handle on an existing task, from its id or its polling URL, to poll
    /// it or wait for it again (for instance after [`Error::Timeout`], or in
    /// another process). A polling URL is polled as it is. A bare id is
    /// polled on the base URL, and when that host does not know it (a
    /// regional task: the global host says "not found" for those) on each
    /// other API host this client is configured with, in turn; the first
    /// that knows it is polled from then on, and [`Task::polling_url`] says
    /// which. Nothing is sent until the task is polled or waited for.
    ///
    /// ```no_run
    /// # async fn demo(client: genapi::Client) -> genapi::Result<()> {
    /// let task = client.task("2f6c1a0e-6d1b-4c6e-9a43-0d8e5b7e2a91")?;
    /// let output = task.wait().await?;
    /// output.save("picked-up").await?;
    /// # Ok(()) }
    /// ```
    pub fn task(&self, id_or_polling_url: &str) -> Result<Task> {
        Task::existing(self.shared.clone(), id_or_polling_url)
    }

    /// A handle on a task accepted earlier that may still be running (a
    /// batch taking up its journal): it takes a seat under the active-task
    /// limit, waiting for room as a submission does, and holds it until the
    /// task is seen final. For a program that keeps its own record of
    /// accepted tasks.
    pub async fn resume(&self, id_or_polling_url: &str) -> Result<Task> {
        let task = self.task(id_or_polling_url)?;
        let seat = self
            .reserve()
            .await?
            .map(|reservation| reservation.accepted(task.id(), task.polling_url()));
        Ok(task.seated(seat))
    }

    /// Where a task known only by its id may be polled: `get_result` on each
    /// API host this client is configured with, base first.
    pub fn polling_candidates(&self, id: &str) -> Result<Vec<url::Url>> {
        self.shared.polling_candidates(id)
    }

    /// The most tasks this client keeps active at once (see
    /// [`crate::ClientBuilder::max_active_tasks`]); `None` when unlimited.
    ///
    /// ```
    /// let client = genapi::Client::builder()
    ///     .api_key("key")
    ///     .base_url("https://api.example.com")
    ///     .max_active_tasks(8)
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(client.max_active_tasks(), Some(8));
    /// ```
    pub fn max_active_tasks(&self) -> Option<usize> {
        self.shared.active.as_ref().map(|active| active.limit())
    }

    /// Whether this client sends its key to `url`: the base and regional
    /// origins, the origins it was told to trust, and https hosts inside the
    /// base host's registrable domain ([`crate::ClientBuilder::trust_origin`]
    /// has the whole rule). A program that relays the service's addresses
    /// (a proxy) asks it before it adds a key.
    ///
    /// ```
    /// let client = genapi::Client::builder()
    ///     .api_key("k")
    ///     .base_url("https://api.example.com")
    ///     .build()
    ///     .unwrap();
    /// let url = |text: &str| genapi::reqwest::Url::parse(text).unwrap();
    /// assert!(client.sends_key_to(&url("https://api.eu4.example.com/v1/get_result?id=1")));
    /// assert!(!client.sends_key_to(&url("https://example.com.evil.net/v1/get_result")));
    /// ```
    pub fn sends_key_to(&self, url: &Url) -> bool {
        self.shared.transport.is_trusted(url)
    }

    /// Notes that `key` is a key too, as secret as this client's own.
    pub(crate) fn learns_key(&self, key: &str) {
        self.shared.transport.scrubber().learn(key);
    }

    /// Notes that `id` names a task this client handles: its scrubber never
    /// takes it for a secret.
    pub(crate) fn knows_task(&self, id: &str) {
        self.shared.transport.scrubber().is_a_task_id(id);
    }

    /// A HAR recording at `path` of exchanges a program relays to the
    /// service with an HTTP client of its own (a proxy in front of the
    /// service), written and redacted as this client writes its own
    /// ([`crate::ClientBuilder::record`]): the key and every secret this
    /// client knows left out, addresses' query values and tokens
    /// redacted, downloads summarised. `cargo xtask drift` reads it.
    ///
    /// ```no_run
    /// # fn demo(client: &genapi::Client, http: &genapi::reqwest::Client) -> genapi::Result<()> {
    /// let recording = client.record_relayed("relayed.har", genapi::RecordOptions::default())?;
    /// let request = http.get(format!("{}v1/get_result?id=7", client.base_url())).build().map_err(|e| {
    ///     genapi::Error::Config(e.without_url().to_string())
    /// })?;
    /// let exchange = recording.sent(&request, None, "get_result");
    /// // … send it, then:
    /// exchange.answered(genapi::http::StatusCode::OK, &genapi::http::HeaderMap::new(), br#"{"id":"7","status":"Pending"}"#);
    /// # Ok(()) }
    /// ```
    pub fn record_relayed(
        &self,
        path: impl AsRef<std::path::Path>,
        options: crate::RecordOptions,
    ) -> Result<crate::RelayRecording> {
        let transport = &self.shared.transport;
        let (base, regional) = (&self.shared.base_url, &self.shared.regional_url);
        let origins = crate::record::Origins {
            base_url: base.as_str(),
            regional_base_url: regional.as_str(),
            trusted: transport
                .named_origins()
                .iter()
                .filter(|origin| *origin != base && *origin != regional)
                .map(Url::as_str)
                .collect(),
        };
        let recorder = crate::record::Recorder::create(path.as_ref(), &options, transport.shared_scrubber(), origins)
            .map_err(Error::Config)?;
        Ok(crate::RelayRecording::new(recorder, self.clone()))
    }

    /// What this client has learned about task durations, to keep across
    /// runs and give to [`crate::ClientBuilder::learned`].
    pub fn learned(&self) -> Learned {
        self.shared.learned.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// The one submission path: `body` is checked against the document,
    /// `typed` is the request it was made from (`None` for JSON the caller
    /// wrote), and `purpose` says whether it is retried (`Submit`) or sent
    /// once (`SubmitOnce`).
    async fn send_submission<F, Fut, H>(
        &self,
        target: Target<'_>,
        body: Value,
        typed: Option<AnySubmission>,
        purpose: Purpose,
        before_send: F,
    ) -> Result<Task, Unsent<H>>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(), H>>,
    {
        // Learned before anything can answer or echo the body: even the
        // answer to this submission is scrubbed of its secrets.
        self.shared.transport.scrubber().learn_request(&body);
        if let Some(schema) = target.schema {
            let errors = Document::embedded().validate(schema, &body);
            if !errors.is_empty() {
                return Err(Error::Validation {
                    errors,
                    checked: Checked::Locally,
                }
                .into());
            }
        }
        let base = if target.regional {
            &self.shared.regional_url
        } else {
            &self.shared.base_url
        };
        // Everything that can refuse the body is done before a seat is held.
        let outgoing = match typed {
            Some(request) => Outgoing::Operation(request, None),
            None => self.raw_outgoing(&target, base, body)?,
        };
        let span = crate::telemetry::submit_span(target.operation, target.path);
        async {
            let reservation = self.reserve().await?;
            before_send().await.map_err(Unsent::HeldBack)?;
            let task = match self.exchange_submission(outgoing, &target, base, purpose).await {
                Ok(task) => task,
                Err(error) => {
                    // The service may have created a task: a shared seat
                    // stays taken for it.
                    if let (Some(reservation), false) = (reservation, error.created_no_task()) {
                        reservation.unanswered();
                    }
                    return Err(error.into());
                }
            };
            let seat = reservation.map(|reservation| reservation.accepted(task.id(), task.polling_url()));
            let task = task.seated(seat);
            crate::telemetry::task_known(&tracing::Span::current(), task.id());
            Ok(task)
        }
        .instrument(span)
        .await
    }

    /// Sends a submission ready to leave (checked, its seat held) for
    /// `purpose`, and reads its answer: the task, or why there is none.
    async fn exchange_submission(
        &self,
        outgoing: Outgoing,
        target: &Target<'_>,
        base: &Url,
        purpose: Purpose,
    ) -> Result<Task> {
        let transport = &self.shared.transport;
        let reply = match outgoing {
            Outgoing::Operation(request, exact_body) => {
                let api = Call::submission(transport, base.as_str(), exact_body, purpose);
                let sent = request.send(&api).await;
                Call::reply(&api, target.operation, sent).await?
            }
            Outgoing::Unlisted(request) => Reply::Raw(
                transport
                    .exchange_bytes(request, purpose, target.operation, transport.max_response_bytes)
                    .await?,
            ),
        };
        match reply {
            Reply::Typed(answer) => Task::from_submission(self.shared.clone(), target.operation, answer),
            Reply::Invalid(detail) => Err(validation_from_service(transport, detail)),
            Reply::Raw(answer) if answer.status.is_success() => {
                Task::accepted(self.shared.clone(), target.operation, &answer.body)
            }
            Reply::Raw(answer) => Err(error_from(transport, target.operation, &answer)),
        }
    }

    /// What JSON the caller wrote becomes. For an operation of the document:
    /// the body decoded into the operation's type, to be sent by its
    /// generated method (the same operation, headers and answer decoding as
    /// [`Client::submit`]), with the caller's own bytes put on the wire so
    /// fields the document does not know yet reach the service. For a path
    /// the document lacks there is no generated method: the request the
    /// transport sends as it is (see `docs/one-road.md`).
    fn raw_outgoing(&self, target: &Target<'_>, base: &Url, body: Value) -> Result<Outgoing> {
        let bytes = bytes::Bytes::from(
            serde_json::to_vec(&body).map_err(|e| Error::refused_locally(format!("cannot encode the request: {e}")))?,
        );
        if target.schema.is_none() {
            let request = self
                .shared
                .transport
                .api_client()
                .post(join(base, target.path)?)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(bytes)
                .build()
                .map_err(|e| Error::refused_locally(format!("cannot build the request: {e}")))?;
            return Ok(Outgoing::Unlisted(request));
        }
        // Only the caller's own bytes go on the wire.
        let request = typed_submission(target.operation, body)?;
        Ok(Outgoing::Operation(request, Some(bytes)))
    }

    /// Waits for room under the active-task limit. While there is none, the
    /// tasks nobody waits for are polled, so the seats of finished ones are
    /// freed: this never waits forever.
    async fn reserve(&self) -> Result<Option<Reservation>> {
        let Some(active) = self.shared.active.clone() else {
            return Ok(None);
        };
        let _waiting = active.wait_for_room();
        // The usual case, room at once, registers no waiter.
        let mut reservation = match active.try_reserve() {
            Some(reservation) => reservation,
            // Rare: kept off the submission's own state.
            None => Box::pin(self.room(&active)).await,
        };
        // A limit shared with other processes needs one of its places too.
        active
            .take_shared(&mut reservation, |polling_url| async move {
                self.seen_final(&polling_url).await
            })
            .await
            .map_err(|reason| Error::SharedLimit { reason })?;
        Ok(Some(reservation))
    }

    /// Waits until there is room under the client's own limit, polling the
    /// tasks nobody waits for meanwhile.
    async fn room(&self, active: &Arc<ActiveTasks>) -> Reservation {
        loop {
            // Registered before looking, so a seat freed in between wakes us.
            let changed = active.next_change();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if let Some(reservation) = active.try_reserve() {
                return reservation;
            }
            let mut found = None;
            while let Some((id, polling_url)) = active.next_due() {
                if self.seen_final(polling_url.as_str()).await {
                    active.finished(&id);
                }
                found = active.try_reserve();
                if found.is_some() {
                    break;
                }
            }
            if let Some(reservation) = found {
                return reservation;
            }
            // Unwatched tasks are checked again after a while.
            let _ = tokio::time::timeout(RECHECK, changed).await;
        }
    }

    /// Polls a task once to learn whether it can still be running: a final
    /// status, or an address that cannot name a task, says it cannot.
    async fn seen_final(&self, polling_url: &str) -> bool {
        match Task::existing(self.shared.clone(), polling_url) {
            Ok(task) => match task.poll_once().await {
                Ok(result) => result.status.is_final(),
                Err(error) => {
                    tracing::debug!(%error, task_id = %task.id(), "could not check an active task");
                    false
                }
            },
            Err(_) => true,
        }
    }
}

/// Whether a JSON body, valid against the document, can also be held by the
/// request type of the submission `operation` (a size beyond `u32` cannot):
/// a body that fails here would be refused before it is sent. A tool that
/// checks requests ahead of time (a job file) can find such bodies early.
/// `operation` is any name of the submission: its operationId
/// (`gen_2_pro`), its model name (`gen-2-pro`) or its path.
///
/// ```
/// use serde_json::json;
/// assert!(genapi::check_request_type("gen-2-pro", json!({"prompt": "a fox", "width": 1024})).is_ok());
/// let too_wide = genapi::check_request_type("gen_2_pro", json!({"prompt": "a fox", "width": 1u64 << 40}));
/// assert!(matches!(too_wide, Err(genapi::Error::Validation { .. })));
/// ```
pub fn check_request_type(operation: &str, body: Value) -> Result<()> {
    let catalog = crate::validate::Document::embedded().catalog();
    let id = match catalog.find(operation) {
        Ok(model) => model.operation.id.as_str(),
        Err(unknown) => {
            let problem = if crate::api::OPERATIONS.iter().any(|op| op.id == operation) {
                format!("{operation:?} is not a submission: it takes no request body")
            } else {
                unknown.to_string()
            };
            return Err(Error::InvalidArgument {
                argument: "operation",
                problem,
            });
        }
    };
    typed_submission(id, body).map(drop)
}

/// A JSON body as the request type of the submission `operation` (its
/// operationId): what the generated method sends. A body the type cannot
/// hold (a size beyond `u32`, say) is refused in the service's 422 shape,
/// before anything is sent.
pub(crate) fn typed_submission(operation: &str, mut body: Value) -> Result<AnySubmission> {
    // The document takes `1024.0` where it wants an integer, and so must
    // the decoding.
    whole_numbers_as_integers(&mut body);
    let decoded = AnySubmission::decode(operation, body).ok_or_else(|| Error::InvalidArgument {
        argument: "operation",
        problem: format!("{operation:?} is not the operationId of a submission of the document"),
    })?;
    decoded.map_err(Error::refused_locally)
}

/// `1024.0` becomes `1024`, at any depth: JSON Schema counts a number with
/// no fraction as an integer, serde does not.
fn whole_numbers_as_integers(value: &mut Value) {
    match value {
        Value::Number(number) if number.is_f64() => {
            let Some(float) = number.as_f64() else { return };
            // Exactly representable and within i64: no value changes.
            if float.fract() == 0.0 && float.abs() < 9.0e15 {
                *value = Value::from(float as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(map) => map.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// Nothing to do before sending: never holds a submission back.
async fn ready() -> Result<(), std::convert::Infallible> {
    Ok(())
}

/// A submission ready to leave.
enum Outgoing {
    /// An operation of the document, sent by its generated method; with the
    /// caller's exact bytes when they wrote the JSON.
    Operation(AnySubmission, Option<bytes::Bytes>),
    /// A path the document lacks, sent by the transport as it is.
    Unlisted(reqwest::Request),
}

/// Why [`Client::submit_raw_recorded`] did not give a task.
#[derive(Debug)]
pub enum Unsent<H> {
    /// It failed, as any submission can.
    Failed(Error),
    /// The hook held it back: nothing was sent.
    HeldBack(H),
}

impl<H> From<Error> for Unsent<H> {
    fn from(error: Error) -> Self {
        Unsent::Failed(error)
    }
}

impl Unsent<std::convert::Infallible> {
    /// The error of a submission no hook can hold back.
    fn into_error(self) -> Error {
        match self {
            Unsent::Failed(error) => error,
            Unsent::HeldBack(never) => match never {},
        }
    }
}
