//! A layer's error, as [`crate::Error::Layer`] carries it: shown only
//! through the client's one scrubber and the one address rule.
//!
//! A layer the user adds sees the request whole, and its error may quote
//! it: the sealed body of a submission, with its webhook secret and the
//! token in its receiver's address, or the key in a header. Its text is
//! scrubbed once, when the error leaves the client, like every text that
//! may quote a request; the error itself is kept as the layer gave it, for
//! a program to inspect ([`LayerError::downcast_ref`]), and is not a
//! [`source`](std::error::Error::source) that a report would print whole.

use std::fmt;

use tower::BoxError;

/// The error a layer added with [`crate::ClientBuilder::layer`] failed
/// with: its [`Display`](fmt::Display) and [`Debug`](fmt::Debug) are its
/// text and its causes' without the key or any secret the client knows;
/// every address it quotes is shown without its query, user information or
/// fragment ([`genapi_text::addresses_shown`]); the error itself is
/// [`LayerError::get_ref`].
///
/// ```
/// let error = genapi::LayerError::new(std::io::Error::other("the proxy said no"));
/// assert_eq!(error.to_string(), "the proxy said no");
/// assert!(error.downcast_ref::<std::io::Error>().is_some());
/// ```
pub struct LayerError {
    error: BoxError,
    shown: String,
}

impl LayerError {
    /// A layer's error, shown as its text and its causes say (a program
    /// making one of its own has no secrets to remove; the client's errors
    /// are made with its scrubber).
    pub fn new(error: impl Into<BoxError>) -> LayerError {
        let error = error.into();
        let shown = genapi_text::addresses_shown(&crate::error::cause_chain(&*error));
        LayerError { error, shown }
    }

    /// A layer's error on a request to `address`, its text scrubbed of
    /// every secret the client knows and of what that address holds.
    pub(crate) fn scrubbed(error: BoxError, scrubber: &crate::scrub::Scrubber, address: &reqwest::Url) -> LayerError {
        // The scrubber removes the secrets the client knows. The request's
        // own address may hold others (a result's signature), which a layer
        // may quote in any form (`{url:?}`, escaped, its query alone): its
        // query values, tokens and credentials are left out wherever they
        // stand, as a recording leaves them out, and any address written
        // whole is shown by the one rule.
        let mut secrets = Vec::new();
        crate::record::masked_address(address, &mut secrets, &|id| scrubber.is_a_known_task_id(id));
        let text = scrubber.scrub(&crate::error::cause_chain(&*error));
        let shown = crate::record::without_address_secrets(&text, &secrets);
        LayerError { error, shown }
    }

    /// The error as the layer gave it (its text may quote the request:
    /// show it only through this type's `Display`).
    pub fn get_ref(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.error
    }

    /// The error as the layer gave it, when it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.error.downcast_ref::<T>()
    }

    /// The error as the layer gave it.
    pub fn into_inner(self) -> BoxError {
        self.error
    }
}

impl fmt::Display for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.shown)
    }
}

impl fmt::Debug for LayerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("LayerError").field(&self.shown).finish()
    }
}

/// Its causes are in its text, scrubbed: none is given as a source, which
/// a report would print as the layer wrote it.
impl std::error::Error for LayerError {}
