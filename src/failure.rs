//! What kind of failure an error is: the one mapping from [`Error`] to a
//! class, which a program acts on (the `genapi` command gives each class an
//! exit code of its own).

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// Why something did not succeed, in the few kinds a program acts on.
///
/// ```
/// use genapi::{Error, FailureClass};
/// let error = Error::Config("no API key".into());
/// assert_eq!(error.class(), FailureClass::Validation);
/// assert_eq!(error.class().as_str(), "validation");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureClass {
    /// The request, an input or the configuration is invalid: fix it.
    Validation,
    /// 403, or a polling host the key may not go to.
    Auth,
    /// 402: no credits left.
    Credits,
    /// 429: too many active tasks.
    RateLimited,
    /// Moderated (not charged).
    Moderated,
    /// The task ended with `Error`, was not found, or its result expired.
    TaskFailed,
    /// No final status in time.
    Timeout,
    /// Network or service failure (a result served that is not an image
    /// included).
    Network,
    /// The submission's outcome is unknown.
    Unknown,
    /// The result could not be written, or the journal not kept.
    Write,
    /// Anything else.
    Other,
    /// A batch stopped submitting at its spending cap
    /// (`genapi_batch::Batch::max_credits`): the job was not sent.
    CreditCap,
}

impl FailureClass {
    /// Every class.
    pub const ALL: [FailureClass; 12] = [
        FailureClass::Write,
        FailureClass::Other,
        FailureClass::Validation,
        FailureClass::Auth,
        FailureClass::Credits,
        FailureClass::RateLimited,
        FailureClass::Moderated,
        FailureClass::TaskFailed,
        FailureClass::Timeout,
        FailureClass::Network,
        FailureClass::Unknown,
        FailureClass::CreditCap,
    ];

    /// The classes from the most serious to the least: what stops a whole
    /// batch first (the key, the credits, the cap), then what a later run
    /// may fix (the network, the limit, time), then what one line's own
    /// task or input caused, and last a failure of no known kind. A batch of many outcomes reports the first
    /// class of this list among them ([`FailureClass::most_serious`]).
    pub const BY_SEVERITY: [FailureClass; 12] = [
        FailureClass::Auth,
        FailureClass::Credits,
        FailureClass::CreditCap,
        FailureClass::Unknown,
        FailureClass::Network,
        FailureClass::RateLimited,
        FailureClass::Timeout,
        FailureClass::TaskFailed,
        FailureClass::Moderated,
        FailureClass::Write,
        FailureClass::Validation,
        FailureClass::Other,
    ];

    /// The most serious of `classes` ([`FailureClass::BY_SEVERITY`]), or
    /// `None` when there is none.
    ///
    /// ```
    /// use genapi::FailureClass;
    /// let seen = [FailureClass::Moderated, FailureClass::Network, FailureClass::Validation];
    /// assert_eq!(FailureClass::most_serious(seen), Some(FailureClass::Network));
    /// assert_eq!(FailureClass::most_serious([]), None);
    /// ```
    pub fn most_serious(classes: impl IntoIterator<Item = FailureClass>) -> Option<FailureClass> {
        classes
            .into_iter()
            .min_by_key(|class| FailureClass::BY_SEVERITY.iter().position(|c| c == class))
    }

    /// Whether a failure of this class is the task's end: the service
    /// ended it without a result ([`FailureClass::Moderated`], or
    /// [`FailureClass::TaskFailed`]: it failed, is gone or its result
    /// expired), so waiting for it again gives nothing. Any other failure
    /// of an accepted task (a timeout, the network, a refused key, the rate
    /// limit, a result not written, an interruption) leaves it open: to be
    /// waited for again, never submitted again. The rule for whether an
    /// accepted task is still open, for a batch's lines and the command's
    /// tasks alike. [`Error::is_worth_waiting_again`] answers another
    /// question: whether waiting again may help as things are (not while
    /// the key is refused, which must be fixed first).
    ///
    /// ```
    /// use genapi::FailureClass;
    /// assert!(FailureClass::Moderated.ends_the_task());
    /// assert!(!FailureClass::Timeout.ends_the_task());
    /// assert!(!FailureClass::Write.ends_the_task());
    /// ```
    pub fn ends_the_task(self) -> bool {
        matches!(self, FailureClass::Moderated | FailureClass::TaskFailed)
    }

