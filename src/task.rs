//! A submitted task: polling it, waiting for it, downloading its output.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use reqwest::{StatusCode, Url};
use tokio::sync::OwnedSemaphorePermit;
use tracing::Instrument;

use crate::api::types::{PollResult, SubmissionResponse};
use crate::client::{decode, from_response, join, Client};
use crate::error::{Error, Moderation, Result};
use crate::transport::{origin, Purpose};
use crate::wait::{Progress, Schedule, WaitOptions};
use crate::{ImageFormat, TaskStatus};

/// A task the service accepted.
///
/// Holds one slot of the client's active-task limit until its wait ends or it
/// is dropped.
#[derive(Debug)]
pub struct Task {
    client: Client,
    id: String,
    polling_url: Url,
    operation: String,
    cost: Option<f64>,
    input_mp: Option<f64>,
    output_mp: Option<f64>,
    submitted: Instant,
    _slot: Option<OwnedSemaphorePermit>,
}

impl Task {
    /// From a submission answer, either shape.
    pub(crate) fn accepted(
        client: Client,
        operation: String,
        answer: SubmissionResponse,
        slot: Option<OwnedSemaphorePermit>,
    ) -> Result<Task> {
        let (id, polling_url, cost, input_mp, output_mp) = match answer {
            SubmissionResponse::Response(a) => (a.id, Some(a.polling_url), a.cost, a.input_mp, a.output_mp),
            SubmissionResponse::WebhookResponse(a) => (a.id, a.polling_url, a.cost, a.input_mp, a.output_mp),
        };
        let polling_url = match polling_url {
            Some(url) => Url::parse(&url).map_err(|e| Error::Decode {
                operation: operation.clone(),
                message: format!("polling_url is not an absolute URL ({e})"),
                body: url.clone(),
            })?,
            None => fallback_polling_url(&client, &id)?,
        };
        Ok(Task {
            client,
            id,
            polling_url,
            operation,
            cost,
            input_mp,
            output_mp,
            submitted: Instant::now(),
            _slot: slot,
        })
    }

    /// A handle on a task known by id or polling URL.
    pub(crate) fn existing(client: Client, id_or_url: &str) -> Result<Task> {
        let (id, polling_url) = match Url::parse(id_or_url) {
            Ok(url) if matches!(url.scheme(), "http" | "https") => {
                let id = url
                    .query_pairs()
                    .find(|(k, _)| k == "id")
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default();
                (id, url)
            }
            _ => (id_or_url.to_string(), fallback_polling_url(&client, id_or_url)?),
        };
        Ok(Task {
            client,
            id,
            polling_url,
            operation: "get_result".into(),
            cost: None,
            input_mp: None,
            output_mp: None,
            submitted: Instant::now(),
            _slot: None,
        })
    }

