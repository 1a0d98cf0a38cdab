//! A job file: one [`JobLine`] (JSON) per line. Every line is checked
//! against the document before anything is sent, so a typo on line 900 does
//! not surface after 899 paid tasks; then the valid lines are read again one
//! at a time as the batch takes them, so memory does not grow with the file.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::job::{name_hash, safe_stem, Fingerprint, Job, JobLine};
use genapi::validate::{closest, Document, ImageField, Model, UnknownModel};
use genapi::Error;
use genapi::ImageInput;

/// The largest job file read: 64 MiB (some hundred thousand lines).
pub const JOB_FILE_LIMIT: u64 = 64 * 1024 * 1024;

/// The invalid lines whose problems are kept (the others are counted), so a
/// file of a million bad lines costs no more memory than a thousand.
pub const INVALID_LINES_KEPT: usize = 1000;

/// Spellings of model names remembered (`gen-2-pro`, `/v1/gen-2-pro`, …);
/// others are looked up each time.
const SPELLINGS_KEPT: usize = 256;

/// Image files whose encoding the check keeps for the next lines naming
/// them (a file of jobs often names one image many times).
const IMAGES_KEPT: usize = 4;

/// A job file checked against the document.
///
/// ```no_run
/// use genapi_batch::JobFile;
/// let jobs = JobFile::check("jobs.jsonl")?;
/// for invalid in jobs.invalid() {
///     eprintln!("{invalid}");
/// }
/// for job in jobs.jobs()? {
///     match job {
///         Ok(job) => println!("line {}: {} → {}", job.line, job.path, job.stem()),
///         Err(changed) => eprintln!("{changed}"),
///     }
/// }
/// # Ok::<(), genapi::Error>(())
/// ```
#[derive(Debug)]
pub struct JobFile {
    path: PathBuf,
    base_dir: PathBuf,
    lines: usize,
    invalid: Vec<InvalidLine>,
    invalid_lines: usize,
    /// The line numbers of the valid lines, in order, with the fingerprints
    /// of their text and of the line as checked (its image files read), so
    /// a line, or an image it reads, that changed after the check is never
    /// sent unchecked.
    valid: Arc<[(u64, u64, u64)]>,
    /// How many lines the file had when checked.
    last_line: u64,
    digest: String,
    models: Models,
}

/// The models named in a job file, by a bounded number of spellings of
/// their names (a file of many lines names few models, many times).
#[derive(Clone, Debug, Default)]
struct Models {
    by_spelling: HashMap<String, &'static Model>,
}

impl Models {
    fn resolve(&mut self, name: &str) -> Result<&'static Model, UnknownModel> {
        if let Some(model) = self.by_spelling.get(name) {
            return Ok(model);
        }
        let model = Document::embedded().catalog().find(name)?;
        if self.by_spelling.len() < SPELLINGS_KEPT {
            self.by_spelling.insert(name.to_string(), model);
        }
        Ok(model)
    }
}

/// A line of a job file that will not be sent, and why. Shown, it is safe
/// for a terminal: control characters the file had are blanked.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("line {line}: {}", shown_problems(problems))]
pub struct InvalidLine {
    /// Its number in the file (the first line is 1).
    pub line: u64,
    /// Everything wrong with it (at least one).
    pub problems: Vec<LineProblem>,
}

/// One thing wrong with a line of a job file.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LineProblem {
    /// Not a JSON object with a `model` (why, in a job file's words).
    #[error("not a job line ({0})")]
    NotAJobLine(String),
    /// The model is not a submission of the document.
    #[error(transparent)]
    UnknownModel(UnknownModel),
    /// `name` is empty or has characters other than ASCII letters, digits,
    /// `-` and `_` (or more than 100 of them).
    #[error("name {0:?}: use 1 to 100 letters, digits, - and _")]
    UnsafeName(String),
    /// Another line has the same output name.
    #[error("name {name:?} is also the name of line {first}")]
    RepeatedName {
        /// The name.
        name: String,
        /// The line that has it first.
        first: u64,
    },
    /// The model's request has no such field.
    #[error(
        "{model} has no field {field:?}{}",
        suggestion.as_ref().map(|s| format!("; did you mean {s}?")).unwrap_or_default()
    )]
    UnknownField {
        /// The model as written.
        model: String,
        /// The field as written.
        field: String,
        /// The model's field closest to it, when it reads as a typo.
        suggestion: Option<String>,
    },
    /// An image field whose file cannot be used (or that is not a path or
    /// URL at all).
    #[error("{field}: {message}")]
    Image {
        /// The field.
        field: String,
        /// What to fix, naming the file.
        message: String,
    },
    /// The document refuses the body (the service's 422 wording).
    #[error("{}{message}", if field.is_empty() { String::new() } else { format!("{field}: ") })]
    Invalid {
        /// The field, as a dotted path (empty for the body as a whole).
        field: String,
        /// What is wrong.
        message: String,
    },
    /// The line was valid when the file was checked, and is not now (the
    /// file changed while the batch ran): it is skipped.
    #[error("changed while the batch ran, skipped ({0})")]
    Changed(String),
}

