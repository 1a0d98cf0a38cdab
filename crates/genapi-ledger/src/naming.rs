//! A worker's name: new for each process, or one a restarted worker takes
//! back, held by one live process at a time.

use std::time::Duration;

use crate::link::Link;
use crate::{LedgerError, LedgerOptions};

/// How long a worker waits for a name another connection holds before it
/// gives the name up, unless set otherwise
/// ([`crate::LedgerOptions::name_wait`]).
///
/// A process that dies leaves its connections to the database, which ends
/// each one (and frees the name it holds) when its server process next
/// runs: within moments on a server it can reach, later on a loaded one.
/// A worker started again at once would otherwise find its own name taken,
/// and work under another (or be refused), its earlier run's lines and
/// seats waiting for their lease. A live worker never lets go of its name,
/// so each name it holds costs a worker starting beside it this long.
pub const DEFAULT_NAME_WAIT: Duration = Duration::from_secs(5);

/// Names a worker may take, from the most wanted.
#[derive(Clone, Debug)]
pub(crate) enum Naming {
    /// A new name for every process: a restarted worker's lines wait for
    /// its lease.
    Fresh,
    /// This name, or nothing: refused while another live process has it.
    Exactly(String),
    /// The first of `base`, `base#2`, `base#3`… no live process has, so that
    /// workers sharing a base each get their own, and a restarted one gets
    /// back the name (and the lines) it had once its earlier run's
    /// connections end.
    FirstFree(String),
}

/// The most workers that share one base name.
const SHARERS: usize = 64;

impl Naming {
    /// Whether a restarted process may take this name back.
    pub(crate) fn lasting(&self) -> bool {
        !matches!(self, Naming::Fresh)
    }
}

/// The name this process works under in `scope` (a batch, a seat pool), as
/// `options` name it, held through `link` for as long as it lives. A name
/// another connection holds is waited for up to `options`' name wait
/// before the next is tried.
pub(crate) async fn take(link: &Link, scope: &str, options: &LedgerOptions) -> Result<String, LedgerError> {
    // A fresh name is held too: no other process has it, but the lock's
    // end is how the other workers know this one is gone (see
    // `crate::liveness`).
    let fresh = worker_name();
    let (names, shown) = match &options.naming {
        Naming::Fresh => (vec![fresh.clone()], &fresh),
        Naming::Exactly(name) => (vec![name.clone()], name),
        Naming::FirstFree(base) => (
            (1..=SHARERS)
                .map(|n| if n == 1 { base.clone() } else { format!("{base}#{n}") })
                .collect(),
            base,
        ),
    };
    let keyed: Vec<(String, String)> = names
        .into_iter()
        .map(|name| (format!("{scope}\n{name}"), name))
        .collect();
    link.take_name(&keyed, options.name_wait)
        .await?
        .ok_or_else(|| LedgerError::WorkerTaken { worker: shown.clone() })
}

/// A name for this process among the workers: host, process id and a
/// random part (a restarted process is a new worker).
pub(crate) fn worker_name() -> String {
    // 64 random bits: containers sharing a host name and a process id are
    // still told apart.
    format!("{}-{}-{:016x}", host_name(), std::process::id(), fastrand::u64(..))
}

/// This machine's name, as far as it can be known.
pub(crate) fn host_name() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| {
            name.trim()
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '.')
                .take(64)
                .collect()
        })
        .filter(|name: &String| !name.is_empty())
        .unwrap_or_else(|| "host".into())
}