    /// Task id.
    pub fn id(&self) -> &str {
        &self.id
    }
    /// The address polled for the result, as the service gave it.
    pub fn polling_url(&self) -> &Url {
        &self.polling_url
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
    /// Time since the task was submitted.
    pub fn elapsed(&self) -> Duration {
        self.submitted.elapsed()
    }

    /// Polls once. A 202 reads as `Pending`; a 404 as `Task not found`.
    pub async fn poll(&self) -> Result<PollResult> {
        if !self.client.shared.transport.is_trusted(&self.polling_url) {
            return Err(Error::UntrustedOrigin {
                origin: origin(&self.polling_url),
            });
        }
        let http = self.client.shared.transport.api_client();
        let request = http
            .get(self.polling_url.clone())
            .build()
            .map_err(|e| Error::Config(format!("cannot build the poll request: {e}")))?;
        let response = self
            .client
            .shared
            .transport
            .execute(request, Purpose::Poll, "get_result")
            .await
            .map_err(|source| Error::Transport {
                operation: "get_result".into(),
                source,
            })?;
        let placeholder = |status: TaskStatus| PollResult {
            id: self.id.clone(),
            status,
            result: None,
            progress: None,
            details: None,
            preview: None,
            cost: None,
        };
        match response.status() {
            StatusCode::OK => decode("get_result", response).await,
            StatusCode::ACCEPTED => Ok(placeholder(TaskStatus::Pending)),
            StatusCode::NOT_FOUND => Ok(placeholder(TaskStatus::TaskNotFound)),
            // Seen live: a 422 carrying a task body.
            StatusCode::UNPROCESSABLE_ENTITY => {
                let body = response.bytes().await.unwrap_or_default();
                match serde_json::from_slice::<PollResult>(&body) {
                    Ok(result) => Ok(result),
                    Err(_) => {
                        let errors = serde_json::from_slice::<crate::api::types::HttpValidationError>(&body)
                            .map(|e| e.detail)
                            .unwrap_or_default();
                        Err(Error::Validation {
                            errors,
                            checked: crate::Checked::ByService,
                        })
                    }
                }
            }
            _ => Err(from_response("get_result", response).await),
        }
    }

    /// Waits for a final status with the client's default options.
    pub async fn wait(self) -> Result<Output> {
        let options = self.client.shared.wait.clone();
        self.wait_with(options).await
    }

    /// Waits for a final status: `Ready` gives the [`Output`]; the failure
    /// statuses give their typed errors. Any other status, known or new,
    /// means "keep polling". Dropping the future cancels the wait.
    pub async fn wait_with(self, options: WaitOptions) -> Result<Output> {
        let span = tracing::info_span!("genapi.wait", task_id = %self.id, operation = %self.operation, polls = tracing::field::Empty);
        let deadline = self.submitted + options.timeout;
        let last_status = std::sync::Mutex::new(None);
        let outcome = tokio::time::timeout_at(
            deadline.into(),
            self.poll_until_final(&options, &last_status).instrument(span),
        )
        .await;
        match outcome {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout {
                after: options.timeout,
                last_status: last_status.lock().ok().and_then(|s| s.clone()),
            }),
        }
    }

    async fn poll_until_final(
        &self,
        options: &WaitOptions,
        last_status: &std::sync::Mutex<Option<TaskStatus>>,
    ) -> Result<Output> {
        let learned = self
            .client
            .shared
            .learned
            .lock()
            .ok()
            .and_then(|m| m.get(&self.operation).copied());
        let mut schedule = Schedule::new(learned, options.fixed_interval);
        let mut progress = None;
        let mut polls = 0u32;
        loop {
            tokio::time::sleep(schedule.next(self.submitted.elapsed(), progress, polls)).await;
            let result = match self.poll().await {
                // A network error after the transport's own retries: keep
                // trying until the deadline.
                Err(error @ (Error::Transport { .. } | Error::Server { .. } | Error::RateLimited { .. })) => {
                    tracing::debug!(%error, "poll failed; will poll again");
                    polls += 1;
                    continue;
                }
                other => other?,
            };
            polls += 1;
            tracing::Span::current().record("polls", polls);
            if let Ok(mut last) = last_status.lock() {
                *last = Some(result.status.clone());
            }
            progress = result.progress.or(progress);
            if let Some(callback) = &options.on_progress {
                callback(&Progress {
                    id: self.id.clone(),
                    status: result.status.clone(),
                    progress: result.progress,
                    elapsed: self.submitted.elapsed(),
                    polls,
                });
            }
            if let Some(outcome) = self.settle(result, options.not_found_grace) {
                return outcome;
            }
        }
    }

    /// What a poll result (or a notification) means for this task: `None`
    /// while it is in progress, else the output or the typed failure.
    pub(crate) fn settle(&self, result: PollResult, not_found_grace: Duration) -> Option<Result<Output>> {
        let id = self.id.clone();
        Some(match result.status {
            TaskStatus::Ready => {
                self.learn();
                Output::from_poll(self, result)
            }
            TaskStatus::Error => Err(Error::TaskFailed {
                id,
                details: result.details,
            }),
            TaskStatus::RequestModerated => Err(Error::Moderated {
                id,
                stage: Moderation::Request,
                details: result.details,
            }),
            TaskStatus::ContentModerated => Err(Error::Moderated {
                id,
                stage: Moderation::Content,
                details: result.details,
            }),
            TaskStatus::TaskNotFound if self.submitted.elapsed() >= not_found_grace => Err(Error::TaskNotFound { id }),
            _ => return None,
        })
    }

