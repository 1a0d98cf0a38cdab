//! The memory shared by every proxy given the same ledger database
//! (`--ledger`): a caller's retry that reaches another proxy is answered as
//! the first would answer it.
//!
//! Each submission is a record of the ledger's [`SharedRecords`]: made once
//! (of two proxies sending the same job at once, one sends, the other
//! waits), changed only on the version its proxy read, then written only by
//! the claim that holds it. A claim's hold lapses on its own: a proxy that
//! died while it waited for the service leaves a submission that reads as
//! unknown once its hold lapsed (never sent again), and one that died while
//! writing an acceptance leaves it owed to the next caller. Nothing waits on
//! a dead proxy for longer than its hold.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::Duration;

use genapi_ledger::{Record, RecordHold, SharedRecords};

use crate::decide::{decide, holder_gone, Decision, Fate, Phase};
use crate::identity::Naming;
use crate::remembered::{Answer, Claim, Claimed, Entry, KEPT_FOR};

/// How often a caller waiting on another proxy's submission reads it again.
pub(crate) const READ_AGAIN_AFTER: Duration = Duration::from_millis(250);

/// How long a send's hold stands: past the longest the service may take to
/// answer. Then its submission reads as unknown to every proxy.
const SENDING_HOLD: Duration = Duration::from_secs(crate::relay::SERVICE_TIMEOUT.as_secs() + 30);

/// How long a caller's hold on an acceptance being written to it stands.
/// Then it is owed to the next caller of the same job.
const DELIVERING_HOLD: Duration = Duration::from_secs(60);

/// How many times a claim reads again when another proxy changed the record
/// between its read and its write.
const MOST_RACES: usize = 16;

/// How many times a holder's word is written while the database does not
/// answer, and the pause between.
const WRITE_ATTEMPTS: usize = 4;
const WRITE_PAUSE: Duration = Duration::from_secs(2);

/// The memory in a ledger database.
pub(crate) struct SharedMemory {
    records: SharedRecords,
    /// Origins known to be handed out, and those learnt and not yet shared.
    origins: Mutex<(BTreeSet<String>, Vec<String>)>,
}

fn submission_key(claim: &Claim) -> String {
    format!("submission {}", claim.id.as_str())
}

fn origin_key(origin: &str) -> String {
    format!("origin {origin}")
}

/// A record's entry as the decision reads it: a holder whose hold lapsed is
/// gone. A record that cannot be read may hold a task.
fn entry_of(record: &Record) -> Entry {
    let mut entry: Entry = serde_json::from_value(record.value.clone()).unwrap_or(Entry {
        phase: Phase::Unknown,
        fate: Fate::Undelivered,
        idempotent: false,
        sent_at: 0,
        holder: String::new(),
        answer: None,
    });
    if !record.held {
        (entry.phase, entry.fate) = holder_gone(entry.phase, entry.fate);
    }
    entry
}

/// How long a claim holds an entry standing as `entry` does: while its
/// answer is awaited, or its acceptance is being written to its caller.
/// Settled otherwise: held no longer, whatever becomes of its holder.
fn hold_for(entry: &Entry) -> Duration {
    match (entry.phase, entry.fate) {
        (Phase::InFlight, _) => SENDING_HOLD,
        (_, Fate::Owned) => DELIVERING_HOLD,
        _ => Duration::ZERO,
    }
}

fn hold(holder: &str, lasting: Duration) -> Option<RecordHold<'_>> {
    Some(RecordHold { holder, lasting })
}

impl SharedMemory {
    /// The memory of every proxy for the service at `service`, in the
    /// ledger database at `url`.
    pub(crate) async fn open(url: &str, service: &str) -> Result<SharedMemory, genapi_ledger::LedgerError> {
        Ok(SharedMemory {
            records: SharedRecords::open(url, &format!("genapi-proxy {service}"), KEPT_FOR).await?,
            origins: Mutex::new((BTreeSet::new(), Vec::new())),
        })
    }

