//! Giving a line whose submission went unanswered its task back.
//!
//! A run that dies between the service accepting a submission and the
//! journal recording the answer loses the task's id with the process. The
//! service offers no way to look a task up without its id, so the batch
//! cannot find it by itself, and it never submits such a line again on its
//! own (that could pay twice). If the user finds the id elsewhere, for
//! instance in the project's activity records, [`adopt`] records it as the
//! line's task: the next run polls it and saves its result, and the line is
//! never submitted again.

use super::journal::{fold, Journal, Record};
use crate::{Client, TaskRef, TaskStatus};

/// Why a task could not be adopted for a line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// The journal has no submission for this line: there is nothing to
    /// recover (a later run submits it normally).
    #[error("line {line} has no submission in the journal: nothing to recover (a run submits it normally)")]
    NoSubmission {
        /// The line.
        line: u64,
    },
    /// The line's submission was answered: it already has its task, or the
    /// service refused it (nothing was created), or it finished.
    #[error("line {line} is not unknown: {why}")]
    NotUnknown {
        /// The line.
        line: u64,
        /// What the journal holds for it.
        why: String,
    },
    /// The task is already the task of another line.
    #[error("task {id} is already recorded for line {other_line}; one task cannot serve two lines")]
    TaskTaken {
        /// The task id.
        id: String,
        /// The line that holds it.
        other_line: u64,
    },
    /// The service does not know the task (a mistyped id, a task of another
    /// project, a regional task given by id to the global host, or a task
    /// whose results have expired).
    #[error(
        "the service does not know task {id} on any configured API host (check the id; a task polled on another \
         regional host needs its polling URL or that host trusted; results expire after about 10 minutes)"
    )]
    NoSuchTask {
        /// The task id.
        id: String,
    },
    /// The task could not be checked at the service.
    #[error("cannot check task {id} at the service: {source}")]
    Service {
        /// The task id or address as given.
        id: String,
        /// What went wrong.
        #[source]
        source: Box<crate::Error>,
    },
    /// The journal could not be read or written.
    #[error("the journal: {0}")]
    Journal(#[from] std::io::Error),
}

/// Records `task` (an id, or the polling URL the service gave) as the task
/// of `line`, whose submission was sent but never answered.
///
/// The task is polled once first, so a mistyped id is refused rather than
/// recorded; any status will do, a finished one too. The next run of the
/// batch over the same journal polls it and saves its result, as for any
/// accepted task.
///
/// ```no_run
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// use genapi::batch::{adopt, FileJournal};
/// let client = genapi::Client::from_env()?;
/// let mut journal = FileJournal::open("out/journal.jsonl")?;
/// // Line 17 was reported unknown; its task was found in the activity records.
/// let task = adopt(&client, &mut journal, 17, "2f6c1a0e-6d1b-4c6e-9a43-0d8e5b7e2a91").await?;
/// println!("line 17 is {task}");
/// # Ok(()) }
/// ```
pub async fn adopt<J: Journal>(client: &Client, journal: &mut J, line: u64, task: &str) -> Result<TaskRef, AdoptError> {
    let lines = fold(journal.replay()?);
    let Some(state) = lines.get(&line) else {
        return Err(AdoptError::NoSubmission { line });
    };
    let why = if let Some((id, _, _)) = &state.accepted {
        Some(format!("it already has task {id}"))
    } else if state.finished.is_some() {
        Some("it has finished".to_string())
    } else if !state.unanswered {
        Some("the service refused its submission, so no task was created; a run submits it again".to_string())
    } else {
        None
    };
    if let Some(why) = why {
        return Err(AdoptError::NotUnknown { line, why });
    }
    let service_error = |source: crate::Error| AdoptError::Service {
        id: task.to_string(),
        source: Box::new(source),
    };
    let given = client.task(task).map_err(service_error)?;
    let id = given.id().to_string();
    if let Some((other_line, _)) = lines
        .iter()
        .find(|(_, other)| other.accepted.as_ref().is_some_and(|(taken, _, _)| *taken == id))
    {
        return Err(AdoptError::TaskTaken {
            id,
            other_line: *other_line,
        });
    }
    // A polling URL says where the task is; an id alone is looked for on
    // each API host the client is configured with.
    let candidates = if looks_like_url(task) {
        vec![given]
    } else {
        client
            .polling_candidates(&id)
            .map_err(service_error)?
            .iter()
            .map(|url| client.task(url.as_str()))
            .collect::<crate::Result<Vec<_>>>()
            .map_err(service_error)?
    };
    let mut found = None;
    for candidate in candidates {
        let polled = candidate.poll().await.map_err(service_error)?;
        if polled.status != TaskStatus::TaskNotFound {
            found = Some(candidate);
            break;
        }
    }
    let Some(handle) = found else {
        return Err(AdoptError::NoSuchTask { id });
    };
    let reference = handle.reference().clone();
    journal.append(&Record::Accepted {
        line,
        id: reference.id.clone(),
        polling_url: reference.polling_url.clone(),
        cost: None,
    })?;
    Ok(reference)
}

/// Whether the text is an address rather than a bare id.
fn looks_like_url(text: &str) -> bool {
    text.contains("://")
}
