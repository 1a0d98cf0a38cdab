//! A gallery beside a batch's results: `index.html` in the output folder,
//! with one tile per line of the job file.
//!
//! People judge generated images by looking at them, so a folder of files
//! and a `results.jsonl` is not the end of a batch. The gallery shows each
//! line as a tile: a thumbnail (in `thumbs/`, a few KB each) with the line's
//! name, prompt, model, size, seed, cost and duration; a failed line shows
//! its class, its message and its task id, which is what adopting or
//! retrying it takes. Lines that are cells of a sweep (a `grid` in their
//! result, as `genapi grid` writes) are laid out as a grid: prompts by rows,
//! the swept value by columns. A header gives the totals.
//!
//! The pages are built from the results alone ([`genapi_batch::ResultLine`],
//! one per line of `results.jsonl`), so [`Gallery::rebuild`] makes the same pages after
//! the run that the run kept current while it went. A batch of up to
//! [`PAGE_TILES`] lines is one page, `index.html`; a larger one is pages of
//! [`PAGE_TILES`] lines in `pages/`, linked from `index.html` with their
//! totals, so a gallery of 100,000 lines opens as fast as one of 1,000. Only
//! the pages that changed are written again, and the lines of a few pages
//! are held at a time, so keeping a gallery costs a batch little, however
//! long. Texts are cut as they come (a prompt of 300,000 characters is
//! shown, and held, as its first thousand and `… (300000 characters)`), so
//! it costs little however long its lines are either. Every page is self-contained (no script, font or style from the
//! network: it opens from the file system in any browser), thumbnails load
//! lazily, and every write replaces a page whole (written beside it, then
//! renamed), so a reader never sees half a page.
//!
//! ```no_run
//! # fn demo() -> Result<(), genapi_gallery::GalleryError> {
//! let gallery = genapi_gallery::Gallery::rebuild("shots")?;
//! println!("{} tiles in shots/index.html", gallery.len());
//! # Ok(()) }
//! ```

mod gallery;
mod page;
mod shown;
mod thumbnail;

pub use gallery::{Gallery, GalleryError, INDEX, PAGES, PAGE_TILES, RESULTS, THUMBS};
pub use thumbnail::THUMBNAIL_SIDE;
