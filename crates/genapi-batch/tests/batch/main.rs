//! Batches as a library user runs them: job files checked before anything
//! is sent. (The runner itself is driven through the `genapi batch` command's
//! tests, against the mock.)

/// The workspace's shared test helpers.
mod common {
    pub use genapi_test_common::*;
}

mod job_file;
