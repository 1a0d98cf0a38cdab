//! A task the service accepted: polling it and waiting for its end.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use reqwest::Url;
use serde_json::Value;
use tracing::Instrument;

use crate::api::types::{PollResult, SubmissionResponse};
use crate::error::{Error, Moderation, Result, TaskRef};
use crate::limit::Seat;
use crate::output::Output;
use crate::response::decode_error;
use crate::session::Session;
use crate::wait::{deadline, jitter, Progress, Schedule, WaitOptions};
use crate::webhook::Inbox;
use crate::{OperationSpec, TaskStatus};

/// How errors name the argument that picks a task up again.
const TASK_REFERENCE: &str = "task id or polling URL";

/// How many poll answers in a row may be unreadable (a 200 that is not a
/// task's state) before a wait gives up with the last of them. One is
/// ridden out, as any odd answer is; a service that keeps answering so has
/// changed, or something in between answers for it, and polling on until
/// the deadline would hide that for minutes. The error names the task, so
/// it can be waited for again.
const UNREADABLE_IN_A_ROW: u32 = 5;

/// A task the service accepted (and will charge for).
///
/// Waiting consumes it; every error from then on carries its [`TaskRef`], and
/// [`crate::Client::task`] makes a new handle from its id or polling URL, so
/// a task is never submitted twice to be found again.
#[derive(Debug)]
pub struct Task {
    session: Arc<Session>,
    task: TaskRef,
    polling_url: Url,
    operation: String,
    cost: Option<f64>,
    input_mp: Option<f64>,
    output_mp: Option<f64>,
    submitted: Instant,
    /// Made from an id or polling URL (not a submission just answered): it
    /// was accepted earlier, so it is asked at once, and "not found" is
    /// final at once unless [`Task::sent_at`] says it was sent only just.
    resumed: bool,
    /// When its submission was sent, for a resumed task that says so.
    sent_at: Option<std::time::SystemTime>,
    /// Its operation is known: it was submitted by this client, or the
    /// program said which one ([`Task::submitted_to`]). Only then are its
    /// wait aimed and its duration learned under it.
    operation_known: bool,
    /// Its place under the client's active-task limit, if it holds one.
    seat: Option<Seat>,
    /// For a handle made from a bare id: the other API hosts the task may be
    /// polled on (a regional host answers only for its own tasks, and the
    /// global one says "not found" for them).
    elsewhere: Vec<Url>,
    /// Where the task turned out to be, once one of `elsewhere` knew it.
    found: std::sync::OnceLock<(TaskRef, Url)>,
}

impl Task {
    /// From a submission answer the document's type fits, either shape
    /// (AsyncResponse or AsyncWebhookResponse).
    pub(crate) fn from_submission(session: Arc<Session>, operation: &str, answer: SubmissionResponse) -> Result<Task> {
        let (id, polling_url, figures) = match answer {
            SubmissionResponse::Response(r) => (r.id, Some(r.polling_url), [r.cost, r.input_mp, r.output_mp]),
            SubmissionResponse::WebhookResponse(r) => (r.id, r.polling_url, [r.cost, r.input_mp, r.output_mp]),
        };
        Task::from_answer(session, operation, id, polling_url.as_deref(), figures, b"")
    }

    /// From a submission answer the document's type does not fit. Once the
    /// service sent a task id the task exists and is charged, so only the id
    /// can make this fail: a field of an unexpected type is dropped.
    pub(crate) fn accepted(session: Arc<Session>, operation: &str, body: &[u8]) -> Result<Task> {
        let transport = session.transport.clone();
        let value: Value = match serde_json::from_slice(body) {
            Ok(value) => value,
            // A number JSON allows but f64 cannot hold (`1e400`) fails the
            // whole answer as a value; the id and address are read past it.
            Err(e) => match serde_json::from_slice::<IdAndAddress>(body) {
                Ok(read) => serde_json::json!({"id": read.id, "polling_url": read.polling_url}),
                Err(_) => {
                    return Err(decode_error(
                        &transport,
                        operation,
                        format!("the submission answer is not JSON: {e}"),
                        body,
                    ))
                }
            },
        };
        let id = value.get("id").and_then(Value::as_str).unwrap_or_default().to_string();
        let figure = |name: &str| value.get(name).and_then(Value::as_f64);
        let polling_url = match value.get("polling_url") {
            None | Some(Value::Null) => None,
            Some(given) => Some(given.as_str().unwrap_or_default()),
        };
        Task::from_answer(
            session,
            operation,
            id,
            polling_url,
            [figure("cost"), figure("input_mp"), figure("output_mp")],
            body,
        )
    }

