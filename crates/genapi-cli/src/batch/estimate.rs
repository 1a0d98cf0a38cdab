//! `genapi batch FILE --estimate`: what the job file will cost, before
//! anything is sent.
//!
//! The prices are the ones this account was charged before, per kind of
//! line (`genapi_batch::Prices`), kept per service by every batch run and
//! `generate` (see `learned::prices_key`). The reference lists no prices,
//! so a kind never charged has none: its lines are listed as of unknown
//! price, by model and number, with how to price them, and the total says
//! it covers the priced lines only, rather than counting them as free.

use genapi_batch::{Estimate, Prices};

use super::{shown, Run};
use crate::{learned, out, Failure};

/// Prints the estimate of the job file's valid lines.
pub(super) fn show(run: &Run<'_>) -> Result<(), Failure> {
    let global = run.global;
    // Nothing is sent, so a standalone mock is known by its address and key.
    let service = learned::prices_key(global);
    let prices: Prices = learned::PRICES.load(&service);
    let jobs = run
        .checked
        .jobs()
        .map_err(|e| Failure::usage(out::clean(&e.to_string())))?;
    let estimate = prices.estimate(jobs.filter_map(Result::ok));
    let shown_service = if service == learned::MOCK_PRICES {
        "the mock (its illustrative prices, whatever its address)".to_string()
    } else {
        crate::service_shown(global)
    };
    let invalid = run.checked.invalid_lines();
    if global.json {
        let mut shown = serde_json::to_value(&estimate).unwrap_or_default();
        shown["service"] = serde_json::Value::String(shown_service);
        shown["priced_lines"] = (estimate.lines - estimate.unknown.len()).into();
        shown["invalid_lines"] = invalid.into();
        out::out(&shown.to_string());
        return Ok(());
    }
    for line in words(&estimate, &shown(&run.jobs_file), &shown_service) {
        out::out(&out::clean(&line));
    }
    if invalid > 0 {
        let run_does = if run.args.skip_invalid {
            "a run with --skip-invalid sends the others"
        } else {
            "a run refuses the file until they are fixed, or sends the others with --skip-invalid"
        };
        out::out(&format!(
            "not counted: {} found invalid (said above); {run_does}",
            lines_of(invalid)
        ));
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
    if estimate.unknown.is_empty() {
        lines.push(format!(
            "in all: {:.2} credits for {}",
            estimate.credits,
            lines_of(priced)
        ));
    } else if priced > 0 {
        lines.push(format!(
            "in all: {:.2} credits for the {} of known price only; not counted: {}",
            estimate.credits,
            lines_of(priced),
            unknown(estimate)
        ));
    } else {
        lines.push(format!("no price is known yet: {}", unknown(estimate)));
    }
    lines
}

/// The lines of unknown price, by model and by number, and how to price
/// them: `3 lines of unknown price (gen-2-pro ×3; lines 1-3): …`.
fn unknown(estimate: &Estimate) -> String {
    let by_model: Vec<String> = estimate
        .by_model
        .iter()
        .filter(|(_, of_model)| of_model.unknown > 0)
        .map(|(model, of_model)| format!("{model} ×{}", of_model.unknown))
        .collect();
    let numbers: Vec<u64> = estimate.unknown.iter().map(|unpriced| unpriced.line).collect();
    format!(
        "{} of unknown price ({}; {}): a kind is priced once the service has charged one of its lines, so run one \
         line of each kind first, or run the batch with --max-credits N, which sends a new kind's first line alone",
        lines_of(estimate.unknown.len()),
        by_model.join(", "),
        super::standing::counted(&numbers)
    )
}
/// `1 line`, `3 lines`.
fn lines_of(count: usize) -> String {
    format!("{count} line{}", if count == 1 { "" } else { "s" })
}
