//! The workspace's own checks, one module per thing a maintainer looks after:
//! the document and the maintenance tasks that read it (`check_and_diff`),
//! the dependency lines the documentation gives (`dependency_lines`), and
//! the public API of every published crate (`public_api`).

mod check_and_diff;
mod dependency_lines;
mod public_api;