impl JobFile {
    /// Reads the file at `path` and checks every line against the document
    /// the crate was generated from: its model, its name, its fields, its
    /// image files (read and encoded), and the body as the service would.
    /// Image paths are relative to the file's directory; an absolute path,
    /// or one that leads out of it (`../`), is read as written: a job file
    /// is trusted as a command line is, so run only job files you trust.
    ///
    /// Fails (with [`Error::Input`]) only when the file itself cannot be
    /// read: not a regular file, larger than [`JOB_FILE_LIMIT`], not UTF-8.
    /// Invalid lines are listed by [`JobFile::invalid`].
    pub fn check(path: impl AsRef<Path>) -> Result<JobFile, Error> {
        let path = path.as_ref().to_path_buf();
        let base_dir = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let mut file = JobFile {
            path,
            base_dir,
            lines: 0,
            invalid: Vec::new(),
            invalid_lines: 0,
            valid: Arc::from(Vec::new()),
            last_line: 0,
            digest: String::new(),
            models: Models::default(),
        };
        let mut valid = Vec::new();
        let mut images = ImageCache::default();
        let mut reader = BufReader::new(Fingerprinted {
            inner: file.open()?,
            fingerprint: Fingerprint::default(),
            bytes: 0,
        });
        let mut names: HashMap<u64, u64> = HashMap::new();
        let mut text = String::new();
        let mut line = 0;
        loop {
            text.clear();
            match reader.read_line(&mut text) {
                Ok(0) => break,
                Ok(_) => line += 1,
                Err(e) => return Err(file.unreadable(format!("line {}: {e}", line + 1))),
            }
            if text.trim().is_empty() {
                continue;
            }
            file.lines += 1;
            match file.check_line(line, &text, &mut names, &mut images) {
                Ok(fingerprint) => valid.push((line, line_fingerprint(&text), fingerprint)),
                Err(problems) => {
                    file.invalid_lines += 1;
                    if file.invalid.len() < INVALID_LINES_KEPT {
                        file.invalid.push(InvalidLine { line, problems });
                    }
                }
            }
        }
        file.valid = Arc::from(valid);
        file.last_line = line;
        let read = reader.into_inner();
        if read.bytes > JOB_FILE_LIMIT {
            return Err(file.unreadable(too_large(read.bytes)));
        }
        let mut digest = read.fingerprint;
        if let Some(images) = images.read {
            digest.add(images.hex().as_bytes());
        }
        file.digest = digest.hex();
        Ok(file)
    }

    /// The path it was read from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// How many lines hold a job (valid or not; blank lines are not jobs).
    pub fn lines(&self) -> usize {
        self.lines
    }

    /// The lines that will not be sent, and why, in file order: the first
    /// [`INVALID_LINES_KEPT`] of them ([`JobFile::invalid_lines`] counts
    /// them all).
    pub fn invalid(&self) -> &[InvalidLine] {
        &self.invalid
    }

    /// How many lines are invalid, all of them counted.
    pub fn invalid_lines(&self) -> usize {
        self.invalid_lines
    }

