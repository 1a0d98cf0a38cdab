//! The result of a task that reached `Ready`, and its download.
//!
//! The result lives behind a signed delivery address, valid about 10 minutes
//! (video about 2 hours), that needs no key. Downloads have their own timeout
//! (for the whole download, every attempt included) and size limit, are
//! retried when they break off, and are streamed to disk by
//! [`Output::save`]. An address that has expired is refreshed by polling
//! the task once more.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use reqwest::{StatusCode, Url};

use crate::api::types::PollResult;
use crate::error::{Error, Result, TaskRef};
use crate::input::extension_of;
use crate::received::Received;
use crate::response::error_for_task;
use crate::session::Session;
use crate::transport::{Purpose, Sink};

/// The result of a task that reached `Ready`.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Output {
    session: Arc<Session>,
    task: TaskRef,
    polling_url: Url,
    sample: String,
    seed: Option<i128>,
    cost: Option<f64>,
    /// The final poll result, whole.
    result: PollResult,
    /// When `sample` came, by this machine's clock: an expiry it stated as
    /// already passed then says the clocks disagree, not that the result
    /// is at its end (see [`Output::with_fresh_address`]). Read only on a
    /// refusal, so a task that succeeds never parses its address for it.
    received_at: std::time::SystemTime,
}

/// Whether a second refusal of a result's address is the result's end:
/// the service offered the `same` address again, and the validity it
/// stated has run out `now`, though it had not when the address came (an
/// address already past then says the clocks disagree).
fn refusal_is_its_end(same: bool, past_when_received: bool, past_now: bool) -> bool {
    same && past_now && !past_when_received
}

/// What fetching one address gave.
enum Fetched<T> {
    Got(T),
    /// The delivery host refused the address (expired or revoked), with
    /// this status.
    Refused(u16),
}

impl Output {
    pub(crate) fn from_poll(
        session: Arc<Session>,
        task: TaskRef,
        polling_url: Url,
        submitted_cost: Option<f64>,
        result: PollResult,
    ) -> Result<Output> {
        let sample = result
            .result
            .as_ref()
            .and_then(|r| r.sample.clone())
            .ok_or_else(|| Error::Decode {
                operation: "get_result".into(),
                message: "status is Ready but result.sample is missing".into(),
                body: String::new(),
                task: Some(task.clone()),
            })?;
        Ok(Output {
            session,
            task,
            polling_url,
            seed: result.result.as_ref().and_then(|r| r.seed),
            cost: result.cost.or(submitted_cost),
            received_at: std::time::SystemTime::now(),
            sample,
            result,
        })
    }

    /// The task's id.
    pub fn id(&self) -> &str {
        &self.task.id
    }

    /// Signed address of the output: valid about 10 minutes and taken
    /// without the key. [`Output::bytes`] and [`Output::save`] fetch it, and
    /// fetch a fresh one by polling again when it has expired.
    pub fn sample(&self) -> &str {
        &self.sample
    }

    /// The seed the task ran with, when the service reported it.
    pub fn seed(&self) -> Option<i128> {
        self.seed
    }

    /// Cost in credits: the settled cost of the poll result, else the one
    /// reported at submission.
    pub fn cost(&self) -> Option<f64> {
        self.cost
    }

    /// The cost the service settled when the task ended (on its poll
    /// result), if it reported one: unlike [`Output::cost`], never the one
    /// reported at submission, which a service may report before it knows
    /// the charge (a spending cap trusts this one alone).
    pub fn settled_cost(&self) -> Option<f64> {
        self.result.cost
    }

    /// The prompt the task ran with, when reported: the service may have
    /// rewritten the one sent (prompt upsampling).
    pub fn prompt(&self) -> Option<&str> {
        self.result.result.as_ref().and_then(|result| result.prompt.as_deref())
    }

    /// How long the service says the task ran, in seconds, when reported.
    pub fn duration(&self) -> Option<f64> {
        self.result.result.as_ref().and_then(|result| result.duration)
    }

    /// Id and polling URL of the task.
    pub fn reference(&self) -> &TaskRef {
        &self.task
    }

