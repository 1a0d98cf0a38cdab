//! The Rust public API of every published crate (the client, the mock, the
//! batch, the gallery and the document reader), as rustdoc sees it, in a
//! reviewed snapshot per crate: any change to a public name, signature,
//! field or trait impl shows up as a diff to accept with `cargo insta
//! review`. It lives with the workspace's checks rather than in one crate's
//! tests, as it reads all of them. The generated request and
//! response types (`api::types`) are left out: the generated code has its own
//! snapshot (`generated_code`).
//!
//! rustdoc's JSON output is not stable yet; `RUSTC_BOOTSTRAP=1` lets the
//! stable toolchain write it, and the renderer below reads only the parts it
//! needs (names, paths, signatures), skipping anything else.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The crates whose API is snapshotted, as cargo names them.
const PUBLISHED: [&str; 11] = [
    "genapi",
    "genapi-proxy",
    "genapi-batch",
    "genapi-ledger",
    "genapi-mock",
    "genapi-document",
    "genapi-gallery",
    "genapi-files",
    "genapi-text",
    "genapi-pixels",
    "genapi-domain",
];

/// Writes the published crates' rustdoc JSON (all features), once for all
/// the tests, with one `cargo doc` (one resolution of features, so the
/// dependencies are checked once) into a target directory of its own: run
/// in the one `cargo test` builds in, it would rebuild the dependencies
/// there under other flags and leave the doctests without them. CI's
/// documentation step runs the same command, so only rustdoc itself runs
/// again here.
fn rustdoc_json(package: &str) -> Value {
    static WRITTEN: std::sync::OnceLock<Result<std::path::PathBuf, String>> = std::sync::OnceLock::new();
    let written = WRITTEN.get_or_init(|| {
        // The workspace's root: this crate's parent folder.
        let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        // The target directory this test was built in, as an absolute path
        // (cargo's `tmp` folder is in it): a relative CARGO_TARGET_DIR was
        // meant from where cargo ran, which this test does not know.
        let target = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .expect("the target directory holds cargo's tmp folder")
            .join("public-api");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let packages = PUBLISHED.iter().flat_map(|package| ["-p", package]);
        let mut command = Command::new(cargo);
        // What `cargo test` tells this test about itself is not CI's: a
        // dependency's build script that reads it (ring reads
        // CARGO_MANIFEST_DIR and OUT_DIR) would be run again, and everything
        // after it.
        for (name, _) in std::env::vars_os() {
            let name = name.to_string_lossy().into_owned();
            let own = [
                "CARGO_MANIFEST_",
                "CARGO_PKG_",
                "CARGO_CRATE_",
                "CARGO_PRIMARY_",
                "CARGO_BIN_",
                "CARGO_TARGET_TMPDIR",
                "OUT_DIR",
            ];
            if own.iter().any(|prefix| name.starts_with(prefix)) {
                command.env_remove(name);
            }
        }
        let status = command
            .current_dir(root)
            .env("RUSTC_BOOTSTRAP", "1")
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("RUSTFLAGS")
            // rustdoc's own lints (broken links, …) fail the snapshot too.
            .env("RUSTDOCFLAGS", "-D warnings -Z unstable-options --output-format json")
            .args(["doc", "--no-deps", "--lib", "--all-features", "--quiet"])
            .args(packages)
            .status()
            .expect("cargo runs");
        // rustdoc runs once: its errors are printed once, above, and every
        // test fails pointing to them.
        if status.success() {
            Ok(target.join("doc"))
        } else {
            Err("rustdoc failed: its errors are printed above, once".to_string())
        }
    });
    let doc = match written {
        Ok(doc) => doc,
        Err(problem) => panic!("{problem}"),
    };
    let text =
        std::fs::read_to_string(doc.join(format!("{}.json", package.replace('-', "_")))).expect("rustdoc wrote JSON");
    serde_json::from_str(&text).expect("rustdoc JSON parses")
}

/// The attributes of an item that are part of its API: `#[non_exhaustive]`
/// (a struct that cannot be built, an enum that may grow), as a prefix.
fn marks(item: &Value) -> &'static str {
    if item["attrs"].to_string().contains("non_exhaustive") {
        "#[non_exhaustive] "
    } else {
        ""
    }
}

struct Surface<'a> {
    index: &'a Value,
    lines: BTreeSet<String>,
}

