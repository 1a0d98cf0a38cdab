//! A size the model refuses is refused before anything is sent, with the
//! nearest sizes it accepts named, ready to type.

use crate::cli::text;
use crate::common::{genapi, roomy_mock, Dir};

/// Runs `genapi generate x --size SIZE` with these extra flags and returns
/// what it said, having checked it was refused as a usage mistake.
async fn refused(dir: &Dir, mock: &genapi_mock::MockService, size: &str, flags: &[&str]) -> String {
    let run = genapi(dir, mock)
        .args(["generate", "x", "--size", size, "-o", "x.png"])
        .args(flags)
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(2), "{said}");
    said
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_size_names_the_nearest_sizes_the_model_takes_and_sends_nothing() {
    let mock = roomy_mock(10).await;
    let dir = Dir::new("refused-sizes");

    let said = refused(&dir, &mock, "1000x768", &[]).await;
    assert!(said.contains("multiple of 16"), "{said}");
    assert!(
        said.contains("the nearest sizes gen-2-pro takes: 992x768 or 1008x768"),
        "{said}"
    );

    // Above the pixel limit: one size, within it.
    let said = refused(&dir, &mock, "8000x8000", &[]).await;
    assert!(said.contains("the nearest size gen-2-pro takes: 2048x2048"), "{said}");

    // Another model's bounds: 256 to 1440 in steps of 32.
    let said = refused(&dir, &mock, "2000x100", &["-m", "gen-dev"]).await;
    assert!(said.contains("the nearest size gen-dev takes: 1440x256"), "{said}");

    assert_eq!(mock.requests().len(), 0, "a refused size was sent");
    assert!(!dir.join("x.png").exists());
}
