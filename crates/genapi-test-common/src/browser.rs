//! A gallery page opened in a real headless Chromium (Debian's `chromium`).
//!
//! The page has no script of its own, so the test brings one: a harness
//! page beside it loads the gallery in a frame, makes every thumbnail load
//! at once (the page asks for lazy loading, which a headless window would
//! never trigger for tiles out of view), waits for each to decode, and
//! writes what it found as JSON into its own DOM, which Chromium prints
//! (`--dump-dom`) once the page's virtual time has run out. What the page
//! asked of the network is read from Chromium's network log: the requests a
//! page on the file system starts carry `file://` as their initiator, so
//! those the browser makes for itself (updates, accounts) are never
//! mistaken for the page's.

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
    /// Every request the page made of the network (its URL); files of the
    /// page's folder are not network requests.
    pub network: Vec<String>,
    /// From the harness's start to the gallery's `load` event, in
    /// milliseconds, as the page measured it.
    pub load_ms: f64,
    /// How long the browser ran, start to exit.
    pub browser_time: Duration,
}

/// The browser's program, or `None` (outside CI) when it is not installed.
pub fn chromium() -> Option<PathBuf> {
    crate::installed(&["chromium", "chromium-browser"], "Chromium", "chromium")
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
    let net_log = profile.with_extension("netlog.json");
    let started = Instant::now();
    // A browser that hangs ends the test, not the whole run (coreutils'
    // `timeout` kills it after two minutes).
    let output = Command::new("timeout")
        .arg("120")
        .arg(browser)
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
        .arg(format!("--log-net-log={}", net_log.display()))
        .arg(format!("file://{}", harness.display()))
        .output()
        .unwrap();
    let browser_time = started.elapsed();
    let _ = std::fs::remove_dir_all(&profile);
    let _ = std::fs::remove_file(&harness);
    let network = page_requests(&net_log);
    let _ = std::fs::remove_file(&net_log);
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
        network,
        load_ms: report["load_ms"].as_f64().unwrap_or(f64::MAX),
        browser_time,
    }
}

/// The URLs of the requests a page of the file system made of the network,
/// from Chromium's network log.
fn page_requests(net_log: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(net_log).unwrap_or_else(|e| panic!("no network log ({e})"));
    let log: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("the network log does not read ({e})"));
    let mut urls: Vec<String> = log["events"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|event| &event["params"])
        .filter(|params| {
            params["initiator"]
                .as_str()
                .is_some_and(|from| from.starts_with("file:"))
        })
        .filter_map(|params| params["url"].as_str())
        .filter(|url| !url.starts_with("file:"))
        .map(str::to_string)
        .collect();
    urls.sort();
    urls.dedup();
    urls
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
<script>
// The frame is made here, after its load handler is set: a small page can
// load before a script placed after the frame would run.
const frame = document.createElement('iframe');
frame.style.width = '1400px';
frame.style.height = '900px';
frame.onload = async () => {
  const loaded = performance.now();
  const page = frame.contentDocument;
  const images = [...page.images];
  images.forEach(image => { image.loading = 'eager'; });
  // Settled once loaded or failed (`decode()` may never settle for an image
  // that was waiting to be scrolled to).
  await Promise.all(images.map(image => image.complete ? null : new Promise(done => {
    image.addEventListener('load', done);
    image.addEventListener('error', done);
  })));
  const tiles = [...page.querySelectorAll('figure.tile')].map(tile => ({
    line: tile.dataset.line, status: tile.dataset.status, task: tile.dataset.task || null, text: tile.innerText
  }));
  document.getElementById('out').textContent = JSON.stringify({
    images: images.map(image => [image.getAttribute('src'), image.naturalWidth]), tiles, load_ms: loaded
  });
};
frame.src = 'PAGE';
document.body.appendChild(frame);
</script></body></html>"#;
