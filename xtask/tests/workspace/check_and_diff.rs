//! `cargo xtask check`, `diff-upstream` and `drift` on the real document and
//! on documents broken on purpose.

use serde_json::{json, Value};

mod drift;

fn document() -> Value {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.json")).expect("openapi.json");
    serde_json::from_str(&text).expect("json")
}

fn problems(doc: &Value) -> Vec<String> {
    xtask::check(&doc.to_string())
}

fn assert_flags(doc: &Value, needle: &str) {
    let found = problems(doc);
    assert!(
        found.iter().any(|p| p.contains(needle)),
        "expected a problem mentioning {needle:?}, got {found:#?}"
    );
}

/// What `cargo xtask check` runs, on the file as it is (CI runs it here).
#[test]
fn the_document_passes() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.json")).expect("openapi.json");
    assert_eq!(xtask::check(&text), Vec::<String>::new());
}

#[test]
fn a_missing_operation_id_fails() {
    let mut doc = document();
    doc["paths"]["/v1/gen-dev"]["post"]
        .as_object_mut()
        .unwrap()
        .remove("operationId");
    assert_flags(&doc, "POST /v1/gen-dev: no operationId");
}

#[test]
fn a_default_in_a_request_schema_fails() {
    let mut doc = document();
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["steps"]["default"] = json!(28);
    assert_flags(&doc, "GenDevRequest).steps: has a `default` keyword");
}

#[test]
fn an_inline_response_schema_fails() {
    let mut doc = document();
    doc["paths"]["/v1/gen-dev"]["post"]["responses"]["200"]["content"]["application/json"]["schema"] =
        json!({"type": "object"});
    assert_flags(&doc, "POST /v1/gen-dev: the 200 response schema must be a $ref");
}

#[test]
fn the_31_null_idiom_fails() {
    let mut doc = document();
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["seed"] =
        json!({"anyOf": [{"type": "integer"}, {"type": "null"}]});
    assert_flags(&doc, "`type: null` (3.1 null idiom)");
}

#[test]
fn a_31_version_a_wrong_info_version_and_a_missing_path_fail() {
    let mut doc = document();
    doc["openapi"] = json!("3.1.0");
    doc["info"]["version"] = json!("0.0.2");
    doc["paths"].as_object_mut().unwrap().remove("/v1/gen-tools/vto-v2");
    assert_flags(&doc, "openapi must be 3.0.x");
    assert_flags(&doc, "info.version must be \"0.0.1\"");
    assert_flags(&doc, "POST /v1/gen-tools/vto-v2: missing");
}

#[test]
fn every_submission_with_a_webhook_url_describes_the_one_notification() {
    let mut doc = document();
    let gen_dev = "/v1/gen-dev";
    doc["paths"][gen_dev]["post"]
        .as_object_mut()
        .unwrap()
        .remove("callbacks");
    assert_flags(
        &doc,
        "POST /v1/gen-dev: takes `webhook_url` but declares no `task_finished` callback",
    );

    let mut doc = document();
    let copy = doc["paths"][gen_dev]["post"]["callbacks"].clone();
    doc["paths"]["/v1/gen-3-video"]["post"]["callbacks"] = copy;
    assert_flags(&doc, "POST /v1/gen-3-video: has callbacks but no `webhook_url`");

    // One copy edited: the document describes two notifications.
    let mut doc = document();
    let post = "/task_finished/{$request.body#~1webhook_url}/post";
    let body = format!("/paths/~1v1~1gen-dev/post/callbacks{post}/requestBody");
    doc.pointer_mut(&body).unwrap()["$ref"] = json!("#/components/schemas/PollResult");
    assert_flags(&doc, "POST /v1/gen-dev: its callbacks differ from those of");

    // Every copy broken alike: the shape itself is checked.
    let mut doc = document();
    let mut broken = doc["paths"][gen_dev]["post"]["callbacks"].clone();
    let callback = broken.pointer_mut(post).unwrap();
    callback["parameters"] = json!([{"name": "webhook-id", "in": "query", "schema": {"type": "string"}}]);
    callback["responses"] = json!({"400": {"description": "no"}});
    callback["requestBody"] = json!({"content": {"application/json": {"schema": {"type": "object"}}}});
    for path in doc["paths"].as_object_mut().unwrap().values_mut() {
        if !path["post"]["callbacks"].is_null() {
            path["post"]["callbacks"] = broken.clone();
        }
    }
    assert_flags(&doc, "`task_finished` parameter (inline): must be a $ref to a header");
    assert_flags(&doc, "`task_finished` names no 2xx answer");
    assert_flags(&doc, "`task_finished`'s requestBody must be a $ref");
    assert_eq!(problems(&doc).len(), 3, "{:#?}", problems(&doc));
}

