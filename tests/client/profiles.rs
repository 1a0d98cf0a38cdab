//! `Client::from_env` reads the config file's profiles as the command does
//! (`genapi::profiles`): a program and `genapi --profile work` configured
//! once, alike.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;

use genapi::api::types;
use genapi::ClientBuilder;
use genapi_mock::MockService;

use crate::common::Dir;

/// A config file in `dir`, the user's own and writable by them alone.
fn config_file(dir: &Dir, text: &str) -> String {
    let path = dir.join("config.toml");
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path.display().to_string()
}

/// The variables a program would read, from pairs.
fn variables(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
    move |name: &str| map.get(name).cloned()
}

/// A profile of the mock, its key in a variable of its own.
fn work_profile(mock: &MockService) -> String {
    let origins: Vec<String> = mock.trusted_origins().iter().map(|o| format!("{o:?}")).collect();
    format!(
        "default_profile = \"work\"\n\n[profiles.work]\nbase_url = {:?}\ntrusted_origins = [{}]\nkey_env = \"WORK_GENAPI_KEY\"\n\n\
         [profiles.lab]\nbase_url = \"https://lab.example.com\"\nbase_ur1 = \"typo\"\n",
        mock.base_url(),
        origins.join(", ")
    )
}

#[tokio::test(start_paused = true)]
async fn a_program_uses_the_default_profile_when_the_environment_names_no_service() {
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("profiles-default");
    let config = config_file(&dir, &work_profile(&mock));
    let read = variables(&[("GENAPI_CONFIG", &config), ("WORK_GENAPI_KEY", mock.key())]);
    let client = ClientBuilder::from_variables(read).unwrap().build().unwrap();
    let task = client
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap();
    task.wait().await.unwrap();
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "sent to the profile's service");
}

#[tokio::test]
async fn the_environment_s_service_is_used_over_any_profile() {
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("profiles-environment");
    let config = config_file(&dir, &work_profile(&mock));
    let read = variables(&[
        ("GENAPI_CONFIG", &config),
        ("WORK_GENAPI_KEY", mock.key()),
        ("GENAPI_API_KEY", "k-env"),
        ("GENAPI_BASE_URL", "https://env.example.com"),
    ]);
    let client = ClientBuilder::from_variables(read).unwrap().build().unwrap();
    assert_eq!(client.base_url().host_str(), Some("env.example.com"));
    // Half a service in the environment is never completed by a profile.
    let read = variables(&[
        ("GENAPI_CONFIG", &config),
        ("GENAPI_BASE_URL", "https://env.example.com"),
    ]);
    let error = ClientBuilder::from_variables(read).unwrap_err().to_string();
    assert!(
        error.contains("GENAPI_BASE_URL is set but GENAPI_API_KEY is not"),
        "{error}"
    );
}

#[tokio::test]
async fn what_keeps_a_profile_from_use_is_said_without_its_key() {
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("profiles-refused");
    let config = config_file(&dir, &work_profile(&mock));
    let refused = |pairs: &[(&str, &str)]| {
        let mut all = vec![("GENAPI_CONFIG", config.as_str())];
        all.extend_from_slice(pairs);
        ClientBuilder::from_variables(variables(&all)).unwrap_err().to_string()
    };
    let unset = refused(&[]);
    assert!(
        unset.contains("profile work: key_env names WORK_GENAPI_KEY, which is not set"),
        "{unset}"
    );
    let broken = refused(&[("GENAPI_PROFILE", "lab")]);
    assert!(
        broken.contains("line 10: profile lab: unknown field `base_ur1`"),
        "{broken}"
    );
    let missing = refused(&[("GENAPI_PROFILE", "home")]);
    assert!(
        missing.contains("no profile home") && missing.contains("lab, work"),
        "{missing}"
    );
    let gone = ClientBuilder::from_variables(variables(&[("GENAPI_CONFIG", "/nonexistent/genapi.toml")]));
    assert!(gone
        .unwrap_err()
        .to_string()
        .contains("GENAPI_CONFIG=/nonexistent/genapi.toml: no such file"));

    // A file others may change decides where the key goes: refused.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o666)).unwrap();
    let open = refused(&[("WORK_GENAPI_KEY", "sk-work-0123456789")]);
    assert!(open.contains("config file") && !open.contains("sk-work"), "{open}");
}

/// A key the service refuses names the profile it came from, as the
/// command's does.
#[tokio::test(start_paused = true)]
async fn a_refused_key_names_its_profile() {
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("profiles-refused-key");
    let config = config_file(&dir, &work_profile(&mock));
    let read = variables(&[("GENAPI_CONFIG", &config), ("WORK_GENAPI_KEY", "sk-not-the-mocks-key")]);
    let client = ClientBuilder::from_variables(read).unwrap().build().unwrap();
    let error = client
        .submit(types::Gen2ProRequest::builder().prompt("x"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("the key of profile work (key_env WORK_GENAPI_KEY)"),
        "{error}"
    );
    assert!(!error.contains("sk-not-the-mocks-key"), "{error}");
}

/// A program that starts a mock when nothing is configured (as the examples
/// do) asks `from_variables_if_any`: `None` only when nothing names a
/// service; a profile chosen is used, and a configuration that cannot be
/// used is an error, never a quiet mock.
#[tokio::test]
async fn only_a_service_nothing_names_is_none() {
    let mock = MockService::start().await.unwrap();
    let dir = Dir::new("profiles-if-any");
    let none = |pairs: &[(&str, &str)]| {
        ClientBuilder::from_variables_if_any(variables(pairs))
            .unwrap()
            .is_none()
    };
    let missing = dir.join("no-such.toml").display().to_string();
    let unchosen = config_file(&dir, "[profiles.local]\nbase_url = \"http://127.0.0.1:9\"\n");
    // A file whose profiles are used only when named.
    assert!(none(&[("GENAPI_CONFIG", &unchosen)]));
    // A profile chosen: its service.
    let config = config_file(&dir, &work_profile(&mock));
    let chosen = ClientBuilder::from_variables_if_any(variables(&[
        ("GENAPI_CONFIG", &config),
        ("WORK_GENAPI_KEY", mock.key()),
    ]))
    .unwrap()
    .expect("the default profile names a service");
    assert_eq!(
        chosen.build().unwrap().base_url().as_str().trim_end_matches('/'),
        mock.base_url().trim_end_matches('/')
    );
    // What cannot be used is said.
    for broken in [
        vec![("GENAPI_BASE_URL", "https://api.example.com")],
        vec![("GENAPI_CONFIG", missing.as_str())],
        vec![("GENAPI_CONFIG", config.as_str())],
    ] {
        assert!(
            ClientBuilder::from_variables_if_any(variables(&broken)).is_err(),
            "{broken:?}"
        );
    }
}