    /// A fingerprint of the file's bytes as checked, and of the image files
    /// its lines read (FNV-1a, hex): what workers sharing a ledger
    /// (`genapi-ledger`) agree on, so a file that changed, or whose images
    /// changed, is not taken for the same batch.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// The valid lines as [`Job`]s, read again from the file one at a time.
    /// A line whose text is not the one checked (the file changed since
    /// [`JobFile::check`]: edited, added or moved lines), or whose body no
    /// longer passes the document's rules (an image file replaced), comes
    /// out as an [`InvalidLine`] with [`LineProblem::Changed`]; so does a
    /// read that fails, which ends the jobs. Lines found invalid by the
    /// check are left out.
    ///
    /// [`crate::Batch::run`] takes jobs; keep the errors to report
    /// them:
    ///
    /// ```no_run
    /// # async fn run(client: genapi::Client) -> Result<(), Box<dyn std::error::Error>> {
    /// use genapi_batch::{Batch, FileJournal, JobFile, JournalStore};
    /// let file = JobFile::check("jobs.jsonl")?;
    /// let jobs = file.jobs()?.filter_map(|job| job.map_err(|changed| eprintln!("{changed}")).ok());
    /// std::fs::create_dir_all("out")?;
    /// let store = JournalStore::open(FileJournal::open("out/journal.jsonl")?)?;
    /// let outcomes = Batch::new(client, store, "out").run(jobs)?;
    /// # let _ = outcomes;
    /// # Ok(())
    /// # }
    /// ```
    pub fn jobs(&self) -> Result<Jobs, Error> {
        Ok(Jobs {
            lines: BufReader::new(self.open()?),
            line: 0,
            ended: false,
            base_dir: self.base_dir.clone(),
            models: self.models.clone(),
            valid: self.valid.clone(),
            next_valid: 0,
            last_line: self.last_line,
        })
    }

    /// The file, by the file policy of `genapi-files`: a regular file of
    /// at most [`JOB_FILE_LIMIT`], never read past it.
    fn open(&self) -> Result<genapi_files::Bounded, Error> {
        genapi_files::open(&self.path, JOB_FILE_LIMIT).map_err(|refused| self.unreadable(refused.reason()))
    }

    fn unreadable(&self, message: String) -> Error {
        Error::Input {
            source_name: self.path.display().to_string(),
            message,
        }
    }

