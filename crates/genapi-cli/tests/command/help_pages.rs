//! `-h` is a line an option, `--help` says it all, a command's own options
//! come before the global ones, and the man pages have the sections a man
//! page reader looks for, made from the lists `--help` shows.

use crate::cli::text;
use crate::common::{genapi_alone, Dir};

/// What `genapi ARGS` prints on stdout, asserting it succeeds.
fn printed(dir: &Dir, args: &[&str]) -> String {
    let run = genapi_alone(dir).args(args).output().unwrap();
    assert_eq!(run.status.code(), Some(0), "{args:?}: {}", text(&run.stderr));
    text(&run.stdout)
}

/// The commands `genapi -h` lists (not `help`).
fn commands(dir: &Dir) -> Vec<String> {
    printed(dir, &["-h"])
        .lines()
        .skip_while(|line| *line != "Commands:")
        .skip(1)
        .take_while(|line| !line.is_empty())
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn short_help_gives_each_option_one_line_and_long_help_the_rest() {
    let dir = Dir::new("help-short-long");
    let commands = commands(&dir);
    assert!(commands.len() >= 12, "{commands:?}");
    for command in commands.iter().map(String::as_str).chain([""]) {
        let args: Vec<&str> = [command, "-h"].into_iter().filter(|a| !a.is_empty()).collect();
        let short = printed(&dir, &args);
        let mut section = "";
        for line in short.lines() {
            if !line.starts_with(' ') {
                section = line;
                continue;
            }
            // Every entry starts a line: none runs on over the next.
            let entry = line.trim_start();
            let starts = entry.starts_with('-') || entry.starts_with('[') || entry.starts_with('<');
            assert!(
                section == "Commands:" || starts,
                "{command} -h: a paragraph runs on in {section}: {line:?}\n{short}"
            );
        }
        let long = printed(
            &dir,
            &[command, "--help"]
                .into_iter()
                .filter(|a| !a.is_empty())
                .collect::<Vec<_>>(),
        );
        assert!(long.lines().count() >= short.lines().count(), "{command}");
    }
    for command in ["", "generate", "batch", "mock"] {
        let args = |flag| {
            [command, flag]
                .into_iter()
                .filter(|a| !a.is_empty())
                .collect::<Vec<_>>()
        };
        let (short, long) = (printed(&dir, &args("-h")), printed(&dir, &args("--help")));
        assert!(
            short.lines().count() * 2 < long.lines().count(),
            "{command}: -h has {} lines, --help {}",
            short.lines().count(),
            long.lines().count()
        );
    }
}

#[test]
fn a_commands_own_options_come_before_the_global_ones() {
    let dir = Dir::new("help-headings");
    for flag in ["-h", "--help"] {
        let help = printed(&dir, &["generate", flag]);
        let at = |needle: &str| help.find(needle).unwrap_or_else(|| panic!("{needle} missing:\n{help}"));
        let (own, global) = (at("\nOptions:\n"), at("\nGlobal options:\n"));
        assert!(own < global, "{help}");
        for option in ["--model <MODEL>", "--count <COUNT>", "--seed <SEED>"] {
            let place = at(option);
            assert!(
                own < place && place < global,
                "{option} among the global options:\n{help}"
            );
        }
        for option in ["--json", "--profile <NAME>", "--timeout <SECONDS>"] {
            assert!(at(option) > global, "{option} before the global options:\n{help}");
        }
    }
}

#[test]
fn the_man_page_has_environment_files_exit_status_and_examples() {
    let dir = Dir::new("man-sections");
    let page = printed(&dir, &["man"]);
    for section in [".SH ENVIRONMENT", ".SH FILES", ".SH \"EXIT STATUS\"", ".SH EXAMPLES"] {
        assert!(page.contains(&format!("\n{section}\n")), "{section} missing:\n{page}");
    }
    assert!(!page.contains(".SH EXTRA"), "{page}");
    let help = printed(&dir, &["--help"]);
    let codes: Vec<&str> = help
        .split("Exit codes:")
        .nth(1)
        .unwrap()
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|word| word.parse::<u8>().is_ok())
        .collect();
    assert!(codes.len() >= 12, "{codes:?}");
    let status = page.split(".SH \"EXIT STATUS\"").nth(1).unwrap();
    for code in codes {
        assert!(
            status.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "exit code {code} missing:\n{status}"
        );
    }
    for name in [
        "GENAPI_API_KEY",
        "GENAPI_CONFIG",
        "GENAPI_PROFILE",
        "GENAPI_LEDGER_URL",
        "GENAPI_OPENER",
    ] {
        assert!(page.contains(&format!("\\fB{name}\\fR")), "{name}");
    }
    let files = page.split(".SH FILES").nth(1).unwrap();
    for file in [
        "config.toml",
        "learned.json",
        "prices.json",
        "~/.cache/genapi/tasks",
        "history.jsonl",
        "rm \\-r ~/.cache/genapi",
    ] {
        assert!(files.contains(file), "{file} missing:\n{files}");
    }
}

