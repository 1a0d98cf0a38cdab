//! The memory of one proxy alone, kept in a private file when it is given
//! one (read back at the next start, under the file policy of
//! `genapi-files`), and locked so that no second proxy writes over it.
//!
//! The file is a log: each change adds one line, the state of the one
//! submission it changed (or that it is gone), on the disk before anything
//! acts on it. A change costs its own line, not the whole memory: a day of
//! a busy service is a large memory, and a submission is sent only once its
//! line is written. The file is rewritten whole, as the lines it holds now
//! say, when it has grown to twice that (and at each start), so it stays
//! within twice the memory it holds. A last line cut short (the process
//! stopped while writing it) is a change nothing acted on, and is left out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};

use crate::decide::{decide, holder_gone, Decision, Fate, Phase};
use crate::identity::{Naming, SubmissionId};
use crate::remembered::{now, Answer, Claim, Claimed, Entry, KEPT_FOR};

/// How a trouble of the memory file begins, as callers are told it.
pub(crate) const FILE_TROUBLE: &str = "the proxy's memory file cannot be written";

/// The most the memory may hold, as its file writes it whole; the file,
/// with the lines added since, is at most twice that.
const MOST_BYTES: u64 = 64 * 1024 * 1024;

/// What the memory holds (an earlier release wrote it as one JSON object).
#[derive(Default, Serialize, Deserialize)]
struct Kept {
    entries: BTreeMap<SubmissionId, Entry>,
    /// Origins of addresses the service handed out (polling hosts,
    /// delivery hosts), which the proxy relays to.
    origins: BTreeSet<String>,
}

/// One line of the memory file.
#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Change {
    /// A submission as it stands now.
    Entry(SubmissionId, Entry),
    /// A submission forgotten.
    Gone(SubmissionId),
    /// An origin learned.
    Origin(String),
}

impl Change {
    /// The line, its end included.
    fn line(&self) -> Result<Vec<u8>, String> {
        let mut line = serde_json::to_vec(self).map_err(|e| e.to_string())?;
        line.push(b'\n');
        Ok(line)
    }
}

/// The memory file as it is written.
struct Log {
    /// Open to add lines, once the file was written whole.
    appending: Option<genapi_files::Appending>,
    /// Its length.
    length: u64,
    /// How long each submission's line in the file is.
    sizes: BTreeMap<SubmissionId, u64>,
    /// What a whole rewrite would write: the submissions' lines and the
    /// origins', kept as they change.
    total: u64,
}

impl Log {
    /// What a whole rewrite would write.
    fn held(&self) -> u64 {
        self.total
    }

    /// Notes that `id`'s line is now `size` bytes (0: gone).
    fn resize(&mut self, id: &SubmissionId, size: u64) {
        let before = match size {
            0 => self.sizes.remove(id),
            size => self.sizes.insert(id.clone(), size),
        };
        self.total = self.total - before.unwrap_or(0) + size;
    }
}