    /// Everything wrong with one line; when nothing is, the fingerprint of
    /// the line as checked ([`checked_fingerprint`]).
    fn check_line(
        &mut self,
        line: u64,
        text: &str,
        names: &mut HashMap<u64, u64>,
        images: &mut ImageCache,
    ) -> Result<u64, Vec<LineProblem>> {
        let job: JobLine = match serde_json::from_str(text) {
            Ok(job) => job,
            Err(e) => return Err(vec![LineProblem::NotAJobLine(why_not_a_job_line(text, &e))]),
        };
        let model = match self.models.resolve(&job.model) {
            Ok(model) => model,
            Err(unknown) => return Err(vec![LineProblem::UnknownModel(unknown)]),
        };
        let mut problems = Vec::new();
        let name = match &job.name {
            Some(name) if name.is_empty() || safe_stem(name) != *name => {
                problems.push(LineProblem::UnsafeName(name.clone()));
                None
            }
            Some(name) => Some(name.clone()),
            None => Some(format!("line-{line}")),
        };
        if let Some(name) = name {
            let first = *names.entry(name_hash(&name)).or_insert(line);
            if first != line {
                problems.push(LineProblem::RepeatedName { name, first });
            }
        }
        for field in job.fields.keys() {
            if !model.fields.iter().any(|known| known.name == *field) {
                problems.push(LineProblem::UnknownField {
                    model: job.model.clone(),
                    field: field.clone(),
                    suggestion: closest(field, model.fields.iter().map(|f| f.name.as_str())).map(str::to_string),
                });
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        let body = match body_of(&job, model, &self.base_dir, Some(images)) {
            Err(problem) => return Err(vec![problem]),
            Ok(body) => body,
        };
        let refused = refusals(model, &body);
        if !refused.is_empty() {
            return Err(refused);
        }
        let fingerprint = checked_fingerprint(text, &body);
        // What the document allows and what the request type can hold may
        // differ (a size beyond `u32`): the line must also be sendable.
        match genapi::check_request_type(&model.operation.id, body) {
            Ok(()) => Ok(fingerprint),
            Err(error) => Err(error
                .validation_errors()
                .unwrap_or_default()
                .iter()
                .map(|problem| LineProblem::Invalid {
                    field: String::new(),
                    message: problem.msg.clone(),
                })
                .collect()),
        }
    }
}

/// The last image files the check encoded, by the source as written, and a
/// fingerprint of every image file the lines read, in line order.
#[derive(Default)]
struct ImageCache {
    kept: Vec<((String, bool), String)>,
    /// The images read from files, each as it is sent; `None` while no
    /// line read one (the digest is then the file's bytes alone, as it
    /// always was for such files).
    read: Option<Fingerprint>,
}

impl ImageCache {
    fn encoded(&mut self, source: &str, accepts_url: bool, base_dir: &Path) -> Result<String, Error> {
        let key = (source.to_string(), accepts_url);
        let encoded = match self.kept.iter().find(|(seen, _)| *seen == key) {
            Some((_, encoded)) => encoded.clone(),
            None => {
                let encoded = ImageInput::from_source(source, base_dir).to_field_blocking(accepts_url)?;
                if self.kept.len() == IMAGES_KEPT {
                    self.kept.remove(0);
                }
                self.kept.push((key, encoded.clone()));
                encoded
            }
        };
        // A file's bytes, not its name, are the job: two image files
        // swapped between runs change the batch as an edit of its lines
        // would.
        if encoded != source {
            self.read
                .get_or_insert_with(Fingerprint::default)
                .add(encoded.as_bytes());
        }
        Ok(encoded)
    }
}

/// A line that is a job line: what the reason for `text` not reading as
/// one says in the words of a job file, not of the JSON reader.
const A_JOB_LINE: &str = r#"each line is one JSON object such as {"model": "gen-2-pro", "prompt": "a fox"}"#;

/// Why `text` is not a job line, in a job file's words: not JSON at all,
/// JSON of another kind, or an object whose `model` (or another field of
/// the line's own) is missing or of the wrong kind. `error` is the JSON
/// reader's, said for what no plainer words cover.
fn why_not_a_job_line(text: &str, error: &serde_json::Error) -> String {
    let kind = |value: &Value| match value {
        Value::Null => "null",
        Value::Bool(_) => "true or false",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    };
    if text.starts_with('\u{feff}') {
        return "the file starts with a byte-order mark: save it as UTF-8 without one".to_string();
    }
    // Without the line's end, which a string cut short would run into.
    let value: Value = match serde_json::from_str(text.trim_end_matches(['\n', '\r'])) {
        Ok(value) => value,
        Err(e) if e.is_eof() => return format!("the JSON ends with a string, list or object left open; {A_JOB_LINE}"),
        Err(e) => return format!("not JSON (read as far as column {}); {A_JOB_LINE}", e.column()),
    };
    let Value::Object(fields) = &value else {
        return format!("{} in JSON, not an object; {A_JOB_LINE}", kind(&value));
    };
    match fields.get("model") {
        None => return format!("no \"model\"; {A_JOB_LINE}"),
        Some(Value::String(_)) => {}
        Some(other) => return format!("\"model\" is {}, not a model's name such as \"gen-2-pro\"", kind(other)),
    }
    match fields.get("name") {
        Some(Value::String(_)) | None => {}
        Some(other) => return format!("\"name\" is {}, not a file name such as \"fox-1\"", kind(other)),
    }
    error.to_string()
}

/// Problems shown one after the other, safe for a terminal.
fn shown_problems(problems: &[LineProblem]) -> String {
    let joined = problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ");
    genapi_text::clean(&joined)
}

/// What the document refuses in a body; a refused size ends with the
/// nearest sizes the model takes, as `generate --size` says them.
fn refusals(model: &Model, body: &Value) -> Vec<LineProblem> {
    let schema = model.operation.request_schema.as_deref().unwrap_or_default();
    let mut problems: Vec<LineProblem> = Document::embedded()
        .validate(schema, body)
        .into_iter()
        .map(|error| LineProblem::Invalid {
            field: error
                .loc
                .iter()
                .skip(1)
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("."),
            message: error.msg,
        })
        .collect();
    if let Some(said) = Document::embedded().nearest_sizes_said(schema, body) {
        // The size's own refusal: a side's, or the area's (said of the body).
        let of_the_size = problems.iter_mut().rev().find_map(|problem| match problem {
            LineProblem::Invalid { field, message } if ["width", "height", ""].contains(&field.as_str()) => {
                Some(message)
            }
            _ => None,
        });
        if let Some(message) = of_the_size {
            message.push_str("; ");
            message.push_str(&said);
        }
    }
    problems
}

/// The fingerprint of a line as checked: its text and its body, image
/// files read.
fn checked_fingerprint(text: &str, body: &Value) -> u64 {
    let mut fingerprint = Fingerprint::default();
    fingerprint.add(text.trim_end_matches(['\n', '\r']).as_bytes());
    fingerprint.add(body.to_string().as_bytes());
    fingerprint.value()
}

/// The fingerprint of a line's text.
fn line_fingerprint(text: &str) -> u64 {
    let mut fingerprint = Fingerprint::default();
    fingerprint.add(text.trim_end_matches(['\n', '\r']).as_bytes());
    fingerprint.value()
}

/// The body of a job line: its fields, image paths read and encoded
/// (through `images`, when given).
fn body_of(
    job: &JobLine,
    model: &Model,
    base_dir: &Path,
    images: Option<&mut ImageCache>,
) -> Result<Value, LineProblem> {
    let mut body = Map::new();
    let mut images = images;
    for (name, value) in &job.fields {
        let image = model
            .field(name)
            .and_then(|field| field.image())
            .map(|image| image == ImageField::Base64OrUrl);
        let value = match (image, value) {
            (Some(accepts_url), Value::String(source)) => {
                let encoded = match images.as_deref_mut() {
                    Some(cache) => cache.encoded(source, accepts_url, base_dir),
                    None => ImageInput::from_source(source, base_dir).to_field_blocking(accepts_url),
                };
                Value::String(encoded.map_err(|error| LineProblem::Image {
                    field: name.clone(),
                    message: match error {
                        Error::Input {
                            source_name, message, ..
                        } => format!("{message}: {source_name:?}"),
                        other => other.to_string(),
                    },
                })?)
            }
            (Some(_), _) => {
                return Err(LineProblem::Image {
                    field: name.clone(),
                    message: "expected a file path or an http(s) URL".into(),
                })
            }
            (None, value) => value.clone(),
        };
        body.insert(name.clone(), value);
    }
    Ok(Value::Object(body))
}

fn too_large(size: u64) -> String {
    format!(
        "the file is {size} bytes, above the {} MiB a job file may be",
        JOB_FILE_LIMIT >> 20
    )
}

/// The valid lines of a [`JobFile`], read again one at a time.
pub struct Jobs {
    lines: BufReader<genapi_files::Bounded>,
    line: u64,
    /// A read failed: nothing more comes.
    ended: bool,
    base_dir: PathBuf,
    models: Models,
    valid: Arc<[(u64, u64, u64)]>,
    /// The first entry of `valid` not yet reached.
    next_valid: usize,
    last_line: u64,
}

impl std::fmt::Debug for Jobs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jobs").field("line", &self.line).finish_non_exhaustive()
    }
}

