//! The dependency lines the documentation gives a program work when pasted:
//! each `path` (once `/path/to/genapi` is the checkout) is a crate of this
//! workspace by that name, and each registry line asks for the workspace's
//! version.

use std::path::{Path, PathBuf};

/// What the documentation asks a reader to replace with their checkout.
const CHECKOUT: &str = "/path/to/genapi";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The ```toml blocks of a text, each as cargo would read it.
fn toml_blocks(text: &str) -> Vec<toml::Table> {
    let mut blocks = Vec::new();
    let mut open: Option<String> = None;
    for line in text.lines() {
        match (&mut open, line.trim()) {
            (None, "```toml") => open = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(block.parse().unwrap_or_else(|e| panic!("not TOML ({e}):\n{block}")));
                open = None;
            }
            (Some(block), _) => block.push_str(&format!("{line}\n")),
            (None, _) => {}
        }
    }
    blocks
}

/// The rustdoc of a source file, as its reader sees it.
fn crate_doc(source: &str) -> String {
    source
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("//!"))
        .map(|line| line.strip_prefix(' ').unwrap_or(line))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `genapi*` dependency of the blocks: its name and its specification.
fn genapi_dependencies(blocks: &[toml::Table]) -> Vec<(String, toml::Value)> {
    let mut found = Vec::new();
    for block in blocks {
        for table in ["dependencies", "dev-dependencies"] {
            let Some(dependencies) = block.get(table).and_then(toml::Value::as_table) else {
                continue;
            };
            for (name, spec) in dependencies.iter().filter(|(name, _)| name.starts_with("genapi")) {
                found.push((name.clone(), spec.clone()));
            }
        }
    }
    found
}

fn package(manifest: &toml::Table) -> &toml::Table {
    manifest["package"].as_table().expect("[package]")
}

fn workspace_version() -> String {
    let manifest: toml::Table = read("Cargo.toml").parse().unwrap();
    manifest["workspace"]["package"]["version"]
        .as_str()
        .unwrap()
        .to_string()
}

/// A requirement like `0.1` asks for `0.1.0` when its numbers begin the version's.
fn asks_for(requirement: &str, version: &str) -> bool {
    let wanted: Vec<&str> = requirement.trim_start_matches('^').split('.').collect();
    let have: Vec<&str> = version.split('.').collect();
    wanted.len() <= have.len() && wanted.iter().zip(&have).all(|(w, h)| w == h)
}

fn check_lines(source: &str, dependencies: &[(String, toml::Value)]) -> (usize, usize) {
    let version = workspace_version();
    let (mut paths, mut registry) = (0, 0);
    for (name, spec) in dependencies {
        if let Some(path) = spec.get("path").and_then(toml::Value::as_str) {
            let relative = path
                .strip_prefix(CHECKOUT)
                .unwrap_or_else(|| panic!("{source}: {name}'s path {path} does not start with {CHECKOUT}"));
            let folder = root().join(relative.trim_start_matches('/'));
            let manifest: toml::Table = std::fs::read_to_string(folder.join("Cargo.toml"))
                .unwrap_or_else(|e| panic!("{source}: {name}'s path {path} has no Cargo.toml: {e}"))
                .parse()
                .unwrap();
            assert_eq!(
                package(&manifest)["name"].as_str(),
                Some(name.as_str()),
                "{source}: {path}"
            );
            paths += 1;
        } else if let Some(requirement) = spec.as_str() {
            assert!(
                asks_for(requirement, &version),
                "{source}: {name} = {requirement:?}, but the workspace is at {version}"
            );
            registry += 1;
        } else {
            panic!("{source}: {name} = {spec:?} is neither a path nor a registry line");
        }
    }
    (paths, registry)
}

#[test]
fn the_guides_dependency_lines_name_the_workspaces_crates_and_version() {
    let blocks = toml_blocks(&read("docs/library.md"));
    let dependencies = genapi_dependencies(&blocks);
    let (paths, registry) = check_lines("docs/library.md", &dependencies);
    let named = |name: &str| dependencies.iter().filter(|(n, _)| n == name).count();
    for name in ["genapi", "genapi-batch", "genapi-mock"] {
        assert_eq!(named(name), 2, "docs/library.md: {name} by path and from the registry");
    }
    assert_eq!((paths, registry), (3, 3));
}

#[test]
fn the_crate_docs_dependency_line_names_the_checkout() {
    let blocks = toml_blocks(&crate_doc(&read("src/lib.rs")));
    let dependencies = genapi_dependencies(&blocks);
    assert_eq!(check_lines("src/lib.rs", &dependencies), (1, 0), "{dependencies:?}");
}
