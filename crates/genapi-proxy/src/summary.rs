//! What the proxy saw, counted as it happens, and the summary it prints.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Counters of one proxy.
#[derive(Default)]
pub(crate) struct Counters {
    requests: AtomicU64,
    submissions_sent: AtomicU64,
    tasks: AtomicU64,
    duplicates_stopped: AtomicU64,
    /// Of those, the ones whose acceptance reported no cost.
    duplicates_unpriced: AtomicU64,
    unknown_refused: AtomicU64,
    retry_after_ignored: AtomicU64,
    contract_mismatches: AtomicU64,
    /// Credits the stopped duplicates would have cost, as their
    /// acceptances reported.
    credits_saved: Mutex<f64>,
}

/// One of the things the proxy counts.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Count {
    Request,
    SubmissionSent,
    Task,
    UnknownRefused,
    RetryAfterIgnored,
    ContractMismatch,
}

impl Counters {
    pub(crate) fn add(&self, count: Count) {
        let counter = match count {
            Count::Request => &self.requests,
            Count::SubmissionSent => &self.submissions_sent,
            Count::Task => &self.tasks,
            Count::UnknownRefused => &self.unknown_refused,
            Count::RetryAfterIgnored => &self.retry_after_ignored,
            Count::ContractMismatch => &self.contract_mismatches,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// A duplicate answered with its first acceptance, which reported `cost`.
    pub(crate) fn duplicate_stopped(&self, cost: Option<f64>) {
        self.duplicates_stopped.fetch_add(1, Ordering::Relaxed);
        match cost {
            Some(cost) => *self.credits_saved.lock().unwrap_or_else(|p| p.into_inner()) += cost,
            None => {
                self.duplicates_unpriced.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    pub(crate) fn summary(&self) -> Summary {
        let read = |counter: &AtomicU64| counter.load(Ordering::Relaxed);
        Summary {
            requests: read(&self.requests),
            submissions_sent: read(&self.submissions_sent),
            tasks: read(&self.tasks),
            duplicates_stopped: read(&self.duplicates_stopped),
            duplicates_unpriced: read(&self.duplicates_unpriced),
            credits_saved: *self.credits_saved.lock().unwrap_or_else(|p| p.into_inner()),
            unknown_refused: read(&self.unknown_refused),
            retry_after_ignored: read(&self.retry_after_ignored),
            contract_mismatches: read(&self.contract_mismatches),
        }
    }
}

/// What a proxy saw since it started; `GET /_genapi/summary` answers it
/// as JSON.
///
/// ```
/// let summary = genapi_proxy::Summary::default();
/// assert_eq!(summary.to_string(), "0 requests, 0 submissions sent, 0 tasks accepted, 0 duplicates stopped");
/// let mut one = summary.clone();
/// one.requests = 1;
/// assert!(one.to_string().starts_with("1 request, "));
/// // A duplicate whose acceptance named no cost is not said to save nothing.
/// one.duplicates_stopped = 1;
/// one.duplicates_unpriced = 1;
/// assert!(one.to_string().contains("1 duplicate stopped (1 task whose cost was not reported)"));
/// ```
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
#[non_exhaustive]
pub struct Summary {
    /// Requests received from callers.
    pub requests: u64,
    /// Submissions sent to the service.
    pub submissions_sent: u64,
    /// Submissions the service accepted: tasks made.
    pub tasks: u64,
    /// Repeats of a job answered with its first acceptance instead of
    /// being sent again.
    pub duplicates_stopped: u64,
    /// What the stopped duplicates would have cost, by the costs their
    /// acceptances reported.
    pub credits_saved: f64,
    /// Stopped duplicates whose acceptance reported no cost: not in
    /// [`Summary::credits_saved`], which is then less than they saved.
    pub duplicates_unpriced: u64,
    /// Repeats refused because the first one's answer never came.
    pub unknown_refused: u64,
    /// Requests a caller sent before the wait a 429 asked of it was over.
    pub retry_after_ignored: u64,
    /// Requests and answers that differ from `openapi.json`.
    pub contract_mismatches: u64,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let counted = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
        write!(
            f,
            "{}, {} sent, {} accepted, {} stopped",
            counted(self.requests, "request", "requests"),
            counted(self.submissions_sent, "submission", "submissions"),
            counted(self.tasks, "task", "tasks"),
            counted(self.duplicates_stopped, "duplicate", "duplicates"),
        )?;
        match (self.credits_saved > 0.0, self.duplicates_unpriced) {
            (true, 0) => write!(f, " ({} credits not paid twice)", self.credits_saved)?,
            (true, n) => write!(
                f,
                " ({} credits not paid twice, and {} whose cost was not reported)",
                self.credits_saved,
                counted(n, "task", "tasks")
            )?,
            (false, 0) => {}
            (false, n) => write!(f, " ({} whose cost was not reported)", counted(n, "task", "tasks"))?,
        }
        if self.unknown_refused > 0 {
            let repeats = counted(self.unknown_refused, "repeat", "repeats");
            write!(f, ", {repeats} of a submission with no answer refused")?;
        }
        if self.contract_mismatches > 0 {
            let differences = counted(self.contract_mismatches, "difference", "differences");
            write!(f, ", {differences} from openapi.json")?;
        }
        if self.retry_after_ignored > 0 {
            let requests = counted(self.retry_after_ignored, "request", "requests");
            write!(f, ", {requests} sent before their Retry-After")?;
        }
        Ok(())
    }
}
