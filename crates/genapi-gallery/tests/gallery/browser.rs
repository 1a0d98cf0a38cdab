//! The page in a real headless Chromium: every thumbnail decodes, every
//! tile says what its result says, and nothing comes from the network. How
//! fast a large page loads is measured by the gallery's bench
//! (`cargo bench -p genapi-gallery`), not asserted here.

use genapi_gallery::{Gallery, INDEX};

use crate::common::{browser, Dir};
use crate::fixtures::many_lines;

#[test]
fn ten_thousand_lines_open_with_every_thumbnail_decoded_and_nothing_fetched_from_the_network() {
    let Some(chromium) = browser::chromium() else {
        return;
    };
    const LINES: u64 = 10_000;
    let dir = Dir::new("gallery-ten-thousand");
    let lines = many_lines(&dir.0, LINES);
    Gallery::rebuild(&dir.0).unwrap();
    let page_bytes = std::fs::metadata(dir.join(INDEX)).unwrap().len();
    let seen = browser::open(&chromium, &dir.join(INDEX));
    eprintln!(
        "{LINES} lines, a page of {:.1} MB: loaded in {:.0} ms as the page measured, {:.1} s of browser in all",
        page_bytes as f64 / 1e6,
        seen.load_ms,
        seen.browser_time.as_secs_f64()
    );
    assert_eq!(seen.tiles.len() as u64, LINES);
    let expected_images = lines.iter().filter(|line| line.succeeded()).count();
    assert_eq!(seen.images.len(), expected_images);
    let undecoded: Vec<&(String, u64)> = seen.images.iter().filter(|(_, width)| *width == 0).collect();
    assert!(
        undecoded.is_empty(),
        "{} thumbnails did not decode: {:?}",
        undecoded.len(),
        &undecoded[..undecoded.len().min(5)]
    );
    assert!(
        seen.network.is_empty(),
        "the page asked the network for {:?}",
        seen.network
    );
    for tile in seen.tiles.iter().filter(|tile| tile["status"] == "failed") {
        let line = tile["line"].as_str().unwrap();
        assert_eq!(tile["task"], format!("task-{line}"));
        assert!(
            tile["text"].as_str().unwrap().contains(&format!("task-{line}")),
            "{tile}"
        );
    }
}

#[test]
fn a_page_that_asks_the_network_for_anything_is_caught() {
    let Some(chromium) = browser::chromium() else {
        return;
    };
    // The check itself, on a page made to fail it: an image from a loopback
    // port nothing listens on.
    let dir = Dir::new("gallery-network-control");
    std::fs::write(
        dir.join("index.html"),
        "<!DOCTYPE html><html><body><figure class=\"tile\" data-line=\"1\"><img src=\"http://127.0.0.1:9/planted.png\"></figure></body></html>",
    )
    .unwrap();
    let seen = browser::open(&chromium, &dir.join("index.html"));
    assert_eq!(seen.network, ["http://127.0.0.1:9/planted.png"]);
    assert_eq!(
        seen.images,
        [("http://127.0.0.1:9/planted.png".to_string(), 0)],
        "and it did not decode"
    );
}
