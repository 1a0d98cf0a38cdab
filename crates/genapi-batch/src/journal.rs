//! The durable account of a batch: what was sent, what the service accepted,
//! what finished.
//!
//! Every submission is written *before* it is sent ([`Event::Intent`]) and
//! its task *as soon as* the service answers ([`Event::Accepted`]), so a run
//! that stops at any moment leaves enough behind for the next one to poll
//! what was accepted instead of paying for it twice.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use genapi::FailureClass;

/// One event of a batch, as the journal keeps it (one JSON object per line,
/// tagged by `event`).
///
/// ```
/// use genapi_batch::Event;
/// let event = Event::Accepted {
///     line: 3,
///     id: "t-1".into(),
///     polling_url: "https://api.example.com/v1/get_result?id=t-1".into(),
///     cost: Some(4.5),
///     adopted: false,
/// };
/// let text = serde_json::to_string(&event).unwrap();
/// assert!(text.starts_with(r#"{"event":"accepted","line":3"#));
/// ```
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
// Deliberately exhaustive: every store decides what each kind of event
// means for the line it names, so a new kind must reach every store at
// compile time rather than fall into a catch-all arm.
pub enum Event {
    /// A submission is about to be sent. Until an `accepted` or `refused`
    /// event follows, its outcome is unknown: the service may have created
    /// (and charged) a task.
    Intent {
        /// Line of the job.
        line: u64,
        /// File stem of the job.
        name: String,
        /// Fingerprint of the job's path and body, to notice a changed job file.
        digest: String,
        /// When it was sent (Unix seconds), to find the task in the service's
        /// events if the answer is lost.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sent_at: Option<u64>,
        /// Sent to a service that ends with the run that used it (a mock
        /// living in the same process, see [`crate::Batch::ephemeral_service`]):
        /// no later run can poll what it accepted.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        ephemeral: bool,
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
        /// The task was found by the user and given to the line
        /// ([`super::adopt`]), not submitted by the batch.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        adopted: bool,
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
        /// The cost in credits the service settled when the task ended (on
        /// its poll result), if it reported one: what the spending cap
        /// counts the line at, and prices its kind by. The cost an
        /// acceptance reports stays in [`Event::Accepted`].
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
    /// An event of this line that cannot be read (found when the journal is read, never
    /// written). It may have been an accepted task, so the line is treated
    /// as one whose submission went unanswered: never sent again on its own.
    Damaged {
        /// Line of the job.
        line: u64,
    },
}

impl Event {
    /// The job line the event is about.
    pub fn line(&self) -> u64 {
        match self {
            Event::Damaged { line }
            | Event::Intent { line, .. }
            | Event::Accepted { line, .. }
            | Event::Refused { line, .. }
            | Event::Finished { line, .. } => *line,
        }
    }
}

/// Where a batch keeps its [`Event`]s.
///
/// `append` must not return before the event is durable: a batch relies on
/// an `Intent` being stored before the submission leaves, and on an
/// `Accepted` being stored before the task is reported.
///
/// ```
/// use genapi_batch::{Journal, MemoryJournal, Event};
/// let mut journal = MemoryJournal::default();
/// journal.append(&Event::Refused { line: 1, error: "429".into() }).unwrap();
/// assert_eq!(journal.events().unwrap().len(), 1);
/// ```
pub trait Journal: Send + 'static {
    /// Every event stored so far, in order.
    fn events(&mut self) -> io::Result<Vec<Event>>;
    /// Stores one event durably.
    fn append(&mut self, event: &Event) -> io::Result<()>;

    /// Stores several events durably, in order. A running batch hands over
    /// every event that arrived while the previous write was syncing, so a
    /// journal that can make them durable together (one sync) should: the
    /// sooner an accepted task is on disk, the less a crash can lose.
    fn append_all(&mut self, events: &[Event]) -> io::Result<()> {
        events.iter().try_for_each(|event| self.append(event))
    }

