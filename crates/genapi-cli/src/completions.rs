//! `genapi completions SHELL`: the shell's completion script.
//!
//! The scripts are clap_complete's static ones, made from the command's
//! definition as its help shows it ([`visible`]): no hidden option, alias
//! or command is ever offered. Model names are in the script itself (the
//! possible values of [`ModelName`]: the models this program is built
//! with). Profile names cannot be: they are the config file's, read when
//! completing, so the script asks the program for them with the hidden
//! `genapi __complete profiles` ([`PROFILES`]). That one small hook per
//! shell was chosen over clap_complete's dynamic engine, which runs the
//! program on every Tab, is still unstable, and offers hidden options when
//! no visible one matches what was typed.

use clap::builder::{PossibleValue, StringValueParser, TypedValueParser};
use clap_complete::Shell;

use crate::{config, out};

/// The command a script runs for the profile names, one a line.
const PROFILES: &str = "genapi __complete profiles";

/// What `genapi __complete` prints.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Names {
    /// The config file's profiles.
    Profiles,
}

/// Prints the names asked for, one a line: only those that are plain
/// words ([`plain_word`]).
pub fn print(names: Names) {
    match names {
        Names::Profiles => config::profile_names()
            .iter()
            .filter(|name| plain_word(name))
            .for_each(|name| out::out(name)),
    }
}

/// Whether `name` is offered for completion: ASCII letters, digits, `-`,
/// `_` and `.` alone. A config file's profile may be named anything TOML
/// can quote, and a shell may read what it is offered as code (`$(…)`,
/// backticks, globs) or as several words; such a name is still usable when
/// typed, it is only never offered.
fn plain_word(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The value of an option that names a model: any text (the catalog
/// resolves it, or names the nearest model), with the models this program
/// is built with as its possible values, for the completion scripts.
#[derive(Clone, Copy, Debug)]
pub struct ModelName;

impl TypedValueParser for ModelName {
    type Value = String;

    fn parse_ref(
        &self,
        command: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        StringValueParser::new().parse_ref(command, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        let models = genapi::validate::Document::embedded().catalog().models();
        Some(Box::new(models.iter().map(|model| {
            PossibleValue::new(model.name.as_str()).help(out::clean(&model.summary))
        })))
    }
}

/// The completion script of `shell` for `definition`.
pub fn script(shell: Shell, mut definition: clap::Command) -> String {
    definition.build();
    let mut text = Vec::new();
    clap_complete::generate(shell, &mut visible(&definition), "genapi", &mut text);
    hooked(shell, &String::from_utf8_lossy(&text))
}

/// `command` (built) as its help shows it: without hidden options and
/// commands. Each option is its own there, as the built command has given
/// every command its global ones (or a hidden copy, which is dropped).
fn visible(command: &clap::Command) -> clap::Command {
    let mut view = clap::Command::new(command.get_name().to_string())
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true)
        .args(
            command
                .get_arguments()
                .filter(|arg| !arg.is_hide_set())
                .map(|arg| arg.clone().global(false)),
        )
        .subcommands(command.get_subcommands().filter(|sub| !sub.is_hide_set()).map(visible));
    if let Some(about) = command.get_about() {
        view = view.about(about.clone());
    }
    if let Some(version) = command.get_version() {
        view = view.version(version.to_string());
    }
    view
}

/// `script` with what clap's scripts cannot say: `--profile`'s values, read
/// by [`PROFILES`], and (for fish, whose script completes options only) the
/// model of `genapi models NAME`.
fn hooked(shell: Shell, script: &str) -> String {
    match shell {
        // A function in front of clap's, answering after --profile. The
        // names are read line by line and compared as text: never given to
        // compgen -W, which would expand each of them again.
        Shell::Bash => format!(
            "{script}
_genapi_with_profiles() {{
    if [[ \"${{COMP_WORDS[COMP_CWORD-1]}}\" == --profile ]]; then
        local typed=\"${{COMP_WORDS[COMP_CWORD]}}\" name
        COMPREPLY=()
        while IFS= read -r name; do
            [[ $name == \"$typed\"* ]] && COMPREPLY+=(\"$name\")
        done < <({PROFILES} 2>/dev/null)
        return 0
    fi
    _genapi \"$@\"
}}
complete -F _genapi_with_profiles -o bashdefault -o default genapi
"
        ),
        // --profile's action in each command's specification.
        Shell::Zsh => {
            let (first, rest) = script.split_once('\n').unwrap_or((script, ""));
            let rest = edited_lines(rest, "'--profile=[", |line| {
                line.replace(":_default'", ":_genapi_profiles'")
            });
            // zsh's own options, so a name is one word and never a pattern;
            // compadd quotes what it inserts.
            format!(
                "{first}\n\n_genapi_profiles() {{\n    emulate -L zsh\n    local -a profiles\n    \
                 profiles=(${{(f)\"$({PROFILES} 2>/dev/null)\"}})\n    compadd -a profiles\n}}\n{rest}"
            )
        }
        // Candidates on each line that completes --profile: fish takes each
        // line a command substitution prints as one candidate, as it is.
        Shell::Fish => {
            let script = edited_lines(script, " -l profile ", |line| {
                format!("{line} -f -a \"({PROFILES} 2>/dev/null)\"")
            });
            let models: Vec<String> = ModelName
                .possible_values()
                .into_iter()
                .flatten()
                .map(|model| model.get_name().to_string())
                .collect();
            // Before a command, clap's condition for its options does not
            // hold while --profile waits for its value (fish would offer
            // files): one more hook answers after a bare --profile.
            format!(
                "{script}\ncomplete -c genapi -n \"__fish_genapi_using_subcommand models\" -f -a \"{}\"\n\
                 function __fish_genapi_after_profile\n    set -l tokens (commandline -opc)\n    \
                 test \"$tokens[-1]\" = --profile\nend\n\
                 complete -c genapi -n __fish_genapi_after_profile -f -a \"({PROFILES} 2>/dev/null)\"\n",
                models.join(" ")
            )
        }
        // Elvish and PowerShell: every name but the profiles'.
        _ => script.to_string(),
    }
}

/// `script` with each line containing `marker` edited.
fn edited_lines(script: &str, marker: &str, edit: impl Fn(&str) -> String) -> String {
    script
        .lines()
        .map(|line| {
            if line.contains(marker) {
                edit(line)
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
