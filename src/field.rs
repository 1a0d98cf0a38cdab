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
//! `&str`, `String` and `Option<&str>`.

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
