//! A gallery larger than a page: pages of at most `PAGE_TILES` lines,
//! written again only when they change, and held in memory a few at a time.

use std::os::unix::fs::MetadataExt as _;

use genapi_gallery::{Gallery, INDEX, PAGES, PAGE_TILES};

use crate::common::results::{ended, image, saved};
use crate::common::Dir;

/// A gallery of `dir` with lines `lines` succeeded, all showing one image.
fn gallery_of(dir: &Dir, lines: std::ops::RangeInclusive<u64>) -> Gallery {
    image(&dir.0, "shared.png", 64, 48);
    let mut gallery = Gallery::new(&dir.0);
    for line in lines {
        gallery.add(saved(line, "shared.png"));
    }
    gallery
}

fn tiles(html: &str) -> usize {
    html.matches("<figure class=\"tile").count()
}

fn page(dir: &Dir, number: u64) -> String {
    std::fs::read_to_string(dir.join(PAGES).join(format!("{number}.html"))).unwrap()
}

#[test]
fn a_gallery_grows_from_one_page_to_an_index_of_pages_that_link_each_other() {
    let dir = Dir::new("gallery-pages-grow");
    let mut gallery = gallery_of(&dir, 1..=PAGE_TILES);
    gallery.write().unwrap();
    let index = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert_eq!(tiles(&index) as u64, PAGE_TILES, "a page's worth is index.html alone");
    assert!(!dir.join(PAGES).exists());

    gallery.add(saved(PAGE_TILES + 1, "shared.png"));
    gallery.write().unwrap();
    let index = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert_eq!(tiles(&index), 0, "the index lists the pages");
    assert!(
        index.contains("<a href=\"pages/1.html\">lines 1–1000</a>: 1000 saved"),
        "{index}"
    );
    assert!(
        index.contains("<a href=\"pages/2.html\">lines 1001–1001</a>: 1 saved"),
        "{index}"
    );
    let first = page(&dir, 1);
    assert_eq!(tiles(&first) as u64, PAGE_TILES);
    assert!(
        first.contains("href=\"2.html\" rel=\"next\""),
        "the first page links the next"
    );
    assert!(
        first.contains("src=\"../thumbs/shared.jpg\""),
        "links climb out of pages/"
    );
    let second = page(&dir, 2);
    assert_eq!(tiles(&second), 1);
    assert!(second.contains("href=\"1.html\" rel=\"prev\"") && !second.contains("rel=\"next\""));
}

#[test]
fn only_the_pages_that_changed_are_written_again() {
    let dir = Dir::new("gallery-pages-changed");
    let mut gallery = gallery_of(&dir, 1..=3 * PAGE_TILES);
    gallery.write().unwrap();
    // A write puts a new file in place: a file left alone keeps its inode.
    let inode = |path: std::path::PathBuf| std::fs::metadata(path).unwrap().ino();
    let before: Vec<u64> = (1..=3)
        .map(|n| inode(dir.join(PAGES).join(format!("{n}.html"))))
        .collect();
    let index_before = inode(dir.join(INDEX));

    gallery.add(ended(2 * PAGE_TILES + 500, "task_failed"));
    gallery.write().unwrap();
    let after: Vec<u64> = (1..=3)
        .map(|n| inode(dir.join(PAGES).join(format!("{n}.html"))))
        .collect();
    assert_eq!(
        after[..2],
        before[..2],
        "pages 1 and 2 did not change and were not written"
    );
    assert_ne!(after[2], before[2], "page 3 was");
    assert_ne!(
        inode(dir.join(INDEX)),
        index_before,
        "and the index, whose totals changed"
    );
    assert!(std::fs::read_to_string(dir.join(INDEX))
        .unwrap()
        .contains("lines 2001–3000</a>: 999 saved · 1 ended"));
    // Nothing changed: nothing is written but the index.
    gallery.write().unwrap();
    let again: Vec<u64> = (1..=3)
        .map(|n| inode(dir.join(PAGES).join(format!("{n}.html"))))
        .collect();
    assert_eq!(again, after);
}

#[test]
fn a_page_put_away_takes_a_late_result_with_its_other_lines() {
    let dir = Dir::new("gallery-pages-late");
    // Eight pages, more than the gallery holds in memory at once: the first
    // ones are put away as the later ones come.
    let mut gallery = gallery_of(&dir, 1..=8 * PAGE_TILES);
    gallery.write().unwrap();
    assert!(
        dir.join(PAGES).join("1.jsonl").is_file(),
        "page 1's lines were put away"
    );
    // A late result for line 10 (a retried line, another worker's).
    gallery.add(ended(10, "task_failed"));
    gallery.write().unwrap();
    assert_eq!(gallery.len() as u64, 8 * PAGE_TILES, "replaced, not added");
    let first = page(&dir, 1);
    assert_eq!(tiles(&first) as u64, PAGE_TILES, "its other lines are still there");
    assert!(first.contains("id=\"line-10\" data-line=\"10\" data-status=\"ended\""));
    assert_eq!(first.matches("data-status=\"saved\"").count() as u64, PAGE_TILES - 1);
    let index = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert!(index.contains("<h1>8000 lines in 8 pages</h1>"), "{}", &index[..1500]);
}

