//! The figures the crate's benches print: medians of rounds, and a line
//! giving a figure's median with its spread (lowest–highest).

/// The median of `values` (sorted in place).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let middle = values.len() / 2;
    if values.len().is_multiple_of(2) {
        (values[middle - 1] + values[middle]) / 2.0
    } else {
        values[middle]
    }
}

/// `name  median X unit   spread L–H unit`, with `decimals` decimals.
pub fn line(name: &str, rounds: &mut [f64], unit: &str, decimals: usize) -> String {
    let low = rounds.iter().copied().fold(f64::INFINITY, f64::min);
    let high = rounds.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let median = median(rounds);
    format!("{name:<40} median {median:>8.decimals$} {unit}   spread {low:.decimals$}–{high:.decimals$} {unit}")
}
