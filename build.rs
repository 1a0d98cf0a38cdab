//! Turns `openapi.json` into the generated client at compile time.
//!
//! Two files land in `OUT_DIR`:
//! - `codegen.rs`: types and client from progenitor, pretty-printed (also what the
//!   drift snapshot shows);
//! - `operations.rs`: a table of the document's operations and, for every
//!   submission, the `Submit` impl that ties its request type to its generated
//!   method. Both come from the document alone, so a new operation needs no
//!   hand-written code.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const DOCUMENT: &str = "openapi.json";

fn main() {
    println!("cargo:rerun-if-changed={DOCUMENT}");
    println!("cargo:rerun-if-changed=build.rs");

    let text = std::fs::read_to_string(DOCUMENT).unwrap_or_else(|e| fail(&format!("cannot read {DOCUMENT}: {e}")));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_else(|| fail("OUT_DIR is not set")));

    write(&out_dir.join("codegen.rs"), &generate_client(&text));
    write(&out_dir.join("operations.rs"), &operations_table(&text));
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

/// Emits `OPERATIONS` and one `Submit` impl per request type.
fn operations_table(text: &str) -> String {
    let doc: serde_json::Value =
        serde_json::from_str(text).unwrap_or_else(|e| fail(&format!("{DOCUMENT} is not JSON: {e}")));
    let paths = doc["paths"]
        .as_object()
        .unwrap_or_else(|| fail("the document has no paths"));

    let mut table = String::new();
    let mut impls = String::new();
    let mut index = 0usize;
    for (path, item) in paths {
        let Some(methods) = item.as_object() else { continue };
        for (method, operation) in methods {
            let id = operation["operationId"]
                .as_str()
                .unwrap_or_else(|| fail(&format!("{method} {path} has no operationId")));
            let tag = operation["tags"][0].as_str().unwrap_or("");
            let regional = operation["servers"][0]["url"].as_str() == Some("{regional_base_url}");
            let deprecated = operation["deprecated"].as_bool().unwrap_or(false);
            let schema = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .and_then(|r| r.strip_prefix("#/components/schemas/"));
            let schema_text = match schema {
                Some(name) => format!("Some({name:?})"),
                None => "None".to_string(),
            };
            let _ = writeln!(
                table,
                "    OperationSpec {{ id: {id:?}, method: {m:?}, path: {path:?}, tag: {tag:?}, regional: {regional}, deprecated: {deprecated}, request_schema: {schema_text} }},",
                m = method.to_uppercase(),
            );
            if let (Some(name), "post") = (schema, method.as_str()) {
                let _ = writeln!(
                    impls,
                    "impl crate::IntoRequest for types::{name} {{\n    type Request = Self;\n    fn into_request(self) -> Result<Self, crate::Error> {{\n        Ok(self)\n    }}\n}}\nimpl crate::IntoRequest for types::builder::{name} {{\n    type Request = types::{name};\n    fn into_request(self) -> Result<types::{name}, crate::Error> {{\n        Ok(self.try_into()?)\n    }}\n}}\nimpl crate::Submit for types::{name} {{\n    const OPERATION: &'static OperationSpec = &OPERATIONS[{index}];\n    fn send(self, client: &Client) -> impl std::future::Future<Output = Result<ResponseValue<types::SubmissionResponse>, Error<types::HttpValidationError>>> + Send + '_ {{\n        client.{id}().body(self).send()\n    }}\n}}\n"
                );
            }
            index += 1;
        }
    }
    format!(
        "/// Every operation of `openapi.json`, in document order.\npub const OPERATIONS: &[OperationSpec] = &[\n{table}];\n\n{impls}"
    )
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