impl<'a> Surface<'a> {
    fn item(&self, id: &Value) -> Option<&'a Value> {
        self.index.get(id.to_string().trim_matches('"'))
    }

    fn walk(&mut self, id: &Value, path: &str) {
        let Some(item) = self.item(id) else { return };
        if item["visibility"] != "public" && item["inner"].get("use").is_none() {
            return;
        }
        self.walk_item(item, item["name"].as_str().unwrap_or(""), path);
    }

    /// An item under `name` (its own, or the name a re-export gives it).
    fn walk_item(&mut self, item: &'a Value, name: &str, path: &str) {
        let inner = &item["inner"];
        let here = if path.is_empty() {
            name.to_string()
        } else {
            format!("{path}::{name}")
        };
        if let Some(module) = inner.get("module") {
            self.lines.insert(format!("mod {here}"));
            // Generated types: see the generated code's snapshot.
            if here == "genapi::api::types" {
                return;
            }
            for child in module["items"].as_array().into_iter().flatten() {
                self.walk(child, &here);
            }
        } else if let Some(using) = inner.get("use") {
            let alias = using["name"].as_str().unwrap_or("");
            match using.get("id").and_then(|id| self.item(id)) {
                Some(target) if using["is_glob"] == true => {
                    for child in target["inner"]["module"]["items"].as_array().into_iter().flatten() {
                        self.walk(child, path);
                    }
                }
                Some(target) => self.walk_item(target, alias, path),
                None => {
                    self.lines.insert(format!(
                        "pub use {} as {path}::{alias}",
                        using["source"].as_str().unwrap_or("")
                    ));
                }
            }
        } else if let Some(record) = inner.get("struct") {
            self.lines.insert(format!(
                "{}struct {here}{}",
                marks(item),
                generics(&item["inner"]["struct"]["generics"])
            ));
            for field in record["kind"]["plain"]["fields"].as_array().into_iter().flatten() {
                if let Some(field) = self.item(field).filter(|f| f["visibility"] == "public") {
                    self.lines.insert(format!(
                        "field {here}.{}: {}",
                        field["name"].as_str().unwrap_or(""),
                        ty(&field["inner"]["struct_field"])
                    ));
                }
            }
            self.impls(&record["impls"], &here);
        } else if let Some(choice) = inner.get("enum") {
            self.lines.insert(format!("{}enum {here}", marks(item)));
            for variant in choice["variants"].as_array().into_iter().flatten() {
                if let Some(variant) = self.item(variant) {
                    let fields = match variant["inner"]["variant"]["kind"].get("struct") {
                        Some(kind) => {
                            let names: Vec<&str> = kind["fields"]
                                .as_array()
                                .into_iter()
                                .flatten()
                                .filter_map(|f| self.item(f))
                                .filter_map(|f| f["name"].as_str())
                                .collect();
                            format!(" {{ {} }}", names.join(", "))
                        }
                        None => String::new(),
                    };
                    self.lines.insert(format!(
                        "{}variant {here}::{}{fields}",
                        marks(variant),
                        variant["name"].as_str().unwrap_or("")
                    ));
                }
            }
            self.impls(&choice["impls"], &here);
        } else if let Some(function) = inner.get("function") {
            self.lines.insert(format!("fn {here}{}", signature(function)));
        } else if let Some(tr) = inner.get("trait") {
            self.lines.insert(format!("trait {here}"));
            for member in tr["items"].as_array().into_iter().flatten() {
                if let Some(member) = self.item(member) {
                    let text = match member["inner"].get("function") {
                        Some(function) => {
                            format!("fn {}{}", member["name"].as_str().unwrap_or(""), signature(function))
                        }
                        None => member["name"].as_str().unwrap_or("").to_string(),
                    };
                    self.lines.insert(format!("trait-item {here}::{text}"));
                }
            }
        } else if let Some(constant) = inner.get("constant") {
            self.lines.insert(format!("const {here}: {}", ty(&constant["type"])));
        } else if let Some(alias) = inner.get("type_alias") {
            self.lines.insert(format!("type {here} = {}", ty(&alias["type"])));
        } else if inner.get("macro").is_some() {
            self.lines.insert(format!("macro {here}"));
        } else if let Some(kind) = inner.as_object().and_then(|o| o.keys().next()) {
            self.lines.insert(format!("{kind} {here}"));
        }
    }

    fn impls(&mut self, impls: &Value, here: &str) {
        for id in impls.as_array().into_iter().flatten() {
            let Some(block) = self.item(id).map(|i| &i["inner"]["impl"]) else {
                continue;
            };
            if block["is_synthetic"] == true || !block["blanket_impl"].is_null() {
                continue;
            }
            match block["trait"].as_object() {
                Some(tr) => {
                    self.lines.insert(format!(
                        "impl {} for {here}",
                        path_with_args(&Value::Object(tr.clone()))
                    ));
                }
                None => {
                    for member in block["items"].as_array().into_iter().flatten() {
                        let Some(member) = self.item(member) else { continue };
                        if member["visibility"] != "public" {
                            continue;
                        }
                        let name = member["name"].as_str().unwrap_or("");
                        match member["inner"].get("function") {
                            Some(function) => {
                                self.lines.insert(format!("fn {here}::{name}{}", signature(function)));
                            }
                            None => {
                                self.lines.insert(format!("assoc {here}::{name}"));
                            }
                        }
                    }
                }
            }
        }
    }
}