    /// the memory's `claim`: decided on the record as read, and
    /// written only on that version; decided again when another proxy
    /// changed it meanwhile.
    pub(crate) async fn claim(&self, claim: Claim, naming: Naming) -> Claimed {
        let key = submission_key(&claim);
        let unavailable = |e: genapi_ledger::LedgerError| Claimed::Unavailable(e.to_string());
        for _ in 0..MOST_RACES {
            let record = match self.records.read(&key).await {
                Ok(record) => record,
                Err(e) => return unavailable(e),
            };
            let entry = record.as_ref().map(entry_of);
            let version = record.as_ref().map(|record| record.version);
            // This claim's own write, applied though it was reported lost
            // (a statement run again on a new connection, whose first run
            // had landed): the claim has what it wrote.
            if record.as_ref().and_then(|r| r.holder.as_deref()) == Some(claim.holder.as_str()) {
                return match entry.and_then(|entry| entry.answer) {
                    Some(answer) => Claimed::Replay(claim, answer),
                    None => Claimed::Send(claim),
                };
            }
            let decision = decide(naming, entry.as_ref().map(|e| (e.phase, e.fate)));
            let written = match decision {
                Decision::Wait => return Claimed::Wait,
                Decision::RefuseUnknown => return Claimed::RefuseUnknown,
                Decision::Send => {
                    let sending = Entry::sending(&claim.holder, naming);
                    let (value, hold) = (value_of(&sending), hold(&claim.holder, hold_for(&sending)));
                    match version {
                        None => self.records.create(&key, &value, hold).await,
                        Some(version) => self.records.replace(&key, version, &value, hold).await,
                    }
                    .map(|won| won.then_some(None))
                }
                Decision::Replay => {
                    let (Some(mut entry), Some(version)) = (entry, version) else {
                        return Claimed::RefuseUnknown;
                    };
                    let Some(answer) = entry.answer.clone() else {
                        // An acceptance is never kept without its answer.
                        return Claimed::RefuseUnknown;
                    };
                    entry.fate = Fate::Owned;
                    entry.holder = claim.holder.clone();
                    let hold = hold(&claim.holder, hold_for(&entry));
                    self.records
                        .replace(&key, version, &value_of(&entry), hold)
                        .await
                        .map(|won| won.then_some(Some(answer)))
                }
            };
            match written {
                Ok(Some(None)) => return Claimed::Send(claim),
                Ok(Some(Some(answer))) => return Claimed::Replay(claim, answer),
                // Another proxy changed it first (or this claim's write
                // landed unseen): read it again.
                Ok(None) => continue,
                Err(e) => {
                    // A write the database may still apply (queued behind a
                    // lock when the step gave up) would hold the job for a
                    // send that never happens: taken back, after it.
                    if decision == Decision::Send {
                        let _ = self.records.remove_held(&key, &claim.holder).await;
                    }
                    return unavailable(e);
                }
            }
        }
        Claimed::Unavailable("the shared memory of this submission kept changing under it".into())
    }

    /// Changes `claim`'s entry, while it holds it, held for as long as its
    /// new standing needs ([`hold_for`]). Written on the version read, and
    /// read again when another write came between (the same claim's other
    /// word: its acceptance and its caller's going away race), so no word
    /// is written over with a stale copy. A database out of reach is tried
    /// again a few times: an acceptance kept nowhere else is a paid task.
    async fn update(&self, claim: &Claim, change: impl Fn(&mut Entry)) {
        let key = submission_key(claim);
        let mut last = None;
        for attempt in 0..WRITE_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(WRITE_PAUSE).await;
            }
            match self.write_on_read(&key, claim, &change).await {
                Ok(()) => return,
                Err(e) => last = Some(e),
            }
        }
        if let Some(e) = last {
            // Its hold lapses: other proxies then read it as the rule for a
            // gone holder says.
            tracing::warn!(error = %e, "the proxy's shared memory could not be written");
        }
    }

    /// One attempt of [`SharedMemory::update`].
    async fn write_on_read(
        &self,
        key: &str,
        claim: &Claim,
        change: &impl Fn(&mut Entry),
    ) -> Result<(), genapi_ledger::LedgerError> {
        for _ in 0..MOST_RACES {
            let Some(record) = self.records.read(key).await? else {
                return Ok(());
            };
            if self.write_over(key, claim, change, &record).await? {
                return Ok(());
            }
        }
        Ok(())
    }

    /// `change` written over `record` as read: whether it is done (`false`:
    /// the record changed since, and must be read again).
    async fn write_over(
        &self,
        key: &str,
        claim: &Claim,
        change: &impl Fn(&mut Entry),
        record: &Record,
    ) -> Result<bool, genapi_ledger::LedgerError> {
        if record.holder.as_deref() != Some(claim.holder.as_str()) {
            // Another claim holds it now: this one has nothing to say.
            return Ok(true);
        }
        let mut entry = entry_of(record);
        change(&mut entry);
        if entry.heard() {
            self.records.remove_held(key, &claim.holder).await?;
            return Ok(true);
        }
        let hold = hold(&claim.holder, hold_for(&entry));
        self.records.replace(key, record.version, &value_of(&entry), hold).await
    }

    /// the memory's `accepted`.
    pub(crate) async fn accepted(&self, claim: &Claim, answer: Answer) {
        self.update(claim, |entry| {
            entry.phase = Phase::Accepted;
            entry.answer = Some(answer.clone());
        })
        .await;
    }

    /// the memory's `forget`.
    pub(crate) async fn forget(&self, claim: &Claim) {
        if let Err(e) = self.records.remove_held(&submission_key(claim), &claim.holder).await {
            tracing::warn!(error = %e, "the proxy's shared memory could not be written");
        }
    }

    /// the memory's `unknown`.
    pub(crate) async fn unknown(&self, claim: &Claim) {
        self.update(claim, |entry| entry.phase = Phase::Unknown).await;
    }

    /// The caller that held `claim`'s answer received it to the end, or
    /// went away before.
    pub(crate) async fn settle_delivery(&self, claim: &Claim, delivered: bool) {
        self.update(claim, |entry| {
            entry.fate = if delivered { Fate::Delivered } else { Fate::Undelivered };
        })
        .await;
    }

    /// Remembers `origin`, to be shared at [`SharedMemory::publish_origins`].
    pub(crate) fn learn_origin(&self, origin: &str) {
        let mut origins = self.origins.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if origins.0.insert(origin.to_string()) {
            origins.1.push(origin.to_string());
        }
    }

    /// Shares the origins learnt since the last time.
    pub(crate) async fn publish_origins(&self) {
        let learnt = std::mem::take(&mut self.origins.lock().unwrap_or_else(|p| p.into_inner()).1);
        for origin in learnt {
            let stored = self
                .records
                .create(&origin_key(&origin), &serde_json::Value::Bool(true), None)
                .await;
            if let Err(e) = stored {
                tracing::warn!(error = %e, "the proxy's shared memory could not be written");
            }
        }
    }

    /// Whether any proxy sharing the memory was handed out an address at
    /// `origin`.
    pub(crate) async fn knows_origin(&self, origin: &str) -> bool {
        if self
            .origins
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .0
            .contains(origin)
        {
            return true;
        }
        let known = matches!(self.records.read(&origin_key(origin)).await, Ok(Some(_)));
        if known {
            self.origins
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .0
                .insert(origin.to_string());
        }
        known
    }
}

