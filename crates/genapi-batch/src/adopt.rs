//! Giving a line whose submission went unanswered its task back.
//!
//! A run that dies between the service accepting a submission and the
//! journal writing the answer loses the task's id with the process. The
//! service offers no way to look a task up without its id, so the batch
//! cannot find it by itself, and it never submits such a line again on its
//! own (that could pay twice). If the user finds the id elsewhere, for
//! instance in the project's activity records, [`adopt`] writes it as the
//! line's task: the next run polls it and saves its result, and the line is
//! never submitted again.

use std::collections::BTreeMap;

use super::job::Job;
use super::journal::Event;
use super::line::Line;
use super::store::{StoreError, WriteStore};
use genapi::{Client, TaskRef};

/// Longest task id or polling URL taken (ids are UUIDs; addresses short).
const MAX_TASK_TEXT: usize = 2048;

// `{:?}` (what `?` in `main` prints) says what to do first, then the causes.
genapi_text::debug_as_report!(AdoptError);

/// Why a task could not be adopted for a line.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum AdoptError {
    /// The task was given in a form that cannot name a task.
    #[error("{why}")]
    InvalidTask {
        /// What is wrong with it.
        why: String,
    },
    /// The store has no submission for this line: there is nothing to
    /// recover (a later run submits it normally).
    #[error(
        "line {line} has no submission in the batch's store, so there is nothing to recover (check the line number)"
    )]
    NoSubmission {
        /// The line.
        line: u64,
    },
    /// The line's submission was answered: it already has another task, or
    /// the service refused it (nothing was created), or it finished.
    #[error("line {line} is not unknown: {why}")]
    NotUnknown {
        /// The line.
        line: u64,
        /// What the journal holds for it.
        why: String,
    },
    /// The job of the line is not the one whose submission was written.
    #[error("line {line} changed since its submission was recorded; restore it to adopt its task")]
    JobChanged {
        /// The line.
        line: u64,
    },
    /// The task is already the task of another line.
    #[error("task {id} is already recorded for line {other_line}; one task cannot serve two lines")]
    TaskTaken {
        /// The task id.
        id: String,
        /// The line that holds it.
        other_line: u64,
    },
    /// The task's answer names another prompt than the line's (checked only
    /// where the service does not rewrite prompts): it is some other
    /// submission's task.
    #[error("task {id} was made from another prompt ({task_prompt:?}) than line {line}'s; it is not this line's task")]
    PromptMismatch {
        /// The line.
        line: u64,
        /// The task id.
        id: String,
        /// The start of the prompt the service reports for the task.
        task_prompt: String,
    },
    /// No host knows the task (a mistyped id, a task of another project or
    /// of a host not configured, or one whose results have expired).
    #[error(
        "the service does not know task {id} (looked at {looked_at}); check the id, give its polling URL if it \
         lives on another host, and note that tasks are forgotten once their results expire (about 10 minutes)"
    )]
    NoSuchTask {
        /// The task id.
        id: String,
        /// The hosts asked.
        looked_at: String,
    },
    /// The task could not be checked at the service; nothing was written.
    #[error("cannot check task {id} at the service, so nothing was recorded: {source}")]
    Service {
        /// The task id or address as given.
        id: String,
        /// What went wrong.
        #[source]
        source: Box<genapi::Error>,
    },
    /// The batch's store could not be read or written.
    #[error("the batch's store: {0}")]
    Store(#[from] StoreError),
}

/// A task written for a line by [`adopt`].
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Adopted {
    /// The task.
    pub task: TaskRef,
    /// The prompt the service reports for the task when it differs from the
    /// job's but could not be judged (the model may rewrite prompts): worth
    /// showing the user, who may have picked the wrong task.
    pub unchecked_prompt: Option<String>,
}

