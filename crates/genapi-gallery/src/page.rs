//! The page: HTML with its style inline, no script, nothing from the
//! network.
//!
//! Every text a tile shows comes from a results file, and prompts and
//! messages are the user's or the service's words: each is escaped, so a
//! prompt such as `<img src=x onerror=…>` shows as text and never runs.
//! Tiles carry their line, status and task as `data-` attributes, which is
//! what a program (or a test) reading the page relies on rather than on its
//! wording.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;

use crate::thumbnail::Thumbnail;
use genapi_batch::{ResultLine, Standing};

/// The page's style: a grid of tiles that reflows with the window.
const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;background:#fafafa;color:#222}\
h1{font-size:1.3em;margin:0 0 .3em}header p{margin:.2em 0}\
.tiles{display:flex;flex-wrap:wrap;gap:12px}\
.tile{margin:0;width:210px;background:#fff;border:1px solid #ddd;border-radius:6px;padding:8px;overflow-wrap:anywhere}\
.tile img{display:block;max-width:192px;height:auto;margin:0 auto 6px}\
.tile.ended,.tile.refused,.tile.gone,.tile.invalid{border-color:#c33;background:#fff5f5}\
.tile.accepted,.tile.unanswered,.tile.unsent{border-color:#c90;background:#fffbf0}\
.failure .class{color:#c33;text-transform:uppercase;font-size:.85em}\
.prompt{margin:.2em 0;color:#444}dl{display:grid;grid-template-columns:auto 1fr;gap:0 .6em;margin:.3em 0 0;font-size:.9em}\
dt{color:#777}dd{margin:0}code{font-size:.9em}\
table.grid{border-collapse:collapse;margin:1em 0}table.grid th{font-weight:normal;color:#555;padding:4px;text-align:left;vertical-align:top;max-width:220px}\
table.grid td{padding:4px;vertical-align:top}nav{margin:0 0 .6em}ol.pages{columns:3 20em;padding-left:2.5em}";

/// The order statuses are counted in: what went well first, the standings
/// of [`Standing::ALL`] and then lines that were not jobs.
const STATUS_ORDER: [&str; 9] = [
    Standing::ALL[0].as_str(),
    Standing::ALL[1].as_str(),
    Standing::ALL[2].as_str(),
    Standing::ALL[3].as_str(),
    Standing::ALL[4].as_str(),
    Standing::ALL[5].as_str(),
    Standing::ALL[6].as_str(),
    Standing::ALL[7].as_str(),
    INVALID,
];

// Every standing has its place in the order.
const _: () = assert!(STATUS_ORDER.len() == Standing::ALL.len() + 1);

/// The status of a line of the job file that is not a job.
const INVALID: &str = "invalid";

/// Each line's tile, as HTML ready to be put on its page: made once when
/// its result comes ([`tile`]), so writing a page again is putting its
/// tiles together, not making them again.
pub(crate) type Tiles = BTreeMap<u64, String>;

/// What every page the gallery writes carries near its start, so a page
/// is replaced only when the gallery wrote it (see `gallery.rs`).
const MARK: &str = "<meta name=\"generator\" content=\"genapi-gallery\">";

/// Whether the first bytes of a file show a page the gallery wrote.
pub(crate) fn is_ours(head: &[u8]) -> bool {
    head.windows(MARK.len()).any(|window| window == MARK.as_bytes())
}

/// Where a page sits: beside the results (the only page of a small
/// gallery, `index.html`) or in `pages/` (one of many; its tiles' links to
/// images and thumbnails climb out of it, see [`tile`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Place {
    /// For one of many pages: its number (from 1), and the numbers of the
    /// pages before and after it, if any (pages with no line are not
    /// written, so a neighbour may be further than one away).
    pub(crate) of: Option<(u64, Option<u64>, Option<u64>)>,
}

impl Place {
    /// `index.html`, the only page.
    pub(crate) const ALONE: Place = Place { of: None };
}

/// What every page says of its batch beyond its lines.
#[derive(Clone, Debug, Default)]
pub(crate) struct About {
    /// The job file the batch runs, as given (made safe to show).
    pub(crate) job_file: Option<String>,
    /// Whether the batch is still running: its index then reloads itself.
    pub(crate) running: bool,
}

/// How often the index of a running batch reloads itself, in seconds: a
/// tab left open follows the batch, and stops once the batch has ended
/// (the last page written has no reload).
const RELOAD_SECONDS: u32 = 5;

/// A page's start: the document's head with its title and style, and the
/// reload while the batch runs when `reloads`.
fn head(page: &mut String, title: &str, reloads: bool) {
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    page.push_str(MARK);
    if reloads {
        let _ = write!(page, "<meta http-equiv=\"refresh\" content=\"{RELOAD_SECONDS}\">");
    }
    page.push_str("<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">");
    // Nothing may be fetched but this folder's own thumbnails and images.
    page.push_str(
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; img-src 'self' file:; style-src 'unsafe-inline'\">",
    );
    let _ = write!(
        page,
        "<title>{}</title><style>{STYLE}</style></head><body>",
        escape(title)
    );
}

/// The page of `lines` (by line number), with each saved line's
/// thumbnail.
/// Only `index.html` reloads itself while the batch runs: the pages of a
/// large gallery are found from it.
pub(crate) fn render(lines: &BTreeMap<u64, ResultLine>, tiles: &Tiles, place: Place, about: &About) -> String {
    let mut page = String::with_capacity(1024 + lines.len() * 700);
    let totals = Totals::of(lines.values());
    match place.of {
        None => {
            head(
                &mut page,
                &format!("genapi batch: {} lines", lines.len()),
                about.running,
            );
            header(&mut page, &totals, &format!("{} lines", lines.len()), about);
        }
        Some((number, prev, next)) => {
            head(&mut page, &format!("genapi batch: page {number}"), false);
            let (first, last) = (
                lines.keys().next().copied().unwrap_or(0),
                lines.keys().last().copied().unwrap_or(0),
            );
            page.push_str("<nav>");
            let _ = write!(page, "<a href=\"../{INDEX_NAME}\">all pages</a>");
            if let Some(prev) = prev {
                let _ = write!(page, " · <a href=\"{prev}.html\" rel=\"prev\">page {prev}</a>");
            }
            if let Some(next) = next {
                let _ = write!(page, " · <a href=\"{next}.html\" rel=\"next\">page {next}</a>");
            }
            page.push_str("</nav>");
            header(
                &mut page,
                &totals,
                &format!("page {number}: lines {first}–{last}"),
                about,
            );
        }
    }
    let (cells, mut others): (Vec<&ResultLine>, Vec<&ResultLine>) =
        lines.values().partition(|line| line.grid.is_some());
    if !cells.is_empty() {
        let left = grid(&mut page, &cells, tiles);
        others.extend(left);
        others.sort_by_key(|line| line.line);
    }
    if !others.is_empty() {
        page.push_str("<section class=\"tiles\">");
        for line in others {
            page.push_str(tiles.get(&line.line).map_or("", String::as_str));
        }
        page.push_str("</section>");
    }
    page.push_str("</body></html>\n");
    page
}

/// The name of the gallery's first page, which links to the others.
const INDEX_NAME: &str = "index.html";

/// `index.html` of a gallery of many pages: the totals, and a link to each
/// page with its lines and their statuses. `pages` holds each page's
/// number (from 1) and totals.
pub(crate) fn render_index(pages: &[(u64, &Totals)], about: &About) -> String {
    let mut all = Totals::default();
    for (_, totals) in pages {
        all.add(totals);
    }
    let mut page = String::with_capacity(1024 + pages.len() * 200);
    head(&mut page, &format!("genapi batch: {} lines", all.lines), about.running);
    header(
        &mut page,
        &all,
        &format!("{} lines in {} pages", all.lines, pages.len()),
        about,
    );
    page.push_str("<ol class=\"pages\">");
    for (number, totals) in pages {
        let _ = write!(
            page,
            "<li data-page=\"{number}\"><a href=\"pages/{number}.html\">lines {}–{}</a>: {}</li>",
            totals.first,
            totals.last,
            statuses(totals)
        );
    }
    page.push_str("</ol></body></html>\n");
    page
}

/// What a set of lines comes to: the page's header, and the index's line
/// for a page. Small whatever the number of lines, so a gallery keeps the
/// totals of every page while it holds the lines of a few.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Totals {
    /// Lines counted.
    pub(crate) lines: usize,
    /// The first and last line numbers.
    first: u64,
    last: u64,
    /// Lines by status: each of [`STATUS_ORDER`], and `other`.
    by_status: BTreeMap<&'static str, usize>,
    /// Lines not saved, by their class: each a batch writes, and
    /// `other`. Named from these lists, the totals of every page of a
    /// gallery take little whatever its results file says.
    by_class: BTreeMap<&'static str, usize>,
    credits: f64,
    /// From the first line's start to the last line's end, as the results say.
    span: Option<(f64, f64)>,
}

impl Totals {
    /// The totals of `lines`.
    pub(crate) fn of<'a>(lines: impl Iterator<Item = &'a ResultLine>) -> Totals {
        let mut totals = Totals::default();
        for line in lines {
            totals.lines += 1;
            totals.first = if totals.lines == 1 {
                line.line
            } else {
                totals.first.min(line.line)
            };
            totals.last = totals.last.max(line.line);
            *totals.by_status.entry(status_name(line)).or_default() += 1;
            if line.standing() != Some(Standing::Saved) {
                if let Some(class) = &line.class {
                    *totals.by_class.entry(class_name(class)).or_default() += 1;
                }
            }
            // A cost below zero (a results file not the batch's) is none.
            if let Some(cost) = line.cost.filter(|c| c.is_finite() && *c >= 0.0) {
                totals.credits += cost;
            }
            if let Some(end) = line.finished_at {
                let start = end - line.elapsed.unwrap_or(0.0);
                if start.is_finite() && end.is_finite() {
                    totals.widen(start, end);
                }
            }
        }
        totals
    }

    /// Counts `other`'s lines too.
    pub(crate) fn add(&mut self, other: &Totals) {
        if other.lines == 0 {
            return;
        }
        self.first = if self.lines == 0 {
            other.first
        } else {
            self.first.min(other.first)
        };
        self.last = self.last.max(other.last);
        self.lines += other.lines;
        for (status, count) in &other.by_status {
            *self.by_status.entry(status).or_default() += count;
        }
        for (class, count) in &other.by_class {
            *self.by_class.entry(class).or_default() += count;
        }
        self.credits += other.credits;
        if let Some((start, end)) = other.span {
            self.widen(start, end);
        }
    }

    fn widen(&mut self, start: f64, end: f64) {
        self.span = Some(match self.span {
            Some((from, to)) => (from.min(start), to.max(end)),
            None => (start, end),
        });
    }

    /// The wall time, from the first start to the last end.
    fn wall_time(&self) -> Option<f64> {
        self.span.map(|(start, end)| (end - start).max(0.0))
    }
}

/// A line's status as the gallery names it: its standing's word (results
/// of earlier releases said `succeeded` for `saved`, …), `invalid`, or
/// `other` for a word no release wrote.
fn status_name(line: &ResultLine) -> &'static str {
    match line.standing() {
        Some(standing) => standing.as_str(),
        None if line.status == INVALID => INVALID,
        None => "other",
    }
}

/// A class as the totals count it: its name when a batch writes it, else
/// `other` (a class of its own).
fn class_name(class: &str) -> &'static str {
    genapi::FailureClass::from_word(class)
        .unwrap_or(genapi::FailureClass::Other)
        .as_str()
}

/// A class as a person reads it: `at the credit cap` for `credit_cap`, as the
/// command's summary says it (the results file keeps the word a program
/// reads).
fn class_words(class: &str) -> String {
    genapi::FailureClass::from_word(class).map_or_else(|| class.replace('_', " "), |known| known.in_words().into())
}

/// Lines by status, in [`STATUS_ORDER`]: `9 saved · 1 ended`.
fn statuses(totals: &Totals) -> String {
    let mut statuses: Vec<(&&str, &usize)> = totals.by_status.iter().collect();
    statuses.sort_by_key(|(status, _)| {
        STATUS_ORDER
            .iter()
            .position(|known| known == *status)
            .unwrap_or(usize::MAX)
    });
    let statuses: Vec<String> = statuses.iter().map(|(s, n)| format!("{n} {}", escape(s))).collect();
    statuses.join(" · ")
}

/// The job file, whether the batch runs, and totals: lines by status,
/// failures by class, credits, wall time.
fn header(page: &mut String, totals: &Totals, title: &str, about: &About) {
    let _ = write!(page, "<header><h1>{}</h1>", escape(title));
    if let Some(job_file) = &about.job_file {
        let _ = write!(
            page,
            "<p class=\"job-file\">job file <code>{}</code></p>",
            escape(job_file)
        );
    }
    if about.running {
        page.push_str("<p class=\"running\">the batch is running: this page reloads itself</p>");
    }
    let _ = write!(page, "<p class=\"statuses\">{}</p>", statuses(totals));
    if !totals.by_class.is_empty() {
        let classes: Vec<String> = totals
            .by_class
            .iter()
            .map(|(c, n)| format!("{n} {}", escape(&class_words(c))))
            .collect();
        let _ = write!(
            page,
            "<p class=\"classes\">not saved, by class: {}</p>",
            classes.join(" · ")
        );
    }
    let _ = write!(page, "<p class=\"credits\">{} credits</p>", decimal(totals.credits));
    if let Some(wall) = totals.wall_time() {
        let _ = write!(page, "<p class=\"wall\">wall time {}</p>", seconds(wall));
    }
    page.push_str("</header>");
}

/// Cells of sweeps: rows and columns in the order their lines come. A cell
/// named twice keeps its first line; the others are tiles below the grid, so
/// no line goes unshown. A grid mostly empty (cells scattered over many rows
/// and columns) would be a table far larger than its tiles: its cells are
/// tiles then.
fn grid<'a>(page: &mut String, cells: &[&'a ResultLine], tiles: &Tiles) -> Vec<&'a ResultLine> {
    let mut rows: Vec<&str> = Vec::new();
    let mut columns: Vec<&str> = Vec::new();
    let (mut row_of, mut column_of) = (HashMap::new(), HashMap::new());
    let mut at: HashMap<(usize, usize), &ResultLine> = HashMap::new();
    let mut left = Vec::new();
    for line in cells {
        let Some(cell) = &line.grid else { continue };
        let row = place(&mut rows, &mut row_of, &cell.row);
        let column = place(&mut columns, &mut column_of, &cell.column);
        match at.entry((row, column)) {
            std::collections::hash_map::Entry::Occupied(_) => left.push(*line),
            std::collections::hash_map::Entry::Vacant(place) => {
                place.insert(line);
            }
        }
    }
    if rows.len() * columns.len() > 4 * at.len() + 64 {
        return cells.to_vec();
    }
    page.push_str("<table class=\"grid\"><tr><th></th>");
    for column in &columns {
        let _ = write!(page, "<th class=\"column\">{}</th>", escape(column));
    }
    page.push_str("</tr>");
    for (r, row) in rows.iter().enumerate() {
        let _ = write!(page, "<tr><th class=\"row\">{}</th>", escape(row));
        for c in 0..columns.len() {
            page.push_str("<td>");
            if let Some(line) = at.get(&(r, c)) {
                page.push_str(tiles.get(&line.line).map_or("", String::as_str));
            }
            page.push_str("</td>");
        }
        page.push_str("</tr>");
    }
    page.push_str("</table>");
    left
}

