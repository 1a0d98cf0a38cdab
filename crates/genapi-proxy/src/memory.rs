//! What the proxy remembers of the submissions it sent: their phase, the
//! service's acceptance, whether it reached its caller. Kept in a private
//! file (when the proxy is given one) so a restart forgets nothing.
//!
//! A submission in flight when the proxy stopped is read back as
//! [`Phase::Unknown`]: the service may have made its task, so the same job
//! is never sent again. An acceptance whose delivery was not seen to the
//! end is read back as [`Fate::Undelivered`]: the caller's retry gets it.
//! Entries are forgotten a day after they were sent.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::decide::{decide, Decision, Fate, Phase};
use crate::identity::{Naming, SubmissionId};

/// How long a submission is remembered: far past any SDK's retries.
const KEPT_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// The largest memory file read back.
const MOST_BYTES: u64 = 64 * 1024 * 1024;

/// What a caller's submission gets from the memory.
#[derive(Debug)]
pub(crate) enum Claimed {
    /// Send it: it is remembered as in flight, owned by this caller.
    Send,
    /// The remembered acceptance, now owned by this caller.
    Replay(Answer),
    /// Wait for the same job's change ([`Memory::watch`]), then claim again.
    Wait,
    /// The same job may have a task whose answer never came.
    RefuseUnknown,
}

/// The service's answer to a submission, as it came.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Answer {
    /// Its status.
    pub(crate) status: u16,
    /// Its `Content-Type`, when it had one.
    pub(crate) content_type: Option<String>,
    /// Its `Retry-After`, when it had one (a refusal's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) retry_after: Option<String>,
    /// Its body (JSON text; its addresses are the service's).
    pub(crate) body: String,
}

impl Answer {
    /// The task the acceptance names.
    pub(crate) fn task_id(&self) -> Option<String> {
        let value: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        value.get("id")?.as_str().map(str::to_string)
    }

    /// The cost the acceptance reports, when it does.
    pub(crate) fn cost(&self) -> Option<f64> {
        let value: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        value
            .get("cost")?
            .as_f64()
            .filter(|cost| cost.is_finite() && *cost >= 0.0)
    }
}

/// One remembered submission.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct Entry {
    #[serde(with = "phase_text")]
    phase: Phase,
    #[serde(skip, default = "undelivered")]
    fate: Fate,
    /// Named by an `Idempotency-Key`.
    idempotent: bool,
    /// When it was sent, in seconds since 1970.
    sent_at: u64,
    answer: Option<Answer>,
}

fn undelivered() -> Fate {
    Fate::Undelivered
}

mod phase_text {
    use super::Phase;

    pub(super) fn serialize<S: serde::Serializer>(phase: &Phase, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match phase {
            Phase::Accepted => "accepted",
            // In flight when written: unknown to whoever reads it back.
            Phase::InFlight | Phase::Unknown => "unknown",
        })
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Phase, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        Ok(match text.as_str() {
            "accepted" => Phase::Accepted,
            _ => Phase::Unknown,
        })
    }
}

/// The memory file's content.
#[derive(Default, Serialize, Deserialize)]
struct Kept {
    entries: BTreeMap<SubmissionId, Entry>,
    /// Origins of addresses the service handed out (polling hosts,
    /// delivery hosts), which the proxy relays to.
    origins: BTreeSet<String>,
}

/// The memory, shared by every exchange.
pub(crate) struct Memory {
    kept: Mutex<Kept>,
    /// Bumped at every change; a caller waiting on a job watches it.
    changes: watch::Sender<u64>,
    file: Option<PathBuf>,
    /// Serialises writes of the file, so a later state is never
    /// overwritten by an earlier one.
    writing: Mutex<u64>,
    /// Held while the proxy runs: one proxy per memory file, as two would
    /// each write their own copy over the other's.
    _lock: Option<std::fs::File>,
}

/// Why the memory file could not be read.
#[derive(Debug, thiserror::Error)]
#[error("the proxy's memory {path}: {reason}; {fix}")]
pub struct MemoryError {
    path: String,
    reason: String,
    fix: &'static str,
}

