//! The models the command knows: the library's catalog of the embedded
//! document, or of the document file `GENAPI_DOCUMENT` names (tests use it
//! to try a document with models of their own). Nothing here is hand-listed;
//! this file only loads the catalog and says how `genapi models` shows a
//! field.

use genapi::validate::{Catalog, Document, Field, ImageField, Model};
use serde_json::Value;

/// The hidden variable naming another document file (used by tests).
const DOCUMENT_VARIABLE: &str = "GENAPI_DOCUMENT";

/// The library's catalog of the embedded document, or of the one
/// `GENAPI_DOCUMENT` names.
pub fn load() -> Result<&'static Catalog, String> {
    let Some(file) = std::env::var_os(DOCUMENT_VARIABLE) else {
        return Ok(Document::embedded().catalog());
    };
    let named = |problem: String| format!("{DOCUMENT_VARIABLE}={}: {problem}", file.to_string_lossy());
    let text = crate::files::read_to_string(std::path::Path::new(&file), crate::files::DOCUMENT_LIMIT)
        .map_err(|e| named(e.to_string()))?;
    let document = Document::parse(&text).map_err(|e| named(e.to_string()))?;
    // The command reads one document per run; keeping it for the whole run
    // lets every part borrow its models, as they borrow the embedded one's.
    let document: &'static Document = Box::leak(Box::new(document));
    Ok(document.catalog())
}

/// The model called `name` (its path, its last segment, or its
/// operationId), as the library resolves it; the error points to `genapi
/// models`.
pub fn find<'a>(catalog: &'a Catalog, name: &str) -> Result<&'a Model, String> {
    catalog
        .find(name)
        .map_err(|unknown| format!("{} (see `genapi models`)", crate::out::clean(&unknown.to_string())))
}

/// A field's allowed values as text (`jpeg`, not `"jpeg"`).
pub fn choices(field: &Field) -> Vec<String> {
    field.choices.iter().map(shown).collect()
}

/// A field's type as `genapi models` shows it: `integer`, `OutputFormat:
/// jpeg | png | webp`.
pub fn kind(field: &Field) -> String {
    let choices = choices(field);
    if choices.is_empty() {
        field.kind.clone()
    } else {
        format!("{}: {}", field.kind, choices.join(" | "))
    }
}

/// A field's bounds as `genapi models` shows them: `64..2048`, `0 (auto)
/// or ≥ 64, multiple of 16`, `> 0`, `length ≤ 2083`, `items 1..10`,
/// `pattern …`.
pub fn bounds(field: &Field) -> String {
    let number = |keyword: &str| field.bound(keyword).map(shown);
    let range = |low: Option<String>, high: Option<String>, label: &str| match (low, high) {
        (Some(low), Some(high)) => format!("{label}{low}..{high}"),
        (Some(low), None) => format!("{label}≥ {low}"),
        (None, Some(high)) => format!("{label}≤ {high}"),
        (None, None) => String::new(),
    };
    let mut values = range(number("minimum"), number("maximum"), "");
    if field.rule("x-zero-means-auto") == Some(&Value::Bool(true)) && !values.is_empty() {
        values = format!("0 (auto) or {values}");
    }
    [
        values,
        number("exclusiveMinimum")
            .map(|low| format!("> {low}"))
            .unwrap_or_default(),
        number("exclusiveMaximum")
            .map(|high| format!("< {high}"))
            .unwrap_or_default(),
        number("multipleOf")
            .map(|step| format!("multiple of {step}"))
            .unwrap_or_default(),
        range(number("minLength"), number("maxLength"), "length "),
        range(number("minItems"), number("maxItems"), "items "),
        number("pattern")
            .map(|pattern| format!("pattern {pattern}"))
            .unwrap_or_default(),
    ]
    .into_iter()
    .filter(|part| !part.is_empty())
    .collect::<Vec<_>>()
    .join(", ")
}

/// Takes an http(s) URL as well as image data.
pub fn takes_url(field: &Field) -> bool {
    field.image() == Some(ImageField::Base64OrUrl)
}

/// A JSON value as a reader writes it: strings without quotes.
pub fn shown(value: &Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_fields_keep_document_order() {
        let vto = find(load().unwrap(), "vto-v1").unwrap();
        let images: Vec<&str> = vto
            .fields
            .iter()
            .filter(|f| f.image().is_some())
            .map(|f| f.name.as_str())
            .collect();
        assert_eq!(images, ["person", "garment"]);
    }

    #[test]
    fn names_resolve_and_typos_get_a_suggestion() {
        let catalog = load().unwrap();
        assert_eq!(find(catalog, "deblur-v1").unwrap().name, "gen-tools/deblur-v1");
        assert_eq!(find(catalog, "/v1/gen-2-pro").unwrap().name, "gen-2-pro");
        let error = find(catalog, "gen-2-prp").unwrap_err();
        assert!(error.contains("did you mean gen-2-pro?"), "{error}");
    }

    #[test]
    fn a_field_shows_its_type_choices_and_bounds() {
        let catalog = load().unwrap();
        let model = find(catalog, "gen-2-pro").unwrap();
        let width = model.field("width").unwrap();
        assert_eq!(bounds(width), "0 (auto) or ≥ 64, multiple of 16", "{width:?}");
        let video = find(catalog, "gen-3-video").unwrap();
        assert_eq!(bounds(video.field("keyframes").unwrap()), "items 1..10");
        let format = model.field("output_format").unwrap();
        assert_eq!(kind(format), "OutputFormat: jpeg | png | webp");
    }
}