/// Events `task` (an id, or the polling URL the service gave) as the task
/// of `job`'s line, whose submission was sent but never answered.
///
/// The task is looked up first ([`Client::task`], polled once), so a mistyped id is
/// refused rather than written; any status will do, a finished one too.
/// Where the service does not rewrite prompts (upsampling off, or a model
/// without it), the prompt it reports must be the job's, now or, for a task
/// still running, before its result is saved. Elsewhere a differing prompt
/// is returned in [`Adopted::unchecked_prompt`] for the user to judge.
/// Adopting the task a line already has changes nothing, so the same command
/// can be run again; an adopted task can be replaced by another, even once
/// its line has finished (the next run saves the new task's result). The next run of the batch over the same store polls the task
/// and saves its result, as for any accepted task.
///
/// ```no_run
/// # async fn demo(job: genapi_batch::Job) -> Result<(), Box<dyn std::error::Error>> {
/// use genapi_batch::{adopt, FileJournal, JournalStore};
/// let client = genapi::Client::from_env()?;
/// let store = JournalStore::open(FileJournal::open("out/journal.jsonl")?)?;
/// // The job's line was reported unknown; its task was found in the activity records.
/// let task = adopt(&client, &store, &job, "2f6c1a0e-6d1b-4c6e-9a43-0d8e5b7e2a91").await?;
/// println!("line {} is {}", job.line, task.task);
/// # Ok(()) }
/// ```
pub async fn adopt(client: &Client, store: &dyn WriteStore, job: &Job, task: &str) -> Result<Adopted, AdoptError> {
    let line = job.line;
    let task = task.trim();
    let invalid = |why: String| AdoptError::InvalidTask { why };
    if task.is_empty() {
        return Err(invalid("the task id is empty".into()));
    }
    if task.len() > MAX_TASK_TEXT || task.chars().any(genapi_text::is_unsafe_to_show) {
        return Err(invalid(format!(
            "a task id or polling URL is at most {MAX_TASK_TEXT} characters, without control or invisible formatting characters"
        )));
    }
    // The id, without asking the service yet.
    let id = client.task(task).map_err(service_error(task))?.id().to_string();
    if id.is_empty() || id.chars().any(genapi_text::is_unsafe_to_show) {
        return Err(invalid("the polling URL has no usable `id` parameter".into()));
    }

    let lines = store.lines().await?;
    if let Some(already) = may_adopt(&lines, job, &id)? {
        return Ok(already);
    }
    let (found, unchecked_prompt) = look_up(client, job, task, id).await?;
    let reference = found.reference().clone();
    store
        .write_adoption(Event::Accepted {
            line,
            id: reference.id.clone(),
            polling_url: reference.polling_url.clone(),
            cost: None,
            adopted: true,
        })
        .await?;
    Ok(Adopted {
        task: reference,
        unchecked_prompt,
    })
}

/// What the service said when the task `task` was looked up.
fn service_error(task: &str) -> impl Fn(genapi::Error) -> AdoptError + '_ {
    move |source| AdoptError::Service {
        id: task.to_string(),
        source: Box::new(source),
    }
}

/// Whether the store lets task `id` be adopted for `job`'s line: the
/// adoption already written (`Some`), refused (why), or open (`None`).
fn may_adopt(lines: &BTreeMap<u64, Line>, job: &Job, id: &str) -> Result<Option<Adopted>, AdoptError> {
    let line = job.line;
    let Some(state) = lines.get(&line) else {
        return Err(AdoptError::NoSubmission { line });
    };
    let adopted = state.task().is_some_and(|task| task.adopted);
    if let Some(held) = state.task() {
        if held.id == id {
            return Ok(Some(Adopted {
                task: TaskRef {
                    id: id.to_string(),
                    polling_url: held.polling_url.clone(),
                },
                unchecked_prompt: None,
            }));
        }
        // An adopted task can be replaced, finished or not (it was the
        // user's word, and may prove to be another line's); a task the batch
        // submitted cannot.
        if !held.adopted {
            return Err(AdoptError::NotUnknown {
                line,
                why: format!("it already has task {}", held.id),
            });
        }
    } else if state.ending().is_some() {
        return Err(AdoptError::NotUnknown {
            line,
            why: "it has finished".into(),
        });
    }
    if !matches!(state, Line::Unanswered { .. }) && !adopted {
        return Err(AdoptError::NotUnknown {
            line,
            why: "the service refused its submission, so no task was created; a run submits it again".into(),
        });
    }
    let sent_digest = state.sent().and_then(|sent| sent.digest.as_deref());
    if sent_digest.is_some_and(|digest| digest != job.digest()) {
        return Err(AdoptError::JobChanged { line });
    }
    if let Some((other_line, _)) = lines
        .iter()
        .find(|(_, other)| other.task().is_some_and(|taken| taken.id == id))
    {
        return Err(AdoptError::TaskTaken {
            id: id.to_string(),
            other_line: *other_line,
        });
    }
    Ok(None)
}

