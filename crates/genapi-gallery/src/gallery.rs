//! The gallery of one output folder: its lines, their thumbnails, and the
//! page written from them.
//!
//! A run keeps the gallery current by giving it each result as it comes
//! ([`Gallery::add`]) and writing the page now and then ([`Gallery::write`]);
//! [`Gallery::rebuild`] reads the folder's `results.jsonl` and does the
//! same at once. The last result of a line wins, as in the results file.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Read as _};
use std::path::PathBuf;

use crate::page;
use crate::shown::{held_bytes, shown};
use crate::thumbnail::{image_in, thumbnail, Thumbnail};
use genapi_batch::ResultLine;

/// The page's file name, in the output folder.
pub const INDEX: &str = "index.html";

/// The results file a batch writes in its output folder.
pub const RESULTS: &str = "results.jsonl";

/// The folder of thumbnails, in the output folder.
pub const THUMBS: &str = "thumbs";

/// The most a results file may hold for a rebuild (about a million lines).
const RESULTS_LIMIT: u64 = 1 << 30;

/// The longest line of a results file read: far above any a batch writes
/// (a prompt of 300,000 characters is a line of under 2 MB).
const LINE_BYTES: usize = 16 << 20;

/// The highest line number a results line may have: a job file's lines
/// take a byte each at least, and it holds at most
/// [`genapi_batch::JOB_FILE_LIMIT`] bytes. So a results file can name at
/// most this many lines' worth of pages, however it numbers them.
const MOST_LINES: u64 = genapi_batch::JOB_FILE_LIMIT + 1;

/// The most a page's kept lines may take to be read back: a thousand lines
/// of texts cut to their bounds (see `shown`), escaped as JSON.
const KEPT_LIMIT: u64 = 64 << 20;

/// How the page treats a file at its name: replaced only when the gallery
/// wrote it.
const PAGE: genapi_files::Existing = genapi_files::Existing::ReplaceOurs {
    writer: "the gallery",
    ours: page::is_ours,
};

/// How a page's kept lines are treated: replaced only when the gallery
/// wrote them.
const KEPT: genapi_files::Existing = genapi_files::Existing::ReplaceOurs {
    writer: "the gallery",
    ours: |head| head.starts_with(KEPT_MARK.as_bytes()),
};

/// The page's refusal, as the gallery says it.
fn refusal(refused: genapi_files::FileError) -> GalleryError {
    match refused {
        genapi_files::FileError::NotOurs { path, .. } | genapi_files::FileError::Exists { path, .. } => {
            GalleryError::NotOurs { path }
        }
        other => GalleryError::Write {
            path: other.path().to_path_buf(),
            reason: other.reason(),
        },
    }
}

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(GalleryError);

/// Why a gallery cannot be made.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum GalleryError {
    /// The results file cannot be read (or is not a regular file of
    /// reasonable size).
    #[error("cannot read {path}: {reason}; is this the output folder of a batch (--out)?")]
    Results {
        /// The results file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// A line of the results file is not a result.
    #[error("{path}, line {number}: not a result line ({reason})")]
    Line {
        /// The results file.
        path: PathBuf,
        /// The line's number in that file.
        number: usize,
        /// What the parser said.
        reason: String,
    },
    /// A page is at the page's name that the gallery did not write (a
    /// page of the user's own): it is left as it is, and no gallery is kept.
    #[error("{path}: not written by the gallery, so it is left as it is and no gallery is kept there (move it away, or choose another output folder)")]
    NotOurs {
        /// The page.
        path: PathBuf,
    },
    /// The page cannot be written.
    #[error("cannot write {path}: {reason}")]
    Write {
        /// The page (or its temporary file).
        path: PathBuf,
        /// Why.
        reason: String,
    },
}

/// The most tiles a page shows: a page of this many opens in well under a
/// second, and a gallery of 100,000 lines is 100 of them.
pub const PAGE_TILES: u64 = 1000;

/// The folder of a large gallery's pages, in the output folder.
pub const PAGES: &str = "pages";

/// Pages whose lines are held in memory at most; the others are on disk.
/// Results come mostly in line order, so few pages change at once.
const OPEN_PAGES: usize = 4;

/// What the lines and tiles of the pages held may take, about, before the
/// ones used longest ago are put away even when fewer than [`OPEN_PAGES`]
/// are held (a page of long texts takes up to some 50 MB; one of ordinary
/// lines, one or two MB).
const HELD_BYTES: usize = 48 << 20;