    /// Takes the journal for one run, as a store opens it: a second run
    /// over the same journal while this one lives would submit the lines
    /// neither has written yet, paying twice, so it is refused
    /// ([`io::ErrorKind::WouldBlock`]). Given back when the journal is
    /// dropped. A file journal is taken when it is opened (its lock); the
    /// default takes nothing, for a journal one run alone can reach.
    fn take_for_a_run(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A journal in a file: one JSON object per line, appended, flushed and
/// synced to disk before `append` returns.
///
/// A line cut short by a crash (the last one) is ignored when read; a damaged
/// line elsewhere is an error, since skipping it could lose an accepted task.
///
/// Its first line is a header that marks it as a batch's journal. A file that
/// is not one (see [`FileJournal::open`]) is refused and left as it was.
///
/// The file and its directory are locked while the journal is open: two runs
/// over the same journal would both submit the lines neither has written
/// yet, paying twice for each (so one open journal per directory). The locks
/// go with the process, however it ends, and a batch gives them back when its
/// stream ends.
#[derive(Debug)]
pub struct FileJournal {
    path: PathBuf,
    file: File,
    /// The directory, locked too (where the platform can open one).
    _directory: Option<File>,
    /// Which file the path named when it was locked (device, inode).
    identity: Option<(u64, u64)>,
    /// Set once a failed write could not be undone: nothing more is written.
    broken: Option<String>,
}

/// The first line of every journal this crate writes.
///
/// Opening a journal changes it (a torn last line is cut off, events are
/// appended), so a file is first recognised as a batch's journal, and any
/// other file named like one is refused untouched. A file is a journal when:
///
/// - its first line is this header (written with the first event): this
///   version made it;
/// - its first line is a whole event: an earlier version made it. Those
///   wrote no header, but always began the file with one whole event, so
///   the check is no weaker for them: a file of someone else's would need a
///   line that is exactly one of the batch's events;
/// - it is empty: earlier versions created the file before writing
///   anything, and an empty file holds nothing to lose.
///
/// A header torn by a crash fails the check, but nothing was written (nor
/// sent) before it was whole: moving the file away, as the error says, loses
/// nothing.
const HEADER: &str = r#"{"journal":"genapi batch","format":1}"#;

/// How much of a file is read to find its first line.
const FIRST_LINE_LIMIT: u64 = 1 << 20;

/// The journal at `path`: created only where nothing has the name (a link
/// included), else the file that is there, which must then be a journal:
/// never through a link (it could name any file, or a device that never
/// ends), and only a regular file.
fn create_or_open_existing(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).append(true);
    // Its owner's alone: it keeps each task's polling address whole, which
    // a later run needs and which may carry a token the user gave.
    match genapi_files::owner_only(options.clone().create_new(true)).open(path) {
        Ok(file) => {
            sync_directory(path);
            Ok(file)
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Err(io::Error::new(
            e.kind(),
            format!("{}: {e} (its directory must exist)", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => open_existing(options, path),
        Err(e) => Err(e),
    }
}

fn open_existing(mut existing: OpenOptions, path: &Path) -> io::Result<File> {
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut existing, libc::O_NOFOLLOW | libc::O_NONBLOCK);
    let refuse = |what: &str| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} is {what}, not a journal of this batch; it was left as it is: move it away, or choose another \
                 output directory",
                path.display()
            ),
        )
    };
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(refuse("a link"));
    }
    let file = existing.open(path)?;
    // A pipe, a socket or a directory is never a journal. (A character
    // device is let through: /dev/full is how a full disk is tried out.)
    let kind = file.metadata()?.file_type();
    #[cfg(unix)]
    let device = std::os::unix::fs::FileTypeExt::is_char_device(&kind);
    #[cfg(not(unix))]
    let device = false;
    if !kind.is_file() && !device {
        return Err(refuse("not a regular file"));
    }
    Ok(file)
}

/// How long a lock held elsewhere is tried again before the run is refused:
/// a child process this program starts holds a copy of every open file from
/// its start until it runs its own program, so a run that has just ended
/// may still be seen holding its journal for that instant.
const LOCK_RETRIES: u32 = 25;
const LOCK_RETRY_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

/// Locks `held` (the journal, or its directory) for this run: a second run
/// of the batch is refused while this one lives.
fn lock_for_this_run(held: &File, path: &Path) -> io::Result<()> {
    let mut attempt = 0;
    let tried = loop {
        match held.try_lock() {
            Err(std::fs::TryLockError::WouldBlock) if attempt < LOCK_RETRIES => {
                attempt += 1;
                std::thread::sleep(LOCK_RETRY_EVERY);
            }
            tried => break tried,
        }
    };
    match tried {
        Ok(()) => Ok(()),
        Err(std::fs::TryLockError::WouldBlock) => Err(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "{} is in use by another run of this batch; wait for it to end (two runs would submit the same \
                 lines twice)",
                path.display()
            ),
        )),
        // A file system without locks: go on, as a journal did before.
        Err(std::fs::TryLockError::Error(e)) if e.kind() == io::ErrorKind::Unsupported => {
            tracing::warn!(path = %path.display(), "this file system cannot lock the journal; do not run the same batch twice at once");
            Ok(())
        }
        Err(std::fs::TryLockError::Error(e)) => Err(e),
    }
}

