//! The page and its thumbnails, read as files.

use genapi_batch::GridCell;
use genapi_gallery::{Gallery, GalleryError, INDEX, THUMBNAIL_SIDE, THUMBS};

use crate::common::results::{ended, image, results, saved};
use crate::common::Dir;

#[test]
fn every_line_has_a_tile_and_every_image_a_small_thumbnail() {
    let dir = Dir::new("gallery-tiles");
    image(&dir.0, "fox.png", 1024, 768);
    image(&dir.0, "whale.jpg", 512, 512);
    results(
        &dir.0,
        &[saved(1, "fox.png"), saved(2, "whale.jpg"), ended(3, "moderated")],
    );
    let gallery = Gallery::rebuild(&dir.0).unwrap();
    assert_eq!(gallery.len(), 3);
    assert!(gallery.unreadable().is_empty(), "{:?}", gallery.unreadable());
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    for expected in [
        "data-line=\"1\" data-status=\"saved\" data-task=\"task-1\"",
        "src=\"thumbs/fox.jpg\"",
        "href=\"fox.png\"",
        "prompt of line 2",
        "512×384",
        "1001",
        "data-line=\"3\" data-status=\"ended\" data-task=\"task-3\"",
        "<b class=\"class\">moderated</b>",
        "<code>task-3</code>",
        "3 lines",
        "2 saved · 1 ended",
        "0.1 credits",
        "wall time 4.0 s",
    ] {
        assert!(page.contains(expected), "{expected:?} is not on the page:\n{page}");
    }
    for name in ["fox.jpg", "whale.jpg"] {
        let thumb = dir.join(THUMBS).join(name);
        let (width, height) = image::image_dimensions(&thumb).unwrap();
        assert!(width.max(height) <= THUMBNAIL_SIDE, "{name}: {width}×{height}");
        let bytes = std::fs::metadata(&thumb).unwrap().len();
        assert!(bytes < 16 * 1024, "{name}: {bytes} bytes");
    }
    assert!(
        !page.contains("http://") && !page.contains("https://"),
        "nothing from the network"
    );
}

#[test]
fn rebuilding_gives_the_same_page_and_keeps_the_thumbnails() {
    let dir = Dir::new("gallery-rebuild");
    image(&dir.0, "fox.png", 300, 200);
    results(&dir.0, &[saved(1, "fox.png"), ended(2, "timeout")]);
    Gallery::rebuild(&dir.0).unwrap();
    let first = std::fs::read(dir.join(INDEX)).unwrap();
    let thumb = dir.join(THUMBS).join("fox.jpg");
    let made = std::fs::metadata(&thumb).unwrap().modified().unwrap();
    Gallery::rebuild(&dir.0).unwrap();
    assert_eq!(std::fs::read(dir.join(INDEX)).unwrap(), first);
    assert_eq!(
        std::fs::metadata(&thumb).unwrap().modified().unwrap(),
        made,
        "not made again"
    );
}

#[test]
fn workers_sharing_an_output_folder_keep_its_gallery_without_undoing_each_others_writes() {
    let dir = Dir::new("gallery-writers");
    image(&dir.0, "fox.png", 64, 64);
    results(&dir.0, &[saved(1, "fox.png"), ended(2, "timeout")]);
    // Each worker of a batch keeps the page current: two writers of one
    // temporary name would rename each other's file away mid-write.
    let writers: Vec<_> = (0..2)
        .map(|_| {
            let folder = dir.0.clone();
            std::thread::spawn(move || {
                let mut gallery = Gallery::rebuild(&folder).unwrap();
                for _ in 0..200 {
                    gallery.write().unwrap();
                }
            })
        })
        .collect();
    for writer in writers {
        writer.join().unwrap();
    }
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert!(page.contains("data-line=\"2\""), "{page}");
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .filter_map(|entry| entry.ok())
        .filter(|entry| entry.file_name().to_string_lossy().ends_with(".partial"))
        .collect();
    assert!(left.is_empty(), "temporary files left: {left:?}");
}

