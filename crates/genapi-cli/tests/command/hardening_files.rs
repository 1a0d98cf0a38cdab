//! Files the command and the library write or read where a user or an
//! attacker placed something: outputs named without an extension, journals
//! that are links, saves cut short.
#![cfg(unix)]

use std::time::Duration;

use crate::common;
use common::{genapi_alone as genapi, Dir};

/// `-o cat` (no extension) becomes `cat.jpg` at the save, so the check
/// before paying looks at every name the save may pick: with `cat.jpg`
/// taken, nothing is submitted.
#[test]
fn an_output_without_extension_is_checked_under_the_name_the_save_will_use() {
    let dir = Dir::new("output-without-extension");
    std::fs::write(dir.join("cat.jpg"), b"mine").unwrap();
    let run = genapi(&dir).args(["generate", "x", "-o", "cat"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !stderr.contains("submitted task"),
        "paid for a result it then threw away:\n{stderr}"
    );
    assert_eq!(run.status.code(), Some(2), "{stderr}");
    assert_eq!(std::fs::read(dir.join("cat.jpg")).unwrap(), b"mine");
}

/// A journal that is a link to a device is refused (its replay would never
/// end).
#[test]
fn a_journal_that_is_a_link_to_a_device_is_refused() {
    let dir = Dir::new("journal-device");
    let path = dir.join("journal.jsonl");
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    let opened = genapi_batch::FileJournal::open(&path);
    assert!(
        opened.is_err(),
        "/dev/zero opened as a journal (its replay would never end)"
    );
}

/// A journal that is a link to a file elsewhere (planted in a shared --out)
/// is never written through.
#[test]
fn a_journal_is_never_written_through_a_planted_link() {
    use genapi_batch::{Journal, Record};
    let dir = Dir::new("journal-link");
    let victim = dir.join("victim.txt");
    std::fs::write(&victim, b"").unwrap();
    std::fs::create_dir_all(dir.join("out")).unwrap();
    let path = dir.join("out").join("journal.jsonl");
    std::os::unix::fs::symlink(&victim, &path).unwrap();
    if let Ok(mut journal) = genapi_batch::FileJournal::open(&path) {
        let _ = journal.append(&Record::Refused {
            line: 1,
            error: "x".into(),
        });
    }
    assert_eq!(
        std::fs::read(&victim).unwrap(),
        b"",
        "the file the link names was written"
    );
}

/// A save that is cancelled (a caller's timeout, a batch stopping, the
/// command's --timeout) leaves no `.NAME.partial` behind.
#[tokio::test(start_paused = true)]
async fn a_cancelled_save_leaves_no_partial_file() {
    use genapi::api::types;
    use genapi_mock::{Fault, MockService};
    let mock = MockService::start().await.unwrap();
    let client = mock.client().unwrap();
    let output = client
        .run(types::Gen2ProRequest::builder().prompt("x").width(64).height(64))
        .await
        .unwrap();
    mock.inject(Fault::unavailable("/mock/results/", 3).times(4));
    let dir = Dir::new("cancelled-save");
    let saved = tokio::time::timeout(Duration::from_secs(1), output.save(dir.join("x.jpg"))).await;
    assert!(saved.is_err(), "cancelled");
    let left: Vec<_> = std::fs::read_dir(&dir.0)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}
