//! One error type for everything the client does.
//!
//! Every variant says what went wrong in words a user can act on; the raw
//! material (the service's 422 detail, a task's `details`, an undecodable body)
//! is kept so a program can look closer. Nothing here ever holds the API key
//! or a webhook secret.

use std::fmt;
use std::time::Duration;

use crate::api::types::{ValidationError, ValidationErrorLocItem};
use crate::TaskStatus;

/// A task the service accepted: what a program needs to find it again with
/// [`crate::Client::task`]. Keep the polling URL: the service polls a task on
/// the (regional) host its submission named, and an id alone is looked up at
/// `{base}/v1/get_result`, which knows only the base host's tasks.
///
/// Every error that happens after a submission was accepted carries one, so
/// a paid task is never lost: [`Error::task`] returns it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TaskRef {
    /// Task id.
    pub id: String,
    /// The address that is polled for its result.
    pub polling_url: String,
}

impl fmt::Display for TaskRef {
    /// The task by its id, and its polling URL as every address is shown
    /// ([`genapi_text::shown_address`]: without its query, which may be
    /// signed); the whole URL is the `polling_url` field.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A task resumed from a polling URL without an `id` parameter has
        // no id of its own: the URL alone names it.
        let shown = genapi_text::shown_address(&self.polling_url);
        match self.id.as_str() {
            "" => write!(f, "the task at polling URL {shown}"),
            id => write!(f, "task {id} (polling URL {shown})"),
        }
    }
}

/// A network error as the client keeps it: reqwest's error without the
/// address it names (reqwest's text is `… for url (ADDRESS)`, the signed
/// query included), and that address's origin, to name instead.
#[derive(Debug)]
pub(crate) struct Unaddressed {
    /// reqwest's error, its address taken out.
    pub(crate) error: reqwest::Error,
    /// [`shown_origin`] of the address, empty when none is known.
    pub(crate) origin: String,
}

impl Unaddressed {
    /// `error` without its address; its origin is the one of the address it
    /// names, or else of `address` (the request's).
    pub(crate) fn new(error: reqwest::Error, address: Option<&reqwest::Url>) -> Unaddressed {
        let origin = error.url().or(address).map(shown_origin).unwrap_or_default();
        Unaddressed {
            error: error.without_url(),
            origin,
        }
    }
}

impl fmt::Display for Unaddressed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

/// `scheme://host[:port]` of `address`, by the one rule for addresses shown.
pub(crate) fn shown_origin(address: &reqwest::Url) -> String {
    genapi_text::shown_address(&address.origin().ascii_serialization())
}

/// ` at ORIGIN`, when it is known.
fn at_origin(origin: &str) -> String {
    match origin {
        "" => String::new(),
        origin => format!(" at {origin}"),
    }
}

/// An operation as a message names it: the model's submission or the
/// poll, as a user knows them, not the document's operation id.
fn named(operation: &str) -> String {
    match crate::api::OPERATIONS.iter().find(|op| op.id == operation) {
        Some(op) if op.method == "POST" => format!("the {} submission", op.path.trim_start_matches("/v1/")),
        Some(op) if op.path.ends_with("/get_result") => "the poll of a task".to_string(),
        Some(op) => format!("{} {}", op.method, op.path),
        None => operation.to_string(),
    }
}

/// Whether an operation is a submission, which may create a task.
fn is_submission(operation: &str) -> bool {
    crate::api::OPERATIONS
        .iter()
        .any(|op| op.id == operation && op.method == "POST")
}

/// Result of the client's operations.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where a validation error was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Checked {
    /// By this crate, before anything was sent.
    Locally,
    /// By the service, which answered 422.
    ByService,
}

/// Which stage of moderation stopped a task.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Moderation {
    /// The input was flagged before processing (`Request Moderated`).
    Request,
    /// The output was flagged (`Content Moderated`).
    Content,
}

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(Error);

