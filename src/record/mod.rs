//! Recording: every exchange the client makes, written to a file in HAR 1.2
//! (the format of browsers' developer tools, proxies and OpenAPI tools), so
//! what the service really answered can be checked against the document
//! (`cargo xtask drift`) or kept for a test.
//!
//! # Where it hooks in
//!
//! Around each attempt of an exchange (`Transport::attempt`, which every
//! submission, poll and download passes; the retry loop around it never
//! sees the recorder): each attempt is one entry, with its
//! attempt number, its operation and whether the key went with it in the
//! entry's `_genapi` note (HAR's place for custom fields). An attempt that
//! got no answer is an entry with status 0 and the reason, as browsers write
//! one. A download's body is not kept: its size, format, dimensions and
//! SHA-256 are, computed as the chunks stream to their sink.
//!
//! # A file that is always valid HAR
//!
//! The file always ends with the text closing the entries and the log
//! (`]}}`). Each entry is written with one positioned write at the start of
//! that tail, carrying the entry and the tail again (`,{entry}]}}`), so
//! between two writes the file is complete; a process killed between writes
//! loses at most the entry being written. One limit remains: a process
//! killed during the write itself (microseconds for an entry of a few KiB)
//! may have it cut at a page boundary, since the kernel stops a write of a
//! killed process between pages. Entries are written as attempts end, under
//! a lock, in the order they ended. Nothing is synced to disk: the file
//! survives the process, not the machine.
//!
//! # What is not written
//!
//! See [`RecordOptions`] and the redaction rules (`redact.rs`): secrets are
//! replaced by `[redacted]` and image bytes by a summary, before the entry
//! is serialised, and a last pass removes from its text every secret the
//! client knows (`scrub.rs`: the key and whatever it has sent, in this
//! entry or an earlier one) and every query value of the entry's own
//! addresses.
//!
//! A recording that can no longer be written (a full disk) stops with one
//! warning in the log; the calls go on, since a recording must never cost a
//! task that was paid for.

mod har;
mod redact;
mod relayed;

/// The SHA-256 of bytes, in hex (also how the webhook maps hold long keys).
pub(crate) use redact::{masked_address, sha256, without_address_secrets};
pub use relayed::{RecordedExchange, RelayRecording};

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};

use reqwest::header::{HeaderMap, CONTENT_TYPE};
use reqwest::{StatusCode, Version};

use crate::scrub::Scrubber;
use redact::Redactor;

/// What a recording keeps (see [`crate::ClientBuilder::record_with`]).
///
/// By default the key, authorization and cookie headers, webhook secrets
/// (fields the document marks `x-secret`) and every query value of an
/// address but its task id are `[redacted]`, and image bytes (base64 inputs
/// of fields marked `x-image`, and downloaded results) are replaced by their
/// format, dimensions, size and SHA-256.
///
/// ```
/// let options = genapi::RecordOptions::default().keep_images(true);
/// let builder = genapi::Client::builder().record_with("run.har", options);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecordOptions {
    keep_images: bool,
    replace_existing: bool,
}

impl RecordOptions {
    /// Replaces a file already at the recording's name (the command's
    /// `--force`). Without it, building the client fails when anything has
    /// the name. Either way the recording is written by the file policy of
    /// `genapi-files`: never through a link (a link at the name is
    /// replaced as a link), and never to a pipe, a device or a folder.
    pub fn replace_existing(mut self, replace: bool) -> Self {
        self.replace_existing = replace;
        self
    }

    /// Keeps image bytes: base64 inputs as sent, downloads as base64 in the
    /// answer's content. Secrets are redacted all the same.
    pub fn keep_images(mut self, keep: bool) -> Self {
        self.keep_images = keep;
        self
    }
}

/// The trusted origins written at the head of a recording, so a checker
/// knows which hosts the client sent its key to.
pub(crate) struct Origins<'a> {
    pub(crate) base_url: &'a str,
    pub(crate) regional_base_url: &'a str,
    pub(crate) trusted: Vec<&'a str>,
}

/// The text that closes the entries and the log; always the file's end.
const TAIL: &[u8] = b"]}}\n";

