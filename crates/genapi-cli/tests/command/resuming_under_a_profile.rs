//! A task submitted under a profile is picked up again under that profile:
//! the printed `wait` names it, so the key that goes to the task's polling
//! host is that profile's, never the default one's; a task of a service the
//! environment named is picked up at that service; and a key the service
//! refuses is named by where it came from.

use std::os::unix::fs::PermissionsExt as _;

use crate::cli::text;
use crate::common::{genapi_alone, roomy_mock, Dir};
use crate::readme_tour::words;

/// A config file whose default profile holds a wrong key and whose
/// profile `m` holds the mock's, kept in a file only its owner reads.
fn two_profiles(dir: &Dir, mock: &genapi_mock::MockService, key_of_m: &str) {
    let folder = dir.join("config/genapi");
    std::fs::create_dir_all(&folder).unwrap();
    let key_file = folder.join("m.key");
    std::fs::write(&key_file, key_of_m).unwrap();
    std::fs::set_permissions(&key_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let origins: Vec<String> = mock.trusted_origins().iter().map(|o| format!("{o:?}")).collect();
    let service = format!(
        "base_url = \"{}\"\ntrusted_origins = [{}]\n",
        mock.base_url(),
        origins.join(", ")
    );
    std::fs::write(
        folder.join("config.toml"),
        format!(
            "[profiles.default]\n{service}key_env = \"DEFAULT_GENAPI_KEY\"\n\n[profiles.m]\n{service}key_file = {:?}\n",
            key_file.display().to_string()
        ),
    )
    .unwrap();
}

fn genapi(dir: &Dir) -> std::process::Command {
    let mut command = genapi_alone(dir);
    command.env("DEFAULT_GENAPI_KEY", "the-default-profiles-key");
    command
}

/// The `wait` a successful `submit` printed.
fn printed_wait(submitted: &std::process::Output) -> String {
    let stderr = text(&submitted.stderr);
    assert_eq!(submitted.status.code(), Some(0), "{stderr}");
    stderr
        .lines()
        .find_map(|line| line.strip_prefix("wait for it with: "))
        .unwrap_or_else(|| panic!("no wait command printed: {stderr}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_wait_names_the_profile_and_runs_as_printed() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("resuming-under-a-profile");
    two_profiles(&dir, &mock, mock.key());
    let submitted = genapi(&dir)
        .args(["--profile", "m", "submit", "a fox"])
        .output()
        .unwrap();
    let line = printed_wait(&submitted);
    let line = line.as_str();
    assert!(line.starts_with("genapi --profile m wait "), "{line}");
    // The command as a shell would run it.
    let printed = words(line);
    assert_eq!(printed[0], "genapi");
    let waited = genapi(&dir).args(&printed[1..]).output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", text(&waited.stderr));
    assert!(text(&waited.stdout).contains("saved "), "{}", text(&waited.stdout));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_is_named_by_its_profile_and_file() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("refused-profile-key");
    two_profiles(&dir, &mock, "not-the-mocks-key");
    let run = genapi(&dir)
        .env("HOME", &dir.0)
        .args(["--profile", "m", "generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_ne!(run.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("forbidden (403): check the key of profile m (key_file "),
        "{stderr}"
    );
    // Named from the home folder: these words reach results files and
    // galleries, and the home folder's path names its user.
    assert!(stderr.contains("(key_file ~/config/genapi/m.key)"), "{stderr}");
    assert!(!stderr.contains(&dir.0.display().to_string()), "{stderr}");
    assert!(!stderr.contains("GENAPI_API_KEY"), "{stderr}");
}

/// A run whose service the environment named (overriding the profile's)
/// prints a `wait` that goes to that service again when pasted in a shell
/// that has only the key: it sets the environment's service variables, which
/// override the profile's service, which never saw the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_printed_wait_of_a_service_the_environment_named_goes_to_that_service() {
    let profiles_service = roomy_mock(50).await;
    let environments_service = roomy_mock(50).await;
    let dir = Dir::new("resuming-under-the-environment");
    two_profiles(&dir, &profiles_service, profiles_service.key());
    let origins: Vec<String> = environments_service
        .trusted_origins()
        .iter()
        .map(|o| o.to_string())
        .collect();
    let submitted = genapi(&dir)
        .env("GENAPI_PROFILE", "m")
        .env("GENAPI_API_KEY", environments_service.key())
        .env("GENAPI_BASE_URL", environments_service.base_url())
        .env("GENAPI_TRUSTED_ORIGINS", origins.join(","))
        .args(["submit", "a fox"])
        .output()
        .unwrap();
    let line = printed_wait(&submitted);
    let line = line.as_str();
    assert!(line.starts_with("GENAPI_BASE_URL="), "{line}");
    assert!(
        line.contains(" genapi --profile m wait "),
        "the profile still gives its out folder: {line}"
    );
    assert!(
        !line.contains(environments_service.key()),
        "the key is never printed: {line}"
    );
    // Pasted where the profile is still the default and only the key is set.
    let printed = words(line);
    let (assignments, command) = printed.split_at(printed.iter().position(|w| w == "genapi").unwrap());
    let mut waited = genapi(&dir);
    waited
        .env("GENAPI_PROFILE", "m")
        .env("GENAPI_API_KEY", environments_service.key());
    for assignment in assignments {
        let (name, value) = assignment.split_once('=').unwrap();
        waited.env(name, value);
    }
    let waited = waited.args(&command[1..]).output().unwrap();
    assert_eq!(waited.status.code(), Some(0), "{}", text(&waited.stderr));
    assert!(text(&waited.stdout).contains("saved "), "{}", text(&waited.stdout));
    assert_eq!(
        profiles_service.stats().polls,
        0,
        "the profile's service never heard of the task"
    );
}

/// A profile's printed `wait`, pasted where the environment holds a key
/// alone, is refused before anything is sent, saying that the environment
/// overrides the profile and how to give the profile its service back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_the_environment_over_a_profile_says_to_unset_it() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("resuming-with-a-stray-key");
    two_profiles(&dir, &mock, mock.key());
    let run = genapi(&dir)
        .env("GENAPI_API_KEY", "some-other-key")
        .args(["--profile", "m", "wait", "--", "t-1"])
        .output()
        .unwrap();
    let stderr = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(
            "GENAPI_API_KEY is set but GENAPI_BASE_URL is not: set it too, or unset GENAPI_API_KEY to use the \
             service of profile m"
        ),
        "{stderr}"
    );
    assert_eq!(mock.stats().polls, 0);
}