#[test]
fn a_rebuild_of_a_large_folder_gives_the_pages_the_run_kept() {
    let dir = Dir::new("gallery-pages-rebuild");
    image(&dir.0, "shared.png", 64, 48);
    let mut lines: Vec<_> = (1..=2500).map(|line| saved(line, "shared.png")).collect();
    // The last result of a line wins, wherever it comes in the file.
    lines.push(ended(3, "task_failed"));
    crate::common::results::results(&dir.0, &lines);
    let gallery = Gallery::rebuild(&dir.0).unwrap();
    assert_eq!(gallery.len(), 2500);
    let first = page(&dir, 1);
    assert!(first.contains("data-line=\"3\" data-status=\"ended\""));
    let index = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert!(index.contains("lines 1–1000</a>: 999 saved · 1 ended"), "{index}");
    assert!(index.contains("lines 2001–2500</a>: 500 saved"), "{index}");
}

#[test]
fn a_pages_folder_that_is_a_link_is_not_written_through() {
    let dir = Dir::new("gallery-pages-link");
    let elsewhere = Dir::new("gallery-pages-link-target");
    std::os::unix::fs::symlink(&elsewhere.0, dir.join(PAGES)).unwrap();
    // Enough pages that some are put away (their lines kept beside them)
    // before the first write.
    let mut gallery = gallery_of(&dir, 1..=6 * PAGE_TILES);
    let refused = gallery.write().unwrap_err();
    assert!(
        matches!(refused, genapi_gallery::GalleryError::NotOurs { .. }),
        "{refused}"
    );
    assert_eq!(
        std::fs::read_dir(&elsewhere.0).unwrap().count(),
        0,
        "nothing was written where the link points"
    );

    // A link put in place of pages/ during a run: pages already written
    // (so unchanged) and put away then are not written through it either.
    let dir = Dir::new("gallery-pages-link-later");
    let mut gallery = gallery_of(&dir, 1..=4 * PAGE_TILES);
    gallery.write().unwrap();
    std::fs::rename(dir.join(PAGES), dir.join("moved")).unwrap();
    std::os::unix::fs::symlink(&elsewhere.0, dir.join(PAGES)).unwrap();
    for line in 4 * PAGE_TILES + 1..=7 * PAGE_TILES {
        gallery.add(saved(line, "shared.png"));
    }
    assert!(gallery.write().is_err());
    assert_eq!(std::fs::read_dir(&elsewhere.0).unwrap().count(), 0);
}

#[test]
fn pages_of_lines_far_apart_link_the_pages_that_exist() {
    let dir = Dir::new("gallery-pages-sparse");
    image(&dir.0, "shared.png", 64, 48);
    let mut gallery = Gallery::new(&dir.0);
    for line in [1, 5 * PAGE_TILES + 1, 9 * PAGE_TILES + 1] {
        gallery.add(saved(line, "shared.png"));
    }
    gallery.write().unwrap();
    let middle = page(&dir, 6);
    assert!(middle.contains("href=\"1.html\" rel=\"prev\""), "{middle}");
    assert!(middle.contains("href=\"10.html\" rel=\"next\""), "{middle}");
    assert!(!dir.join(PAGES).join("2.html").exists(), "no page without lines");
    let last = page(&dir, 10);
    assert!(last.contains("href=\"6.html\" rel=\"prev\"") && !last.contains("rel=\"next\""));
}

#[test]
fn a_gallery_says_why_of_the_first_ten_thousand_images_it_cannot_read() {
    let dir = Dir::new("gallery-pages-unreadable");
    let mut gallery = Gallery::new(&dir.0);
    for line in 1..=10_050 {
        gallery.add(saved(line, "missing.png"));
    }
    gallery.write().unwrap();
    assert_eq!(gallery.unreadable().len(), 10_000, "a results file may name millions");
    assert_eq!(gallery.unreadable().keys().last(), Some(&10_000));
    let last = page(&dir, 11);
    assert_eq!(
        last.matches("no thumbnail: not a file of the output folder").count(),
        50,
        "each tile says why all the same"
    );
}
