//! Turns `openapi.json` into the generated client at compile time.
//!
//! Two files land in `OUT_DIR`:
//! - `codegen.rs`: types and client from progenitor, pretty-printed (also what the
//!   drift snapshot shows);
//! - `operations.rs`: a table of the document's operations and, for every
//!   submission, the `Submit` and `IntoRequest` impls that tie its request type
//!   to its operation. Both come from the document alone, so a new operation
//!   needs no hand-written code.
//!
//! The document is checked first with the crate's own reader
//! (`src/document.rs`): a dangling `$ref`, a `$ref` cycle, a pattern that does
//! not compile or a request schema shared by two operations fails the build
//! with a message naming it, instead of a client that rejects every request.

use std::path::{Path, PathBuf};

use quote::{format_ident, quote};

#[allow(dead_code)]
#[path = "src/document.rs"]
mod document;

const DOCUMENT: &str = "openapi.json";

fn main() {
    println!("cargo:rerun-if-changed={DOCUMENT}");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=src/document.rs");

    let text = std::fs::read_to_string(DOCUMENT).unwrap_or_else(|e| fail(&format!("cannot read {DOCUMENT}: {e}")));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_else(|| fail("OUT_DIR is not set")));

    let root: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("{DOCUMENT} is not JSON: {e}")));
    check_document(&root);

    write(&out_dir.join("codegen.rs"), &generate_client(&text));
    write(&out_dir.join("operations.rs"), &operations_table(&root));
}

/// Refuses a document the validator could not use at run time.
fn check_document(root: &serde_json::Value) {
    let mut problems = document::problems(root);
    let mut patterns = Vec::new();
    collect_patterns(root, &mut patterns);
    for pattern in patterns {
        if let Err(e) = regress::Regex::new(pattern) {
            problems.push(format!("pattern {pattern:?} does not compile: {e}"));
        }
    }
    if !problems.is_empty() {
        fail(&format!(
            "{DOCUMENT} is broken:\n{}",
            problems
                .iter()
                .map(|p| format!("  - {p}"))
                .collect::<Vec<_>>()
                .join("\n")
        ));
    }
}

fn collect_patterns<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(pattern) = map.get("pattern").and_then(serde_json::Value::as_str) {
                out.push(pattern);
            }
            map.values().for_each(|child| collect_patterns(child, out));
        }
        serde_json::Value::Array(items) => items.iter().for_each(|item| collect_patterns(item, out)),
        _ => {}
    }
}

/// Runs progenitor with the settings the hand-written layer relies on.
fn generate_client(text: &str) -> String {
    let spec: openapiv3::OpenAPI =
        serde_json::from_str(text).unwrap_or_else(|e| fail(&format!("{DOCUMENT} is not OpenAPI 3.0: {e}")));

    let mut settings = progenitor::GenerationSettings::default();
    settings
        .with_interface(progenitor::InterfaceStyle::Builder)
        .with_tag(progenitor::TagStyle::Merged)
        // The transport (auth for trusted origins only, retries, tracing) lives
        // in the inner value; `src/transport.rs` implements the hooks.
        .with_inner_type(quote_path("std::sync::Arc<crate::transport::Transport>"))
        .with_hooks(progenitor::HooksMode::Expected)
        // Status is an open set: unknown values must decode (codegen-notes).
        .with_replacement("TaskStatus", "crate::TaskStatus", std::iter::empty())
        // The webhook secret must never show in Debug output of a request.
        .with_replacement("WebhookSecret", "crate::WebhookSecret", std::iter::empty())
        // `x-rust-type` with crate `std` picks a primitive the integer formats
        // of OpenAPI cannot name: `i128` for seeds (any integer up to 2^64-1),
        // `u32` for sizes that carry a `multipleOf` (which would otherwise
        // widen them to `i64`).
        .with_crate("std", progenitor::CrateVers::Any, None)
        .with_derive("PartialEq");

    let mut generator = progenitor::Generator::new(&settings);
    let tokens = generator
        .generate_tokens(&spec)
        .unwrap_or_else(|e| fail(&format!("progenitor rejected {DOCUMENT}: {e}")));
    let file: syn::File = syn::parse2(tokens).unwrap_or_else(|e| fail(&format!("generated code does not parse: {e}")));
    prettyplease::unparse(&file)
}

fn quote_path(path: &str) -> proc_macro2::TokenStream {
    path.parse()
        .unwrap_or_else(|e| fail(&format!("bad type path {path}: {e:?}")))
}

/// Emits `OPERATIONS` and, per submission, the impls of the sealed
/// `Submit`/`IntoRequest` traits for its request type and that type's builder.
fn operations_table(root: &serde_json::Value) -> String {
    let operations = document::operations(root);
    let rows = operations.iter().map(|op| {
        let (id, method, path, tag) = (&op.id, &op.method, &op.path, &op.tag);
        let (regional, deprecated) = (op.regional, op.deprecated);
        let schema = match &op.request_schema {
            Some(name) => quote!(Some(#name)),
            None => quote!(None),
        };
        quote! {
            OperationSpec {
                id: #id,
                method: #method,
                path: #path,
                tag: #tag,
                regional: #regional,
                deprecated: #deprecated,
                request_schema: #schema,
            }
        }
    });
    let impls = operations.iter().enumerate().filter_map(|(index, op)| {
        let name = format_ident!("{}", op.request_schema.as_deref().filter(|_| op.method == "POST")?);
        Some(quote! {
            impl crate::submit::sealed::Sealed for types::#name {}
            impl crate::Submit for types::#name {
                const OPERATION: &'static OperationSpec = &OPERATIONS[#index];
            }
            impl crate::submit::sealed::Building for types::#name {}
            impl crate::IntoRequest for types::#name {
                type Request = Self;
                fn into_request(self) -> Result<Self, crate::Error> {
                    Ok(self)
                }
            }
            impl crate::submit::sealed::Building for types::builder::#name {}
            impl crate::IntoRequest for types::builder::#name {
                type Request = types::#name;
                fn into_request(self) -> Result<types::#name, crate::Error> {
                    Ok(self.try_into()?)
                }
            }
        })
    });
    let file = quote! {
        /// Every operation of `openapi.json`, in document order.
        pub const OPERATIONS: &[OperationSpec] = &[#(#rows),*];
        #(#impls)*
    };
    let file: syn::File = syn::parse2(file).unwrap_or_else(|e| fail(&format!("operations table does not parse: {e}")));
    prettyplease::unparse(&file)
}

fn write(path: &Path, contents: &str) {
    // Leave the file alone when nothing changed, so dependants do not rebuild.
    if std::fs::read_to_string(path).ok().as_deref() == Some(contents) {
        return;
    }
    std::fs::write(path, contents).unwrap_or_else(|e| fail(&format!("cannot write {}: {e}", path.display())));
}

fn fail(message: &str) -> ! {
    eprintln!("genapi build: {message}");
    std::process::exit(1)
}