/// Everything that can go wrong.
///
/// Errors that happen after the service accepted a task carry its
/// [`TaskRef`] (see [`Error::task`]); their messages name the task so it can
/// be resumed with [`crate::Client::task`] instead of being paid for twice.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request is invalid; `errors` has the service's 422 shape whether it
    /// was found locally or by the service, so both are handled alike.
    #[error("invalid request ({}): {}; fix the fields named and send again", checked_by(*.checked), summary(.errors))]
    Validation {
        /// Every problem found. A service's echo of the input is scrubbed:
        /// secret-like fields are redacted and long values cut.
        errors: Vec<ValidationError>,
        /// Found before sending, or by the service.
        checked: Checked,
    },
    /// 403: the key is missing or wrong, or its project has no access.
    ///
    /// Says `forbidden (403): check {key_origin} and that its project may
    /// use this endpoint`, e.g. `check the key in GENAPI_API_KEY`.
    #[error("forbidden (403): check {key_origin} and that its project may use this endpoint{}{}", detail(.message), on_task(.task))]
    Forbidden {
        /// The service's message, if any.
        message: String,
        /// Where the key that was sent came from, in words (`the key in
        /// GENAPI_API_KEY`, [`crate::ClientBuilder::api_key_from`]); never
        /// the key itself.
        key_origin: String,
        /// The task, when this happened after it was accepted.
        task: Option<TaskRef>,
    },
    /// 402: the organization has no credits left.
    #[error("insufficient credits (402): add credits or raise the project's spending limit{}", detail(.message))]
    InsufficientCredits {
        /// The service's message, if any.
        message: String,
    },
    /// 429: too many active tasks. On a submission the task was not
    /// accepted, so submitting again later is safe.
    #[error("rate limited (429): too many active tasks; retry {}{}{}", retry_hint(*.retry_after), detail(.message), on_task(.task))]
    RateLimited {
        /// The service's `Retry-After`, when given.
        retry_after: Option<Duration>,
        /// The service's message, if any.
        message: String,
        /// The task, when this happened while polling it.
        task: Option<TaskRef>,
    },
    /// 5xx from the service.
    #[error("service error ({status}){}{}", detail(.message), what_next(.task))]
    Server {
        /// HTTP status.
        status: u16,
        /// The body, if any.
        message: String,
        /// The task, when this happened after it was accepted.
        task: Option<TaskRef>,
    },
    /// Any other status the contract does not describe.
    #[error("unexpected response ({status}) from {request}{}{}", detail(.message), on_task(.task), request = named(.operation))]
    UnexpectedStatus {
        /// HTTP status.
        status: u16,
        /// What was being done.
        operation: String,
        /// The body, if any.
        message: String,
        /// The task, when this happened after it was accepted.
        task: Option<TaskRef>,
    },
    /// The request could not be sent, or the answer not read.
    ///
    /// Names the operation and the host it met (`network error during the
    /// poll of a task at https://api.example.com: …`), never the address:
    /// a result's or a polling address's query may be signed.
    #[error("network error during {request}{}: {}{}", at_origin(.origin), cause_chain(.source), match .task { None if .source.is_connect() => "; nothing was sent: check the base URL and your connection".to_string(), task => what_next(task) }, request = named(.operation))]
    Transport {
        /// What was being done.
        operation: String,
        /// `scheme://host[:port]` of the address the request went to, as
        /// every address is shown ([`genapi_text::shown_address`]): never
        /// its path, query or user information. Empty when unknown.
        origin: String,
        /// The underlying error, without the address it would name
        /// ([`reqwest::Error::without_url`]; never carries the key).
        #[source]
        source: reqwest::Error,
        /// The task, when this happened after it was accepted.
        task: Option<TaskRef>,
    },
    /// A layer added with [`crate::ClientBuilder::layer`] failed, or held
    /// the request past the request timeout: the request may have left, so
    /// a submission is not sent again (see [`Error::is_safe_to_resubmit`]).
    #[error("a layer added with ClientBuilder::layer failed during {request}{} (the layer said: {source})", what_next(.task), request = named(.operation))]
    Layer {
        /// What was being done.
        operation: String,
        /// The layer's error, shown without the key or any secret the
        /// client knows (it may quote the request).
        #[source]
        source: crate::LayerError,
        /// The task, when this happened after it was accepted.
        task: Option<TaskRef>,
    },
    /// The deadline passed before the task reached a final status. The task
    /// goes on at the service: wait for it again with [`crate::Client::task`].
    #[error("no final status for {task} after {}s (last seen: {}); the task goes on: wait for it again later with its polling URL", .after.as_secs_f64(), show_status(.last_status))]
    Timeout {
        /// The deadline.
        after: Duration,
        /// The last status polling saw.
        last_status: Option<TaskStatus>,
        /// The task.
        task: TaskRef,
    },
    /// The download of a result took longer than
    /// [`crate::ClientBuilder::download_timeout`], all its attempts together.
    /// The task is done: download it again later ([`crate::Client::task`]).
    #[error("the download of the result of {task} took longer than the download timeout ({}s in all, every attempt included); the task is done: wait for it again with its polling URL to download it, or raise the timeout (ClientBuilder::download_timeout)", .after.as_secs_f64())]
    DownloadTimeout {
        /// The download timeout.
        after: Duration,
        /// The task.
        task: TaskRef,
    },
    /// The task ended with `Error`.
    #[error("task {} failed{}", .task.id, details_text(.details))]
    TaskFailed {
        /// The task.
        task: TaskRef,
        /// The service's `details`, usually `{"error": "…"}`.
        details: Option<serde_json::Value>,
    },
    /// The task was stopped by moderation (not charged).
    #[error("task {} was moderated ({}): change the {} or raise safety_tolerance", .task.id, match .stage { Moderation::Request => "input", Moderation::Content => "output" }, match .stage { Moderation::Request => "prompt or input images", Moderation::Content => "prompt" })]
    Moderated {
        /// The task.
        task: TaskRef,
        /// Input or output moderation.
        stage: Moderation,
        /// The service's `details`, if any.
        details: Option<serde_json::Value>,
    },
    /// The service does not know the task, or it has expired.
    #[error("{task} was not found: it expired, was never accepted, or is known only to the polling host its submission named (resume with that polling URL)")]
    TaskNotFound {
        /// The task.
        task: TaskRef,
    },
    /// The result's bytes are in no image or video format (an HTML page
    /// served as `image/png`, an empty answer): nothing was saved. The task
    /// is done and paid for; its result may be fetched again later.
    #[error("the result of {task} is not an image ({size} bytes in no image or video format): nothing was saved; the task is done: wait for it again with its polling URL to fetch the result again")]
    NotAnImage {
        /// The task.
        task: TaskRef,
        /// How many bytes came.
        size: u64,
    },
    /// The signed result address no longer works, even after polling
    /// again: the validity it stated when it came has passed, and the
    /// service offers the same address again. Any other refusal (of a fresh
    /// address, of one that states nothing, validity left or a time already
    /// past when it came, with a poll answer that the task runs or is gone)
    /// is an [`Error::UnexpectedStatus`] instead, which leaves the task
    /// open: the wait that follows says whether it is gone.
    #[error("the result of task {} has expired (addresses are valid about 10 minutes) and the service no longer offers a fresh one; to get an image, submit the task again (a new, charged task)", .task.id)]
    ResultExpired {
        /// The task.
        task: TaskRef,
    },
    /// A polling host outside the trusted set refused a poll made without
    /// the key (401/403). Trust it if it belongs to the service.
    #[error("the polling host {origin} of {task} refused a poll without the API key; if it belongs to the service, trust it (GENAPI_TRUSTED_ORIGINS={origin})")]
    UntrustedOrigin {
        /// `scheme://host[:port]` of the polling host.
        origin: String,
        /// The task.
        task: TaskRef,
    },
    /// A redirect from the API; the key is never forwarded to follow it.
    #[error("the service redirected {request} to {location}; not followed, so the key stays on trusted origins{}", on_task(.task), request = named(.operation))]
    Redirected {
        /// What was being done.
        operation: String,
        /// The `Location` header, as every address is shown
        /// ([`genapi_text::shown_address`]: without its query, fragment or
        /// user information; a relative one is not shown).
        location: String,
        /// The task, when this happened after it was accepted.
        task: Option<TaskRef>,
    },
    /// A body could not be decoded; the raw text is kept (cut to a few KiB,
    /// with the API key removed should a hostile service echo it).
    #[error("cannot decode the answer to {request}: {message}{}", match .task { None if is_submission(.operation) => what_next(&None), task => on_task(task) }, request = named(.operation))]
    Decode {
        /// What was being done.
        operation: String,
        /// What did not fit.
        message: String,
        /// The raw body, as received (cut, scrubbed).
        body: String,
        /// The task, when this happened after it was accepted.
        task: Option<TaskRef>,
    },
    /// A body was larger than the client accepts.
    #[error("the answer to {request} is larger than {limit} bytes{}", on_task(.task), request = named(.operation))]
    TooLarge {
        /// What was being done.
        operation: String,
        /// The limit that was exceeded.
        limit: u64,
        /// The task, when this happened after it was accepted.
        task: Option<TaskRef>,
    },
    /// An input (an image file or URL) cannot be read or used. Nothing was
    /// sent.
    #[error("{source_name}: {message}")]
    Input {
        /// The path, the URL (as every address is shown, without its
        /// query: [`genapi_text::shown_address`]) or "bytes".
        source_name: String,
        /// What to fix.
        message: String,
    },
    /// A result could not be written (the disk is full, the folder is not
    /// writable, …). With a `task`, that task was accepted and paid for: it
    /// is fine, and waiting for it again saves it without paying again.
    #[error("cannot write {target}: {message}{}", on_task(.task))]
    Write {
        /// The file (or the kind of sink) being written.
        target: String,
        /// What went wrong, and what to check.
        message: String,
        /// The task whose result it was.
        task: Option<TaskRef>,
    },
    /// A file (or a link) has the name [`crate::Output::save`] was to write,
    /// so nothing was saved and nothing replaced. The task is fine and its
    /// output still at hand: save it under another name, or replace the file
    /// with [`crate::Output::save_replacing`].
    #[error("{} exists, so the result of {task} was not saved (nothing is replaced unasked): save it under another name, or replace the file with Output::save_replacing", .path.display())]
    FileExists {
        /// The name taken, with the extension the save gave it.
        path: std::path::PathBuf,
        /// The task whose result it was.
        task: TaskRef,
    },
    /// An argument given to a call cannot be used: a task id or polling
    /// URL, a path, an operation name. Nothing was sent.
    #[error("{argument}: {problem}")]
    InvalidArgument {
        /// Which argument, as the call's documentation names it (`task id
        /// or polling URL`, `path`, `operation`).
        argument: &'static str,
        /// What is wrong with it, and what would be accepted.
        problem: String,
    },
    /// The client's configuration is incomplete or wrong: the key, the base
    /// URLs, trusted origins, TLS roots. Nothing was sent.
    #[error("configuration: {0}")]
    Config(String),
    /// The database behind an active-task limit shared with other
    /// processes (`ClientBuilder::shared_seats`) cannot be used, so no place
    /// could be taken. Nothing was sent.
    #[error("the shared active-task limit's database cannot be used ({reason}); nothing was sent: check the database and try again")]
    SharedLimit {
        /// What the database answered, or why it could not be reached.
        reason: String,
    },
}