/// One proxy's memory.
pub(crate) struct LocalMemory {
    kept: Mutex<Kept>,
    file: Option<PathBuf>,
    /// Serialises writes of the file.
    log: Mutex<Log>,
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
                kept = read_kept(path, 2 * MOST_BYTES).map_err(unreadable)?;
            }
        }
        let now = now();
        kept.entries.retain(|_, entry| entry.sent_at + KEPT_FOR.as_secs() > now);
        // Whoever held an entry stopped with the proxy that wrote the file.
        for entry in kept.entries.values_mut() {
            (entry.phase, entry.fate) = holder_gone(entry.phase, entry.fate);
        }
        let memory = LocalMemory {
            kept: Mutex::new(kept),
            file,
            log: Mutex::new(Log {
                appending: None,
                length: 0,
                sizes: BTreeMap::new(),
                total: 0,
            }),
            _lock: lock,
            most_bytes: MOST_BYTES,
        };
        // Written whole at once: in this release's form, and as the start
        // judged it (whoever held an entry stopped).
        if let Some(path) = &memory.file {
            memory.rewrite(&mut memory.log()).map_err(|reason| MemoryError {
                path: path.display().to_string(),
                reason: format!("cannot be written: {reason}"),
                fix: "make its folder yours and writable by you alone",
            })?;
        }
        Ok(memory)
    }

    fn log(&self) -> MutexGuard<'_, Log> {
        self.log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
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
        let claim_id = claim.id.clone();
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
                    if let Err(why) = self.write(&claim.id) {
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
        self.changed(&claim_id);
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
            self.changed(&claim.id);
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
            self.changed(&claim.id);
        }
    }

    /// Remembers `origin`: whether it is new.
    pub(crate) fn learn_origin(&self, origin: &str) -> bool {
        let added = self.kept().origins.insert(origin.to_string());
        if added {
            if let Err(why) = self.add(&Change::Origin(origin.to_string())) {
                tracing::warn!(error = %why, "the proxy's memory could not be written");
            }
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
            self.changed(&claim.id);
        }
    }

    /// Writes the state of `id`; a failure is said (the file is written
    /// whole at the next change that can be).
    fn changed(&self, id: &SubmissionId) {
        if let Err(why) = self.write(id) {
            tracing::warn!(error = %why, "the proxy's memory could not be written");
        }
    }

    /// Writes the state `id` has now (or that it is gone), when there is a
    /// file: a line of its own, or the whole file when it has grown to
    /// twice what it holds. Refused when the memory would hold more than a
    /// start reads back.
    fn write(&self, id: &SubmissionId) -> Result<(), String> {
        if self.file.is_none() {
            return Ok(());
        }
        let mut log = self.log();
        // Read under the log's lock: the last line written for `id` is its
        // latest state, whichever change wrote it.
        let change = match self.kept().entries.get(id) {
            Some(entry) => Change::Entry(id.clone(), entry.clone()),
            // A submission the file holds no line of (one refused before it
            // was written) has nothing to forget there.
            None if !log.sizes.contains_key(id) => return Ok(()),
            None => Change::Gone(id.clone()),
        };
        let line = change.line()?;
        let held = match &change {
            Change::Entry(..) => line.len() as u64,
            _ => 0,
        };
        let before = log.sizes.get(id).copied().unwrap_or(0);
        if log.held() - before + held > self.most_bytes {
            // Entries a day old are forgotten as the proxy runs, not only
            // when it starts: a full memory makes room again, when one has
            // aged out (else a rewrite would free nothing, at the cost of
            // the whole file, for each submission refused).
            if !self.one_aged_out() {
                return Err(self.full());
            }
            self.rewrite(&mut log)?;
            let before = log.sizes.get(id).copied().unwrap_or(0);
            if log.held() - before + held > self.most_bytes {
                return Err(self.full());
            }
        }
        self.add_line(&mut log, &line)?;
        log.resize(id, held);
        Ok(())
    }

    /// Whether an entry was sent a day ago or more: a rewrite forgets it.
    fn one_aged_out(&self) -> bool {
        let now = crate::remembered::now();
        self.kept()
            .entries
            .values()
            .any(|entry| entry.sent_at + KEPT_FOR.as_secs() <= now)
    }

    /// Adds `change` (an origin) to the file.
    fn add(&self, change: &Change) -> Result<(), String> {
        if self.file.is_none() {
            return Ok(());
        }
        let line = change.line()?;
        let mut log = self.log();
        self.add_line(&mut log, &line)?;
        log.total += line.len() as u64;
        Ok(())
    }

    /// Adds `line` to the file, which is written whole first when it has
    /// grown to twice what it holds.
    fn add_line(&self, log: &mut Log, line: &[u8]) -> Result<(), String> {
        // Twice what it holds, or (a small memory) twice a mebibyte, within
        // twice the most it may hold.
        let floor = self.most_bytes.min(1024 * 1024);
        if log.appending.is_none() || log.length + line.len() as u64 > 2 * log.held().max(floor) {
            self.rewrite(log)?;
        }
        let appending = log.appending.as_mut().ok_or("the memory file is not open")?;
        if let Err(e) = appending.append(line) {
            // Part of the line may be in the file (a disk that filled up):
            // no line goes after it. The next change writes the file whole.
            log.appending = None;
            return Err(e.to_string());
        }
        log.length += line.len() as u64;
        Ok(())
    }

    /// Writes the whole file as the memory holds it now, forgetting entries
    /// a day old.
    fn rewrite(&self, log: &mut Log) -> Result<(), String> {
        let Some(path) = &self.file else { return Ok(()) };
        log.appending = None;
        let (mut bytes, mut sizes) = (Vec::new(), BTreeMap::new());
        {
            let mut kept = self.kept();
            let now = crate::remembered::now();
            kept.entries.retain(|_, entry| entry.sent_at + KEPT_FOR.as_secs() > now);
            for (id, entry) in &kept.entries {
                let line = Change::Entry(id.clone(), entry.clone()).line()?;
                sizes.insert(id.clone(), line.len() as u64);
                bytes.extend_from_slice(&line);
            }
            for origin in &kept.origins {
                bytes.extend_from_slice(&Change::Origin(origin.clone()).line()?);
            }
        }
        genapi_files::write_private(path, &bytes, genapi_files::Existing::Replace).map_err(|e| e.to_string())?;
        log.appending = Some(genapi_files::append_private(path).map_err(|e| e.to_string())?);
        (log.length, log.sizes, log.total) = (bytes.len() as u64, sizes, bytes.len() as u64);
        Ok(())
    }

    /// Why a submission is not sent: the memory is full.
    fn full(&self) -> String {
        format!(
            "it is full ({} entries of the last day, past the {} MiB it may have): nothing new is sent until they \
             age out; proxies with --ledger share a memory that has no such bound",
            self.kept().entries.len(),
            self.most_bytes / (1024 * 1024)
        )
    }
}

