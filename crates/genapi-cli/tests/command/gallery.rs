//! Sweeps and galleries from the command: `genapi grid` writes the cells of
//! a sweep as job lines, `genapi gallery` makes the page of an output folder.

use serde_json::Value;

use crate::common::{genapi_alone, Dir};

fn lines(text: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(text)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

#[test]
fn a_grid_writes_one_checked_line_per_cell_prompts_by_rows() {
    let dir = Dir::new("grid-cells");
    let run = genapi_alone(&dir)
        .args([
            "grid",
            "--prompt",
            "a red fox",
            "--prompt",
            "a blue whale",
            "--sweep",
            "seed=1,2,3",
        ])
        .args(["--set", "width=512", "--set", "height=512"])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let cells = lines(&run.stdout);
    assert_eq!(cells.len(), 6);
    assert_eq!(cells[4]["prompt"], "a blue whale");
    assert_eq!(cells[4]["seed"], 2, "values are JSON when they read as JSON");
    assert_eq!(cells[4]["width"], 512);
    assert_eq!(cells[4]["grid"]["row"], "a blue whale");
    assert_eq!(cells[4]["grid"]["column"], "seed 2");
    let names: std::collections::HashSet<&str> = cells.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names.len(), 6, "every cell has its own output name");
    // Over models: each cell's model is the swept one.
    let run = genapi_alone(&dir)
        .args([
            "grid",
            "--prompt",
            "a fox",
            "--sweep",
            "model=gen-2-pro,gen-2-flex",
            "-o",
            "models.jsonl",
        ])
        .output()
        .unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let cells = lines(&std::fs::read(dir.join("models.jsonl")).unwrap());
    let models: Vec<&str> = cells.iter().map(|c| c["model"].as_str().unwrap()).collect();
    assert_eq!(models, ["gen-2-pro", "gen-2-flex"]);
}

