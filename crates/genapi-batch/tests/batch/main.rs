//! Batches as a library user runs them: job files checked before anything
//! is sent, and jobs made from typed requests run against the mock. (Most of
//! the runner is driven through the `genapi batch` command's tests.)

/// The workspace's shared test helpers.
mod common {
    pub use genapi_test_common::*;
}

mod credit_cap;
mod job_file;
mod journal_lock;
mod results_file;
mod resumed_secrets;
mod resumed_without_seat;
mod typed_jobs;