    /// A missing or unusable `polling_url` means polling
    /// `{base}/v1/get_result?id=`; an empty id is no task.
    fn from_answer(
        session: Arc<Session>,
        operation: &str,
        id: String,
        polling_url: Option<&str>,
        figures: [Option<f64>; 3],
        body: &[u8],
    ) -> Result<Task> {
        if id.is_empty() {
            let transport = session.transport.clone();
            return Err(decode_error(
                &transport,
                operation,
                "the submission answer has no task id".into(),
                body,
            ));
        }
        let usable = polling_url.and_then(|text| Url::parse(text).ok()).filter(|url| {
            matches!(url.scheme(), "http" | "https") && url.username().is_empty() && url.password().is_none()
        });
        let polling_url = match usable {
            Some(url) => url,
            None => {
                if polling_url.is_some() {
                    tracing::warn!(task_id = %genapi_text::clean(&id), "unusable polling_url in the submission answer; polling the base URL");
                }
                session.fallback_polling_url(&id)?
            }
        };
        Ok(Task::new(session, id, polling_url, operation, figures))
    }

    /// `figures` are cost, input and output megapixels, as reported.
    fn new(session: Arc<Session>, id: String, polling_url: Url, operation: &str, figures: [Option<f64>; 3]) -> Task {
        let [cost, input_mp, output_mp] = figures;
        // The service writes it in the task's answers, which must reach the
        // client whole.
        session.transport.scrubber().is_a_task_id(&id);
        Task {
            task: TaskRef {
                id,
                polling_url: polling_url.to_string(),
            },
            session,
            polling_url,
            operation: operation.to_string(),
            cost,
            input_mp,
            output_mp,
            submitted: Instant::now(),
            resumed: false,
            sent_at: None,
            operation_known: true,
            seat: None,
            elsewhere: Vec::new(),
            found: std::sync::OnceLock::new(),
        }
    }

    /// The task takes its place under the active-task limit.
    pub(crate) fn seated(mut self, seat: Option<Seat>) -> Task {
        self.seat = seat;
        self
    }

