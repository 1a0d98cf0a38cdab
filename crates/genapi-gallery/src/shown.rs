//! What the gallery keeps of a line: its texts cut to a bound as the line
//! comes, before anything is escaped, held or kept beside a page.
//!
//! A results file holds whatever its job file and the service said, and a
//! page escapes what it shows, which may make a text six times longer
//! (`"` is `&quot;`). A prompt of 300,000 characters is shown as its start
//! and its length, `… (300000 characters)`, so a gallery of such lines
//! costs what one of ordinary lines does.

use std::path::Path;

use genapi_batch::{GridCell, ResultLine};
use genapi_text::cut;

/// The characters shown of a prompt, a message or a sweep's row (which is
/// a prompt): a tile's worth of text.
pub(crate) const LONG_TEXT: usize = 1000;

/// The characters shown of a name: a line's name, its file's name (at
/// most 255 bytes on most file systems) or a sweep's column.
pub(crate) const NAME: usize = 256;

/// The characters shown of a word: a status, a class, a model, a task id.
pub(crate) const WORD: usize = 128;

/// `line` with each text cut to its bound, its file reduced to the file's
/// name (all the gallery reads of it: see `thumbnail::image_in`), and what
/// no page shows left out.
pub(crate) fn shown(line: ResultLine) -> ResultLine {
    let text = |text: Option<String>, most: usize| text.map(|text| cut(&text, most).into_owned());
    let file = line.file.map(|file| {
        let name = Path::new(&file)
            .file_name()
            .and_then(|name| name.to_str())
            .unwrap_or(&file);
        cut(name, NAME).into_owned()
    });
    ResultLine {
        status: cut(&line.status, WORD).into_owned(),
        name: text(line.name, NAME),
        file,
        model: text(line.model, WORD),
        prompt: text(line.prompt, LONG_TEXT),
        task_id: text(line.task_id, WORD),
        polling_url: None,
        error: text(line.error, LONG_TEXT),
        class: text(line.class, WORD),
        grid: line.grid.map(|cell| GridCell {
            row: cut(&cell.row, LONG_TEXT).into_owned(),
            column: cut(&cell.column, NAME).into_owned(),
        }),
        ..line
    }
}

/// About what a line held takes, its texts and itself: what the gallery
/// counts of the lines it holds in memory.
pub(crate) fn held_bytes(line: &ResultLine) -> usize {
    let texts = [
        &line.name,
        &line.file,
        &line.model,
        &line.prompt,
        &line.task_id,
        &line.error,
        &line.class,
    ];
    let grid = line.grid.as_ref().map_or(0, |cell| cell.row.len() + cell.column.len());
    std::mem::size_of::<ResultLine>()
        + line.status.len()
        + grid
        + texts
            .iter()
            .map(|text| text.as_ref().map_or(0, String::len))
            .sum::<usize>()
}
