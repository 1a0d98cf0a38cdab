//! What a request builder's setter of an optional field accepts.
//!
//! The generator types those setters as `T: TryInto<Option<X>>`, which `&str`
//! cannot satisfy for a `String` field (there is no `From<&str>` for
//! `Option<String>`, and the orphan rule forbids adding one), so
//! `GenDevRequest::builder().prompt("x")` would not compile while
//! `Gen2ProRequest::builder().prompt("x")` (a required field) would.
//! `build.rs` rewrites those setters to take a [`FieldValue`] instead; it is
//! implemented for `X`, `Option<X>` and, for every string field and every
//! generated type that parses from a string (enums, checked strings), for
//! `&str`, `String` and `Option<&str>` (text that does not parse is an
//! [`Unparsed`]).
//!
//! A builder that cannot finish is read here too (`unfinished`), as data.

use std::convert::Infallible;

/// A value an optional field of a request builder accepts: the field's type
/// itself, an `Option` of it (`None` leaves the field unset), or text for
/// fields that take text.
///
/// ```
/// use genapi::api::types::{GenDevRequest, OutputFormat};
/// let request = GenDevRequest::builder()
///     .prompt("a red fox")                  // &str
///     .output_format("png")                 // parsed into the enum
///     .seed(None::<i128>)                   // unset
///     .width(1024);                         // the type itself
/// let request: GenDevRequest = request.try_into().unwrap();
/// assert_eq!(request.output_format, Some(OutputFormat::Png));
/// ```
pub trait FieldValue<X>: Sized {
    /// Why the value does not fit (for text that does not parse).
    type Error: std::fmt::Display;
    /// The field's value; `None` leaves it unset.
    fn into_field(self) -> Result<Option<X>, Self::Error>;
}

impl<X> FieldValue<X> for X {
    type Error = Infallible;
    fn into_field(self) -> Result<Option<X>, Infallible> {
        Ok(Some(self))
    }
}

impl<X> FieldValue<X> for Option<X> {
    type Error = Infallible;
    fn into_field(self) -> Result<Option<X>, Infallible> {
        Ok(self)
    }
}

/// Text for a field of type `$target`, converted with `$convert`.
macro_rules! text_values {
    ($target:ty, $error:ty, |$text:ident| $convert:expr) => {
        impl<'a> $crate::FieldValue<$target> for &'a str {
            type Error = $error;
            fn into_field(self) -> Result<Option<$target>, $error> {
                let $text = self;
                $convert.map(Some)
            }
        }
        impl<'a> $crate::FieldValue<$target> for &'a String {
            type Error = $error;
            fn into_field(self) -> Result<Option<$target>, $error> {
                let $text = self.as_str();
                $convert.map(Some)
            }
        }
        impl<'a> $crate::FieldValue<$target> for Option<&'a str> {
            type Error = $error;
            fn into_field(self) -> Result<Option<$target>, $error> {
                match self {
                    Some($text) => $convert.map(Some),
                    None => Ok(None),
                }
            }
        }
    };
}
pub(crate) use text_values;

text_values!(String, Infallible, |text| Ok::<String, Infallible>(text.to_string()));
text_values!(crate::WebhookSecret, Infallible, |text| Ok::<
    crate::WebhookSecret,
    Infallible,
>(crate::WebhookSecret::new(
    text
)));

impl crate::FieldValue<crate::WebhookSecret> for String {
    type Error = Infallible;
    fn into_field(self) -> Result<Option<crate::WebhookSecret>, Infallible> {
        Ok(Some(crate::WebhookSecret::new(self)))
    }
}

/// Text given for a field of a type parsed from text (an enum, a checked
/// string) that does not parse: the text and the reason.
#[derive(Debug)]
pub struct Unparsed {
    text: String,
    why: String,
}

impl Unparsed {
    pub(crate) fn new(text: &str, why: impl std::fmt::Display) -> Unparsed {
        Unparsed {
            // Shown in errors: a long text is cut, not repeated whole.
            text: text.chars().take(64).collect(),
            why: why.to_string(),
        }
    }
}

impl std::fmt::Display for Unparsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?} does not fit ({})", self.text, self.why)
    }
}

impl std::error::Error for Unparsed {}

/// The values the document allows for a field, when it lists them.
fn allowed(schema: &str, field: &str) -> String {
    let catalog = crate::validate::Document::embedded().catalog();
    match catalog.by_request_schema(schema).and_then(|model| model.field(field)) {
        Some(field) if !field.choices.is_empty() => {
            let shown: Vec<String> = field.choices.iter().map(ToString::to_string).collect();
            format!("; expected one of {}", shown.join(", "))
        }
        _ => String::new(),
    }
}

/// Why a request builder could not finish, in the service's 422 shape, read
/// from the builder itself rather than from the generator's sentences: each
/// field in error is either one never set (its error is the untouched
/// builder's: "Field required", type `missing`) or one set to a value that
/// does not fit (type `value_error`, with the setter's reason).
pub(crate) fn unfinished<B: serde::Serialize>(schema: &str, builder: &B, untouched: &B) -> crate::Error {
    unfinished_as_json(schema, serde_json::to_value(builder), serde_json::to_value(untouched))
}

/// The work of [`unfinished`] on the builders as JSON, made once for every
/// request type rather than once for each.
fn unfinished_as_json(
    schema: &str,
    builder: serde_json::Result<serde_json::Value>,
    untouched: serde_json::Result<serde_json::Value>,
) -> crate::Error {
    use crate::api::types::{ValidationError, ValidationErrorLocItem};
    let (state, untouched) = match (builder, untouched) {
        (Ok(state), Ok(untouched)) => (state, untouched),
        // Unreachable: builders hold only serializable values.
        (Err(e), _) | (_, Err(e)) => {
            return crate::Error::refused_locally(format!("cannot read the request builder: {e}"))
        }
    };
    let at = |field: &str| {
        vec![
            ValidationErrorLocItem::String("body".into()),
            ValidationErrorLocItem::String(field.into()),
        ]
    };
    let errors = state
        .as_object()
        .into_iter()
        .flatten()
        .filter_map(|(field, value)| {
            let why = value.get("Err")?.as_str().unwrap_or_default();
            let (msg, kind) = if untouched.get(field) == Some(value) {
                ("Field required".to_string(), "missing")
            } else {
                (format!("Value error, {why}{}", allowed(schema, field)), "value_error")
            };
            Some(ValidationError {
                loc: at(field),
                msg,
                type_: kind.into(),
                input: None,
            })
        })
        .collect();
    crate::Error::Validation {
        errors,
        checked: crate::Checked::Locally,
    }
}
