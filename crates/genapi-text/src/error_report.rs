//! An error as `{:?}` shows it. A program whose `main` returns an error
//! (`Result<(), Box<dyn Error>>` and `?`) prints that error's Debug form, so
//! every public error of genapi's crates writes its Debug form here: the
//! text that says what to do first, then the chain of causes, the way
//! error-reporting crates print a report.

use std::error::Error;
use std::fmt;

/// The causes of `error`, outermost first, each its Display text made safe
/// to show ([`crate::clean`]). A cause whose text is already in the error's
/// own text (or an earlier cause's) is left out: many errors repeat their
/// source's words in their own.
///
/// ```
/// let io = std::io::Error::other("disk full");
/// let wrapped = std::io::Error::new(std::io::ErrorKind::Other, io);
/// // The wrapper says what its source says, so nothing more is added.
/// assert!(genapi_text::causes(&wrapped).is_empty());
/// ```
pub fn causes(error: &(dyn Error + 'static)) -> Vec<String> {
    let mut said = crate::clean(&error.to_string());
    let mut causes = Vec::new();
    let mut next = error.source();
    // A chain is followed this far: one that loops (a source that is its
    // own) or runs on would otherwise hold the caller for ever.
    let mut left = MOST_CAUSES;
    while let (Some(cause), true) = (next, left > 0) {
        left -= 1;
        let text = crate::clean(&cause.to_string());
        if !text.is_empty() && !said.contains(&text) {
            said.push('\n');
            said.push_str(&text);
            causes.push(text);
        }
        next = cause.source();
    }
    causes
}

/// The most causes of one error followed.
const MOST_CAUSES: usize = 16;

/// Writes `error` for `{:?}`: its Display text, then its [`causes`] under
/// `Caused by:`, one per line.
///
/// ```
/// use std::fmt;
///
/// struct Refused(std::io::Error);
///
/// impl fmt::Display for Refused {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         f.write_str("cannot save the picture; free some room and try again")
///     }
/// }
/// impl fmt::Debug for Refused {
///     fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
///         genapi_text::debug_error(self, f)
///     }
/// }
/// impl std::error::Error for Refused {
///     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
///         Some(&self.0)
///     }
/// }
///
/// let refused = Refused(std::io::Error::other("no space left on device"));
/// assert_eq!(
///     format!("{refused:?}"),
///     "cannot save the picture; free some room and try again\n\nCaused by:\n    no space left on device"
/// );
/// ```
pub fn debug_error(error: &(dyn Error + 'static), f: &mut fmt::Formatter<'_>) -> fmt::Result {
    f.write_str(&crate::clean(&error.to_string()))?;
    let causes = causes(error);
    if !causes.is_empty() {
        f.write_str("\n\nCaused by:")?;
        for cause in causes {
            write!(f, "\n    {cause}")?;
        }
    }
    Ok(())
}

/// Implements `Debug` for error types by [`debug_error`]: their text, then
/// their causes. Every public error of genapi's crates has its Debug form
/// from here.
///
/// ```
/// #[derive(thiserror::Error)]
/// #[error("the job file has no line 7; give a line number the file has")]
/// struct NoSuchLine;
///
/// genapi_text::debug_as_report!(NoSuchLine);
///
/// assert_eq!(format!("{NoSuchLine:?}"), "the job file has no line 7; give a line number the file has");
/// ```
#[macro_export]
macro_rules! debug_as_report {
    ($($error:ty),+ $(,)?) => {
        $(
            impl ::std::fmt::Debug for $error {
                fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                    $crate::debug_error(self, f)
                }
            }
        )+
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error whose source is itself.
    #[derive(Debug)]
    struct Looping;

    impl fmt::Display for Looping {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("round and round")
        }
    }

    impl Error for Looping {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            Some(self)
        }
    }

    #[test]
    fn a_chain_that_loops_is_followed_a_bounded_way() {
        assert!(causes(&Looping).is_empty(), "its text is its own");
        struct Shown;
        impl fmt::Display for Shown {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                debug_error(&Looping, f)
            }
        }
        assert_eq!(Shown.to_string(), "round and round");
    }
}
