//! Sharing a seat pool: who else waits for a seat, and who gets one given
//! back.
//!
//! A worker keeps a seat its task gave back for its own next submission
//! ([`crate::SharedSeats`]'s spares): that spares the database a round trip
//! and every other worker a wake-up. Left at that, a busy worker keeps its
//! seats for as long as it has lines, and a worker that found the pool full
//! when it started waits until the others run out of lines, holding the
//! lines it claimed all that time (two workers of four sent nothing for the
//! first 26 s of a 28 s batch, and their lines ended it).
//!
//! So a worker that finds the pool full, while another holds at least two
//! seats more than it does, says so, in the statement that found it full
//! (which it runs at most about once a second while nothing is freed):
//! `NOTIFY` on [`CHANNEL`] with the pool, its name and how many seats it
//! holds ([`want`]). It says nothing when the holdings are even: each
//! notification costs a transaction of every connection listening. A worker
//! that heard, within [`FRESH`], another ask while holding at least two
//! seats fewer than itself gives a seat its task gave back to that worker,
//! the one holding fewest: it frees the seat and notifies that worker alone
//! ([`freed_for`]), so only it asks for the seat, instead of every waiting
//! worker asking and all but one finding the pool full. The workers'
//! holdings end within one of each other, and stay there.
//!
//! A worker of an older version neither asks nor gives way, and hears every
//! freed seat as its own: at worst it asks in vain. Seats of dead workers
//! (their lease lapsed) are not counted as another's holding: nobody would
//! give them.
//!
//! Asks are taken on trust: anyone who can connect to the ledger's database
//! can notify (as they can change its tables). A forged ask takes no room
//! from real ones of the pool, never makes a worker fail, and costs at most
//! the seats given to a worker that does not take them: each is free in the
//! database, and is taken by the next worker that looks again (at least
//! once a second while waiting).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// The channel a worker that found its pool full notifies ([`want`]).
pub(crate) const CHANNEL: &str = "genapi_seat_wants";

/// How long a worker heard asking is taken to be waiting still: a waiting
/// worker asks the database again at least every second.
pub(crate) const FRESH: Duration = Duration::from_secs(2);

/// At most this many askers are remembered (the payloads come from any
/// process that can reach the database).
const REMEMBERED: usize = 1024;

/// What a worker that found `pool` full notifies on [`CHANNEL`], holding
/// `held` seats: `[pool, worker, held]` as JSON (names may hold any
/// character).
pub(crate) fn want(pool: &str, worker: &str, held: usize) -> String {
    serde_json::json!([pool, worker, held]).to_string()
}

/// What a freed seat notifies on the seats' channel: the pool, for any
/// worker waiting (as every version says it); `[pool, worker]` as JSON,
/// for that worker alone.
pub(crate) fn freed_for(pool: &str, worker: Option<&str>) -> String {
    match worker {
        Some(worker) => serde_json::json!([pool, worker]).to_string(),
        None => pool.to_string(),
    }
}

/// One asker, as last heard.
#[derive(Debug, Clone, Copy)]
struct Asked {
    held: u64,
    at: Instant,
}

/// The workers of this worker's pool heard asking for a seat, and this
/// worker's own name, to tell the seats freed for it from those freed for
/// another. Asks of other pools are not kept, and nothing is kept before
/// the name is known.
#[derive(Debug, Default)]
pub(crate) struct Wants {
    /// By worker.
    askers: Mutex<HashMap<String, Asked>>,
    /// This worker's pool and name, once known.
    me: std::sync::OnceLock<(String, String)>,
}

impl Wants {
    /// This worker is `worker` in `pool`.
    pub(crate) fn known_as(&self, pool: &str, worker: &str) {
        let _ = self.me.set((pool.to_string(), worker.to_string()));
    }

    /// A worker asked: `payload` as [`want`] makes it. Any other payload,
    /// or an ask of another pool or of this worker, is ignored.
    pub(crate) fn heard(&self, payload: &str) {
        let Ok((pool, worker, held)) = serde_json::from_str::<(String, String, u64)>(payload) else {
            return;
        };
        let Some((my_pool, me)) = self.me.get() else { return };
        if pool != *my_pool || worker == *me {
            return;
        }
        // A poisoned lock still holds usable asks.
        let mut askers = self.askers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let now = Instant::now();
        if askers.len() >= REMEMBERED {
            askers.retain(|_, asked| now.duration_since(asked.at) < FRESH);
        }
        if askers.len() < REMEMBERED || askers.contains_key(&worker) {
            askers.insert(worker, Asked { held, at: now });
        }
    }