impl Iterator for Jobs {
    type Item = Result<Job, InvalidLine>;

    fn next(&mut self) -> Option<Self::Item> {
        let mut text = String::new();
        loop {
            if self.ended {
                return None;
            }
            text.clear();
            let read = self.lines.read_line(&mut text);
            self.line += 1;
            let line = self.line;
            let changed = |problem: String| {
                Some(Err(InvalidLine {
                    line,
                    problems: vec![LineProblem::Changed(problem)],
                }))
            };
            match read {
                Ok(0) => return None,
                Ok(_) => {}
                Err(e) => {
                    self.ended = true;
                    return changed(format!("the file cannot be read from here on: {e}"));
                }
            }
            if text.trim().is_empty() {
                continue;
            }
            let expected = match self.valid.get(self.next_valid) {
                Some(&(valid_line, fingerprint, checked)) if valid_line == line => {
                    self.next_valid += 1;
                    Some((fingerprint, checked))
                }
                _ => None,
            };
            let checked = match expected {
                Some((fingerprint, checked)) if fingerprint == line_fingerprint(&text) => checked,
                Some(_) => return changed("the line is not the one that was checked".into()),
                // Blank or invalid when checked: never sent.
                None if line <= self.last_line => continue,
                None => return changed("the line was added after the check".into()),
            };
            let built = serde_json::from_str::<JobLine>(&text)
                .map_err(|e| e.to_string())
                .and_then(|job| {
                    let model = self.models.resolve(&job.model).map_err(|unknown| unknown.to_string())?;
                    let body = body_of(&job, model, &self.base_dir, None).map_err(|problem| problem.to_string())?;
                    let refused: Vec<String> = refusals(model, &body).iter().map(ToString::to_string).collect();
                    if !refused.is_empty() {
                        return Err(refused.join("; "));
                    }
                    // Its text is the one checked; its image files must be
                    // too, or one job could be sent for two lines.
                    if checked_fingerprint(&text, &body) != checked {
                        return Err("an image file the line reads is not the one that was checked".into());
                    }
                    Ok(Job {
                        line,
                        path: model.operation.path.clone(),
                        body,
                        name: job.name,
                        cell: job.grid,
                    })
                });
            return match built {
                Ok(job) => Some(Ok(job)),
                Err(problem) => changed(problem),
            };
        }
    }
}

/// A reader that fingerprints and counts the bytes read through it.
struct Fingerprinted<R> {
    inner: R,
    fingerprint: Fingerprint,
    bytes: u64,
}

impl<R: Read> Read for Fingerprinted<R> {
    fn read(&mut self, buffer: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buffer)?;
        self.fingerprint.add(&buffer[..read]);
        self.bytes += read as u64;
        Ok(read)
    }
}
