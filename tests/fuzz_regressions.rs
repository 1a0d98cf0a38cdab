//! Replays the kept fuzz corpora (`fuzz/seeds` and the minimised
//! `fuzz/regressions`) through the fuzz targets' own checks, so what fuzzing
//! found keeps being tested by `cargo test`.

#[path = "../fuzz/checks.rs"]
mod checks;

fn replay(target: &str, check: fn(&[u8])) -> usize {
    let mut count = 0;
    for set in ["seeds", "regressions"] {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz")
            .join(set)
            .join(target);
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            check(&std::fs::read(entry.path()).unwrap());
            count += 1;
        }
    }
    count
}

#[test]
fn decode_responses_corpus() {
    assert!(replay("decode_responses", checks::decode_responses) >= 6);
}

#[test]
fn webhook_verify_corpus() {
    assert!(replay("webhook_verify", checks::webhook_verify) >= 2);
}

#[test]
fn image_inputs_corpus() {
    assert!(replay("image_inputs", checks::image_inputs) >= 4);
}
