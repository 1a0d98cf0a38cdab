//! `genapi tasks`: the recent submissions of `generate` and `submit`, with
//! their model, when, their status as last known and where a result was
//! saved.

use serde_json::Value;

use crate::cli::text;
use crate::common::{genapi, roomy_mock, Dir};

/// `genapi generate "a fox" -o OUT` against `mock`, which must succeed.
fn generate_a_fox(dir: &Dir, mock: &genapi_mock::MockService, out: &str) {
    let generated = genapi(dir, mock)
        .args(["generate", "a fox", "-o", out])
        .output()
        .unwrap();
    assert_eq!(generated.status.code(), Some(0), "{}", text(&generated.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_lists_what_generate_and_submit_sent() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("recent-tasks");
    let generated = genapi(&dir, &mock)
        .args(["generate", "a fox", "-o", "fox.jpg", "--json"])
        .output()
        .unwrap();
    assert_eq!(generated.status.code(), Some(0), "{}", text(&generated.stderr));
    let generated: Value = serde_json::from_str(text(&generated.stdout).trim()).unwrap();
    let submitted = genapi(&dir, &mock)
        .args(["submit", "a cat", "-m", "gen-2-flex", "--json"])
        .output()
        .unwrap();
    assert_eq!(submitted.status.code(), Some(0), "{}", text(&submitted.stderr));
    let submitted: Value = serde_json::from_str(text(&submitted.stdout).trim()).unwrap();

    let listed = genapi(&dir, &mock).args(["tasks", "--json"]).output().unwrap();
    assert_eq!(listed.status.code(), Some(0), "{}", text(&listed.stderr));
    let lines: Vec<Value> = text(&listed.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["id"], submitted["id"], "newest first");
    assert_eq!(lines[0]["model"], "gen-2-flex");
    assert_eq!(lines[0]["status"], "submitted");
    assert_eq!(lines[0]["saved"], Value::Null);
    assert_eq!(lines[1]["id"], generated["id"]);
    assert_eq!(lines[1]["model"], "gen-2-pro");
    assert_eq!(lines[1]["status"], "ready");
    let saved = std::path::PathBuf::from(lines[1]["saved"].as_str().unwrap());
    assert_eq!(saved, std::path::absolute(dir.join("fox.jpg")).unwrap());
    let said = text(&listed.stdout);
    assert!(!said.contains(mock.key()) && !said.contains("get_result"), "{said}");

    let plain = genapi(&dir, &mock).args(["tasks", "--limit", "1"]).output().unwrap();
    let plain = text(&plain.stdout);
    assert_eq!(plain.lines().count(), 1, "{plain}");
    assert!(
        plain.contains("gen-2-flex") && plain.contains("submitted") && plain.contains("not saved"),
        "{plain}"
    );
}

/// A result written to standard output (`-o -`) is listed so, not as a
/// file named `-`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_written_to_standard_output_is_listed_so() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("recent-tasks-stdout");
    generate_a_fox(&dir, &mock, "-");
    let plain = genapi(&dir, &mock).args(["tasks"]).output().unwrap();
    let plain = text(&plain.stdout);
    assert!(plain.contains("written to standard output"), "{plain}");
    assert!(!plain.contains("saved -"), "{plain}");
    let listed = genapi(&dir, &mock).args(["tasks", "--json"]).output().unwrap();
    let line: Value = serde_json::from_str(text(&listed.stdout).trim()).unwrap();
    assert_eq!(line["saved"], Value::Null, "{line}");
    assert_eq!(line["written_to_stdout"], true, "{line}");
}

/// In a cache folder others may change, the history is not kept (its file
/// would be the user's alone there): `generate` says so once, with what to
/// run; `genapi tasks` then says why nothing is listed, rather than that
/// nothing was sent; and the folder is left as it is. A task's secrets
/// that `submit` cannot keep are said the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generate_and_tasks_say_why_no_history_is_kept_in_a_folder_others_may_change() {
    use std::os::unix::fs::PermissionsExt as _;
    let mock = roomy_mock(50).await;
    let dir = Dir::new("recent-tasks-open-cache");
    let cache = dir.join("cache/genapi");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o775)).unwrap();
    let generated = genapi(&dir, &mock)
        .args(["generate", "a fox", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let said = text(&generated.stderr);
    assert_eq!(generated.status.code(), Some(0), "{said}");
    // The folder and its fix are said once, with the first file of the
    // cache the run met; each file lost is named once, with its cost.
    let fix = format!("chmod go-w {}", cache.display());
    assert_eq!(said.matches(&fix).count(), 1, "the folder said once: {said}");
    let history = "history.jsonl in the cache either, so genapi tasks lists no task sent while it is not kept";
    assert_eq!(said.matches(history).count(), 1, "said once, as it is sent: {said}");
    assert_eq!(said.matches("prices.json").count(), 1, "{said}");
    // The task sent is named: the list will not hold it.
    let id = mock.created_tasks()[0].id.clone();
    assert!(
        said.contains(&format!(
            "task {id}, and any other this run sends, is not in the list genapi tasks shows: history.jsonl could not be kept"
        )),
        "{said}"
    );

    // What anyone could have put there is not listed as the user's.
    let planted = r#"{"id":"planted","model":"gen-2-pro","submitted":"2026-01-01T00:00:00Z","status":"ready","service":"the built-in mock"}"#;
    std::fs::write(cache.join("history.jsonl"), format!("{planted}\n")).unwrap();
    let listed = genapi(&dir, &mock).args(["tasks"]).output().unwrap();
    let said = text(&listed.stderr);
    assert_eq!(listed.status.code(), Some(0), "{said}");
    // Said as what `tasks` does: it reads the history, and keeps none.
    assert!(
        said.contains(
            "not reading history.jsonl in the cache, so genapi tasks lists no task sent while it is not kept"
        ) && said.contains(&format!("chmod go-w {}", cache.display())),
        "{said}"
    );
    assert!(!said.contains("not keeping"), "{said}");
    assert!(!said.contains("no submissions yet"), "{said}");
    assert!(!text(&listed.stdout).contains("planted"), "{}", text(&listed.stdout));
    std::fs::remove_file(cache.join("history.jsonl")).unwrap();
    let mode = std::fs::metadata(&cache).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o775, "left as it is");

    // The secrets of a task `submit` sent are kept by the same rule, and
    // losing them is said the same way: their own folder the user's alone
    // is not enough, as whoever may change the folder above may take it
    // away, or put theirs in its place.
    let tasks = cache.join("tasks");
    // `generate` may have made it, for the secrets of its own task.
    std::fs::create_dir_all(&tasks).unwrap();
    std::fs::set_permissions(&tasks, std::fs::Permissions::from_mode(0o700)).unwrap();
    let submitted = genapi(&dir, &mock).args(["submit", "a cat"]).output().unwrap();
    let said = text(&submitted.stderr);
    assert_eq!(submitted.status.code(), Some(0), "{said}");
    assert!(
        said.contains("not keeping tasks in the cache either, so a later wait or get"),
        "{said}"
    );
    assert_eq!(
        said.matches(&format!("chmod go-w {}", cache.display())).count(),
        1,
        "{said}"
    );
    assert_eq!(std::fs::read_dir(&tasks).unwrap().count(), 0, "nothing written there");

    // `-o -` passes its image through a folder of its own instead, gone
    // after it.
    let temporary = dir.join("tmp");
    std::fs::create_dir_all(&temporary).unwrap();
    let piped = genapi(&dir, &mock)
        .env("TMPDIR", &temporary)
        .args(["generate", "a fox", "--size", "96x64", "-o", "-"])
        .output()
        .unwrap();
    assert_eq!(piped.status.code(), Some(0), "{}", text(&piped.stderr));
    assert_eq!(crate::common::dimensions(&piped.stdout), Some((96, 64)));
    assert_eq!(std::fs::read_dir(&temporary).unwrap().count(), 0, "nothing left behind");
}

