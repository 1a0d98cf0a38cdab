//! The pages in a real headless Chromium: every thumbnail decodes, every
//! tile says what its result says, and nothing comes from the network. How
//! fast the pages load is measured by the gallery's bench
//! (`cargo bench -p genapi-gallery`), not asserted here.

use genapi_gallery::{Gallery, INDEX, PAGES, PAGE_TILES};

use crate::common::results::many_lines;
use crate::common::{browser, Dir};

#[test]
fn a_hundred_thousand_lines_are_pages_that_open_with_every_thumbnail_decoded_and_nothing_fetched() {
    let Some(chromium) = browser::chromium() else {
        return;
    };
    const LINES: u64 = 100_000;
    let dir = Dir::new("gallery-hundred-thousand");
    let lines = many_lines(&dir.0, LINES);
    let gallery = Gallery::rebuild(&dir.0).unwrap();
    assert_eq!(gallery.len() as u64, LINES);
    // The index links every page, and holds no tile.
    let index = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert_eq!(index.matches("<li data-page=").count() as u64, LINES / PAGE_TILES);
    assert!(
        index.contains("href=\"pages/100.html\">lines 99001–100000</a>"),
        "{}",
        &index[..2000.min(index.len())]
    );
    let seen = browser::open(&chromium, &dir.join(INDEX));
    assert!(
        seen.network.is_empty(),
        "the index asked the network for {:?}",
        seen.network
    );
    for number in [1, 50, 100] {
        let page = dir.join(PAGES).join(format!("{number}.html"));
        let bytes = std::fs::metadata(&page).unwrap().len();
        let seen = browser::open(&chromium, &page);
        eprintln!(
            "page {number} of {LINES} lines, {:.2} MB: loaded in {:.0} ms as the page measured, {:.1} s of browser in all",
            bytes as f64 / 1e6,
            seen.load_ms,
            seen.browser_time.as_secs_f64()
        );
        let first = (number - 1) * PAGE_TILES + 1;
        let on_page: Vec<_> = lines
            .iter()
            .filter(|line| (first..first + PAGE_TILES).contains(&line.line))
            .collect();
        assert_eq!(seen.tiles.len(), on_page.len(), "page {number}");
        assert_eq!(seen.tiles.len() as u64, PAGE_TILES);
        let expected_images = on_page.iter().filter(|line| line.saved()).count();
        assert_eq!(seen.images.len(), expected_images, "page {number}");
        let undecoded: Vec<&(String, u64)> = seen.images.iter().filter(|(_, width)| *width == 0).collect();
        assert!(
            undecoded.is_empty(),
            "{} thumbnails did not decode on page {number}: {:?}",
            undecoded.len(),
            &undecoded[..undecoded.len().min(5)]
        );
        assert!(
            seen.network.is_empty(),
            "page {number} asked the network for {:?}",
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
