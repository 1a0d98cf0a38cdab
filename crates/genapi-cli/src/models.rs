//! `genapi models [NAME]`: the operations of the document and their fields.
//!
//! The text is for reading (document text is cleaned of control characters
//! before it reaches a terminal); `--json` is for programs: values as JSON
//! values, bounds keyed by the document's own keyword names.

use serde_json::{json, Map, Value};

use crate::catalog;
use crate::{out, Failure, Global};

/// Lists the models, or describes one.
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
pub fn run(global: &Global, name: Option<&str>) -> Result<(), Failure> {
    let catalog = catalog::load().map_err(Failure::usage)?;
    let Some(name) = name else {
        for model in catalog.models() {
            if global.json {
                out::out(
                    &json!({"name": model.name, "summary": model.summary, "deprecated": model.operation.deprecated})
                        .to_string(),
                );
            } else {
                let deprecated = if model.operation.deprecated {
                    "  [deprecated]"
                } else {
                    ""
                };
                out::out(&out::clean(&format!(
                    "{:<36} {}{deprecated}",
                    model.name, model.summary
                )));
            }
        }
        return Ok(());
    };
    let model = catalog::find(catalog, name).map_err(Failure::usage)?;
    let fields = &model.fields;
    if global.json {
        let fields: Vec<Value> = fields
            .iter()
            .map(|f| {
                let bounds: Map<String, Value> = f.bounds.iter().cloned().collect();
                json!({"name": f.name, "type": f.kind, "nullable": f.nullable, "choices": f.choices,
                       "bounds": bounds, "default": f.default, "required": f.required,
                       "image": f.image().is_some(), "image_url": catalog::takes_url(f),
                       "description": f.description})
            })
            .collect();
        out::out(
            &json!({"name": model.name, "path": model.operation.path, "operation_id": model.operation.id,
                    "summary": model.summary, "deprecated": model.operation.deprecated, "fields": fields})
            .to_string(),
        );
        return Ok(());
    }
    let deprecated = if model.operation.deprecated {
        " [deprecated]"
    } else {
        ""
    };
    out::out(&out::clean(&format!("{} — {}{deprecated}", model.name, model.summary)));
    out::out(&format!("POST {}", out::clean(&model.operation.path)));
    out::out("");
    let mut image_position = 0;
    for field in fields {
        let mut notes = Vec::new();
        if field.required {
            notes.push("required".to_string());
        }
        let bounds = catalog::bounds(field);
        if !bounds.is_empty() {
            notes.push(bounds);
        }
        if let Some(default) = &field.default {
            notes.push(format!("default {}", catalog::shown(default)));
        }
        if field.image().is_some() {
            image_position += 1;
            let takes = if catalog::takes_url(field) {
                "file or URL"
            } else {
                "file"
            };
            notes.push(format!(
                "image #{image_position} ({takes}): --image PATH or --image {}=PATH",
                field.name
            ));
        }
        // Two spaces at least before the notes, however long the type.
        let line = format!(
            "  {:<20} {:<28}  {}",
            field.name,
            catalog::kind(field),
            notes.join("; ")
        );
        out::out(out::clean(&line).trim_end());
        if !field.description.is_empty() {
            out::out(&out::clean(&format!("  {:<20} {}", "", field.description)));
        }
    }
    Ok(())
}
