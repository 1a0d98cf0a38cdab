//! How fast a large gallery is written and how fast its pages open in a
//! real headless Chromium.
//!
//! A folder of 100,000 result lines (ten distinct images, one line in 97
//! failed), as the gallery's browser test builds it: 100 pages of 1,000
//! tiles. Five rounds, each: rebuild the gallery from scratch (thumbnails
//! included), then open the index and pages 1, 50 and 100 in Chromium.
//! Prints, per round and as median and range: the rebuild's time, and each
//! page's load time as the page measured it (harness start to the `load`
//! event, every thumbnail decoded). The goal is every page open within 1 s.
//! The process's peak memory is printed at the end.
//!
//! `cargo bench -p genapi-gallery --bench page_load` (needs Debian's
//! `chromium`).

use std::time::Instant;

use genapi_gallery::{Gallery, INDEX, PAGES, THUMBS};
use genapi_test_common::{browser, results as fixtures, Dir};

const LINES: u64 = 100_000;
const ROUNDS: usize = 5;
const OPENED: [u64; 3] = [1, 50, 100];

fn summary(what: &str, mut figures: Vec<f64>, unit: &str) {
    figures.sort_by(f64::total_cmp);
    println!(
        "{what}: median {:.2} {unit}, range {:.2}-{:.2} {unit} over {} rounds",
        figures[figures.len() / 2],
        figures[0],
        figures[figures.len() - 1],
        figures.len()
    );
}

fn main() {
    let Some(chromium) = browser::chromium() else {
        eprintln!("no Chromium: nothing measured");
        return;
    };
    let dir = Dir::new("gallery-bench");
    fixtures::many_lines(&dir.0, LINES);
    let (mut rebuilds, mut index_loads, mut page_loads) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=ROUNDS {
        let _ = std::fs::remove_file(dir.join(INDEX));
        let _ = std::fs::remove_dir_all(dir.join(PAGES));
        let _ = std::fs::remove_dir_all(dir.join(THUMBS));
        let started = Instant::now();
        if let Err(e) = Gallery::rebuild(&dir.0) {
            eprintln!("the gallery could not be written: {e}");
            std::process::exit(1);
        }
        let rebuild = started.elapsed().as_secs_f64();
        let index = browser::open(&chromium, &dir.join(INDEX));
        let mut loads = Vec::new();
        for number in OPENED {
            let seen = browser::open(&chromium, &dir.join(PAGES).join(format!("{number}.html")));
            if seen.tiles.len() != 1000 {
                eprintln!("page {number} showed {} tiles of 1000", seen.tiles.len());
                std::process::exit(1);
            }
            loads.push(seen.load_ms);
        }
        println!(
            "round {round}: rebuild {rebuild:.2} s; index loaded in {:.0} ms; pages {OPENED:?} in {:?} ms",
            index.load_ms,
            loads.iter().map(|ms| ms.round() as u64).collect::<Vec<_>>()
        );
        rebuilds.push(rebuild);
        index_loads.push(index.load_ms);
        page_loads.extend(loads);
    }
    summary("rebuild of 100,000 lines", rebuilds, "s");
    summary("index load", index_loads, "ms");
    summary("page load (pages 1, 50, 100)", page_loads, "ms");
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: the pointer is valid for the call.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    println!(
        "peak memory of this process: {:.0} MiB",
        usage.ru_maxrss as f64 / 1024.0
    );
}
