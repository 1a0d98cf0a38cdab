//! The memory of one proxy alone, kept in a private file when it is given
//! one (read back at the next start, under the file policy of
//! `genapi-files`), and locked so that no second proxy writes over it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::decide::{decide, holder_gone, Decision, Fate, Phase};
use crate::identity::{Naming, SubmissionId};
use crate::remembered::{now, Answer, Claim, Claimed, Entry, KEPT_FOR};

/// How a trouble of the memory file begins, as callers are told it.
pub(crate) const FILE_TROUBLE: &str = "the proxy's memory file cannot be written";

/// The largest memory file read back.
const MOST_BYTES: u64 = 64 * 1024 * 1024;

/// The memory file's content.
#[derive(Default, Serialize, Deserialize)]
struct Kept {
    entries: BTreeMap<SubmissionId, Entry>,
    /// Origins of addresses the service handed out (polling hosts,
    /// delivery hosts), which the proxy relays to.
    origins: BTreeSet<String>,
    /// Bumped at every change, so a later state is never overwritten in the
    /// file by an earlier one.
    #[serde(skip)]
    version: u64,
}

/// One proxy's memory.
pub(crate) struct LocalMemory {
    kept: Mutex<Kept>,
    file: Option<PathBuf>,
    /// Serialises writes of the file: the version last written.
    writing: Mutex<u64>,
    /// Held while the proxy runs: one proxy per memory file, as two would
    /// each write their own copy over the other's.
    _lock: Option<std::fs::File>,
    /// The most bytes the file may have: what a start reads back.
    most_bytes: u64,
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

impl LocalMemory {
    /// A memory kept in `file` (read back if it exists), or only in memory.
    pub(crate) fn open(file: Option<PathBuf>) -> Result<LocalMemory, MemoryError> {
        let mut kept = Kept::default();
        let lock = file.as_deref().map(lock).transpose()?;
        if let Some(path) = &file {
            refuse_beside_a_ledgers_memory(path)?;
        }
        if let Some(path) = &file {
            // A link counts as there (and is refused by the reading rule),
            // even one to nothing.
            if path.symlink_metadata().is_ok() {
                let unreadable = |reason: String| MemoryError {
                    path: path.display().to_string(),
                    reason: format!("cannot be read: {reason}"),
                    fix: MOVE_IT_AWAY,
                };
                let bytes = genapi_files::read_private(path, MOST_BYTES).map_err(|e| unreadable(e.to_string()))?;
                kept = serde_json::from_slice(&bytes).map_err(|e| unreadable(e.to_string()))?;
            }
        }
        let now = now();
        kept.entries.retain(|_, entry| entry.sent_at + KEPT_FOR.as_secs() > now);
        // Whoever held an entry stopped with the proxy that wrote the file.
        for entry in kept.entries.values_mut() {
            (entry.phase, entry.fate) = holder_gone(entry.phase, entry.fate);
        }
        Ok(LocalMemory {
            kept: Mutex::new(kept),
            file,
            writing: Mutex::new(0),
            _lock: lock,
            most_bytes: MOST_BYTES,
        })
    }

    fn kept(&self) -> MutexGuard<'_, Kept> {
        // A panic elsewhere while holding it leaves plain data behind.
        self.kept.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What is remembered of `id`.
    #[cfg(test)]
    pub(crate) fn standing(&self, id: &SubmissionId) -> Option<(Phase, Fate)> {
        self.kept().entries.get(id).map(|entry| (entry.phase, entry.fate))
    }

    /// the memory's `claim`, in one step under the lock.
    pub(crate) fn claim(&self, claim: Claim, naming: Naming) -> Claimed {
        let claimed = {
            let mut kept = self.kept();
            let standing = kept.entries.get(&claim.id).map(|entry| (entry.phase, entry.fate));
            match decide(naming, standing) {
                Decision::Wait => return Claimed::Wait,
                Decision::RefuseUnknown => return Claimed::RefuseUnknown,
                Decision::Send => {
                    kept.entries
                        .insert(claim.id.clone(), Entry::sending(&claim.holder, naming));
                    drop(kept);
                    // Sent only once remembered where a restart finds it:
                    // a memory that cannot be written sends nothing.
                    if let Err(why) = self.write() {
                        self.forget(&claim);
                        return Claimed::Unavailable(format!("{FILE_TROUBLE} ({why})"));
                    }
                    return Claimed::Send(claim);
                }
                Decision::Replay => match kept.entries.get_mut(&claim.id) {
                    Some(Entry {
                        answer: Some(answer), ..
                    }) => {
                        let answer = answer.clone();
                        if let Some(entry) = kept.entries.get_mut(&claim.id) {
                            entry.fate = Fate::Owned;
                            entry.holder = claim.holder.clone();
                        }
                        Claimed::Replay(claim, answer)
                    }
                    // An acceptance is never kept without its answer.
                    _ => Claimed::RefuseUnknown,
                },
            }
        };
        self.changed();
        claimed
    }

