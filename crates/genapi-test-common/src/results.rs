//! The results a batch leaves in its folder, made up for the gallery's
//! tests and the benches that keep a gallery: saved images and result lines
//! with every field a tile shows.

use std::path::Path;

use genapi_batch::ResultLine;
use image::{Rgb, RgbImage};
use serde_json::json;

/// A saved result: an image of `width` × `height` with some detail (so its
/// thumbnail is not trivially small), in `dir/name`.
pub fn image(dir: &Path, name: &str, width: u32, height: u32) {
    let picture = RgbImage::from_fn(width, height, |x, y| {
        Rgb([(x * 7 % 256) as u8, (y * 5 % 256) as u8, ((x ^ y) % 256) as u8])
    });
    picture.save(dir.join(name)).unwrap();
}

/// A saved line with its file and every field a tile shows.
pub fn saved(line: u64, file: &str) -> ResultLine {
    serde_json::from_value(json!({
        "line": line, "status": "saved", "name": file.rsplit_once('.').map_or(file, |(stem, _)| stem),
        "file": file, "model": "gen-2-pro", "prompt": format!("prompt of line {line}"),
        "width": 512, "height": 384, "seed": 1000 + line, "cost": 0.05, "duration": 2.5,
        "elapsed": 3.0, "finished_at": 1_800_000_000.0 + line as f64, "task_id": format!("task-{line}"),
    }))
    .unwrap()
}

/// A line whose task ended without a result (it failed, of `class`).
pub fn ended(line: u64, class: &str) -> ResultLine {
    serde_json::from_value(json!({
        "line": line, "status": "ended", "name": format!("broken-{line}"), "model": "gen-2-pro",
        "prompt": format!("prompt of line {line}"), "error": format!("task task-{line} failed: {class}"),
        "class": class, "task_id": format!("task-{line}"), "elapsed": 1.0, "finished_at": 1_800_000_000.0,
    }))
    .unwrap()
}

/// Writes `lines` as the folder's results file.
pub fn results(dir: &Path, lines: &[ResultLine]) {
    let text: String = lines
        .iter()
        .map(|line| serde_json::to_string(line).unwrap() + "\n")
        .collect();
    std::fs::write(dir.join("results.jsonl"), text).unwrap();
}

/// A folder of `count` lines, as a large batch leaves it: ten distinct
/// images, each the result of a tenth of the lines, and one line in 97
/// ended. Returns the lines written.
pub fn many_lines(dir: &Path, count: u64) -> Vec<ResultLine> {
    for n in 0..10 {
        image(dir, &format!("image-{n}.png"), 256 + n * 16, 192);
    }
    let lines: Vec<ResultLine> = (1..=count)
        .map(|line| match line % 97 {
            0 => ended(line, "task_failed"),
            _ => saved(line, &format!("image-{}.png", line % 10)),
        })
        .collect();
    results(dir, &lines);
    lines
}
