//! The workspace's own checks, one module per thing a maintainer looks after:
//! the document and the maintenance tasks that read it (`check_and_diff`),
//! the dependency lines the documentation gives (`dependency_lines`), pages
//! that can be skimmed (`docs_to_skim`), and
//! the public API of every published crate (`public_api`).

mod check_and_diff;
mod dependency_lines;
mod docs_to_skim;
mod public_api;
