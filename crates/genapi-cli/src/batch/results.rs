//! results.jsonl, the gallery beside it, and stdout with `--json`: every
//! line's result goes to all three as it comes.
//!
//! The run writes its results under a name of its own (workers sharing the
//! folder each write theirs, each holding a lock on its own, so a file a
//! killed worker left is known and removed by the next run) and puts the
//! file in place when the run ends, completed or stopped: in line order,
//! every valid line of the job file there, as this run left it or, for a
//! line it did not reach, as it stood before. A reader never sees half a
//! file: the previous results stay whole until the new ones are in place.
//! By the file policy ([`genapi_files`]), a results file or a page the
//! batch did not write is never replaced. A task is paid for, so when
//! stdout cannot be written, each task's id goes to stderr instead.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use genapi_batch::{ResultLine, Standing};
use serde_json::Value;
use tokio::time::Instant;

use super::{shown, RESULTS};
use crate::{code, out, Failure};

/// How results.jsonl treats a file at its name: replaced only when a batch
/// wrote it.
const RESULTS_FILE: genapi_files::Existing = genapi_files::Existing::ReplaceOurs {
    writer: "a batch",
    ours: is_results_file,
};

/// The largest results file read (about a million lines).
const RESULTS_LIMIT: u64 = 1 << 30;

/// The longest line of a results file taken for a result.
const RESULT_LINE_LIMIT: u64 = 1 << 20;

/// Whether the first bytes of a file show a results file a batch wrote:
/// empty (white space alone), or a first line that is a result (an object
/// with its `line` and `status`).
fn is_results_file(head: &[u8]) -> bool {
    if head.iter().all(u8::is_ascii_whitespace) {
        return true;
    }
    let first = head.split(|&byte| byte == b'\n').next().unwrap_or_default();
    serde_json::from_slice::<Value>(first).is_ok_and(|line| line["line"].is_u64() && line["status"].is_string())
}

/// The lines `results.jsonl` in `out_dir` says may have been paid for: a
/// line with a task, or one that stood anywhere but unsent, refused or changed
/// (`None`: the file cannot be read as results, and any line may have
/// been). A journal that holds no record of such a line lost it, and
/// sending the line would pay for it again.
pub(super) fn lines_that_may_have_paid(out_dir: &Path) -> Option<BTreeSet<u64>> {
    let mut lines = BTreeSet::new();
    each_result(out_dir, |result| {
        // A changed line's record, if any, is its earlier job's, kept in
        // the journal under whichever line sent it.
        let sent = !matches!(
            result.standing(),
            Some(Standing::Unsent | Standing::Refused | Standing::Changed) | None
        );
        if result.task_id.is_some() || sent {
            lines.insert(result.line);
        }
    })?;
    Some(lines)
}

/// Every result line of `results.jsonl` in `out_dir`, to `take` (none
/// when there is no file; `None`: the file cannot be read as results).
fn each_result(out_dir: &Path, mut take: impl FnMut(ResultLine)) -> Option<()> {
    let path = out_dir.join(RESULTS);
    if !genapi_files::is_taken(&path) {
        return Some(());
    }
    // By the file policy; one that cannot be read as a results file of
    // reasonable size is not read.
    let file = genapi_files::open(&path, RESULTS_LIMIT).ok()?;
    let mut reader = BufReader::new(file);
    let mut text = Vec::new();
    loop {
        text.clear();
        // A result line is small: a longer line is no result, and is not held.
        match (&mut reader).take(RESULT_LINE_LIMIT).read_until(b'\n', &mut text) {
            Ok(0) => return Some(()),
            Ok(_) => match serde_json::from_slice::<ResultLine>(&text) {
                Ok(result) => take(result),
                // The rest of a long line is passed over.
                Err(_) if !text.ends_with(b"\n") => {
                    reader.skip_until(b'\n').ok()?;
                }
                Err(_) => {}
            },
            Err(_) => return None,
        }
    }
}