fn value_of(entry: &Entry) -> serde_json::Value {
    serde_json::to_value(entry).unwrap_or(serde_json::Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::SubmissionId;
    use genapi_test_common::pg::Postgres;

    fn claim_of(text: &str, holder: &str) -> Claim {
        Claim {
            id: SubmissionId::of("k", "/v1/x", text.as_bytes(), None).0,
            holder: holder.into(),
        }
    }

    fn answer() -> Answer {
        Answer {
            status: 200,
            content_type: None,
            retry_after: None,
            body: r#"{"id":"t-1"}"#.into(),
        }
    }

    /// A claim's acceptance and its caller's going away race: a word
    /// written over a record read before the other word landed is not
    /// written (the acceptance would be lost to every retry), and is
    /// written again over the record as it is.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_word_written_over_a_stale_reading_is_read_again() {
        let Some(pg) = Postgres::start("proxy-two-words") else {
            return;
        };
        let memory = SharedMemory::open(&pg.url(), "https://api.example.com/").await.unwrap();
        let claim = claim_of("job", "p/1");
        let key = submission_key(&claim);
        assert!(matches!(
            memory.claim(claim.clone(), Naming::ByContent).await,
            Claimed::Send(_)
        ));
        let stale = memory.records.read(&key).await.unwrap().unwrap();
        memory.accepted(&claim, answer()).await;
        let gone = |entry: &mut Entry| entry.fate = Fate::Undelivered;
        assert!(
            !memory.write_over(&key, &claim, &gone, &stale).await.unwrap(),
            "not over a stale reading"
        );
        memory.settle_delivery(&claim, false).await;
        let entry = entry_of(&memory.records.read(&key).await.unwrap().unwrap());
        assert_eq!((entry.phase, entry.fate), (Phase::Accepted, Fate::Undelivered));
        assert!(entry.answer.is_some(), "the acceptance is kept");
    }

    /// A claim whose write landed though it was reported lost (run again
    /// on a new connection after the first run had landed) has what it
    /// wrote, rather than waiting on itself.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_claim_whose_write_landed_unseen_has_it() {
        let Some(pg) = Postgres::start("proxy-own-write") else {
            return;
        };
        let memory = SharedMemory::open(&pg.url(), "https://api.example.com/").await.unwrap();
        let claim = claim_of("job", "p/1");
        let sending = Entry::sending(&claim.holder, Naming::ByContent);
        let hold = hold(&claim.holder, hold_for(&sending));
        assert!(memory
            .records
            .create(&submission_key(&claim), &value_of(&sending), hold)
            .await
            .unwrap());
        assert!(matches!(memory.claim(claim, Naming::ByContent).await, Claimed::Send(_)));
        // Another claim of the same job waits on it.
        assert!(matches!(
            memory.claim(claim_of("job", "p/2"), Naming::ByContent).await,
            Claimed::Wait
        ));
    }

    /// A hold stands exactly while something waits on its holder: a
    /// settled entry held on would keep other proxies waiting for nothing,
    /// and one let go too soon reads as its holder gone.
    #[test]
    fn an_entry_is_held_while_its_holder_has_something_to_do() {
        use {Fate::*, Phase::*};
        for phase in [InFlight, Accepted, Unknown] {
            for fate in [Owned, Delivered, Undelivered] {
                let entry = Entry {
                    phase,
                    fate,
                    ..Entry::sending("p/1", Naming::ByContent)
                };
                let expected = match (phase, fate) {
                    (InFlight, _) => SENDING_HOLD,
                    (Accepted | Unknown, Owned) => DELIVERING_HOLD,
                    _ => Duration::ZERO,
                };
                assert_eq!(hold_for(&entry), expected, "{phase:?} {fate:?}");
            }
        }
        assert!(
            SENDING_HOLD > crate::relay::SERVICE_TIMEOUT,
            "past the service's longest answer"
        );
    }
}