    /// Downloads the output into memory (at most
    /// [`crate::ClientBuilder::max_download_bytes`]). If the signed address
    /// has expired, the task is polled once more for a fresh one before
    /// giving up with [`Error::ResultExpired`].
    ///
    /// Bytes in no image or video format (an HTML page served as
    /// `image/png`, an empty answer) are [`Error::NotAnImage`].
    pub async fn bytes(&self) -> Result<Bytes> {
        let bytes = self
            .bounded(self.with_fresh_address(|address| async move {
                let mut sink = Sink::Memory(Received::default());
                Ok(match (self.fetch(&address, &mut sink).await?, sink) {
                    (Fetched::Got(()), Sink::Memory(body)) => Fetched::Got(body.into_owned_bytes()),
                    (Fetched::Got(()), Sink::File(_)) => Fetched::Got(Bytes::new()),
                    (Fetched::Refused(status), _) => Fetched::Refused(status),
                })
            }))
            .await?;
        match extension_of(&bytes) {
            Some(_) => Ok(bytes),
            None => Err(self.not_an_image(bytes.len() as u64)),
        }
    }

    fn not_an_image(&self, size: u64) -> Error {
        Error::NotAnImage {
            task: self.task.clone(),
            size,
        }
    }

    /// Downloads the output and streams it to `path`. When `path` has no
    /// extension, the one of the output's format is added. The file appears
    /// only once complete: it is written beside it under a temporary name,
    /// then given its name by the file policy of `genapi-files`. Bytes in no
    /// image or video format are [`Error::NotAnImage`], and nothing is
    /// saved. Returns the path written.
    ///
    /// Nothing is replaced: when a file (or a link) has the name already,
    /// the save is [`Error::FileExists`] and the file stays as it was (as
    /// the `genapi` command does without `--force`); the output is still at
    /// hand, to save under another name or with [`Output::save_replacing`].
    ///
    /// ```no_run
    /// # async fn demo(output: genapi::Output) -> genapi::Result<()> {
    /// match output.save("lighthouse.jpg").await {
    ///     Ok(saved) => println!("saved {}", saved.display()),
    ///     Err(genapi::Error::FileExists { path, .. }) => {
    ///         // Keep the earlier picture: save beside it instead.
    ///         let beside = path.with_file_name("lighthouse-2.jpg");
    ///         output.save(beside).await?;
    ///     }
    ///     Err(other) => return Err(other),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn save(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        self.save_as(path.as_ref(), genapi_files::Existing::Keep).await
    }

    /// [`Output::save`], replacing what has the name: a file is replaced,
    /// a link as a link (never the file it points to), and a folder, pipe or
    /// device never (that is [`Error::Write`]). For a program that rewrites
    /// the same file on each run, as the `genapi` command does with
    /// `--force`.
    ///
    /// ```no_run
    /// # async fn demo(output: genapi::Output) -> genapi::Result<()> {
    /// // Always the newest picture under the same name.
    /// output.save_replacing("latest.jpg").await?;
    /// # Ok(()) }
    /// ```
    pub async fn save_replacing(&self, path: impl AsRef<Path>) -> Result<PathBuf> {
        self.save_as(path.as_ref(), genapi_files::Existing::Replace).await
    }

    /// Downloads to a temporary file beside `path` and publishes it there
    /// as `existing` allows.
    async fn save_as(&self, path: &Path, existing: genapi_files::Existing) -> Result<PathBuf> {
        // A name taken already is refused before the download, where the
        // name is known (one without an extension gets the format's later);
        // whatever else is wrong with it is found as the file is published.
        if path.extension().is_some() {
            if let Err(taken @ genapi_files::FileError::Exists { .. }) = genapi_files::may_write(path, existing) {
                return Err(self.not_written(path, taken));
            }
        }
        let path = path.to_path_buf();
        let partial = genapi_files::temporary_name(&path);
        // Removed however the save ends short of the rename: an error, or
        // the future dropped (a caller's timeout, a stop).
        let mut leftover = RemoveOnDrop(Some(partial.clone()));
        // Named after the file written (the one asked for, or that name with
        // the format's extension), never the temporary one beside it.
        let write_error = |target: &Path, e: &dyn std::fmt::Display| Error::Write {
            target: target.display().to_string(),
            message: format!("{e}; check that its directory exists, is writable and has room"),
            task: Some(self.task.clone()),
        };
        let outcome = self
            .bounded(self.with_fresh_address(|address| {
                let partial = partial.clone();
                let path = &path;
                let write_error = &write_error;
                async move {
                    let target = partial.clone();
                    let file = tokio::task::spawn_blocking(move || genapi_files::create_temporary(&target))
                        .await
                        .unwrap_or_else(|e| Err(std::io::Error::other(e)))
                        .map_err(|e| write_error(path, &e))?;
                    let mut sink = Sink::File(tokio::fs::File::from_std(file));
                    // A write that failed during the download (a full disk)
                    // is this file's, as much as one failing before it.
                    let fetched = self.fetch(&address, &mut sink).await.map_err(|error| match error {
                        Error::Write { message, .. } => write_error(path, &message),
                        other => other,
                    })?;
                    if let Sink::File(mut file) = sink {
                        tokio::io::AsyncWriteExt::flush(&mut file)
                            .await
                            .map_err(|e| write_error(path, &e))?;
                    }
                    Ok(fetched)
                }
            }))
            .await;
        outcome?;
        let mut target = path.clone();
        let Some(extension) = sniff_extension(&partial).await else {
            let size = tokio::fs::metadata(&partial).await.map(|m| m.len()).unwrap_or(0);
            return Err(self.not_an_image(size));
        };
        if target.extension().is_none() {
            target.set_extension(extension);
        }
        let (from, to) = (partial.clone(), target.clone());
        let published = tokio::task::spawn_blocking(move || genapi_files::publish(&from, &to, existing)).await;
        match published {
            Ok(Ok(())) => {}
            Ok(Err(refused)) => return Err(self.not_written(&target, refused)),
            Err(e) => return Err(write_error(&target, &e)),
        }
        leftover.0 = None;
        Ok(target)
    }

    /// A save the file policy refused: a name taken (when not to be
    /// replaced) is [`Error::FileExists`]; anything else (a folder, pipe or
    /// device at the name) is [`Error::Write`], whose message says what is
    /// there and what to do.
    fn not_written(&self, target: &Path, refused: genapi_files::FileError) -> Error {
        match refused {
            genapi_files::FileError::Exists { .. } => Error::FileExists {
                path: target.to_path_buf(),
                task: self.task.clone(),
            },
            refused => Error::Write {
                target: target.display().to_string(),
                message: refused.to_string(),
                task: Some(self.task.clone()),
            },
        }
    }

    /// A whole download (every attempt, the waits between them and a fresh
    /// address) within the client's download timeout.
    async fn bounded<T>(&self, download: impl std::future::Future<Output = Result<T>>) -> Result<T> {
        let after = self.session.transport.download_timeout;
        let span = crate::telemetry::download_span(&self.task.id);
        tokio::time::timeout(after, tracing::Instrument::instrument(download, span))
            .await
            .unwrap_or_else(|_| {
                Err(Error::DownloadTimeout {
                    after,
                    task: self.task.clone(),
                })
            })
    }

    /// Runs `fetch` on the address; on a refusal, polls for a fresh address
    /// and tries once more.
    ///
    /// A refusal is called the result's expiry only where the address
    /// says so and the service agrees: the address stated a validity that
    /// has passed since it came (one already past when it came says the
    /// clocks disagree), and the service, asked again, offers that same
    /// address. Anything else (a fresh address refused too, no address, a
    /// poll answer that the task runs or is gone, which a wait checks)
    /// leaves the task open, as a wait may fetch its result yet: telling
    /// the user to pay again for a result still there costs more than a
    /// wait more.
    async fn with_fresh_address<T, F, Fut>(&self, fetch: F) -> Result<T>
    where
        F: Fn(String) -> Fut,
        Fut: std::future::Future<Output = Result<Fetched<T>>>,
    {
        let refused = match fetch(self.sample.clone()).await? {
            Fetched::Got(value) => return Ok(value),
            Fetched::Refused(status) => status,
        };
        let fresh = crate::poll::poll_task(&self.session, &self.polling_url, &self.task).await?;
        let expired = || Error::ResultExpired {
            task: self.task.clone(),
        };
        let open = |status: u16, what: String| Error::UnexpectedStatus {
            status,
            operation: "download".into(),
            message: format!(
                "the delivery host refused the result's address, {what}; the result may still be the \
                 service's: wait for the task again to fetch it (if the task is gone, that wait says so; a result \
                 refused every time may be lost)"
            ),
            task: Some(self.task.clone()),
        };
        // The service's word, as an error keeps text from it: scrubbed and
        // cut short.
        let said = || self.session.transport.scrub(&fresh.status.to_string());
        let sample = fresh
            .result
            .and_then(|r| r.sample)
            .filter(|_| fresh.status.is_success());
        match sample {
            None => Err(open(
                refused,
                format!(
                    "and the service, asked for a fresh one, answered {} without one",
                    said()
                ),
            )),
            Some(sample) => {
                // The same address, however spelt.
                let offered_again = Url::parse(&sample).ok() == Url::parse(&self.sample).ok();
                match fetch(sample.clone()).await? {
                    Fetched::Got(value) => Ok(value),
                    Fetched::Refused(_)
                        if refusal_is_its_end(
                            offered_again,
                            crate::expiry::states_it_has_run_out(&self.sample, self.received_at),
                            crate::expiry::states_it_has_run_out(&sample, std::time::SystemTime::now()),
                        ) =>
                    {
                        Err(expired())
                    }
                    Fetched::Refused(status) if offered_again => Err(open(
                        status,
                        "twice, and what it states of its validity does not show the result's end".into(),
                    )),
                    Fetched::Refused(status) => Err(open(status, "and the fresh one the service offered too".into())),
                }
            }
        }
    }

    /// Fetches one address into `sink`.
    async fn fetch(&self, address: &str, sink: &mut Sink) -> Result<Fetched<()>> {
        let transport = &self.session.transport;
        let url = Url::parse(address)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| Error::Decode {
                operation: "download".into(),
                message: "result.sample is not an http(s) URL".into(),
                body: transport.scrub(address),
                task: Some(self.task.clone()),
            })?;
        let request = reqwest::Request::new(reqwest::Method::GET, url);
        let answer = transport
            .exchange(
                request,
                Purpose::Download,
                "download",
                transport.max_download_bytes,
                sink,
            )
            .await
            .map_err(|e| e.for_task(&self.task))?;
        match answer.status {
            s if s.is_success() => Ok(Fetched::Got(())),
            StatusCode::FORBIDDEN
            | StatusCode::NOT_FOUND
            | StatusCode::GONE
            | StatusCode::BAD_REQUEST
            | StatusCode::UNAUTHORIZED => Ok(Fetched::Refused(answer.status.as_u16())),
            _ => Err(error_for_task(transport, "download", &answer, &self.task)),
        }
    }
}