/// What the gallery shows before the run's first result: every valid line
/// of the job file (`job_lines`) as the store says it stands (`unsent`
/// when it knows nothing of it), with the result the folder's last
/// results.jsonl kept for it when that says the same (its image, prompt and
/// cost).
pub(super) fn standing_before(
    out_dir: &Path,
    standings: &BTreeMap<u64, Standing>,
    job_lines: &[u64],
) -> Vec<ResultLine> {
    let mut earlier = BTreeMap::new();
    let _ = each_result(out_dir, |result| {
        earlier.insert(result.line, result);
    });
    job_lines
        .iter()
        .filter_map(|&line| {
            let standing = standings.get(&line).copied().unwrap_or(Standing::Unsent);
            match earlier.remove(&line) {
                Some(result) if result.standing() == Some(standing) => Some(result),
                _ => serde_json::from_value(serde_json::json!({"line": line, "status": standing.as_str()})).ok(),
            }
        })
        .collect()
}

/// Checks, before anything is sent, that the run may write its files in
/// `out_dir`: a results file of someone else's refuses the run; a page of
/// the user's own leaves the run without a gallery, which is said now.
/// Returns whether to keep a gallery.
pub(super) fn check_folder(out_dir: &Path, no_gallery: bool) -> Result<bool, Failure> {
    genapi_files::may_write(&out_dir.join(RESULTS), RESULTS_FILE)
        .map_err(|refused| Failure::usage(format!("{}; nothing was sent", out::clean(&refused.to_string()))))?;
    if no_gallery {
        return Ok(false);
    }
    match genapi_gallery::Gallery::may_write(out_dir) {
        Ok(()) => Ok(true),
        Err(refused) => {
            out::err(&format!("warning: no gallery: {}", out::clean(&refused.to_string())));
            Ok(false)
        }
    }
}

/// How often results.jsonl is put in place while a run runs.
const PUBLISHED_EVERY: Duration = Duration::from_secs(10);

/// Where the run's results go.
pub(super) struct Results {
    file: std::fs::File,
    /// The file's own name until the run completes.
    partial: PathBuf,
    out_dir: PathBuf,
    /// Whether each result is printed on stdout too.
    json: bool,
    /// Why stdout could not be written, once it could not.
    lost: Option<std::io::Error>,
    /// The gallery kept beside the results (unless `--no-gallery`).
    gallery: Option<LiveGallery>,
    /// Every valid line as it stood before the run: what results.jsonl
    /// says of a line the run does not reach.
    before: Vec<ResultLine>,
    /// The lines this run wrote a result of.
    written: BTreeSet<u64>,
    /// When results.jsonl was last put in place while the run ran.
    published: Option<Instant>,
}

impl Results {
    /// Starts the run's results in `out_dir`, with the gallery kept beside
    /// them if any.
    pub(super) fn create(
        out_dir: &Path,
        json: bool,
        gallery: Option<LiveGallery>,
        before: Vec<ResultLine>,
    ) -> Result<Results, Failure> {
        remove_left_behind(out_dir);
        let partial = genapi_files::temporary_name(&out_dir.join(RESULTS));
        let file = genapi_files::create_temporary(&partial)
            .map_err(|e| Failure::new(code::OTHER, format!("cannot write {}: {e}", shown(&partial))))?;
        // Held while the run writes it: the mark of a live writer.
        let _ = file.try_lock();
        Ok(Results {
            file,
            partial,
            out_dir: out_dir.to_path_buf(),
            json,
            lost: None,
            gallery,
            before,
            written: BTreeSet::new(),
            published: None,
        })
    }

    /// Writes one line's result.
    pub(super) fn write(&mut self, entry: &Value) -> Result<(), Failure> {
        if let Some(line) = entry["line"].as_u64() {
            self.written.insert(line);
        }
        let text = entry.to_string();
        writeln!(self.file, "{text}").map_err(|e| Failure::new(code::OTHER, format!("cannot write {RESULTS}: {e}")))?;
        if let Some(gallery) = &mut self.gallery {
            gallery.add(entry);
        }
        if !self.json {
            return Ok(());
        }
        if self.lost.is_none() {
            match out::out_required(&text) {
                Ok(()) => return Ok(()),
                Err(error) => self.lost = Some(error),
            }
        }
        // A task is paid for: its id must not be lost with stdout.
        if let Some(id) = entry["task_id"].as_str() {
            out::err(&out::clean(&format!(
                "line {} {}: task {id} (polling URL {}): {}",
                entry["line"],
                entry["name"].as_str().unwrap_or_default(),
                entry["polling_url"].as_str().unwrap_or_default(),
                entry["status"].as_str().unwrap_or_default(),
            )));
        }
        Ok(())
    }

