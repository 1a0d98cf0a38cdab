//! `genapi batch FILE --estimate`: what the job file will cost, before
//! anything is sent.
//!
//! The prices are the ones this account was charged before, per kind of
//! line (`genapi_batch::Prices`), kept per service address by every batch
//! run. The reference lists no prices, so a kind never charged has none:
//! its lines are counted apart and named, and the total says it leaves
//! them out, rather than counting them as free.

use genapi_batch::{Estimate, Prices};

use super::{shown, Run};
use crate::{learned, out, Failure};

/// Prints the estimate of the job file's valid lines.
pub(super) fn show(run: &Run<'_>) -> Result<(), Failure> {
    let global = run.global;
    let service = crate::prices_key(global);
    let prices: Prices = learned::PRICES.load(&service);
    let jobs = run
        .checked
        .jobs()
        .map_err(|e| Failure::usage(out::clean(&e.to_string())))?;
    let estimate = prices.estimate(jobs.filter_map(Result::ok));
    if global.json {
        let mut shown = serde_json::to_value(&estimate).unwrap_or_default();
        shown["service"] = serde_json::Value::String(crate::service_shown(global));
        out::out(&shown.to_string());
        return Ok(());
    }
    for line in words(&estimate, &shown(&run.jobs_file), &crate::service_shown(global)) {
        out::out(&out::clean(&line));
    }
    Ok(())
}

/// The estimate in words, a line each.
fn words(estimate: &Estimate, file: &str, service: &str) -> Vec<String> {
    let mut lines = vec![format!(
        "{file}: {}, by the prices this account was charged before (batches and generate) at {service}:",
        lines_of(estimate.lines)
    )];
    for (model, of_model) in &estimate.by_model {
        let priced = of_model.lines - of_model.unknown;
        let mut text = format!("  {model}: {}", lines_of(of_model.lines));
        if priced > 0 {
            text.push_str(&format!(", {:.2} credits for {priced}", of_model.credits));
        }
        if of_model.unknown > 0 {
            text.push_str(&format!(", {} of unknown price", of_model.unknown));
        }
        lines.push(text);
    }
    let priced = estimate.lines - estimate.unknown.len();
    let mut total = format!("in all: {:.2} credits for {}", estimate.credits, lines_of(priced));
    if !estimate.unknown.is_empty() {
        let unknown: Vec<u64> = estimate.unknown.iter().map(|unpriced| unpriced.line).collect();
        total.push_str(&format!(
            "; {} of a kind never charged not counted: a run prices them as it goes",
            super::standing::counted(&unknown)
        ));
    }
    lines.push(total);
    lines
}

/// `1 line`, `3 lines`.
fn lines_of(count: usize) -> String {
    format!("{count} line{}", if count == 1 { "" } else { "s" })
}
