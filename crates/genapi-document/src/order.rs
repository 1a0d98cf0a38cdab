//! The order of the document's keys, read from its text.
//!
//! A `serde_json::Value` keeps an object's keys sorted (unless `serde_json`'s
//! `preserve_order` feature is on, which nothing here asks for: it would
//! change every dependent's `serde_json`). The order a document lists its
//! operations and a schema its properties is the order its author chose for
//! readers, so it is read from the text itself: only the keys are kept, every
//! value is skipped.

use std::collections::HashMap;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, Error, IgnoredAny, MapAccess, SeqAccess, Visitor};

/// The keys whose order matters, as the text lists them.
#[derive(Debug, Default)]
pub(crate) struct Order {
    /// Each path, with each key of its path item (methods and others).
    pub(crate) operations: Vec<(String, String)>,
    /// Each named schema of `components/schemas`, with its `properties`' keys.
    pub(crate) properties: Vec<(String, Vec<String>)>,
}

/// Positions looked up by key, made once: a document of tens of thousands
/// of properties is sorted in one pass, not one scan per comparison.
#[derive(Debug, Default)]
pub(crate) struct Positions {
    operations: HashMap<(String, String), usize>,
    properties: HashMap<String, HashMap<String, usize>>,
}

impl Order {
    /// The order as positions to look up.
    pub(crate) fn positions(&self) -> Positions {
        // A key written twice is placed where its last copy is, as a JSON
        // value keeps the last copy's content.
        let mut positions = Positions::default();
        for (index, (path, key)) in self.operations.iter().enumerate() {
            positions
                .operations
                .insert((path.clone(), key.to_ascii_lowercase()), index);
        }
        for (schema, keys) in &self.properties {
            let places = keys
                .iter()
                .enumerate()
                .map(|(index, key)| (key.clone(), index))
                .collect();
            positions.properties.insert(schema.clone(), places);
        }
        positions
    }
}

impl Positions {
    /// Where `path` and `method` come among the operations (`usize::MAX`
    /// when not listed, so unlisted ones go last).
    pub(crate) fn operation(&self, path: &str, method: &str) -> usize {
        self.operations
            .get(&(path.to_string(), method.to_ascii_lowercase()))
            .copied()
            .unwrap_or(usize::MAX)
    }

    /// Where `property` comes among the properties of schema `schema`.
    pub(crate) fn property(&self, schema: &str, property: &str) -> usize {
        self.properties
            .get(schema)
            .and_then(|places| places.get(property))
            .copied()
            .unwrap_or(usize::MAX)
    }
}

/// The visits of a value that is not an object: it holds no order. (What is
/// wrong with it, if anything, is for [`crate::problems`] to say.)
macro_rules! holds_no_order {
    () => {
        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            skip(seq)
        }

        fn visit_unit<E: Error>(self) -> Result<Self::Value, E> {
            Ok(Default::default())
        }

        fn visit_bool<E: Error>(self, _: bool) -> Result<Self::Value, E> {
            Ok(Default::default())
        }

        fn visit_i64<E: Error>(self, _: i64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }

        fn visit_u64<E: Error>(self, _: u64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }

        fn visit_f64<E: Error>(self, _: f64) -> Result<Self::Value, E> {
            Ok(Default::default())
        }

        fn visit_str<E: Error>(self, _: &str) -> Result<Self::Value, E> {
            Ok(Default::default())
        }
    };
}

/// Reads the order of `text`. Fails only when `text` is not JSON: a value
/// that is not an object where one is expected (the document, `paths`, a
/// path item, `components`, a schema, its `properties`) holds no order, and
/// is left to [`crate::problems`] and the readers of the value to judge.
pub(crate) fn of_document(text: &str) -> Result<Order, String> {
    let mut reader = serde_json::Deserializer::from_str(text);
    reader
        .deserialize_any(Document)
        .and_then(|order| reader.end().map(|()| order))
        .map_err(|e| format!("cannot read the order of the document's keys: {e}"))
}

/// The document: `paths` and `components` are read (the last of repeated
/// keys, as a JSON value keeps the last).
struct Document;

impl<'de> Visitor<'de> for Document {
    type Value = Order;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the document as a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Order, A::Error> {
        let mut order = Order::default();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "paths" => order.operations = map.next_value_seed(Paths)?,
                "components" => order.properties = map.next_value_seed(Components)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(order)
    }

    holds_no_order!();
}

/// `paths`: each path item's keys.
struct Paths;

impl<'de> DeserializeSeed<'de> for Paths {
    type Value = Vec<(String, String)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Paths {
    type Value = Vec<(String, String)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("`paths` as a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut order = Vec::new();
        while let Some(path) = map.next_key::<String>()? {
            let keys = map
                .next_value_seed(Keys)
                .map_err(|e| A::Error::custom(format!("paths/{path}: {e}")))?;
            order.extend(keys.into_iter().map(|key| (path.clone(), key)));
        }
        Ok(order)
    }

    holds_no_order!();
}

/// An object's keys, its values skipped.
struct Keys;

impl<'de> DeserializeSeed<'de> for Keys {
    type Value = Vec<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Keys {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut keys = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            map.next_value::<IgnoredAny>()?;
            keys.push(key);
        }
        Ok(keys)
    }

    holds_no_order!();
}

/// `components`: only `schemas` is read.
struct Components;

impl<'de> DeserializeSeed<'de> for Components {
    type Value = Vec<(String, Vec<String>)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Components {
    type Value = Vec<(String, Vec<String>)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("`components` as a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut properties = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "schemas" {
                properties = map.next_value_seed(Schemas)?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(properties)
    }

    holds_no_order!();
}

/// `components/schemas`: each schema's properties.
struct Schemas;

impl<'de> DeserializeSeed<'de> for Schemas {
    type Value = Vec<(String, Vec<String>)>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Schemas {
    type Value = Vec<(String, Vec<String>)>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("`components/schemas` as a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut schemas = Vec::new();
        while let Some(name) = map.next_key::<String>()? {
            let properties = map.next_value_seed(Properties)?;
            schemas.push((name, properties));
        }
        Ok(schemas)
    }

    holds_no_order!();
}

/// One schema: the keys of its `properties`, or none when it is not an
/// object (a boolean schema of 3.1, or a mistake `problems` reports).
struct Properties;

impl<'de> DeserializeSeed<'de> for Properties {
    type Value = Vec<String>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Properties {
    type Value = Vec<String>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a schema")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut properties = Vec::new();
        while let Some(key) = map.next_key::<String>()? {
            if key == "properties" {
                properties = map.next_value_seed(Keys)?;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(properties)
    }

    holds_no_order!();
}

/// Reads past an array whose content does not matter here.
fn skip<'de, A: SeqAccess<'de>, T: Default>(mut seq: A) -> Result<T, A::Error> {
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(T::default())
}