#[test]
fn a_changed_bound_changes_the_surface() {
    let before = xtask::surface(&document());
    let mut doc = document();
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["steps"]["maximum"] = json!(60);
    let after = xtask::surface(&doc);
    assert_ne!(before, after);
    assert!(
        after.contains("steps: integer(uint8); nullable; min 1; max 60"),
        "{after}"
    );
}

#[test]
fn the_document_agrees_with_itself() {
    let report = xtask::diff(&document(), &document(), &[]);
    assert!(report.is_empty(), "{report:#?}");
    assert!(report.compared > 20);
    assert!(report
        .render()
        .ends_with("0 unknown difference(s), 0 known, 27 operation(s) compared\n"));
}

fn known_entry<'a>(report: &'a xtask::diff::Report, needle: &str) -> &'a str {
    report
        .known
        .iter()
        .find(|(line, _)| line.contains(needle))
        .map(|(_, entries)| entries.as_str())
        .unwrap_or_else(|| panic!("no known difference {needle:?} in {report:#?}"))
}

#[test]
fn diff_upstream_lists_operations_and_field_changes_of_a_31_document() {
    let upstream: Value = serde_json::from_str(include_str!("../fixtures/upstream-3.1.json")).unwrap();
    let rename = [("/v1/flux-".to_string(), "/v1/gen-".to_string())];
    let report = xtask::diff(&document(), &upstream, &rename);
    let has = |needle: &str| {
        assert!(
            report.unknown.iter().any(|l| l.contains(needle)),
            "missing {needle:?} in {report:#?}"
        )
    };
    has("+ operation POST /v1/gen-2-max (not in openapi.json)");
    has("- operation POST /v1/gen-dev (not in the other document)");
    // Differences our corrections explain are known, with the entry named.
    assert_eq!(
        known_entry(
            &report,
            "~ field POST /v1/gen-2-pro seed: type integer as i128 -> integer as i64"
        ),
        "seed-range"
    );
    assert_eq!(
        known_entry(&report, "- field POST /v1/gen-2-pro disable_pup"),
        "gen-2-pro-disable-pup"
    );
    assert_eq!(
        known_entry(
            &report,
            "~ field POST /v1/gen-2-pro safety_tolerance: bounds [max 5, min 0] -> [max 6, min 0]"
        ),
        "safety-tolerance-gen-2"
    );
    assert_eq!(
        known_entry(
            &report,
            "~ field POST /v1/gen-2-pro output_format: enum [jpeg, png, webp] -> [jpeg, png]"
        ),
        "output-format-webp"
    );
    // Corrected to the service's multiples of 16 and its `user` field: no
    // longer a difference; the 3.1 null idiom reads as nullable, like ours.
    let all: Vec<&String> = report
        .unknown
        .iter()
        .chain(report.known.iter().map(|(l, _)| l))
        .collect();
    assert_eq!(
        known_entry(
            &report,
            "~ field POST /v1/gen-2-pro height: bounds [min 64, multipleOf 16] -> [min 64]"
        ),
        "gen-2-size-zero, gen-2-size-multiple-16"
    );
    for quiet in ["gen-2-pro width", "gen-2-pro user"] {
        assert!(!all.iter().any(|l| l.contains(quiet)), "{quiet}: {all:#?}");
    }
    assert!(report
        .render()
        .lines()
        .last()
        .unwrap()
        .starts_with(&format!("{} unknown difference(s), ", report.unknown.len())));
}

#[test]
fn representation_noise_is_not_a_difference() {
    let mut theirs = document();
    let dev = &mut theirs["components"]["schemas"]["GenDevRequest"]["properties"];
    dev["width"]["minimum"] = json!(256.0);
    dev["steps"]["maximum"] = json!(50.0);
    // int64 and no format both make i64; double and no format both make f64.
    dev["guidance"].as_object_mut().unwrap().remove("format");
    theirs["components"]["schemas"]["OutputFormat"]["enum"] = json!(["webp", "png", "jpeg"]);
    let report = xtask::diff(&document(), &theirs, &[]);
    assert!(report.is_empty(), "{report:#?}");
    // A format that changes the Rust type is a difference (a field whose type
    // no `x-rust-type` pins).
    theirs["components"]["schemas"]["GenPro1p0ExpandRequest"]["properties"]["top"]["format"] = json!("int32");
    let report = xtask::diff(&document(), &theirs, &[]);
    assert!(
        report
            .unknown
            .iter()
            .any(|l| l.contains("~ field POST /v1/gen-pro-1.0-expand top: type integer as u16 -> integer as i32")),
        "{report:#?}"
    );
}

