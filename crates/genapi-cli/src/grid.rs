//! `genapi grid`: the job lines of a sweep, for `genapi batch`.
//!
//! Comparing prompts, seeds or models means running every combination and
//! looking at them side by side. This writes one job line per cell, prompts
//! by rows and the swept values by columns, each line naming its cell
//! (`"grid": {"row": …, "column": …}`), which the batch's gallery lays out
//! as a grid. A cell is an ordinary line of the job file: checked against
//! the document like any other before a line is written, resumed and never
//! paid for twice like any other.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;
use serde_json::{json, Map, Value};

use crate::{out, Failure};

/// `genapi grid` options.
#[derive(Args)]
pub struct GridArgs {
    /// Model of every cell (see `genapi models`), unless the sweep is over models.
    #[arg(short = 'm', long, default_value = "gen-2-pro", value_parser = crate::completions::ModelName, hide_possible_values = true)]
    model: String,
    /// A prompt: one row of the grid; repeatable.
    #[arg(long = "prompt", value_name = "TEXT", required = true)]
    prompts: Vec<String>,
    /// The swept field and its values, one column each, e.g. seed=1,2,3 or model=gen-2-pro,gen-2-flex.
    #[arg(long, value_name = "FIELD=V1,V2,…")]
    sweep: String,
    /// A field every cell sets (JSON value or text), e.g. --set width=512; repeatable.
    #[arg(long = "set", value_name = "FIELD=VALUE")]
    set: Vec<String>,
    /// Where to write the job lines (default: stdout); an existing file is replaced only with --force.
    #[arg(short = 'o', long, value_name = "FILE")]
    out: Option<PathBuf>,
}

/// Writes the lines of the grid, once every one has passed the check;
/// `force` (the global `--force`) replaces an existing `-o` file.
#[expect(clippy::too_many_lines, reason = "longer than the bound; to be split")]
pub fn run(args: GridArgs, force: bool) -> Result<(), Failure> {
    let (field, values) = args
        .sweep
        .split_once('=')
        .filter(|(field, values)| !field.trim().is_empty() && !values.trim().is_empty())
        .ok_or_else(|| Failure::usage(format!("--sweep {}: expected FIELD=V1,V2,…", out::clean(&args.sweep))))?;
    let field = field.trim();
    let values: Vec<&str> = values.split(',').map(str::trim).filter(|v| !v.is_empty()).collect();
    // The rows are the prompts, and a cell's name and place are the grid's.
    if matches!(field, "prompt" | "name" | "grid") {
        return Err(Failure::usage(format!(
            "--sweep {field}: the grid's rows are its --prompt values and its cells' names and places are its own; \
             sweep another field (seed, model, width, …)"
        )));
    }
    if values.is_empty() {
        return Err(Failure::usage(format!(
            "--sweep {}: no values; give FIELD=V1,V2,…",
            out::clean(&args.sweep)
        )));
    }
    // Two cells in one place would be two paid images with one tile.
    if let Some(twice) = repeated(&values).or_else(|| repeated(&args.prompts)) {
        return Err(Failure::usage(format!(
            "{} is given twice: each row and column of the grid is given once",
            out::clean(&format!("{twice:?}"))
        )));
    }
    if let Some(path) = &args.out {
        if !force && genapi_files::is_taken(path) {
            return Err(Failure::usage(format!(
                "-o {}: the file exists; --force replaces it",
                out::clean(&path.display().to_string())
            )));
        }
    }
    // Rows by columns is known now: a grid whose lines could not all fit in
    // a job file is refused before one is made.
    let cells = args.prompts.len().saturating_mul(values.len());
    let too_big = |size: String| {
        Failure::usage(format!(
            "{} prompts by {} values is {cells} cells, whose job lines come to {size}, above the {} a job file may \
             be; split the sweep into smaller grids",
            args.prompts.len(),
            values.len(),
            genapi_files::shown_size(genapi_batch::JOB_FILE_LIMIT)
        ))
    };
    // Each line holds at least its prompt twice (the prompt and its row).
    let least: u64 = args
        .prompts
        .iter()
        .map(|prompt| 2 * prompt.len() as u64 * values.len() as u64)
        .sum();
    if least > genapi_batch::JOB_FILE_LIMIT {
        return Err(too_big(format!("more than {}", genapi_files::shown_size(least))));
    }
    let mut fixed = Map::new();
    for pair in &args.set {
        let (name, value) = crate::request::split_pair("--set", pair)?;
        fixed.insert(name.to_string(), value);
    }
    let mut lines = Vec::with_capacity(cells);
    let mut written: u64 = 0;
    for (row, prompt) in args.prompts.iter().enumerate() {
        for (column, text) in values.iter().enumerate() {
            let value = serde_json::from_str(text).unwrap_or_else(|_| Value::String((*text).to_string()));
            let mut line = Map::new();
            let model = if field == "model" { *text } else { args.model.as_str() };
            line.insert("model".into(), json!(model));
            // The swept field and value in the name, so two grids over one
            // prompt can share a job file.
            line.insert(
                "name".into(),
                json!(format!(
                    "r{}-c{}-{}-{}-{}",
                    row + 1,
                    column + 1,
                    out::slug(field, 16),
                    out::slug(text, 16),
                    out::slug(prompt, 24)
                )),
            );
            line.insert("prompt".into(), json!(prompt));
            line.extend(fixed.clone());
            if field != "model" {
                line.insert(field.to_string(), value);
            }
            line.insert(
                "grid".into(),
                json!({"row": prompt, "column": format!("{field} {text}")}),
            );
            let line = Value::Object(line).to_string();
            written += line.len() as u64 + 1;
            if written > genapi_batch::JOB_FILE_LIMIT {
                let at_least = written.max(written / (lines.len() as u64 + 1) * cells as u64);
                return Err(too_big(format!("about {}", genapi_files::shown_size(at_least))));
            }
            lines.push(line);
        }
    }
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    check(&text, args.out.as_deref())?;
    match &args.out {
        Some(path) => write_file(path, &text, force),
        None => {
            for line in &lines {
                out::out_required(line)
                    .map_err(|e| Failure::new(crate::code::OTHER, format!("cannot write stdout: {e}")))?;
            }
            Ok(())
        }
    }
}