/// The most lines whose image could not be read a gallery says why of
/// ([`Gallery::unreadable`]): enough for anyone to read, and a few MB.
const UNREADABLE_KEPT: usize = 10_000;

/// How a page's kept lines (beside its HTML) are recognised as the
/// gallery's own.
const KEPT_MARK: &str = "{\"genapi_gallery_page\":";

/// The lines of one page in memory, with their thumbnails and tiles.
#[derive(Debug, Default)]
struct Page {
    lines: BTreeMap<u64, ResultLine>,
    thumbnails: BTreeMap<u64, Thumbnail>,
    tiles: page::Tiles,
    /// Changed since it was last written.
    dirty: bool,
    /// When it was last used, for putting the oldest away first.
    used: u64,
    /// About what its lines and tiles take.
    bytes: usize,
}

impl Page {
    /// Holds `line` with its tile (and thumbnail), in place of an earlier
    /// result of the same line; whether it is a new line.
    fn hold(&mut self, line: ResultLine, tile: String, thumbnail: Option<Thumbnail>) -> bool {
        let number = line.line;
        self.bytes += held_bytes(&line) + tile.len();
        self.thumbnails.remove(&number);
        if let Some(thumbnail) = thumbnail {
            self.thumbnails.insert(number, thumbnail);
        }
        if let Some(earlier) = self.tiles.insert(number, tile) {
            self.bytes = self.bytes.saturating_sub(earlier.len());
        }
        match self.lines.insert(number, line) {
            Some(earlier) => {
                self.bytes = self.bytes.saturating_sub(held_bytes(&earlier));
                false
            }
            None => true,
        }
    }
}

/// The gallery of an output folder.
///
/// A small gallery (lines up to [`PAGE_TILES`]) is one page, `index.html`.
/// A larger one is pages of [`PAGE_TILES`] lines each in `pages/`
/// (`pages/1.html` holds lines 1 to 1000), each self-contained, and
/// `index.html` gives the totals and links to every page. Only the pages
/// that changed are written again, and the lines of a few pages are held at
/// a time (the others are kept beside their page, as `pages/N.jsonl`), so
/// memory stays flat in the number of lines.
#[derive(Debug)]
pub struct Gallery {
    dir: PathBuf,
    /// Every page's totals, by page (from 0), as last written.
    totals: BTreeMap<u64, page::Totals>,
    /// The pages held in memory.
    open: BTreeMap<u64, Page>,
    /// Pages put away by this gallery (their lines kept on disk).
    kept: BTreeSet<u64>,
    /// Lines shown.
    count: usize,
    /// Images whose thumbnail could not be made, with why (shown as tiles
    /// without a picture; the run goes on): at most [`UNREADABLE_KEPT`].
    unreadable: BTreeMap<u64, String>,
    /// Whether the gallery is written as pages (a line beyond the first
    /// page was seen).
    paged: bool,
    /// Why a page could not be put away between writes: said by the next
    /// [`Gallery::write`].
    failed: Option<GalleryError>,
    /// A use count, for [`Page::used`].
    clock: u64,
    /// The job file, and whether the batch runs.
    about: page::About,
}

/// The page (from 0) of a line.
fn page_of(line: u64) -> u64 {
    line.saturating_sub(1) / PAGE_TILES
}