#[test]
fn the_last_result_of_a_line_wins_as_in_the_results_file() {
    let dir = Dir::new("gallery-last");
    image(&dir.0, "fox.png", 64, 64);
    let mut gallery = Gallery::new(&dir.0);
    gallery.add(ended(1, "network"));
    gallery.add(saved(1, "fox.png"));
    gallery.write().unwrap();
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert!(page.contains("data-status=\"saved\""), "{page}");
    assert!(!page.contains("data-status=\"ended\""), "{page}");
}

#[test]
fn cells_of_a_sweep_are_laid_out_as_a_grid() {
    let dir = Dir::new("gallery-grid");
    let mut lines = Vec::new();
    for (row, prompt) in ["a red fox", "a blue whale"].into_iter().enumerate() {
        for (column, seed) in [1, 2, 3].into_iter().enumerate() {
            let line = (row * 3 + column + 1) as u64;
            let file = format!("r{row}-c{column}.png");
            image(&dir.0, &file, 96, 64);
            let mut cell = saved(line, &file);
            cell.prompt = Some(prompt.into());
            cell.grid = Some(GridCell {
                row: prompt.into(),
                column: format!("seed {seed}"),
            });
            lines.push(cell);
        }
    }
    lines.push(saved(7, "r0-c0.png"));
    results(&dir.0, &lines);
    Gallery::rebuild(&dir.0).unwrap();
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    let grid = &page[page.find("<table class=\"grid\">").unwrap()..page.find("</table>").unwrap()];
    assert_eq!(grid.matches("<th class=\"column\">").count(), 3, "{grid}");
    assert_eq!(grid.matches("<th class=\"row\">").count(), 2, "{grid}");
    let columns: Vec<&str> = grid.split("<th class=\"column\">").skip(1).map(|s| &s[..6]).collect();
    assert_eq!(columns, ["seed 1", "seed 2", "seed 3"]);
    let second_row = &grid[grid.find("a blue whale</th>").unwrap()..];
    let lines_in_row: Vec<&str> = second_row.split("data-line=\"").skip(1).map(|s| &s[..1]).collect();
    assert_eq!(lines_in_row, ["4", "5", "6"], "the row's cells in column order");
    assert!(
        page[page.find("</table>").unwrap()..].contains("data-line=\"7\""),
        "a line outside the sweep is a tile"
    );
}

#[test]
fn what_a_results_file_says_never_becomes_markup_or_a_read_outside_the_folder() {
    let dir = Dir::new("gallery-hostile");
    let outside = Dir::new("gallery-hostile-outside");
    image(&outside.0, "secret.png", 64, 64);
    let mut escape_attempt = saved(1, "../gallery-hostile-outside/secret.png");
    escape_attempt.prompt = Some("<script>alert(1)</script><img src=https://example.com/x>".into());
    let mut absolute = saved(2, &outside.join("secret.png").display().to_string());
    absolute.name = Some("\"><b>bold</b>".into());
    std::os::unix::fs::symlink(outside.join("secret.png"), dir.join("linked.png")).unwrap();
    let linked = saved(3, "linked.png");
    results(&dir.0, &[escape_attempt, absolute, linked]);
    let gallery = Gallery::rebuild(&dir.0).unwrap();
    assert_eq!(gallery.unreadable().len(), 3, "{:?}", gallery.unreadable());
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert!(!page.contains("<script>") && !page.contains("<b>bold</b>"), "{page}");
    assert!(page.contains("&lt;script&gt;"), "{page}");
    assert!(!page.contains("<img src=https"), "{page}");
    assert!(!dir.join(THUMBS).exists() || std::fs::read_dir(dir.join(THUMBS)).unwrap().count() == 0);
}

#[test]
fn a_folder_without_results_is_named_with_what_to_check() {
    let dir = Dir::new("gallery-empty");
    let error = Gallery::rebuild(&dir.0).unwrap_err();
    assert!(matches!(error, GalleryError::Results { .. }), "{error}");
    assert!(error.to_string().contains("output folder of a batch"), "{error}");
    std::fs::write(
        dir.join("results.jsonl"),
        "{\"line\": 1, \"status\": \"succeeded\"}\nnot json\n",
    )
    .unwrap();
    let error = Gallery::rebuild(&dir.0).unwrap_err();
    assert!(matches!(error, GalleryError::Line { number: 2, .. }), "{error}");
}

