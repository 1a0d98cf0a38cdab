//! Replay: the mock answers from a recording (a HAR file written by
//! `genapi::ClientBuilder::record`) instead of simulating tasks, so a failure
//! seen once against the service becomes a test.
//!
//! It is task-aware. A submission that matches a recorded one (same path,
//! same body, where a recorded `[redacted]` value or image summary matches
//! anything) gets the recorded answer, each recorded submission once and in
//! order, so a recorded 429 and the retry after it replay as they happened.
//! Polls of the task it created step through the task's recorded answers
//! in order (the last one repeats). Addresses are rewritten to the mock: the
//! polling address to its regional host, the result address to its delivery
//! host, which serves the recorded bytes when the recording kept them, or
//! else a placeholder of the recorded format and dimensions. A request that
//! matches nothing is answered 400, naming the nearest recorded request and
//! how the two differ.

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::{json, Value};

/// What a recording's `_genapi` note calls a download.
const DOWNLOAD: &str = "download";

/// A recorded submission.
#[derive(Debug, Clone)]
struct Submission {
    path: String,
    body: Value,
    answer: Answer,
}

/// A recorded answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) content_type: String,
    pub(crate) body: String,
    pub(crate) retry_after: Option<String>,
}

/// A recorded result: its bytes when kept, else what the summary says.
#[derive(Debug, Clone)]
pub(crate) enum Delivered {
    /// The recorded bytes.
    Bytes(String, Vec<u8>),
    /// A placeholder: content type, format, width and height.
    Placeholder(String, String, u32, u32),
}

/// A recording the mock answers from ([`crate::MockConfig::replay`]).
#[derive(Debug)]
pub struct Replay {
    submissions: Vec<Submission>,
    polls: HashMap<String, Vec<Answer>>,
    results: HashMap<String, Delivered>,
    progress: Mutex<Progress>,
}

/// Which recorded answers were given.
#[derive(Debug, Default)]
struct Progress {
    used: Vec<bool>,
    polled: HashMap<String, usize>,
}

/// The parts of a HAR file a replay reads; everything else in the file is
/// passed over as it is parsed, never held.
mod har {
    use serde::Deserialize;

    #[derive(Deserialize)]
    pub(super) struct File {
        pub(super) log: Log,
    }

    #[derive(Deserialize)]
    pub(super) struct Log {
        pub(super) entries: Vec<Entry>,
    }

    #[derive(Deserialize)]
    pub(super) struct Entry {
        pub(super) request: Request,
        pub(super) response: Response,
        #[serde(rename = "_genapi", default)]
        pub(super) note: Note,
    }

    #[derive(Deserialize)]
    pub(super) struct Request {
        #[serde(default)]
        pub(super) method: String,
        #[serde(default)]
        pub(super) url: String,
        #[serde(rename = "postData")]
        pub(super) post_data: Option<Text>,
    }

    #[derive(Deserialize)]
    pub(super) struct Text {
        #[serde(default)]
        pub(super) text: String,
    }

    #[derive(Deserialize)]
    pub(super) struct Response {
        /// A status past what HTTP has is no answer to replay: read as 0.
        #[serde(default, deserialize_with = "status")]
        pub(super) status: u16,
        #[serde(default)]
        pub(super) headers: Vec<Header>,
        #[serde(default)]
        pub(super) content: Content,
    }

    fn status<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<u16, D::Error> {
        let value = serde_json::Value::deserialize(deserializer)?;
        Ok(value.as_u64().and_then(|s| u16::try_from(s).ok()).unwrap_or(0))
    }

    #[derive(Deserialize)]
    pub(super) struct Header {
        #[serde(default)]
        pub(super) name: String,
        #[serde(default)]
        pub(super) value: String,
    }

    #[derive(Deserialize, Default)]
    pub(super) struct Content {
        #[serde(rename = "mimeType", default)]
        pub(super) mime_type: String,
        pub(super) text: Option<String>,
        pub(super) encoding: Option<String>,
        pub(super) comment: Option<String>,
    }

