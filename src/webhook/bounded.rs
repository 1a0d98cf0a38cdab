//! A map of string keys bounded by capacity and by age, for receivers that run
//! for months: the replay guard and the inbox both keep one.
//!
//! Entries are kept in arrival order beside the map, so dropping the expired
//! ones and evicting the oldest look only at the front: every call costs
//! O(log n), plus the entries it drops (each entry is dropped once, so that
//! work is shared among the calls that inserted them).
//!
//! Keys are what senders write (a notification's task id may be as long as
//! its body), so a long key is held as its digest: the memory a map holds is
//! bounded by its capacity, not by the senders.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Reads the monotonic clock; replaceable for tests.
pub(super) type Now = Arc<dyn Fn() -> Instant + Send + Sync>;

/// Keys longer than this are held as their digest.
const LONGEST_KEY_HELD: usize = 64;

/// How `key` is held: as itself when short, else as `sha256:` and its digest
/// in hex, longer than any key held as itself, so the two never meet.
fn held(key: &str) -> Cow<'_, str> {
    if key.len() <= LONGEST_KEY_HELD {
        Cow::Borrowed(key)
    } else {
        Cow::Owned(format!("sha256:{}", crate::record::sha256(key.as_bytes())))
    }
}

pub(super) struct Bounded<V> {
    entries: HashMap<String, Entry<V>>,
    /// Arrival number → key, oldest first; exactly one per entry.
    order: BTreeMap<u64, String>,
    next: u64,
    capacity: usize,
    max_age: Duration,
    /// Entries looked at while expiring or evicting (tests bound it).
    #[cfg(test)]
    visits: usize,
}

struct Entry<V> {
    arrival: u64,
    at: Instant,
    value: V,
}

impl<V> Bounded<V> {
    /// At most `capacity` entries (at least one), none older than `max_age`.
    pub(super) fn new(capacity: usize, max_age: Duration) -> Self {
        Bounded {
            entries: HashMap::new(),
            order: BTreeMap::new(),
            next: 0,
            capacity: capacity.max(1),
            max_age,
            #[cfg(test)]
            visits: 0,
        }
    }

    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    pub(super) fn max_age(&self) -> Duration {
        self.max_age
    }

    /// Drops the entries that reached `max_age` at `now`, oldest first.
    fn expire(&mut self, now: Instant) {
        while let Some(oldest) = self.order.first_entry() {
            #[cfg(test)]
            {
                self.visits += 1;
            }
            let fresh = self
                .entries
                .get(oldest.get())
                .is_some_and(|entry| now.saturating_duration_since(entry.at) < self.max_age);
            if fresh {
                break;
            }
            let key = oldest.remove();
            self.entries.remove(&key);
        }
    }

    /// The number of live entries at `now`.
    pub(super) fn len(&mut self, now: Instant) -> usize {
        self.expire(now);
        self.entries.len()
    }

    /// Whether `key` is held at `now`.
    pub(super) fn contains(&mut self, key: &str, now: Instant) -> bool {
        self.expire(now);
        self.entries.contains_key(held(key).as_ref())
    }

    /// Holds `value` under `key`. A key already held gets the new value and
    /// keeps its age; a new one evicts the oldest entry when full.
    pub(super) fn insert(&mut self, key: &str, value: V, now: Instant) {
        self.expire(now);
        let key = held(key);
        if let Some(entry) = self.entries.get_mut(key.as_ref()) {
            entry.value = value;
            return;
        }
        while self.entries.len() >= self.capacity {
            let Some((_, oldest)) = self.order.pop_first() else {
                break;
            };
            #[cfg(test)]
            {
                self.visits += 1;
            }
            self.entries.remove(&oldest);
        }
        let arrival = self.next;
        self.next += 1;
        self.order.insert(arrival, key.to_string());
        self.entries.insert(
            key.to_string(),
            Entry {
                arrival,
                at: now,
                value,
            },
        );
    }

    /// Takes the value under `key` out, if held at `now`.
    pub(super) fn remove(&mut self, key: &str, now: Instant) -> Option<V> {
        self.expire(now);
        let entry = self.entries.remove(held(key).as_ref())?;
        self.order.remove(&entry.arrival);
        Some(entry.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_looks_at_a_bounded_number_of_entries_however_many_are_held() {
        let start = Instant::now();
        let mut map = Bounded::new(20_000, Duration::from_secs(60));
        for i in 0..10_000 {
            map.insert(&format!("key-{i}"), (), start);
        }
        map.visits = 0;
        assert!(!map.contains("other", start + Duration::from_secs(1)));
        map.insert("other", (), start + Duration::from_secs(1));
        assert!(map.remove("key-5000", start).is_some());
        assert!(map.visits <= 3, "looked at {} entries of 10,000", map.visits);
        // Full: each new key evicts exactly the oldest.
        let mut full = Bounded::new(3, Duration::from_secs(60));
        for key in ["a", "b", "c", "d"] {
            full.insert(key, (), start);
        }
        full.visits = 0;
        full.insert("e", (), start);
        assert!(full.visits <= 2, "looked at {} entries", full.visits);
        assert!(!full.contains("b", start) && full.contains("c", start) && full.contains("e", start));
    }

    /// Keys are what senders write (a notification's task id may be as long
    /// as its body): a full map of keys of half a megabyte holds a few
    /// bytes of each, and still tells them apart.
    #[test]
    fn long_keys_are_held_in_bounded_memory_and_still_found() {
        let start = Instant::now();
        let mut map = Bounded::new(64, Duration::from_secs(60));
        let long = "x".repeat(512 * 1024);
        for n in 0..64 {
            map.insert(&format!("{long}{n}"), (), start);
        }
        let held: usize = map.entries.keys().chain(map.order.values()).map(String::len).sum();
        assert!(held <= 2 * 64 * 80, "{held} bytes of keys held for 64 entries");
        assert!(map.contains(&format!("{long}7"), start));
        assert!(!map.contains(&format!("{long}64"), start));
        assert_eq!(map.remove(&format!("{long}63"), start), Some(()));
        assert_eq!(map.len(start), 63);
    }

    #[test]
    fn entries_expire_with_age_and_removal_keeps_the_order_consistent() {
        let start = Instant::now();
        let mut map = Bounded::new(10, Duration::from_secs(60));
        map.insert("a", 1, start);
        map.insert("b", 2, start + Duration::from_secs(30));
        map.insert("a", 3, start + Duration::from_secs(40));
        assert_eq!(map.len(start + Duration::from_secs(59)), 2);
        assert_eq!(map.len(start + Duration::from_secs(60)), 1, "a keeps its first age");
        assert_eq!(map.remove("b", start + Duration::from_secs(61)), Some(2));
        assert_eq!((map.entries.len(), map.order.len()), (0, 0));
    }
}
