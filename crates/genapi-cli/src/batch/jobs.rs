//! The job file: checked whole before anything is sent, then read again a
//! line at a time as the batch takes its lines.
//!
//! The check says every invalid line (the first ones, with a count of the
//! rest) and refuses the run unless `--skip-invalid`: a batch half sent
//! because of a typo would be paid for in two pieces. Read again during the
//! run, a line that changed since the check is never sent; it is said when
//! met and counted as invalid at the end.

use std::path::Path;
use std::sync::{Arc, Mutex};

use genapi_batch::{InvalidLine, Job, JobFile, LineProblem};

use super::shown;
use crate::{out, Failure};

/// Checks `jobs_file`, saying its invalid lines; refuses a file with none
/// valid, and one with invalid lines unless `skip_invalid`.
pub(super) fn check(jobs_file: &Path, skip_invalid: bool) -> Result<JobFile, Failure> {
    let checked = JobFile::check(jobs_file).map_err(|e| {
        let too_large = std::fs::metadata(jobs_file).is_ok_and(|m| m.len() > genapi_batch::JOB_FILE_LIMIT);
        let hint = if too_large {
            " (split a larger batch into several job files, each run with its own --out)"
        } else {
            ""
        };
        Failure::usage(format!("{}{hint}", out::clean(&e.to_string())))
    })?;
    // Each line is an error of its own, or a warning when it is skipped.
    let severity = if skip_invalid { "warning" } else { "error" };
    for invalid in checked.invalid() {
        out::err(&format!(
            "{severity}: {}: line {}: {}",
            shown(jobs_file),
            invalid.line,
            explained(invalid)
        ));
    }
    let unlisted = checked.invalid_lines() - checked.invalid().len();
    if unlisted > 0 {
        out::err(&format!(
            "{severity}: {}: {unlisted} more invalid lines (only the first {} are listed)",
            shown(jobs_file),
            checked.invalid().len()
        ));
    }
    if checked.invalid_lines() > 0 && !skip_invalid {
        return Err(Failure::usage(invalid_lines_refused(
            checked.invalid_lines(),
            checked.lines(),
        )));
    }
    if checked.lines() == 0 {
        return Err(Failure::usage(format!("{}: no jobs in the file", shown(jobs_file))));
    }
    Ok(checked)
}

/// Why a job file with `invalid` invalid lines of `lines` sends nothing,
/// and what to do: fix them, or (when some are valid) skip them.
fn invalid_lines_refused(invalid: usize, lines: usize) -> String {
    let (are, them) = if invalid == 1 { ("is", "it") } else { ("are", "them") };
    let of = if lines == 1 { "line" } else { "lines" };
    let skip = match lines - invalid.min(lines) {
        0 => String::new(),
        1 => ", or pass --skip-invalid to submit the other one".to_string(),
        valid => format!(", or pass --skip-invalid to submit the other {valid}"),
    };
    format!("{invalid} of {lines} {of} {are} invalid; nothing was submitted (fix {them}{skip})")
}

/// Why a line is invalid, in the command's words: the library's reasons, with
/// where to look for the right ones, and what a terminal should not print
/// removed.
pub(crate) fn explained(invalid: &InvalidLine) -> String {
    let problems: Vec<String> = invalid
        .problems
        .iter()
        .map(|problem| {
            let hint = match problem {
                LineProblem::NotAJobLine(_) => "; see `genapi batch --schema`".to_string(),
                LineProblem::UnknownModel(_) => " (see `genapi models`)".to_string(),
                LineProblem::UnknownField { model, .. } => format!("; see `genapi models {model}`"),
                _ => String::new(),
            };
            out::clean(&format!("{problem}{hint}"))
        })
        .collect();
    problems.join("; ")
}

/// The line numbers of the job file's valid lines.
pub(super) fn job_lines(checked: &JobFile) -> Vec<u64> {
    checked
        .jobs()
        .map(|jobs| jobs.filter_map(Result::ok).map(|job| job.line).collect())
        .unwrap_or_default()
}

/// Lines that changed in the job file while the batch ran: skipped (never
/// sent), each said when it is met, and counted as invalid at the end.
#[derive(Clone, Default)]
pub(super) struct Changed(Arc<Mutex<Vec<InvalidLine>>>);

impl Changed {
    /// The lines noted so far, forgotten here.
    pub(super) fn take(&self) -> Vec<InvalidLine> {
        self.0
            .lock()
            .map(|mut lines| std::mem::take(&mut *lines))
            .unwrap_or_default()
    }
}

/// The valid lines of the job file, read again as the batch goes; a line
/// that changed since the check is said, noted in `changed`, and skipped.
pub(super) fn valid_jobs(
    checked: &JobFile,
    changed: Changed,
) -> Result<impl Iterator<Item = Job> + Send + 'static, Failure> {
    let jobs = checked.jobs().map_err(|e| Failure::usage(out::clean(&e.to_string())))?;
    Ok(jobs.filter_map(move |job| {
        job.map_err(|line| {
            out::err(&format!("warning: line {}: {}", line.line, explained(&line)));
            if let Ok(mut noted) = changed.0.lock() {
                noted.push(line);
            }
        })
        .ok()
    }))
}

#[cfg(test)]
mod tests {
    use super::invalid_lines_refused;

    #[test]
    fn invalid_lines_are_said_of_one_or_of_many_and_skipping_is_offered_only_with_lines_left() {
        for (invalid, lines, said) in [
            (1, 1, "1 of 1 line is invalid; nothing was submitted (fix it)"),
            (
                1,
                2,
                "1 of 2 lines is invalid; nothing was submitted (fix it, or pass --skip-invalid to submit the other one)",
            ),
            (3, 3, "3 of 3 lines are invalid; nothing was submitted (fix them)"),
            (
                6,
                7,
                "6 of 7 lines are invalid; nothing was submitted (fix them, or pass --skip-invalid to submit the other one)",
            ),
            (
                2,
                7,
                "2 of 7 lines are invalid; nothing was submitted (fix them, or pass --skip-invalid to submit the other 5)",
            ),
        ] {
            assert_eq!(invalid_lines_refused(invalid, lines), said);
        }
    }
}
