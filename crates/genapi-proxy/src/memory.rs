//! What the proxy remembers of the submissions it sent: their phase, the
//! service's acceptance, whether it reached its caller. Each submission is
//! held by the claim that sent it (or replays it): only that claim writes
//! what became of it.
//!
//! Two keepings, one rule ([`decide`](crate::decide::decide)):
//! - **this process's** ([`LocalMemory`]), kept in a private file when the
//!   proxy is given one, so a restart forgets nothing;
//! - **shared** ([`SharedMemory`]) by every proxy given the same ledger
//!   database, so a caller's retry that reaches another proxy is answered
//!   as the first would answer it.
//!
//! What a proxy that stopped (or whose hold on a shared record lapsed)
//! leaves is read as [`holder_gone`](crate::decide::holder_gone) says: a
//! submission in flight is unknown, never sent again; an acceptance being
//! written to its caller is owed to the next one. Entries are forgotten a
//! day after they were sent.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::watch;

use crate::identity::{Naming, SubmissionId};
use crate::memory_local::{LocalMemory, MemoryError};
use crate::memory_shared::SharedMemory;
use crate::remembered::{random_name, Answer, Claim, Claimed};

/// What a shared memory is kept under for the service at `base`: its
/// address, a path's slash at its end left off (a host's alone keeps its
/// one slash, as it always had), so one service is one memory however its
/// base URL was written, and a memory an earlier release kept under a base
/// URL written without that slash is found.
pub(crate) fn scope_of(base: &url::Url) -> String {
    let text = base.as_str();
    if base.path() == "/" {
        text.to_string()
    } else {
        text.trim_end_matches('/').to_string()
    }
}

/// How long after the caller's connection took an answer's last bytes its
/// delivery is written ([`Memory::settle_delivery`]).
pub(crate) const HANDED_OVER: std::time::Duration = std::time::Duration::from_secs(1);

/// Where the memory is kept.
enum Keeping {
    Local(LocalMemory),
    Shared(SharedMemory),
}

/// The memory, shared by every exchange of one proxy.
pub(crate) struct Memory {
    keeping: Keeping,
    /// Bumped at every change this proxy makes; a caller waiting on a job
    /// watches it.
    changes: watch::Sender<u64>,
    /// This proxy's name among the holders, and its claims' count.
    name: String,
    claims: AtomicU64,
    /// Deliveries being written on tasks of their own: a stop waits for
    /// them ([`Memory::settled`]).
    settling: watch::Sender<usize>,
    /// The memory file held beside a ledger ([`Memory::holding`]).
    held: Option<crate::memory_local::HeldBesideALedger>,
    /// How long after an answer is handed over its delivery is written
    /// ([`Memory::settle_delivery`]).
    handed_over: std::time::Duration,
}

impl Memory {
    /// A memory of this process alone, kept in `file` when given.
    pub(crate) fn local(file: Option<std::path::PathBuf>) -> Result<Memory, MemoryError> {
        Ok(Memory::over(Keeping::Local(LocalMemory::open(file)?)))
    }

    /// A memory shared through the ledger database at `url`, with every
    /// proxy for the service at `service`.
    pub(crate) async fn shared(url: &str, service: &str) -> Result<Memory, genapi_ledger::LedgerError> {
        Ok(Memory::over(Keeping::Shared(SharedMemory::open(url, service).await?)))
    }

    /// Holds `file`, the memory a proxy of this service on this machine
    /// would keep alone, while this one remembers in a ledger
    /// ([`crate::memory_local::hold_beside_a_ledger`]).
    pub(crate) fn holding(mut self, held: crate::memory_local::HeldBesideALedger) -> Memory {
        self.held = Some(held);
        self
    }

    /// Writes a delivery `after` its answer was handed over.
    pub(crate) fn handed_over_after(mut self, after: std::time::Duration) -> Memory {
        self.handed_over = after;
        self
    }

    fn over(keeping: Keeping) -> Memory {
        let (changes, _) = watch::channel(0);
        Memory {
            keeping,
            changes,
            name: random_name(),
            claims: AtomicU64::new(0),
            settling: watch::Sender::new(0),
            held: None,
            handed_over: HANDED_OVER,
        }
    }

