//! Batches as a library user runs them, against the mock on a loopback
//! port: job files checked before anything is sent, each line paid for once,
//! lost answers adopted, the active-task limit and the credit cap kept,
//! stops that send nothing new, and resumed runs. (The `genapi batch`
//! command's own behaviour is tested with the command.)

mod active_limit;
mod adopting;
mod charged_in_flight;
mod common;
mod credit_cap;
mod earlier_journals;
mod edited_job_files;
mod expired_results;
mod job_file;
mod journal_lock;
mod journal_reading;
mod notified_lines;
mod paying_once;
mod protocol;
mod refusals;
mod results_file;
mod resumed_counts;
mod resumed_fast_model;
mod resumed_just_sent;
mod resumed_secrets;
mod resumed_without_seat;
mod stopping;
mod store_contract;
mod typed_jobs;
mod untrusted_polling_host;
mod untrusted_prices;
