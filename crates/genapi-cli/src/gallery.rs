//! `genapi gallery DIR`: the gallery of a batch's output folder, made again
//! from its `results.jsonl` (after a run with `--no-gallery`, or one killed
//! before its last write). The page is the one the run itself keeps.

use std::path::Path;

use crate::{code, out, Failure, Global};

/// Rebuilds `dir/index.html` and says where it is.
pub fn run(global: &Global, dir: &Path) -> Result<(), Failure> {
    // A run stopped before its end keeps its page current but leaves the
    // results of the last finished run (none, the first time).
    let results = dir.join(genapi_gallery::RESULTS);
    if std::fs::symlink_metadata(&results).is_err() && dir.join(genapi_gallery::INDEX).exists() {
        return Err(Failure::usage(format!(
            "no run has finished in {} yet, so there is no {} to make the page from; the page there is the \
             stopped run's, and the next run of the batch keeps it current",
            out::clean(&dir.display().to_string()),
            genapi_gallery::RESULTS
        )));
    }
    let gallery = genapi_gallery::Gallery::rebuild(dir).map_err(|e| match e {
        genapi_gallery::GalleryError::Write { .. } => Failure::new(code::OTHER, out::clean(&e.to_string())),
        _ => Failure::usage(out::clean(&e.to_string())),
    })?;
    for (line, reason) in gallery.unreadable() {
        out::err(&format!("warning: line {line}: no thumbnail ({})", out::clean(reason)));
    }
    let page = dir.join(genapi_gallery::INDEX);
    if global.json {
        out::out(&serde_json::json!({"gallery": page.display().to_string(), "lines": gallery.len()}).to_string());
    } else {
        out::progress(&format!(
            "{} lines: {}",
            gallery.len(),
            out::clean(&page.display().to_string())
        ));
    }
    Ok(())
}