impl Gallery {
    /// An empty gallery of the output folder `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Gallery {
        Gallery {
            dir: dir.into(),
            totals: BTreeMap::new(),
            open: BTreeMap::new(),
            kept: BTreeSet::new(),
            count: 0,
            unreadable: BTreeMap::new(),
            paged: false,
            failed: None,
            clock: 0,
            about: page::About::default(),
        }
    }

    /// Names the job file of the batch on every page written from now on:
    /// the path as it was given, cut to a bound and with the characters a
    /// terminal must not get made spaces (`genapi_text`), then escaped.
    pub fn set_job_file(&mut self, path: &str) {
        self.about.job_file = Some(genapi_text::clean(&genapi_text::cut(path, crate::shown::LONG_TEXT)));
    }

    /// Says whether the batch is still running. While it is, `index.html`
    /// reloads itself every few seconds (a `<meta http-equiv="refresh">`),
    /// so a page left open follows the batch; the first write after
    /// `set_running(false)` leaves a page that stays still.
    pub fn set_running(&mut self, running: bool) {
        self.about.running = running;
    }

    /// Reads `dir/results.jsonl` a line at a time, makes the thumbnails
    /// that are missing and writes the gallery. A line longer than 16 MiB,
    /// or numbered beyond any job file's lines, is refused as not a result
    /// line.
    pub fn rebuild(dir: impl Into<PathBuf>) -> Result<Gallery, GalleryError> {
        let mut gallery = Gallery::new(dir);
        let path = gallery.dir.join(RESULTS);
        let unreadable = |reason: String| GalleryError::Results {
            path: path.clone(),
            reason,
        };
        let not_a_result = |number: usize, reason: String| GalleryError::Line {
            path: path.clone(),
            number,
            reason,
        };
        let file = genapi_files::open(&path, RESULTS_LIMIT).map_err(|e| unreadable(e.reason()))?;
        let mut reader = BufReader::new(file);
        let mut bytes = Vec::new();
        let mut number = 0;
        while let Some(whole) = next_line(&mut reader, &mut bytes).map_err(|e| unreadable(e.to_string()))? {
            number += 1;
            if !whole {
                return Err(not_a_result(number, format!("longer than {} MiB", LINE_BYTES >> 20)));
            }
            let text = std::str::from_utf8(&bytes).map_err(|_| unreadable("not UTF-8 text".into()))?;
            if text.trim().is_empty() {
                continue;
            }
            let line: ResultLine = serde_json::from_str(text).map_err(|e| not_a_result(number, e.to_string()))?;
            if line.line > MOST_LINES {
                let reason = format!("line {} is beyond the lines of any job file", line.line);
                return Err(not_a_result(number, reason));
            }
            gallery.add(line);
        }
        gallery.write()?;
        Ok(gallery)
    }

    /// Takes a line's result (replacing an earlier one of the same line),
    /// and makes its thumbnail when it saved an image. Its texts are cut to
    /// a bound first: a prompt of 300,000 characters is shown (and held) as
    /// its first thousand and `… (300000 characters)`.
    pub fn add(&mut self, line: ResultLine) {
        let line = shown(line);
        let number = page_of(line.line);
        let new_page =
            !self.open.contains_key(&number) && !self.kept.contains(&number) && !self.totals.contains_key(&number);
        if new_page && number > 0 && (self.open.contains_key(&(number - 1)) || self.kept.contains(&(number - 1))) {
            // The page before links to this one now.
            self.page(number - 1).dirty = true;
        }
        if number > 0 && !self.paged {
            // The first page moves from index.html to pages/1.html: its
            // tiles' links climb out of pages/ now.
            self.paged = true;
            let unreadable = &self.unreadable;
            if let Some(first) = self.open.get_mut(&0) {
                first.dirty = true;
                for (number, line) in &first.lines {
                    let tile = page::tile(
                        line,
                        first.thumbnails.get(number),
                        unreadable.get(number).map(String::as_str),
                        "../",
                    );
                    first.bytes += tile.len();
                    if let Some(earlier) = first.tiles.insert(*number, tile) {
                        first.bytes = first.bytes.saturating_sub(earlier.len());
                    }
                }
            }
        }
        let (thumbnail, why) = self.thumbnail_of(&line);
        let tile = page::tile(&line, thumbnail.as_ref(), why.as_deref(), self.prefix());
        let page = self.page(number);
        page.dirty = true;
        if page.hold(line, tile, thumbnail) {
            self.count += 1;
        }
        // However fast results come (a resumed run's, all at once), only a
        // few pages' lines stay in memory.
        if let Err(error) = self.put_away_extra() {
            self.failed.get_or_insert(error);
        }
    }

    /// What the links of a tile start with: a page of a paged gallery is
    /// in `pages/`.
    fn prefix(&self) -> &'static str {
        if self.paged {
            "../"
        } else {
            ""
        }
    }

    /// The thumbnail of a line that saved an image, made when missing, or
    /// why none could be made (also kept in `unreadable`, while it has
    /// room).
    fn thumbnail_of(&mut self, line: &ResultLine) -> (Option<Thumbnail>, Option<String>) {
        self.unreadable.remove(&line.line);
        if !line.saved() {
            return (None, None);
        }
        let made = line
            .file
            .as_deref()
            .and_then(|file| image_in(&self.dir, file))
            .ok_or_else(|| "not a file of the output folder".to_string())
            .and_then(|(image, name)| thumbnail(&self.dir, THUMBS, &image, &name));
        match made {
            Ok(thumb) => (Some(thumb), None),
            Err(reason) => {
                if self.unreadable.len() < UNREADABLE_KEPT {
                    self.unreadable.insert(line.line, reason.clone());
                }
                (None, Some(reason))
            }
        }
    }

    /// Page `number` in memory: as this gallery put it away, or new.
    fn page(&mut self, number: u64) -> &mut Page {
        self.clock += 1;
        let used = self.clock;
        if !self.open.contains_key(&number) {
            let page = match self.kept.remove(&number) {
                true => self.take_back(number),
                false => Page::default(),
            };
            self.open.insert(number, page);
        }
        let page = self.open.entry(number).or_default();
        page.used = used;
        page
    }

    /// The lines of a page put away, read back (with their thumbnails, made
    /// again where missing). Lines that cannot be read back are left out
    /// of the page and said in `unreadable`.
    fn take_back(&mut self, number: u64) -> Page {
        let mut page = Page::default();
        let kept = self.kept_path(number);
        // Cut as they were kept; cut again, whatever the file holds now.
        let text = genapi_files::read_text(&kept, KEPT_LIMIT).unwrap_or_default();
        let prefix = self.prefix();
        for text in text.lines().skip(1) {
            let Ok(line) = serde_json::from_str::<ResultLine>(text) else {
                continue;
            };
            let line = shown(line);
            let (thumbnail, why) = self.thumbnail_of(&line);
            let tile = page::tile(&line, thumbnail.as_ref(), why.as_deref(), prefix);
            page.hold(line, tile, thumbnail);
        }
        page
    }

    /// Puts the pages used longest ago away while more than
    /// [`OPEN_PAGES`] are held, or more than one taking more than
    /// [`HELD_BYTES`]: each is written (when it changed) and its lines kept
    /// beside it.
    fn put_away_extra(&mut self) -> Result<(), GalleryError> {
        let held = |open: &BTreeMap<u64, Page>| open.values().map(|page| page.bytes).sum::<usize>();
        while self.paged && (self.open.len() > OPEN_PAGES || (self.open.len() > 1 && held(&self.open) > HELD_BYTES)) {
            let Some(oldest) = self.open.iter().min_by_key(|(_, page)| page.used).map(|(n, _)| *n) else {
                break;
            };
            let Some(page) = self.open.remove(&oldest) else { break };
            if let Err(error) = self.keep(oldest, &page) {
                // Held again, so a later write can still show its lines.
                self.open.insert(oldest, page);
                return Err(error);
            }
            self.kept.insert(oldest);
        }
        Ok(())
    }

    /// Writes a page (when it changed) and keeps its lines beside it.
    fn keep(&mut self, number: u64, page: &Page) -> Result<(), GalleryError> {
        self.write_page(number, page)?;
        self.pages_folder()?;
        let mut kept = format!("{KEPT_MARK}{}}}\n", number + 1);
        for line in page.lines.values() {
            kept.push_str(&serde_json::to_string(line).unwrap_or_default());
            kept.push('\n');
        }
        genapi_files::write_whole(&self.kept_path(number), kept.as_bytes(), KEPT).map_err(refusal)?;
        Ok(())
    }

    /// The pages with lines before and after page `number` (all from 0).
    fn neighbours(&self, number: u64) -> (Option<u64>, Option<u64>) {
        let known = |range: (std::ops::Bound<u64>, std::ops::Bound<u64>), last: bool| {
            let pick = |found: Option<u64>, other: Option<u64>| match (found, other) {
                (Some(a), Some(b)) => Some(if last { a.max(b) } else { a.min(b) }),
                (a, b) => a.or(b),
            };
            let of_totals = |r| {
                let mut numbers = self.totals.range(r).filter(|(_, t)| t.lines > 0).map(|(n, _)| *n);
                if last {
                    numbers.next_back()
                } else {
                    numbers.next()
                }
            };
            let of_open = |r| {
                let mut numbers = self.open.range(r).filter(|(_, p)| !p.lines.is_empty()).map(|(n, _)| *n);
                if last {
                    numbers.next_back()
                } else {
                    numbers.next()
                }
            };
            pick(of_totals(range), of_open(range))
        };
        use std::ops::Bound::{Excluded, Unbounded};
        (
            known((Unbounded, Excluded(number)), true),
            known((Excluded(number), Unbounded), false),
        )
    }

    /// `pages/`, made when missing; a link (or anything else) in its place
    /// would take the writes somewhere else, so it is refused.
    fn pages_folder(&self) -> Result<PathBuf, GalleryError> {
        let folder = self.dir.join(PAGES);
        match std::fs::symlink_metadata(&folder) {
            Ok(metadata) if metadata.file_type().is_dir() => {}
            Ok(_) => return Err(GalleryError::NotOurs { path: folder }),
            Err(_) => std::fs::create_dir(&folder).map_err(|e| GalleryError::Write {
                path: folder.clone(),
                reason: e.to_string(),
            })?,
        }
        Ok(folder)
    }

    fn kept_path(&self, number: u64) -> PathBuf {
        self.dir.join(PAGES).join(format!("{}.jsonl", number + 1))
    }

    /// Whether the page can be kept in `dir`: no page is there, or the one
    /// there is the gallery's. For a run that says so before it starts.
    pub fn may_write(dir: &std::path::Path) -> Result<(), GalleryError> {
        genapi_files::may_write(&dir.join(INDEX), PAGE).map_err(refusal)
    }

    /// Writes what changed since the last write: each changed page, and
    /// `index.html` (the only page of a small gallery; the totals and the
    /// list of pages of a large one). Each is written beside its name and
    /// put in place, by the file policy of `genapi-files`: a page is
    /// replaced only when the gallery wrote it, and a link there is never
    /// written through ([`GalleryError::NotOurs`]). Returns the path of
    /// `index.html`.
    pub fn write(&mut self) -> Result<PathBuf, GalleryError> {
        if let Some(failed) = self.failed.take() {
            return Err(failed);
        }
        self.put_away_extra()?;
        let changed: Vec<u64> = self.open.iter().filter(|(_, p)| p.dirty).map(|(n, _)| *n).collect();
        for number in changed {
            if let Some(mut page) = self.open.remove(&number) {
                let written = self.write_page(number, &page);
                page.dirty = false;
                self.open.insert(number, page);
                written?;
            }
        }
        let target = self.dir.join(INDEX);
        let index = if self.paged {
            let pages: Vec<(u64, &page::Totals)> = self
                .totals
                .iter()
                .filter(|(_, totals)| totals.lines > 0)
                .map(|(number, totals)| (number + 1, totals))
                .collect();
            page::render_index(&pages, &self.about)
        } else {
            let empty = Page::default();
            let first = self.open.get(&0).unwrap_or(&empty);
            page::render(&first.lines, &first.tiles, page::Place::ALONE, &self.about)
        };
        genapi_files::write_whole(&target, index.as_bytes(), PAGE).map_err(refusal)
    }

    /// Writes one page of a paged gallery (a small gallery's only page is
    /// `index.html`, written by [`Gallery::write`]), and keeps its totals.
    fn write_page(&mut self, number: u64, page: &Page) -> Result<(), GalleryError> {
        self.totals.insert(number, page::Totals::of(page.lines.values()));
        if !self.paged || !page.dirty {
            return Ok(());
        }
        let folder = self.pages_folder()?;
        let (prev, next) = self.neighbours(number);
        let place = page::Place {
            of: Some((number + 1, prev.map(|p| p + 1), next.map(|n| n + 1))),
        };
        let html = page::render(&page.lines, &page.tiles, place, &self.about);
        let target = folder.join(format!("{}.html", number + 1));
        genapi_files::write_whole(&target, html.as_bytes(), PAGE).map_err(refusal)?;
        Ok(())
    }

    /// How many lines the gallery shows.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether it shows no line.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Lines whose image could not be made into a thumbnail, with why: the
    /// first 10,000 of them (a results file may name millions; each tile
    /// says why all the same).
    pub fn unreadable(&self) -> &BTreeMap<u64, String> {
        &self.unreadable
    }
}

/// Reads the next line of `reader` into `line`, without its end: `None` at
/// the end of the file, `Some(false)` for a line longer than
/// [`LINE_BYTES`] (of which no more than that is read).
fn next_line(reader: &mut impl BufRead, line: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    line.clear();
    if reader.take(LINE_BYTES as u64 + 1).read_until(b'\n', line)? == 0 {
        return Ok(None);
    }
    if line.last() == Some(&b'\n') {
        line.pop();
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        return Ok(Some(true));
    }
    Ok(Some(line.len() <= LINE_BYTES))
}

#[cfg(test)]
mod tests {
    use super::GalleryError;

    #[test]
    fn printed_with_debug_an_error_says_what_to_do_first() {
        let error = GalleryError::NotOurs {
            path: "shots/index.html".into(),
        };
        assert_eq!(format!("{error:?}"), error.to_string());
        assert!(format!("{error:?}").contains("move it away"));
    }
}
