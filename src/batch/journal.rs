//! The durable record of a batch: what was sent, what the service accepted,
//! what finished.
//!
//! Every submission is recorded *before* it is sent ([`Record::Intent`]) and
//! its task *as soon as* the service answers ([`Record::Accepted`]), so a run
//! that stops at any moment leaves enough behind for the next one to poll
//! what was accepted instead of paying for it twice.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use super::outcome::FailureClass;

/// One event of a batch, as the journal keeps it (one JSON object per line,
/// tagged by `event`).
///
/// ```
/// use genapi::batch::Record;
/// let record = Record::Accepted {
///     line: 3,
///     id: "t-1".into(),
///     polling_url: "https://api.example.com/v1/get_result?id=t-1".into(),
///     cost: Some(4.5),
/// };
/// let text = serde_json::to_string(&record).unwrap();
/// assert!(text.starts_with(r#"{"event":"accepted","line":3"#));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Record {
    /// A submission is about to be sent. Until an `accepted` or `refused`
    /// record follows, its outcome is unknown: the service may have created
    /// (and charged) a task.
    Intent {
        /// Line of the job.
        line: u64,
        /// File stem of the job.
        name: String,
        /// Fingerprint of the job's path and body, to notice a changed job file.
        digest: String,
    },
    /// The service accepted the submission.
    Accepted {
        /// Line of the job.
        line: u64,
        /// Task id.
        id: String,
        /// The address to poll.
        polling_url: String,
        /// Cost reported at submission, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<f64>,
    },
    /// The submission was surely not accepted (nothing was created); it may
    /// be sent again.
    Refused {
        /// Line of the job.
        line: u64,
        /// Why.
        error: String,
    },
    /// The job reached an end: its file was saved, or its task ended in a
    /// final failure, or the service refused it for good.
    Finished {
        /// Line of the job.
        line: u64,
        /// `Ready`, or the final status or class of failure.
        status: String,
        /// The saved file, relative to the output directory.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        file: Option<String>,
        /// Seed reported by the service (a JSON number of any size).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        seed: Option<serde_json::Number>,
        /// Cost in credits.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        cost: Option<f64>,
        /// Duration of the task reported by the service, in seconds.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        duration: Option<f64>,
        /// What went wrong.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
        /// The class of failure.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<FailureClass>,
    },
}

impl Record {
    /// The job line the record is about.
    pub fn line(&self) -> u64 {
        match self {
            Record::Intent { line, .. }
            | Record::Accepted { line, .. }
            | Record::Refused { line, .. }
            | Record::Finished { line, .. } => *line,
        }
    }
}

/// Where a batch keeps its [`Record`]s.
///
/// `append` must not return before the record is durable: a batch relies on
/// an `Intent` being stored before the submission leaves, and on an
/// `Accepted` being stored before the task is reported.
///
/// ```
/// use genapi::batch::{Journal, MemoryJournal, Record};
/// let mut journal = MemoryJournal::default();
/// journal.append(&Record::Refused { line: 1, error: "429".into() }).unwrap();
/// assert_eq!(journal.replay().unwrap().len(), 1);
/// ```
pub trait Journal: Send + 'static {
    /// Every record stored so far, in order.
    fn replay(&mut self) -> io::Result<Vec<Record>>;
    /// Stores one record durably.
    fn append(&mut self, record: &Record) -> io::Result<()>;
}

/// A journal in a file: one JSON object per line, appended, flushed and
/// synced to disk before `append` returns.
///
/// A line cut short by a crash (the last one) is ignored on replay; a damaged
/// line elsewhere is an error, since skipping it could lose an accepted task.
#[derive(Debug)]
pub struct FileJournal {
    path: PathBuf,
    file: File,
}

impl FileJournal {
    /// Opens (or creates) the journal at `path`.
    ///
    /// ```no_run
    /// let journal = genapi::batch::FileJournal::open("out/journal.jsonl")?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> io::Result<FileJournal> {
        let path = path.as_ref().to_path_buf();
        let existed = path.exists();
        let mut file = OpenOptions::new().read(true).append(true).create(true).open(&path)?;
        if !existed {
            sync_directory(&path);
        }
        // A record cut short by a crash: end it, so the next one starts on its own line.
        let length = file.metadata()?.len();
        if length > 0 {
            let mut last = [0u8; 1];
            file.seek(SeekFrom::Start(length - 1))?;
            io::Read::read_exact(&mut file, &mut last)?;
            if last[0] != b'\n' {
                file.write_all(b"\n")?;
                file.sync_data()?;
            }
        }
        Ok(FileJournal { path, file })
    }

    /// Where the journal is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Makes a new file's directory entry durable too (where the platform
/// allows syncing a directory; elsewhere this does nothing).
fn sync_directory(path: &Path) {
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    if let Ok(directory) = File::open(parent) {
        let _ = directory.sync_all();
    }
}

