//! A profile with a misspelt field names the field and the fields a
//! profile may have; `config set` says which line to correct when the
//! mistake is one it cannot change, and fixes the field it sets; a model
//! the command does not know is refused with the models there are; a key
//! set where a model, a folder or an address belongs is refused, and no
//! value is ever said back.

use crate::cli::text;
use crate::common::{genapi_alone, Dir};

fn config_file(dir: &Dir, text: &str) -> std::path::PathBuf {
    let folder = dir.join("config/genapi");
    std::fs::create_dir_all(&folder).unwrap();
    let path = folder.join("config.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `genapi --profile bad config set base_url …`.
fn set_base_url(dir: &Dir) -> std::process::Output {
    genapi_alone(dir)
        .args([
            "--profile",
            "bad",
            "config",
            "set",
            "base_url",
            "https://api.example.com",
        ])
        .output()
        .unwrap()
}

#[test]
fn a_misspelt_field_is_named_with_the_fields_a_profile_may_have() {
    let dir = Dir::new("misspelt-field");
    let config = config_file(
        &dir,
        "[profiles.bad]\nbase_ur1 = \"https://api.example.com\"\nkey_env = \"BAD_KEY\"\n",
    );
    let run = genapi_alone(&dir)
        .args(["--profile", "bad", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(
        said.contains("line 2: profile bad: unknown field `base_ur1`; a profile's fields are base_url,"),
        "{said}"
    );
    assert!(!said.contains("`key`") && !said.contains("api_key"), "{said}");

    // Setting base_url leaves the misspelt one: refused, with the line to correct.
    let before = std::fs::read_to_string(&config).unwrap();
    let run = set_base_url(&dir);
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(said.contains("correct line 2 of "), "{said}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before, "left as it was");

    // A field of the wrong type is one `config set` replaces.
    config_file(&dir, "[profiles.bad]\nbase_url = 3\nkey_env = \"BAD_KEY\"\n");
    let run = set_base_url(&dir);
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
}

#[test]
fn an_unknown_model_is_refused_with_the_known_ones() {
    let dir = Dir::new("config-set-model");
    let run = genapi_alone(&dir)
        .args(["config", "set", "model", "nosuch"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(
        said.contains("unknown model") && said.contains("known models: ") && said.contains("gen-2-pro"),
        "{said}"
    );
    assert!(!dir.join("config/genapi/config.toml").exists(), "nothing written");
    let run = genapi_alone(&dir)
        .args(["config", "set", "model", "gen-2-flex"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
}

/// A profile's key may not come from `GENAPI_API_KEY` (or `GENAPI_BASE_URL`):
/// set, the variable names the environment's service over every profile;
/// unset, the profile has no key. `config set` and `login` refuse it, and a
/// file that names it says so where the profile is used.
#[test]
fn a_profile_key_from_the_environments_own_variable_is_refused_with_what_to_name_instead() {
    let dir = Dir::new("profile-key-env-own");
    for args in [
        vec!["--profile", "w", "config", "set", "key_env", "GENAPI_API_KEY"],
        vec![
            "--profile",
            "w",
            "login",
            "--base-url",
            "http://127.0.0.1:9",
            "--key-env",
            "GENAPI_BASE_URL",
        ],
    ] {
        let run = genapi_alone(&dir).args(&args).output().unwrap();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("name one of the profile's own"), "{args:?}: {stderr}");
    }
    config_file(
        &dir,
        "[profiles.w]\nbase_url = \"http://127.0.0.1:9\"\nkey_env = \"GENAPI_API_KEY\"\n",
    );
    for key in [None, Some("k-1234567890")] {
        let mut command = genapi_alone(&dir);
        command.env_remove("GENAPI_API_KEY").env_remove("GENAPI_BASE_URL");
        if let Some(key) = key {
            command.env("GENAPI_API_KEY", key);
        }
        let run = command.args(["--profile", "w", "generate", "x"]).output().unwrap();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{key:?}: {stderr}");
        assert!(stderr.contains("name one of the profile's own"), "{key:?}: {stderr}");
    }
}

/// A key pasted as `config set model KEY` or `config set out KEY` (or
/// another field that does not name the key) is refused with what to do
/// instead; it is said nowhere, and the config file, as `genapi config`
/// shows it, is left as it was.
#[test]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
fn a_key_set_as_a_model_a_folder_or_an_address_is_refused_and_never_said_back() {
    let dir = Dir::new("config-set-key-shaped");
    let config = config_file(
        &dir,
        "default_profile = \"work\"\n[profiles.work]\nbase_url = \"https://api.example.com\"\nmodel = \"gen-2-flex\"\n",
    );
    let before = std::fs::read_to_string(&config).unwrap();
    for (field, value, shown_part) in [
        ("model", "sk-live-PASTED7731q9ZcX2vB8nM4kL0p", "PASTED7731"),
        ("out", "sk-live-PASTED7731q9ZcX2vB8nM4kL0p", "PASTED7731"),
        ("out", "Q7f3Kp92LmX0zR4tB8vN1cW6yH5j", "Q7f3Kp92"),
        ("out", "-sk_live_PASTED7731q9ZcX2vB8nM4", "PASTED7731"),
        ("trusted_origins", "ghp_PASTED7731q9ZcX2vB8nM4kL0pAbCd", "PASTED7731"),
    ] {
        let said = refused_set(&dir, field, value);
        assert!(!said.contains(shown_part), "{field}: the value is said back: {said}");
        assert!(
            said.contains("shape of a key") && said.contains("genapi login") && said.contains("key_env"),
            "{field}: {said}"
        );
        let after = std::fs::read_to_string(&config).unwrap();
        assert_eq!(after, before, "{field}: the file is left as it was");
        assert!(!after.contains(shown_part), "{field}: {after}");
    }
    // The key in use, of no key's shape, pasted as a folder.
    let run = genapi_alone(&dir)
        .env("GENAPI_API_KEY", "harbour-lights-1")
        .args(["config", "set", "out", "harbour-lights-1"])
        .output()
        .unwrap();
    let said = text(&run.stdout) + &text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "the key in use: {said}");
    assert!(!said.contains("harbour-lights"), "{said}");
    assert!(said.contains("holds the key in use"), "{said}");
    assert_eq!(std::fs::read_to_string(&config).unwrap(), before);
    // The same where no settings can be made of it (no config file, a key
    // without an address), and a key kept in a file others may read.
    let alone = Dir::new("config-set-key-alone");
    let run = genapi_alone(&alone)
        .env("GENAPI_API_KEY", "harbour-lights-1")
        .args(["config", "set", "out", "harbour-lights-1"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    let kept = alone.join("open.key");
    std::fs::write(&kept, "harbour-lights-2\n").unwrap();
    config_file(
        &alone,
        &format!(
            "[profiles.work]\nbase_url = \"https://api.example.com\"\nkey_file = \"{}\"\n",
            kept.display()
        ),
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let run = genapi_alone(&alone)
        .args(["--profile", "work", "config", "set", "out", "harbour-lights-2"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2), "{}", text(&run.stderr));
    assert!(!std::fs::read_to_string(alone.join("config/genapi/config.toml"))
        .unwrap()
        .contains("harbour"));
    // A key kept by a profile that cannot be used (a misspelt field):
    // still a key.
    let mended = alone.join("mended.key");
    std::fs::write(&mended, "harbour-lights-3\n").unwrap();
    config_file(
        &alone,
        &format!(
            "[profiles.work]\nbase_url = \"https://api.example.com\"\n[profiles.old]\nbase_url = \
             \"https://api.example.com\"\nmodle = \"gen-2-flex\"\nkey_file = \"{}\"\n",
            mended.display()
        ),
    );
    let run = genapi_alone(&alone)
        .args(["--profile", "work", "config", "set", "out", "harbour-lights-3"])
        .output()
        .unwrap();
    let said = text(&run.stdout) + &text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "a broken profile's key: {said}");
    assert!(said.contains("holds the key in use"), "{said}");
    assert!(!std::fs::read_to_string(alone.join("config/genapi/config.toml"))
        .unwrap()
        .contains("harbour"));
    // An address carrying a credential is refused for every address field,
    // unsaid.
    for (field, value) in [
        ("base_url", "http://u:pass-CANARY@api.example.com"),
        ("base_url", "https://api.example.com/?password=pass-CANARY"),
        (
            "trusted_origins",
            "https://a.example.com, http://a:pass-CANARY@h.example.com",
        ),
        ("regional_base_url", "https://ghp-CANARY@api.eu.example.com"),
        ("base_url", "https://api.example.com/#token=CANARY"),
        ("base_url", "https://api.example.com/v1;token=CANARY"),
        ("base_url", "https://api.example.com/v1%3Ftoken=CANARY"),
    ] {
        let said = refused_set(&dir, field, value);
        assert!(!said.contains("CANARY"), "{field}: {said}");
        assert!(!std::fs::read_to_string(&config).unwrap().contains("CANARY"));
    }
    let shown = genapi_alone(&dir).args(["config"]).output().unwrap();
    let shown = text(&shown.stdout) + &text(&shown.stderr);
    assert!(!shown.contains("PASTED") && !shown.contains("Q7f3Kp92"), "{shown}");
    assert!(shown.contains("gen-2-flex"), "{shown}");
}

/// A model the command does not know is refused without being said back
/// (it may be a key of no known shape), with the models there are.
#[test]
fn an_unknown_model_is_refused_without_being_said_back() {
    let dir = Dir::new("config-set-model-unsaid");
    let run = genapi_alone(&dir)
        .args(["config", "set", "model", "PASTEDsecret-of-no-shape"])
        .output()
        .unwrap();
    let said = text(&run.stdout) + &text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(!said.contains("PASTED"), "{said}");
    assert!(
        said.contains("unknown model") && said.contains("genapi models"),
        "{said}"
    );
    assert!(!dir.join("config/genapi/config.toml").exists(), "nothing written");
}

/// `genapi config set FIELD VALUE` in `dir`, refused as a usage error:
/// what it said.
fn refused_set(dir: &Dir, field: &str, value: &str) -> String {
    let run = genapi_alone(dir)
        .args(["config", "set", field, value])
        .output()
        .unwrap();
    let said = text(&run.stdout) + &text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{field}: {said}");
    said
}
