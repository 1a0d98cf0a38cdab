//! Seat changes carried by the ledger's events.
//!
//! A worker that shares both a [`crate::Ledger`] and [`crate::SharedSeats`]
//! writes, for every line, three events (intent, acceptance, end), and, for
//! its seat, two changes: the seat is taken again for the submission (the
//! name of its last task goes), and the task the service accepted is written
//! on it. Each is a commit of its own when written apart, and the database
//! pays for every commit (a flush of its log to disk). (The end goes with a
//! later event too: see the module `ends`.)
//!
//! The seat changes come right before the events that follow them: a seat
//! is taken again just before the intent, and its task is known just before
//! the acceptance. So the seats note them here instead, and the ledger's
//! next event, whatever its line, writes them in the same statement: one
//! commit for both, and a seat taken again is in the database before the
//! submission leaves (the intent is stored before anything is sent).
//!
//! A note no event carried within [`CARRY_WAIT`] (a client submitting
//! outside the batch, a quiet moment) is written by the seats themselves,
//! and [`crate::SharedSeats::flush`] writes what is left. Notes are kept per
//! seat, the latest winning: the database needs only a seat's last state.
//! Each is written only while the seat is still this worker's, so a note
//! written late can never touch a seat another worker took meanwhile.

use std::collections::BTreeMap;
use std::time::Duration;

/// How long a note waits for an event to carry it.
pub(crate) const CARRY_WAIT: Duration = Duration::from_millis(250);

/// A statement's common table expression `seat_changes`, writing the notes
/// given as JSON in parameter `$param` (the text of [`Notes::json`]). It
/// changes nothing for `[]`.
macro_rules! seat_changes {
    ($param:literal) => {
        concat!(
            "seat_changes AS (
               UPDATE genapi_seats s SET task_id = c.task_id, polling_url = c.polling_url,
                      taken_at = CASE WHEN c.retake THEN now() ELSE s.taken_at END
               FROM jsonb_to_recordset(",
            $param,
            "::text::jsonb)
                    AS c(pool text, worker text, seat int, task_id text, polling_url text, retake bool)
               WHERE s.pool = c.pool AND s.seat = c.seat AND s.worker = c.worker)"
        )
    };
}
pub(crate) use seat_changes;

/// The last state of one seat, for the database.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Note {
    pool: String,
    worker: String,
    seat: i32,
    task_id: Option<String>,
    polling_url: Option<String>,
    /// Taken again for a new submission: its time starts now.
    retake: bool,
}

/// Notes waiting for an event, by seat.
#[derive(Debug, Default)]
pub(crate) struct Notes {
    /// Whether a ledger carries them; until then every change is written
    /// at once.
    pub(crate) carried: bool,
    waiting: BTreeMap<i32, Note>,
}

impl Notes {
    /// Notes that `seat` was taken again for a new submission. True when
    /// no note waited before (the caller arms the fallback write).
    pub(crate) fn retaken(&mut self, pool: &str, worker: &str, seat: i32) -> bool {
        self.put(Note {
            pool: pool.into(),
            worker: worker.into(),
            seat,
            task_id: None,
            polling_url: None,
            retake: true,
        })
    }

    /// Notes that `seat` now belongs to task `task_id`. True when no note
    /// waited before.
    pub(crate) fn assigned(&mut self, pool: &str, worker: &str, seat: i32, task_id: &str, polling_url: &str) -> bool {
        // Taken again and assigned before either was written: one write of
        // both.
        let retake = self.waiting.get(&seat).is_some_and(|earlier| earlier.retake);
        self.put(Note {
            pool: pool.into(),
            worker: worker.into(),
            seat,
            task_id: Some(task_id.into()),
            polling_url: Some(polling_url.into()),
            retake,
        })
    }

    fn put(&mut self, note: Note) -> bool {
        let first = self.waiting.is_empty();
        self.waiting.insert(note.seat, note);
        first
    }

    /// The seat was freed or taken afresh: what was noted of it is moot.
    pub(crate) fn forget(&mut self, seat: i32) {
        self.waiting.remove(&seat);
    }

    /// Every note, for one write.
    pub(crate) fn drain(&mut self) -> Vec<Note> {
        std::mem::take(&mut self.waiting).into_values().collect()
    }

    /// Notes whose write failed, back unless a newer note of their seat
    /// came meanwhile. True when none waited before.
    pub(crate) fn restore(&mut self, notes: Vec<Note>) -> bool {
        let first = self.waiting.is_empty();
        for note in notes {
            self.waiting.entry(note.seat).or_insert(note);
        }
        first && !self.waiting.is_empty()
    }

    /// `notes` as the JSON parameter of [`seat_changes`].
    pub(crate) fn json(notes: &[Note]) -> String {
        serde_json::to_string(notes).unwrap_or_else(|_| "[]".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seat_keeps_its_last_note_and_a_retake_survives_the_assignment() {
        let mut notes = Notes::default();
        assert!(notes.retaken("p", "w", 3));
        assert!(!notes.assigned("p", "w", 3, "t1", "https://x/t1"));
        assert!(!notes.assigned("p", "w", 4, "t2", "https://x/t2"));
        let drained = notes.drain();
        assert_eq!(drained.len(), 2);
        assert!(drained[0].retake && drained[0].task_id.as_deref() == Some("t1"));
        assert!(!drained[1].retake);
        assert!(notes.drain().is_empty());
    }

    #[test]
    fn a_failed_write_comes_back_behind_newer_notes() {
        let mut notes = Notes::default();
        notes.assigned("p", "w", 1, "old", "u");
        let failed = notes.drain();
        notes.assigned("p", "w", 1, "new", "u");
        assert!(!notes.restore(failed));
        assert_eq!(notes.drain()[0].task_id.as_deref(), Some("new"));
        assert!(!notes.restore(vec![]));
    }

    #[test]
    fn forgotten_seats_are_not_written() {
        let mut notes = Notes::default();
        notes.retaken("p", "w", 1);
        notes.forget(1);
        assert!(notes.drain().is_empty());
        assert_eq!(Notes::json(&[]), "[]");
    }
}
