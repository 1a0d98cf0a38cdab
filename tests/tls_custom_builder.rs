//! A reqwest builder given without a TLS provider is an error that says what
//! to do, not a panic. Alone in its own test binary: no test here installs a
//! process-wide provider first.

#[test]
fn a_custom_reqwest_builder_without_tls_is_a_clear_error() {
    assert!(rustls::crypto::CryptoProvider::get_default().is_none());
    let error = genapi::Client::builder()
        .api_key("k")
        .base_url("https://api.example.com")
        .reqwest_builder(genapi::reqwest::Client::builder)
        .build()
        .unwrap_err();
    assert!(matches!(error, genapi::Error::Config(_)), "{error}");
    assert!(error.to_string().contains("ensure_tls_provider"), "{error}");
    // With the provider the program chose, the same builder works.
    genapi::ensure_tls_provider();
    genapi::Client::builder()
        .api_key("k")
        .base_url("https://api.example.com")
        .reqwest_builder(genapi::reqwest::Client::builder)
        .build()
        .unwrap();
}