    /// Waits until every delivery this proxy saw is written down: a process
    /// that exits after a stop leaves no acceptance its caller received
    /// looking owed (replayed to a new variation of the job).
    pub(crate) async fn settled(&self) {
        let mut settling = self.settling.subscribe();
        let _ = settling.wait_for(|writes| *writes == 0).await;
    }

    /// A receiver that sees every later change this proxy makes.
    pub(crate) fn watch(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Waits for the next change a claim may depend on: one this proxy
    /// makes, or (for a shared memory) a moment, after which another
    /// proxy's change is read. `false` when the proxy is stopping.
    pub(crate) async fn changed(&self, changes: &mut watch::Receiver<u64>) -> bool {
        match &self.keeping {
            Keeping::Local(_) => changes.changed().await.is_ok(),
            Keeping::Shared(_) => {
                let _ = tokio::time::timeout(crate::memory_shared::READ_AGAIN_AFTER, changes.changed()).await;
                true
            }
        }
    }

    fn tell(&self) {
        self.changes.send_modify(|version| *version += 1);
    }

    /// Decides what to do with a submission named `id`
    /// ([`decide`](crate::decide::decide)) and takes what the decision
    /// gives, in one step: a send is remembered as in flight, a replay's
    /// answer is held by this caller.
    pub(crate) async fn claim(&self, id: &SubmissionId, naming: Naming) -> Claimed {
        let claim = Claim {
            id: id.clone(),
            holder: format!("{}/{}", self.name, self.claims.fetch_add(1, Ordering::Relaxed)),
        };
        let claimed = match &self.keeping {
            Keeping::Local(local) => local.claim(claim, naming),
            Keeping::Shared(shared) => shared.claim(claim, naming).await,
        };
        // A submission about to be sent marks the memory file a ledger
        // proxy holds, whatever answer it gets.
        if let (Claimed::Send(_), Some(held)) = (&claimed, &self.held) {
            held.took_one();
        }
        // Only a claim that took something (or took back what it could not
        // keep) changes what others wait on: a wait told of itself would
        // wake at once, and spin.
        if matches!(
            claimed,
            Claimed::Send(_) | Claimed::Replay(..) | Claimed::Unavailable(_)
        ) {
            self.tell();
        }
        claimed
    }

    /// The service answered `claim`'s submission with an acceptance.
    pub(crate) async fn accepted(&self, claim: &Claim, answer: Answer) {
        match &self.keeping {
            Keeping::Local(local) => local.accepted(claim, answer),
            Keeping::Shared(shared) => shared.accepted(claim, answer).await,
        }
        self.tell();
    }

    /// The service refused `claim`'s submission, or it surely never left:
    /// nothing to remember, the same job may be sent again.
    pub(crate) async fn forget(&self, claim: &Claim) {
        match &self.keeping {
            Keeping::Local(local) => local.forget(claim),
            Keeping::Shared(shared) => shared.forget(claim).await,
        }
        self.tell();
    }

    /// `claim`'s submission left, and no answer came.
    pub(crate) async fn unknown(&self, claim: &Claim) {
        match &self.keeping {
            Keeping::Local(local) => local.unknown(claim),
            Keeping::Shared(shared) => shared.unknown(claim).await,
        }
        self.tell();
    }

    /// The caller that held `claim`'s answer received it to the end
    /// (`delivered`), or went away before. Called where nothing can wait
    /// (a body's end, a drop): written on a task of its own.
    ///
    /// A delivery is written [`HANDED_OVER`] after the connection took the
    /// last bytes ([`crate::handover`]). A proxy stopped (or killed) in
    /// between leaves the answer owed: its caller's retry gets it, and a new
    /// variation of the same job gets it too, which costs nothing; the
    /// other way round would pay twice.
    fn settle_delivery(self: &Arc<Self>, claim: Claim, delivered: bool) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            // No runtime (a drop as the process ends): owed, as written.
            if let (Keeping::Local(local), false) = (&self.keeping, delivered) {
                local.settle_delivery(&claim, delivered);
            }
            return;
        };
        self.settling.send_modify(|writes| *writes += 1);
        // Held weakly while it waits: a proxy gone meanwhile (dropped, its
        // file's lock let go) leaves the answer owed, as a kill would.
        let memory = Arc::downgrade(self);
        let after = if delivered {
            self.handed_over
        } else {
            std::time::Duration::ZERO
        };
        runtime.spawn(async move {
            tokio::time::sleep(after).await;
            let Some(memory) = memory.upgrade() else { return };
            match &memory.keeping {
                Keeping::Local(local) => local.settle_delivery(&claim, delivered),
                Keeping::Shared(shared) => shared.settle_delivery(&claim, delivered).await,
            }
            memory.tell();
            memory.settling.send_modify(|writes| *writes = writes.saturating_sub(1));
        });
    }

    /// Remembers `origin` as one the service handed out an address of
    /// (shared with other proxies at [`Memory::publish_origins`]).
    pub(crate) fn learn_origin(&self, origin: &str) {
        match &self.keeping {
            Keeping::Local(local) => {
                if local.learn_origin(origin) {
                    self.tell();
                }
            }
            Keeping::Shared(shared) => shared.learn_origin(origin),
        }
    }

    /// Makes the origins learnt known to every proxy sharing the memory,
    /// before the answer that names them is passed on.
    pub(crate) async fn publish_origins(&self) {
        if let Keeping::Shared(shared) = &self.keeping {
            shared.publish_origins().await;
        }
    }

    /// Whether the service handed out an address at `origin`.
    pub(crate) async fn knows_origin(&self, origin: &str) -> bool {
        match &self.keeping {
            Keeping::Local(local) => local.knows_origin(origin),
            Keeping::Shared(shared) => shared.knows_origin(origin).await,
        }
    }
}