#[test]
fn man_dir_writes_a_page_for_every_command_and_replaces_none_unasked() {
    let dir = Dir::new("man-dir");
    let pages = dir.join("man1");
    printed(&dir, &["man", "--dir", "man1"]);
    let mut written: Vec<String> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    let mut expected: Vec<String> = commands(&dir)
        .iter()
        .map(|command| format!("genapi-{command}.1"))
        .collect();
    expected.push("genapi.1".into());
    expected.push("genapi-config-set.1".into());
    expected.sort();
    assert_eq!(written, expected);
    // Every page a page refers to is written; each command's page has its
    // exit status and refers to the first for the rest.
    for name in &written {
        let page = std::fs::read_to_string(pages.join(name)).unwrap();
        let header = page.lines().find(|line| line.starts_with(".TH ")).unwrap();
        assert!(
            header.contains(&format!("\"genapi {}\"", env!("CARGO_PKG_VERSION"))),
            "{name}: {header}"
        );
        for (at, _) in page.match_indices("(1)") {
            let before = &page[..at];
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
                .map_or(0, |i| i + 1);
            let named = &before[start..];
            if named.starts_with("genapi") {
                assert!(
                    written.contains(&format!("{named}.1")),
                    "{name} refers to {named}(1), not written"
                );
            }
        }
        if name != "genapi.1" {
            assert!(page.contains("\n.SH \"EXIT STATUS\"\n"), "{name}:\n{page}");
            assert!(
                page.contains("\n.SH \"SEE ALSO\"\n") && page.contains("ENVIRONMENT"),
                "{name}:\n{page}"
            );
        }
    }
    let config = std::fs::read_to_string(pages.join("genapi-config.1")).unwrap();
    assert!(
        config.contains("genapi\\-config\\-set(1)") || config.contains("genapi-config-set(1)"),
        "{config}"
    );
    let set = std::fs::read_to_string(pages.join("genapi-config-set.1")).unwrap();
    assert_eq!(set.trim_end(), printed(&dir, &["man", "config", "set"]).trim_end());
    let batch = std::fs::read_to_string(pages.join("genapi-batch.1")).unwrap();
    assert!(
        batch.contains(".TH genapi-batch 1") && batch.contains("max\\-credits"),
        "{batch}"
    );
    assert_eq!(batch.trim_end(), printed(&dir, &["man", "batch"]).trim_end());

    std::fs::write(pages.join("genapi-grid.1"), "mine").unwrap();
    let again = genapi_alone(&dir).args(["man", "--dir", "man1"]).output().unwrap();
    assert_eq!(again.status.code(), Some(2), "{}", text(&again.stderr));
    let said = text(&again.stderr);
    assert!(said.contains("man1/genapi"), "{said}");
    assert!(
        said.contains(" exists; choose another name, or pass --force to replace it\n") && !said.contains("allow"),
        "one sentence: {said}"
    );
    assert_eq!(std::fs::read_to_string(pages.join("genapi-grid.1")).unwrap(), "mine");
    printed(&dir, &["man", "--dir", "man1", "--force"]);
    assert!(std::fs::read_to_string(pages.join("genapi-grid.1"))
        .unwrap()
        .contains(".TH genapi-grid 1"));
}

#[test]
fn no_help_or_man_text_points_at_a_file_of_the_repository() {
    let dir = Dir::new("help-no-repository-files");
    let mut texts = vec![printed(&dir, &["--help"]), printed(&dir, &["man"])];
    for command in commands(&dir) {
        texts.push(printed(&dir, &[&command, "--help"]));
        texts.push(printed(&dir, &["man", &command]));
    }
    for text in texts {
        for pointer in ["docs/", ".md"] {
            assert!(!text.contains(pointer), "{pointer} in:\n{text}");
        }
    }
}

/// `-o` says what it does in each command: `generate` chooses the format
/// by the name's extension; `wait` and `get` pick up a task whose format
/// was chosen when it was submitted.
#[test]
fn out_says_what_it_does_in_each_command() {
    let dir = Dir::new("help-out");
    let chooses = "A file's extension chooses the format";
    let chosen = "The format was chosen when the task was submitted";
    let generate = printed(&dir, &["generate", "--help"]);
    assert!(generate.contains(chooses) && !generate.contains(chosen), "{generate}");
    for command in ["wait", "get"] {
        let help = printed(&dir, &[command, "--help"]);
        assert!(help.contains(chosen) && !help.contains(chooses), "{command}: {help}");
    }
    let get = printed(&dir, &["get", "--help"]);
    assert!(get.contains("Where to save the result when it is Ready"), "{get}");
}