/// A history the command cannot read is said, with what to do, and not
/// called empty; a task sent while it cannot be read is named, as the list
/// will not hold it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_says_why_a_history_cannot_be_read_and_never_that_it_is_empty() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("recent-tasks-linked-history");
    let cache = dir.join("cache/genapi");
    std::fs::create_dir_all(&cache).unwrap();
    std::fs::write(dir.join("elsewhere.jsonl"), "").unwrap();
    std::os::unix::fs::symlink(dir.join("elsewhere.jsonl"), cache.join("history.jsonl")).unwrap();
    // A task sent meanwhile is named: `genapi tasks` will not list it.
    let submitted = genapi(&dir, &mock)
        .args(["submit", "a cat", "--json"])
        .output()
        .unwrap();
    let said = text(&submitted.stderr);
    assert_eq!(submitted.status.code(), Some(0), "{said}");
    let task: Value = serde_json::from_str(text(&submitted.stdout).trim()).unwrap();
    let id = task["id"].as_str().unwrap();
    assert!(
        said.contains(&format!(
            "warning: task {id}, and any other this run sends, is not in the list genapi tasks shows: "
        )) && said.contains("cannot be read: a link"),
        "{said}"
    );
    // Said once a run, however many tasks it sends.
    let generated = genapi(&dir, &mock)
        .args(["generate", "a dog", "-n", "3", "--size", "64x64", "-o", "dogs/"])
        .output()
        .unwrap();
    let said = text(&generated.stderr);
    assert_eq!(generated.status.code(), Some(0), "{said}");
    assert_eq!(
        said.matches("is not in the list genapi tasks shows").count(),
        1,
        "{said}"
    );
    assert!(cache.join("history.jsonl").is_symlink(), "kept as it is");
    assert_eq!(
        std::fs::read_to_string(dir.join("elsewhere.jsonl")).unwrap(),
        "",
        "nothing written through it"
    );

    let listed = genapi(&dir, &mock).args(["tasks"]).output().unwrap();
    let said = text(&listed.stderr);
    assert_eq!(listed.status.code(), Some(0), "{said}");
    assert!(
        said.contains("cannot be read: a link") && said.contains("rm "),
        "{said}"
    );
    assert!(!said.contains("no submissions yet"), "{said}");
}