#[test]
fn a_grid_refuses_what_would_hide_or_lose_a_cell() {
    let dir = Dir::new("grid-refusals");
    for (args, said) in [
        (
            vec!["--prompt", "a", "--prompt", "a", "--sweep", "seed=1,2"],
            "given twice",
        ),
        (vec!["--prompt", "a", "--sweep", "seed=1,1"], "given twice"),
        (vec!["--prompt", "a", "--sweep", "prompt=x,y"], "--sweep prompt"),
        (vec!["--prompt", "a", "--sweep", "seed=,"], "no values"),
    ] {
        let run = genapi_alone(&dir).arg("grid").args(&args).output().unwrap();
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_eq!(run.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(said), "{args:?}: {stderr}");
        assert!(run.stdout.is_empty(), "{args:?}");
    }
    // Two grids over one prompt share a job file: their names differ.
    let first = genapi_alone(&dir)
        .args(["grid", "--prompt", "a fox", "--sweep", "seed=1,2", "-o", "two.jsonl"])
        .output()
        .unwrap();
    assert!(first.status.success());
    let again = genapi_alone(&dir)
        .args([
            "grid",
            "--prompt",
            "a fox",
            "--sweep",
            "width=512,768",
            "-o",
            "two.jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(2), "an existing file is kept without --force");
    let second = genapi_alone(&dir)
        .args(["grid", "--prompt", "a fox", "--sweep", "width=512,768"])
        .output()
        .unwrap();
    let mut names: Vec<String> = lines(&std::fs::read(dir.join("two.jsonl")).unwrap())
        .into_iter()
        .chain(lines(&second.stdout))
        .map(|line| line["name"].as_str().unwrap().to_string())
        .collect();
    names.sort();
    names.dedup();
    assert_eq!(names.len(), 4, "{names:?}");
}

#[test]
fn a_grid_with_a_cell_the_document_refuses_writes_nothing_and_names_the_cell() {
    let dir = Dir::new("grid-refused");
    let run = genapi_alone(&dir)
        .args([
            "grid",
            "--prompt",
            "a fox",
            "--sweep",
            "width=512,100",
            "-o",
            "jobs.jsonl",
        ])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("1 of 2 cells would be refused") && stderr.contains("cell 2"),
        "{stderr}"
    );
    assert!(!dir.join("jobs.jsonl").exists(), "nothing was written");
    assert_eq!(
        std::fs::read_dir(&dir.0).unwrap().count(),
        0,
        "no temporary file left behind"
    );
}

#[test]
fn the_gallery_of_a_folder_without_results_says_what_folder_it_wants() {
    let dir = Dir::new("gallery-no-results");
    let run = genapi_alone(&dir).args(["gallery", "."]).output().unwrap();
    assert_eq!(run.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("output folder of a batch"), "{stderr}");
}

/// The done-when batch: a seed sweep of 7 prompts by 5 seeds, three plain
/// lines and two planted failures (a task that fails, one moderated).
fn sweep_with_failures(dir: &Dir) {
    let prompts: Vec<String> = (1..=7).map(|n| format!("a lighthouse, study {n}")).collect();
    let mut grid = genapi_alone(dir);
    grid.args([
        "grid",
        "--sweep",
        "seed=1,2,3,4,5",
        "--set",
        "width=256",
        "--set",
        "height=192",
        "-o",
        "jobs.jsonl",
    ]);
    for prompt in &prompts {
        grid.args(["--prompt", prompt]);
    }
    let run = grid.output().unwrap();
    assert!(run.status.success(), "{}", String::from_utf8_lossy(&run.stderr));
    let mut text = std::fs::read_to_string(dir.join("jobs.jsonl")).unwrap();
    for (name, prompt) in [
        ("plain-1", "a harbour at noon"),
        ("plain-2", "a harbour at night"),
        ("plain-3", "a harbour in fog"),
        ("broken", "a harbour [mock:error]"),
        ("refused", "a harbour [mock:content-moderated]"),
    ] {
        text.push_str(&format!(
            "{}\n",
            serde_json::json!({"model": "gen-2-pro", "name": name, "prompt": prompt, "width": 256, "height": 192})
        ));
    }
    std::fs::write(dir.join("jobs.jsonl"), text).unwrap();
}

/// The result of each line, as the results file has it.
fn results(dir: &Dir) -> std::collections::BTreeMap<u64, Value> {
    lines(&std::fs::read(dir.join("shots/results.jsonl")).unwrap())
        .into_iter()
        .map(|line| (line["line"].as_u64().unwrap(), line))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[expect(clippy::too_many_lines, reason = "one scenario, told from start to end")]
async fn a_killed_and_resumed_batch_leaves_a_gallery_the_browser_accepts_and_a_rebuild_repeats() {
    let Some(chromium) = crate::common::browser::chromium() else {
        return;
    };
    // Tasks of 2 s, four at a time: the first run is killed once its four
    // submissions are answered and journalled and each task's first poll is
    // held (an hour on the mock clock, which nobody moves), when no
    // submission can be in flight: the limit is reached and the run cannot
    // learn that a task ended, however late the kill comes (a held poll
    // gives up only at the client's request timeout, a minute). So the kill
    // leaves no line without an answer, whatever the timing. (A task's wait
    // holds its one poll at a time, and submissions waiting for room poll
    // only tasks nobody waits for: the first run makes no fifth poll.)
    let config = genapi_mock::MockConfig::default().default_duration(std::time::Duration::from_secs(2));
    let mock = genapi_mock::MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let held = genapi_mock::FaultKind::Delay(std::time::Duration::from_secs(3600));
    mock.inject(genapi_mock::Fault::on("/v1/get_result", held).method("GET").times(4));
    let dir = Dir::new("gallery-batch");
    sweep_with_failures(&dir);
    let mut first = crate::common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "shots", "--max-active", "4"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let accepted = || {
        std::fs::read_to_string(dir.join("shots/journal.jsonl"))
            .unwrap_or_default()
            .matches("\"event\":\"accepted\"")
            .count()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while accepted() < 4 || mock.count("GET", "/v1/get_result") < 4 {
        assert!(
            std::time::Instant::now() < deadline,
            "the first run's four tasks were not all accepted and polled"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    first.kill().unwrap();
    first.wait().unwrap();
    assert_eq!(mock.created_tasks().len(), 4, "no fifth submission went out");
    let second = crate::common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "shots"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(7), "two lines failed for good: {stderr}");
    // Every cell paid once: the four tasks of the killed run were polled,
    // not sent again.
    assert_eq!(mock.created_tasks().len(), 40, "one task per line over both runs");
    let results = results(&dir);
    assert_eq!(results.len(), 40);
    let page = dir.join("shots").join(genapi_gallery::INDEX);
    let seen = crate::common::browser::open(&chromium, &page);
    // Every thumbnail decoded, and one for every saved image.
    let succeeded = results.values().filter(|r| r["status"] == "saved").count();
    assert_eq!(succeeded, 38, "{results:?}");
    assert_eq!(seen.images.len(), succeeded);
    assert!(seen.images.iter().all(|(_, width)| *width > 0), "{:?}", seen.images);
    assert!(
        seen.network.is_empty(),
        "the page asked the network for {:?}",
        seen.network
    );
    // Every tile says what its result says.
    assert_eq!(seen.tiles.len(), 40);
    for tile in &seen.tiles {
        let line: u64 = tile["line"].as_str().unwrap().parse().unwrap();
        let result = &results[&line];
        let text = tile["text"].as_str().unwrap();
        assert_eq!(tile["status"], result["status"], "line {line}");
        assert!(text.contains(result["name"].as_str().unwrap()), "line {line}: {text}");
        assert!(text.contains(result["prompt"].as_str().unwrap()), "line {line}: {text}");
        if let Some(seed) = result["seed"].as_i64() {
            assert!(text.contains(&seed.to_string()), "line {line}: {text}");
        }
        if result["status"] != "saved" {
            let task = result["task_id"].as_str().unwrap();
            assert_eq!(tile["task"], task, "line {line}");
            assert!(text.contains(task), "a failed tile shows its task: {text}");
        }
    }
    // The sweep is a grid: 7 rows of 5 seeds.
    let html = std::fs::read_to_string(&page).unwrap();
    assert_eq!(html.matches("<th class=\"row\">").count(), 7);
    assert_eq!(html.matches("<th class=\"column\">").count(), 5);
    // Rebuilding from the folder gives the same page, but for the job file
    // the run named, which the results do not record.
    let named = "<p class=\"job-file\">job file <code>jobs.jsonl</code></p>";
    assert!(html.contains(named), "{html}");
    let rebuilt = genapi_alone(&dir).args(["gallery", "shots"]).output().unwrap();
    assert!(rebuilt.status.success(), "{}", String::from_utf8_lossy(&rebuilt.stderr));
    assert_eq!(std::fs::read_to_string(&page).unwrap(), html.replace(named, ""));
    let thumbs: u64 = std::fs::read_dir(dir.join("shots").join(genapi_gallery::THUMBS))
        .unwrap()
        .map(|entry| entry.unwrap().metadata().unwrap().len())
        .sum();
    eprintln!(
        "gallery of 40 lines: page {} bytes, thumbnails {thumbs} bytes ({:.0} KB per thousand lines)",
        html.len(),
        thumbs as f64 / succeeded as f64
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_gallery_leaves_the_output_folder_without_a_page_or_thumbnails() {
    let config = genapi_mock::MockConfig::default().default_duration(std::time::Duration::from_millis(50));
    let mock = genapi_mock::MockService::start_with(config, "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("gallery-none");
    let job = |name: &str| {
        serde_json::json!({"model": "gen-2-pro", "name": name, "prompt": "a quiet pond", "width": 64, "height": 64})
            .to_string()
    };
    std::fs::write(dir.join("jobs.jsonl"), format!("{}\n{}\n", job("one"), job("two"))).unwrap();
    for (out, extra) in [("with", None), ("without", Some("--no-gallery"))] {
        let output = crate::common::genapi(&dir, &mock)
            .args(["batch", "jobs.jsonl", "--out", out])
            .args(extra)
            .output()
            .unwrap();
        assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
        assert!(dir.join(out).join("one.jpg").is_file() || dir.join(out).join("one.png").is_file());
    }
    assert!(dir.join("with").join(genapi_gallery::INDEX).is_file());
    assert!(dir.join("with").join(genapi_gallery::THUMBS).is_dir());
    assert!(!dir.join("without").join(genapi_gallery::INDEX).exists());
    assert!(!dir.join("without").join(genapi_gallery::THUMBS).exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gallery_shows_finished_lines_while_the_batch_still_runs() {
    let mock = genapi_mock::MockService::start_with(genapi_mock::MockConfig::default(), "127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let dir = Dir::new("gallery-current");
    let job = |name: &str, ms: u64| {
        serde_json::json!({"model": "gen-2-pro", "name": name, "prompt": format!("a quick or slow pond [mock:duration_ms={ms}]"),
                           "width": 64, "height": 64})
        .to_string()
    };
    std::fs::write(
        dir.join("jobs.jsonl"),
        format!("{}\n{}\n", job("quick", 200), job("slow", 3_600_000)),
    )
    .unwrap();
    let mut batch = crate::common::genapi(&dir, &mock)
        .args(["batch", "jobs.jsonl", "--out", "shots"])
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // The page is kept current as lines end (at each progress tick), not
    // only at the end: the quick line's tile shows while the slow one runs.
    let page = dir.join("shots").join(genapi_gallery::INDEX);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let shown = loop {
        let text = std::fs::read_to_string(&page).unwrap_or_default();
        if text.contains("data-line=\"1\" data-status=\"saved\"") {
            break text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no page with the quick line 60 s in: {text}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    };
    assert!(batch.try_wait().unwrap().is_none(), "the batch still runs");
    assert!(!shown.contains("data-line=\"2\" data-status=\"saved\""), "{shown}");
    batch.kill().unwrap();
    batch.wait().unwrap();
}

/// The page a batch leaves names the job file as it was given and says why
/// a line was not saved in words: no class or status code a program reads
/// (`task_failed`, `TASK_FAILED`) is on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_gallery_names_its_job_file_and_says_failures_in_words() {
    let mock = crate::common::roomy_mock(50).await;
    let dir = Dir::new("gallery-words");
    std::fs::create_dir_all(dir.join("jobs")).unwrap();
    let lines = [
        serde_json::json!({"model": "gen-2-pro", "prompt": "a harbour", "width": 256, "height": 256}),
        serde_json::json!({"model": "gen-2-pro", "prompt": "a harbour [mock:error]", "width": 256, "height": 256}),
    ];
    let text: String = lines.iter().map(|line| format!("{line}\n")).collect();
    std::fs::write(dir.join("jobs/harbour.jsonl"), text).unwrap();
    let run = crate::common::genapi(&dir, &mock)
        .args(["batch", "jobs/harbour.jsonl", "--out", "shots", "-q"])
        .output()
        .unwrap();
    assert_eq!(run.status.code(), Some(7), "{}", String::from_utf8_lossy(&run.stderr));
    let page = std::fs::read_to_string(dir.join("shots/index.html")).unwrap();
    for expected in [
        "job file <code>jobs/harbour.jsonl</code>",
        "1 saved · 1 ended",
        "<b class=\"class\">task failed</b>",
    ] {
        assert!(page.contains(expected), "{expected:?} is not on the page:\n{page}");
    }
    for code in ["task_failed", "TASK_FAILED", "http-equiv=\"refresh\""] {
        assert!(!page.contains(code), "{code:?} is on the page:\n{page}");
    }
}