fn place<'a>(list: &mut Vec<&'a str>, index: &mut HashMap<&'a str, usize>, label: &'a str) -> usize {
    *index.entry(label).or_insert_with(|| {
        list.push(label);
        list.len() - 1
    })
}

/// One line's tile, with its thumbnail if it has one (else why not, in
/// `unreadable`), its links starting with `prefix` (see [`Place`]).
pub(crate) fn tile(line: &ResultLine, thumbnail: Option<&Thumbnail>, unreadable: Option<&str>, prefix: &str) -> String {
    let mut html = String::with_capacity(700);
    let page = &mut html;
    let name = line.name.clone().unwrap_or_else(|| format!("line {}", line.line));
    let _ = write!(
        page,
        "<figure class=\"tile {status}\" id=\"line-{n}\" data-line=\"{n}\" data-status=\"{status}\"",
        n = line.line,
        status = status_name(line)
    );
    if let Some(task) = &line.task_id {
        let _ = write!(page, " data-task=\"{}\"", escape(task));
    }
    page.push('>');
    match (thumbnail, &line.file) {
        (Some(thumb), Some(_)) => {
            let _ = write!(
                page,
                "<a href=\"{href}\"><img src=\"{src}\" width=\"{w}\" height=\"{h}\" loading=\"lazy\" decoding=\"async\" alt=\"{alt}\"></a>",
                href = escape(&format!("{prefix}{}", url_path(&thumb.image))),
                src = escape(&format!("{prefix}{}", url_path(&thumb.path))),
                w = thumb.width,
                h = thumb.height,
                alt = escape(&name)
            );
        }
        _ if line.standing() != Some(Standing::Saved) => {
            page.push_str("<div class=\"failure\">");
            let _ = write!(
                page,
                "<b class=\"class\">{}</b>",
                escape(
                    &line
                        .class
                        .as_deref()
                        .map_or_else(|| status_name(line).to_string(), class_words)
                )
            );
            if let Some(error) = &line.error {
                let _ = write!(page, "<p class=\"message\">{}</p>", escape(error));
            }
            if let Some(task) = &line.task_id {
                let _ = write!(page, "<p class=\"task\">task <code>{}</code></p>", escape(task));
            }
            page.push_str("</div>");
        }
        _ => {
            let why = unreadable.unwrap_or("the image could not be read");
            let _ = write!(page, "<p class=\"missing\">no thumbnail: {}</p>", escape(why));
        }
    }
    let _ = write!(page, "<figcaption><b class=\"name\">{}</b>", escape(&name));
    if let Some(prompt) = &line.prompt {
        let _ = write!(page, "<p class=\"prompt\">{}</p>", escape(prompt));
    }
    page.push_str("<dl>");
    let mut field = |label: &str, value: String| {
        let _ = write!(page, "<dt>{label}</dt><dd class=\"{label}\">{}</dd>", escape(&value));
    };
    if let Some(model) = &line.model {
        field("model", model.clone());
    }
    if let (Some(width), Some(height)) = (line.width, line.height) {
        field("size", format!("{width}×{height}"));
    }
    if let Some(seed) = line.seed {
        field("seed", seed.to_string());
    }
    if let Some(cost) = line.cost {
        field("cost", decimal(cost));
    }
    if let Some(duration) = line.duration {
        field("duration", seconds(duration));
    }
    page.push_str("</dl></figcaption></figure>");
    html
}