#[test]
fn query_parameters_statuses_and_security_are_compared() {
    let mut theirs = document();
    let op = &mut theirs["paths"]["/v1/get_result"]["get"];
    op["parameters"][0]["schema"] = json!({"type": "integer"});
    op["responses"]["404"] = json!({"description": "gone"});
    op["security"] = json!([]);
    let report = xtask::diff(&document(), &theirs, &[]);
    assert!(
        report
            .unknown
            .iter()
            .any(|l| l.starts_with("~ query GET /v1/get_result id: type string as String -> integer as i64")),
        "{report:#?}"
    );
    assert!(
        report
            .unknown
            .iter()
            .any(|l| l == "~ responses GET /v1/get_result: [200, 422] -> [200, 404, 422]")
            || report
                .known
                .iter()
                .any(|(l, _)| l == "~ responses GET /v1/get_result: [200, 422] -> [200, 404, 422]"),
        "{report:#?}"
    );
    assert_eq!(
        known_entry(&report, "~ security GET /v1/get_result: [APIKeyHeader] -> []"),
        "get-result-security"
    );
}

#[test]
fn the_command_exits_non_zero_on_unknown_differences_and_refuses_unknown_flags() {
    let run = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg("diff-upstream")
            .args(args)
            .output()
            .expect("xtask runs")
    };
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/upstream-3.1.json");
    let out = run(&[fixture, "--map-prefix", "/v1/flux-=/v1/gen-"]);
    assert!(!out.status.success());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("[known: seed-range]"), "{stdout}");
    assert!(
        stdout.lines().last().unwrap_or("").contains("unknown difference(s)"),
        "{stdout}"
    );

    let same = concat!(env!("CARGO_MANIFEST_DIR"), "/../openapi.json");
    let out = run(&[same]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let out = run(&["--help"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("--map-prefix FROM=TO"));

    let out = run(&[same, "--frobnicate"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown flag --frobnicate"));
}

#[test]
fn a_ref_cycle_and_a_shared_request_schema_are_reported() {
    let mut doc = document();
    doc["components"]["schemas"]["Loop"] = json!({"$ref": "#/components/schemas/Loop"});
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["loop"] = json!({"$ref": "#/components/schemas/Loop"});
    doc["paths"]["/v1/gen-pro-1.1"]["post"]["requestBody"]["content"]["application/json"]["schema"] =
        json!({"$ref": "#/components/schemas/GenDevRequest"});
    assert_flags(&doc, "$ref cycle: Loop -> Loop");
    assert_flags(
        &doc,
        "request schema GenDevRequest is shared by operations gen_dev, gen_pro_1_1",
    );
    // The surface and the diff still finish on such a document.
    assert!(xtask::surface(&doc).contains("loop: any"));
}

#[test]
fn a_pattern_that_does_not_compile_is_refused_by_the_shared_rules() {
    let mut doc = document();
    doc["components"]["schemas"]["FinetuneId"]["pattern"] = json!("([unclosed");
    // `problems` is what build.rs refuses to build by; `check` reports it.
    let shared = xtask::document::problems(&doc);
    assert_eq!(shared.len(), 1, "{shared:#?}");
    assert!(
        shared[0].starts_with("pattern \"([unclosed\" does not compile: "),
        "{shared:#?}"
    );
    assert_flags(&doc, &shared[0]);
}

#[test]
fn every_problem_build_rs_refuses_is_a_problem_of_check() {
    let mut broken = Vec::new();
    let mut doc = document();
    doc["components"]["schemas"]["FinetuneId"]["pattern"] = json!("(?<");
    broken.push(doc);
    let mut doc = document();
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["seed"] =
        json!({"$ref": "#/components/schemas/Nowhere"});
    broken.push(doc);
    let mut doc = document();
    doc["components"]["schemas"]["Loop"] = json!({"$ref": "#/components/schemas/Loop"});
    doc["components"]["schemas"]["GenDevRequest"]["properties"]["loop"] = json!({"$ref": "#/components/schemas/Loop"});
    broken.push(doc);
    let mut doc = document();
    doc["paths"]["/v1/gen-dev"]["post"]
        .as_object_mut()
        .unwrap()
        .remove("operationId");
    broken.push(doc);
    let mut doc = document();
    doc.as_object_mut().unwrap().remove("paths");
    broken.push(doc);
    for doc in broken {
        let shared = xtask::document::problems(&doc);
        assert!(!shared.is_empty());
        let checked = problems(&doc);
        for problem in shared {
            assert!(checked.contains(&problem), "{problem:?} is not in {checked:#?}");
        }
    }
}

#[test]
fn help_lists_every_task_and_an_unknown_task_gets_the_same_text_as_an_error() {
    let run = |arg: &str| {
        std::process::Command::new(env!("CARGO_BIN_EXE_xtask"))
            .arg(arg)
            .output()
            .unwrap()
    };
    let help = run("--help");
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout).into_owned();
    for task in ["check", "regen", "diff-upstream FILE", "drift FILE..."] {
        assert!(text.contains(&format!("\n  {task} ")), "{task} in:\n{text}");
    }
    let unknown = run("chekc");
    assert!(!unknown.status.success());
    assert_eq!(String::from_utf8_lossy(&unknown.stderr), text, "the usage, on stderr");
}
