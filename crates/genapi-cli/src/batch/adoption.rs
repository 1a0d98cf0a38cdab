//! `--adopt LINE=TASK`: a line whose submission went unanswered is given
//! the task the user found for it elsewhere (the library's
//! [`genapi_batch::adopt`] checks the task at the service first), so the run
//! polls that task instead of paying for the line again.
//!
//! A line number the job file does not have is refused before the service
//! (or the built-in mock) is reached; every adoption is done before the run
//! sends anything, and within `--timeout`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use genapi::Client;
use genapi_batch::{adopt, AdoptError, Job, Store};

use super::jobs::{self, Changed};
use super::{shown, Run};
use crate::{code, out, Failure};

/// Reads `LINE=TASK`.
pub(super) fn parse(text: &str) -> Result<(u64, String), String> {
    let (line, task) = text
        .split_once('=')
        .ok_or_else(|| format!("expected LINE=TASK (a line number, `=`, a task id or polling URL), got `{text}`"))?;
    let line = line
        .trim()
        .parse::<u64>()
        .map_err(|_| format!("`{line}` is not a line number (in LINE=TASK)"))?;
    let task = task.trim();
    if task.is_empty() {
        return Err("the task id is empty (in LINE=TASK)".into());
    }
    Ok((line, task.to_string()))
}

/// Refuses an `--adopt` naming a line that is not a valid line of the job
/// file.
pub(super) fn check_lines(run: &Run<'_>) -> Result<(), Failure> {
    let valid: HashSet<u64> = run.job_lines().iter().copied().collect();
    match run.args.adopt.iter().find(|(line, _)| !valid.contains(line)) {
        Some((line, _)) => Err(no_such_line(*line, &run.jobs_file)),
        None => Ok(()),
    }
}

fn no_such_line(line: u64, jobs_file: &Path) -> Failure {
    Failure::usage(format!(
        "--adopt {line}=…: {} has no valid line {line}",
        shown(jobs_file)
    ))
}

/// Records each task `--adopt` names for its line in `store`, saying so;
/// stops at the first that cannot be (nothing of it recorded).
pub(super) async fn adopt_all(run: &Run<'_>, client: &Client, store: &dyn Store) -> Result<(), Failure> {
    let wanted = &run.args.adopt;
    if wanted.is_empty() {
        return Ok(());
    }
    let lines: HashSet<u64> = wanted.iter().map(|(line, _)| *line).collect();
    let jobs: HashMap<u64, Job> = jobs::valid_jobs(&run.checked, Changed::default())?
        .filter(|job| lines.contains(&job.line))
        .map(|job| (job.line, job))
        .collect();
    let adopting = async {
        for (line, task) in wanted {
            let job = jobs.get(line).ok_or_else(|| no_such_line(*line, &run.jobs_file))?;
            let adopted = adopt(client, store, job, task)
                .await
                .map_err(|e| adopt_failure(*line, &e))?;
            let note = match &adopted.unchecked_prompt {
                None => String::new(),
                Some(reported) => format!(
                    "; note: its prompt is reported as {reported:?}, not the line's (this model may rewrite \
                     prompts, so it was not refused): if it is another task, adopt the right one, which replaces it"
                ),
            };
            out::err(&out::clean(&format!(
                "line {line}: recorded task {} as its task; the next step polls it, it is not submitted again{note}",
                adopted.task.id
            )));
        }
        Ok(())
    };
    tokio::time::timeout_at(run.deadline, adopting).await.map_err(|_| {
        Failure::new(
            code::TIMEOUT,
            format!(
                "--timeout {}s passed while checking the --adopt tasks; those not reported above were not \
                 recorded, and nothing was sent",
                run.global.timeout_seconds()
            ),
        )
    })?
}

/// An adoption that did not happen; nothing was recorded or sent.
fn adopt_failure(line: u64, error: &AdoptError) -> Failure {
    let code = match error {
        AdoptError::Service { source, .. } => crate::exit_code(source),
        AdoptError::Store(error) => code::of(error.class()),
        _ => code::USAGE,
    };
    let message = match error {
        AdoptError::Service { source, .. } => format!(
            "cannot check the task, so nothing was recorded: {}",
            crate::describe(source)
        ),
        other => other.to_string(),
    };
    Failure::new(code, out::clean(&format!("--adopt {line}=…: {message}")))
}