    fn learn(&self) {
        if let Ok(mut learned) = self.client.shared.learned.lock() {
            learned
                .entry(self.operation.clone())
                .or_default()
                .observe(self.submitted.elapsed().as_secs_f64());
        }
    }
}

fn fallback_polling_url(client: &Client, id: &str) -> Result<Url> {
    let mut url = join(client.base_url(), "/v1/get_result")?;
    url.query_pairs_mut().append_pair("id", id);
    Ok(url)
}

/// The result of a task that reached `Ready`.
#[derive(Debug, Clone)]
pub struct Output {
    client: Client,
    polling_url: Url,
    /// Task id.
    pub id: String,
    /// Signed address of the output (valid 10 minutes; no key needed).
    pub sample: String,
    /// Seed used, when reported.
    pub seed: Option<i128>,
    /// Cost in credits: the settled cost of the poll result, else the one
    /// reported at submission.
    pub cost: Option<f64>,
    /// The final poll result, whole.
    pub result: PollResult,
}

impl Output {
    fn from_poll(task: &Task, result: PollResult) -> Result<Output> {
        let sample = result
            .result
            .as_ref()
            .and_then(|r| r.sample.clone())
            .ok_or_else(|| Error::Decode {
                operation: "get_result".into(),
                message: "status is Ready but result.sample is missing".into(),
                body: serde_json::to_string(&result).unwrap_or_default(),
            })?;
        Ok(Output {
            client: task.client.clone(),
            polling_url: task.polling_url.clone(),
            id: task.id.clone(),
            seed: result.result.as_ref().and_then(|r| r.seed),
            cost: result.cost.or(task.cost),
            sample,
            result,
        })
    }

    /// Downloads the output. If the signed address has expired or is refused,
    /// the task is polled once more for a fresh address before giving up with
    /// [`Error::ResultExpired`].
    pub async fn bytes(&self) -> Result<Bytes> {
        match self.fetch(&self.sample).await? {
            Some(bytes) => Ok(bytes),
            None => {
                let task = Task::existing(self.client.clone(), self.polling_url.as_str())?;
                let fresh = task.poll().await?;
                let sample = fresh
                    .result
                    .and_then(|r| r.sample)
                    .filter(|_| fresh.status.is_success());
                match sample {
                    Some(sample) => self
                        .fetch(&sample)
                        .await?
                        .ok_or(Error::ResultExpired { id: self.id.clone() }),
                    None => Err(Error::ResultExpired { id: self.id.clone() }),
                }
            }
        }
    }

    /// `None` when the delivery host refuses the address (expired).
    async fn fetch(&self, address: &str) -> Result<Option<Bytes>> {
        let url = Url::parse(address).map_err(|e| Error::Decode {
            operation: "download".into(),
            message: format!("result.sample is not a URL ({e})"),
            body: address.to_string(),
        })?;
        let transport = &self.client.shared.transport;
        let request = reqwest::Request::new(reqwest::Method::GET, url);
        let response = transport
            .execute(request, Purpose::Download, "download")
            .await
            .map_err(|source| Error::Transport {
                operation: "download".into(),
                source,
            })?;
        match response.status() {
            s if s.is_success() => response.bytes().await.map(Some).map_err(|source| Error::Transport {
                operation: "download".into(),
                source,
            }),
            StatusCode::FORBIDDEN
            | StatusCode::NOT_FOUND
            | StatusCode::GONE
            | StatusCode::BAD_REQUEST
            | StatusCode::UNAUTHORIZED => Ok(None),
            _ => Err(from_response("download", response).await),
        }
    }

    /// Downloads and saves the output. When `path` has no extension, the one
    /// of the image's format is added. Returns the path written.
    pub async fn save(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        let bytes = self.bytes().await?;
        let mut path = path.as_ref().to_path_buf();
        if path.extension().is_none() {
            if let Some(format) = ImageFormat::sniff(&bytes) {
                path.set_extension(format.extension());
            }
        }
        tokio::fs::write(&path, &bytes).await.map_err(|e| Error::Input {
            source_name: path.display().to_string(),
            message: format!("cannot write the output ({e})"),
        })?;
        Ok(path)
    }
}
