//! How a worker opens a ledger: its name, its lease and each step's deadline.

use std::path::Path;
use std::time::Duration;

use crate::link::DEFAULT_STEP_DEADLINE;
use crate::naming::{Naming, DEFAULT_NAME_WAIT};

/// Settings of [`crate::Ledger::open_with`].
///
/// ```
/// use std::time::Duration;
/// use genapi_ledger::LedgerOptions;
/// let options = LedgerOptions::default()
///     .lease(Duration::from_secs(60))
///     .step_deadline(Duration::from_secs(20))
///     .worker_name("render-host-3");
/// # let _ = options;
/// ```
#[derive(Clone, Debug)]
pub struct LedgerOptions {
    pub(crate) lease: Duration,
    pub(crate) step: Duration,
    pub(crate) naming: Naming,
    pub(crate) name_wait: Duration,
    pub(crate) rescue_grace: Duration,
}

impl Default for LedgerOptions {
    fn default() -> Self {
        LedgerOptions {
            lease: DEFAULT_LEASE,
            step: DEFAULT_STEP_DEADLINE,
            naming: Naming::Fresh,
            name_wait: DEFAULT_NAME_WAIT,
            rescue_grace: DEFAULT_RESCUE_GRACE,
        }
    }
}

impl LedgerOptions {
    /// How long this worker's claims last without renewal (at least a
    /// second; [`crate::DEFAULT_LEASE`] by default): a dead worker's lines
    /// go to other workers after it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_secs(1));
        self
    }

    /// How long after the database server started a worker whose session
    /// is gone still keeps its lines and seats for its lease
    /// ([`DEFAULT_RESCUE_GRACE`] by default). A worker that died is known
    /// by its session's end, and its lines are taken at once; but a server
    /// that restarted ended every session, and the workers that live take
    /// their names back within seconds: until then, only leases count.
    ///
    /// ```
    /// let options = genapi_ledger::LedgerOptions::default()
    ///     .rescue_grace_after_restart(std::time::Duration::from_secs(60));
    /// # let _ = options;
    /// ```
    pub fn rescue_grace_after_restart(mut self, grace: Duration) -> Self {
        self.rescue_grace = grace;
        self
    }

    /// The longest one database step may take (a statement or a
    /// transaction, with the new connections it needs when the old one
    /// broke; at least a second; [`DEFAULT_STEP_DEADLINE`] by default). A
    /// step that passes it fails with [`crate::LedgerError::Unanswered`].
    pub fn step_deadline(mut self, deadline: Duration) -> Self {
        self.step = deadline.max(Duration::from_secs(1));
        self
    }

    /// Works as worker `name`: a worker started again under the same name
    /// takes back its lines at once, without waiting for their lease. Only
    /// one live process may have a name: [`crate::Ledger::open_with`] is
    /// refused ([`crate::LedgerError::WorkerTaken`]) while another still
    /// has it after the name wait ([`LedgerOptions::name_wait`]). Without a
    /// name, each process is a new worker.
    pub fn worker_name(mut self, name: impl Into<String>) -> Self {
        self.naming = Naming::Exactly(name.into());
        self
    }

    /// Works under a name made of this machine's name and the output folder
    /// `folder` (its own name and a digest of its path, as
    /// `render-3:shots-5f1c09a2`): a worker started again on the same machine for the same
    /// folder takes back its lines at once. Workers sharing a folder each
    /// get their own name (`#2`, `#3`… after the first), and a restarted one
    /// gets back the first name no live worker has: each name held is
    /// waited for up to the name wait ([`LedgerOptions::name_wait`]) before
    /// the next is tried.
    pub fn worker_for_folder(mut self, folder: &Path) -> Self {
        self.naming = Naming::FirstFree(format!("{}:{}", crate::naming::host_name(), folder_name(folder)));
        self
    }

    /// How long a worker waits for its name while another connection holds
    /// it ([`DEFAULT_NAME_WAIT`] by default; at most half the step
    /// deadline) before giving it up: a process that died a moment ago
    /// holds its name until the database ends its connections, and the
    /// same worker started again meanwhile takes it back once they end.
    pub fn name_wait(mut self, wait: Duration) -> Self {
        self.name_wait = wait;
        self
    }
}

/// A folder as a worker's name shows it: its own name and a digest of its
/// whole path (FNV-1a), so two folders of one name are two workers, and a
/// name shown in a status or a log does not spell out where the folder is.
fn folder_name(folder: &Path) -> String {
    let whole = std::fs::canonicalize(folder).unwrap_or_else(|_| folder.to_path_buf());
    let digest = whole
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
        });
    let own = whole
        .file_name()
        .map_or_else(|| "folder".into(), |name| name.to_string_lossy());
    format!("{own}-{:08x}", digest >> 32)
}

/// How long a worker's claims and seats last without renewal (renewed a
/// few times per lease while it lives).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);

/// How long after the database server started a worker whose session is
/// gone is still given its lease, unless told otherwise
/// ([`LedgerOptions::rescue_grace_after_restart`]).
pub const DEFAULT_RESCUE_GRACE: Duration = Duration::from_secs(30);

/// `lease` in seconds, as PostgreSQL takes an interval.
pub(crate) fn seconds(lease: Duration) -> f64 {
    lease.as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_is_named_by_its_own_name_and_a_digest_of_its_path() {
        let (a, b) = (Path::new("/srv/render/shots"), Path::new("/home/ana/shots"));
        let name = folder_name(a);
        assert!(name.starts_with("shots-") && !name.contains("render"), "{name}");
        assert_eq!(folder_name(a), name, "the same folder, the same name");
        assert_ne!(folder_name(b), name, "two folders of one name are two workers");
    }
}