/// Looks the task up at the service (polled once) and checks the prompt it
/// reports against the job's: the task found, and a differing prompt that
/// could not be judged.
async fn look_up(
    client: &Client,
    job: &Job,
    task: &str,
    id: String,
) -> Result<(genapi::Task, Option<String>), AdoptError> {
    let line = job.line;
    let service_error = || service_error(task);
    client.learn_secrets(&job.body);
    let found = client.task(task).map_err(service_error())?;
    let polled = found.poll().await.map_err(service_error())?;
    if polled.status == genapi::TaskStatus::TaskNotFound {
        let looked_at = if task.contains("://") {
            vec![found.polling_url().clone()]
        } else {
            client.polling_candidates(&id).map_err(service_error())?
        };
        let looked_at: Vec<String> = looked_at.iter().map(|url| url.origin().ascii_serialization()).collect();
        return Err(AdoptError::NoSuchTask {
            id,
            looked_at: looked_at.join(", "),
        });
    }
    let reported = polled.result.as_ref().and_then(|r| r.prompt.as_deref());
    let asked = job.body.get("prompt").and_then(serde_json::Value::as_str);
    let mut unchecked_prompt = None;
    if let (Some(asked), Some(reported)) = (asked, reported) {
        if !same_prompt(asked, reported) {
            if checked_prompt(job).is_some() {
                return Err(AdoptError::PromptMismatch {
                    line,
                    id,
                    task_prompt: shown_prompt(reported),
                });
            }
            unchecked_prompt = Some(shown_prompt(reported));
        }
    }
    Ok((found, unchecked_prompt))
}

/// The prompt a task of this job must report, when the service is known not
/// to rewrite it: the job turns upsampling off, or its model has no such
/// setting. Otherwise the reported prompt may be a rewrite, and says nothing.
pub(crate) fn checked_prompt(job: &Job) -> Option<&str> {
    let asked = job.body.get("prompt")?.as_str()?;
    let flag = |name: &str| job.body.get(name).and_then(serde_json::Value::as_bool);
    if flag("prompt_upsampling") == Some(false) || flag("disable_pup") == Some(true) {
        return Some(asked);
    }
    if flag("prompt_upsampling") == Some(true) {
        return None;
    }
    let schema = genapi::api::OPERATIONS
        .iter()
        .find(|op| op.path == job.path && op.method == "POST")?
        .request_schema?;
    let properties = genapi::validate::Document::embedded()
        .schema(schema)?
        .get("properties")?;
    let may_rewrite = properties.get("prompt_upsampling").is_some() || properties.get("disable_pup").is_some();
    (!may_rewrite).then_some(asked)
}

/// Whether a reported prompt is the asked one: the same text, allowing for
/// spaces around it, for a long report cut short, and for words of it the
/// client scrubbed as secrets it sent (another line's webhook secret may be
/// a word of this line's prompt: `a red [redacted]`).
pub(crate) fn same_prompt(asked: &str, reported: &str) -> bool {
    let (asked, reported) = (asked.trim(), reported.trim());
    asked == reported || (reported.len() >= 1024 && asked.starts_with(reported)) || same_but_redacted(asked, reported)
}

/// Whether `reported` is `asked` with some of its text replaced by
/// [`genapi_text::REDACTED`]: what it keeps stands in `asked` in order,
/// from its start to its end.
fn same_but_redacted(asked: &str, reported: &str) -> bool {
    let pieces: Vec<&str> = reported.split(genapi_text::REDACTED).collect();
    let (Some(first), Some(last)) = (pieces.first(), pieces.last()) else {
        return false;
    };
    if pieces.len() < 2 || !asked.starts_with(first) {
        return false;
    }
    let mut rest = &asked[first.len()..];
    for piece in &pieces[1..pieces.len() - 1] {
        match rest.find(piece) {
            Some(at) => rest = &rest[at + piece.len()..],
            None => return false,
        }
    }
    rest.ends_with(last)
}

/// The start of a reported prompt, safe to show.
pub(crate) fn shown_prompt(reported: &str) -> String {
    reported
        .chars()
        .filter(|c| !genapi_text::is_unsafe_to_show(*c))
        .take(80)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::same_prompt;

    /// A prompt the client scrubbed of a secret another line sent is still
    /// the line's; a prompt that differs where nothing was redacted is not.
    #[test]
    fn a_prompt_reported_with_words_redacted_is_the_asked_one() {
        for (asked, reported, same) in [
            ("a red fox in the snow", "a red fox in the snow", true),
            ("a red fox in the snow", " a red fox in the snow ", true),
            ("a red fox in the snow", "a red [redacted]", true),
            ("a red fox in the snow", "[redacted] in the snow", true),
            ("a red fox in the snow", "a [redacted] in [redacted]", true),
            ("a red fox in the snow", "[redacted]", true),
            ("a red fox in the snow", "a blue [redacted]", false),
            ("a red fox in the snow", "a red [redacted] rain", false),
            ("a red fox in the snow", "a red fox in the rain", false),
            ("a red fox", "a red fox [redacted] more", false),
        ] {
            assert_eq!(same_prompt(asked, reported), same, "{asked:?} / {reported:?}");
        }
    }
}
