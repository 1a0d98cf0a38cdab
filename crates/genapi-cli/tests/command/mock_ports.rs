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