    /// Takes `now` (every line as the store has it at a stop) for what the
    /// run wrote no result of: a line sent and not answered, or accepted and
    /// not finished, when the run stopped stands so in results.jsonl and
    /// the gallery, never as it stood before the run (`unsent`, which would
    /// tell a reader it cost nothing).
    pub(super) fn restate(&mut self, now: Vec<ResultLine>) {
        for line in &now {
            let unchanged = self.before.iter().any(|before| before == line);
            if self.written.contains(&line.line) || unchanged {
                continue;
            }
            if let (Some(gallery), Ok(entry)) = (&mut self.gallery, serde_json::to_value(line)) {
                gallery.add(&entry);
            }
        }
        self.before = now;
    }

    /// Writes the gallery's page if it is due (called now and then).
    pub(super) fn refresh_gallery(&mut self) {
        if let Some(gallery) = &mut self.gallery {
            gallery.write_if_due();
        }
    }

    /// The output folder.
    pub(super) fn out_dir(&self) -> &Path {
        &self.out_dir
    }

    /// Whether results.jsonl is due to be put in place again while the
    /// run runs ([`Results::publish`]).
    pub(super) fn publish_due(&self) -> bool {
        self.published.is_none_or(|at| at.elapsed() >= PUBLISHED_EVERY)
    }

    /// Puts results.jsonl in place while the run runs, in line order: what
    /// the run wrote, and every other line as `now` has it (the store's
    /// standings, when they could be read), so a run killed leaves a file
    /// at most [`PUBLISHED_EVERY`] old that a reader takes whole. What
    /// cannot be written now is said when the run ends, which writes it
    /// again.
    pub(super) fn publish(&mut self, now: Option<Vec<ResultLine>>) {
        self.published = Some(Instant::now());
        if let Some(now) = now {
            self.restate(now);
        }
        if let Ok(ordered) = in_line_order(&self.partial, self.before.clone()) {
            if genapi_files::publish(&ordered, &self.out_dir.join(RESULTS), RESULTS_FILE).is_err() {
                let _ = std::fs::remove_file(&ordered);
            }
        }
    }

    /// Ends the results: the gallery's page is written, and results.jsonl
    /// put in place in line order, with the lines the run did not reach as
    /// they stood before it. Returns why stdout could not be written, if
    /// it could not.
    pub(super) fn close(mut self) -> Result<Option<std::io::Error>, Failure> {
        if let Some(gallery) = &mut self.gallery {
            // The batch has ended: the last page stays still.
            gallery.gallery.set_running(false);
            gallery.write();
            if let Some(warning) = gallery.warning.take() {
                out::err(&warning);
            }
        }
        let _ = self.file.sync_data();
        let Results {
            file,
            partial,
            out_dir,
            lost,
            before,
            ..
        } = self;
        drop(file);
        let in_order = in_line_order(&partial, before);
        let _ = std::fs::remove_file(&partial);
        let written = in_order.map_err(|e| Failure::new(code::OTHER, format!("cannot write {RESULTS}: {e}")))?;
        genapi_files::publish(&written, &out_dir.join(RESULTS), RESULTS_FILE)
            .map_err(|refused| Failure::new(code::OTHER, out::clean(&refused.to_string())))?;
        Ok(lost)
    }
}

