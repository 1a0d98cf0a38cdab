//! Maintenance tasks of the genapi document: `check`, `regen` and
//! `diff-upstream`. A library so the crate's snapshot tests use the same
//! surface listing.

pub mod check;
pub mod diff;
/// The crate's own reader of operations and `$ref`s, shared with the
/// validator and `build.rs`.
#[allow(dead_code, unreachable_pub)]
#[path = "../../src/document.rs"]
pub mod document;
pub mod model;
pub mod surface;

pub use check::check;
pub use diff::diff;
pub use surface::surface;