#[test]
fn a_tile_links_to_its_image_beside_the_page_whatever_folder_the_batch_was_run_from() {
    let dir = Dir::new("gallery-links");
    image(&dir.0, "fox.png", 64, 64);
    // The batch writes the file as the command was given its --out.
    results(&dir.0, &[saved(1, "shots/fox.png")]);
    Gallery::rebuild(&dir.0).unwrap();
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert!(page.contains("<a href=\"fox.png\">"), "{page}");
}

#[test]
fn a_cell_named_twice_shows_both_lines_and_a_scattered_sweep_is_tiles() {
    let dir = Dir::new("gallery-twice");
    image(&dir.0, "a.png", 64, 64);
    let cell = |line| {
        let mut result = saved(line, "a.png");
        result.grid = Some(GridCell {
            row: "a fox".into(),
            column: "seed 1".into(),
        });
        result
    };
    results(&dir.0, &[cell(1), cell(2)]);
    Gallery::rebuild(&dir.0).unwrap();
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert_eq!(page.matches("<figure").count(), 2, "every paid line has its tile");
    // 300 cells on the diagonal of a 300 by 300 table: tiles instead.
    let scattered: Vec<_> = (1..=300)
        .map(|line| {
            let mut result = saved(line, "a.png");
            result.grid = Some(GridCell {
                row: format!("row {line}"),
                column: format!("column {line}"),
            });
            result
        })
        .collect();
    results(&dir.0, &scattered);
    Gallery::rebuild(&dir.0).unwrap();
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert!(!page.contains("<table"), "no table of 90,000 cells");
    assert_eq!(page.matches("<figure").count(), 300);
}

#[test]
fn a_thumbnail_folder_that_is_a_link_is_not_written_through() {
    let dir = Dir::new("gallery-thumbs-link");
    let elsewhere = Dir::new("gallery-thumbs-elsewhere");
    image(&dir.0, "fox.png", 64, 64);
    std::os::unix::fs::symlink(&elsewhere.0, dir.join(THUMBS)).unwrap();
    results(&dir.0, &[saved(1, "fox.png")]);
    let gallery = Gallery::rebuild(&dir.0).unwrap();
    assert_eq!(gallery.unreadable().len(), 1, "{:?}", gallery.unreadable());
    assert_eq!(
        std::fs::read_dir(&elsewhere.0).unwrap().count(),
        0,
        "nothing written elsewhere"
    );
}

/// A write that fails after its temporary file was made (here the rename is
/// refused: `index.html` and a thumbnail's name are folders; a full disk
/// does the same) removes that file: every write has a name of its own, so
/// a run writing the page every few seconds would leave one each time.
#[test]
fn failed_writes_leave_no_temporary_file() {
    let dir = Dir::new("gallery-leftovers");
    image(&dir.0, "fox.png", 64, 64);
    results(&dir.0, &[saved(1, "fox.png")]);
    std::fs::create_dir_all(dir.join(INDEX)).unwrap();
    std::fs::create_dir_all(dir.join(THUMBS).join("fox.jpg")).unwrap();
    assert!(Gallery::rebuild(&dir.0).is_err(), "index.html is a folder");
    let mut gallery = Gallery::new(&dir.0);
    for _ in 0..5 {
        assert!(gallery.write().is_err(), "index.html is a folder");
    }
    let partials = |folder: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(folder)
            .unwrap()
            .filter_map(|entry| entry.ok())
            .map(|entry| entry.file_name().to_string_lossy().into_owned())
            .filter(|name| name.ends_with(".partial"))
            .collect()
    };
    let (page, thumbs) = (partials(&dir.0), partials(&dir.join(THUMBS)));
    assert!(
        page.is_empty() && thumbs.is_empty(),
        "temporary files left: {page:?} {thumbs:?}"
    );
}

