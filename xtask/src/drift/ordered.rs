//! A JSON tree that keeps its objects' keys in the order the text lists
//! them, for writing a document back as its author arranged it.
//!
//! `serde_json::Value` sorts keys (its `preserve_order` feature would change
//! every dependent's `serde_json`), so a proposal written from it would
//! reorder the whole document: two added fields would show as a diff of
//! thousands of lines. The proposal is made on a `Value` as the checks are;
//! [`arranged`] then lays it out in the original text's order, new keys last
//! in their object, and [`Ordered`] serializes as `serde_json` pretty-prints.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::Value;

/// A JSON value whose objects keep their keys' order.
#[derive(Debug, Clone, PartialEq)]
pub enum Ordered {
    /// Anything but an array or an object.
    Scalar(Value),
    /// An array.
    Array(Vec<Ordered>),
    /// An object, its keys in order.
    Object(Vec<(String, Ordered)>),
}

/// `patched` laid out in the order of `original`: each object's keys as
/// `original` lists them, keys it does not have after them (in `patched`'s
/// order), keys `patched` dropped left out.
pub fn arranged(original: &Ordered, patched: &Value) -> Ordered {
    match (original, patched) {
        (Ordered::Object(keys), Value::Object(map)) => {
            let mut out: Vec<(String, Ordered)> = keys
                .iter()
                .filter_map(|(key, before)| Some((key.clone(), arranged(before, map.get(key)?))))
                .collect();
            for (key, value) in map {
                if !keys.iter().any(|(known, _)| known == key) {
                    out.push((key.clone(), Ordered::from(value)));
                }
            }
            Ordered::Object(out)
        }
        (Ordered::Array(items), Value::Array(values)) => Ordered::Array(
            values
                .iter()
                .enumerate()
                .map(|(index, value)| match items.get(index) {
                    Some(before) => arranged(before, value),
                    None => Ordered::from(value),
                })
                .collect(),
        ),
        (_, value) => Ordered::from(value),
    }
}

impl From<&Value> for Ordered {
    fn from(value: &Value) -> Ordered {
        match value {
            Value::Array(items) => Ordered::Array(items.iter().map(Ordered::from).collect()),
            Value::Object(map) => Ordered::Object(map.iter().map(|(k, v)| (k.clone(), Ordered::from(v))).collect()),
            scalar => Ordered::Scalar(scalar.clone()),
        }
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Ordered::Scalar(value) => value.serialize(serializer),
            Ordered::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Ordered::Object(keys) => {
                let mut map = serializer.serialize_map(Some(keys.len()))?;
                for (key, value) in keys {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
        }
    }
}

impl<'de> Deserialize<'de> for Ordered {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Ordered, D::Error> {
        deserializer.deserialize_any(OrderedVisitor)
    }
}

struct OrderedVisitor;

impl<'de> Visitor<'de> for OrderedVisitor {
    type Value = Ordered;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::from(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Ordered, E> {
        Ok(Ordered::Scalar(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Ordered, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Ordered::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered, A::Error> {
        let mut keys: Vec<(String, Ordered)> = Vec::new();
        while let Some((key, value)) = map.next_entry::<String, Ordered>()? {
            // A key written twice keeps its first place and its last value,
            // as a JSON value keeps the last copy.
            match keys.iter_mut().find(|(known, _)| *known == key) {
                Some(slot) => slot.1 = value,
                None => keys.push((key, value)),
            }
        }
        Ok(Ordered::Object(keys))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_document_is_written_back_in_its_own_order_with_new_keys_last() {
        let text = "{\n  \"z\": 1,\n  \"a\": {\n    \"y\": [\n      1,\n      {\n        \"k\": 2,\n        \"b\": 3\n      }\n    ],\n    \"b\": null\n  }\n}";
        let original: Ordered = serde_json::from_str(text).unwrap();
        let mut patched: Value = serde_json::from_str(text).unwrap();
        assert_eq!(
            serde_json::to_string_pretty(&arranged(&original, &patched)).unwrap(),
            text
        );
        patched["a"]["new"] = Value::from("added");
        patched["a"]["y"][1]["c"] = Value::from(4);
        let written = serde_json::to_string_pretty(&arranged(&original, &patched)).unwrap();
        assert_eq!(
            written,
            "{\n  \"z\": 1,\n  \"a\": {\n    \"y\": [\n      1,\n      {\n        \"k\": 2,\n        \"b\": 3,\n        \"c\": 4\n      }\n    ],\n    \"b\": null,\n    \"new\": \"added\"\n  }\n}"
        );
    }
}
