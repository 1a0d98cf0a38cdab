//! `genapi models [NAME]`: the operations of the document and their fields.

use serde_json::json;

use crate::catalog::{self, Catalog};
use crate::{out, Failure, Global};

/// Lists the models, or describes one.
pub fn run(global: &Global, name: Option<&str>) -> Result<(), Failure> {
    let catalog = Catalog::load().map_err(Failure::usage)?;
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
                out::out(&format!("{:<36} {}{deprecated}", model.name, model.summary));
            }
        }
        return Ok(());
    };
    let model = catalog.find(name).map_err(Failure::usage)?;
    let fields = &model.fields;
    if global.json {
        let fields: Vec<_> = fields
            .iter()
            .map(|f| {
                json!({"name": f.name, "type": catalog::kind(f), "bounds": catalog::bounds(f),
                       "default": f.default.as_ref().map(ToString::to_string), "required": f.required,
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
    out::out(&format!("{} — {}{deprecated}", model.name, model.summary));
    out::out(&format!("POST {}", model.operation.path));
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
            notes.push(format!("default {default}"));
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
        out::out(&format!(
            "  {:<20} {:<28} {}",
            field.name,
            catalog::kind(field),
            notes.join("; ")
        ));
        if !field.description.is_empty() {
            out::out(&format!("  {:<20} {}", "", field.description));
        }
    }
    Ok(())
}