/// Matches the variants whose task is optional (errors that can happen
/// before or after acceptance), binding their `task` field.
macro_rules! with_optional_task {
    ($error:expr, $task:ident => $then:expr, otherwise $else:expr) => {
        match $error {
            Error::Forbidden { $task, .. }
            | Error::RateLimited { $task, .. }
            | Error::Server { $task, .. }
            | Error::UnexpectedStatus { $task, .. }
            | Error::Transport { $task, .. }
            | Error::Layer { $task, .. }
            | Error::Redirected { $task, .. }
            | Error::Decode { $task, .. }
            | Error::TooLarge { $task, .. }
            | Error::Write { $task, .. } => $then,
            _ => $else,
        }
    };
}

/// What to do after a request that may have reached the service and got no
/// usable answer: wait for its task again, or, when no task is known yet,
/// look for one before submitting again.
fn what_next(task: &Option<TaskRef>) -> String {
    match task {
        // Not "was accepted": a handle made from an id or an address
        // (`Client::task`) may name a task the service never accepted.
        Some(t) => format!("; {t}: wait for it again instead of resubmitting"),
        None => "; the request may have reached the service: check for the task before submitting again".to_string(),
    }
}

/// `; task ID (polling URL …)` when there is a task.
fn on_task(task: &Option<TaskRef>) -> String {
    task.as_ref().map(|t| format!("; {t}")).unwrap_or_default()
}