    /// A handle on a task known by id or polling URL.
    pub(crate) fn existing(session: Arc<Session>, id_or_url: &str) -> Result<Task> {
        let text = id_or_url.trim();
        let (id, polling_url) = match Url::parse(text) {
            // Not echoed: the user name or password should not reach a log.
            Ok(url) if !url.username().is_empty() || url.password().is_some() => {
                return Err(Error::InvalidArgument {
                    argument: TASK_REFERENCE,
                    problem: "a polling URL with a user name or password is refused".into(),
                })
            }
            Ok(url) if matches!(url.scheme(), "http" | "https") => {
                // The task is named by the address's `id`, or else by its
                // path's last segment (`/v1/tasks/<id>`), as a service that
                // polls by path writes it.
                let by_path = || {
                    let last = url.path_segments()?.next_back()?;
                    let plain = !last.is_empty()
                        && last != "get_result"
                        && last.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
                    plain.then(|| last.to_string())
                };
                let id = url
                    .query_pairs()
                    .find(|(k, _)| k == "id")
                    .map(|(_, v)| v.into_owned())
                    .or_else(by_path)
                    .unwrap_or_default();
                (id, url)
            }
            // An address that is not an http(s) URL, or not a URL at all: never
            // a bare id (it would be sent to the service as one), and not
            // echoed when it may hold a password.
            _ if text.contains("://") => {
                return Err(Error::InvalidArgument {
                    argument: TASK_REFERENCE,
                    problem: "the address given is neither a task id nor an http(s) polling URL (it is not \
                              repeated: it may hold a token)"
                        .into(),
                });
            }
            // An address without its scheme (`host:port/v1/get_result?id=…`):
            // no task id has these characters, and sent as one, its query
            // (a token perhaps) would go to the service as an id.
            _ if text.contains(['/', '?', '&', '#', '=']) || text.chars().any(char::is_whitespace) => {
                return Err(Error::InvalidArgument {
                    argument: TASK_REFERENCE,
                    problem: "what was given is not a task id (an id has no `/`, `?`, `=` or spaces), nor a \
                              polling URL (one starts with https:// or http://); it is not repeated: it may hold \
                              a token"
                        .into(),
                });
            }
            Err(_) if text.is_empty() => {
                return Err(Error::InvalidArgument {
                    argument: TASK_REFERENCE,
                    problem: "empty: give the task's id or its polling URL".into(),
                })
            }
            // A bare id (`task:1` parses as a URL with a scheme, but is an id).
            _ => {
                let here = session.fallback_polling_url(text)?;
                let elsewhere = session
                    .polling_candidates(text)?
                    .into_iter()
                    .filter(|candidate| *candidate != here)
                    .collect();
                return Ok(Task {
                    resumed: true,
                    operation_known: false,
                    elsewhere,
                    ..Task::new(session, text.to_string(), here, "get_result", [None; 3])
                });
            }
        };
        Ok(Task {
            resumed: true,
            operation_known: false,
            ..Task::new(session, id, polling_url, "get_result", [None; 3])
        })
    }

    /// Says which operation a task picked up by id or polling URL
    /// ([`crate::Client::task`], [`crate::Client::resume`]) was submitted
    /// to. Its wait is then aimed by what that operation's tasks took, and
    /// the duration the service reports is learned under it, as for a task
    /// this client submitted; without it, neither (one name for every task
    /// picked up would aim a fast model's wait by a slow one's durations).
    ///
    /// ```no_run
    /// # async fn demo(client: genapi::Client) -> genapi::Result<()> {
    /// use genapi::api::types::Gen2Klein4bRequest;
    /// use genapi::Submit;
    ///
    /// let task = client
    ///     .resume("https://api.example.com/v1/get_result?id=abc")
    ///     .await?
    ///     .submitted_to(<Gen2Klein4bRequest as Submit>::OPERATION);
    /// assert_eq!(task.operation(), "gen_2_klein_4b");
    /// let output = task.wait().await?;
    /// # Ok(()) }
    /// ```
    pub fn submitted_to(mut self, operation: &OperationSpec) -> Task {
        self.operation = operation.id.to_string();
        self.operation_known = true;
        self
    }

    /// When this task's submission was sent, for a task picked up again
    /// ([`crate::Client::resume`], [`crate::Client::task`]) by a program
    /// that recorded it. The service may not know a task for a short while
    /// after accepting it (404, `Task not found`), so a task sent within
    /// the not-found grace period ([`WaitOptions::not_found_grace`]) rides
    /// that out, as a task just submitted does; one sent earlier, or whose
    /// sending is not known, is not found for good at once.
    ///
    /// ```no_run
    /// # async fn demo(client: genapi::Client) -> genapi::Result<()> {
    /// let sent = std::time::SystemTime::now();
    /// let task = client
    ///     .resume("https://api.example.com/v1/get_result?id=abc")
    ///     .await?
    ///     .sent_at(sent);
    /// let output = task.wait().await?;
    /// # Ok(()) }
    /// ```
    pub fn sent_at(mut self, when: std::time::SystemTime) -> Task {
        self.sent_at = Some(when);
        self
    }

