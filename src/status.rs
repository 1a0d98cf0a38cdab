//! The status of a task: an open set.
//!
//! The service adds status values without notice (`Reasoning`, `Queued`, …), so
//! the generator's closed enums would make a poll fail to decode the day a new
//! one appears. `build.rs` substitutes this type for the document's
//! `TaskStatus` schema: the known values get variants, anything else is kept
//! verbatim in [`TaskStatus::Other`] and means "still in progress".

use std::fmt;

/// Status of a task as reported by polling.
///
/// ```
/// use genapi::TaskStatus;
/// let status: TaskStatus = serde_json::from_str("\"Reasoning\"").unwrap();
/// assert!(!status.is_final());
/// let new: TaskStatus = serde_json::from_str("\"Dreaming\"").unwrap();
/// assert_eq!(new, TaskStatus::Other("Dreaming".into()));
/// assert!(TaskStatus::Ready.is_success());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TaskStatus {
    /// Accepted, not started or in progress.
    Pending,
    /// Waiting to start (video).
    Queued,
    /// Planning the output (newer models).
    Reasoning,
    /// Producing the output.
    Generating,
    /// Storing the output (video).
    Uploading,
    /// Finished; the result holds the output.
    Ready,
    /// Failed.
    Error,
    /// The input was flagged by moderation before processing (not charged).
    RequestModerated,
    /// The output was flagged by moderation (not charged).
    ContentModerated,
    /// The service does not know the task, or it has expired.
    TaskNotFound,
    /// A value this version does not know; treated as in progress.
    Other(String),
}

const KNOWN: [(TaskStatus, &str); 10] = [
    (TaskStatus::Pending, "Pending"),
    (TaskStatus::Queued, "Queued"),
    (TaskStatus::Reasoning, "Reasoning"),
    (TaskStatus::Generating, "Generating"),
    (TaskStatus::Uploading, "Uploading"),
    (TaskStatus::Ready, "Ready"),
    (TaskStatus::Error, "Error"),
    (TaskStatus::RequestModerated, "Request Moderated"),
    (TaskStatus::ContentModerated, "Content Moderated"),
    (TaskStatus::TaskNotFound, "Task not found"),
];

impl TaskStatus {
    /// The value as the service writes it.
    pub fn as_str(&self) -> &str {
        match self {
            TaskStatus::Other(value) => value,
            known => KNOWN
                .iter()
                .find(|(s, _)| s == known)
                .map(|(_, text)| *text)
                .unwrap_or(""),
        }
    }

    /// `Ready`, the one success.
    pub fn is_success(&self) -> bool {
        *self == TaskStatus::Ready
    }

    /// One of the four failure statuses of the contract.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            TaskStatus::Error | TaskStatus::RequestModerated | TaskStatus::ContentModerated | TaskStatus::TaskNotFound
        )
    }

    /// Success or failure: polling stops here. Every other value, known or
    /// not, means the task is still in progress.
    pub fn is_final(&self) -> bool {
        self.is_success() || self.is_failure()
    }
}

impl From<&str> for TaskStatus {
    fn from(value: &str) -> Self {
        KNOWN
            .iter()
            .find(|(_, text)| *text == value)
            .map(|(status, _)| status.clone())
            .unwrap_or_else(|| TaskStatus::Other(value.to_string()))
    }
}

impl fmt::Display for TaskStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl serde::Serialize for TaskStatus {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> serde::Deserialize<'de> for TaskStatus {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = std::borrow::Cow::<'de, str>::deserialize(deserializer)?;
        Ok(TaskStatus::from(text.as_ref()))
    }
}

/// With the `schema` feature: any string (the set of statuses is open).
#[cfg(feature = "schema")]
impl schemars::JsonSchema for TaskStatus {
    fn schema_name() -> String {
        "TaskStatus".to_string()
    }
    fn json_schema(generator: &mut schemars::r#gen::SchemaGenerator) -> schemars::schema::Schema {
        String::json_schema(generator)
    }
}