    #[derive(Deserialize, Default)]
    pub(super) struct Note {
        #[serde(default)]
        pub(super) operation: String,
    }
}

impl Replay {
    /// Reads a recording; fails with [`crate::Error::Config`], saying why,
    /// on text that is not one or that has nothing to replay.
    pub fn from_har(text: &str) -> crate::Result<Replay> {
        Replay::from_har_reader(text.as_bytes())
    }

    /// [`Replay::from_har`] from a reader (a file), parsed as it is read:
    /// what a replay does not use (timings, request headers, sizes) is
    /// passed over, so it holds little more than the answers it will give.
    pub fn from_har_reader(reader: impl std::io::Read) -> crate::Result<Replay> {
        let har: har::File = serde_json::from_reader(std::io::BufReader::new(reader))
            .map_err(|e| crate::Error::Config(format!("the recording is not a HAR file: {e}")))?;
        Replay::read(har.log.entries).map_err(crate::Error::Config)
    }

    fn read(entries: Vec<har::Entry>) -> Result<Replay, String> {
        let mut replay = Replay {
            submissions: Vec::new(),
            polls: HashMap::new(),
            results: HashMap::new(),
            progress: Mutex::new(Progress::default()),
        };
        // Which task a result address belongs to, from the polls that gave it.
        let mut sample_task: HashMap<String, String> = HashMap::new();
        // The tasks the recorded submissions made: a poll names one in its
        // query (`?id=`) or in its path (`/v1/tasks/<id>`).
        let mut tasks: std::collections::HashSet<String> = std::collections::HashSet::new();
        for entry in entries {
            let (request, response) = (entry.request, entry.response);
            if response.status == 0 {
                // No answer was recorded: nothing to replay.
                continue;
            }
            let Ok(url) = url::Url::parse(&request.url) else {
                continue;
            };
            let mut content = response.content;
            let retry_after = response
                .headers
                .into_iter()
                .find(|h| h.name.eq_ignore_ascii_case("retry-after"))
                .map(|h| h.value);
            let answer = Answer {
                status: response.status,
                content_type: content.mime_type.clone(),
                body: content.text.take().unwrap_or_default(),
                retry_after,
            };
            if entry.note.operation == DOWNLOAD {
                let task = sample_task.get(url.path()).cloned().unwrap_or_default();
                if let Some(result) = recorded_result(&content, answer) {
                    replay.results.insert(task, result);
                }
            } else if request.method == "POST" {
                let body = request
                    .post_data
                    .and_then(|data| serde_json::from_str(&data.text).ok())
                    .unwrap_or(Value::Null);
                let made = serde_json::from_str::<Value>(&answer.body).ok();
                if let Some(id) = made.as_ref().and_then(|made| made["id"].as_str()) {
                    tasks.insert(id.to_string());
                }
                replay.submissions.push(Submission {
                    path: url.path().to_string(),
                    body,
                    answer,
                });
            } else if let Some(id) = url
                .query_pairs()
                .find(|(k, _)| k == "id")
                .map(|(_, v)| v.into_owned())
                .or_else(|| {
                    // A poll by path names its task in a segment: one a
                    // recorded submission made, or the one its answer names.
                    let answered = serde_json::from_str::<Value>(&answer.body).ok();
                    let named = answered.as_ref().and_then(|answered| answered["id"].as_str());
                    url.path_segments()?
                        .rev()
                        .find(|segment| tasks.contains(*segment) || Some(*segment) == named)
                        .map(str::to_string)
                })
            {
                let sample = serde_json::from_str::<Value>(&answer.body)
                    .ok()
                    .and_then(|b| b["result"]["sample"].as_str().map(str::to_string));
                if let Some(path) = sample
                    .and_then(|s| url::Url::parse(&s).ok())
                    .map(|u| u.path().to_string())
                {
                    sample_task.insert(path, id.clone());
                }
                replay.polls.entry(id).or_default().push(answer);
            }
        }
        if replay.submissions.is_empty() && replay.polls.is_empty() {
            return Err("the recording has no answered submission or poll to replay".into());
        }
        Ok(replay)
    }

