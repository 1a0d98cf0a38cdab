//! Building a client changes nothing process-wide: an application that
//! installs its own rustls provider afterwards still can.

#[test]
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
