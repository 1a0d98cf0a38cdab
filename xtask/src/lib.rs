//! Maintenance tasks of the genapi document: `check`, `regen`,
//! `diff-upstream` and `drift`; and `guards`, the mutation run of paying
//! once's guards. A library so the crate's snapshot tests use the same
//! surface listing.

pub mod callbacks;
pub mod check;
pub mod diff;
pub mod drift;
pub mod guards;
pub mod model;
pub mod surface;

pub use check::check;
pub use diff::diff;
/// The crate's reader of operations and `$ref`s (`genapi-document`), shared
/// with the library's validator and `build.rs`.
pub use genapi_document as document;
pub use surface::surface;
