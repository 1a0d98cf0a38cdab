//! The pages are skimmed before they are read: no block of prose (lines
//! between blank lines, outside code and tables, a list's item included)
//! runs past a screen.

use std::path::Path;

/// A screen of text, in lines.
const SCREEN: usize = 30;

/// The blocks of prose of a Markdown text: where each begins (from 1), and
/// its length in lines.
fn prose_blocks(text: &str) -> Vec<(usize, usize)> {
    let mut blocks = Vec::new();
    let (mut in_code, mut start) = (false, None);
    for (index, line) in text.lines().chain([""]).enumerate() {
        let ends_a_block = line.starts_with("```")
            || in_code
            || line.trim().is_empty()
            || line.starts_with('#')
            || line.starts_with('|');
        if line.starts_with("```") {
            in_code = !in_code;
        }
        match (ends_a_block, start) {
            (true, Some(begun)) => {
                blocks.push((begun + 1, index - begun));
                start = None;
            }
            (false, None) => start = Some(index),
            _ => {}
        }
    }
    blocks
}

#[test]
fn the_block_rule_counts_what_a_reader_sees() {
    let text = "# Title\none\ntwo\n\n```\ncode\ncode\n```\n- three\n- four\n  five\n| a |\nsix\n";
    assert_eq!(prose_blocks(text), [(2, 2), (9, 3), (13, 1)]);
}

#[test]
fn no_paragraph_of_the_docs_runs_past_a_screen() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<_> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let mut long = Vec::new();
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        for (line, length) in prose_blocks(&text) {
            if length > SCREEN {
                long.push(format!(
                    "{}:{line}: {length} lines",
                    page.strip_prefix(&root).unwrap_or(page).display()
                ));
            }
        }
    }
    assert!(pages.len() > 5, "the docs were found");
    assert!(
        long.is_empty(),
        "paragraphs longer than a screen ({SCREEN} lines); split them by subject: {long:#?}"
    );
}