    /// The class as a person reads it, in a summary or a gallery (the
    /// word of [`FailureClass::as_str`] is the one programs read).
    ///
    /// ```
    /// assert_eq!(genapi::FailureClass::Credits.in_words(), "no credits");
    /// ```
    pub fn in_words(self) -> &'static str {
        match self {
            FailureClass::Validation => "invalid request",
            FailureClass::Auth => "key refused",
            FailureClass::Credits => "no credits",
            FailureClass::RateLimited => "rate limited",
            FailureClass::Moderated => "moderated",
            FailureClass::TaskFailed => "task failed",
            FailureClass::Timeout => "timed out",
            FailureClass::Network => "network or service error",
            FailureClass::Unknown => "no answer",
            FailureClass::Write => "not written",
            FailureClass::Other => "other",
            FailureClass::CreditCap => "at the credit cap",
        }
    }

    /// The class a word of [`FailureClass::as_str`] names.
    pub fn from_word(word: &str) -> Option<FailureClass> {
        FailureClass::ALL.into_iter().find(|class| class.as_str() == word)
    }

    /// The word used in journals, result lines and `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::Validation => "validation",
            FailureClass::Auth => "auth",
            FailureClass::Credits => "credits",
            FailureClass::RateLimited => "rate_limited",
            FailureClass::Moderated => "moderated",
            FailureClass::TaskFailed => "task_failed",
            FailureClass::Timeout => "timeout",
            FailureClass::Network => "network",
            FailureClass::Unknown => "unknown",
            FailureClass::Write => "write",
            FailureClass::Other => "other",
            FailureClass::CreditCap => "credit_cap",
        }
    }
}

impl Error {
    /// The kind of failure this is.
    pub fn class(&self) -> FailureClass {
        match self {
            // Writing the output of an accepted (charged) task failed: the
            // task is fine, the disk is not.
            Error::Write { .. } | Error::FileExists { .. } => FailureClass::Write,
            Error::Validation { .. } | Error::Input { .. } | Error::InvalidArgument { .. } | Error::Config(_) => {
                FailureClass::Validation
            }
            Error::Forbidden { .. } | Error::UntrustedOrigin { .. } => FailureClass::Auth,
            Error::InsufficientCredits { .. } => FailureClass::Credits,
            Error::RateLimited { .. } => FailureClass::RateLimited,
            Error::Moderated { .. } => FailureClass::Moderated,
            Error::TaskFailed { .. } | Error::TaskNotFound { .. } | Error::ResultExpired { .. } => {
                FailureClass::TaskFailed
            }
            Error::Timeout { .. } | Error::DownloadTimeout { .. } => FailureClass::Timeout,
            Error::Transport { .. }
            | Error::Layer { .. }
            | Error::Server { .. }
            | Error::UnexpectedStatus { .. }
            | Error::Redirected { .. }
            | Error::Decode { .. }
            | Error::TooLarge { .. }
            | Error::SharedLimit { .. }
            // The service served something else than the result: the task
            // is fine, and its result may be fetched again.
            | Error::NotAnImage { .. } => FailureClass::Network,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TaskRef;

    #[test]
    fn every_class_is_listed_once_in_each_list() {
        for list in [FailureClass::ALL, FailureClass::BY_SEVERITY] {
            let mut sorted = list.to_vec();
            sorted.sort();
            sorted.dedup();
            assert_eq!(sorted.len(), 12, "{list:?}");
        }
    }

    #[test]
    fn only_an_end_the_service_said_closes_an_accepted_task() {
        let task = TaskRef {
            id: "t".into(),
            polling_url: "https://api.example.com/v1/get_result?id=t".into(),
        };
        let ended = [
            Error::TaskFailed {
                task: task.clone(),
                details: None,
            },
            Error::TaskNotFound { task: task.clone() },
            Error::ResultExpired { task: task.clone() },
            Error::Moderated {
                task: task.clone(),
                stage: crate::Moderation::Content,
                details: None,
            },
        ];
        for error in &ended {
            assert!(error.class().ends_the_task(), "{error}");
            assert!(!error.is_worth_waiting_again(), "{error}");
        }
        let open = [
            Error::Timeout {
                after: std::time::Duration::from_secs(1),
                last_status: None,
                task: task.clone(),
            },
            Error::DownloadTimeout {
                after: std::time::Duration::from_secs(1),
                task: task.clone(),
            },
            Error::Server {
                status: 503,
                message: String::new(),
                task: Some(task.clone()),
            },
            Error::RateLimited {
                retry_after: None,
                message: String::new(),
                task: Some(task.clone()),
            },
            Error::Forbidden {
                message: String::new(),
                key_origin: String::new(),
                task: Some(task.clone()),
            },
            Error::NotAnImage {
                task: task.clone(),
                size: 3,
            },
            Error::Write {
                target: "out.png".into(),
                message: "full".into(),
                task: Some(task.clone()),
            },
        ];
        for error in &open {
            assert!(!error.class().ends_the_task(), "{error}");
        }
        let ending: Vec<_> = FailureClass::ALL.into_iter().filter(|c| c.ends_the_task()).collect();
        assert_eq!(ending, [FailureClass::Moderated, FailureClass::TaskFailed]);
    }

    #[test]
    fn an_input_is_the_users_to_fix_and_a_write_names_the_paid_task() {
        let input = Error::Input {
            source_name: "cat.png".into(),
            message: "cannot read".into(),
        };
        assert_eq!(input.class(), FailureClass::Validation);
        let task = TaskRef {
            id: "t".into(),
            polling_url: "https://api.example.com/v1/get_result?id=t".into(),
        };
        let write = Error::Write {
            target: "out.png".into(),
            message: "no space left on device".into(),
            task: Some(task),
        };
        assert_eq!(write.class(), FailureClass::Write);
        assert_eq!(write.task().map(|t| t.id.as_str()), Some("t"));
        assert!(write.to_string().contains("task t"), "{write}");
    }
}
