//! A worker whose session ended is gone: the database knows it at once.
//!
//! Every worker holds its name as a session advisory lock
//! ([`crate::naming`]) on its ledger connection, and the database lets the
//! lock go the moment that session ends: the process died (a SIGKILL, a
//! crash, its machine rebooted while the server stayed up), or its
//! connection was cut. So a line (or a seat) whose worker's name no
//! session holds is taken at once, not after its lease.
//!
//! A server that started a moment ago ended every session: the workers
//! that live take their names back within seconds, so until
//! [`crate::DEFAULT_RESCUE_GRACE`] after its start (the session's
//! `genapi.rescue_grace`, set by [`crate::link`]) only leases count.
//!
//! The lease stays the fence. A worker whose connection was cut may still
//! live, and take its name back a moment later: whatever it claimed is
//! another's by then, and its intent, stored only while the claim is its
//! own and its lease live, is refused, so it sends nothing on a claim it
//! lost. What the database cannot see (a paused process, a cut network
//! whose session the server has not ended yet) waits for the lease, as
//! before.

/// SQL that is true when no session holds the worker name `$worker` took
/// in `$scope` (both SQL expressions of text): the key is the one
/// [`crate::naming`] locks, `scope`, a newline and the name, hashed with
/// the link's seed (the test below keeps the two in step).
macro_rules! name_free {
    ($scope:literal, $worker:literal) => {
        concat!(
            "(pg_postmaster_start_time() < now() - make_interval(secs => \
             coalesce(current_setting('genapi.rescue_grace', true), '30')::float8) \
             AND NOT EXISTS (SELECT 1 FROM pg_locks k WHERE k.locktype = 'advisory' AND k.granted \
             AND k.objsubid = 1 AND k.database = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             AND ((k.classid::bigint << 32) | k.objid::bigint) = hashtextextended(",
            $scope,
            " || E'\\n' || ",
            $worker,
            ", 7450482523331166210)))"
        )
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_grace_by_default_is_the_options_default() {
        let sql = name_free!("'s'", "w");
        let default = crate::DEFAULT_RESCUE_GRACE.as_secs().to_string();
        assert!(
            sql.contains(&format!("'genapi.rescue_grace', true), '{default}')")),
            "{sql}"
        );
    }

    #[test]
    fn the_name_checked_is_the_name_locked() {
        let sql = name_free!("'batch ' || $1", "l.worker");
        assert!(sql.contains(&crate::link::WORKER_LOCK_SEED.to_string()), "{sql}");
        assert!(
            sql.contains("hashtextextended('batch ' || $1 || E'\\n' || l.worker, "),
            "{sql}"
        );
    }
}
