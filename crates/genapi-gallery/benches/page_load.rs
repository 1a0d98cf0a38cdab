//! How fast a large gallery is written and opens in a real headless Chromium.
//!
//! A folder of 10,000 result lines (ten distinct images, one line in 97
//! failed), as the gallery's browser test builds it. Five rounds, each:
//! rebuild the gallery from scratch (thumbnails included), then open it in
//! Chromium. Prints, per round and as median and range: the rebuild's time,
//! the page's load time as the page measured it (harness start to the
//! gallery's `load` event, every thumbnail decoded), and the browser's whole
//! run. The goal is a page that loads in under 5 s.
//!
//! `cargo bench -p genapi-gallery --bench page_load` (needs Debian's
//! `chromium`).

use std::time::Instant;

use genapi_gallery::{Gallery, INDEX, THUMBS};
use genapi_test_common::{browser, Dir};

#[path = "../tests/gallery/fixtures.rs"]
mod fixtures;

const LINES: u64 = 10_000;
const ROUNDS: usize = 5;

fn main() {
    let Some(chromium) = browser::chromium() else {
        eprintln!("no Chromium: nothing measured");
        return;
    };
    let dir = Dir::new("gallery-bench");
    fixtures::many_lines(&dir.0, LINES);
    let (mut rebuilds, mut loads, mut browsers) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let _ = std::fs::remove_file(dir.join(INDEX));
        let _ = std::fs::remove_dir_all(dir.join(THUMBS));
        let started = Instant::now();
        if let Err(e) = Gallery::rebuild(&dir.0) {
            eprintln!("the gallery could not be written: {e}");
            std::process::exit(1);
        }
        let rebuild = started.elapsed().as_secs_f64();
        let seen = browser::open(&chromium, &dir.join(INDEX));
        if seen.tiles.len() as u64 != LINES {
            eprintln!("the page showed {} tiles of {LINES}", seen.tiles.len());
            std::process::exit(1);
        }
        let page_mb = std::fs::metadata(dir.join(INDEX)).map_or(0.0, |m| m.len() as f64 / 1e6);
        println!(
            "round {round}: rebuild {rebuild:.2} s, page {page_mb:.1} MB loaded in {:.0} ms, browser {:.1} s",
            seen.load_ms,
            seen.browser_time.as_secs_f64()
        );
        rebuilds.push(rebuild);
        loads.push(seen.load_ms / 1000.0);
        browsers.push(seen.browser_time.as_secs_f64());
    }
    for (what, mut figures) in [("rebuild", rebuilds), ("page load", loads), ("browser run", browsers)] {
        figures.sort_by(f64::total_cmp);
        println!(
            "{what}: median {:.2} s, range {:.2}-{:.2} s over {ROUNDS} rounds",
            figures[ROUNDS / 2],
            figures[0],
            figures[ROUNDS - 1]
        );
    }
}