    /// the memory's `accepted`.
    pub(crate) fn accepted(&self, claim: &Claim, answer: Answer) {
        self.update(claim, |entry| {
            entry.phase = Phase::Accepted;
            entry.answer = Some(answer);
        });
    }

    /// the memory's `forget`.
    pub(crate) fn forget(&self, claim: &Claim) {
        let removed = {
            let mut kept = self.kept();
            let held = kept.entries.get(&claim.id).is_some_and(|e| e.holder == claim.holder);
            held && kept.entries.remove(&claim.id).is_some()
        };
        if removed {
            self.changed();
        }
    }

    /// the memory's `unknown`.
    pub(crate) fn unknown(&self, claim: &Claim) {
        self.update(claim, |entry| entry.phase = Phase::Unknown);
    }

    /// The caller that held `claim`'s answer received it to the end, or
    /// went away before. Heard by its caller, it is forgotten (in the file
    /// too): a repeat is a new job, unless named by an idempotency key.
    pub(crate) fn settle_delivery(&self, claim: &Claim, delivered: bool) {
        self.update(claim, |entry| {
            entry.fate = if delivered { Fate::Delivered } else { Fate::Undelivered };
        });
        let removed = {
            let mut kept = self.kept();
            let heard = kept
                .entries
                .get(&claim.id)
                .is_some_and(|e| e.holder == claim.holder && e.heard());
            heard && kept.entries.remove(&claim.id).is_some()
        };
        if removed {
            self.changed();
        }
    }

    /// Remembers `origin`: whether it is new.
    pub(crate) fn learn_origin(&self, origin: &str) -> bool {
        let added = self.kept().origins.insert(origin.to_string());
        if added {
            self.changed();
        }
        added
    }

    /// Whether the service handed out an address at `origin`.
    pub(crate) fn knows_origin(&self, origin: &str) -> bool {
        self.kept().origins.contains(origin)
    }

    /// Changes `claim`'s entry, while it holds it.
    fn update(&self, claim: &Claim, change: impl FnOnce(&mut Entry)) {
        let changed = match self.kept().entries.get_mut(&claim.id) {
            Some(entry) if entry.holder == claim.holder => {
                change(entry);
                true
            }
            _ => false,
        };
        if changed {
            self.changed();
        }
    }

    /// Writes the file; a failure is said (the next change writes it all
    /// again).
    fn changed(&self) {
        if let Err(why) = self.write() {
            tracing::warn!(error = %why, "the proxy's memory could not be written");
        }
    }

