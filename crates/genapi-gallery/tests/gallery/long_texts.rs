//! Results of enormous texts: a page shows the start of each and its
//! length, and the gallery holds what a page of ordinary lines takes,
//! whatever the results file holds.

use std::path::Path;
use std::process::{Command, Stdio};

use genapi_batch::ResultLine;
use genapi_gallery::{Gallery, GalleryError, INDEX, PAGES, PAGE_TILES};

use crate::common::results::{ended, results};
use crate::common::Dir;

/// What a page escapes most: each of these takes five or six characters.
const HOSTILE: &str = "\"<&'";

/// An ended line whose prompt is `length` characters of [`HOSTILE`].
fn long_prompt(line: u64, length: usize) -> ResultLine {
    let mut result = ended(line, "moderated");
    result.prompt = Some(HOSTILE.repeat(length / HOSTILE.len()));
    result
}

/// Set in the process [`rebuilt_alone`] starts: the folder to rebuild.
const REBUILD: &str = "GENAPI_GALLERY_TEST_REBUILD";

/// Where that process says the most memory it had resident, in bytes.
const RESIDENT: &str = "resident-peak";

/// The most memory the process rebuilding a gallery of long prompts may
/// have resident: what the test binary itself takes (about 5 MiB) and a
/// few pages of cut texts. Holding the prompts whole, escaped, took ten
/// times as much.
const MOST_RESIDENT: u64 = 64 << 20;

#[test]
fn a_gallery_of_enormous_prompts_shows_their_start_and_holds_little() {
    if let Some(dir) = std::env::var_os(REBUILD) {
        // This test, run again by itself below: the rebuild alone.
        Gallery::rebuild(&dir).expect("the gallery of long prompts");
        std::fs::write(Path::new(&dir).join(RESIDENT), resident_peak().to_string()).unwrap();
        return;
    }
    let dir = Dir::new("gallery-long-prompts");
    // 1,200 lines (two pages) of 30,000 characters, 45 MB of results, and
    // one prompt of 300,000.
    let mut lines: Vec<ResultLine> = (1..=1200).map(|line| long_prompt(line, 30_000)).collect();
    lines[0] = long_prompt(1, 300_000);
    results(&dir.0, &lines);
    drop(lines);
    let resident = rebuilt_alone(&dir.0);

    let first = std::fs::read_to_string(dir.join(PAGES).join("1.html")).unwrap();
    let escaped = "&quot;&lt;&amp;&#39;";
    let shown = format!("<p class=\"prompt\">{}… (300000 characters)</p>", escaped.repeat(250));
    assert!(first.contains(&shown), "the start of the prompt and its length");
    assert!(first.contains(&format!("{}… (30000 characters)</p>", escaped.repeat(250))));
    assert!(
        first.len() < 10 << 20,
        "a page of 1,000 cut prompts: {} bytes",
        first.len()
    );
    assert!(dir.join(PAGES).join("2.html").exists() && dir.join(INDEX).exists());
    // Only Linux says what a process had resident.
    if let Some(resident) = resident {
        assert!(
            resident < MOST_RESIDENT,
            "the rebuild was resident in {} MiB",
            resident >> 20
        );
    }
}

/// Rebuilds the gallery of `dir` in a process of its own (this test binary,
/// running the test above alone), and returns the most memory it had
/// resident, when the system says.
fn rebuilt_alone(dir: &Path) -> Option<u64> {
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "long_texts::a_gallery_of_enormous_prompts_shows_their_start_and_holds_little",
        ])
        .env(REBUILD, dir)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the rebuild failed: {status}");
    let said = std::fs::read_to_string(dir.join(RESIDENT)).unwrap();
    said.parse().ok().filter(|bytes| *bytes > 0)
}

/// The most memory this process has had resident since it started (its
/// program's, not the one that started it), in bytes: 0 where the system
/// does not say (`VmHWM` is Linux's).
fn resident_peak() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kilobytes = status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
    kilobytes.unwrap_or(0) * 1024
}

#[test]
fn a_page_put_away_keeps_its_lines_cut() {
    let dir = Dir::new("gallery-long-kept");
    let mut gallery = Gallery::new(&dir.0);
    // Five pages: the first is put away, its lines kept beside it.
    gallery.add(long_prompt(1, 300_000));
    for line in 2..=4 * PAGE_TILES + 1 {
        gallery.add(ended(line, "timeout"));
    }
    gallery.write().unwrap();
    let kept = std::fs::read_to_string(dir.join(PAGES).join("1.jsonl")).unwrap();
    assert!(kept.contains("… (300000 characters)"), "the cut prompt is kept");
    assert!(kept.len() < 1 << 20, "{} bytes kept", kept.len());
    // Read back (the page changes again), it is shown as it was.
    gallery.add(ended(2, "timeout"));
    gallery.write().unwrap();
    let first = std::fs::read_to_string(dir.join(PAGES).join("1.html")).unwrap();
    assert!(first.contains("… (300000 characters)</p>"), "shown as first cut");
    assert_eq!(first.matches("characters)").count(), 1, "and never cut again");
}

#[test]
fn a_line_longer_than_any_a_batch_writes_is_refused_unread() {
    let dir = Dir::new("gallery-long-line");
    let mut enormous = ended(2, "moderated");
    enormous.prompt = Some("x".repeat(17 << 20));
    results(&dir.0, &[ended(1, "moderated"), enormous]);
    let error = Gallery::rebuild(&dir.0).unwrap_err();
    assert!(matches!(error, GalleryError::Line { number: 2, .. }), "{error}");
    assert!(error.to_string().contains("longer than 16 MiB"), "{error}");

    // A line numbered beyond any job file would make a page of its own.
    results(&dir.0, &[ended(1, "moderated"), ended(u64::MAX / 2, "moderated")]);
    let error = Gallery::rebuild(&dir.0).unwrap_err();
    assert!(matches!(error, GalleryError::Line { number: 2, .. }), "{error}");
    assert!(
        error.to_string().contains("beyond the lines of any job file"),
        "{error}"
    );
}

#[test]
fn pages_of_long_texts_are_put_away_sooner() {
    let dir = Dir::new("gallery-heavy-pages");
    let mut gallery = Gallery::new(&dir.0);
    // Every text as long as a page shows, of a character escaped six times
    // over: about 19 KB a line, held and shown.
    let heavy = |line| {
        let mut result = ended(line, "moderated");
        result.prompt = Some("\"".repeat(1000));
        result.error = result.prompt.clone();
        result.name = Some("\"".repeat(256));
        result.model = Some("\"".repeat(128));
        result.task_id = result.model.clone();
        result
    };
    for line in 1..=2 * PAGE_TILES + 900 {
        gallery.add(heavy(line));
    }
    gallery.write().unwrap();
    // Four pages are held of ordinary lines; of these three, the first is
    // put away already, and only the first.
    assert!(dir.join(PAGES).join("1.jsonl").exists());
    assert!(!dir.join(PAGES).join("2.jsonl").exists());
    let first = std::fs::read_to_string(dir.join(PAGES).join("1.html")).unwrap();
    assert_eq!(first.matches("<figure").count() as u64, PAGE_TILES);
}