/// A path of the output folder as a relative URL: each segment
/// percent-encoded, so a file name with `#`, `?` or a space still links to
/// itself.
fn url_path(path: &str) -> String {
    path.split('/')
        .map(|segment| {
            let mut out = String::new();
            for byte in segment.bytes() {
                if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                    out.push(byte as char);
                } else {
                    let _ = write!(out, "%{byte:02X}");
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// Text made safe for HTML content and attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c if genapi_text::is_unsafe_to_show(c) => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// A number of credits as written in results: no trailing zeros.
fn decimal(value: f64) -> String {
    let text = format!("{value:.4}");
    text.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn seconds(value: f64) -> String {
    format!("{value:.1} s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_from_a_results_file_never_becomes_markup() {
        assert_eq!(
            escape("<img src=x onerror=\"alert(1)\">&'"),
            "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;"
        );
        assert_eq!(escape("a\u{1b}[31mb"), "a [31mb");
        assert_eq!(escape("left\u{202e}thgir"), "left thgir", "nothing reorders the text");
        assert_eq!(url_path("thumbs/a #1?.png.jpg"), "thumbs/a%20%231%3F.png.jpg");
    }

    #[test]
    fn the_wall_time_runs_from_the_first_start_to_the_last_end_and_pages_add_up() {
        let line = |n, finished_at, elapsed| ResultLine {
            line: n,
            status: "saved".into(),
            finished_at: Some(finished_at),
            elapsed: Some(elapsed),
            cost: Some(0.5),
            ..ResultLine::default()
        };
        let (one, two) = (line(1, 110.0, 10.0), line(2, 130.0, 5.0));
        let both = Totals::of([&one, &two].into_iter());
        assert_eq!(both.wall_time(), Some(30.0));
        assert_eq!(Totals::default().wall_time(), None);
        let mut added = Totals::of(std::iter::once(&two));
        added.add(&Totals::of(std::iter::once(&one)));
        assert_eq!(added, both, "the totals of pages are those of their lines");
    }

    #[test]
    fn totals_name_the_statuses_and_classes_a_batch_writes_and_count_the_rest_as_other() {
        let line = |n: u64, status: &str, class: &str| ResultLine {
            line: n,
            status: status.into(),
            class: Some(class.into()),
            ..ResultLine::default()
        };
        let mut lines: Vec<ResultLine> = (1..=999)
            .map(|n| line(n, &format!("status {n}"), &format!("class {n}")))
            .collect();
        lines.push(line(1000, "failed", "timeout"));
        lines.push(line(1001, "ended", "task_failed"));
        lines.push(line(1002, "invalid", "validation"));
        let totals = Totals::of(lines.iter());
        assert_eq!(
            statuses(&totals),
            "2 ended · 1 invalid · 999 other",
            "an earlier release's `failed` is `ended`"
        );
        let classes: Vec<(&str, usize)> = totals.by_class.iter().map(|(c, n)| (*c, *n)).collect();
        assert_eq!(
            classes,
            [("other", 999), ("task_failed", 1), ("timeout", 1), ("validation", 1)]
        );
    }
}