/// Checks the lines as `genapi batch` would, from a file beside where they
/// go (so image paths resolve the same), and names every problem.
fn check(text: &str, out: Option<&Path>) -> Result<(), Failure> {
    let dir = out
        .and_then(Path::parent)
        .filter(|dir| !dir.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let mut probe = genapi_files::stage(&dir.join("grid.jsonl"))
        .map_err(|refused| Failure::new(crate::code::OTHER, out::clean(&refused.to_string())))?;
    if let Err(e) = probe.write_all(text.as_bytes()).and_then(|()| probe.flush()) {
        let asked = out.map_or_else(|| ".".to_string(), |path| path.display().to_string());
        return Err(Failure::new(
            crate::code::OTHER,
            format!("cannot write beside {}: {e}", out::clean(&asked)),
        ));
    }
    let probe_path = probe.temporary_path().to_path_buf();
    let checked = genapi_batch::JobFile::check(&probe_path);
    // Dropped unpublished: the probe is removed.
    drop(probe);
    let checked = checked.map_err(|e| Failure::api(&e))?;
    if checked.invalid_lines() == 0 {
        return Ok(());
    }
    let problems: Vec<String> = checked
        .invalid()
        .iter()
        .map(|invalid| format!("cell {}: {}", invalid.line, crate::batch::explained(invalid)))
        .collect();
    Err(Failure::usage(format!(
        "{} of {} cells would be refused, nothing was written:\n  {}",
        checked.invalid_lines(),
        checked.lines(),
        problems.join("\n  ")
    )))
}

/// Writes the file whole by the file policy: beside it, then put in its
/// place; an existing file only with `--force`, never through a link.
fn write_file(path: &Path, text: &str, force: bool) -> Result<(), Failure> {
    let shown = out::clean(&path.display().to_string());
    genapi_files::write_whole(path, text.as_bytes(), crate::files::existing(force))
        .map_err(|refused| Failure::new(crate::code::OTHER, format!("-o {}", crate::files::said(&refused))))?;
    let count = text.lines().count();
    let lines = if count == 1 { "job line" } else { "job lines" };
    out::progress(&format!("{count} {lines} written to {shown}"));
    Ok(())
}

/// The first value given twice.
fn repeated<T: AsRef<str>>(values: &[T]) -> Option<&str> {
    let mut seen = std::collections::HashSet::new();
    values.iter().map(AsRef::as_ref).find(|value| !seen.insert(*value))
}