/// The error and its causes, `a: b: c`, so a refused connection, a DNS
/// failure and a timeout read differently.
/// Text from elsewhere (a layer's, the system's) is made safe to show and
/// cut to [`CHAIN_SHOWN`] characters.
pub(crate) fn cause_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = genapi_text::clean(&error.to_string());
    for cause in genapi_text::causes(error) {
        text.push_str(": ");
        text.push_str(&cause);
    }
    genapi_text::cut(&text, CHAIN_SHOWN).into_owned()
}

/// The most of an error chain a message shows.
const CHAIN_SHOWN: usize = 600;

fn checked_by(checked: Checked) -> &'static str {
    match checked {
        Checked::Locally => "checked before sending",
        Checked::ByService => "422 from the service",
    }
}

/// `body.width: Input should be …; body.prompt: Field required`.
pub(crate) fn summary(errors: &[ValidationError]) -> String {
    errors
        .iter()
        .map(|e| format!("{}: {}", location(&e.loc), e.msg))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `body.input_image_2` for `["body", "input_image_2"]`.
pub(crate) fn location(loc: &[ValidationErrorLocItem]) -> String {
    loc.iter().map(ToString::to_string).collect::<Vec<_>>().join(".")
}

/// The service's own words, shown: an address they quote (an input
/// image's, a result's) by the address rule, as every address shown.
fn service_words(text: &str) -> String {
    truncate(&genapi_text::addresses_shown(text.trim()), 300)
}

fn detail(message: &str) -> String {
    if message.trim().is_empty() {
        String::new()
    } else {
        format!(" ({})", service_words(message))
    }
}

fn retry_hint(after: Option<Duration>) -> String {
    match after {
        Some(after) => format!("after {}s", after.as_secs()),
        None => "later".to_string(),
    }
}

fn show_status(status: &Option<TaskStatus>) -> String {
    status.as_ref().map_or_else(|| "none".to_string(), ToString::to_string)
}

fn details_text(details: &Option<serde_json::Value>) -> String {
    match details {
        None | Some(serde_json::Value::Null) => String::new(),
        Some(serde_json::Value::String(text)) => format!(": {}", service_words(text)),
        Some(value) => match value.get("error").and_then(|e| e.as_str()) {
            Some(text) => format!(": {}", service_words(text)),
            None => format!(": {}", service_words(&value.to_string())),
        },
    }
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

impl Error {
    /// The accepted task this error concerns, if any: resume it with
    /// [`crate::Client::task`] rather than submitting (and paying) again.
    pub fn task(&self) -> Option<&TaskRef> {
        match self {
            Error::Timeout { task, .. }
            | Error::DownloadTimeout { task, .. }
            | Error::TaskFailed { task, .. }
            | Error::Moderated { task, .. }
            | Error::TaskNotFound { task }
            | Error::ResultExpired { task }
            | Error::NotAnImage { task, .. }
            | Error::FileExists { task, .. }
            | Error::UntrustedOrigin { task, .. } => Some(task),
            other => with_optional_task!(other, task => task.as_ref(), otherwise None),
        }
    }

    /// Attaches the task to an error that happened after it was accepted
    /// (kept if one is already there).
    pub(crate) fn for_task(mut self, accepted: &TaskRef) -> Error {
        let slot = with_optional_task!(&mut self, task => task, otherwise return self);
        if slot.is_none() {
            *slot = Some(accepted.clone());
        }
        self
    }

    /// Whether submitting the same request again is safe: the service surely
    /// did not accept it (a 429, or a connection that never opened). Any
    /// other failure of a submission may hide an accepted, charged task.
    ///
    /// ```
    /// # async fn demo(client: genapi::Client) -> genapi::Result<()> {
    /// use genapi::api::types::Gen2ProRequest;
    /// let task = loop {
    ///     match client.submit(Gen2ProRequest::builder().prompt("a fox")).await {
    ///         Err(e) if e.is_safe_to_resubmit() => tokio::time::sleep(std::time::Duration::from_secs(1)).await,
    ///         other => break other?,
    ///     }
    /// };
    /// # Ok(()) }
    /// ```
    pub fn is_safe_to_resubmit(&self) -> bool {
        match self {
            Error::RateLimited { task: None, .. } => true,
            Error::Transport { task: None, source, .. } => source.is_connect(),
            _ => false,
        }
    }

    /// A network error of `operation`, naming the host it met rather than
    /// the address (see [`Error::Transport`]).
    pub(crate) fn transport(operation: &str, network: Unaddressed) -> Error {
        Error::Transport {
            operation: operation.to_string(),
            origin: network.origin,
            source: network.error,
            task: None,
        }
    }

    /// A request refused before anything was sent, for a reason about the
    /// body as a whole, in the service's 422 shape (`loc: ["body"]`), so it
    /// is handled like any other invalid request.
    pub(crate) fn refused_locally(reason: impl std::fmt::Display) -> Error {
        Error::Validation {
            errors: vec![crate::api::types::ValidationError {
                loc: vec![crate::api::types::ValidationErrorLocItem::String("body".into())],
                msg: format!("Value error, {reason}"),
                type_: "value_error".into(),
                input: None,
            }],
            checked: Checked::Locally,
        }
    }

    /// Whether the service surely created no task for a submission that
    /// failed so: refused before or by the service, or never sent.
    pub(crate) fn created_no_task(&self) -> bool {
        self.is_safe_to_resubmit()
            || matches!(
                self,
                Error::Validation { .. }
                    | Error::InsufficientCredits { .. }
                    | Error::Forbidden { task: None, .. }
                    | Error::Input { .. }
                    | Error::InvalidArgument { .. }
                    | Error::Config(_)
                    | Error::SharedLimit { .. }
                    | Error::UntrustedOrigin { .. }
            )
    }

    /// Whether the task was accepted and may still finish: wait for it again
    /// later (`client.task(id)?.wait()`), never submit it again. True for
    /// timeouts, for network, overload and server failures while polling or
    /// downloading, and for a result that could not be written (once the
    /// disk has room or the folder is writable again). Whether the task is
    /// open at all (a refused key leaves it open, though waiting again
    /// does not help until the key is fixed) is
    /// [`crate::FailureClass::ends_the_task`].
    pub fn is_worth_waiting_again(&self) -> bool {
        if self.task().is_none() {
            return false;
        }
        matches!(
            self,
            Error::Timeout { .. }
                | Error::DownloadTimeout { .. }
                | Error::Transport { .. }
                | Error::Layer { .. }
                | Error::Server { .. }
                | Error::RateLimited { .. }
                | Error::UnexpectedStatus { .. }
                | Error::Decode { .. }
                // The result is the service's still: saved once the disk
                // has room again, or under a free name.
                | Error::Write { .. }
                | Error::FileExists { .. }
        )
    }

    /// The validation errors, local or from the service.
    pub fn validation_errors(&self) -> Option<&[ValidationError]> {
        match self {
            Error::Validation { errors, .. } => Some(errors),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The service's words quote addresses (an input image it could not
    /// fetch, a result): shown by the address rule, in Display and Debug.
    #[test]
    fn an_address_the_service_quotes_is_shown_without_its_secrets() {
        let quoted = "could not fetch input_image https://ana:correcthorsebattery@files.example.com/in.png?token=t0k3nSECRET#part=F7";
        let task = TaskRef {
            id: "t-1".into(),
            polling_url: "https://api.example.com/v1/get_result?id=t-1".into(),
        };
        let errors = [
            Error::TaskFailed {
                task: task.clone(),
                details: Some(serde_json::json!({ "error": quoted })),
            },
            Error::TaskFailed {
                task: task.clone(),
                details: Some(serde_json::json!({ "other": quoted })),
            },
            Error::UnexpectedStatus {
                status: 400,
                operation: "gen_2_pro".into(),
                message: quoted.into(),
                task: None,
            },
        ];
        for error in errors {
            for shown in [error.to_string(), format!("{error:?}")] {
                assert!(shown.contains("files.example.com"), "{shown}");
                for secret in ["correcthorsebattery", "t0k3nSECRET", "F7"] {
                    assert!(!shown.contains(secret), "{shown}");
                }
            }
        }
    }

    #[test]
    fn a_task_is_named_by_its_id_or_else_by_its_polling_url_alone() {
        let with_id = TaskRef {
            id: "t-1".into(),
            polling_url: "https://api.example.com/v1/get_result?id=t-1".into(),
        };
        // The query is never shown: a polling address may be signed.
        assert_eq!(
            with_id.to_string(),
            "task t-1 (polling URL https://api.example.com/v1/get_result?…)"
        );
        let without = TaskRef {
            id: String::new(),
            polling_url: "https://api.example.com/v1/get_result?task=7&token=s3cret".into(),
        };
        assert_eq!(
            without.to_string(),
            "the task at polling URL https://api.example.com/v1/get_result?…"
        );
        let not_found = Error::TaskNotFound { task: without }.to_string();
        assert!(!not_found.contains("  "), "no gap where an id would be: {not_found}");
    }
}