/// A last line without its newline, at opening. A whole event (an editor's
/// save) is kept and ended. An event cut short that could only have come
/// after what its line already records (a refusal, an end) is cut off, so
/// the next event starts on a line of its own: its line reads as it did
/// before it, unanswered or running, which is never sent again unasked.
/// Anything else (an acceptance, an intent, a line whose kind cannot be
/// read) may be the only sign that a task was made, or a damaged record
/// whose newline an editor dropped: it is kept, ended with a newline, and
/// read as its line's damaged record ([`Event::Damaged`]), never as nothing.
fn cut_a_torn_tail(file: &mut File) -> io::Result<()> {
    let whole = complete_length(file)?;
    let length = file.metadata()?.len();
    if whole < length {
        let mut tail = Vec::new();
        file.seek(SeekFrom::Start(whole))?;
        io::Read::read_to_end(file, &mut tail)?;
        let after_what_is_recorded = [&br#"{"event":"refused","#[..], br#"{"event":"finished","#]
            .iter()
            .any(|kind| tail.starts_with(kind));
        if after_what_is_recorded && serde_json::from_slice::<Event>(&tail).is_err() {
            file.set_len(whole)?;
        } else {
            file.seek(SeekFrom::End(0))?;
            file.write_all(b"\n")?;
        }
        file.sync_data()?;
    }
    Ok(())
}

/// Fails, with what to do, unless the file is a batch's journal (see
/// [`HEADER`]). Reads only; changes nothing.
fn recognise(file: &mut File, path: &Path) -> io::Result<()> {
    let length = file.metadata()?.len();
    if length == 0 {
        return Ok(());
    }
    file.seek(SeekFrom::Start(0))?;
    let mut first = Vec::new();
    BufReader::new(io::Read::take(&mut *file, length.min(FIRST_LINE_LIMIT))).read_until(b'\n', &mut first)?;
    let first = first.strip_suffix(b"\n").unwrap_or(&first);
    if first == HEADER.as_bytes() || serde_json::from_slice::<Event>(first).is_ok() {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} is not a journal of a batch (its first line is neither the journal's header nor one of its records), \
             so it was left as it is; move it elsewhere, or choose another output directory",
            path.display()
        ),
    ))
}

/// The length of the file up to its last complete event (its last newline).
fn complete_length(file: &mut File) -> io::Result<u64> {
    let length = file.metadata()?.len();
    let mut end = length;
    let mut chunk = vec![0u8; 4096];
    while end > 0 {
        let start = end.saturating_sub(chunk.len() as u64);
        let size = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        io::Read::read_exact(file, &mut chunk[..size])?;
        if let Some(newline) = chunk[..size].iter().rposition(|b| *b == b'\n') {
            return Ok(start + newline as u64 + 1);
        }
        end = start;
    }
    Ok(0)
}

/// The line number a damaged event names (`"line":N`), if it can be read
/// whole: its digits end where the field does (at `,` or `}`). Digits run
/// into by the damage (`"line":1r,`) may be another line's number cut
/// short: the journal is then refused as a whole.
fn damaged_line(text: &str) -> Option<u64> {
    let after = &text[text.find("\"line\":")? + 7..];
    let after = after.trim_start();
    let digits: String = after.chars().take_while(char::is_ascii_digit).collect();
    let rest = after[digits.len()..].trim_start();
    (rest.starts_with(',') || rest.starts_with('}')).then(|| digits.parse().ok())?
}

/// The file's device and inode, to notice the path naming another file.
#[cfg(unix)]
fn identity(metadata: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((metadata.dev(), metadata.ino()))
}

#[cfg(not(unix))]
fn identity(_metadata: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

impl FileJournal {
    /// Opens (or creates) the journal at `path`, and locks it.
    ///
    /// Fails with [`io::ErrorKind::WouldBlock`] while another open journal
    /// (in this process or another) holds the file, and with
    /// [`io::ErrorKind::InvalidData`] when the file is not a batch's journal
    /// (it is then left exactly as it was). A new journal is never created
    /// through a link, and never in a directory that does not exist yet
    /// (make it first: the error then names the path).
    ///
    /// A closed journal is free at once, with one exception on Unix: a child
    /// process this program starts while the journal is open holds a copy of
    /// the locked file until it has started its own program, which can keep
    /// the lock a moment past the close.
    ///
    /// ```no_run
    /// std::fs::create_dir_all("out")?;
    /// let journal = genapi_batch::FileJournal::open("out/journal.jsonl")?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>) -> io::Result<FileJournal> {
        // Absolute, so a later change of directory does not make it name
        // another file.
        let path = std::path::absolute(path.as_ref())?;
        let mut file = create_or_open_existing(&path)?;
        // The journal and its directory: deleting the journal while a run
        // uses it must not let a second run in.
        let directory = File::open(parent_of(&path)).ok();
        for held in std::iter::once(&file).chain(directory.as_ref()) {
            lock_for_this_run(held, &path)?;
        }
        recognise(&mut file, &path)?;
        // One an older version left readable by others becomes a private
        // copy under its name (the directory's lock keeps other runs out
        // meanwhile); whoever opened the old one reads nothing new.
        let mut file = genapi_files::made_owner_only(&path, file)?;
        lock_for_this_run(&file, &path)?;
        cut_a_torn_tail(&mut file)?;
        let identity = identity(&file.metadata()?);
        Ok(FileJournal {
            path,
            file,
            _directory: directory,
            identity,
            broken: None,
        })
    }

    /// The events of the journal at `path`, read without opening it as a
    /// run does: nothing is created, locked or changed, so it can be read
    /// while a run uses it (to show where a batch stands). Fails with
    /// [`io::ErrorKind::NotFound`] when there is no journal, and with
    /// [`io::ErrorKind::InvalidData`] when the file is not a batch's journal.
    pub fn read(path: impl AsRef<Path>) -> io::Result<Vec<Event>> {
        let path = path.as_ref();
        if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is a link, not a journal of a batch", path.display()),
            ));
        }
        let mut options = OpenOptions::new();
        options.read(true);
        // Never blocks on a pipe put in the journal's place.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::custom_flags(&mut options, libc::O_NOFOLLOW | libc::O_NONBLOCK);
        let mut file = options.open(path)?;
        if !file.metadata()?.is_file() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not a regular file, not a journal of a batch", path.display()),
            ));
        }
        recognise(&mut file, path)?;
        file.seek(SeekFrom::Start(0))?;
        records_of(file, path)
    }

    /// Where the journal is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Fails when the path no longer names the locked file (deleted, moved
    /// or replaced while in use): events written there would be lost to
    /// the next run, which could then pay again for what this one sent.
    fn still_ours(&self) -> io::Result<()> {
        let Some(identity) = self.identity else {
            return Ok(());
        };
        let now = std::fs::metadata(&self.path).ok().and_then(|m| self::identity(&m));
        if now == Some(identity) {
            Ok(())
        } else {
            Err(io::Error::other(format!(
                "{} was deleted or replaced while this run used it; nothing more is sent (run the batch again)",
                self.path.display()
            )))
        }
    }
}

