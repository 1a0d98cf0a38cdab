//! Profiles of the config file: a service chosen by name, flags over the
//! environment over the profile, and a key that is only ever referred to.

use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Output};

use serde_json::Value;

use crate::cli::text;
use crate::common::{genapi_alone, roomy_mock, Dir};

/// `genapi ARGS` in `dir`, its config file the one the test wrote there.
fn genapi(dir: &Dir) -> Command {
    let mut command = genapi_alone(dir);
    command.env_remove("WORK_KEY");
    command
}

fn config_file(dir: &Dir, text: &str) {
    let folder = dir.join("config/genapi");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("config.toml"), text).unwrap();
}

fn ok(run: &Output) -> String {
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    text(&run.stdout)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn a_profile_names_the_service_and_its_defaults_and_flags_and_the_environment_win() {
    let work = roomy_mock(50).await;
    let other = roomy_mock(50).await;
    let dir = Dir::new("profiles");
    let origins: Vec<String> = work.trusted_origins().iter().map(|o| format!("{o:?}")).collect();
    config_file(
        &dir,
        &format!(
            "default_profile = \"work\"\n\n[profiles.work]\nbase_url = \"{}\"\ntrusted_origins = [{}]\nkey_env = \"WORK_KEY\"\n\
             model = \"gen-2-flex\"\nout = \"shots\"\n\n[profiles.empty]\n",
            work.base_url(),
            origins.join(", ")
        ),
    );
    // The default profile: its service, its model, its output folder.
    let run = genapi(&dir)
        .env("WORK_KEY", work.key())
        .args(["generate", "a fox", "--json"])
        .output()
        .unwrap();
    let printed: Value = serde_json::from_str(ok(&run).trim()).unwrap();
    assert_eq!(work.count("POST", "/v1/gen-2-flex"), 1, "{}", text(&run.stderr));
    let file = printed["file"].as_str().unwrap_or_default().to_string();
    assert!(file.starts_with("shots/"), "{printed}");
    assert!(!text(&run.stderr).contains("built-in mock"), "{}", text(&run.stderr));

    // A flag wins over the profile's model.
    let run = genapi(&dir)
        .env("WORK_KEY", work.key())
        .args(["generate", "a fox", "-m", "gen-2-pro", "-o", "fox.jpg"])
        .output()
        .unwrap();
    ok(&run);
    assert_eq!(work.count("POST", "/v1/gen-2-pro"), 1);

    // The environment's service wins over the profile's, whole: nothing
    // goes to the profile's service, and its key goes nowhere.
    let run = genapi(&dir)
        .env("WORK_KEY", work.key())
        .env("GENAPI_BASE_URL", other.base_url())
        .env("GENAPI_API_KEY", other.key())
        .env("GENAPI_TRUSTED_ORIGINS", other.trusted_origins().join(","))
        .args(["generate", "a fox", "-o", "other.jpg"])
        .output()
        .unwrap();
    ok(&run);
    assert_eq!(
        other.count("POST", "/v1/gen-2-flex"),
        1,
        "the profile's model still applies"
    );
    assert_eq!(
        work.count("POST", "/v1/gen-2-flex"),
        1,
        "the profile's service was not used"
    );

    // `genapi config` says what was chosen and from where; never the key.
    let shown = ok(&genapi(&dir)
        .env("WORK_KEY", "sk-never-shown")
        .args(["config", "--json"])
        .output()
        .unwrap());
    let shown: Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(shown["profile"]["value"], "work");
    assert_eq!(shown["profile"]["from"], "the config file's default_profile");
    assert_eq!(shown["base_url"]["from"], "profile work");
    assert_eq!(shown["api_key"]["value"], "set");
    assert_eq!(shown["model"]["value"], "gen-2-flex");
    assert!(!shown.to_string().contains("sk-never-shown"));
    let plain = ok(&genapi(&dir)
        .env("WORK_KEY", "sk-never-shown")
        .arg("config")
        .output()
        .unwrap());
    assert!(plain.contains("api_key: set (from profile work)"), "{plain}");
    assert!(!plain.contains("sk-never-shown"));

    // --profile (and GENAPI_PROFILE) pick another: with no service, the
    // built-in mock, said so.
    for picked in [vec!["--profile", "empty"], vec![]] {
        let mut command = genapi(&dir);
        if picked.is_empty() {
            command.env("GENAPI_PROFILE", "empty");
        }
        let shown = ok(&command.args(picked).args(["config", "--json"]).output().unwrap());
        let shown: Value = serde_json::from_str(shown.trim()).unwrap();
        assert_eq!(shown["profile"]["value"], "empty");
        assert_eq!(shown["service"], "the built-in mock (a test double)");
    }
    let unknown = genapi(&dir).args(["--profile", "nope", "config"]).output().unwrap();
    assert_eq!(unknown.status.code(), Some(2));
    assert!(
        text(&unknown.stderr).contains("its profiles: empty, work"),
        "{}",
        text(&unknown.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_file_must_be_the_users_alone_and_a_key_is_never_written_in_the_file() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("profile-key-file");
    let key_file = dir.join("lab.key");
    std::fs::write(&key_file, format!("{}\n", mock.key())).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o644)).unwrap();
    config_file(
        &dir,
        &format!(
            "[profiles.lab]\nbase_url = \"{}\"\ntrusted_origins = [\"{}\"]\nkey_file = \"{}\"\n",
            mock.base_url(),
            mock.trusted_origins().join("\", \""),
            key_file.display()
        ),
    );
    let refused = genapi(&dir)
        .args(["--profile", "lab", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        text(&refused.stderr)
            .contains("mode 644: others can read it, and it holds a secret; make it yours alone: chmod 600"),
        "{}",
        text(&refused.stderr)
    );
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0);
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    ok(&genapi(&dir)
        .args(["--profile", "lab", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap());
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);

    config_file(
        &dir,
        "[profiles.lab]\nbase_url = \"https://api.example.com\"\nkey = \"sk-in-the-file\"\n",
    );
    // `genapi config` shows why the profile cannot be used; a command
    // using it stops, naming the profile and the line.
    let shown = ok(&genapi(&dir).args(["--profile", "lab", "config"]).output().unwrap());
    assert!(shown.contains("a key is never written in the config file"), "{shown}");
    assert!(!shown.contains("sk-in-the-file"), "{shown}");
    let refused = genapi(&dir)
        .args(["--profile", "lab", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = text(&refused.stderr);
    assert!(said.contains("line 3: profile lab: a key is never written"), "{said}");
    assert!(!said.contains("sk-in-the-file"), "{said}");
    config_file(&dir, "[profiles.lab]\nbase_ur = \"https://api.example.com\"\n");
    let refused = genapi(&dir)
        .args(["--profile", "lab", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(text(&refused.stderr).contains("base_ur"), "{}", text(&refused.stderr));
}

/// What cannot be read of a profile's key is said when the service is
/// used, not before: `genapi config` still shows everything (the key as not
/// set, and why), and `--mock` still runs. Nothing that could be the key,
/// or a secret of an address, is shown back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_whose_key_is_missing_is_said_when_used_and_nothing_secret_is_shown() {
    let dir = Dir::new("profile-key-missing");
    config_file(
        &dir,
        "default_profile = \"work\"\n[profiles.work]\nbase_url = \"https://user:pa55word@api.example.com/v1?token=t0k\"\n\
         key_env = \"WORK_KEY\"\n[profiles.typo]\nbase_url = \"https://api.example.com\"\nkey_env = \"sk-LIVE-123\"\n",
    );
    let shown = ok(&genapi(&dir).arg("config").output().unwrap());
    assert!(
        shown.contains("api_key: not set: profile work: key_env names WORK_KEY, which is not set"),
        "{shown}"
    );
    assert!(
        shown.contains("service: incomplete: profile work: key_env names WORK_KEY"),
        "{shown}"
    );
    assert!(shown.contains("https://…@api.example.com/v1?…"), "{shown}");
    assert!(!shown.contains("pa55word") && !shown.contains("t0k"), "{shown}");
    let lines: Vec<&str> = shown.lines().map(|line| line.split(':').next().unwrap()).collect();
    assert_eq!(
        lines,
        [
            "config_file",
            "profile",
            "service",
            "base_url",
            "regional_base_url",
            "trusted_origins",
            "api_key",
            "model",
            "out"
        ]
    );
    let refused = genapi(&dir)
        .args(["generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    assert!(text(&refused.stderr).contains("key_env names WORK_KEY, which is not set"));
    let forced = genapi(&dir)
        .args(["--mock", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    assert_eq!(
        forced.status.code(),
        Some(0),
        "--mock needs no key: {}",
        text(&forced.stderr)
    );

    // A key written where its variable's name belongs is never shown back.
    let typo = genapi(&dir).args(["--profile", "typo", "config"]).output().unwrap();
    let said = text(&typo.stdout) + &text(&typo.stderr);
    assert!(said.contains("key_env does not name a variable"), "{said}");
    assert!(!said.contains("sk-LIVE-123"), "{said}");
    // Nor a key written as a value of the wrong type.
    config_file(&dir, "[profiles.work]\ntrusted_origins = \"sk-LIVE-456\"\n");
    let shown = ok(&genapi(&dir).args(["--profile", "work", "config"]).output().unwrap());
    assert!(
        shown.contains("invalid type") && !shown.contains("sk-LIVE-456"),
        "{shown}"
    );
    let refused = genapi(&dir)
        .args(["--profile", "work", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(
        !text(&refused.stderr).contains("sk-LIVE-456"),
        "{}",
        text(&refused.stderr)
    );
    // The job line schema needs no settings at all.
    config_file(&dir, "not toml at all [");
    let schema = genapi(&dir).args(["batch", "--schema"]).output().unwrap();
    assert_eq!(schema.status.code(), Some(0), "{}", text(&schema.stderr));
}

/// A profile that does not trust the service's polling host: the task is
/// paid for, so the command prints the `wait` that trusts the host, and that
/// command picks the task up without submitting it again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paid_task_on_a_host_the_profile_does_not_trust_is_picked_up_by_the_printed_command() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("profile-untrusted");
    config_file(
        &dir,
        &format!(
            "[profiles.lab]\nbase_url = \"{}\"\nkey_env = \"WORK_KEY\"\n",
            mock.base_url()
        ),
    );
    let run = genapi(&dir)
        .env("WORK_KEY", mock.key())
        .args(["--profile", "lab", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{said}");
    let resume = said
        .lines()
        .find_map(|line| line.strip_prefix("resume with: "))
        .unwrap_or_else(|| panic!("no resume command in: {said}"))
        .to_string();
    assert!(resume.contains("--trust-origin"), "{resume}");
    assert!(resume.starts_with("genapi --profile lab wait "), "{resume}");
    let words = crate::readme_tour::words(&resume);
    assert_eq!(words[0], "genapi");
    // Run as printed: the profile is in it.
    let picked_up = genapi(&dir)
        .env("WORK_KEY", mock.key())
        .args(&words[1..])
        .output()
        .unwrap();
    assert_eq!(picked_up.status.code(), Some(0), "{}", text(&picked_up.stderr));
    assert!(dir.join("fox.jpg").is_file());
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "not submitted again");
}

/// GENAPI_TRUSTED_ORIGINS set beside a profile's service is not used (a
/// profile's key goes only where the profile says), and that is said where
/// the service is used and in `genapi config`, with how to trust the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trusted_origins_from_the_environment_beside_a_profile_are_said_unused() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("profile-unused-origins");
    config_file(
        &dir,
        &format!(
            "[profiles.lab]\nbase_url = \"{}\"\nkey_env = \"WORK_KEY\"\n",
            mock.base_url()
        ),
    );
    let run = genapi(&dir)
        .env("WORK_KEY", mock.key())
        .env("GENAPI_TRUSTED_ORIGINS", mock.trusted_origins().join(","))
        .args(["--profile", "lab", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "the polling host is not trusted: {said}");
    let advice = "GENAPI_TRUSTED_ORIGINS is not used: the service of profile lab is";
    assert!(
        said.contains(advice) && said.contains("config set trusted_origins"),
        "{said}"
    );
    let shown = ok(&genapi(&dir)
        .env("GENAPI_TRUSTED_ORIGINS", "https://x.example.com")
        .args(["--profile", "lab", "config"])
        .output()
        .unwrap());
    assert!(shown.contains(&format!("unused: {advice}")), "{shown}");
    // Without the variable, nothing is said.
    let shown = ok(&genapi(&dir).args(["--profile", "lab", "config"]).output().unwrap());
    assert!(!shown.contains("unused:"), "{shown}");
}

/// Whoever can change the config file decides where the key goes: a file
/// others can write, one owned by another user, or a link planted to such
/// a file is refused (exit 2, with what to run) before anything is sent,
/// and `genapi config` refuses it too. The key never reaches the address
/// the file names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_file_others_can_change_never_steers_the_key() {
    use std::os::unix::fs::MetadataExt as _;
    let planted = roomy_mock(50).await;
    let dir = Dir::new("profile-steered");
    let text_of = format!(
        "[profiles.work]\nbase_url = \"{}\"\ntrusted_origins = [\"{}\"]\nkey_env = \"WORK_KEY\"\n",
        planted.base_url(),
        planted.trusted_origins().join("\", \"")
    );
    let generate = |config: &std::path::Path| {
        genapi(&dir)
            .env("GENAPI_CONFIG", config)
            .env("WORK_KEY", planted.key())
            .args(["--profile", "work", "generate", "a fox", "-o", "fox.jpg"])
            .output()
            .unwrap()
    };
    let config = dir.join("config.toml");
    std::fs::write(&config, &text_of).unwrap();
    for mode in [0o666, 0o620, 0o602, 0o660] {
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(mode)).unwrap();
        let refused = generate(&config);
        let said = text(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "mode {mode:o}: {said}");
        assert!(said.contains(&format!("mode {mode:o}: others can change it")), "{said}");
        assert!(said.contains("chmod go-w"), "{said}");
        let shown = genapi(&dir)
            .env("GENAPI_CONFIG", &config)
            .arg("config")
            .output()
            .unwrap();
        assert_eq!(shown.status.code(), Some(2), "genapi config, mode {mode:o}");
    }
    assert_eq!(
        planted.count("POST", "/v1/gen-2-pro"),
        0,
        "the key reached the planted service"
    );

    // Owned by someone else (only root can make such a file here), read
    // directly or through a link planted in a shared sticky folder.
    let mine = std::fs::metadata(&config).unwrap().uid();
    if mine == 0 {
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::os::unix::fs::chown(&config, Some(4242), None).unwrap();
        let shared = dir.join("shared");
        std::fs::create_dir(&shared).unwrap();
        std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let link = shared.join("config.toml");
        std::os::unix::fs::symlink(&config, &link).unwrap();
        for path in [&config, &link] {
            let refused = generate(path);
            let said = text(&refused.stderr);
            assert_eq!(refused.status.code(), Some(2), "{said}");
            assert!(said.contains("owned by another user (uid 4242)"), "{said}");
        }
        assert_eq!(
            planted.count("POST", "/v1/gen-2-pro"),
            0,
            "the key reached the planted service"
        );
        std::os::unix::fs::chown(&config, Some(0), None).unwrap();
    }

    // The user's own file, writable by no one else: the profile is used.
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();
    ok(&generate(&config));
    assert_eq!(planted.count("POST", "/v1/gen-2-pro"), 1);
}

/// What could be the key is never said back: a key pasted where its file's
/// path belongs, or a number written for `key_env`.
#[test]
fn a_key_pasted_where_a_name_or_path_belongs_is_never_shown() {
    let dir = Dir::new("profile-pasted-key");
    config_file(
        &dir,
        "default_profile = \"work\"\n[profiles.work]\nbase_url = \"https://api.example.com\"\nkey_file = \"sk-PASTED-7731\"\n",
    );
    let said_by_each_command = || {
        [
            &["config"][..],
            &["config", "--json"],
            &["generate", "a fox", "-o", "fox.jpg"],
        ]
        .map(|args| {
            let run = genapi(&dir).args(args).output().unwrap();
            (args, text(&run.stdout) + &text(&run.stderr))
        })
    };
    for (args, said) in said_by_each_command() {
        assert!(said.contains("key_file names no file that exists"), "{args:?}: {said}");
        assert!(!said.contains("PASTED"), "{args:?}: {said}");
    }
    // An upper-case key where the variable's name belongs, and a key where
    // the service's address belongs.
    config_file(
        &dir,
        "default_profile = \"work\"\n[profiles.work]\nbase_url = \"sk-PASTED-7731\"\nkey_env = \"AKIAPASTED7731\"\n",
    );
    for (args, said) in said_by_each_command() {
        assert!(!said.contains("PASTED"), "{args:?}: {said}");
    }
    config_file(&dir, "[profiles.work]\nkey_env = 48151623\n");
    let run = genapi(&dir)
        .args(["--profile", "work", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(said.contains("invalid type"), "{said}");
    assert!(!said.contains("48151623"), "{said}");
}

/// A profile with a mistake stops only the commands that use it, naming it
/// and the line of the mistake: a command using another profile, `genapi
/// config`, `genapi models` and `genapi mock --help` keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_profile_stops_only_the_commands_that_use_it() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("profile-broken");
    config_file(
        &dir,
        &format!(
            "default_profile = \"a\"\n\n[profiles.a]\nbase_url = \"{}\"\ntrusted_origins = [\"{}\"]\nkey_env = \"WORK_KEY\"\n\n\
             # pasted by mistake\n[profiles.b]\nbase_url = \"https://b.example.com\"\napi_key = \"sk-LIVE-B-77\"\n",
            mock.base_url(),
            mock.trusted_origins().join("\", \"")
        ),
    );
    let run = genapi(&dir)
        .env("WORK_KEY", mock.key())
        .args(["generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    ok(&run);
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);
    let shown = ok(&genapi(&dir).args(["config", "--json"]).output().unwrap());
    let shown: Value = serde_json::from_str(shown.trim()).unwrap();
    assert_eq!(shown["profile"]["value"], "a");
    ok(&genapi(&dir).args(["models"]).output().unwrap());
    ok(&genapi(&dir).args(["mock", "--help"]).output().unwrap());

    for command in [vec!["generate", "a fox", "-o", "b.jpg"], vec!["config"]] {
        let run = genapi(&dir)
            .env("WORK_KEY", mock.key())
            .args(["--profile", "b"])
            .args(&command)
            .output()
            .unwrap();
        let said = text(&run.stdout) + &text(&run.stderr);
        let expected = if command[0] == "config" { 0 } else { 2 };
        assert_eq!(run.status.code(), Some(expected), "{command:?}: {said}");
        assert!(
            said.contains("line 11: profile b: a key is never written"),
            "{command:?}: {said}"
        );
        assert!(!said.contains("sk-LIVE-B-77"), "{command:?}: {said}");
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1, "nothing sent with profile b");
}

/// A profile that names a service since gone (a `genapi mock` stopped):
/// the failure says the address is the profile's, not the command's.
#[test]
fn a_service_out_of_reach_is_said_with_where_its_address_came_from() {
    let dir = Dir::new("profiles-out-of-reach");
    // A port nothing listens on, nor can while the test runs.
    let refusing = genapi_test_common::RefusingPort::new();
    let port = refusing.address.port();
    config_file(
        &dir,
        &format!("[profiles.default]\nbase_url = \"http://127.0.0.1:{port}\"\nkey_env = \"WORK_KEY\"\n"),
    );
    let note = format!("the base URL http://127.0.0.1:{port} is from profile default");
    let run = genapi(&dir)
        .env("WORK_KEY", "k")
        .args(["generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(9), "{stderr}");
    assert!(stderr.contains(&note), "{stderr}");
    // Picking a task up there says so too: `get` after its task's report,
    // `wait` with the failed poll it goes on from until --timeout (and
    // again in the error that quotes that poll when the time is up).
    let id = "2f6c1a0e-6d1b-4c6e-9a43-0d8e5b7e2a91";
    // `get` ends at its one failed poll, whatever its timeout; `wait` polls
    // until its timeout, long enough for a process on a tenth of a core to
    // start and poll once.
    for (command, timeout, ends, times) in [("get", "600", Some(9), 1), ("wait", "20", Some(8), 2)] {
        let run = genapi(&dir)
            .env("WORK_KEY", "k")
            .args([command, id, "--timeout", timeout])
            .output()
            .unwrap();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), ends, "{command}: {stderr}");
        assert_eq!(stderr.matches(&note).count(), times, "{command}: {stderr}");
    }
}

/// A service that was reached and lost the answer is no address to
/// check: the note is not given, only what the failure itself says (the
/// task may exist).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_reached_is_not_sent_to_the_settings() {
    let mock = roomy_mock(50).await;
    mock.inject(genapi_mock::Fault::on("/v1/gen-2-pro", genapi_mock::FaultKind::LoseAnswer).method("POST"));
    let dir = Dir::new("profiles-reached");
    let run = crate::common::genapi(&dir, &mock)
        .args(["generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(9), "{stderr}");
    assert!(!stderr.contains("the base URL"), "{stderr}");
}

/// A profile whose name holds a control character (a line break, a NUL
/// the file may spell) is never used: no printed command could name it,
/// and the resume line of a paid task must. Nothing is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_profile_named_with_a_control_character_is_refused_before_anything_is_sent() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("profile-control-name");
    for (default, chosen) in [("lab\\neu", None), ("pr\\u0000od", None), ("x", Some("lab\neu"))] {
        let profile = |name: &str| {
            format!(
                "[profiles.\"{name}\"]\nbase_url = \"{}\"\ntrusted_origins = [\"{}\"]\nkey_env = \"WORK_KEY\"\n\n",
                mock.base_url(),
                mock.trusted_origins().join("\", \"")
            )
        };
        config_file(
            &dir,
            &format!(
                "default_profile = \"{default}\"\n\n{}{}{}",
                profile("x"),
                profile("lab\\neu"),
                profile("pr\\u0000od")
            ),
        );
        let mut command = genapi(&dir);
        command.env("WORK_KEY", mock.key());
        if let Some(name) = chosen {
            command.args(["--profile", name]);
        }
        let run = command.args(["generate", "a fox", "-o", "fox.jpg"]).output().unwrap();
        let stderr = text(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{default}: {stderr}");
        assert!(stderr.contains("holds a control character"), "{default}: {stderr}");
        // Said on one line, with no control character of the name in it.
        assert_eq!(stderr.trim_end().lines().count(), 1, "{default}: {stderr}");
        assert!(
            !stderr.trim_end().chars().any(char::is_control),
            "{default}: {stderr:?}"
        );
    }
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 0, "nothing was sent");
    // Only the commands that would use it stop: the config is shown.
    let shown = genapi(&dir).args(["--profile", "lab\neu", "config"]).output().unwrap();
    assert_eq!(shown.status.code(), Some(0), "{}", text(&shown.stderr));
    assert!(
        text(&shown.stdout).contains("holds a control character"),
        "{}",
        text(&shown.stdout)
    );
}

/// A program (`Client::from_env`, here over the same variables) and the
/// command read one configuration: the profile `GENAPI_PROFILE` names, its
/// service and its key, and nothing reaches the default profile's service.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_program_and_the_command_use_the_same_profile() {
    let work = roomy_mock(50).await;
    let lab = roomy_mock(50).await;
    let dir = Dir::new("profiles-shared");
    let listed = |mock: &genapi_mock::MockService| {
        let origins: Vec<String> = mock.trusted_origins().iter().map(|o| format!("{o:?}")).collect();
        format!(
            "base_url = \"{}\"\ntrusted_origins = [{}]\n",
            mock.base_url(),
            origins.join(", ")
        )
    };
    config_file(
        &dir,
        &format!(
            "default_profile = \"work\"\n\n[profiles.work]\n{}key_env = \"WORK_KEY\"\n\n[profiles.lab]\n{}key_env = \
             \"LAB_GENAPI_KEY\"\n",
            listed(&work),
            listed(&lab)
        ),
    );
    let run = genapi(&dir)
        .env("GENAPI_PROFILE", "lab")
        .env("LAB_GENAPI_KEY", lab.key())
        .args(["generate", "a fox", "--json"])
        .output()
        .unwrap();
    ok(&run);
    let config = dir.join("config/genapi/config.toml").display().to_string();
    let variables = |name: &str| match name {
        "GENAPI_CONFIG" => Some(config.clone()),
        "GENAPI_PROFILE" => Some("lab".to_string()),
        "LAB_GENAPI_KEY" => Some(lab.key().to_string()),
        _ => None,
    };
    let client = genapi::ClientBuilder::from_variables(variables)
        .unwrap()
        .build()
        .unwrap();
    let task = client
        .submit(genapi::api::types::Gen2ProRequest::builder().prompt("a fox"))
        .await
        .unwrap();
    assert!(!task.id().is_empty());
    assert_eq!(lab.count("POST", "/v1/gen-2-pro"), 2, "the command's and the program's");
    assert_eq!(work.requests().len(), 0, "the default profile's service saw nothing");
}