    /// Writes the file, when there is one.
    fn write(&self) -> Result<(), String> {
        let Some(path) = &self.file else { return Ok(()) };
        let mut written = self.writing.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (bytes, version) = {
            let mut kept = self.kept();
            // Entries a day old are forgotten as the proxy runs, not only
            // when it starts: a full memory makes room again.
            let now = crate::remembered::now();
            kept.entries.retain(|_, entry| entry.sent_at + KEPT_FOR.as_secs() > now);
            kept.version += 1;
            (serde_json::to_vec(&*kept), kept.version)
        };
        if version < *written {
            return Ok(());
        }
        let bytes = bytes.map_err(|e| e.to_string())?;
        // Never more than a start reads back: a memory too large to read
        // would lose every acceptance it owes. A full memory sends nothing
        // new until its entries age out (a day after they were sent).
        if bytes.len() as u64 > self.most_bytes {
            return Err(format!(
                "it is full ({} entries of the last day, past the {} MiB it may have): nothing new is sent until \
                 they age out; proxies with --ledger share a memory that has no such bound",
                self.kept().entries.len(),
                self.most_bytes / (1024 * 1024)
            ));
        }
        genapi_files::write_private(path, &bytes, genapi_files::Existing::Replace).map_err(|e| e.to_string())?;
        *written = version;
        Ok(())
    }
}

/// Takes the lock of the memory at `path`: a file beside it, its owner's
/// alone, locked for as long as the proxy runs.
fn lock(path: &std::path::Path) -> Result<std::fs::File, MemoryError> {
    let refused = |reason: String| MemoryError {
        path: path.display().to_string(),
        reason,
        fix: "stop the proxy that uses it: one proxy remembers for a service on a machine (proxies on several \
              machines share what they remember with --ledger)",
    };
    let file = lock_file(path).map_err(refused)?;
    file.try_lock()
        .map_err(|_| refused("another proxy is using it (two would write over each other, and pay twice)".into()))?;
    Ok(file)
}

/// The file beside the memory at `path` that proxies lock, its owner's
/// alone, in a folder that is the user's alone.
fn lock_file(path: &std::path::Path) -> Result<std::fs::File, String> {
    if let Some(folder) = path.parent().filter(|folder| !folder.as_os_str().is_empty()) {
        genapi_files::private_folder(folder).map_err(|e| e.to_string())?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.create(true).truncate(false).write(true);
    genapi_files::owner_only(&mut options);
    options.open(path.with_extension("lock")).map_err(|e| e.to_string())
}

/// Holds the memory file at `path` for a proxy that remembers in a ledger:
/// shared with the other such proxies of this machine, never beside a proxy
/// that remembers in the file alone (each would pay for what the other
/// sent), and refused while the file remembers submissions of the last
/// day, which the ledger knows nothing of.
pub(crate) fn hold_beside_a_ledger(path: &std::path::Path) -> Result<HeldBesideALedger, MemoryError> {
    let refused = |reason: String| MemoryError {
        path: path.display().to_string(),
        reason,
        fix: "run the proxy without --ledger until they age out (a day after they were sent), or stop the proxy \
              that remembers in the file",
    };
    let file = lock_file(path).map_err(refused)?;
    file.try_lock_shared().map_err(|_| {
        refused("a proxy without --ledger is using it: what one sends, the other knows nothing of".into())
    })?;
    if path.symlink_metadata().is_ok() {
        let kept: Kept = genapi_files::read_private(path, MOST_BYTES)
            .map_err(|e| e.to_string())
            .and_then(|bytes| serde_json::from_slice(&bytes).map_err(|e| e.to_string()))
            .map_err(|e| refused(format!("cannot be read: {e}")))?;
        let now = crate::remembered::now();
        let live = kept
            .entries
            .values()
            .filter(|entry| entry.sent_at + KEPT_FOR.as_secs() > now)
            .count();
        if live > 0 {
            let submissions = if live == 1 { "submission" } else { "submissions" };
            return Err(refused(format!(
                "a proxy without --ledger remembers {live} {submissions} of the last day in it, which the ledger \
                 knows nothing of: their retries would be sent, and paid, again"
            )));
        }
    }
    // The other way round: a proxy that remembers in the file alone, started
    // later, must know that the ledger remembers this service's submissions.
    // Made once, never replaced: every ledger proxy of the machine touches
    // the same file. Made here (a folder it cannot be made in is said
    // before anything is sent) with the oldest time, which refuses nothing:
    // only a submission sent makes it recent ([`HeldBesideALedger::took_one`]),
    // so a ledger proxy that never started, or sent nothing, keeps no file
    // proxy away.
    let mark = ledger_mark(path);
    match genapi_files::write_private(&mark, LEDGER_MARK_TEXT, genapi_files::Existing::Keep) {
        Ok(_) => touch(&mark, std::time::SystemTime::UNIX_EPOCH),
        Err(genapi_files::FileError::Exists { .. }) => {}
        Err(e) => return Err(refused(e.to_string())),
    }
    Ok(HeldBesideALedger { _lock: file, mark })
}

/// The memory file of a service held by a proxy remembering in a ledger.
pub(crate) struct HeldBesideALedger {
    _lock: std::fs::File,
    /// Beside the memory file; its time is the last submission a ledger
    /// proxy of the machine sent ([`HeldBesideALedger::took_one`]).
    mark: PathBuf,
}

impl HeldBesideALedger {
    /// A submission is sent while remembered in the ledger: a proxy
    /// remembering in the file alone is refused for a day from now. The
    /// mark is touched by its name, so every ledger proxy of the machine
    /// touches the one a file proxy reads.
    pub(crate) fn took_one(&self) {
        touch(&self.mark, std::time::SystemTime::now());
    }
}

/// Sets the time of the file at `path`, by its name.
fn touch(path: &std::path::Path, when: std::time::SystemTime) {
    if let Ok(file) = std::fs::OpenOptions::new().write(true).open(path) {
        let _ = file.set_modified(when);
    }
}

/// What the mark beside the memory file says.
const LEDGER_MARK_TEXT: &[u8] = b"proxies of this service remember what they send in a ledger (--ledger)\n";

/// The mark a proxy remembering in a ledger leaves beside the memory file
/// at `path`.
fn ledger_mark(path: &std::path::Path) -> PathBuf {
    path.with_extension("ledger")
}

/// Refuses a memory file while the ledger remembers this service's
/// submissions: its mark was touched less than a day ago (and an hour, for
/// a proxy that died between two touches).
fn refuse_beside_a_ledgers_memory(path: &std::path::Path) -> Result<(), MemoryError> {
    let Ok(touched) = std::fs::metadata(ledger_mark(path)).and_then(|meta| meta.modified()) else {
        return Ok(());
    };
    let until = touched + KEPT_FOR + std::time::Duration::from_secs(3600);
    if std::time::SystemTime::now() < until {
        return Err(MemoryError {
            path: path.display().to_string(),
            reason: "proxies of this service remembered what they sent in a ledger less than a day ago, which this \
                     file knows nothing of: their retries would be sent, and paid, again"
                .into(),
            fix: "give the same --ledger (GENAPI_LEDGER_URL)",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(text: &str) -> SubmissionId {
        SubmissionId::of("k", "/v1/x", text.as_bytes(), None).0
    }

    fn claim(id: &SubmissionId, holder: &str) -> Claim {
        Claim {
            id: id.clone(),
            holder: holder.into(),
        }
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

    /// The memory at `file` opened again once its last holder let go. A
    /// process another test of this binary starts (a database server) holds
    /// a copy of the lock for a moment, between its fork and its exec: that
    /// moment is waited out, a minute being a hang, not a verdict.
    fn reopened(file: PathBuf) -> LocalMemory {
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            match LocalMemory::open(Some(file.clone())) {
                Ok(memory) => return memory,
                Err(e) if std::time::Instant::now() < until && e.to_string().contains("another proxy") => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
                Err(e) => panic!("{e}"),
            }
        }
    }

    fn sent(memory: &LocalMemory, id: &SubmissionId, holder: &str, naming: Naming) -> Claim {
        match memory.claim(claim(id, holder), naming) {
            Claimed::Send(claim) => claim,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn an_answer_read_back_after_a_restart_is_owed_to_a_retry() {
        let file = temp_file("restart");
        let memory = LocalMemory::open(Some(file.clone())).unwrap();
        let first = sent(&memory, &id("a"), "p/1", Naming::ByContent);
        memory.accepted(&first, answer());
        // Held by a caller when the proxy stopped.
        drop(memory);
        let again = reopened(file);
        assert_eq!(again.standing(&id("a")), Some((Phase::Accepted, Fate::Undelivered)));
        match again.claim(claim(&id("a"), "q/1"), Naming::ByContent) {
            Claimed::Replay(_, answer) => assert_eq!(answer.cost(), Some(1.5)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_submission_in_flight_when_the_proxy_stopped_is_unknown_after() {
        let file = temp_file("in-flight");
        let memory = LocalMemory::open(Some(file.clone())).unwrap();
        sent(&memory, &id("a"), "p/1", Naming::ByContent);
        drop(memory);
        let again = reopened(file);
        assert_eq!(again.standing(&id("a")).map(|s| s.0), Some(Phase::Unknown));
    }

    #[test]
    fn a_delivered_answer_is_forgotten_unless_named_by_an_idempotency_key() {
        let memory = LocalMemory::open(None).unwrap();
        let (by_content, by_key) = (id("a"), SubmissionId::of("k", "/v1/x", b"", Some(b"job".as_slice())).0);
        let first = sent(&memory, &by_content, "p/1", Naming::ByContent);
        let second = sent(&memory, &by_key, "p/2", Naming::ByIdempotencyKey);
        for claim in [&first, &second] {
            memory.accepted(claim, answer());
            memory.settle_delivery(claim, true);
        }
        assert_eq!(memory.standing(&by_content), None);
        assert_eq!(memory.standing(&by_key), Some((Phase::Accepted, Fate::Delivered)));
    }

    #[test]
    fn a_holder_that_goes_away_leaves_the_answer_undelivered() {
        let memory = LocalMemory::open(None).unwrap();
        let first = sent(&memory, &id("a"), "p/1", Naming::ByContent);
        // Another caller's same job waits while the first is answered.
        assert!(matches!(
            memory.claim(claim(&id("a"), "p/2"), Naming::ByContent),
            Claimed::Wait
        ));
        memory.accepted(&first, answer());
        assert!(matches!(
            memory.claim(claim(&id("a"), "p/3"), Naming::ByContent),
            Claimed::Wait
        ));
        memory.settle_delivery(&first, false);
        assert_eq!(memory.standing(&id("a")), Some((Phase::Accepted, Fate::Undelivered)));
        // The next caller of the same job gets its acceptance.
        assert!(matches!(
            memory.claim(claim(&id("a"), "p/4"), Naming::ByContent),
            Claimed::Replay(..)
        ));
    }

    #[test]
    fn only_the_claim_that_holds_an_entry_writes_it() {
        let memory = LocalMemory::open(None).unwrap();
        let first = sent(&memory, &id("a"), "p/1", Naming::ByContent);
        memory.accepted(&first, answer());
        memory.settle_delivery(&first, false);
        let replayed = match memory.claim(claim(&id("a"), "p/2"), Naming::ByContent) {
            Claimed::Replay(claim, _) => claim,
            other => panic!("{other:?}"),
        };
        // The first holder's late words change nothing of the replay's.
        memory.forget(&first);
        memory.unknown(&first);
        memory.settle_delivery(&first, true);
        assert_eq!(memory.standing(&id("a")), Some((Phase::Accepted, Fate::Owned)));
        memory.settle_delivery(&replayed, true);
        assert_eq!(memory.standing(&id("a")), None, "heard by the replay's caller");
    }

    #[test]
    fn a_memory_that_cannot_be_written_sends_nothing() {
        let file = temp_file("unwritable");
        let memory = LocalMemory::open(Some(file.clone())).unwrap();
        // The file's name taken by a folder: no write can land.
        std::fs::create_dir(&file).unwrap();
        match memory.claim(claim(&id("a"), "p/1"), Naming::ByContent) {
            Claimed::Unavailable(why) => assert!(why.contains("cannot be written"), "{why}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(memory.standing(&id("a")), None, "nothing remembered as sent");
    }

    #[test]
    fn a_full_memory_sends_nothing_new_and_stays_readable() {
        let file = temp_file("full");
        let mut memory = LocalMemory::open(Some(file.clone())).unwrap();
        memory.most_bytes = 1024;
        let mut sent = 0;
        let mut refused = None;
        // A kilobyte holds a few entries; a hundred claims are far past it.
        while refused.is_none() && sent < 100 {
            match memory.claim(claim(&id(&format!("job {sent}")), "p/1"), Naming::ByIdempotencyKey) {
                Claimed::Send(_) => sent += 1,
                Claimed::Unavailable(why) => refused = Some(why),
                other => panic!("{other:?}"),
            }
        }
        let refused = refused.unwrap_or_else(|| panic!("{sent} sent, and the memory never full"));
        assert!(refused.contains("it is full"), "{refused}");
        assert!(sent > 0 && memory.standing(&id(&format!("job {sent}"))).is_none());
        assert!(
            std::fs::metadata(&file).unwrap().len() <= 1024,
            "read back at the next start"
        );
        // A day later its entries are forgotten as it runs: room again.
        for entry in memory.kept().entries.values_mut() {
            entry.sent_at -= KEPT_FOR.as_secs();
        }
        assert!(matches!(
            memory.claim(claim(&id("a day later"), "p/2"), Naming::ByIdempotencyKey),
            Claimed::Send(_)
        ));
        drop(memory);
        assert_eq!(reopened(file).kept().entries.len(), 1);
    }

    #[test]
    fn a_memory_another_proxy_uses_is_refused() {
        let file = temp_file("locked");
        let first = LocalMemory::open(Some(file.clone())).unwrap();
        let refused = LocalMemory::open(Some(file.clone())).err().unwrap().to_string();
        assert!(refused.contains("another proxy is using it"), "{refused}");
        drop(first);
        reopened(file);
    }

    #[test]
    fn a_delivered_answer_is_gone_from_the_file_too() {
        let file = temp_file("delivered");
        let memory = LocalMemory::open(Some(file.clone())).unwrap();
        let first = sent(&memory, &id("a"), "p/1", Naming::ByContent);
        memory.accepted(&first, answer());
        memory.settle_delivery(&first, true);
        drop(memory);
        let again = reopened(file);
        assert_eq!(again.standing(&id("a")), None, "a repeat after a restart is a new job");
    }

    #[test]
    fn a_damaged_memory_file_is_refused_with_what_to_do() {
        let file = temp_file("damaged");
        genapi_files::write_private(&file, b"{not json", genapi_files::Existing::Replace).unwrap();
        let error = LocalMemory::open(Some(file)).err().unwrap().to_string();
        assert!(error.contains("move it away"), "{error}");
    }
}
