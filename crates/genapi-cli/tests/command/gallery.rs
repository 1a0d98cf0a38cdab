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
