//! `genapi login` and `genapi config set`: a profile made or changed in the
//! config file, which is made the user's alone, keeps what else it holds,
//! and never holds the key.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt as _;
use std::process::{Command, Output, Stdio};

use crate::cli::text;
use crate::common::{genapi_alone, roomy_mock, Dir};

const KEY: &str = "sk-LOGIN-5150-secret";

fn config_path(dir: &Dir) -> std::path::PathBuf {
    dir.join("config/genapi/config.toml")
}

fn mode(path: &std::path::Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// `genapi ARGS` with `input` on its standard input (a pipe, not a terminal).
fn with_input(command: &mut Command, input: &str) -> Output {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A command that refuses before reading its input closes the pipe
    // first: what it then says is the test's to read, not the write's.
    if let Err(error) = child.stdin.take().unwrap().write_all(input.as_bytes()) {
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe, "{error}");
    }
    child.wait_with_output().unwrap()
}

fn ok(run: &Output) -> String {
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    text(&run.stdout) + &text(&run.stderr)
}

/// The key read from stdin lands in a file only the user can read, named by
/// the profile of a config file made the user's alone; it is never printed
/// nor written in the config file; the profile then works. A profile for a
/// service on this machine (a mock, which ends while its address stays) is
/// not made the default: a command without --profile still uses the
/// built-in mock.
/// Without --profile, a first profile for a service on this machine is not
/// named `default` (which every command uses, whatever `default_profile`
/// says) but `local`, by `login` and `config set` alike: a command without
/// --profile still uses the built-in mock once that mock has ended.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_profile_for_a_service_on_this_machine_is_named_local_not_default() {
    let mock = roomy_mock(50).await;
    for (name, login) in [("login-local", true), ("config-set-local", false)] {
        let dir = Dir::new(name);
        let said = if login {
            ok(&with_input(
                genapi_alone(&dir).args(["login", "--base-url", mock.base_url()]),
                &format!("{}\n", mock.key()),
            ))
        } else {
            ok(&genapi_alone(&dir)
                .args(["config", "set", "base_url", mock.base_url()])
                .output()
                .unwrap())
        };
        assert!(
            said.contains("profile local saved") && said.contains("--profile local"),
            "{said}"
        );
        let written = std::fs::read_to_string(config_path(&dir)).unwrap();
        assert!(
            written.contains("[profiles.local]") && !written.contains("[profiles.default]"),
            "{written}"
        );
        assert!(!written.contains("default_profile"), "{written}");
        // The key login kept is named after the profile it belongs to.
        if login {
            let keys = config_path(&dir).parent().unwrap().join("keys");
            assert!(keys.join("local.key").is_file(), "{written}");
            assert!(!keys.join("default.key").exists(), "{written}");
        }
    }
}