/// The run's results (the file at `partial`, in the order they came) over
/// the lines as they stood `before`, in line order, written under a new
/// temporary name of this run's, which is returned.
fn in_line_order(partial: &Path, before: Vec<ResultLine>) -> std::io::Result<PathBuf> {
    let mut by_line: BTreeMap<u64, String> = before
        .into_iter()
        .filter_map(|result| Some((result.line, serde_json::to_string(&result).ok()?)))
        .collect();
    for text in BufReader::new(std::fs::File::open(partial)?).lines() {
        let text = text?;
        let line = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|entry| entry["line"].as_u64());
        if let Some(line) = line {
            by_line.insert(line, text);
        }
    }
    let ordered = genapi_files::temporary_name(&partial.with_file_name(RESULTS));
    let mut file = std::io::BufWriter::new(genapi_files::create_temporary(&ordered)?);
    for text in by_line.values() {
        writeln!(file, "{text}")?;
    }
    file.into_inner()
        .map_err(std::io::IntoInnerError::into_error)?
        .sync_data()?;
    Ok(ordered)
}

/// Removes the results a killed run left in `out_dir` under its own name:
/// a `.results.jsonl.*.partial` no live writer holds a lock on. (A file
/// system without locks keeps them all: none can be told dead.)
fn remove_left_behind(out_dir: &Path) {
    let Ok(entries) = std::fs::read_dir(out_dir) else {
        return;
    };
    let prefix = format!(".{RESULTS}.");
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_regular = entry.file_type().is_ok_and(|kind| kind.is_file());
        if !(is_regular && name.starts_with(&prefix) && name.ends_with(".partial")) {
            continue;
        }
        let Ok(file) = std::fs::File::open(entry.path()) else {
            continue;
        };
        if file.try_lock().is_ok() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The gallery of the output directory, kept current during the run: each
/// result goes in as it is written, the page is written now and then (a
/// page of thousands of tiles is not rewritten for every line) and at the
/// end. A gallery that cannot be written is said once; the batch goes on.
pub(super) struct LiveGallery {
    gallery: genapi_gallery::Gallery,
    /// The opener the page is to be opened with when next written
    /// (`--open`).
    open: Option<crate::opener::Opener>,
    written: Option<Instant>,
    changed: bool,
    failed: bool,
    /// Why the page could not be written, to say after the run.
    warning: Option<String>,
}

impl LiveGallery {
    /// How often the page is written while the batch runs.
    const EVERY: Duration = Duration::from_secs(2);

    /// The gallery in `dir` of a running batch of `jobs_file`: its page
    /// reloads itself until the batch ends. It is written now, with the
    /// lines as they stand `before` the run ([`standing_before`]), so the
    /// page is there (and, with `open`, opened) from the start and counts
    /// every line, those saved by earlier runs too.
    pub(super) fn new(
        dir: &Path,
        jobs_file: &Path,
        open: Option<crate::opener::Opener>,
        before: Vec<ResultLine>,
    ) -> LiveGallery {
        let mut gallery = genapi_gallery::Gallery::new(dir);
        gallery.set_job_file(&jobs_file.display().to_string());
        gallery.set_running(true);
        for line in before {
            gallery.add(line);
        }
        let mut live = LiveGallery {
            gallery,
            open,
            written: None,
            changed: false,
            failed: false,
            warning: None,
        };
        live.write();
        live
    }

    fn add(&mut self, entry: &Value) {
        if let Ok(line) = serde_json::from_value::<genapi_batch::ResultLine>(entry.clone()) {
            self.gallery.add(line);
            self.changed = true;
        }
    }

    fn write_if_due(&mut self) {
        if self.changed && self.written.is_none_or(|at| at.elapsed() >= LiveGallery::EVERY) {
            self.write();
        }
    }

    fn write(&mut self) {
        self.written = Some(Instant::now());
        self.changed = false;
        match self.gallery.write() {
            Ok(index) => {
                if let Some(opener) = self.open.take() {
                    opener.open(&index);
                }
            }
            Err(error) => self.said(&error),
        }
    }

    /// Keeps why the page could not be written, the first time.
    fn said(&mut self, error: &genapi_gallery::GalleryError) {
        if !std::mem::replace(&mut self.failed, true) {
            // Said once the run ends, below the bar rather than into it.
            self.warning = Some(format!("warning: no gallery: {}", out::clean(&error.to_string())));
        }
    }
}
