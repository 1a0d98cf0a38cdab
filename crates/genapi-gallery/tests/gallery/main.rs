//! The gallery of an output folder, built from its results as a user's
//! batch leaves them: the page, its thumbnails, what it refuses to read, and
//! the page in a real browser.

mod browser;
mod page;

use std::path::Path;

use genapi_batch::ResultLine;
use genapi_test_common as common;
use image::{Rgb, RgbImage};
use serde_json::json;

/// A saved result: an image of `width` × `height` with some detail (so its
/// thumbnail is not trivially small), in `dir/name`.
fn image(dir: &Path, name: &str, width: u32, height: u32) {
    let picture = RgbImage::from_fn(width, height, |x, y| {
        Rgb([(x * 7 % 256) as u8, (y * 5 % 256) as u8, ((x ^ y) % 256) as u8])
    });
    picture.save(dir.join(name)).unwrap();
}

/// A succeeded line with its file and every field a tile shows.
fn succeeded(line: u64, file: &str) -> ResultLine {
    serde_json::from_value(json!({
        "line": line, "status": "succeeded", "name": file.rsplit_once('.').map_or(file, |(stem, _)| stem),
        "file": file, "model": "gen-2-pro", "prompt": format!("prompt of line {line}"),
        "width": 512, "height": 384, "seed": 1000 + line, "cost": 0.05, "duration": 2.5,
        "elapsed": 3.0, "finished_at": 1_800_000_000.0 + line as f64, "task_id": format!("task-{line}"),
    }))
    .unwrap()
}

/// A line that failed after its task was accepted.
fn failed(line: u64, class: &str) -> ResultLine {
    serde_json::from_value(json!({
        "line": line, "status": "failed", "name": format!("broken-{line}"), "model": "gen-2-pro",
        "prompt": format!("prompt of line {line}"), "error": format!("task task-{line} failed: {class}"),
        "class": class, "task_id": format!("task-{line}"), "elapsed": 1.0, "finished_at": 1_800_000_000.0,
    }))
    .unwrap()
}

/// Writes `lines` as the folder's results file.
fn results(dir: &Path, lines: &[ResultLine]) {
    let text: String = lines
        .iter()
        .map(|line| serde_json::to_string(line).unwrap() + "\n")
        .collect();
    std::fs::write(dir.join(genapi_gallery::RESULTS), text).unwrap();
}