/// A results file an earlier release wrote, in its words (`succeeded`,
/// `moderated`, `pending`, `unknown`, `not_submitted`), is shown in the words
/// of today: the thumbnail of a saved line, and each line's standing.
#[test]
fn a_results_file_of_an_earlier_release_is_shown_in_todays_words() {
    let dir = Dir::new("gallery-earlier-words");
    image(&dir.0, "fox.png", 64, 64);
    let earlier = [
        r#"{"line": 1, "status": "succeeded", "name": "fox", "file": "fox.png"}"#,
        r#"{"line": 2, "status": "moderated", "class": "moderated"}"#,
        r#"{"line": 3, "status": "pending", "task_id": "task-3"}"#,
        r#"{"line": 4, "status": "unknown", "class": "unknown"}"#,
        r#"{"line": 5, "status": "not_submitted", "class": "credit_cap"}"#,
        r#"{"line": 6, "status": "invalid", "class": "validation"}"#,
    ];
    std::fs::write(dir.join("results.jsonl"), earlier.join("\n") + "\n").unwrap();
    Gallery::rebuild(&dir.0).unwrap();
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    for expected in [
        "1 saved · 1 ended · 1 accepted · 1 unanswered · 1 unsent · 1 invalid",
        "data-line=\"1\" data-status=\"saved\"",
        "src=\"thumbs/fox.jpg\"",
        "data-line=\"2\" data-status=\"ended\"",
        "data-line=\"3\" data-status=\"accepted\"",
        "data-line=\"5\" data-status=\"unsent\"",
    ] {
        assert!(page.contains(expected), "{expected:?} is not on the page:\n{page}");
    }
}

/// A line not saved shows why in words, as the command's summary says it
/// (`task failed`, `at the credit cap`), never the results file's code names; a
/// line with no class shows where it stands, in today's word.
#[test]
fn why_a_line_was_not_saved_is_shown_in_words() {
    let dir = Dir::new("gallery-class-words");
    let capped = r#"{"line": 2, "status": "unsent", "class": "credit_cap", "error": "the cap was reached"}"#;
    let earlier = r#"{"line": 3, "status": "not_submitted"}"#;
    let text = [
        serde_json::to_string(&ended(1, "task_failed")).unwrap(),
        capped.into(),
        earlier.into(),
    ];
    std::fs::write(dir.join("results.jsonl"), text.join("\n") + "\n").unwrap();
    Gallery::rebuild(&dir.0).unwrap();
    let page = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    for expected in [
        "not saved, by class: 1 at the credit cap · 1 task failed",
        "<b class=\"class\">task failed</b>",
        "<b class=\"class\">at the credit cap</b>",
        "<b class=\"class\">unsent</b>",
    ] {
        assert!(page.contains(expected), "{expected:?} is not on the page:\n{page}");
    }
    for code in ["\"class\">credit_cap", "\"class\">task_failed", "not_submitted"] {
        assert!(!page.contains(code), "{code:?} is on the page:\n{page}");
    }
}

/// A page left open follows a running batch: the index written while the
/// batch runs reloads itself and says so, the one written once it has
/// ended does not; every page names the job file, made safe to show.
#[test]
fn the_index_of_a_running_batch_reloads_itself_and_names_its_job_file() {
    let dir = Dir::new("gallery-running");
    image(&dir.0, "fox.png", 64, 64);
    let mut gallery = Gallery::new(&dir.0);
    gallery.set_job_file("jobs/<night>\u{1b}[31m.jsonl");
    gallery.set_running(true);
    gallery.add(saved(1, "fox.png"));
    gallery.write().unwrap();
    let running = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    let reload = "<meta http-equiv=\"refresh\" content=\"5\">";
    assert!(running.contains(reload), "{running}");
    assert!(running.contains("this page reloads itself"), "{running}");
    let named = "job file <code>jobs/&lt;night&gt; [31m.jsonl</code>";
    assert!(running.contains(named), "{running}");
    assert!(!running.contains('\u{1b}'), "{running}");

    gallery.add(ended(2, "task_failed"));
    gallery.set_running(false);
    gallery.write().unwrap();
    let ended = std::fs::read_to_string(dir.join(INDEX)).unwrap();
    assert!(!ended.contains("http-equiv=\"refresh\""), "{ended}");
    assert!(!ended.contains("reloads itself"), "{ended}");
    assert!(ended.contains(named), "{ended}");
    assert!(ended.contains("data-line=\"2\""), "{ended}");
}
