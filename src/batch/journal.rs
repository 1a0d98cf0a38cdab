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
        /// When it was sent (Unix seconds), to find the task in the service's
        /// records if the answer is lost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_at: Option<u64>,
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

    /// Stores several records durably, in order. A running batch hands over
    /// every record that arrived while the previous write was syncing, so a
    /// journal that can make them durable together (one sync) should: the
    /// sooner an accepted task is on disk, the less a crash can lose.
    fn append_all(&mut self, records: &[Record]) -> io::Result<()> {
        records.iter().try_for_each(|record| self.append(record))
    }
}

/// A journal in a file: one JSON object per line, appended, flushed and
/// synced to disk before `append` returns.
///
/// A line cut short by a crash (the last one) is ignored on replay; a damaged
/// line elsewhere is an error, since skipping it could lose an accepted task.
///
/// The file is locked while the journal is open: two runs over the same
/// journal would both submit the lines neither has recorded yet, paying twice
/// for each. The lock goes with the process, however it ends.
#[derive(Debug)]
pub struct FileJournal {
    path: PathBuf,
    file: File,
}

impl FileJournal {
    /// Opens (or creates) the journal at `path`, and locks it.
    ///
    /// Fails with [`io::ErrorKind::WouldBlock`] while another open journal
    /// (in this process or another) holds the file.
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
        match file.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(io::Error::new(
                    io::ErrorKind::WouldBlock,
                    format!(
                        "{} is in use by another run of this batch; wait for it to end (two runs would submit the \
                         same lines twice)",
                        path.display()
                    ),
                ))
            }
            // A file system without locks: go on, as a journal did before.
            Err(std::fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {
                tracing::warn!(path = %path.display(), "this file system cannot lock the journal; do not run the same batch twice at once");
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
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
        self.append_all(std::slice::from_ref(record))
    }

    fn append_all(&mut self, records: &[Record]) -> io::Result<()> {
        let mut text = String::new();
        for record in records {
            text.push_str(&serde_json::to_string(record).map_err(io::Error::other)?);
            text.push('\n');
        }
        // One write, so a crash tears at most the last record.
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

/// Records at most this many in one write.
const GROUP_LIMIT: usize = 1024;

/// A record waiting for its write, and who waits for it.
type Pending = (Record, tokio::sync::oneshot::Sender<io::Result<()>>);

/// The batch's way to its journal: a thread that writes records in groups.
///
/// Every record that arrives while a write is syncing goes into the next
/// write, and all of them share one sync. With many tasks answered at once,
/// an accepted task then waits for at most two syncs to be durable, not for
/// one sync per record queued before it: the moment in which a crash loses
/// an accepted task stays short.
pub(crate) struct Recorder {
    sender: std::sync::mpsc::Sender<Pending>,
}

impl Recorder {
    /// Starts the writer; it ends when the recorder is dropped.
    pub(crate) fn start<J: Journal>(mut journal: J) -> io::Result<Recorder> {
        let (sender, receiver) = std::sync::mpsc::channel::<Pending>();
        std::thread::Builder::new()
            .name("genapi-journal".into())
            .spawn(move || {
                while let Ok(first) = receiver.recv() {
                    let mut group = vec![first];
                    while group.len() < GROUP_LIMIT {
                        match receiver.try_recv() {
                            Ok(next) => group.push(next),
                            Err(_) => break,
                        }
                    }
                    let (records, waiting): (Vec<Record>, Vec<_>) = group.into_iter().unzip();
                    let result = journal.append_all(&records);
                    for waiter in waiting {
                        let _ = waiter.send(match &result {
                            Ok(()) => Ok(()),
                            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                        });
                    }
                }
            })?;
        Ok(Recorder { sender })
    }

    /// Stores a record; returns once it is durable.
    pub(crate) async fn record(&self, record: Record) -> io::Result<()> {
        let (done, written) = tokio::sync::oneshot::channel();
        let stopped = || io::Error::other("the journal writer stopped");
        self.sender.send((record, done)).map_err(|_| stopped())?;
        written.await.map_err(|_| stopped())?
    }
}

/// What the journal says about one line.
#[derive(Clone, Debug, Default)]
pub(crate) struct LineState {
    /// Fingerprint of the job when its first submission was recorded.
    pub(crate) digest: Option<String>,
    /// A submission was recorded and nothing came after it.
    pub(crate) unanswered: bool,
    /// When the last submission was sent (Unix seconds), if recorded.
    pub(crate) sent_at: Option<u64>,
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
            Record::Intent { digest, sent_at, .. } => {
                state.digest.get_or_insert(digest);
                state.unanswered = true;
                state.sent_at = sent_at;
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
                sent_at: Some(1),
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

    /// Holds its first write until told, and counts the records of each.
    struct GatedJournal {
        writes: Arc<Mutex<Vec<usize>>>,
        entered: std::sync::mpsc::Sender<()>,
        gate: std::sync::mpsc::Receiver<()>,
    }

    impl Journal for GatedJournal {
        fn replay(&mut self) -> io::Result<Vec<Record>> {
            Ok(Vec::new())
        }
        fn append(&mut self, record: &Record) -> io::Result<()> {
            self.append_all(std::slice::from_ref(record))
        }
        fn append_all(&mut self, records: &[Record]) -> io::Result<()> {
            let first = self.writes.lock().unwrap().is_empty();
            if first {
                self.entered.send(()).unwrap();
                self.gate.recv().unwrap();
            }
            self.writes.lock().unwrap().push(records.len());
            Ok(())
        }
    }

    #[test]
    fn records_that_arrive_during_a_write_share_the_next_one() {
        let writes = Arc::new(Mutex::new(Vec::new()));
        let (entered, inside) = std::sync::mpsc::channel();
        let (open, gate) = std::sync::mpsc::channel();
        let recorder = Recorder::start(GatedJournal {
            writes: writes.clone(),
            entered,
            gate,
        })
        .unwrap();
        let refused = |line| Record::Refused {
            line,
            error: "429".into(),
        };
        // Polled once, each future hands its record over and waits; dropping
        // it leaves the record queued.
        use futures::FutureExt;
        assert!(recorder.record(refused(1)).now_or_never().is_none());
        inside.recv().unwrap();
        for line in 2..=10 {
            assert!(recorder.record(refused(line)).now_or_never().is_none());
        }
        open.send(()).unwrap();
        let give_up = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while writes.lock().unwrap().len() < 2 && std::time::Instant::now() < give_up {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(
            *writes.lock().unwrap(),
            vec![1, 9],
            "one write for the nine that waited"
        );
    }

    #[test]
    fn a_journal_in_use_cannot_be_opened_again_until_it_is_closed() {
        let dir = std::env::temp_dir().join(format!("genapi-journal-lock-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("journal.jsonl");
        let first = FileJournal::open(&path).unwrap();
        let second = FileJournal::open(&path).unwrap_err();
        assert_eq!(second.kind(), io::ErrorKind::WouldBlock);
        assert!(second.to_string().contains("in use by another run"), "{second}");
        drop(first);
        assert!(FileJournal::open(&path).is_ok());
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
                sent_at: None,
            },
            Record::Refused {
                line: 2,
                error: "429".into(),
            },
            Record::Intent {
                line: 2,
                name: "b".into(),
                digest: "d".into(),
                sent_at: None,
            },
        ]);
        assert!(lines[&2].unanswered);
        let refused = fold(vec![
            Record::Intent {
                line: 3,
                name: "c".into(),
                digest: "d".into(),
                sent_at: None,
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