    /// The recorded answer to a submission of `body` to `path`, with its
    /// polling address on `regional`; or the 400 saying what is nearest.
    pub(crate) fn submission(&self, path: &str, body: &Value, regional: &str) -> Answer {
        let Ok(mut progress) = self.progress.lock() else {
            return refused("the replay's state is unusable after a panic".into());
        };
        progress.used.resize(self.submissions.len(), false);
        let found = self
            .submissions
            .iter()
            .enumerate()
            .find(|(i, s)| !progress.used[*i] && s.path == path && differences(&s.body, body).is_empty());
        let Some((index, recorded)) = found else {
            return refused(self.nearest(path, body, &progress.used));
        };
        progress.used[index] = true;
        let mut answer = recorded.answer.clone();
        if let Ok(mut value) = serde_json::from_str::<Value>(&answer.body) {
            if let (Some(id), true) = (
                value["id"].as_str().map(str::to_string),
                value.get("polling_url").is_some(),
            ) {
                value["polling_url"] = json!(format!("{regional}/v1/get_result?id={id}"));
                answer.body = value.to_string();
            }
        }
        answer
    }

    /// The next recorded answer to a poll of task `id`, its result address
    /// on `delivery`.
    pub(crate) fn poll(&self, id: &str, delivery: &str) -> Answer {
        let Some(answers) = self.polls.get(id).filter(|a| !a.is_empty()) else {
            return Answer {
                status: 404,
                content_type: "application/json".into(),
                body: json!({"detail": format!("the recording has no poll of task {id}")}).to_string(),
                retry_after: None,
            };
        };
        let step = match self.progress.lock() {
            Ok(mut progress) => {
                let next = progress.polled.entry(id.to_string()).or_default();
                let step = (*next).min(answers.len() - 1);
                *next += 1;
                step
            }
            Err(_) => answers.len() - 1,
        };
        let mut answer = answers[step].clone();
        if let Ok(mut value) = serde_json::from_str::<Value>(&answer.body) {
            if value["result"]["sample"].is_string() {
                value["result"]["sample"] = json!(format!("{delivery}/mock/replay/{id}"));
                answer.body = value.to_string();
            }
        }
        answer
    }

    /// The recorded result of task `id`.
    pub(crate) fn result(&self, id: &str) -> Option<&Delivered> {
        self.results.get(id)
    }

    /// Names the recorded submission nearest to the one sent, and how they
    /// differ.
    fn nearest(&self, path: &str, body: &Value, used: &[bool]) -> String {
        let nearest = self
            .submissions
            .iter()
            .enumerate()
            .min_by_key(|(i, s)| (s.path != path, used[*i], differences(&s.body, body).len()));
        match nearest {
            None => format!("no recorded submission to replay for POST {path}"),
            Some((index, recorded)) => {
                let mut how = differences(&recorded.body, body);
                if recorded.path != path {
                    how.insert(0, format!("path (recorded {}, sent {path})", recorded.path));
                }
                if used[index] {
                    how.push("it was already replayed (each recorded submission answers once)".into());
                }
                format!(
                    "no recorded submission matches POST {path}; the nearest (recorded submission {}) differs in: {}",
                    index + 1,
                    how.join("; ")
                )
            }
        }
    }
}