/// Writes one client's exchanges to one file.
pub(crate) struct Recorder {
    path: PathBuf,
    redactor: Redactor,
    file: Mutex<Tail>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// The file and where its tail starts.
struct Tail {
    file: File,
    at: u64,
    entries: u64,
    /// A write failed: the recording stopped.
    stopped: bool,
}

impl Recorder {
    /// Creates the file at `path` (or empties it, when the options allow
    /// replacing it) and writes an empty log to it. The error says what could
    /// not be done with which file.
    pub(crate) fn create(
        path: &Path,
        options: &RecordOptions,
        scrubber: Arc<Scrubber>,
        origins: Origins<'_>,
    ) -> Result<Recorder, String> {
        let head = har::Head {
            version: "1.2",
            creator: har::Creator {
                name: "genapi",
                version: env!("CARGO_PKG_VERSION"),
            },
            genapi: har::Origins {
                base_url: origins.base_url,
                regional_base_url: origins.regional_base_url,
                trusted_origins: origins.trusted,
            },
        };
        let head = serde_json::to_string(&head).map_err(|e| e.to_string())?;
        // The head without its closing brace, then the entries' opening.
        let open = head.strip_suffix('}').unwrap_or(&head);
        let mut text = format!("{{\"log\":{open},\"entries\":[");
        let at = text.len() as u64;
        text.push_str(std::str::from_utf8(TAIL).unwrap_or_default());
        let fail = |e: std::io::Error| {
            format!(
                "cannot write the recording {}: {e}; choose a file that can be written",
                path.display()
            )
        };
        let existing = match options.replace_existing {
            true => genapi_files::Existing::Replace,
            false => genapi_files::Existing::Keep,
        };
        let file = genapi_files::create(path, existing).map_err(|refused| match refused {
            genapi_files::FileError::Io { source, .. } => fail(source),
            refused => format!("the recording {refused}"),
        })?;
        // One writer per file: two would each keep their own tail and
        // overwrite each other's entries.
        file.try_lock().map_err(|_| {
            format!(
                "the recording {} is being written by another client or process; record to another file",
                path.display()
            )
        })?;
        file.set_len(0).map_err(fail)?;
        write_at(&file, text.as_bytes(), 0).map_err(fail)?;
        Ok(Recorder {
            path: path.to_path_buf(),
            redactor: Redactor::new(scrubber, options.keep_images),
            file: Mutex::new(Tail {
                file,
                at,
                entries: 0,
                stopped: false,
            }),
        })
    }

