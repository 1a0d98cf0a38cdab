//! The gallery of one output folder: its lines, their thumbnails, and the
//! page written from them.
//!
//! A run keeps the gallery current by giving it each result as it comes
//! ([`Gallery::add`]) and writing the page now and then ([`Gallery::write`]);
//! [`Gallery::rebuild`] reads the folder's `results.jsonl` and does the
//! same at once. The last result of a line wins, as in the results file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::page;
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

/// How the page treats a file at its name: replaced only when the gallery
/// wrote it.
const PAGE: genapi_files::Existing = genapi_files::Existing::ReplaceOurs {
    writer: "the gallery",
    ours: page::is_ours,
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

/// Why a gallery cannot be made.
#[derive(Debug, thiserror::Error)]
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

/// The gallery of an output folder.
#[derive(Debug)]
pub struct Gallery {
    dir: PathBuf,
    lines: BTreeMap<u64, ResultLine>,
    thumbnails: BTreeMap<u64, Thumbnail>,
    /// Images whose thumbnail could not be made, with why (shown as tiles
    /// without a picture; the run goes on).
    unreadable: BTreeMap<u64, String>,
}

impl Gallery {
    /// An empty gallery of the output folder `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> Gallery {
        Gallery {
            dir: dir.into(),
            lines: BTreeMap::new(),
            thumbnails: BTreeMap::new(),
            unreadable: BTreeMap::new(),
        }
    }

    /// Reads `dir/results.jsonl`, makes the thumbnails that are missing and
    /// writes `dir/index.html`.
    pub fn rebuild(dir: impl Into<PathBuf>) -> Result<Gallery, GalleryError> {
        let mut gallery = Gallery::new(dir);
        let path = gallery.dir.join(RESULTS);
        let unreadable = |reason: String| GalleryError::Results {
            path: path.clone(),
            reason,
        };
        let bytes = genapi_files::read(&path, RESULTS_LIMIT).map_err(|e| unreadable(e.reason()))?;
        let text = String::from_utf8(bytes).map_err(|_| unreadable("not UTF-8 text".into()))?;
        for (index, text) in text.lines().enumerate().filter(|(_, t)| !t.trim().is_empty()) {
            let line: ResultLine = serde_json::from_str(text).map_err(|e| GalleryError::Line {
                path: path.clone(),
                number: index + 1,
                reason: e.to_string(),
            })?;
            gallery.add(line);
        }
        gallery.write()?;
        Ok(gallery)
    }

    /// Takes a line's result (replacing an earlier one of the same line),
    /// and makes its thumbnail when it saved an image.
    pub fn add(&mut self, line: ResultLine) {
        self.thumbnails.remove(&line.line);
        self.unreadable.remove(&line.line);
        if line.succeeded() {
            let made = line
                .file
                .as_deref()
                .and_then(|file| image_in(&self.dir, file))
                .ok_or_else(|| "not a file of the output folder".to_string())
                .and_then(|(image, name)| thumbnail(&self.dir, THUMBS, &image, &name));
            match made {
                Ok(thumb) => {
                    self.thumbnails.insert(line.line, thumb);
                }
                Err(reason) => {
                    self.unreadable.insert(line.line, reason);
                }
            }
        }
        self.lines.insert(line.line, line);
    }

    /// Whether the page can be kept in `dir`: no page is there, or the one
    /// there is the gallery's. For a run that says so before it starts.
    pub fn may_write(dir: &std::path::Path) -> Result<(), GalleryError> {
        genapi_files::may_write(&dir.join(INDEX), PAGE).map_err(refusal)
    }

    /// Writes `index.html` whole: beside it under a temporary name, then
    /// put in its place, by the file policy of `genapi-files`: a page at
    /// that name is replaced only when the gallery wrote it, and a link
    /// there is never written through ([`GalleryError::NotOurs`]). Returns
    /// its path.
    pub fn write(&self) -> Result<PathBuf, GalleryError> {
        let target = self.dir.join(INDEX);
        let pictures = page::Pictures {
            thumbnails: &self.thumbnails,
            unreadable: &self.unreadable,
        };
        let page = page::render(&self.lines, &pictures);
        genapi_files::write_whole(&target, page.as_bytes(), PAGE).map_err(refusal)
    }

    /// How many lines the gallery shows.
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    /// Whether it shows no line.
    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }

    /// Lines whose image could not be made into a thumbnail, with why.
    pub fn unreadable(&self) -> &BTreeMap<u64, String> {
        &self.unreadable
    }
}
