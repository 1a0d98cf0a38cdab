//! One request of a batch, and the line of a job file it comes from.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// One request of a batch: where it goes, its body, and the name of its
/// output file.
///
/// ```
/// use genapi_batch::Job;
/// let job = Job::new(1, "/v1/gen-2-pro", serde_json::json!({"prompt": "a red fox"})).name("fox");
/// assert_eq!(job.stem(), "fox");
/// assert_eq!(Job::new(7, "/v1/gen-2-pro", serde_json::json!({})).stem(), "line-7");
/// ```
#[derive(Clone, PartialEq)]
pub struct Job {
    /// A number unique within the batch (the line of the job file): the key
    /// of the journal.
    pub line: u64,
    /// Path of the operation, e.g. `/v1/gen-2-pro`.
    pub path: String,
    /// The request body, as sent (image fields already encoded).
    pub body: Value,
    /// File stem of the output; `line-N` when not given.
    pub name: Option<String>,
    /// Its place in a sweep, for the gallery's grid (never sent).
    pub cell: Option<GridCell>,
}

/// A job's place in a sweep: its row (usually the prompt) and its column
/// (the swept value, e.g. `seed 2`). The gallery lays such jobs out as a
/// grid; the service never sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GridCell {
    /// The row's label.
    pub row: String,
    /// The column's label.
    pub column: String,
}

/// Shown without secrets (a `webhook_secret`, any key or token) and with
/// long values (images) cut.
fn shown_body(body: &Value) -> Value {
    genapi_text::scrubbed(body)
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Job")
            .field("line", &self.line)
            .field("path", &self.path)
            .field("body", &shown_body(&self.body))
            .field("name", &self.name)
            .field("cell", &self.cell)
            .finish()
    }
}

impl std::fmt::Debug for JobLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JobLine")
            .field("model", &self.model)
            .field("name", &self.name)
            .field("grid", &self.grid)
            .field("fields", &shown_body(&Value::Object(self.fields.clone())))
            .finish()
    }
}

impl Job {
    /// A job without a name.
    pub fn new(line: u64, path: impl Into<String>, body: Value) -> Job {
        Job {
            line,
            path: path.into(),
            body,
            name: None,
            cell: None,
        }
    }

    /// A job from a typed request or its builder, as
    /// [`genapi::Client::submit`] takes one: the path is its operation's and
    /// the body what the client would send. A builder that cannot finish
    /// fails here with the same [`genapi::Error::Validation`] as `submit`.
    ///
    /// ```
    /// use genapi::api::types::Gen2ProRequest;
    /// use genapi_batch::Job;
    /// let job = Job::from_request(1, Gen2ProRequest::builder().prompt("a red fox").width(1024u32))?.name("fox");
    /// assert_eq!(job.path, "/v1/gen-2-pro");
    /// assert_eq!(job.body["prompt"], "a red fox");
    /// assert_eq!(job.stem(), "fox");
    /// # Ok::<(), genapi::Error>(())
    /// ```
    pub fn from_request<R: genapi::IntoRequest>(line: u64, request: R) -> Result<Job, genapi::Error> {
        let operation = <R::Request as genapi::Submit>::OPERATION;
        Ok(Job::new(line, operation.path, request.into_body()?))
    }

    /// Names the output file (its extension follows the image format).
    pub fn name(mut self, name: impl Into<String>) -> Job {
        self.name = Some(name.into());
        self
    }

    /// The output file's stem: the name made safe for a file name (ASCII
    /// letters, digits, `-` and `_`), else `line-N`.
    pub fn stem(&self) -> String {
        let safe = self.name.as_deref().map(safe_stem).unwrap_or_default();
        if safe.is_empty() {
            format!("line-{}", self.line)
        } else {
            safe
        }
    }

    /// A fingerprint of the path and body (FNV-1a, hex): the job's
    /// identity, as a store records it with its submission
    /// ([`crate::Event::Intent`]), to know the job wherever the job file
    /// moves it ([`crate::Claims`]). It is the body's text: what earlier
    /// runs recorded, so a store they wrote keeps knowing its jobs. A job
    /// spelled otherwise (`5.0` for `5`) is another job here, which a run
    /// never sends while the one it may be is in no line of the file
    /// ([`crate::Claims::edited_away`]).
    pub fn digest(&self) -> String {
        let mut fingerprint = Fingerprint::default();
        fingerprint.add(format!("{}\n{}", self.path, self.body).as_bytes());
        fingerprint.hex()
    }
}

/// A hash of an output name, to notice a repeated name without keeping
/// every name.
pub(crate) fn name_hash(name: &str) -> u64 {
    let mut fingerprint = Fingerprint::default();
    fingerprint.add(name.as_bytes());
    fingerprint.value()
}

/// FNV-1a over bytes: a cheap fingerprint to notice a change, not a
/// defence against someone crafting one.
pub(crate) struct Fingerprint(u64);

impl Default for Fingerprint {
    fn default() -> Self {
        Fingerprint(0xcbf2_9ce4_8422_2325)
    }
}

impl Fingerprint {
    pub(crate) fn add(&mut self, bytes: &[u8]) {
        for byte in bytes {
            self.0 ^= u64::from(*byte);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }

    pub(crate) fn hex(&self) -> String {
        format!("{:016x}", self.value())
    }

    pub(crate) fn value(&self) -> u64 {
        self.0
    }
}

/// `text` reduced to a safe file stem: at most 100 of ASCII letters, digits,
/// `-` and `_` (possibly empty). It has no dot, so the output's extension is
/// always the image format's.
///
/// ```
/// assert_eq!(genapi_batch::safe_stem("../../etc/passwd"), "etcpasswd");
/// ```
pub fn safe_stem(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
        .take(100)
        .collect()
}

/// One line of a job file: the model, the output's name, and the model's
/// fields. Image fields hold a file path (relative to the job file) or an
/// http(s) URL.
///
/// ```
/// let line: genapi_batch::JobLine =
///     serde_json::from_str(r#"{"model": "gen-2-pro", "name": "fox", "prompt": "a red fox", "seed": 7}"#).unwrap();
/// assert_eq!(line.model, "gen-2-pro");
/// assert_eq!(line.fields["seed"], 7);
/// ```
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(
        title = "genapi batch job line",
        description = "One request of `genapi batch`: the model, the output's name, and the model's fields. Image \
                       fields take a file path (relative to the job file) or an http(s) URL."
    )
)]
pub struct JobLine {
    /// The model (see `genapi models`), e.g. `gen-2-pro`, `gen-tools/deblur-v1`.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub model: String,
    /// Stem of the output file in the output directory: letters, digits, `-` and `_` (the extension follows the
    /// image format); unique in the file. Default: `line-N`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[A-Za-z0-9_-]{1,100}$")))]
    pub name: Option<String>,
    /// The line's place in a sweep (`{"row": "a red fox", "column": "seed 2"}`), for the gallery's grid; never
    /// sent. `genapi grid` writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grid: Option<GridCell>,
    /// The model's request fields (`prompt`, `seed`, `width`, …); image fields take a file path, relative to the
    /// job file, or an http(s) URL.
    #[serde(flatten)]
    pub fields: Map<String, Value>,
}

#[cfg(feature = "schema")]
impl JobLine {
    /// The JSON Schema of a job line, for editors that validate job files.
    ///
    /// ```
    /// let schema = genapi_batch::JobLine::schema();
    /// assert_eq!(schema["required"][0], "model");
    /// ```
    pub fn schema() -> Value {
        let schema = schemars::schema_for!(JobLine);
        serde_json::to_value(schema).unwrap_or(Value::Null)
    }
}