/// What to do about a memory that cannot be read.
const MOVE_IT_AWAY: &str = "move it away to start with an empty memory";

impl Memory {
    /// A memory kept in `file` (read back if it exists), or only in memory.
    pub(crate) fn open(file: Option<PathBuf>) -> Result<Memory, MemoryError> {
        let mut kept = Kept::default();
        let lock = file.as_deref().map(lock).transpose()?;
        if let Some(path) = &file {
            // A link counts as there (and is refused by the reading rule),
            // even one to nothing.
            if path.symlink_metadata().is_ok() {
                let bytes = genapi_files::read_private(path, MOST_BYTES).map_err(|e| MemoryError {
                    path: path.display().to_string(),
                    reason: format!("cannot be read: {e}"),
                    fix: MOVE_IT_AWAY,
                })?;
                kept = serde_json::from_slice(&bytes).map_err(|e| MemoryError {
                    path: path.display().to_string(),
                    reason: format!("cannot be read: {e}"),
                    fix: MOVE_IT_AWAY,
                })?;
            }
        }
        let now = now();
        kept.entries.retain(|_, entry| entry.sent_at + KEPT_FOR.as_secs() > now);
        let (changes, _) = watch::channel(0);
        Ok(Memory {
            kept: Mutex::new(kept),
            changes,
            file,
            writing: Mutex::new(0),
            _lock: lock,
        })
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        // A panic elsewhere while holding it leaves plain data behind.
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A receiver that sees every later change.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// What is remembered of `id`.
    #[cfg(test)]
    pub(crate) fn standing(&self, id: &SubmissionId) -> Option<(Phase, Fate)> {
        self.kept().entries.get(id).map(|entry| (entry.phase, entry.fate))
    }

    /// Decides what to do with a submission named `id` ([`decide`]) and
    /// takes what the decision gives, in one step: a send is remembered as
    /// in flight, a replay's answer is owned by this caller.
    pub(crate) fn claim(&self, id: &SubmissionId, naming: Naming) -> Claimed {
        let claimed = {
            let mut kept = self.kept();
            let standing = kept.entries.get(id).map(|entry| (entry.phase, entry.fate));
            match decide(naming, standing) {
                Decision::Wait => return Claimed::Wait,
                Decision::RefuseUnknown => return Claimed::RefuseUnknown,
                Decision::Send => {
                    kept.entries.insert(
                        id.clone(),
                        Entry {
                            phase: Phase::InFlight,
                            fate: Fate::Owned,
                            idempotent: naming == Naming::ByIdempotencyKey,
                            sent_at: now(),
                            answer: None,
                        },
                    );
                    Claimed::Send
                }
                Decision::Replay => match kept.entries.get_mut(id) {
                    Some(entry) => {
                        entry.fate = Fate::Owned;
                        match entry.answer.clone() {
                            Some(answer) => Claimed::Replay(answer),
                            // An acceptance is never kept without its answer.
                            None => Claimed::RefuseUnknown,
                        }
                    }
                    None => Claimed::RefuseUnknown,
                },
            }
        };
        self.changed();
        claimed
    }

    /// The service answered `id` with an acceptance.
    pub(crate) fn accepted(&self, id: &SubmissionId, answer: Answer) {
        self.update(id, |entry| {
            entry.phase = Phase::Accepted;
            entry.answer = Some(answer);
        });
    }

    /// The service refused `id`, or it surely never left: nothing to
    /// remember, the same job may be sent again.
    pub(crate) fn forget(&self, id: &SubmissionId) {
        self.kept().entries.remove(id);
        self.changed();
    }

    /// `id` left, and no answer came.
    pub(crate) fn unknown(&self, id: &SubmissionId) {
        self.update(id, |entry| entry.phase = Phase::Unknown);
    }

    /// The caller that owned `id`'s answer received it to the end, or went
    /// away before.
    pub(crate) fn settle_delivery(&self, id: &SubmissionId, delivered: bool) {
        self.update(id, |entry| {
            if entry.fate == Fate::Owned {
                entry.fate = if delivered { Fate::Delivered } else { Fate::Undelivered };
            }
        });
        if delivered {
            // Heard by its caller: a repeat is a new job, unless named by an
            // idempotency key. Nothing to keep for it, in the file either.
            let removed = {
                let mut kept = self.kept();
                let heard = kept
                    .entries
                    .get(id)
                    .is_some_and(|e| !e.idempotent && e.fate == Fate::Delivered);
                heard && kept.entries.remove(id).is_some()
            };
            if removed {
                self.changed();
            }
        }
    }

    /// Remembers `origin` as one the service handed out an address of.
    pub(crate) fn learn_origin(&self, origin: &str) {
        let added = self.kept().origins.insert(origin.to_string());
        if added {
            self.changed();
        }
    }

    /// Whether the service handed out an address at `origin`.
    pub(crate) fn knows_origin(&self, origin: &str) -> bool {
        self.kept().origins.contains(origin)
    }

    fn update(&self, id: &SubmissionId, change: impl FnOnce(&mut Entry)) {
        if let Some(entry) = self.kept().entries.get_mut(id) {
            change(entry);
        }
        self.changed();
    }

    /// Tells the waiters, and writes the file.
    fn changed(&self) {
        self.changes.send_modify(|version| *version += 1);
        self.write();
    }

    fn write(&self) {
        let Some(path) = &self.file else { return };
        let mut written = self.writing.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (bytes, version) = {
            let kept = self.kept();
            (serde_json::to_vec(&*kept), *self.changes.borrow())
        };
        if version < *written {
            return;
        }
        let Ok(bytes) = bytes else { return };
        match genapi_files::write_private(path, &bytes, genapi_files::Existing::Replace) {
            Ok(_) => *written = version,
            Err(e) => tracing::warn!(error = %e, "the proxy's memory could not be written"),
        }
    }
}

/// Takes the lock of the memory at `path`: a file beside it, its owner's
/// alone, locked for as long as the proxy runs.
fn lock(path: &std::path::Path) -> Result<std::fs::File, MemoryError> {
    let refused = |reason: String| MemoryError {
        path: path.display().to_string(),
        reason,
        fix: "stop the proxy that uses it, or give this one a memory of its own",
    };
    if let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
        genapi_files::private_folder(folder).map_err(|e| refused(e.to_string()))?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    genapi_files::owner_only(&mut options);
    let file = options
        .open(path.with_extension("lock"))
        .map_err(|e| refused(e.to_string()))?;
    file.try_lock()
        .map_err(|_| refused("another proxy is using it (two would write over each other, and pay twice)".into()))?;
    Ok(file)
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Marks the delivery of an answer owned by one caller: delivered when
/// [`Owner::delivered`] is called, undelivered when dropped before.
pub(crate) struct Owner {
    memory: Arc<Memory>,
    id: SubmissionId,
    armed: bool,
}

impl Owner {
    pub(crate) fn new(memory: Arc<Memory>, id: SubmissionId) -> Owner {
        Owner {
            memory,
            id,
            armed: true,
        }
    }

    /// The answer was written to its end.
    pub(crate) fn delivered(mut self) {
        self.armed = false;
        self.memory.settle_delivery(&self.id, true);
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if self.armed {
            self.memory.settle_delivery(&self.id, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> SubmissionId {
        SubmissionId::of("k", "/v1/x", text.as_bytes(), None).0
    }

    fn answer() -> Answer {
        Answer {
            status: 200,
            content_type: Some("application/json".into()),
            retry_after: None,
            body: r#"{"id":"t","polling_url":"http://127.0.0.1:1/v1/get_result?id=t","cost":1.5}"#.into(),
        }
    }

    fn temp_file(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("genapi-proxy-memory-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("memory.json")
    }

    #[test]
    fn an_answer_read_back_after_a_restart_is_owed_to_a_retry() {
        let file = temp_file("restart");
        let memory = Memory::open(Some(file.clone())).unwrap();
        assert!(matches!(memory.claim(&id("a"), Naming::ByContent), Claimed::Send));
        memory.accepted(&id("a"), answer());
        // Owned by a caller when the proxy stopped.
        drop(memory);
        let again = Memory::open(Some(file)).unwrap();
        assert_eq!(again.standing(&id("a")), Some((Phase::Accepted, Fate::Undelivered)));
        match again.claim(&id("a"), Naming::ByContent) {
            Claimed::Replay(answer) => assert_eq!(answer.cost(), Some(1.5)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_submission_in_flight_when_the_proxy_stopped_is_unknown_after() {
        let file = temp_file("in-flight");
        let memory = Memory::open(Some(file.clone())).unwrap();
        assert!(matches!(memory.claim(&id("a"), Naming::ByContent), Claimed::Send));
        drop(memory);
        let again = Memory::open(Some(file)).unwrap();
        assert_eq!(again.standing(&id("a")).map(|s| s.0), Some(Phase::Unknown));
    }

    #[test]
    fn a_delivered_answer_is_forgotten_unless_named_by_an_idempotency_key() {
        let memory = Arc::new(Memory::open(None).unwrap());
        let (by_content, by_key) = (id("a"), SubmissionId::of("k", "/v1/x", b"", Some("job")).0);
        assert!(matches!(memory.claim(&by_content, Naming::ByContent), Claimed::Send));
        assert!(matches!(memory.claim(&by_key, Naming::ByIdempotencyKey), Claimed::Send));
        for id in [&by_content, &by_key] {
            memory.accepted(id, answer());
            Owner::new(memory.clone(), id.clone()).delivered();
        }
        assert_eq!(memory.standing(&by_content), None);
        assert_eq!(memory.standing(&by_key), Some((Phase::Accepted, Fate::Delivered)));
    }

    #[test]
    fn an_owner_that_goes_away_leaves_the_answer_undelivered() {
        let memory = Arc::new(Memory::open(None).unwrap());
        assert!(matches!(memory.claim(&id("a"), Naming::ByContent), Claimed::Send));
        let owner = Owner::new(memory.clone(), id("a"));
        // Another caller's same job waits while the first is answered.
        assert!(matches!(memory.claim(&id("a"), Naming::ByContent), Claimed::Wait));
        memory.accepted(&id("a"), answer());
        assert!(matches!(memory.claim(&id("a"), Naming::ByContent), Claimed::Wait));
        drop(owner);
        assert_eq!(memory.standing(&id("a")), Some((Phase::Accepted, Fate::Undelivered)));
        // The next caller of the same job gets its acceptance.
        assert!(matches!(memory.claim(&id("a"), Naming::ByContent), Claimed::Replay(_)));
    }

    #[test]
    fn a_memory_another_proxy_uses_is_refused() {
        let file = temp_file("locked");
        let first = Memory::open(Some(file.clone())).unwrap();
        let refused = Memory::open(Some(file.clone())).err().unwrap().to_string();
        assert!(refused.contains("another proxy is using it"), "{refused}");
        drop(first);
        assert!(Memory::open(Some(file)).is_ok(), "free once the first stops");
    }

    #[test]
    fn a_delivered_answer_is_gone_from_the_file_too() {
        let file = temp_file("delivered");
        let memory = Arc::new(Memory::open(Some(file.clone())).unwrap());
        assert!(matches!(memory.claim(&id("a"), Naming::ByContent), Claimed::Send));
        memory.accepted(&id("a"), answer());
        Owner::new(memory.clone(), id("a")).delivered();
        drop(memory);
        let again = Memory::open(Some(file)).unwrap();
        assert_eq!(again.standing(&id("a")), None, "a repeat after a restart is a new job");
    }

    #[test]
    fn a_damaged_memory_file_is_refused_with_what_to_do() {
        let file = temp_file("damaged");
        genapi_files::write_private(&file, b"{not json", genapi_files::Existing::Replace).unwrap();
        let error = Memory::open(Some(file)).err().unwrap().to_string();
        assert!(error.contains("move it away"), "{error}");
    }
}