impl Journal for FileJournal {
    fn replay(&mut self) -> io::Result<Vec<Record>> {
        let reader = BufReader::new(File::open(&self.path)?);
        let lines: Vec<String> = reader.lines().collect::<io::Result<_>>()?;
        let mut records = Vec::new();
        let count = lines.len();
        for (index, text) in lines.iter().enumerate() {
            if text.trim().is_empty() {
                continue;
            }
            match serde_json::from_str::<Record>(text) {
                Ok(record) => records.push(record),
                // A torn write: the record was never complete. Nothing after
                // it? Then it is the crash point. A torn line followed by
                // more (a crash, then a resumed run) is also a crash point.
                Err(_) if index + 1 == count || !text.ends_with('}') => {}
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} line {}: {e}", self.path.display(), index + 1),
                    ))
                }
            }
        }
        Ok(records)
    }

    fn append(&mut self, record: &Record) -> io::Result<()> {
        let mut text = serde_json::to_string(record).map_err(io::Error::other)?;
        text.push('\n');
        self.file.write_all(text.as_bytes())?;
        self.file.flush()?;
        self.file.sync_data()
    }
}

/// A journal in memory, for tests and for programs that keep records
/// elsewhere. Clones share the records.
#[derive(Clone, Debug, Default)]
pub struct MemoryJournal {
    records: Arc<Mutex<Vec<Record>>>,
}

impl MemoryJournal {
    /// The records so far.
    pub fn records(&self) -> Vec<Record> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Journal for MemoryJournal {
    fn replay(&mut self) -> io::Result<Vec<Record>> {
        Ok(self.records())
    }

    fn append(&mut self, record: &Record) -> io::Result<()> {
        self.records
            .lock()
            .map_err(|_| io::Error::other("journal lock poisoned"))?
            .push(record.clone());
        Ok(())
    }
}

/// What the journal says about one line.
#[derive(Clone, Debug, Default)]
pub(crate) struct LineState {
    /// Fingerprint of the job when its first submission was recorded.
    pub(crate) digest: Option<String>,
    /// A submission was recorded and nothing came after it.
    pub(crate) unanswered: bool,
    /// The accepted task: id, polling URL, cost at submission.
    pub(crate) accepted: Option<(String, String, Option<f64>)>,
    /// The end, when reached.
    pub(crate) finished: Option<Record>,
}

/// Folds records into one state per line.
pub(crate) fn fold(records: Vec<Record>) -> std::collections::HashMap<u64, LineState> {
    let mut lines: std::collections::HashMap<u64, LineState> = std::collections::HashMap::new();
    for record in records {
        let state = lines.entry(record.line()).or_default();
        match record {
            Record::Intent { digest, .. } => {
                state.digest.get_or_insert(digest);
                state.unanswered = true;
            }
            Record::Accepted {
                id, polling_url, cost, ..
            } => {
                state.unanswered = false;
                state.accepted = Some((id, polling_url, cost));
            }
            Record::Refused { .. } => state.unanswered = false,
            finished @ Record::Finished { .. } => {
                state.unanswered = false;
                state.finished = Some(finished);
            }
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_torn_last_line_is_ignored_and_the_next_record_starts_clean() {
        let dir = std::env::temp_dir().join(format!("genapi-journal-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("journal.jsonl");
        let _ = std::fs::remove_file(&path);
        let mut journal = FileJournal::open(&path).unwrap();
        journal
            .append(&Record::Intent {
                line: 1,
                name: "a".into(),
                digest: "d".into(),
            })
            .unwrap();
        drop(journal);
        let mut file = OpenOptions::new().append(true).open(&path).unwrap();
        file.write_all(br#"{"event":"accepted","line":1,"id":"t"#).unwrap();
        drop(file);
        let mut journal = FileJournal::open(&path).unwrap();
        assert_eq!(journal.replay().unwrap().len(), 1);
        journal
            .append(&Record::Refused {
                line: 1,
                error: "x".into(),
            })
            .unwrap();
        let records = journal.replay().unwrap();
        assert_eq!(records.len(), 2);
        let state = &fold(records)[&1];
        assert!(!state.unanswered && state.accepted.is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn finished_records_with_large_seeds_read_back() {
        let record = Record::Finished {
            line: 1,
            status: "Ready".into(),
            file: Some("a.jpg".into()),
            seed: serde_json::Number::from_i128(u64::MAX.into()),
            cost: Some(1.5),
            duration: None,
            error: None,
            class: None,
        };
        let text = serde_json::to_string(&record).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), record);
    }

    #[test]
    fn an_intent_without_an_answer_stays_unanswered() {
        let lines = fold(vec![
            Record::Intent {
                line: 2,
                name: "b".into(),
                digest: "d".into(),
            },
            Record::Refused {
                line: 2,
                error: "429".into(),
            },
            Record::Intent {
                line: 2,
                name: "b".into(),
                digest: "d".into(),
            },
        ]);
        assert!(lines[&2].unanswered);
        let refused = fold(vec![
            Record::Intent {
                line: 3,
                name: "c".into(),
                digest: "d".into(),
            },
            Record::Finished {
                line: 3,
                status: "Refused".into(),
                file: None,
                seed: None,
                cost: None,
                duration: None,
                error: Some("402".into()),
                class: Some(FailureClass::Credits),
            },
        ]);
        assert!(!refused[&3].unanswered, "a refusal is an answer");
    }
}