/// The events of a journal's text, as a run reads them.
fn records_of(file: File, path: &Path) -> io::Result<Vec<Event>> {
    let mut whole = String::new();
    io::Read::read_to_string(&mut BufReader::new(file), &mut whole)?;
    // A line that ends with its newline was written whole, whatever it
    // holds; only a last line without one can be an event being written.
    let torn_tail = !whole.is_empty() && !whole.ends_with('\n');
    let lines: Vec<&str> = whole.lines().collect();
    let mut records = Vec::new();
    let count = lines.len();
    for (index, text) in lines.iter().copied().enumerate() {
        if text.trim().is_empty() || (index == 0 && text == HEADER) {
            continue;
        }
        match serde_json::from_str::<Event>(text) {
            Ok(record) => records.push(record),
            // A torn last event was never acknowledged (opening cuts
            // one off; this is a journal read while another run writes).
            Err(_) if index + 1 == count && torn_tail => {}
            // Elsewhere (an older version kept torn events, or the file
            // was damaged) it may have held an accepted task: its line is
            // treated as unanswered, never as free to submit.
            Err(e) => match damaged_line(text) {
                Some(line) => records.push(Event::Damaged { line }),
                None => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("{} line {}: {e}", path.display(), index + 1),
                    ))
                }
            },
        }
    }
    Ok(records)
}

/// Makes a new file's directory entry durable too (where the platform
/// allows syncing a directory; elsewhere this does nothing).
fn sync_directory(path: &Path) {
    if let Ok(directory) = File::open(parent_of(path)) {
        let _ = directory.sync_all();
    }
}

/// The directory a file is in.
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

impl Journal for FileJournal {
    fn events(&mut self) -> io::Result<Vec<Event>> {
        // Through the locked handle, not the path: it is the file this run owns.
        let mut handle = self.file.try_clone()?;
        handle.seek(SeekFrom::Start(0))?;
        records_of(handle, &self.path)
    }

    fn append(&mut self, record: &Event) -> io::Result<()> {
        self.append_all(std::slice::from_ref(record))
    }

    fn append_all(&mut self, records: &[Event]) -> io::Result<()> {
        if let Some(why) = &self.broken {
            return Err(io::Error::other(why.clone()));
        }
        self.still_ours()?;
        let before = self.file.metadata()?.len();
        let mut text = String::new();
        if before == 0 {
            text.push_str(HEADER);
            text.push('\n');
        }
        for record in records {
            text.push_str(&serde_json::to_string(record).map_err(io::Error::other)?);
            text.push('\n');
        }
        // One write, so a crash tears at most the last event.
        let written = self
            .file
            .write_all(text.as_bytes())
            .and_then(|()| self.file.flush())
            .and_then(|()| self.file.sync_data());
        if let Err(e) = written {
            // A write cut short (a full disk) must not stay in front of the
            // next event: take it back, or write nothing more.
            if let Err(undo) = self.file.set_len(before).and_then(|()| self.file.sync_data()) {
                self.broken = Some(format!(
                    "{}: a failed write could not be undone ({undo}); nothing more is recorded",
                    self.path.display()
                ));
            }
            return Err(e);
        }
        Ok(())
    }
}