/// A download's result: kept bytes, or a placeholder from the summary
/// `[image png 256x256, N bytes, sha256:…]`.
fn recorded_result(content: &har::Content, answer: Answer) -> Option<Delivered> {
    use base64::Engine as _;
    if answer.status != 200 {
        return None;
    }
    if content.encoding.as_deref() == Some("base64") {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(answer.body.as_bytes())
            .ok()?;
        return Some(Delivered::Bytes(answer.content_type, bytes));
    }
    let summary = content.comment.as_deref()?.strip_prefix("[image ")?;
    let mut words = summary.split([' ', ',']);
    let format = words.next()?.to_string();
    let (width, height) = words
        .next()
        .and_then(|size| size.split_once('x'))
        .and_then(|(w, h)| Some((w.parse().ok()?, h.parse().ok()?)))
        .unwrap_or((64, 64));
    Some(Delivered::Placeholder(answer.content_type, format, width, height))
}

/// A 400 saying why nothing recorded answers.
fn refused(why: String) -> Answer {
    Answer {
        status: 400,
        content_type: "application/json".into(),
        body: json!({"detail": why}).to_string(),
        retry_after: None,
    }
}

/// Where a sent body differs from a recorded one, in words; a recorded
/// `[redacted]` value, image summary or redacted address matches anything.
fn differences(recorded: &Value, sent: &Value) -> Vec<String> {
    let (Some(recorded), Some(sent)) = (recorded.as_object(), sent.as_object()) else {
        return if recorded == sent {
            Vec::new()
        } else {
            vec!["the body".into()]
        };
    };
    let mut found = Vec::new();
    for (name, value) in recorded {
        match sent.get(name) {
            None => found.push(format!("{name} (recorded, not sent)")),
            Some(other) if !matches(value, other) => found.push(format!("{name} (recorded {value}, sent {other})")),
            Some(_) => {}
        }
    }
    for name in sent.keys().filter(|name| !recorded.contains_key(*name)) {
        found.push(format!("{name} (sent, not recorded)"));
    }
    found
}

fn matches(recorded: &Value, sent: &Value) -> bool {
    match recorded.as_str() {
        Some(text) if text == "[redacted]" || text.starts_with("[image ") || text.contains("%5Bredacted%5D") => {
            sent.is_string()
        }
        _ => recorded == sent,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_naming_its_task_in_its_path_is_replayed_for_that_task() {
        let entry = |method: &str, url: &str, post: Option<&str>, answer: &str| {
            json!({
                "request": {"method": method, "url": url, "postData": post.map(|text| json!({"mimeType": "application/json", "text": text}))},
                "response": {"status": 200, "headers": [], "content": {"mimeType": "application/json", "text": answer}},
                "_genapi": {"operation": if method == "POST" { "gen_dev" } else { "get_result" }},
            })
        };
        let har = json!({"log": {"entries": [
            entry("POST", "http://127.0.0.1:9/v1/gen-dev", Some(r#"{"prompt":"a fox"}"#),
                  r#"{"id":"tk_7f3a","polling_url":"http://127.0.0.1:9/v1/tasks/tk_7f3a"}"#),
            entry("GET", "http://127.0.0.1:9/v1/tasks/tk_7f3a", None, r#"{"id":"tk_7f3a","status":"Pending"}"#),
        ]}});
        let replay = Replay::from_har(&har.to_string()).unwrap();
        assert!(
            replay.polls.contains_key("tk_7f3a"),
            "{:?}",
            replay.polls.keys().collect::<Vec<_>>()
        );
    }

    #[test]
    fn redacted_values_and_image_summaries_match_anything_sent() {
        let recorded =
            json!({"prompt": "a", "webhook_secret": "[redacted]", "image": "[image png 1x1, 70 bytes, sha256:00]"});
        let sent = json!({"prompt": "a", "webhook_secret": "s", "image": "iVBOR"});
        assert!(differences(&recorded, &sent).is_empty());
        let other = json!({"prompt": "b", "seed": 1, "webhook_secret": "s", "image": "iVBOR"});
        assert_eq!(
            differences(&recorded, &other),
            ["prompt (recorded \"a\", sent \"b\")", "seed (sent, not recorded)"]
        );
    }
}