fn generics(generics: &Value) -> String {
    let params: Vec<String> = generics["params"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| p["kind"].get("lifetime").is_none())
        .filter(|p| p["kind"]["type"]["is_synthetic"] != true)
        .map(|p| {
            let bounds: Vec<String> = p["kind"]["type"]["bounds"]
                .as_array()
                .into_iter()
                .flatten()
                .map(bound)
                .collect();
            let name = p["name"].as_str().unwrap_or("");
            if bounds.is_empty() {
                name.to_string()
            } else {
                format!("{name}: {}", bounds.join(" + "))
            }
        })
        .collect();
    if params.is_empty() {
        String::new()
    } else {
        format!("<{}>", params.join(", "))
    }
}

fn signature(function: &Value) -> String {
    let sig = &function["sig"];
    let inputs: Vec<String> = sig["inputs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|pair| {
            let name = pair[0].as_str().unwrap_or("_");
            if name == "self" {
                match ty(&pair[1]).as_str() {
                    "Self" => "self".to_string(),
                    "&Self" => "&self".to_string(),
                    "&mut Self" => "&mut self".to_string(),
                    other => format!("self: {other}"),
                }
            } else {
                format!("{name}: {}", ty(&pair[1]))
            }
        })
        .collect();
    let header = &function["header"];
    let prefix = if header["is_async"] == true { "async " } else { "" };
    let output = if sig["output"].is_null() {
        String::new()
    } else {
        format!(" -> {}", ty(&sig["output"]))
    };
    format!(
        "{}({}){output}{}",
        generics(&function["generics"]),
        inputs.join(", "),
        if prefix.is_empty() { "" } else { " [async]" }
    )
}

fn bound(bound: &Value) -> String {
    match bound.get("trait_bound") {
        Some(tb) => path_with_args(&tb["trait"]),
        None => bound.get("outlives").and_then(Value::as_str).unwrap_or("?").to_string(),
    }
}

