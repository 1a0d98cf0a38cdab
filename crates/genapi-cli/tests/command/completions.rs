//! Shell completions offer what the user may type there: model names where a
//! model is asked for, the config file's profiles (read when completing)
//! after --profile, and never a hidden option or command. Bash's own
//! completion function is run on partial words, and so is fish's `complete
//! -C`; zsh loads its script into its completion system, and the script is
//! checked to name the same sources. zsh and fish are not on every machine:
//! CI installs them, elsewhere their parts are skipped, saying so.

use std::path::Path;

use serde_json::Value;

use crate::cli::text;
use crate::common::{self, genapi_alone, Dir};

/// The script of `genapi completions SHELL`.
fn script(dir: &Dir, shell: &str) -> String {
    let run = genapi_alone(dir).args(["completions", shell]).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{}", text(&run.stderr));
    text(&run.stdout)
}

/// The candidates bash offers for `words` (the last one being completed),
/// by the function the script registers for genapi, with this build's
/// genapi first on PATH and `config` as the config file.
fn bash_offers(dir: &Dir, config: &Path, words: &[&str]) -> Vec<String> {
    let file = dir.join("genapi.bash");
    std::fs::write(&file, script(dir, "bash")).unwrap();
    let run = shell("bash", dir, config)
        .args(["--norc", "-c"])
        .arg(
            r#"source "$0"
COMP_WORDS=("$@")
COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
COMP_LINE="${COMP_WORDS[*]}"
COMP_POINT=${#COMP_LINE}
function=$(complete -p genapi | sed -E 's/.* -F ([^ ]+) .*/\1/')
"$function" genapi "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}""#,
        )
        .arg(&file)
        .args(words)
        .output()
        .unwrap();
    assert!(run.status.success(), "{words:?}: {}", text(&run.stderr));
    text(&run.stdout)
        .lines()
        .filter(|line| !line.is_empty())
        .map(str::to_string)
        .collect()
}

/// What fish offers to complete `line` (up to the cursor at its end), its
/// script loaded as from a completion folder, with this build's genapi
/// first on PATH and `config` as the config file.
fn fish_offers(fish: &Path, dir: &Dir, config: &Path, line: &str) -> Vec<String> {
    let file = dir.join("genapi.fish");
    std::fs::write(&file, script(dir, "fish")).unwrap();
    let run = shell(fish, dir, config)
        .args(["--no-config", "-c", "source $argv[1]; complete -C $argv[2]"])
        .arg(&file)
        .arg(line)
        .output()
        .unwrap();
    assert!(run.status.success(), "{line:?}: {}", text(&run.stderr));
    // Each line is a candidate, then a tab and its description.
    text(&run.stdout)
        .lines()
        .filter_map(|line| line.split('\t').next())
        .filter(|candidate| !candidate.is_empty())
        .map(str::to_string)
        .collect()
}

/// The shell `program`, run in `dir` with this build's genapi first on
/// PATH, `config` as the config file and the folders of `dir`.
fn shell(program: impl AsRef<std::ffi::OsStr>, dir: &Dir, config: &Path) -> std::process::Command {
    let genapi = Path::new(env!("CARGO_BIN_EXE_genapi"));
    let path = format!(
        "{}:{}",
        genapi.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut command = std::process::Command::new(program);
    command
        .env("PATH", path)
        .env("GENAPI_CONFIG", config)
        .env("XDG_CONFIG_HOME", dir.join("config"))
        .env("XDG_CACHE_HOME", dir.join("cache"))
        .current_dir(&dir.0);
    command
}

/// The models `genapi models --json` lists.
fn models(dir: &Dir) -> Vec<String> {
    let run = genapi_alone(dir).args(["models", "--json"]).output().unwrap();
    text(&run.stdout)
        .lines()
        .map(|line| {
            serde_json::from_str::<Value>(line).unwrap()["name"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect()
}

fn config_with_profiles(dir: &Dir) -> std::path::PathBuf {
    let config = dir.join("profiles.toml");
    std::fs::write(
        &config,
        "default_profile = \"work\"\n\n[profiles.work]\nmodel = \"gen-2-flex\"\n\n[profiles.lab]\n",
    )
    .unwrap();
    config
}

#[test]
fn bash_completes_models_profiles_and_no_hidden_option() {
    let dir = Dir::new("completions-bash");
    let config = config_with_profiles(&dir);
    let models = models(&dir);
    assert!(models.len() > 5, "{models:?}");

    let offered = bash_offers(&dir, &config, &["genapi", "generate", "-m", "gen-2-"]);
    assert!(offered.contains(&"gen-2-pro".to_string()), "{offered:?}");
    let expected: Vec<&String> = models.iter().filter(|name| name.starts_with("gen-2-")).collect();
    assert_eq!(
        offered.iter().collect::<Vec<_>>(),
        expected,
        "the models of that prefix"
    );
    for command in ["submit", "grid"] {
        let offered = bash_offers(&dir, &config, &["genapi", command, "--model", "gen-tools/v"]);
        assert_eq!(offered, ["gen-tools/vto-v1", "gen-tools/vto-v2"], "{command}");
    }

    let offered = bash_offers(&dir, &config, &["genapi", "generate", "--profile", ""]);
    assert_eq!(offered, ["lab", "work"], "the config file's profiles");
    let offered = bash_offers(&dir, &config, &["genapi", "config", "--profile", "w"]);
    assert_eq!(offered, ["work"]);

    // Names that are shell code are never run, and never offered.
    let hostile = dir.join("hostile.toml");
    std::fs::write(
        &hostile,
        "[profiles.work]\n\n[profiles.\"$(touch${IFS}PWNED)\"]\n\n[profiles.\"`touch TICKED`\"]\n\n\
         [profiles.\"a b\"]\n",
    )
    .unwrap();
    for typed in ["", "$", "`", "w"] {
        let offered = bash_offers(&dir, &hostile, &["genapi", "generate", "--profile", typed]);
        for planted in ["PWNED", "TICKED"] {
            assert!(!dir.join(planted).exists(), "a profile's name was run as code");
        }
        let expected: &[&str] = if matches!(typed, "" | "w") { &["work"] } else { &[] };
        assert_eq!(offered, expected, "after --profile {typed:?}");
    }

    let offered = bash_offers(&dir, &config, &["genapi", "models", ""]);
    for model in &models {
        assert!(offered.contains(model), "{model} not offered: {offered:?}");
    }

    let offered = bash_offers(&dir, &config, &["genapi", "generate", "--li"]);
    assert!(offered.is_empty(), "generate has no --li… option: {offered:?}");
    // The global options models does not use are hidden there, and so is
    // the command the scripts run for profiles.
    let offered = bash_offers(&dir, &config, &["genapi", "models", "--"]);
    assert_eq!(offered, ["--json", "--help"], "{offered:?}");
    let offered = bash_offers(&dir, &config, &["genapi", "__"]);
    assert!(offered.is_empty(), "{offered:?}");
}

#[test]
fn fish_completes_models_and_profiles_and_runs_no_profile_name() {
    let Some(fish) = common::installed(&["fish"], "fish", "fish") else {
        return;
    };
    let dir = Dir::new("completions-fish");
    let config = config_with_profiles(&dir);
    for line in ["genapi generate --profile ", "genapi --profile "] {
        let offered = fish_offers(&fish, &dir, &config, line);
        assert_eq!(offered, ["lab", "work"], "the config file's profiles after {line:?}");
    }
    let offered = fish_offers(&fish, &dir, &config, "genapi submit --profile=w");
    assert_eq!(offered, ["--profile=work"]);
    let models = models(&dir);
    let mut offered = fish_offers(&fish, &dir, &config, "genapi generate --model gen-2-");
    // fish sorts what it offers.
    offered.sort();
    let mut expected: Vec<&String> = models.iter().filter(|name| name.starts_with("gen-2-")).collect();
    expected.sort();
    assert_eq!(
        offered.iter().collect::<Vec<_>>(),
        expected,
        "the models of that prefix"
    );
    let offered = fish_offers(&fish, &dir, &config, "genapi models --");
    assert_eq!(offered, ["--help", "--json"], "{offered:?}");

    // Names that are shell code are never run.
    let hostile = dir.join("hostile.toml");
    std::fs::write(
        &hostile,
        "[profiles.work]\n\n[profiles.\"$(touch PWNED)\"]\n\n[profiles.\"(touch FISHED)\"]\n",
    )
    .unwrap();
    fish_offers(&fish, &dir, &hostile, "genapi generate --profile ");
    for planted in ["PWNED", "FISHED"] {
        assert!(!dir.join(planted).exists(), "a profile's name was run as code");
    }
}

/// zsh binds the script to genapi when it finds it on its function path,
/// and the script's helper offers the config file's profiles (`compadd`,
/// which only a completion may call, is stood in for to print what it is
/// given).
#[test]
fn zsh_loads_its_script_and_offers_the_profiles() {
    let Some(zsh) = common::installed(&["zsh"], "zsh", "zsh") else {
        return;
    };
    let dir = Dir::new("completions-zsh");
    let config = config_with_profiles(&dir);
    let folder = dir.join("functions");
    std::fs::create_dir_all(&folder).unwrap();
    std::fs::write(folder.join("_genapi"), script(&dir, "zsh")).unwrap();
    let run = shell(zsh, &dir, &config)
        .args([
            "-f",
            "-c",
            r#"fpath=($1 $fpath); autoload -Uz compinit && compinit -u -d $2 || exit 1
print -r -- $_comps[genapi]
{ _genapi } 2>/dev/null
compadd() { [[ $1 == -a ]] && print -rl -- ${(P)2} }
_genapi_profiles"#,
        ])
        .arg("zsh")
        .arg(&folder)
        .arg(dir.join("zcompdump"))
        .output()
        .unwrap();
    let said = text(&run.stdout);
    assert!(run.status.success(), "{said}{}", text(&run.stderr));
    assert_eq!(said.lines().collect::<Vec<_>>(), ["_genapi", "lab", "work"], "{said}");
}

#[test]
fn zsh_and_fish_complete_the_same_models_and_profiles() {
    let dir = Dir::new("completions-zsh-fish");
    let helper = "genapi __complete profiles";
    let zsh = script(&dir, "zsh");
    let fish = script(&dir, "fish");
    let lines = |script: &str, marker: &str| -> Vec<String> {
        script
            .lines()
            .filter(|line| line.contains(marker))
            .map(str::to_string)
            .collect()
    };
    assert!(zsh.contains(helper), "{zsh}");
    let profile_specs = lines(&zsh, "'--profile=[");
    assert!(!profile_specs.is_empty());
    for spec in profile_specs {
        assert!(spec.ends_with(":_genapi_profiles' \\"), "{spec}");
    }
    let profile_lines = lines(&fish, " -l profile ");
    assert!(!profile_lines.is_empty());
    for line in profile_lines {
        assert!(line.ends_with(&format!("-a \"({helper} 2>/dev/null)\"")), "{line}");
    }
    // The models, each with its summary, one a line after the option's.
    for spec in lines(&zsh, "'--model=[") {
        assert!(spec.contains(":MODEL:((gen-2-pro\\:\"Create"), "{spec}");
    }
    for spec in lines(&fish, " -l model ") {
        assert!(spec.contains(" -a \"gen-2-pro\\t'Create"), "{spec}");
    }
    for script in [&zsh, &fish] {
        assert!(script.contains("\ngen-tools/vto-v1"), "{script}");
    }
    for script in [&zsh, &fish] {
        assert!(!script.contains("\"__complete\""), "a hidden command is offered");
    }
    let zsh_models = lines(&zsh, "'::name -- A model to describe:");
    assert!(
        !zsh_models.is_empty()
            && zsh_models
                .iter()
                .all(|spec| spec.ends_with(":((gen-2-pro\\:\"Create or edit an image with gen-2-pro\"")),
        "{zsh_models:?}"
    );
    let models_line = lines(&fish, "__fish_genapi_using_subcommand models");
    assert!(
        models_line.iter().any(|line| line.contains(" -a \"gen-2-pro ")),
        "{models_line:?}"
    );
    // models uses --json alone of the global options.
    assert!(models_line.iter().any(|line| line.contains("-l json")));
    assert!(
        !models_line.iter().any(|line| line.contains("-l record")),
        "{models_line:?}"
    );
}
