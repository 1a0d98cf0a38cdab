//! A gallery page opened in a real headless Chromium (Debian's `chromium`).
//!
//! The page has no script of its own, so the test brings one: a harness
//! page beside it loads the gallery in a frame, makes every thumbnail load
//! at once (the page asks for lazy loading, which a headless window would
//! never trigger for tiles out of view), waits for each to decode, and
//! writes what it found as JSON into its own DOM, which Chromium prints
//! (`--dump-dom`) once the page's virtual time has run out. What the page
//! fetched is read from the frame's own resource timing, so requests the
//! browser makes for itself (updates, dictionaries; switched off here
//! anyway) are never mistaken for the page's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

/// What the browser saw of a gallery.
#[derive(Debug)]
pub struct Seen {
    /// Each `<img>`: its `src` and its decoded width (0 when it did not
    /// decode).
    pub images: Vec<(String, u64)>,
    /// Each tile: `data-line`, `data-status`, `data-task` and its visible
    /// text.
    pub tiles: Vec<Value>,
    /// Every resource the page fetched (its URL).
    pub resources: Vec<String>,
    /// From the harness's start to the gallery's `load` event, in
    /// milliseconds, as the page measured it.
    pub load_ms: f64,
    /// How long the browser ran, start to exit.
    pub browser_time: Duration,
}

/// The browser's program, or `None` (outside CI) when it is not installed.
pub fn chromium() -> Option<PathBuf> {
    let found = ["chromium", "chromium-browser"].into_iter().find_map(|name| {
        std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|path| path.is_file())
        })
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "Chromium is not installed (Debian's chromium package); CI must have it"
        );
        eprintln!("skipped: Chromium is not installed (Debian's chromium package)");
    }
    found
}

/// Opens `index` (a gallery's `index.html`) and reports what loaded.
pub fn open(browser: &Path, index: &Path) -> Seen {
    let dir = index.parent().expect("the page is in a folder");
    let harness = dir.join(".browser-harness.html");
    let page = index.file_name().and_then(|n| n.to_str()).expect("a page name");
    std::fs::write(&harness, HARNESS.replace("PAGE", page)).unwrap();
    let profile = std::env::temp_dir().join(format!(
        "genapi-chromium-{}-{}",
        std::process::id(),
        dir.file_name().and_then(|n| n.to_str()).unwrap_or("page")
    ));
    let started = Instant::now();
    let output = Command::new(browser)
        .args([
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--allow-file-access-from-files",
            "--virtual-time-budget=30000",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", harness.display()))
        .output()
        .unwrap();
    let browser_time = started.elapsed();
    let _ = std::fs::remove_dir_all(&profile);
    let _ = std::fs::remove_file(&harness);
    let dom = String::from_utf8_lossy(&output.stdout);
    let report = dom
        .split_once("<pre id=\"out\">")
        .and_then(|(_, rest)| rest.split_once("</pre>"))
        .map(|(json, _)| unescape(json))
        .unwrap_or_default();
    let report: Value = serde_json::from_str(&report).unwrap_or_else(|e| {
        panic!(
            "the harness reported nothing readable ({e}):\n{dom}\n{}",
            String::from_utf8_lossy(&output.stderr)
        )
    });
    Seen {
        images: report["images"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|i| (i[0].as_str().unwrap_or("").to_string(), i[1].as_u64().unwrap_or(0)))
            .collect(),
        tiles: report["tiles"].as_array().cloned().unwrap_or_default(),
        resources: report["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_str().map(str::to_string))
            .collect(),
        load_ms: report["load_ms"].as_f64().unwrap_or(f64::MAX),
        browser_time,
    }
}

/// Text of an element as `--dump-dom` writes it.
fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

const HARNESS: &str = r#"<!DOCTYPE html><html><body><pre id="out">pending</pre>
<iframe id="gallery" src="PAGE" style="width:1400px;height:900px"></iframe>
<script>
const frame = document.getElementById('gallery');
frame.onload = async () => {
  const loaded = performance.now();
  const page = frame.contentDocument;
  const images = [...page.images];
  images.forEach(image => { image.loading = 'eager'; });
  await Promise.all(images.map(image => image.decode().catch(() => {})));
  const tiles = [...page.querySelectorAll('figure.tile')].map(tile => ({
    line: tile.dataset.line, status: tile.dataset.status, task: tile.dataset.task || null, text: tile.innerText
  }));
  const resources = frame.contentWindow.performance.getEntriesByType('resource').map(entry => entry.name);
  document.getElementById('out').textContent = JSON.stringify({
    images: images.map(image => [image.getAttribute('src'), image.naturalWidth]), tiles, resources, load_ms: loaded
  });
};
</script></body></html>"#;