fn path_with_args(path: &Value) -> String {
    let name = path["path"].as_str().unwrap_or("?");
    let args = &path["args"];
    if let Some(angle) = args.get("angle_bracketed") {
        let mut parts: Vec<String> = angle["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.get("type").map(ty))
            .collect();
        parts.extend(angle["constraints"].as_array().into_iter().flatten().map(|c| {
            let ty_text = c["binding"]["equality"]["type"].clone();
            format!("{} = {}", c["name"].as_str().unwrap_or(""), ty(&ty_text))
        }));
        if !parts.is_empty() {
            return format!("{name}<{}>", parts.join(", "));
        }
    } else if let Some(paren) = args.get("parenthesized") {
        let inputs: Vec<String> = paren["inputs"].as_array().into_iter().flatten().map(ty).collect();
        let output = if paren["output"].is_null() {
            String::new()
        } else {
            format!(" -> {}", ty(&paren["output"]))
        };
        return format!("{name}({}){output}", inputs.join(", "));
    }
    name.to_string()
}

fn ty(value: &Value) -> String {
    let Some((kind, inner)) = value.as_object().and_then(|o| o.iter().next()) else {
        return "()".into();
    };
    match kind.as_str() {
        "resolved_path" => path_with_args(inner),
        "primitive" | "generic" => inner.as_str().unwrap_or("?").to_string(),
        "borrowed_ref" => format!(
            "&{}{}",
            if inner["is_mutable"] == true { "mut " } else { "" },
            ty(&inner["type"])
        ),
        "tuple" => format!(
            "({})",
            inner
                .as_array()
                .into_iter()
                .flatten()
                .map(ty)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        "slice" => format!("[{}]", ty(inner)),
        "array" => format!("[{}; {}]", ty(&inner["type"]), inner["len"].as_str().unwrap_or("?")),
        "impl_trait" => format!(
            "impl {}",
            inner
                .as_array()
                .into_iter()
                .flatten()
                .map(bound)
                .collect::<Vec<_>>()
                .join(" + ")
        ),
        "dyn_trait" => format!(
            "dyn {}",
            inner["traits"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| path_with_args(&t["trait"]))
                .collect::<Vec<_>>()
                .join(" + ")
        ),
        "qualified_path" if inner["trait"].is_null() || inner["trait"]["path"] == "" => {
            format!("{}::{}", ty(&inner["self_type"]), inner["name"].as_str().unwrap_or("?"))
        }
        "qualified_path" => format!(
            "<{} as {}>::{}",
            ty(&inner["self_type"]),
            path_with_args(&inner["trait"]),
            inner["name"].as_str().unwrap_or("?")
        ),
        other => other.to_string(),
    }
}

/// The public API of one crate of the workspace, a line per item.
fn surface_of(package: &str) -> String {
    let doc = rustdoc_json(package);
    let mut surface = Surface {
        index: &doc["index"],
        lines: BTreeSet::new(),
    };
    surface.walk(&doc["root"], "");
    surface.lines.into_iter().collect::<Vec<_>>().join("\n")
}

/// CI writes the documentation of the same crates, so this test finds it
/// written: its list is held to [`PUBLISHED`], the one list.
#[test]
fn ci_documents_every_published_crate() {
    let ci = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../.ci/run")).expect(".ci/run");
    let listed: Vec<&str> = ci
        .lines()
        .find_map(|line| line.trim().strip_prefix("for crate in "))
        .and_then(|rest| rest.strip_suffix("; do"))
        .expect("the docs step of .ci/run loops `for crate in …; do`")
        .split_whitespace()
        .collect();
    let mut listed = listed;
    listed.sort_unstable();
    let mut published = PUBLISHED.to_vec();
    published.sort_unstable();
    assert_eq!(listed, published, ".ci/run documents other crates than PUBLISHED");
}

#[test]
fn the_public_api_is_as_reviewed() {
    insta::assert_snapshot!("public_api", surface_of("genapi"));
}

#[test]
fn the_batchs_public_api_is_as_reviewed() {
    insta::assert_snapshot!("batch_public_api", surface_of("genapi-batch"));
}

#[test]
fn the_ledgers_public_api_is_as_reviewed() {
    insta::assert_snapshot!("ledger_public_api", surface_of("genapi-ledger"));
}

#[test]
fn the_mocks_public_api_is_as_reviewed() {
    insta::assert_snapshot!("mock_public_api", surface_of("genapi-mock"));
}

#[test]
fn the_document_readers_public_api_is_as_reviewed() {
    insta::assert_snapshot!("document_public_api", surface_of("genapi-document"));
}

#[test]
fn the_gallerys_public_api_is_as_reviewed() {
    insta::assert_snapshot!("gallery_public_api", surface_of("genapi-gallery"));
}

#[test]
fn the_proxys_public_api_is_as_reviewed() {
    insta::assert_snapshot!("proxy_public_api", surface_of("genapi-proxy"));
}

#[test]
fn the_text_helpers_public_api_is_as_reviewed() {
    insta::assert_snapshot!("text_public_api", surface_of("genapi-text"));
}

#[test]
fn the_picture_codecs_public_api_is_as_reviewed() {
    insta::assert_snapshot!("pixels_public_api", surface_of("genapi-pixels"));
}

#[test]
fn the_registrable_domains_public_api_is_as_reviewed() {
    insta::assert_snapshot!("domain_public_api", surface_of("genapi-domain"));
}

#[test]
fn the_file_policys_public_api_is_as_reviewed() {
    insta::assert_snapshot!("files_public_api", surface_of("genapi-files"));
}