    /// Whether a freed seat's notification (see [`freed_for`]) may be this
    /// worker's to take: one freed for any worker, or for this one.
    pub(crate) fn is_for_me(&self, payload: &str) -> bool {
        match (serde_json::from_str::<(String, String)>(payload), self.me.get()) {
            (Ok((pool, worker)), Some((my_pool, me))) => pool != *my_pool || worker == *me,
            _ => true,
        }
    }

    /// The worker to give a seat to, if one asked within [`FRESH`] holding
    /// at least two seats fewer than `held`, this worker's holding: the one
    /// holding fewest (the first by name of those). It is counted as holding
    /// one more from now on.
    pub(crate) fn neediest(&self, held: usize) -> Option<String> {
        let held = u64::try_from(held).unwrap_or(u64::MAX);
        let now = Instant::now();
        let mut askers = self.askers.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        let (worker, asked) = askers
            .iter_mut()
            .filter(|(_, asked)| now.duration_since(asked.at) < FRESH && asked.held.saturating_add(1) < held)
            // Ties go by name, so every giver picks the same one.
            .min_by(|(a, a_asked), (b, b_asked)| a_asked.held.cmp(&b_asked.held).then_with(|| a.cmp(b)))?;
        asked.held = asked.held.saturating_add(1);
        Some(worker.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_seat_goes_to_the_asker_holding_fewest_while_two_fewer_and_fresh() {
        let wants = Wants::default();
        wants.heard(&want("team", "b", 0));
        assert_eq!(wants.neediest(10), None, "nothing kept before the name is known");
        wants.known_as("team", "a");
        wants.heard(&want("team", "b", 3));
        wants.heard(&want("team", "c", 1));
        wants.heard(&want("team", "a", 0));
        wants.heard(&want("other pool", "d", 0));
        assert_eq!(wants.neediest(3).as_deref(), Some("c"));
        // c now counts as holding 2: b and c are within one of each other.
        assert_eq!(wants.neediest(4).as_deref(), Some("c"));
        assert_eq!(wants.neediest(4), None, "b holds 3, c 3: neither two fewer than 4");
        assert_eq!(
            wants.neediest(5).as_deref(),
            Some("b"),
            "b and c hold 3: the first by name"
        );
        assert_eq!(wants.neediest(5).as_deref(), Some("c"));
        tokio::time::advance(FRESH).await;
        assert_eq!(wants.neediest(24), None, "asks heard too long ago");
    }

    #[test]
    fn forged_or_odd_asks_neither_panic_nor_count() {
        let wants = Wants::default();
        wants.known_as("team\nx", "a\nb");
        for payload in [
            "team\nx",
            "[\"team\\nx\", \"b\", -1]",
            "[\"team\\nx\", \"b\"]",
            "{}",
            "",
            "[1, 2, 3]",
        ] {
            wants.heard(payload);
        }
        assert_eq!(wants.neediest(usize::MAX), None);
        wants.heard(&want("team\nx", "b", u64::MAX as usize));
        assert_eq!(
            wants.neediest(usize::MAX),
            None,
            "no overflow: u64::MAX + 1 is not below anything"
        );
        wants.heard(&want("team\nx", "c\nd", 0));
        assert_eq!(wants.neediest(2).as_deref(), Some("c\nd"), "names with line feeds");
    }

    #[test]
    fn a_seat_freed_for_another_worker_of_this_pool_is_not_this_workers() {
        let wants = Wants::default();
        assert!(wants.is_for_me(&freed_for("team", Some("b"))), "name unknown yet: any");
        wants.known_as("team", "a");
        assert!(wants.is_for_me(&freed_for("team", None)));
        assert!(wants.is_for_me(&freed_for("team", Some("a"))));
        assert!(!wants.is_for_me(&freed_for("team", Some("b"))));
        assert!(wants.is_for_me(&freed_for("other pool", Some("b"))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_askers_is_bounded_and_other_pools_take_no_room() {
        let wants = Wants::default();
        wants.known_as("team", "me");
        for n in 0..(REMEMBERED * 3) {
            wants.heard(&want("other pool", &format!("worker-{n}"), 0));
        }
        wants.heard(&want("team", "real", 0));
        assert_eq!(wants.neediest(2).as_deref(), Some("real"));
        for n in 0..(REMEMBERED * 3) {
            wants.heard(&want("team", &format!("worker-{n}"), 5));
        }
        assert_eq!(wants.askers.lock().unwrap().len(), REMEMBERED);
        tokio::time::advance(FRESH).await;
        wants.heard(&want("team", "late", 0));
        assert_eq!(wants.askers.lock().unwrap().len(), 1);
        assert_eq!(wants.neediest(2).as_deref(), Some("late"));
    }
}
