//! No import circles between the modules of any crate of the workspace
//! (each crate read on its own): each module names (`crate::x`,
//! `super::x`) only modules below it in one order, so each can be read
//! knowing only what comes before it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module's path (`["mock", "routes"]`) for a file under `root`.
fn module_of(root: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(root).unwrap().with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts
}

fn rust_files(dir: &Path, skip: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path == skip {
            continue;
        }
        if path.is_dir() {
            rust_files(&path, skip, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Which modules each module names, the crate root aside.
fn graph(root: &Path, skip: &Path) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let mut files = Vec::new();
    rust_files(root, skip, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|f| module_of(root, f)).collect();
    let longest_module = |path: &[String]| {
        (1..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|candidate| modules.contains(candidate))
    };
    let mut edges = BTreeMap::new();
    for file in &files {
        let module = module_of(root, file);
        let text = std::fs::read_to_string(file).unwrap();
        // Unit tests may reach anywhere.
        let text = text.split("#[cfg(test)]\nmod tests").next().unwrap_or_default();
        let mut named = BTreeSet::new();
        for line in text.lines().map(str::trim).filter(|l| !l.starts_with("//")) {
            for (anchor, base) in [
                ("crate::", Vec::new()),
                ("super::", module[..module.len().saturating_sub(1)].to_vec()),
            ] {
                for (at, _) in line.match_indices(anchor) {
                    if at > 0 && line.as_bytes()[at - 1].is_ascii_alphanumeric() {
                        continue;
                    }
                    let rest = &line[at + anchor.len()..];
                    let heads: Vec<&str> = match rest.strip_prefix('{') {
                        Some(list) => list.split('}').next().unwrap_or("").split(',').collect(),
                        None => vec![rest],
                    };
                    for head in heads {
                        let path: Vec<String> = head
                            .trim()
                            .split("::")
                            .map(|s| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect())
                            .take_while(|s: &String| !s.is_empty())
                            .collect();
                        let mut full = base.clone();
                        full.extend(path);
                        if let Some(target) = longest_module(&full).filter(|t| *t != module) {
                            named.insert(target);
                        }
                    }
                }
            }
        }
        edges.insert(module, named);
    }
    edges
}

/// Every pair of modules that reach each other.
fn circles(edges: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    let reaches = |from: &Vec<String>, to: &Vec<String>| {
        let mut seen = BTreeSet::new();
        let mut stack = vec![from.clone()];
        while let Some(next) = stack.pop() {
            for target in edges.get(&next).into_iter().flatten() {
                if target == to {
                    return true;
                }
                if seen.insert(target.clone()) {
                    stack.push(target.clone());
                }
            }
        }
        false
    };
    let mut found = Vec::new();
    for (a, named) in edges {
        for b in named {
            if a < b && reaches(b, a) {
                found.push(format!("{} <-> {}", a.join("::"), b.join("::")));
            }
        }
    }
    found
}

/// Each crate of the workspace's source, from the library's folder.
fn crate_source(relative: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// The source folder of every crate of the workspace: the library, each
/// crate under `crates/`, and `xtask`.
fn every_crates_source() -> Vec<PathBuf> {
    let mut sources = vec![crate_source("src"), crate_source("xtask/src")];
    for entry in std::fs::read_dir(crate_source("crates")).unwrap() {
        let source = entry.unwrap().path().join("src");
        if source.is_dir() {
            sources.push(source);
        }
    }
    sources.sort();
    sources
}

#[test]
fn no_crate_has_import_circles() {
    let sources = every_crates_source();
    // The library, xtask and the crates under crates/ (batch, cli,
    // document, files, gallery, ledger, mock, test-common): a walk that
    // found fewer would check nothing of those it missed.
    assert!(sources.len() >= 10, "{sources:#?}");
    let mut found = Vec::new();
    for source in &sources {
        for circle in circles(&graph(source, Path::new(""))) {
            found.push(format!("{}: {circle}", source.display()));
        }
    }
    assert!(found.is_empty(), "modules that name each other: {found:#?}");
}

#[test]
fn a_circle_is_seen() {
    let dir = std::env::temp_dir().join(format!("genapi-module-graph-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::B;\npub struct A;\n").unwrap();
    std::fs::write(dir.join("b.rs"), "use crate::{a::A, lib};\npub struct B;\n").unwrap();
    let found = circles(&graph(&dir, Path::new("")));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, vec!["a <-> b".to_string()]);
}

/// The batch's stores (the journal and the ledger) share the events'
/// model with its runner, never the runner itself: no store names the
/// runner's module or its `Batch`, outside comments.
#[test]
fn the_batchs_stores_do_not_know_its_runner() {
    let source = crate_source("crates/genapi-batch/src");
    let mut stores = vec![source.join("journal.rs"), source.join("store.rs")];
    for entry in std::fs::read_dir(crate_source("crates/genapi-ledger/src")).unwrap() {
        stores.push(entry.unwrap().path());
    }
    assert!(stores.len() > 10, "{stores:#?}");
    for file in stores {
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            let names_runner = code.contains("run::")
                || code
                    .split(|c: char| !c.is_alphanumeric() && c != '_')
                    .any(|word| word == "Batch");
            assert!(!names_runner, "{}:{}: {line}", file.display(), number + 1);
        }
    }
}