/// After `local` was made, a setting that names no profile has none to go
/// to: it is refused, naming the profiles, rather than made into a new
/// `default` profile every command would use from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setting_naming_no_profile_is_refused_when_no_profile_is_used_without_one() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("set-after-local");
    ok(&genapi_alone(&dir)
        .args(["config", "set", "base_url", mock.base_url()])
        .output()
        .unwrap());
    let before = std::fs::read_to_string(config_path(&dir)).unwrap();
    let refused = genapi_alone(&dir)
        .args(["config", "set", "model", "gen-2-pro"])
        .output()
        .unwrap();
    let said = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{said}");
    assert!(
        said.contains("which profile?")
            && said.contains("profile local")
            && said.contains("`genapi --profile local config set …`"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(config_path(&dir)).unwrap(),
        before,
        "nothing written"
    );
    // Named, it goes where it was meant to.
    ok(&genapi_alone(&dir)
        .args(["--profile", "local", "config", "set", "model", "gen-2-pro"])
        .output()
        .unwrap());
    let written = std::fs::read_to_string(config_path(&dir)).unwrap();
    assert!(
        written.contains("model = \"gen-2-pro\"") && !written.contains("[profiles.default]"),
        "{written}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn login_from_stdin_makes_a_private_config_file_that_refers_to_the_key() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("login-stdin");
    let key = mock.key();
    let said = ok(&with_input(
        genapi_alone(&dir).args(["login", "--profile", "work", "--base-url", mock.base_url()]),
        &format!("  {key}  \n"),
    ));
    assert!(!said.contains(key), "{said}");
    assert!(
        said.contains("it is not made the default profile, since its service is on this machine")
            && said.contains("--profile work"),
        "{said}"
    );
    let config = config_path(&dir);
    assert_eq!(mode(&config), 0o600);
    assert_eq!(mode(config.parent().unwrap()), 0o700);
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(!written.contains(key), "{written}");
    assert!(
        written.contains("[profiles.work]") && !written.contains("default_profile"),
        "{written}"
    );
    let key_file = config.parent().unwrap().join("keys/work.key");
    assert_eq!(mode(&key_file), 0o600);
    assert_eq!(std::fs::read_to_string(&key_file).unwrap().trim(), key, "trimmed");

    // The profile is used as written when named: its service, its key.
    ok(&genapi_alone(&dir)
        .args([
            "--profile",
            "work",
            "config",
            "set",
            "trusted_origins",
            &mock.trusted_origins().join(","),
        ])
        .output()
        .unwrap());
    ok(&genapi_alone(&dir)
        .args(["--profile", "work", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap());
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);
    // Not named, it is not used: the built-in mock is.
    let builtin = ok(&genapi_alone(&dir)
        .args(["generate", "a fox", "-o", "fox-2.jpg"])
        .output()
        .unwrap());
    assert!(builtin.contains("using the built-in mock"), "{builtin}");
    assert_eq!(mock.count("POST", "/v1/gen-2-pro"), 1);
}

/// Logging into an existing file changes only its profile: other profiles,
/// comments and the default stay; `config set` changes one field, and a
/// key given where a name belongs is refused without being shown, the file
/// left as it was.
#[test]
fn login_and_config_set_keep_the_rest_of_the_file() {
    let dir = Dir::new("login-existing");
    let config = config_path(&dir);
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    let before = "# my services\ndefault_profile = \"lab\"\n\n[profiles.lab]\nbase_url = \"https://lab.example.com\" # the lab\nkey_env = \"LAB_KEY\"\n";
    std::fs::write(&config, before).unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o644)).unwrap();

    let said = ok(&with_input(
        genapi_alone(&dir).args(["login", "--profile", "work", "--base-url", "https://api.example.com"]),
        KEY,
    ));
    assert!(!said.contains(KEY) && !said.contains("default profile"), "{said}");
    let after = std::fs::read_to_string(&config).unwrap();
    assert!(
        after.starts_with(before),
        "the lab profile and the comments stay:\n{after}"
    );
    assert!(after.contains("[profiles.work]\n"), "{after}");
    assert!(!after.contains(KEY), "{after}");
    assert_eq!(mode(&config), 0o600);

    // One field of the default profile.
    ok(&genapi_alone(&dir)
        .args(["config", "set", "model", "gen-2-flex"])
        .output()
        .unwrap());
    let set = std::fs::read_to_string(&config).unwrap();
    assert_eq!(
        set,
        after.replace(
            "key_env = \"LAB_KEY\"\n",
            "key_env = \"LAB_KEY\"\nmodel = \"gen-2-flex\"\n"
        ),
        "only the field is added"
    );
    let shown = ok(&genapi_alone(&dir).args(["config"]).output().unwrap());
    assert!(shown.contains("model: gen-2-flex (from profile lab)"), "{shown}");

    // A key where the variable's name belongs: refused, not shown, the file kept.
    let refused = genapi_alone(&dir)
        .args(["config", "set", "key_env", "sk-live-PASTED-1"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = text(&refused.stdout) + &text(&refused.stderr);
    assert!(
        said.contains("never the key itself") && !said.contains("PASTED"),
        "{said}"
    );
    assert_eq!(std::fs::read_to_string(&config).unwrap(), set);

    // Naming the key by its variable replaces the file that held it.
    let said = ok(&genapi_alone(&dir)
        .args(["login", "--profile", "work", "--key-env", "WORK_KEY"])
        .output()
        .unwrap());
    assert!(said.contains(": the key in the variable WORK_KEY\n"), "{said}");
    let work = std::fs::read_to_string(&config).unwrap();
    let work = &work[work.find("[profiles.work]").unwrap()..];
    assert!(
        work.contains("key_env = \"WORK_KEY\"") && !work.contains("key_file"),
        "{work}"
    );
}

/// Ctrl-C while the key is asked for ends the command, saves nothing, and
/// leaves the terminal echoing what is typed, as it was.
#[test]
fn ctrl_c_at_the_key_prompt_leaves_the_terminal_as_it_was() {
    let dir = Dir::new("login-ctrl-c");
    let mut command = genapi_alone(&dir);
    command.args(["--profile", "work", "login", "--base-url", "https://api.example.com"]);
    let mut terminal = crate::terminal::Terminal::spawn(command);
    terminal.wait_for("(not shown)", std::time::Duration::from_secs(60));
    terminal.wait_until("echo is off", std::time::Duration::from_secs(10), || !terminal.echoes());
    terminal.ctrl_c();
    let (code, screen, echoing) = terminal.finish_echoing(std::time::Duration::from_secs(60));
    assert_eq!(code, Some(130), "{screen}");
    assert!(echoing, "echo was left off: {screen}");
    assert!(!config_path(&dir).exists(), "nothing is saved");
}

/// A key for a profile without a service is refused before it is asked
/// for or anything is written, saying to give `--base-url`; a profile that
/// gives a key without its service says what to run, and `genapi config`
/// says why a profile named `default` was chosen.
#[test]
fn a_key_without_its_service_is_refused_with_what_to_do() {
    let dir = Dir::new("login-without-service");
    let refused = with_input(genapi_alone(&dir).args(["login"]), KEY);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused.stderr));
    let said = text(&refused.stderr);
    assert!(
        said.contains("--base-url URL") && said.contains("nothing was written"),
        "{said}"
    );
    assert!(!config_path(&dir).exists(), "nothing written");
    assert!(!config_path(&dir).with_file_name("keys").exists(), "no key kept");

    // A profile made by hand with a key and no service.
    let config = config_path(&dir);
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, "[profiles.default]\nkey_env = \"HALF_KEY\"\n").unwrap();
    std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o600)).unwrap();
    let run = genapi_alone(&dir)
        .env("HALF_KEY", KEY)
        .args(["generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    assert!(
        said.contains("run `genapi --profile default config set base_url URL`, or pass --mock"),
        "{said}"
    );
    let shown = ok(&genapi_alone(&dir)
        .env("HALF_KEY", KEY)
        .args(["config"])
        .output()
        .unwrap());
    assert!(
        shown.contains("profile: default (from its name: the config file has no default_profile)"),
        "{shown}"
    );
}

