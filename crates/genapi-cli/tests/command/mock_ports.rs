//! `genapi mock --addr IP:PORT` listens on PORT and the two ports after it
//! (its polling and delivery hosts): one of those taken is said as such,
//! with another port to choose.

use crate::cli::text;
use crate::common::{genapi_alone, Dir};

#[test]
fn a_taken_polling_port_is_named_as_the_polling_host_of_addr() {
    let dir = Dir::new("mock-ports");
    // A port taken whose port before is free: that one is --addr. Both are
    // below the ports handed out for connections, so no other test's
    // connection takes --addr's port before the mock listens on it.
    let first = crate::common::free_ports(2);
    let taken = std::net::TcpListener::bind(("127.0.0.1", first + 1)).unwrap();
    let addr = format!("127.0.0.1:{first}");
    let port = first + 1;
    let run = genapi_alone(&dir)
        .args(["mock", "--addr", &addr, "--timeout", "5"])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_ne!(run.status.code(), Some(0), "{said}");
    assert!(
        said.contains(&format!("port {port} is the polling host of --addr {addr}")),
        "{said}"
    );
    assert!(
        said.contains(&format!("choose another port, e.g. --addr 127.0.0.1:{}", port + 1)),
        "{said}"
    );
    drop(taken);
}

/// `eval "$(genapi mock --background)"` then a command, typed at once: the
/// first returns once the mock answers, so the second finds it there, and
/// `kill $GENAPI_MOCK_PID` stops it. A mock that cannot start says why.
#[cfg(unix)]
#[test]
fn a_mock_started_in_the_background_answers_the_next_command_at_once() {
    let dir = Dir::new("mock-background");
    let program = env!("CARGO_BIN_EXE_genapi");
    let template = genapi_alone(&dir);
    let mut shell = std::process::Command::new("sh");
    shell.current_dir(&dir.0);
    for (name, value) in template.get_envs() {
        match value {
            Some(value) => shell.env(name, value),
            None => shell.env_remove(name),
        };
    }
    let script = format!(
        r#"eval "$('{program}' mock --background --duration-ms 50)" || exit 90
'{program}' generate 'a fox' -o fox.jpg; code=$?
kill "$GENAPI_MOCK_PID" || exit 91
exit $code"#
    );
    let run = shell.arg("-c").arg(script).output().unwrap();
    let said = text(&run.stderr);
    assert_eq!(run.status.code(), Some(0), "{said}");
    assert!(said.contains("started in the background, process"), "{said}");
    assert!(
        !said.contains("using the built-in mock"),
        "the background mock answered: {said}"
    );
    assert!(dir.join("fox.jpg").is_file());

    // A port taken: nothing starts, and that is said.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let run = genapi_alone(&dir)
        .args(["mock", "--background", "--addr", &addr])
        .output()
        .unwrap();
    let said = text(&run.stderr);
    assert_ne!(run.status.code(), Some(0), "{said}");
    assert!(
        said.contains("cannot start the mock") && said.contains("the mock did not start"),
        "{said}"
    );
    assert!(run.stdout.is_empty(), "no variables: {}", text(&run.stdout));
}