    /// Task id.
    pub fn id(&self) -> &str {
        &self.task.id
    }
    /// The address polled for the result, as the service gave it (for a
    /// handle made from a bare id: the host that knew the task, once a poll
    /// found it).
    pub fn polling_url(&self) -> &Url {
        self.found.get().map_or(&self.polling_url, |(_, url)| url)
    }
    /// Id and polling URL, to keep and resume later.
    pub fn reference(&self) -> &TaskRef {
        self.found.get().map_or(&self.task, |(task, _)| task)
    }
    /// The operation it was submitted to (`get_result` for a task picked up
    /// by id or polling URL, unless [`Task::submitted_to`] said which).
    pub fn operation(&self) -> &str {
        &self.operation
    }
    /// Cost in credits reported at submission, if any.
    pub fn cost(&self) -> Option<f64> {
        self.cost
    }
    /// Input megapixels reported at submission, if any.
    pub fn input_mp(&self) -> Option<f64> {
        self.input_mp
    }
    /// Output megapixels reported at submission, if any.
    pub fn output_mp(&self) -> Option<f64> {
        self.output_mp
    }
    /// Time since the task was submitted (or this handle was made).
    pub fn elapsed(&self) -> Duration {
        self.submitted.elapsed()
    }

    /// Polls once. A 202 reads as `Pending`; a 404 as `Task not found`.
    ///
    /// The key goes along only if the polling host is trusted; an untrusted
    /// host that then refuses gives [`Error::UntrustedOrigin`], naming the
    /// setting that trusts it.
    ///
    /// A final status frees the task's place under the active-task limit;
    /// `Task not found` does so only once it is final for this task (past
    /// the client's not-found grace period since it was sent: see
    /// [`Task::sent_at`] for a task picked up again).
    pub async fn poll(&self) -> Result<PollResult> {
        let result = self.poll_for_status().await?;
        if result.status == TaskStatus::TaskNotFound && self.not_found_is_final(self.session.wait.grace_period()) {
            self.session.seen_final(self.id());
        }
        Ok(result)
    }

    /// One poll whose `Task not found` the caller settles.
    async fn poll_for_status(&self) -> Result<PollResult> {
        let result = crate::poll::poll_task(&self.session, self.polling_url(), self.reference()).await?;
        Ok(self.or_elsewhere(result).await)
    }

    /// A "not found" for a handle made from a bare id is asked of the other
    /// API hosts too, once; the first that knows the task is polled from
    /// then on.
    async fn or_elsewhere(&self, result: PollResult) -> PollResult {
        if result.status != TaskStatus::TaskNotFound || self.found.get().is_some() {
            return result;
        }
        for candidate in &self.elsewhere {
            match crate::poll::poll_at(&self.session, candidate, &self.task).await {
                Ok(found) if found.status != TaskStatus::TaskNotFound => {
                    let task = TaskRef {
                        id: self.task.id.clone(),
                        polling_url: candidate.to_string(),
                    };
                    let _ = self.found.set((task, candidate.clone()));
                    if found.status.is_final() {
                        self.session.seen_final(self.id());
                    }
                    return found;
                }
                Ok(_) => {}
                Err(error) => {
                    tracing::debug!(%error, host = %candidate.origin().ascii_serialization(), "looking for a task")
                }
            }
        }
        result
    }

    /// Whether `Task not found` is the task's end rather than the service
    /// not knowing it yet: past the grace period since the task was sent.
    /// A task picked up again was sent when [`Task::sent_at`] says (ending
    /// a paid task sent only just on one passing "not found" would lose
    /// it), else long ago; the grace never outlasts the handle's own, so a
    /// recorded time in the future holds nothing up.
    fn not_found_is_final(&self, grace: Duration) -> bool {
        let past_the_handles = self.submitted.elapsed() >= grace;
        if !self.resumed {
            return past_the_handles;
        }
        let since_sent = |sent| {
            std::time::SystemTime::now()
                .duration_since(sent)
                .unwrap_or(Duration::ZERO)
        };
        past_the_handles || self.sent_at.is_none_or(|sent| since_sent(sent) >= grace)
    }

