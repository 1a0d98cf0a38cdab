//! Turns `openapi.json` into the generated client at compile time.
//!
//! Three files land in `OUT_DIR`:
//! - `codegen.rs`: types and client from progenitor, with the setters of
//!   optional fields rewritten to take `FieldValue` (see `OptionalSetters`
//!   below) and the request builders made serializable (`ShowableBuilders`),
//!   pretty-printed (also what the drift snapshot shows);
//! - `operations.rs`: the table of the document's operations (`OPERATIONS`,
//!   in the order the document lists them); for every submission, the `Submit` and
//!   `IntoRequest` impls that tie its request type to its operation, and its
//!   variant of `AnySubmission`; and the `FieldValue` impls that let the
//!   generated types parsed from text be set from strings. All of it comes
//!   from the document and the generated code alone, so a new operation
//!   needs no hand-written code;
//! - `string_setters.rs`: the body of the compile test in
//!   `tests/string_setters.rs`, every string field of every request type set
//!   from a `&str`.
//!
//! The document is checked first with `genapi_document::problems`, the rules
//! the library's validator parses by and `cargo xtask check` reports too: no
//! paths, an operation without an operationId, a dangling `$ref`, a `$ref`
//! cycle, a request schema shared by two operations or a pattern that does
//! not compile fails the build with a message naming each, instead of a
//! client whose validator cannot load its own document. Beyond that, the
//! build refuses only what the generator or the compiler cannot take; the
//! other rules of `cargo xtask check` are about what the document says, not
//! whether a client can be built from it (see `xtask/src/check.rs`).

use std::path::{Path, PathBuf};

use genapi_document as document;
use quote::{format_ident, quote};

const DOCUMENT: &str = "openapi.json";

fn main() {
    println!("cargo:rerun-if-changed={DOCUMENT}");
    println!("cargo:rerun-if-changed=build.rs");

    let text = std::fs::read_to_string(DOCUMENT).unwrap_or_else(|e| fail(&format!("cannot read {DOCUMENT}: {e}")));
    let out_dir = PathBuf::from(std::env::var_os("OUT_DIR").unwrap_or_else(|| fail("OUT_DIR is not set")));

    let root: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("{DOCUMENT} is not JSON: {e}")));
    check_document(&root);

    let client = generate_client(&text);
    let text_types = parsed_from_text(&client);
    write(&out_dir.join("codegen.rs"), &client);
    let catalog = document::Catalog::read(&root, &text).unwrap_or_else(|e| fail(&e));
    let table = operations_table(catalog.operations(), &text_types);
    write(&out_dir.join("operations.rs"), &table);
    write(&out_dir.join("string_setters.rs"), &string_setters(&root, &catalog));
}