/// A config file named by `GENAPI_CONFIG` in a folder of the user's that
/// others may enter (a home folder) is written there and the folder is left
/// as it is; in one others may change, where they could replace the file,
/// nothing is written and the refusal says what to run.
#[test]
fn a_config_file_goes_only_in_a_folder_no_one_else_may_change_and_the_folder_is_left_as_it_is() {
    let dir = Dir::new("config-shared-folder");
    for (folder, folder_mode) in [("home", 0o755), ("team", 0o775)] {
        let folder = dir.join(folder);
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(folder_mode)).unwrap();
        let config = folder.join("genapi.toml");
        let run = genapi_alone(&dir)
            .env("GENAPI_CONFIG", &config)
            .args(["config", "set", "model", "gen-2-flex"])
            .output()
            .unwrap();
        assert_eq!(mode(&folder), folder_mode, "the folder's mode is never changed");
        if folder_mode == 0o755 {
            ok(&run);
            assert_eq!(mode(&config), 0o600);
            assert!(std::fs::read_to_string(&config)
                .unwrap()
                .contains("model = \"gen-2-flex\""));
        } else {
            let said = text(&run.stderr);
            assert_eq!(run.status.code(), Some(1), "{said}");
            assert!(
                said.contains(&folder.display().to_string()) && said.contains("chmod go-w"),
                "{said}"
            );
            assert!(!config.exists(), "nothing written");
        }
    }
    // A bare name's folder is named whole, not as `.`: the `chmod` works
    // from anywhere.
    let team = std::fs::canonicalize(dir.join("team")).unwrap();
    let run = genapi_alone(&dir)
        .current_dir(&team)
        .env("GENAPI_CONFIG", "genapi.toml")
        .args(["config", "set", "model", "gen-2-flex"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert!(said.contains(&format!("chmod go-w {}", team.display())), "{said}");
    assert!(!team.join("genapi.toml").exists(), "nothing written");
}

/// `genapi login` with its config file in a folder that is refused (one
/// others may change, or a link) stops before the key is read or kept:
/// no `keys/` folder and no key file are left behind in it, or where the
/// link leads.
#[test]
fn login_into_a_refused_folder_keeps_no_key_there() {
    let dir = Dir::new("login-refused-folder");
    let open = dir.join("team");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o775)).unwrap();
    let real = dir.join("real");
    std::fs::create_dir(&real).unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
    let linked = dir.join("linked");
    std::os::unix::fs::symlink(&real, &linked).unwrap();
    for (folder, kept_in) in [(&open, &open), (&linked, &real)] {
        let run = with_input(
            genapi_alone(&dir)
                .env("GENAPI_CONFIG", folder.join("genapi.toml"))
                .args(["login", "--base-url", "https://api.example.com"]),
            KEY,
        );
        let said = text(&run.stderr);
        assert_eq!(run.status.code(), Some(1), "{said}");
        assert!(said.contains(&folder.display().to_string()), "{said}");
        assert_eq!(
            std::fs::read_dir(kept_in).unwrap().count(),
            0,
            "nothing is written in {}: {said}",
            kept_in.display()
        );
    }
}