/// Marks the delivery of an answer held by one caller: delivered when
/// [`Owner::delivered`] is called, undelivered when dropped before.
pub(crate) struct Owner {
    memory: Arc<Memory>,
    claim: Option<Claim>,
}

impl Owner {
    pub(crate) fn new(memory: Arc<Memory>, claim: Claim) -> Owner {
        Owner {
            memory,
            claim: Some(claim),
        }
    }

    /// The answer was written to its end.
    pub(crate) fn delivered(mut self) {
        if let Some(claim) = self.claim.take() {
            self.memory.settle_delivery(claim, true);
        }
    }
}

impl Drop for Owner {
    fn drop(&mut self) {
        if let Some(claim) = self.claim.take() {
            self.memory.settle_delivery(claim, false);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_service_is_one_shared_memory_however_its_base_url_is_written() {
        let scope = |text: &str| scope_of(&url::Url::parse(text).unwrap()).to_string();
        assert_eq!(scope("http://127.0.0.1:8787/api"), scope("http://127.0.0.1:8787/api/"));
        assert_eq!(scope("http://127.0.0.1:8787"), scope("http://127.0.0.1:8787/"));
        assert_ne!(scope("http://127.0.0.1:8787/api"), scope("http://127.0.0.1:8787/"));
        // As an earlier release kept them: the address as written, without
        // a path's slash at its end.
        assert_eq!(scope("http://127.0.0.1:8787/api"), "http://127.0.0.1:8787/api");
        assert_eq!(scope("http://127.0.0.1:8787"), "http://127.0.0.1:8787/");
    }

    /// A caller that must wait is woken by the change it waits for, never
    /// by its own claim (which would make every wait a busy loop).
    #[tokio::test]
    async fn a_claim_that_waits_wakes_no_one() {
        let memory = Memory::local(None).unwrap();
        let (id, naming) = SubmissionId::of("k", "/v1/x", b"{}", None);
        let Claimed::Send(first) = memory.claim(&id, naming).await else {
            panic!("the first is sent")
        };
        let changes = memory.watch();
        assert!(matches!(memory.claim(&id, naming).await, Claimed::Wait));
        assert!(!changes.has_changed().unwrap(), "a wait changed nothing");
        memory
            .accepted(
                &first,
                crate::remembered::Answer {
                    status: 200,
                    content_type: None,
                    retry_after: None,
                    body: "{}".into(),
                },
            )
            .await;
        assert!(changes.has_changed().unwrap(), "the acceptance is a change");
    }
}
