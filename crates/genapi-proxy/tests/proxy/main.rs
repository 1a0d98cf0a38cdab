//! The proxy against the mock service, over real loopback connections:
//! what an SDK pointed at it sees, and what the service is charged.

mod checking_the_contract;
mod common;
mod passing_through;
mod paying_once;
mod python_sdk;
mod recording;
mod refusing;
mod sharing;