/// What the memory file at `path` holds, read within `limit`: its lines
/// in order, or the one object an earlier release wrote.
fn read_kept(path: &std::path::Path, limit: u64) -> Result<Kept, String> {
    let bytes = genapi_files::read_private(path, limit).map_err(|e| e.to_string())?;
    if let Ok(kept) = serde_json::from_slice::<Kept>(&bytes) {
        return Ok(kept);
    }
    let mut kept = Kept::default();
    let mut lines = bytes.split(|byte| *byte == b'\n').enumerate().peekable();
    while let Some((at, line)) = lines.next() {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice::<Change>(line) {
            Ok(Change::Entry(id, entry)) => {
                kept.entries.insert(id, entry);
            }
            Ok(Change::Gone(id)) => {
                kept.entries.remove(&id);
            }
            Ok(Change::Origin(origin)) => {
                kept.origins.insert(origin);
            }
            // The last line, without its end: cut short as it was written,
            // before anything acted on it. The first too, when it begins
            // as a change does (the first change after the file was
            // written anew); an earlier release's single object, written
            // whole or not at all, is never taken for one.
            Err(_) if lines.peek().is_none() && (at > 0 || begins_as_a_change(line)) => break,
            Err(e) => return Err(format!("line {}: {e}", at + 1)),
        }
    }
    Ok(kept)
}

