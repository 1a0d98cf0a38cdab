//! A recording read entry by entry, so checking one holds a single entry
//! (and the log's head) in memory, whatever the size of the file.
//!
//! The file is read twice, each time as a stream: first for the log's head
//! (its version, creator and `_genapi` origins, wherever they stand among
//! the entries) and the address of its first submission (where a recording
//! from elsewhere says which host was the base); then for the entries,
//! each checked to be HAR by the `har` crate's own types (a reader that is
//! not this project's) and against the document.

use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use super::hosts::Trust;
use super::Report;

/// The largest recording read: far more than a long session's traffic
/// (images are summarised unless kept, and a kept one is at most 64 MiB).
pub const RECORDING_LIMIT: u64 = 4 << 30;

/// Checks the recording at `path` against the document `root`, adding what
/// it finds to `report`. The file is read by the file policy of
/// `genapi-files` (a regular file of at most [`RECORDING_LIMIT`]).
pub fn check_file(root: &Value, path: &Path, report: &mut Report) -> Result<(), String> {
    let name = path.display().to_string();
    let open = || genapi_files::open(path, RECORDING_LIMIT).map_err(|refused| refused.to_string());
    let not_har = |why: String| format!("{name} is not a HAR file: {why}");
    // First pass: the head, and the first submission's address.
    let mut first_submission = None;
    let head = each_entry(open()?, |entry| {
        if first_submission.is_none() && entry["request"]["method"] == "POST" {
            first_submission = entry["request"]["url"].as_str().map(str::to_string);
        }
        Ok(())
    })
    .map_err(|e| format!("{name} is not JSON, or not a HAR file: {e}"))?;
    let mut log = head;
    log.insert("entries".into(), Value::Array(Vec::new()));
    let spec = har::from_str(&serde_json::json!({ "log": log }).to_string()).map_err(|e| not_har(e.to_string()))?;
    let version = spec.version();
    let trust = Trust::of_head(&Value::Object(log), first_submission.as_deref());
    // Second pass: every entry, checked as HAR and against the document.
    let catalog = genapi_document::Catalog::of_value(root);
    let mut number = 0usize;
    each_entry(open()?, |entry| {
        number += 1;
        let valid = match version {
            har::HarVersion::V1_2 => serde_json::from_value::<har::v1_2::Entries>(entry.clone()).map(drop),
            har::HarVersion::V1_3 => serde_json::from_value::<har::v1_3::Entries>(entry.clone()).map(drop),
        };
        valid.map_err(|e| not_har(format!("entry {number}: {e}")))?;
        report.exchanges += 1;
        super::check_entry(root, &catalog, &trust, &entry, report);
        Ok(())
    })
    .map_err(|e| format!("{name}: {e}"))?;
    Ok(())
}

/// Calls `each` with every entry of the HAR text `reader` gives, one at a
/// time, and returns the log's other fields.
pub fn each_entry(
    reader: impl Read,
    each: impl FnMut(Value) -> Result<(), String>,
) -> Result<Map<String, Value>, String> {
    let mut deserializer = serde_json::Deserializer::from_reader(std::io::BufReader::new(reader));
    let mut each = each;
    let mut head = None;
    File {
        each: &mut each,
        head: &mut head,
    }
    .deserialize(&mut deserializer)
    .map_err(|e| e.to_string())?;
    deserializer.end().map_err(|e| e.to_string())?;
    head.ok_or_else(|| "it has no log".to_string())
}

/// The whole file: `{"log": …}`.
struct File<'a, F> {
    each: &'a mut F,
    head: &'a mut Option<Map<String, Value>>,
}

impl<'de, F: FnMut(Value) -> Result<(), String>> DeserializeSeed<'de> for File<'_, F> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, F: FnMut(Value) -> Result<(), String>> Visitor<'de> for File<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a HAR object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "log" {
                let mut head = Map::new();
                map.next_value_seed(Log {
                    each: &mut *self.each,
                    head: &mut head,
                })?;
                *self.head = Some(head);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(())
    }
}

/// The log: its entries streamed, the rest kept.
struct Log<'a, F> {
    each: &'a mut F,
    head: &'a mut Map<String, Value>,
}

impl<'de, F: FnMut(Value) -> Result<(), String>> DeserializeSeed<'de> for Log<'_, F> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de, F: FnMut(Value) -> Result<(), String>> Visitor<'de> for Log<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a HAR log")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(key) = map.next_key::<String>()? {
            if key == "entries" {
                map.next_value_seed(Entries(&mut *self.each))?;
            } else {
                let value = map.next_value::<Value>()?;
                self.head.insert(key, value);
            }
        }
        Ok(())
    }
}

/// The entries, each handed over as it is parsed.
struct Entries<'a, F>(&'a mut F);

impl<'de, F: FnMut(Value) -> Result<(), String>> DeserializeSeed<'de> for Entries<'_, F> {
    type Value = ();
    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(Value) -> Result<(), String>> Visitor<'de> for Entries<'_, F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of HAR entries")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(entry) = seq.next_element::<Value>()? {
            (self.0)(entry).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}