/// A cache the system refuses the user (`~/.cache` made by a command run
/// with sudo, with no `genapi` folder in it yet) is said once a run, with
/// the folder to take back, and each file it costs in one short line. Run
/// as root, the test runs the command as `nobody` against a cache folder of
/// root's; run as anyone else, it cannot make one, and checks nothing.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cache_the_system_refuses_is_said_once_with_the_folder_to_take_back() {
    use std::os::unix::fs::PermissionsExt as _;
    use std::os::unix::process::CommandExt as _;
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        return;
    }
    let mock = roomy_mock(50).await;
    let dir = Dir::new("recent-tasks-roots-cache");
    let open = |path: &std::path::Path, mode: u32| {
        std::fs::create_dir_all(path).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    // `nobody` may pass through and write in its own folder, and run a copy
    // of the command; the cache is root's.
    open(&dir.join("."), 0o755);
    // Named as a shell would misread it unquoted.
    let roots = dir.join("root's cache");
    open(&roots, 0o755);
    let theirs = dir.join("nobodys");
    open(&theirs, 0o777);
    let copy = theirs.join("genapi");
    crate::common::install_executable(std::path::Path::new(env!("CARGO_BIN_EXE_genapi")), &copy);
    let configured = genapi(&dir, &mock);
    let as_nobody = |home: &std::path::Path, out: &str| {
        let mut command = std::process::Command::new(&copy);
        for (name, value) in configured.get_envs() {
            match value {
                Some(value) => command.env(name, value),
                None => command.env_remove(name),
            };
        }
        command
            .env("HOME", home)
            .env("XDG_CACHE_HOME", &roots)
            .current_dir(&theirs)
            .args(["generate", "a fox", "-o", out]);
        // SAFETY: setgid and setuid are async-signal-safe.
        unsafe {
            command.pre_exec(|| {
                if libc::setgid(65534) != 0 || libc::setuid(65534) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let run = command.output().unwrap();
        let said = text(&run.stderr);
        assert_eq!(run.status.code(), Some(0), "paid for, and saved: {said}");
        assert!(theirs.join(out).exists(), "{said}");
        said
    };
    // A cache below the user's home folder: the folder of another user's
    // is named, with the command that gives it back.
    let said = as_nobody(&dir.join("."), "fox.jpg");
    let quoted = format!("'{}'", roots.display().to_string().replace('\'', r"'\''"));
    let fix = format!("sudo chown -R \"$(id -un)\" {quoted}");
    assert_eq!(
        said.matches(&format!(
            "{quoted}: you may not write in this folder of another user's (uid 0;"
        ))
        .count(),
        1,
        "{said}"
    );
    assert_eq!(said.matches(&fix).count(), 1, "{said}");
    // Each file it costs is named once (the first with the folder).
    for file in ["tasks", "history.jsonl", "prices.json", "learned.json"] {
        assert_eq!(
            said.matches(&format!(" {file} in the cache")).count(),
            1,
            "{file}: {said}"
        );
    }
    // Anywhere else (a folder of the system's, the home folder itself), no
    // folder is offered to be taken: another cache folder is.
    let said = as_nobody(&theirs, "fox-2.jpg");
    assert!(!said.contains("chown"), "{said}");
    assert_eq!(
        said.matches("set XDG_CACHE_HOME to a folder of your own").count(),
        1,
        "{said}"
    );
    assert!(!roots.join("genapi").exists(), "nothing made there");
}

/// A file where the cache folder was to be made keeps nothing, and that is
/// said once a run, naming the task the list will not hold; `genapi tasks`
/// then says why it lists nothing rather than that nothing was sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_where_the_cache_folder_goes_is_said_and_tasks_does_not_call_the_list_empty() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("recent-tasks-cache-is-a-file");
    std::fs::write(dir.join("cache"), "").unwrap();
    let generated = genapi(&dir, &mock)
        .args(["generate", "a fox", "--size", "64x64", "-o", "fox.jpg"])
        .output()
        .unwrap();
    let said = text(&generated.stderr);
    assert_eq!(generated.status.code(), Some(0), "{said}");
    assert_eq!(
        said.matches("not a folder, where the cache's folder was to be: move it away, or set XDG_CACHE_HOME")
            .count(),
        1,
        "{said}"
    );
    let id = mock.created_tasks()[0].id.clone();
    assert!(
        said.contains(&format!("task {id}, and any other this run sends, is not in the list")),
        "{said}"
    );
    let listed = genapi(&dir, &mock).args(["tasks"]).output().unwrap();
    let said = text(&listed.stderr);
    assert_eq!(listed.status.code(), Some(0), "{said}");
    assert!(
        said.contains("not reading history.jsonl") && said.contains("not a folder"),
        "{said}"
    );
    assert!(!said.contains("no submissions yet"), "{said}");
}

/// A service is listed in one spelling, however its address was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_is_listed_in_one_spelling() {
    let mock = roomy_mock(50).await;
    let dir = Dir::new("recent-tasks-one-spelling");
    let respelled = format!("{}/", mock.base_url().replace("http://", "HTTP://"));
    let submitted = genapi(&dir, &mock)
        .env("GENAPI_BASE_URL", &respelled)
        .args(["submit", "a cat"])
        .output()
        .unwrap();
    assert_eq!(submitted.status.code(), Some(0), "{}", text(&submitted.stderr));
    let listed = genapi(&dir, &mock).args(["tasks", "--json"]).output().unwrap();
    let line: Value = serde_json::from_str(text(&listed.stdout).trim()).unwrap();
    assert_eq!(line["service"], mock.base_url().trim_end_matches('/'), "{line}");
}