    /// Polls once, without taking the answer as the task's: errors carry no
    /// task, and the active-task ledger is not told (for looking a task up).
    pub(crate) async fn poll_once(&self) -> Result<PollResult> {
        let result = crate::poll::poll_at(&self.session, self.polling_url(), self.reference()).await?;
        Ok(self.or_elsewhere(result).await)
    }

    /// Waits for a final status with the client's default options.
    pub async fn wait(self) -> Result<Output> {
        let options = self.session.wait.clone();
        self.wait_with(options).await
    }

    /// [`Task::wait`], polling at once whenever `inbox` receives the task's
    /// notification ([`Inbox::wait`]).
    pub(crate) async fn wait_woken_by(self, inbox: Arc<Inbox>) -> Result<Output> {
        let options = self.session.wait.clone().woken_by(inbox);
        self.wait_with(options).await
    }

    /// Waits for a final status: `Ready` gives the [`Output`]; the failure
    /// statuses give their typed errors. Any other status, known or new,
    /// means "keep polling"; so do network failures and overload answers, up
    /// to the deadline. The task is polled once more at the deadline before
    /// the wait gives up with [`Error::Timeout`]. Dropping the future cancels
    /// the wait (not the task).
    pub async fn wait_with(self, options: WaitOptions) -> Result<Output> {
        let span = crate::telemetry::wait_span(&self.task.id, &self.operation);
        let mut polls = 0u32;
        let waited = self
            .poll_until_final(&options, &mut polls)
            .instrument(span.clone())
            .await;
        // Once, as the wait ends: a field recorded at each poll is printed
        // at each by a reader that prints records.
        crate::telemetry::polled(&span, polls);
        waited
    }

    /// Counts each poll in `polls`, for the wait's span.
    #[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
    async fn poll_until_final(&self, options: &WaitOptions, polls: &mut u32) -> Result<Output> {
        let _watching = self.seat.as_ref().map(Seat::watch);
        let deadline = deadline(self.submitted, options.deadline_after());
        // Learned durations matter only when the interval is not fixed.
        let learned = match options.fixed() {
            Some(_) => None,
            None => self.learned_durations(),
        };
        let mut schedule = Schedule::new(learned, options.fixed());
        // Notifications are left most ends only while they come.
        if options.inbox().is_some_and(Inbox::is_heard) {
            schedule = schedule.woken();
        }
        let mut progress: Option<(f64, Duration)> = None;
        let mut last_status = None;
        let mut unreadable = 0u32;
        loop {
            // A task picked up again may have ended long ago: it is asked at
            // once, and the schedule (which counts from this moment, not
            // from an unknown submission) takes over after.
            let mut delay = if self.resumed && *polls == 0 {
                Duration::ZERO
            } else {
                jitter(schedule.next(self.submitted.elapsed(), progress), fastrand::f64())
            };
            if let Some(deadline) = deadline {
                delay = delay.min(deadline.saturating_duration_since(Instant::now()));
            }
            let woken = self
                .sleep_unless_woken(delay, options.inbox(), schedule.wake_gap())
                .await;
            // A poll may not outlast the deadline by more than a moment.
            let bounded = async {
                match deadline.and_then(|d| d.checked_add(Duration::from_secs(2))) {
                    Some(hard) => tokio::time::timeout_at(hard, self.poll_for_status()).await.ok(),
                    None => Some(self.poll_for_status().await),
                }
            };
            let outcome = bounded.await;
            *polls += 1;
            unreadable = match &outcome {
                Some(Err(Error::Decode { .. })) => unreadable + 1,
                _ => 0,
            };
            match outcome {
                Some(Err(error)) if unreadable >= UNREADABLE_IN_A_ROW => return Err(error),
                Some(Ok(result)) => {
                    last_status = Some(result.status.clone());
                    if let Some(fraction) = result.progress {
                        progress = Some((fraction, self.submitted.elapsed()));
                    }
                    if let Some(callback) = options.callback() {
                        callback(&Progress {
                            id: self.task.id.clone(),
                            status: result.status.clone(),
                            progress: result.progress,
                            elapsed: self.submitted.elapsed(),
                            polls: *polls,
                        });
                    }
                    if let Some(outcome) = self.settle(result, options.grace_period()) {
                        if let Some(inbox) = options.inbox() {
                            inbox.wait_ended(woken);
                        }
                        return outcome;
                    }
                }
                // The task goes on at the service: poll again (the transport
                // already retried and honoured Retry-After).
                Some(Err(error)) if error.is_worth_waiting_again() => {
                    tracing::debug!(%error, "poll failed; will poll again");
                    if let Some(callback) = options.failure_callback() {
                        callback(&error);
                    }
                }
                Some(Err(error)) => return Err(error),
                None => {}
            }
            if woken {
                schedule.woken_in_vain();
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return Err(Error::Timeout {
                    after: options.deadline_after().unwrap_or_else(|| self.submitted.elapsed()),
                    last_status,
                    task: self.reference().clone(),
                });
            }
        }
    }