    /// Notes a request as it is sent (its secrets are removed at once).
    pub(crate) fn begin(&self, sent: Sent<'_>) -> Attempt {
        let Sent {
            request,
            body,
            operation,
            attempt,
            keyed,
            download,
        } = sent;
        let mut secrets = Vec::new();
        let url = self.redactor.url(request.url(), &mut secrets);
        let query_string = reqwest::Url::parse(&url)
            .map(|u| {
                u.query_pairs()
                    .map(|(name, value)| har::Pair {
                        name: name.into_owned(),
                        value: value.into_owned(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let mut headers = self.headers(request.headers(), &mut secrets);
        if keyed {
            // Added beneath the user's layers (see `layers.rs`), so not in
            // the request yet; recorded as sent, redacted.
            headers.push(har::Pair {
                name: "x-key".into(),
                value: self.redactor.header("x-key", &[], &mut secrets),
            });
        }
        let post_data = body.map(|bytes| har::PostData {
            mime_type: content_type(request.headers()),
            text: self.redactor.request_body(bytes, &mut secrets),
        });
        Attempt {
            started: SystemTime::now(),
            clock: Instant::now(),
            request: har::Request {
                method: request.method().to_string(),
                url,
                http_version: version_text(request.version()),
                cookies: [],
                headers,
                query_string,
                headers_size: -1,
                body_size: body.map_or(0, |b| b.len() as i64),
                post_data,
            },
            note: har::Note {
                operation: operation.to_string(),
                attempt,
                keyed,
                error: None,
            },
            secrets,
            version: Version::HTTP_11,
            tap: download.then(|| Tap::new(self.redactor.keeps_images())),
        }
    }

    /// Writes the attempt that got an answer. `body` is what was read of it.
    pub(crate) fn answered(&self, mut attempt: Attempt, status: StatusCode, headers: &HeaderMap, body: Body<'_>) {
        let mime_type = content_type(headers);
        let success = status.is_success();
        let content = match (body, attempt.tap.take()) {
            (Body::Unread(why), _) => {
                attempt.note.error = Some(why.to_string());
                har::Content {
                    size: -1,
                    mime_type,
                    text: None,
                    encoding: None,
                    comment: None,
                }
            }
            (Body::Read(_), Some(tap)) if success => tap.content(mime_type),
            // A download's error page may quote its signed address: its
            // size and hash say enough.
            (Body::Read(bytes), Some(_)) => har::Content {
                size: bytes.len() as i64,
                text: Some(redact::opaque_summary(bytes)),
                mime_type,
                encoding: None,
                comment: None,
            },
            (Body::Read(bytes), _) => har::Content {
                size: bytes.len() as i64,
                text: Some(self.redactor.answer_body(bytes, &mut attempt.secrets)),
                mime_type,
                encoding: None,
                comment: None,
            },
        };
        let response = har::Response {
            status: status.as_u16(),
            status_text: status.canonical_reason().unwrap_or_default().to_string(),
            http_version: version_text(attempt.version),
            cookies: [],
            headers: self.headers(headers, &mut attempt.secrets),
            redirect_url: String::new(),
            headers_size: -1,
            body_size: content.size,
            content,
        };
        self.write(attempt, response);
    }

    /// Writes the attempt that ended without an answer, or whose answer
    /// broke off; `why` is the error's text.
    pub(crate) fn failed(&self, mut attempt: Attempt, why: String) {
        attempt.note.error = Some(redact::without_address_secrets(&why, &attempt.secrets));
        let response = har::Response {
            status: 0,
            status_text: String::new(),
            http_version: "",
            cookies: [],
            headers: Vec::new(),
            content: har::Content {
                size: -1,
                mime_type: String::new(),
                text: None,
                encoding: None,
                comment: None,
            },
            redirect_url: String::new(),
            headers_size: -1,
            body_size: -1,
        };
        self.write(attempt, response);
    }

    fn headers(&self, headers: &HeaderMap, secrets: &mut Vec<String>) -> Vec<har::Pair> {
        headers
            .iter()
            .map(|(name, value)| har::Pair {
                name: name.as_str().to_string(),
                value: self.redactor.header(name.as_str(), value.as_bytes(), secrets),
            })
            .collect()
    }

    fn write(&self, attempt: Attempt, mut response: har::Response) {
        // A kept image's base64 text is spliced into the entry's text as it
        // is written, not copied through a JSON value: it is the one large
        // part of an entry, and holds no secret to scrub (it is image bytes).
        // It stands in the value as a name drawn at random for this entry,
        // so no text of the service can hold it.
        let placeholder = format!(
            "genapi-kept-result-{:016x}{:016x}",
            fastrand::u64(..),
            fastrand::u64(..)
        );
        let kept = match response.content.encoding {
            Some("base64") => response.content.text.replace(placeholder.clone()),
            _ => None,
        };
        let elapsed = attempt.clock.elapsed().as_secs_f64() * 1000.0;
        let entry = har::Entry {
            started_date_time: har::iso_8601(attempt.started),
            time: elapsed,
            request: attempt.request,
            response,
            cache: har::Empty {},
            timings: har::Timings {
                send: 0.0,
                wait: elapsed,
                receive: 0.0,
            },
            genapi: attempt.note,
        };
        // Secrets are removed from the entry's strings, never from its JSON
        // text: a secret that reads like JSON (`status`, `":{"`) would
        // otherwise break the file.
        let Ok(mut value) = serde_json::to_value(&entry) else {
            return;
        };
        self.redactor.scrub_strings(&mut value, &attempt.secrets);
        let Ok(text) = serde_json::to_string(&value) else {
            return;
        };
        let (before, kept, after) = kept
            .as_deref()
            .and_then(|kept| {
                text.split_once(placeholder.as_str())
                    .map(|(before, after)| (before, kept, after))
            })
            .unwrap_or((text.as_str(), "", ""));
        let Ok(mut tail) = self.file.lock() else {
            return;
        };
        if tail.stopped {
            return;
        }
        let comma = if tail.entries > 0 { "," } else { "" };
        let mut bytes = Vec::with_capacity(comma.len() + before.len() + kept.len() + after.len() + TAIL.len());
        bytes.extend_from_slice(comma.as_bytes());
        bytes.extend_from_slice(before.as_bytes());
        bytes.extend_from_slice(kept.as_bytes());
        bytes.extend_from_slice(after.as_bytes());
        let written = bytes.len() as u64;
        bytes.extend_from_slice(TAIL);
        match write_at(&tail.file, &bytes, tail.at) {
            Ok(()) => {
                tail.at += written;
                tail.entries += 1;
            }
            Err(error) => {
                // Part of the entry may be on disk (a full disk): the file is
                // cut back to the last whole entry and its tail written
                // again, which fits where the part was.
                tail.stopped = true;
                let _ = tail.file.set_len(tail.at);
                let _ = write_at(&tail.file, TAIL, tail.at);
                tracing::warn!(path = %self.path.display(), %error, "the recording could not be written; it stops here");
                eprintln!(
                    "warning: the recording {} stops here: {error} (it holds the exchanges before this one)",
                    self.path.display()
                );
            }
        }
    }
}

/// A request as one attempt sends it, for [`Recorder::begin`].
pub(crate) struct Sent<'a> {
    pub(crate) request: &'a reqwest::Request,
    /// Its body: a submission's travels sealed, out of the request's reach.
    pub(crate) body: Option<&'a [u8]>,
    pub(crate) operation: &'a str,
    /// Its number, from 1.
    pub(crate) attempt: u32,
    /// Whether the key goes with it.
    pub(crate) keyed: bool,
    pub(crate) download: bool,
}

/// One attempt being recorded.
pub(crate) struct Attempt {
    started: SystemTime,
    clock: Instant,
    request: har::Request,
    note: har::Note,
    /// Secret values this attempt carried, removed from the entry's text.
    secrets: Vec<String>,
    version: Version,
    /// The summary of a download's body, fed as it streams.
    tap: Option<Tap>,
}

impl Attempt {
    /// Notes the answer's HTTP version.
    pub(crate) fn saw(&mut self, version: Version) {
        self.version = version;
    }
    /// Notes a chunk of a successful answer's body (a download's only).
    pub(crate) fn feed(&mut self, chunk: &[u8]) {
        if let Some(tap) = &mut self.tap {
            tap.feed(chunk);
        }
    }
}

/// What was read of an answer's body.
pub(crate) enum Body<'a> {
    /// The body, or for a download (whose bytes went to its sink and were
    /// summarised as they did) anything.
    Read(&'a [u8]),
    /// Not read, and why (an answer whose status is retried).
    Unread(&'static str),
}

/// Bytes a download's summary needs: its start (format and dimensions),
/// size and SHA-256; its base64 text too when images are kept, encoded as
/// the chunks arrive (the raw bytes are never held whole), up to
/// [`KEPT_IMAGE_BYTES`].
struct Tap {
    digest: ring::digest::Context,
    head: Vec<u8>,
    size: u64,
    kept: Option<Kept>,
}

/// Enough of an image's start for every header `dimensions` reads.
const HEAD_BYTES: usize = 64 * 1024;

/// The largest result whose bytes a recording keeps (`keep_images`); a
/// larger one is summarised, as without the option, so a recording of a
/// huge result holds a bounded amount of memory (its base64 text once, and
/// the entry written from it once).
pub(crate) const KEPT_IMAGE_BYTES: u64 = 64 << 20;

/// A download's bytes as base64 text, so far.
struct Kept {
    text: String,
    /// Bytes waiting for a whole group of three.
    pending: Vec<u8>,
    /// Past [`KEPT_IMAGE_BYTES`]: nothing more is kept.
    overflowed: bool,
}

impl Tap {
    fn new(keep: bool) -> Tap {
        Tap {
            digest: ring::digest::Context::new(&ring::digest::SHA256),
            head: Vec::new(),
            size: 0,
            kept: keep.then(|| Kept {
                text: String::new(),
                pending: Vec::new(),
                overflowed: false,
            }),
        }
    }

    fn feed(&mut self, chunk: &[u8]) {
        use base64::Engine as _;
        self.digest.update(chunk);
        self.size += chunk.len() as u64;
        let room = HEAD_BYTES.saturating_sub(self.head.len());
        self.head.extend_from_slice(&chunk[..room.min(chunk.len())]);
        let Some(kept) = &mut self.kept else { return };
        if kept.overflowed || self.size > KEPT_IMAGE_BYTES {
            kept.overflowed = true;
            kept.text = String::new();
            kept.pending = Vec::new();
            return;
        }
        kept.pending.extend_from_slice(chunk);
        let whole = kept.pending.len() / 3 * 3;
        base64::engine::general_purpose::STANDARD.encode_string(&kept.pending[..whole], &mut kept.text);
        kept.pending.drain(..whole);
    }

    fn content(self, mime_type: String) -> har::Content {
        use base64::Engine as _;
        let hash = redact::hex(self.digest.finish().as_ref());
        let mut summary = redact::summary(&self.head, self.size, &hash);
        // Only an image's (or a video's) bytes are kept: anything else (an
        // error page served as the result) is text of the service, which
        // may quote a secret, and is summarised as every other answer's
        // bytes would not be.
        let media = crate::input::extension_of(&self.head).is_some();
        let text = match self.kept {
            Some(Kept { overflowed: true, .. }) => {
                summary.push_str(&format!(
                    " (not kept: larger than the {} MiB a recording keeps of one result)",
                    KEPT_IMAGE_BYTES >> 20
                ));
                None
            }
            Some(_) if !media => {
                summary.push_str(" (not kept: not an image)");
                None
            }
            Some(Kept { mut text, pending, .. }) => {
                base64::engine::general_purpose::STANDARD.encode_string(&pending, &mut text);
                Some(text)
            }
            None => None,
        };
        har::Content {
            size: i64::try_from(self.size).unwrap_or(i64::MAX),
            mime_type,
            encoding: text.is_some().then_some("base64"),
            text,
            comment: Some(summary),
        }
    }
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string()
}

fn version_text(version: Version) -> &'static str {
    match version {
        Version::HTTP_09 => "HTTP/0.9",
        Version::HTTP_10 => "HTTP/1.0",
        Version::HTTP_2 => "HTTP/2",
        Version::HTTP_3 => "HTTP/3",
        _ => "HTTP/1.1",
    }
}

/// One write of `bytes` at `offset`: a single system call on Unix, so the
/// file never holds half an append and half an old tail for long.
#[cfg(unix)]
fn write_at(file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, bytes, offset)
}

#[cfg(not(unix))]
fn write_at(mut file: &File, bytes: &[u8], offset: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    file.seek(SeekFrom::Start(offset))?;
    file.write_all(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_result_is_its_base64_whatever_its_chunks() {
        use base64::Engine as _;
        let mut bytes = vec![0x89, b'P', b'N', b'G', 0x0D, 0x0A, 0x1A, 0x0A];
        bytes.extend((0..1000u32).map(|n| (n % 251) as u8));
        let mut tap = Tap::new(true);
        for chunk in bytes.chunks(7).chain(bytes[..0].chunks(1)) {
            tap.feed(chunk);
        }
        let content = tap.content("image/png".into());
        assert_eq!(content.encoding, Some("base64"));
        assert_eq!(
            content.text.as_deref(),
            Some(base64::engine::general_purpose::STANDARD.encode(&bytes).as_str())
        );
    }

    #[test]
    fn a_result_that_is_no_image_is_never_kept() {
        let mut tap = Tap::new(true);
        tap.feed(b"<html>maintenance, key k-123456789 quoted</html>");
        let content = tap.content("image/png".into());
        assert_eq!((content.text, content.encoding), (None, None));
        assert!(content.comment.unwrap().contains("not kept: not an image"));
    }

    #[test]
    fn a_result_past_the_kept_size_is_summarised_and_holds_no_copy() {
        let mut tap = Tap::new(true);
        tap.feed(&[0u8; 1024]);
        tap.feed(&vec![0u8; KEPT_IMAGE_BYTES as usize]);
        assert!(tap
            .kept
            .as_ref()
            .is_some_and(|kept| kept.text.is_empty() && kept.pending.is_empty()));
        let content = tap.content(String::new());
        assert_eq!((content.text, content.encoding), (None, None));
        assert!(content.comment.unwrap().contains("not kept: larger than the 64 MiB"));
    }
}
