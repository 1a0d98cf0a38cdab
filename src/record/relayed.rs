//! Exchanges a program relays to the service itself, recorded as the
//! client records its own: the same HAR file, the same redaction.
//!
//! A proxy in front of the service (the `genapi-proxy` crate) sends what
//! its callers send with an HTTP client of its own, not through a
//! [`crate::Client`]; [`crate::Client::record_relayed`] gives it a
//! recording that the client's scrubber and redaction rules write, so
//! `cargo xtask drift` reads it as it reads a client's.

use std::sync::{Arc, Mutex};

use http::{HeaderMap, StatusCode};

use super::{Attempt, Body, Recorder, Sent};

/// A HAR recording of relayed exchanges ([`crate::Client::record_relayed`]).
/// Cheap to clone; every clone writes to the same file.
#[derive(Clone, Debug)]
pub struct RelayRecording {
    recorder: Arc<Recorder>,
    client: crate::Client,
    /// The callers' keys learned so far (each once).
    keys: Arc<Mutex<std::collections::HashSet<String>>>,
}

impl RelayRecording {
    pub(crate) fn new(recorder: Recorder, client: crate::Client) -> RelayRecording {
        RelayRecording {
            recorder: Arc::new(recorder),
            client,
            keys: Arc::default(),
        }
    }

    /// Notes `request`, about to be sent with `body`: the exchange to
    /// finish with [`RecordedExchange::answered`] or
    /// [`RecordedExchange::failed`] (dropped unfinished, it is written as
    /// failed). `operation` names it in the recording, as the document
    /// does (`gen_2_pro`, `get_result`) or `download`, for a result's
    /// bytes, which are summarised rather than kept.
    pub fn sent(&self, request: &reqwest::Request, body: Option<&[u8]>, operation: &str) -> RecordedExchange {
        let download = operation == DOWNLOAD;
        let attempt = self.recorder.begin(Sent {
            request,
            body,
            operation,
            attempt: 1,
            keyed: !download && self.client.sends_key_to(request.url()),
            download,
        });
        RecordedExchange {
            recorder: self.recorder.clone(),
            attempt: Mutex::new(Some(attempt)),
        }
    }
}

impl RelayRecording {
    /// Tells the recording that `key` is a key a caller sent (not this
    /// client's): it is left out of the recording, in every spelling the
    /// client's own key is.
    pub fn learn_key(&self, key: &str) {
        let new = self
            .keys
            .lock()
            .map(|mut keys| keys.insert(key.to_string()))
            .unwrap_or(true);
        if new {
            self.client.learns_key(key);
        }
    }

    /// Tells the recording that `id` names a task (an acceptance's `id`):
    /// never a secret, so it is kept wherever it stands, a result address's
    /// path included, as the client keeps the ids of its own tasks.
    pub fn task_accepted(&self, id: &str) {
        self.client.knows_task(id);
    }
}

/// The operation name of a result's download in a recording.
const DOWNLOAD: &str = "download";

/// One relayed exchange being recorded.
pub struct RecordedExchange {
    recorder: Arc<Recorder>,
    attempt: Mutex<Option<Attempt>>,
}

impl std::fmt::Debug for RecordedExchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecordedExchange").finish_non_exhaustive()
    }
}

impl RecordedExchange {
    /// Notes a chunk of a download's body as it streams (its size, format
    /// and digest are recorded, not its bytes).
    pub fn feed(&self, chunk: &[u8]) {
        if let Some(attempt) = self.lock().as_mut() {
            attempt.feed(chunk);
        }
    }

    /// Writes the exchange with its answer: `body` is what was read of it
    /// (empty for a download fed chunk by chunk).
    pub fn answered(self, status: StatusCode, headers: &HeaderMap, body: &[u8]) {
        if let Some(attempt) = self.lock().take() {
            self.recorder.answered(attempt, status, headers, Body::Read(body));
        }
    }

    /// Writes the exchange as one that got no answer, and why.
    pub fn failed(self, why: &str) {
        if let Some(attempt) = self.lock().take() {
            self.recorder.failed(attempt, why.to_string());
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Attempt>> {
        self.attempt.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for RecordedExchange {
    fn drop(&mut self) {
        if let Some(attempt) = self.lock().take() {
            self.recorder
                .failed(attempt, "the exchange ended before its answer was read".into());
        }
    }
}