/// Whether `line` begins as a line of [`Change`] does.
fn begins_as_a_change(line: &[u8]) -> bool {
    [&b"{\"entry\":"[..], b"{\"gone\":", b"{\"origin\":"]
        .iter()
        .any(|start| line.starts_with(start))
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
        let kept = read_kept(path, 2 * MOST_BYTES).map_err(|e| refused(format!("cannot be read: {e}")))?;
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
        // The file's name taken by a folder, and the file let go of (as a
        // failed rewrite leaves it): no write can land.
        std::fs::remove_file(&file).unwrap();
        std::fs::create_dir(&file).unwrap();
        memory.log().appending = None;
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
        // Refused at once while nothing can age out: the file is not
        // written whole again for each submission refused.
        let inode = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&file).unwrap());
        let (before, length) = (inode(), std::fs::metadata(&file).unwrap().len());
        assert!(matches!(
            memory.claim(claim(&id("one more"), "p/1"), Naming::ByIdempotencyKey),
            Claimed::Unavailable(_)
        ));
        assert_eq!(inode(), before, "the full file was written whole again");
        // Nor did the refusal add a line: the file holds nothing of it.
        assert_eq!(std::fs::metadata(&file).unwrap().len(), length);
        assert!(sent > 0 && memory.standing(&id(&format!("job {sent}"))).is_none());
        assert!(
            std::fs::metadata(&file).unwrap().len() <= 2 * 1024,
            "within twice what it may hold: read back at the next start"
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

    /// A change costs its own line, not the whole memory: a day of a busy
    /// service is a large memory, and a submission waits for its line.
    #[test]
    fn a_change_adds_one_line_and_the_file_stays_within_twice_the_memory() {
        let file = temp_file("lines");
        let mut memory = LocalMemory::open(Some(file.clone())).unwrap();
        // A small memory, so that a few thousand changes pass twice it.
        memory.most_bytes = 128 * 1024;
        let claims: Vec<Claim> = (0..300)
            .map(|n| sent(&memory, &id(&format!("job {n}")), "p/1", Naming::ByIdempotencyKey))
            .collect();
        let length = || std::fs::metadata(&file).unwrap().len();
        let before = length();
        memory.accepted(&claims[0], answer());
        let line = length() - before;
        assert!(line > 0 && line < 1024, "one line of {line} bytes, the file {before}");
        // One entry changed over and over: the file is written whole again
        // before it holds more than twice what the memory does.
        let mut longest = 0;
        for _ in 0..3_000 {
            memory.unknown(&claims[1]);
            longest = longest.max(length());
        }
        let held = memory.log().held();
        assert!(longest <= 2 * held.max(128 * 1024), "{longest} for {held}");
        assert!(
            longest > 128 * 1024,
            "the changes passed what the memory holds: {longest}"
        );
        drop(memory);
        let again = reopened(file);
        assert_eq!(again.kept().entries.len(), 300);
        assert_eq!(again.standing(&id("job 0")).map(|s| s.0), Some(Phase::Accepted));
    }

    /// A last line cut short (the process stopped while writing it) is a
    /// change nothing acted on: left out, and gone from the file at the
    /// start. A line cut short before another is damage, refused.
    #[test]
    fn a_last_line_cut_short_is_left_out() {
        let file = temp_file("cut-short");
        let memory = LocalMemory::open(Some(file.clone())).unwrap();
        let first = sent(&memory, &id("a"), "p/1", Naming::ByContent);
        memory.accepted(&first, answer());
        drop(memory);
        let whole = std::fs::read(&file).unwrap();
        let mut cut = whole.clone();
        cut.extend_from_slice(br#"{"entry":["abc",{"pha"#);
        genapi_files::write_private(&file, &cut, genapi_files::Existing::Replace).unwrap();
        let again = reopened(file.clone());
        assert_eq!(again.standing(&id("a")), Some((Phase::Accepted, Fate::Undelivered)));
        assert!(
            !std::fs::read(&file).unwrap().ends_with(b"pha"),
            "written whole at the start"
        );
        drop(again);
        let mut inside = br#"{"entry":["abc",{"pha"#.to_vec();
        inside.push(b'\n');
        inside.extend_from_slice(&whole);
        genapi_files::write_private(&file, &inside, genapi_files::Existing::Replace).unwrap();
        let error = LocalMemory::open(Some(file.clone())).err().unwrap().to_string();
        assert!(error.contains("line 1") && error.contains("move it away"), "{error}");
        // The file's only line cut short (the first change after it was
        // written anew): left out too; an earlier release's object cut
        // short is refused.
        genapi_files::write_private(&file, br#"{"entry":["abc",{"pha"#, genapi_files::Existing::Replace).unwrap();
        assert_eq!(reopened(file.clone()).standing(&id("a")), None);
        genapi_files::write_private(&file, br#"{"entries":{"abc":{"pha"#, genapi_files::Existing::Replace).unwrap();
        let error = LocalMemory::open(Some(file)).err().unwrap().to_string();
        assert!(error.contains("line 1"), "{error}");
    }

    /// The earlier release's file (one JSON object of it all) is read back,
    /// and written as lines from then on.
    #[test]
    fn an_earlier_releases_memory_file_is_read_back() {
        let file = temp_file("earlier");
        let memory = LocalMemory::open(None).unwrap();
        let first = sent(&memory, &id("a"), "p/1", Naming::ByContent);
        memory.accepted(&first, answer());
        let whole = serde_json::to_vec(&*memory.kept()).unwrap();
        genapi_files::write_private(&file, &whole, genapi_files::Existing::Replace).unwrap();
        let again = reopened(file.clone());
        assert_eq!(again.standing(&id("a")), Some((Phase::Accepted, Fate::Undelivered)));
        assert!(std::fs::read_to_string(&file).unwrap().starts_with("{\"entry\":["));
    }

    #[test]
    fn a_damaged_memory_file_is_refused_with_what_to_do() {
        let file = temp_file("damaged");
        genapi_files::write_private(&file, b"{not json\n", genapi_files::Existing::Replace).unwrap();
        let error = LocalMemory::open(Some(file)).err().unwrap().to_string();
        assert!(error.contains("move it away"), "{error}");
    }
}