    /// Sleeps `delay`, or less when `inbox` receives a notification of this
    /// task's end: then the task is polled at once, though never within
    /// `gap` of the last poll. Returns whether the notification brought the
    /// poll forward.
    async fn sleep_unless_woken(&self, delay: Duration, inbox: Option<&Inbox>, gap: Duration) -> bool {
        let Some(inbox) = inbox else {
            tokio::time::sleep(delay).await;
            return false;
        };
        let asleep = Instant::now();
        tokio::select! {
            () = tokio::time::sleep(delay) => false,
            () = inbox.arrival(self.id()) => {
                tokio::time::sleep_until(asleep + gap.min(delay)).await;
                gap < delay
            }
        }
    }

    /// What a poll result means for this task: `None` while it is in
    /// progress, else the output or the typed failure.
    fn settle(&self, result: PollResult, not_found_grace: Duration) -> Option<Result<Output>> {
        if !result.status.is_final() {
            return None;
        }
        // Only a final status needs the task's reference, for its outcome.
        let task = self.reference().clone();
        let outcome = match result.status {
            TaskStatus::Ready => {
                self.learn(&result);
                Output::from_poll(
                    self.session.clone(),
                    task,
                    self.polling_url().clone(),
                    self.cost,
                    result,
                )
            }
            TaskStatus::Error => Err(Error::TaskFailed {
                task,
                details: result.details,
            }),
            TaskStatus::RequestModerated => Err(Error::Moderated {
                task,
                stage: Moderation::Request,
                details: result.details,
            }),
            TaskStatus::ContentModerated => Err(Error::Moderated {
                task,
                stage: Moderation::Content,
                details: result.details,
            }),
            TaskStatus::TaskNotFound if self.not_found_is_final(not_found_grace) => Err(Error::TaskNotFound { task }),
            _ => return None,
        };
        self.session.seen_final(self.id());
        Some(outcome)
    }

    /// What tasks of this one's operation took. A task picked up by id or
    /// polling URL has none unless told its operation
    /// ([`Task::submitted_to`]): `get_result` stands for it, and one name for
    /// every model picked up would aim a fast model's wait by a slow one's
    /// durations.
    fn learned_durations(&self) -> Option<crate::wait::Quartiles> {
        if !self.operation_known {
            return None;
        }
        self.session.quartiles(&self.operation)
    }

    /// Learns the duration the service reported (never the moment Ready was
    /// noticed, which depends on when we polled), under the task's operation;
    /// nothing for a task whose operation is unknown.
    fn learn(&self, result: &PollResult) {
        if !self.operation_known {
            return;
        }
        let Some(output) = &result.result else { return };
        let reported = output.duration.or(match (output.start_time, output.end_time) {
            (Some(start), Some(end)) => Some(end - start),
            _ => None,
        });
        if let Some(seconds) = reported {
            self.session.learn(&self.operation, seconds);
        }
    }
}

/// What a paid task cannot be followed without, read past any field
/// that does not decode (other fields are skipped as text, never as
/// numbers).
#[derive(serde::Deserialize)]
struct IdAndAddress {
    id: String,
    #[serde(default)]
    polling_url: Option<String>,
}
