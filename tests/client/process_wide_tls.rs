//! Building a client changes nothing process-wide, and a reqwest builder
//! given without a TLS provider is an error that says what to do, not a
//! panic.
//!
//! Both look at the process's one default rustls provider, which any other
//! test of this binary may install; so each runs alone, in a new process of
//! this same test binary started by its wrapper.

use std::process::Command;

/// Runs the ignored test `name` alone in a new process of this binary and
/// checks that it ran and passed.
fn in_a_fresh_process(name: &str) {
    let output = Command::new(std::env::current_exe().expect("the test binary's path"))
        .args([name, "--exact", "--ignored", "--test-threads=1"])
        .output()
        .expect("the test binary runs again");
    let said = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(said.contains("test result: ok. 1 passed"), "{name} did not run: {said}");
}

#[test]
fn building_a_client_installs_no_process_wide_tls_provider() {
    in_a_fresh_process("process_wide_tls::alone::building_a_client_installs_no_process_wide_tls_provider");
}

/// With the `native-tls` feature compiled in (as `--all-features` does),
/// every reqwest builder has a TLS stack, so there is no builder without one
/// to refuse: the check runs in the builds without it.
#[cfg(not(feature = "native-tls"))]
#[test]
fn a_custom_reqwest_builder_without_tls_is_a_clear_error() {
    in_a_fresh_process("process_wide_tls::alone::a_custom_reqwest_builder_without_tls_is_a_clear_error");
}

/// The tests themselves, each run by its wrapper above in a process of its
/// own (ignored in the shared one).
mod alone {
    #[test]
    #[ignore = "run alone in a fresh process by its wrapper"]
    fn building_a_client_installs_no_process_wide_tls_provider() {
        let client = genapi::Client::builder()
            .api_key("k")
            .base_url("https://api.example.com")
            .build()
            .unwrap();
        drop(client);
        assert!(
            rustls::crypto::CryptoProvider::get_default().is_none(),
            "no default provider was installed"
        );
        // The application's own choice still goes in.
        assert!(rustls::crypto::ring::default_provider().install_default().is_ok());
    }

    #[cfg(not(feature = "native-tls"))]
    #[test]
    #[ignore = "run alone in a fresh process by its wrapper"]
    fn a_custom_reqwest_builder_without_tls_is_a_clear_error() {
        assert!(rustls::crypto::CryptoProvider::get_default().is_none());
        let error = genapi::Client::builder()
            .api_key("k")
            .base_url("https://api.example.com")
            .reqwest_builder(genapi::reqwest::Client::builder)
            .build()
            .unwrap_err();
        assert!(matches!(error, genapi::Error::Config(_)), "{error}");
        assert!(error.to_string().contains("process-wide default provider"), "{error}");
        // With the provider the program chose, the same builder works.
        crate::common::install_tls_provider();
        genapi::Client::builder()
            .api_key("k")
            .base_url("https://api.example.com")
            .reqwest_builder(genapi::reqwest::Client::builder)
            .build()
            .unwrap();
    }
}
