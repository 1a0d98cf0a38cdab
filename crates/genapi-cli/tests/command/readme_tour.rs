//! The README opens with its two commands, then a short tour; every
//! command of the tour runs as written on the built-in mock, without a
//! warning.

use crate::common::{genapi_alone, Dir};

const README: &str = include_str!("../../../../README.md");

/// The words of a shell line: quotes group, a backslash outside them
/// keeps the next character as it is, `#` after a space starts a comment.
pub fn words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    let mut escaped = false;
    for c in line.chars() {
        if escaped {
            word.push(c);
            escaped = false;
            continue;
        }
        match (quote, c) {
            (None, '\\') => {
                escaped = true;
                started = true;
            }
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, '#') if !started => break,
            (None, ' ') => {
                if started {
                    words.push(std::mem::take(&mut word));
                    started = false;
                }
            }
            (None, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

#[test]
fn the_readme_opens_with_two_commands_then_a_tour_that_runs_as_written() {
    assert!(
        README.starts_with(
            "# genapi\n\n```sh\ncargo install --locked --debug --path crates/genapi-cli && genapi generate \
             \"a lighthouse at dusk\" --out lighthouse.jpg\ncargo test --workspace --all-features --no-fail-fast\n```\n"
        ),
        "the README's first screen"
    );
    // One build serves the first command and the tour: the package it
    // installs is the one whose `genapi` (the debug build, as here) the tour
    // runs.
    let manifest = include_str!("../../Cargo.toml");
    assert!(
        manifest.starts_with("[package]\nname = \"genapi-cli\"") && manifest.contains("[[bin]]\nname = \"genapi\""),
        "crates/genapi-cli builds the genapi command"
    );
    let first_section = README.lines().find(|line| line.starts_with("## "));
    assert_eq!(first_section, Some("## A short tour"));
    let tour = README
        .split("## A short tour")
        .nth(1)
        .unwrap()
        .split("\n## ")
        .next()
        .unwrap();
    let dir = Dir::new("readme-tour");
    let mut ran = 0;
    for block in tour.split("```sh\n").skip(1) {
        let block = block.split("\n```").next().unwrap();
        for line in block.lines() {
            let words = words(line);
            match words.first().map(String::as_str) {
                Some("echo") => {
                    // `>`: pasting the tour twice leaves the same file.
                    assert_eq!(words[2], ">", "{line}");
                    std::fs::write(dir.join(&words[3]), format!("{}\n", words[1])).unwrap();
                }
                Some("genapi") => {
                    let run = genapi_alone(&dir).args(&words[1..]).output().unwrap();
                    let stderr = String::from_utf8_lossy(&run.stderr);
                    assert_eq!(run.status.code(), Some(0), "{line}: {stderr}");
                    assert!(!stderr.contains("warning:"), "{line}: {stderr}");
                    ran += 1;
                }
                _ => panic!("a line of the tour this test does not know: {line}"),
            }
        }
    }
    assert!(ran >= 7, "the tour's commands ran: {ran}");
}