/// Refuses a document the validator could not use at run time, by the rules
/// `Document::parse` and `cargo xtask check` apply too.
fn check_document(root: &serde_json::Value) {
    let problems = document::problems(root);
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

/// Runs progenitor with the settings the hand-written layer relies on.
fn generate_client(text: &str) -> String {
    let spec: openapiv3::OpenAPI =
        serde_json::from_str(text).unwrap_or_else(|e| fail(&format!("{DOCUMENT} is not OpenAPI 3.0: {e}")));

    let mut settings = progenitor::GenerationSettings::default();
    settings
        .with_interface(progenitor::InterfaceStyle::Builder)
        .with_tag(progenitor::TagStyle::Merged)
        // Each call's transport (auth for trusted origins only, retries, size
        // caps, tracing) and exact address live in the inner value;
        // `src/call.rs` implements the hooks.
        .with_inner_type(quote_path("crate::call::Call"))
        .with_hooks(progenitor::HooksMode::Expected)
        // Status is an open set: unknown values must decode (codegen-notes).
        .with_replacement("TaskStatus", "crate::TaskStatus", std::iter::empty())
        // The webhook secret must never show in Debug output of a request.
        .with_replacement("WebhookSecret", "crate::WebhookSecret", std::iter::empty())
        // `x-rust-type` with crate `std` picks a primitive the integer formats
        // of OpenAPI cannot name: `i128` for seeds (any integer up to 2^64-1),
        // and the plain `u8`/`u32` of a field's format where the generator
        // would pick another type: sizes with a `multipleOf` (widened to
        // `i64`) and counts with a minimum of 1 (`NonZeroU8`). The bounds
        // are the validator's job either way.
        .with_crate("std", progenitor::CrateVers::Any, None)
        .with_derive("PartialEq");

    let mut generator = progenitor::Generator::new(&settings);
    let tokens = generator
        .generate_tokens(&spec)
        .unwrap_or_else(|e| fail(&format!("progenitor rejected {DOCUMENT}: {e}")));
    let mut file: syn::File =
        syn::parse2(tokens).unwrap_or_else(|e| fail(&format!("generated code does not parse: {e}")));
    syn::visit_mut::VisitMut::visit_file_mut(&mut OptionalSetters, &mut file);
    syn::visit_mut::VisitMut::visit_file_mut(&mut ShowableBuilders::default(), &mut file);
    prettyplease::unparse(&file)
}

/// Derives `serde::Serialize` for the request builders of `types::builder`.
///
/// A builder that cannot finish says why only as text (typify keeps each
/// field as `Result<T, String>` and its `ConversionError` is a string), and
/// no generator setting changes that. Serialized, a builder shows each
/// field as `{"Ok": value}` or `{"Err": why}` under its name, so the library
/// tells a field never set (its error is the untouched builder's) from one
/// set to a value that does not fit, without reading the generator's
/// sentences (see `src/field.rs`, `unfinished`). Nothing else of the
/// generated code is touched.
#[derive(Default)]
struct ShowableBuilders {
    /// The modules the visitor is in.
    path: Vec<String>,
}

impl syn::visit_mut::VisitMut for ShowableBuilders {
    fn visit_item_mod_mut(&mut self, module: &mut syn::ItemMod) {
        self.path.push(module.ident.to_string());
        syn::visit_mut::visit_item_mod_mut(self, module);
        self.path.pop();
    }

    fn visit_item_struct_mut(&mut self, item: &mut syn::ItemStruct) {
        if self.path.ends_with(&["types".to_string(), "builder".to_string()]) {
            item.attrs.push(syn::parse_quote!(#[derive(::serde::Serialize)]));
        }
    }
}

/// Rewrites the setters of optional fields in the generated builders.
///
/// typify types them `T: TryInto<Option<X>>`, which `&str` cannot meet for a
/// `String` field (no `From<&str>` for `Option<String>`, and the orphan rule
/// forbids adding one), so `.prompt("x")` compiled on some request types and
/// not on others. No generator setting changes the bound, so each such setter
/// is rewritten, mechanically and only there, to take `T: crate::FieldValue<X>`
/// and convert with `FieldValue::into_field` (see `src/field.rs`). Nothing else
/// of the generated code is touched.
struct OptionalSetters;

impl syn::visit_mut::VisitMut for OptionalSetters {
    fn visit_impl_item_fn_mut(&mut self, function: &mut syn::ImplItemFn) {
        let Some(clause) = function.sig.generics.where_clause.as_mut() else {
            return;
        };
        let mut rewritten = false;
        for predicate in clause.predicates.iter_mut() {
            let syn::WherePredicate::Type(predicate) = predicate else {
                continue;
            };
            for bound in predicate.bounds.iter_mut() {
                if let Some(inner) = try_into_option(bound) {
                    *bound = syn::parse_quote!(crate::FieldValue<#inner>);
                    rewritten = true;
                }
            }
        }
        if rewritten {
            syn::visit_mut::VisitMut::visit_block_mut(&mut IntoField, &mut function.block);
        }
    }
}

/// `X` of a `::std::convert::TryInto<::std::option::Option<X>>` bound.
fn try_into_option(bound: &syn::TypeParamBound) -> Option<syn::Type> {
    let syn::TypeParamBound::Trait(bound) = bound else {
        return None;
    };
    let last = bound.path.segments.last()?;
    if last.ident != "TryInto" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    let Some(syn::GenericArgument::Type(syn::Type::Path(target))) = args.args.first() else {
        return None;
    };
    let option = target.path.segments.last()?;
    if option.ident != "Option" {
        return None;
    }
    let syn::PathArguments::AngleBracketed(inner) = &option.arguments else {
        return None;
    };
    match inner.args.first() {
        Some(syn::GenericArgument::Type(inner)) => Some(inner.clone()),
        _ => None,
    }
}

/// `value.try_into()` becomes `crate::FieldValue::into_field(value)`.
struct IntoField;

impl syn::visit_mut::VisitMut for IntoField {
    fn visit_expr_mut(&mut self, expr: &mut syn::Expr) {
        if let syn::Expr::MethodCall(call) = expr {
            if call.method == "try_into" && call.args.is_empty() {
                let receiver = &call.receiver;
                *expr = syn::parse_quote!(crate::FieldValue::into_field(#receiver));
                return;
            }
        }
        syn::visit_mut::visit_expr_mut(self, expr);
    }
}

fn quote_path(path: &str) -> proc_macro2::TokenStream {
    path.parse()
        .unwrap_or_else(|e| fail(&format!("bad type path {path}: {e:?}")))
}

/// For the compile test of `tests/string_setters.rs`: one builder per
/// request type with every string field of the document set from a `&str`
/// (an enum's first value, a sample for patterned or URL fields). If any
/// setter refused `&str`, the test would not compile.
fn string_setters(root: &serde_json::Value, catalog: &document::Catalog) -> String {
    let mut builders = Vec::new();
    for model in catalog.models() {
        let Some(name) = model.operation.request_schema.as_deref() else {
            continue;
        };
        let Some(schema) = document::schema(root, name) else {
            continue;
        };
        let mut calls = Vec::new();
        for (field, property) in schema["properties"].as_object().into_iter().flatten() {
            let target = property["allOf"].get(0).unwrap_or(property);
            let Ok(resolved) = document::resolve(root, target) else {
                continue;
            };
            if resolved["type"] != "string" {
                continue;
            }
            let text = match (
                &resolved["enum"][0],
                resolved["format"].as_str(),
                resolved.get("pattern"),
            ) {
                (serde_json::Value::String(first), _, _) => first.clone(),
                (_, Some("uri"), _) => "https://example.com/hook".to_string(),
                (_, _, Some(_)) => "my-lora".to_string(),
                _ => "text".to_string(),
            };
            // A field whose name is not a plain identifier (`a-b`, `self`)
            // has a setter under a name the generator makes up: the check
            // covers the others.
            if syn::parse_str::<syn::Ident>(field).is_err() {
                continue;
            }
            let setter = format_ident!("{}", field);
            calls.push(quote!(.#setter(#text)));
        }
        let name = format_ident!("{}", name);
        builders.push(quote!(let _ = genapi::api::types::#name::builder() #(#calls)*;));
    }
    let file = quote! {
        /// Sets every string field of every request type from a `&str`.
        fn every_string_field_takes_str() {
            #(#builders)*
        }
    };
    let file: syn::File =
        syn::parse2(file).unwrap_or_else(|e| fail(&format!("string setter test does not parse: {e}")));
    prettyplease::unparse(&file)
}

/// The generated types that parse from text (`impl TryFrom<&str> for X`):
/// enums and checked strings, whose optional setters also take `&str`.
fn parsed_from_text(generated: &str) -> Vec<String> {
    let mut names: Vec<String> = generated
        .lines()
        .filter_map(|line| line.trim().strip_prefix("impl ::std::convert::TryFrom<&str> for "))
        .filter_map(|rest| rest.strip_suffix(" {"))
        .filter(|name| name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    names
}

/// Emits `OPERATIONS`, in the order given (the document's), and, per
/// submission, the impls of the sealed `Submit`/`IntoRequest` traits for its
/// request type and that type's builder.
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
fn operations_table(operations: &[document::Operation], text_types: &[String]) -> String {
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
            impl crate::submit::sealed::Sealed for types::#name {
                fn into_any(self) -> AnySubmission {
                    AnySubmission::#name(self)
                }
            }
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
                    types::#name::try_from(self.clone()).map_err(|_| {
                        crate::field::unfinished(stringify!(#name), &self, &types::builder::#name::default())
                    })
                }
            }
        })
    });
    let text_values = text_types.iter().map(|name| {
        let name = format_ident!("{}", name);
        quote! {
            crate::field::text_values!(types::#name, crate::field::Unparsed, |text| types::#name::try_from(text)
                .map_err(|why| crate::field::Unparsed::new(text, why)));
            impl crate::FieldValue<types::#name> for String {
                type Error = crate::field::Unparsed;
                fn into_field(self) -> Result<Option<types::#name>, Self::Error> {
                    types::#name::try_from(self.as_str())
                        .map(Some)
                        .map_err(|why| crate::field::Unparsed::new(&self, why))
                }
            }
        }
    });
    let submissions: Vec<(String, syn::Ident)> = operations
        .iter()
        .filter(|op| op.method == "POST")
        .filter_map(|op| Some((op.id.clone(), format_ident!("{}", op.request_schema.as_deref()?))))
        .collect();
    let variants = submissions.iter().map(|(_, name)| quote!(#name(types::#name)));
    let decode_arms = submissions
        .iter()
        .map(|(id, name)| quote!(#id => Some(::serde_json::from_value(body).map(AnySubmission::#name))));
    let send_arms = submissions.iter().map(|(id, name)| {
        let method = format_ident!("{}", id);
        quote!(AnySubmission::#name(body) => client.#method().body(body).send().await)
    });
    let file = quote! {
        /// Every operation of `openapi.json`, in the order the document
        /// lists them (its paths in order, each path's methods in order).
        pub const OPERATIONS: &[OperationSpec] = &[#(#rows),*];

        /// A request of any submission of the document, decoded from JSON.
        #[doc(hidden)]
        pub enum AnySubmission {
            #(#variants),*
        }

        impl AnySubmission {
            /// Decodes a body of the submission `operation`; `None` for an
            /// operation that is not a submission of the document.
            pub(crate) fn decode(
                operation: &str,
                body: ::serde_json::Value,
            ) -> Option<Result<AnySubmission, ::serde_json::Error>> {
                match operation {
                    #(#decode_arms,)*
                    _ => None,
                }
            }

            /// Sends it by its operation's generated method.
            pub(crate) async fn send(
                self,
                client: &crate::call::Generated,
            ) -> crate::call::Sent<types::SubmissionResponse> {
                match self {
                    #(#send_arms,)*
                }
            }
        }
        #(#impls)*
        #(#text_values)*
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