/// Removes a temporary file when dropped, unless disarmed.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// The extension of a finished file's format, from its first bytes: read
/// by the file policy as a file the client has just written
/// ([`genapi_files::open_written`]), so that a pipe that would never answer
/// or a link that came to have its name is read as no image.
async fn sniff_extension(path: &Path) -> Option<&'static str> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut head = [0u8; 16];
        let mut file = genapi_files::open_written(&path, u64::MAX).ok()?;
        let read = std::io::Read::read(&mut file, &mut head).ok()?;
        extension_of(&head[..read])
    })
    .await
    .ok()?
}

#[cfg(test)]
mod tests {
    use super::refusal_is_its_end;

    #[test]
    fn only_the_same_address_run_out_since_it_came_is_the_results_end() {
        // (same address again, past when it came, past now) → its end
        let table = [
            ((true, false, true), true),
            // A clock ahead of the signer's: every address looks past.
            ((true, true, true), false),
            // Refused though it states validity left, or states nothing.
            ((true, false, false), false),
            // A fresh address refused as well.
            ((false, false, true), false),
            ((false, true, true), false),
            ((false, false, false), false),
        ];
        for ((same, past_when_received, past_now), end) in table {
            assert_eq!(
                refusal_is_its_end(same, past_when_received, past_now),
                end,
                "same {same}, past when received {past_when_received}, past now {past_now}"
            );
        }
    }

    /// What came to have the name of a finished download is read by the
    /// file policy: a pipe nobody writes to is no image (at once, not a
    /// read that never ends), nor is a link, even to an image.
    #[cfg(unix)]
    #[tokio::test]
    async fn only_a_file_of_the_users_own_is_sniffed_for_its_format() {
        let dir = std::env::temp_dir().join(format!("genapi-sniff-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let image = dir.join("image");
        std::fs::write(&image, b"\xff\xd8\xff\xe0 a JPEG's start").unwrap();
        assert_eq!(super::sniff_extension(&image).await, Some("jpg"));
        let link = dir.join("link");
        std::os::unix::fs::symlink(&image, &link).unwrap();
        assert_eq!(super::sniff_extension(&link).await, None);
        let pipe = dir.join("pipe");
        let name = std::ffi::CString::new(pipe.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        let sniffed = tokio::time::timeout(std::time::Duration::from_secs(30), super::sniff_extension(&pipe)).await;
        assert_eq!(sniffed, Ok(None));
        std::fs::remove_dir_all(dir).unwrap();
    }
}