/// A journal in memory, for tests and for programs that keep events
/// elsewhere. Clones share the events, and one run at a time may take them
/// ([`Journal::take_for_a_run`]), as with a file journal.
#[derive(Debug, Default)]
pub struct MemoryJournal {
    records: Arc<Mutex<Vec<Event>>>,
    /// Whether a run holds the events now.
    in_use: Arc<std::sync::atomic::AtomicBool>,
    /// This clone is the one a run took (it gives the events back when
    /// dropped).
    taken: bool,
}

impl Clone for MemoryJournal {
    /// Another handle on the same events, not taken by any run.
    fn clone(&self) -> MemoryJournal {
        MemoryJournal {
            records: self.records.clone(),
            in_use: self.in_use.clone(),
            taken: false,
        }
    }
}

impl Drop for MemoryJournal {
    fn drop(&mut self) {
        if self.taken {
            self.in_use.store(false, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// A journal holding `events` already, e.g. a file journal's as
/// [`FileJournal::read`] gives them, to see where its batch stands without
/// taking the file:
///
/// ```
/// use genapi_batch::{Event, JournalStore, MemoryJournal, ReadStore, Standing};
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let events = vec![
///     Event::Accepted { line: 2, id: "t-2".into(), polling_url: "https://api.example.com/v1/get_result?id=t-2".into(), cost: None, adopted: false },
///     Event::Refused { line: 3, error: "429".into() },
/// ];
/// let store = JournalStore::open(MemoryJournal::from(events)).unwrap();
/// let lines = store.status(&[1, 2, 3]).await.unwrap().lines;
/// assert_eq!(lines[&2], Standing::Accepted);
/// assert_eq!(lines[&3], Standing::Unsent);
/// assert!(!lines.contains_key(&1), "a line without events is sent");
/// # });
/// ```
impl From<Vec<Event>> for MemoryJournal {
    fn from(events: Vec<Event>) -> MemoryJournal {
        MemoryJournal {
            records: Arc::new(Mutex::new(events)),
            in_use: Arc::default(),
            taken: false,
        }
    }
}

impl MemoryJournal {
    /// The events so far.
    pub fn events_so_far(&self) -> Vec<Event> {
        self.records.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl Journal for MemoryJournal {
    fn events(&mut self) -> io::Result<Vec<Event>> {
        Ok(self.events_so_far())
    }

    fn append(&mut self, record: &Event) -> io::Result<()> {
        self.records
            .lock()
            .map_err(|_| io::Error::other("journal lock poisoned"))?
            .push(record.clone());
        Ok(())
    }

    fn take_for_a_run(&mut self) -> io::Result<()> {
        use std::sync::atomic::Ordering;
        if self.taken {
            return Ok(());
        }
        if self.in_use.swap(true, Ordering::SeqCst) {
            return Err(io::Error::new(
                io::ErrorKind::WouldBlock,
                "the journal is in use by another run of this batch; wait for it to end (two runs would submit the \
                 same lines twice)",
            ));
        }
        self.taken = true;
        Ok(())
    }
}

/// Events at most this many in one write.
const GROUP_LIMIT: usize = 1024;

/// An event waiting for its write, and who waits for it.
type Pending = (Event, tokio::sync::oneshot::Sender<io::Result<()>>);

/// The batch's way to its journal: a thread that writes events in groups.
///
/// Every event that arrives while a write is syncing goes into the next
/// write, and all of them share one sync. With many tasks answered at once,
/// an accepted task then waits for at most two syncs to be durable, not for
/// one sync per event queued before it: the moment in which a crash loses
/// an accepted task stays short.
pub(crate) struct Writer {
    sender: Option<std::sync::mpsc::Sender<Pending>>,
    writer: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Writer {
    /// Closes the journal before returning (a file journal's lock with it),
    /// after the write under way, so the caller can open it again at once.
    fn drop(&mut self) {
        drop(self.sender.take());
        if let Some(writer) = self.writer.take() {
            let _ = writer.join();
        }
    }
}

impl Writer {
    /// Starts the writer; it ends when it is dropped.
    pub(crate) fn start<J: Journal>(mut journal: J) -> io::Result<Writer> {
        let (sender, receiver) = std::sync::mpsc::channel::<Pending>();
        let writer = std::thread::Builder::new()
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
                    let (records, waiting): (Vec<Event>, Vec<_>) = group.into_iter().unzip();
                    let result = journal.append_all(&records);
                    for waiter in waiting {
                        let _ = waiter.send(match &result {
                            Ok(()) => Ok(()),
                            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
                        });
                    }
                }
            })?;
        Ok(Writer {
            sender: Some(sender),
            writer: Some(writer),
        })
    }

    /// Stores an event; returns once it is durable.
    pub(crate) async fn write(&self, record: Event) -> io::Result<()> {
        let (done, written) = tokio::sync::oneshot::channel();
        let stopped = || io::Error::other("the journal writer stopped");
        self.sender
            .as_ref()
            .ok_or_else(stopped)?
            .send((record, done))
            .map_err(|_| stopped())?;
        written.await.map_err(|_| stopped())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::line::Line;

    /// A journal an older version left readable by others (it keeps
    /// polling addresses whole, tokens among them) is its owner's alone
    /// once a run opens it.
    #[cfg(unix)]
    #[test]
    fn a_journal_others_could_read_is_made_its_owners_alone() {
        use std::io::Read as _;
        use std::os::unix::fs::PermissionsExt as _;
        let dir = scratch("loose-mode");
        let path = dir.join("journal.jsonl");
        let _ = std::fs::remove_file(&path);
        drop(FileJournal::open(&path).unwrap());
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let held_by_another = std::fs::File::open(&path).unwrap();
        let mut journal = FileJournal::open(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        journal
            .append(&Event::Refused {
                line: 1,
                error: "x".into(),
            })
            .unwrap();
        assert_eq!(journal.events().unwrap().len(), 1, "the copy is the journal");
        let mut seen = String::new();
        (&held_by_another).read_to_string(&mut seen).unwrap();
        assert!(
            !seen.contains("refused"),
            "what was opened before reads nothing new: {seen}"
        );
    }

    /// A last line cut short is cut off only when it could come only after
    /// what its line records already (a refusal, an end); an acceptance cut
    /// short (a crash as it was written, or a damaged record whose newline
    /// an editor dropped) is the sign a task was made: kept, and read as
    /// its line's damage. Either way the next record starts clean.
    #[test]
    fn a_torn_last_line_is_cut_off_only_when_it_cannot_be_an_acceptance() {
        let dir = scratch("torn-last");
        let path = dir.join("journal.jsonl");
        let opened_after = |torn: &[u8]| {
            let _ = std::fs::remove_file(&path);
            let mut journal = FileJournal::open(&path).unwrap();
            journal
                .append(&Event::Intent {
                    line: 1,
                    name: "a".into(),
                    digest: "d".into(),
                    sent_at: Some(1),
                    ephemeral: false,
                })
                .unwrap();
            drop(journal);
            let mut file = OpenOptions::new().append(true).open(&path).unwrap();
            file.write_all(torn).unwrap();
            drop(file);
            let mut journal = FileJournal::open(&path).unwrap();
            journal
                .append(&Event::Refused {
                    line: 2,
                    error: "x".into(),
                })
                .unwrap();
            journal.events()
        };
        let records = opened_after(br#"{"event":"accepted","line":1,"id":"t"#).unwrap();
        assert_eq!(records[1], Event::Damaged { line: 1 }, "{records:?}");
        assert_eq!(records.len(), 3, "the next record on a line of its own: {records:?}");
        assert!(Line::of_each(records.clone())[&1]
            .sent()
            .is_some_and(|sent| sent.damaged));
        // Its kind and line unreadable: kept too, so the journal is refused
        // as any record naming no line is, with the line to look at.
        let error = opened_after(br#"{"event":"acc"#).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(error.to_string().contains("line 3"), "{error}");
        // A refusal or an end cut short: cut off, line 1 as it stood.
        for torn in [
            &br#"{"event":"refused","line":1,"err"#[..],
            br#"{"event":"finished","line":1"#,
        ] {
            let records = opened_after(torn).unwrap();
            assert_eq!(records.len(), 2, "{records:?}");
            let state = &Line::of_each(records)[&1];
            assert!(matches!(state, Line::Unanswered { .. }), "{state:?}");
        }
    }

    /// Holds its first write until told, and counts the events of each.
    struct GatedJournal {
        writes: Arc<Mutex<Vec<usize>>>,
        entered: std::sync::mpsc::Sender<()>,
        gate: std::sync::mpsc::Receiver<()>,
    }

    impl Journal for GatedJournal {
        fn events(&mut self) -> io::Result<Vec<Event>> {
            Ok(Vec::new())
        }
        fn append(&mut self, record: &Event) -> io::Result<()> {
            self.append_all(std::slice::from_ref(record))
        }
        fn append_all(&mut self, records: &[Event]) -> io::Result<()> {
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
        let writer = Writer::start(GatedJournal {
            writes: writes.clone(),
            entered,
            gate,
        })
        .unwrap();
        let refused = |line| Event::Refused {
            line,
            error: "429".into(),
        };
        // Polled once, each future hands its event over and waits; dropping
        // it leaves the event queued.
        use futures::FutureExt;
        assert!(writer.write(refused(1)).now_or_never().is_none());
        inside.recv().unwrap();
        for line in 2..=10 {
            assert!(writer.write(refused(line)).now_or_never().is_none());
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

    /// The service refused the line for want of credits.
    fn credits_refusal(line: u64) -> Event {
        Event::Finished {
            line,
            status: "Refused".into(),
            file: None,
            seed: None,
            cost: None,
            duration: None,
            error: Some("402".into()),
            class: Some(FailureClass::Credits),
        }
    }

    /// A fresh folder of this test process, removed when dropped, even by
    /// a failing assertion.
    struct Scratch(PathBuf);

    impl std::ops::Deref for Scratch {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn scratch(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("genapi-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// A damaged record whose line number the damage ran into may be any
    /// line's: the journal is refused as a whole, never read as the line
    /// the digits before the damage name.
    #[test]
    fn a_damaged_line_number_refuses_the_journal() {
        let dir = scratch("damaged-number");
        let path = dir.join("journal.jsonl");
        let whole = "{\"event\":\"refused\",\"line\":1,\"error\":\"429\"}\n";
        let damaged = "{\"event\":\"intent\",\"line\":1r,\"name\":\"line-2\"\n";
        std::fs::write(&path, format!("{HEADER}\n{whole}{damaged}{whole}")).unwrap();
        let error = FileJournal::open(&path)
            .and_then(|mut journal| journal.events())
            .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData, "{error}");
        assert!(error.to_string().contains("line 3"), "{error}");
    }

    /// A damaged record that ends with its newline was written whole (not
    /// torn by a crash): last in the file, it is read as a possible
    /// acceptance all the same, and its line is not sent on its own.
    #[test]
    fn a_damaged_last_record_with_its_newline_leaves_its_line_unanswered() {
        let dir = scratch("damaged-last");
        let path = dir.join("journal.jsonl");
        let refused = "{\"event\":\"refused\",\"line\":2,\"error\":\"429\"}\n";
        let damaged = "{\"event\":\"accepted\",\"line\":1,\"id\":\"t-broken\n";
        std::fs::write(&path, format!("{HEADER}\n{refused}{damaged}")).unwrap();
        let mut journal = FileJournal::open(&path).unwrap();
        let records = journal.events().unwrap();
        assert_eq!(records.last(), Some(&Event::Damaged { line: 1 }), "{records:?}");
        assert!(matches!(Line::of_each(records)[&1], Line::Unanswered { .. }));
    }

    #[test]
    fn a_torn_record_is_cut_off_on_opening_and_leaves_its_line_unanswered_elsewhere() {
        let dir = scratch("torn");
        let path = dir.join("journal.jsonl");
        let whole = "{\"event\":\"refused\",\"line\":1,\"error\":\"429\"}\n";
        // Torn right after a `}` inside a string, as an older version could
        // leave it in the middle (it ended the line and went on).
        let torn = "{\"event\":\"refused\",\"line\":2,\"error\":\"{}";
        std::fs::write(&path, format!("{whole}{torn}\n{whole}")).unwrap();
        let mut journal = FileJournal::open(&path).unwrap();
        let records = journal.events().unwrap();
        // It may have been line 2's accepted task: line 2 is unanswered.
        assert_eq!(records[1], Event::Damaged { line: 2 });
        assert!(matches!(Line::of_each(records)[&2], Line::Unanswered { .. }));
        drop(journal);
        // A torn tail is removed, so the next event starts on its own line.
        std::fs::write(&path, format!("{whole}{torn}")).unwrap();
        let mut journal = FileJournal::open(&path).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), whole);
        journal
            .append(&Event::Refused {
                line: 3,
                error: "x".into(),
            })
            .unwrap();
        assert_eq!(journal.events().unwrap().len(), 2);
        // A whole last event without its newline (an editor's save) is kept.
        drop(journal);
        std::fs::write(&path, format!("{whole}{}", whole.trim_end())).unwrap();
        let mut journal = FileJournal::open(&path).unwrap();
        assert_eq!(journal.events().unwrap().len(), 2);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{whole}{whole}"));
        // Damage that names no line is an error.
        drop(journal);
        std::fs::write(&path, format!("{whole}{{\"event\":nonsense}}\n{whole}")).unwrap();
        let mut journal = FileJournal::open(&path).unwrap();
        assert_eq!(journal.events().unwrap_err().kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn only_a_batchs_journal_is_opened_and_any_other_file_is_left_as_it_was() {
        let dir = scratch("recognise");
        let path = dir.join("journal.jsonl");
        let record = Event::Refused {
            line: 1,
            error: "x".into(),
        };
        let line = serde_json::to_string(&record).unwrap();
        // This version's: the header, then the events.
        let mut journal = FileJournal::open(&path).unwrap();
        journal.append(&record).unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), format!("{HEADER}\n{line}\n"));
        assert_eq!(journal.events().unwrap(), vec![record.clone()]);
        drop(journal);
        // An earlier version's: events only, or nothing yet.
        for earlier in [format!("{line}\n"), String::new()] {
            std::fs::write(&path, &earlier).unwrap();
            assert!(FileJournal::open(&path).is_ok(), "{earlier:?}");
        }
        // Anything else, untouched.
        for foreign in ["{\"note\":1}\n{\"note\":2}", &format!("\n{line}\n"), "text"] {
            std::fs::write(&path, foreign).unwrap();
            let refused = FileJournal::open(&path).unwrap_err();
            assert_eq!(refused.kind(), io::ErrorKind::InvalidData, "{foreign:?}");
            assert!(refused.to_string().contains("move it elsewhere"), "{refused}");
            assert_eq!(std::fs::read_to_string(&path).unwrap(), foreign);
        }
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_write_that_cannot_be_undone_stops_all_later_writes() {
        // Every write to /dev/full fails (no space), and it cannot be cut back.
        if !Path::new("/dev/full").exists() {
            return;
        }
        let mut journal = FileJournal::open("/dev/full").unwrap();
        let record = Event::Refused {
            line: 1,
            error: "x".into(),
        };
        assert!(journal.append(&record).is_err());
        let later = journal.append(&record).unwrap_err();
        assert!(later.to_string().contains("nothing more is recorded"), "{later}");
    }

    #[cfg(unix)]
    #[test]
    fn a_journal_deleted_while_in_use_takes_no_more_records_and_still_replays() {
        let dir = scratch("deleted");
        let path = dir.join("journal.jsonl");
        let mut journal = FileJournal::open(&path).unwrap();
        let record = Event::Refused {
            line: 1,
            error: "x".into(),
        };
        journal.append(&record).unwrap();
        std::fs::remove_file(&path).unwrap();
        let refused = journal.append(&record).unwrap_err();
        assert!(refused.to_string().contains("deleted or replaced"), "{refused}");
        assert_eq!(
            journal.events().unwrap(),
            vec![record.clone()],
            "read through the locked handle"
        );
        // Another file at the same path is not this run's either.
        std::fs::write(&path, "").unwrap();
        assert!(journal.append(&record).is_err());
    }

    #[test]
    fn a_new_submission_replaces_what_an_earlier_one_ended_with() {
        let intent = |digest: &str| Event::Intent {
            line: 1,
            name: "a".into(),
            digest: digest.into(),
            sent_at: None,
            ephemeral: false,
        };
        let lines = Line::of_each(vec![intent("first"), credits_refusal(1), intent("second")]);
        let state = &lines[&1];
        assert!(matches!(state, Line::Unanswered { .. }), "{state:?}");
        let digest = state.sent().and_then(|sent| sent.digest.as_deref());
        assert_eq!(digest, Some("second"), "the last submission's job");
    }

    #[test]
    fn a_journal_in_use_cannot_be_opened_again_until_it_is_closed() {
        let dir = scratch("lock");
        let path = dir.join("journal.jsonl");
        let first = FileJournal::open(&path).unwrap();
        let second = FileJournal::open(&path).unwrap_err();
        assert_eq!(second.kind(), io::ErrorKind::WouldBlock);
        assert!(second.to_string().contains("in use by another run"), "{second}");
        // Deleting the journal does not let a second run in: the directory
        // is held too.
        std::fs::remove_file(&path).unwrap();
        let after_delete = FileJournal::open(&path).unwrap_err();
        assert_eq!(after_delete.kind(), io::ErrorKind::WouldBlock);
        drop(first);
        assert!(FileJournal::open(&path).is_ok());
    }

    #[test]
    fn a_lock_held_for_an_instant_after_a_run_ends_lets_the_next_run_in() {
        // As a child process started just then holds the last run's files
        // until it runs its own program.
        let dir = scratch("instant");
        let path = dir.join("journal.jsonl");
        drop(FileJournal::open(&path).unwrap());
        let copy = File::open(&path).unwrap();
        copy.lock().unwrap();
        let releaser = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(100));
            drop(copy);
        });
        assert!(FileJournal::open(&path).is_ok(), "taken once the copy is closed");
        releaser.join().unwrap();
    }

    #[test]
    fn a_journal_named_by_a_relative_path_keeps_its_absolute_name() {
        let dir = PathBuf::from(format!("target/genapi-journal-relative-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let journal = FileJournal::open(dir.join("journal.jsonl")).unwrap();
        assert!(journal.path().is_absolute(), "{}", journal.path().display());
        drop(journal);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn finished_records_with_large_seeds_read_back() {
        let record = Event::Finished {
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
        assert_eq!(serde_json::from_str::<Event>(&text).unwrap(), record);
    }

    #[test]
    fn an_intent_without_an_answer_stays_unanswered() {
        let lines = Line::of_each(vec![
            Event::Intent {
                line: 2,
                name: "b".into(),
                digest: "d".into(),
                sent_at: None,
                ephemeral: false,
            },
            Event::Refused {
                line: 2,
                error: "429".into(),
            },
            Event::Intent {
                line: 2,
                name: "b".into(),
                digest: "d".into(),
                sent_at: None,
                ephemeral: false,
            },
        ]);
        assert!(matches!(lines[&2], Line::Unanswered { .. }));
        let refused = Line::of_each(vec![
            Event::Intent {
                line: 3,
                name: "c".into(),
                digest: "d".into(),
                sent_at: None,
                ephemeral: false,
            },
            credits_refusal(3),
        ]);
        assert!(
            !matches!(refused[&3], Line::Unanswered { .. }),
            "a refusal is an answer"
        );
    }
}
