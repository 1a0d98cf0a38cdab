//! The client's behaviour, driven through the real HTTP stack against the
//! mock service on ephemeral loopback ports: one test binary, a module per
//! behaviour a user would name.

/// The workspace's shared test helpers.
mod common {
    pub use genapi_test_common::*;
}

mod contract_coverage;
mod document_corrections;
mod errors_and_retries;
mod examples;
mod fast_models;
mod fault_table;
#[cfg(feature = "fuzzing")]
mod fuzz_regressions;
mod generate_and_download;
mod hostile_service;
mod module_graph;
mod one_road;
mod process_wide_tls;
mod profiles;
mod python_receiver;
mod readable_errors;
mod recording;
mod recovery;
mod replay;
mod request_tracing;
mod result_expiry;
mod secret_hygiene;
mod signed_addresses;
mod spec_snapshots;
mod string_setters;
mod trust_and_secrets;
mod user_layers;
mod validation;
mod waiting;
mod webhooks;
