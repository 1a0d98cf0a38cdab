//! The ledger's connection as the URL's `sslmode`, `sslrootcert` and
//! `require_auth` ask: against real PostgreSQL clusters with certificates
//! made here, and against a stand-in server on a loopback port that speaks
//! just enough of the protocol to misbehave.

use std::time::Duration;

use genapi_ledger::{LedgerError, SharedSeats};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::pg::{self_signed, Ca, Postgres, Setup, PASSWORD};
use crate::common::Dir;

/// Connects as a worker's seats do, within 30 s.
async fn connect(url: &str) -> Result<SharedSeats, LedgerError> {
    tokio::time::timeout(Duration::from_secs(30), SharedSeats::connect(url, "tls", 1))
        .await
        .expect("still connecting after 30 s")
}

async fn connects(url: &str) -> SharedSeats {
    match connect(url).await {
        Ok(seats) => seats,
        Err(error) => panic!("{error}"),
    }
}

async fn refused(url: &str) -> LedgerError {
    match connect(url).await {
        Ok(_) => panic!("connected"),
        Err(error) => error,
    }
}

/// Whether the connection named `application` is encrypted, as the
/// server sees it.
fn encrypted(pg: &Postgres, application: &str) -> String {
    pg.sql(&format!(
        "SELECT ssl FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE application_name = '{application}'"
    ))
}

/// `sslmode=require`, and no `sslmode` at all (`prefer`), encrypt the
/// ledger's own connection to a server with a self-signed certificate;
/// `disable` does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_and_the_default_encrypt_against_a_self_signed_certificate() {
    let setup = Setup {
        tls: Some(self_signed()),
        ..Setup::default()
    };
    let Some(pg) = Postgres::start_with("tls-require", setup) else {
        return;
    };
    let _require = connects(&pg.url_at("127.0.0.1", "sslmode=require&application_name=require")).await;
    let _prefer = connects(&pg.url_at("127.0.0.1", "application_name=prefer")).await;
    let _disable = connects(&pg.url_at("127.0.0.1", "sslmode=disable&application_name=disable")).await;
    assert_eq!(encrypted(&pg, "require"), "t");
    assert_eq!(
        encrypted(&pg, "prefer"),
        "t",
        "prefer is the default and the server offers TLS"
    );
    assert_eq!(encrypted(&pg, "disable"), "f");
}

/// `verify-full` checks the chain against `sslrootcert` and the name:
/// it connects to a certificate made out to 127.0.0.1 and localhost
/// (also dialled through `hostaddr`), and refuses the same server
/// checked against the platform's roots or against another CA.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_full_accepts_the_right_ca_and_name_and_nothing_else() {
    let ca = Ca::new("ledger test CA");
    let setup = Setup {
        tls: Some(ca.server(&["localhost", "127.0.0.1"])),
        ..Setup::default()
    };
    let Some(pg) = Postgres::start_with("tls-verify-full", setup) else {
        return;
    };
    let dir = Dir::new("tls-verify-full");
    let root = ca.file(&dir);
    let by_address = pg.url_at(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={root}&application_name=a"),
    );
    let _a = connects(&by_address).await;
    let by_name = pg.url_at(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={root}&hostaddr=127.0.0.1&application_name=n"),
    );
    let _n = connects(&by_name).await;
    assert_eq!(encrypted(&pg, "a"), "t");
    assert_eq!(encrypted(&pg, "n"), "t");

    let platform = refused(&pg.url_at("127.0.0.1", "sslmode=verify-full")).await;
    let LedgerError::Insecure { reason, fix, .. } = &platform else {
        panic!("{platform}")
    };
    assert!(
        reason.contains("certificate") && fix.contains("sslrootcert"),
        "{platform}"
    );
    let other = Ca::new("another CA").file(&dir);
    let wrong_ca = refused(&pg.url_at("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={other}"))).await;
    assert!(matches!(wrong_ca, LedgerError::Insecure { .. }), "{wrong_ca}");
    for error in [&platform, &wrong_ca] {
        assert!(!error.to_string().contains(PASSWORD), "{error}");
    }
    // Whoever can change the roots decides which server gets the password.
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o666)).unwrap();
    let planted = refused(&pg.url_at("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={root}"))).await;
    assert!(
        matches!(planted, LedgerError::Settings { .. }) && planted.to_string().contains("chmod go-w"),
        "{planted}"
    );
}

/// A certificate made out to another name: `verify-full` refuses it
/// and says to name the server as the certificate does or to use
/// `verify-ca`; `verify-ca`, with the right CA, connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_certificate_for_another_name_fails_verify_full_and_passes_verify_ca() {
    let ca = Ca::new("ledger test CA");
    let setup = Setup {
        tls: Some(ca.server(&["db.elsewhere.test"])),
        ..Setup::default()
    };
    let Some(pg) = Postgres::start_with("tls-other-name", setup) else {
        return;
    };
    let dir = Dir::new("tls-other-name");
    let root = ca.file(&dir);
    let full = refused(&pg.url_at("127.0.0.1", &format!("sslmode=verify-full&sslrootcert={root}"))).await;
    let LedgerError::Insecure { fix, .. } = &full else {
        panic!("{full}")
    };
    assert!(fix.contains("verify-ca"), "{full}");
    let _ca = connects(&pg.url_at(
        "127.0.0.1",
        &format!("sslmode=verify-ca&sslrootcert={root}&application_name=ca"),
    ))
    .await;
    assert_eq!(encrypted(&pg, "ca"), "t");
}

/// A server set up for clear-text passwords (`password` in pg_hba):
/// over a plain connection the ledger refuses it, saying what to
/// change; `require_auth=password` opts in; over TLS (`require`, or the
/// default when the server offers TLS) it is accepted without opting in;
/// `require_auth=scram-sha-256` refuses it even over TLS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clear_text_password_goes_only_over_tls_or_when_allowed() {
    let ca = Ca::new("clear-text test CA");
    let setup = Setup {
        tls: Some(ca.server(&["localhost", "127.0.0.1"])),
        host_auth: Some("password"),
        ..Setup::default()
    };
    let Some(pg) = Postgres::start_with("tls-clear-text", setup) else {
        return;
    };
    let plain = refused(&pg.url_at("127.0.0.1", "sslmode=disable")).await;
    let LedgerError::Insecure { reason, fix, .. } = &plain else {
        panic!("{plain}")
    };
    assert!(reason.contains("clear text") && reason.contains("not sent"), "{plain}");
    assert!(
        fix.contains("sslmode=verify-full") && fix.contains("require_auth=password"),
        "{plain}"
    );
    assert!(!plain.to_string().contains(PASSWORD), "{plain}");

    let _allowed = connects(&pg.url_at(
        "127.0.0.1",
        "sslmode=disable&require_auth=password&application_name=opt-in",
    ))
    .await;
    // Encrypted to a certificate nobody checked, whoever answered in the
    // server's place would read it: refused, by default and with require.
    for unchecked in ["sslmode=require", "application_name=default"] {
        let refused = refused(&pg.url_at("127.0.0.1", unchecked)).await;
        let LedgerError::Insecure { reason, .. } = &refused else {
            panic!("{refused}")
        };
        assert!(
            reason.contains("not checked") && reason.contains("not sent"),
            "{refused}"
        );
        assert!(!refused.to_string().contains(PASSWORD), "{refused}");
    }
    let dir = Dir::new("tls-clear-text");
    let root = ca.file(&dir);
    let _checked = connects(&pg.url_at(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={root}&application_name=checked"),
    ))
    .await;
    let _require_checked = connects(&pg.url_at(
        "127.0.0.1",
        &format!("sslmode=require&sslrootcert={root}&application_name=require-checked"),
    ))
    .await;
    assert_eq!(encrypted(&pg, "opt-in"), "f");
    assert_eq!(encrypted(&pg, "checked"), "t");
    assert_eq!(encrypted(&pg, "require-checked"), "t");

    let scram_only = refused(&pg.url_at("127.0.0.1", "sslmode=require&require_auth=scram-sha-256")).await;
    let LedgerError::Insecure { reason, .. } = &scram_only else {
        panic!("{scram_only}")
    };
    assert!(reason.contains("password authentication"), "{scram_only}");
}

/// `sslmode=bogus` is a URL error that names the allowed values.
#[tokio::test]
async fn an_unknown_sslmode_names_the_allowed_values() {
    let error = refused(&format!(
        "postgres://ledger:{PASSWORD}@127.0.0.1:1/ledger?sslmode=bogus"
    ))
    .await;
    assert!(matches!(error, LedgerError::Url { .. }), "{error}");
    let said = error.to_string();
    for mode in ["disable", "prefer", "require", "verify-ca", "verify-full"] {
        assert!(said.contains(mode), "{said}");
    }
    assert!(!said.contains(PASSWORD), "{said}");
}

/// What the stand-in server does once it has read the start-up message.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    /// AuthenticationCleartextPassword.
    AskForTheClearTextPassword,
    /// An authentication message whose length says 2 GiB (2^31 - 1
    /// bytes, the most the driver takes as a length).
    ClaimTwoGibibytes,
    /// AuthenticationOk, then NoticeResponse after NoticeResponse.
    SendNoticesForEver,
    /// Nothing at all, not even the answer to the request for TLS.
    NeverAnswer,
}

/// A password only the stand-in server is given.
const SECRET: &str = "stand-in-secret-9f2c";

/// A stand-in server on a loopback port for one connection: it answers a
/// request for TLS with N, reads the start-up message, then does `then`.
/// Its task ends with every byte the client sent after the start-up
/// message, once the client closed (or 30 s passed).
async fn stand_in(then: Then) -> (u16, tokio::task::JoinHandle<Vec<u8>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut rest = Vec::new();
        if then != Then::NeverAnswer {
            let mut first = packet(&mut socket).await;
            if first == [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f] {
                socket.write_all(b"N").await.unwrap();
                first = packet(&mut socket).await;
            }
            assert_eq!(&first[4..8], &[0, 3, 0, 0], "a start-up message of protocol 3.0");
            match then {
                Then::AskForTheClearTextPassword => {
                    socket.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 3]).await.unwrap();
                }
                Then::ClaimTwoGibibytes => {
                    socket
                        .write_all(&[b'R', 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 10])
                        .await
                        .unwrap();
                    socket.write_all(&[0; 4096]).await.unwrap();
                }
                Then::SendNoticesForEver => {
                    // AuthenticationOk (a trusting server), then notices,
                    // which the driver keeps until the session is ready.
                    socket.write_all(&[b'R', 0, 0, 0, 8, 0, 0, 0, 0]).await.unwrap();
                    // A message field of 1 KiB, then the end of the fields.
                    let mut body = vec![b'M'];
                    body.extend_from_slice(&[b'x'; 1024]);
                    body.extend_from_slice(&[0, 0]);
                    let mut notice = vec![b'N'];
                    notice.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
                    notice.extend_from_slice(&body);
                    // Up to 256 MiB, until the client hangs up.
                    for _ in 0..(256 << 10) {
                        if socket.write_all(&notice).await.is_err() {
                            break;
                        }
                    }
                }
                Then::NeverAnswer => {}
            }
        }
        // Until the client hangs up, or sends a password message (then
        // the stand-in hangs up: it has seen enough).
        let read = async {
            let mut chunk = [0; 4096];
            while let Ok(n @ 1..) = socket.read(&mut chunk).await {
                rest.extend_from_slice(&chunk[..n]);
                if message_types(&rest).contains(&'p') {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(30), read).await;
        rest
    });
    (port, task)
}

/// A length-prefixed packet (the request for TLS, the start-up message).
async fn packet(socket: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut length = [0; 4];
    socket.read_exact(&mut length).await.unwrap();
    let mut packet = length.to_vec();
    packet.resize(u32::from_be_bytes(length) as usize, 0);
    socket.read_exact(&mut packet[4..]).await.unwrap();
    packet
}

/// The type bytes of the messages a client sent.
fn message_types(mut bytes: &[u8]) -> Vec<char> {
    let mut types = Vec::new();
    while bytes.len() >= 5 {
        types.push(bytes[0] as char);
        let length = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        bytes = &bytes[(1 + length).min(bytes.len())..];
    }
    types
}

fn stand_in_url(port: u16, query: &str) -> String {
    format!("postgres://ledger:{SECRET}@127.0.0.1:{port}/ledger?{query}")
}

/// A server asking for the password in clear over a plain connection,
/// whether TLS was not asked for (`disable`) or was and was declined
/// (the default, `prefer`): refused with the new error, and the client
/// sent no PasswordMessage, nor the password in any form.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_password_is_never_sent_to_a_server_asking_for_it_in_clear() {
    for query in ["sslmode=disable", "connect_timeout=20"] {
        let (port, server) = stand_in(Then::AskForTheClearTextPassword).await;
        let error = refused(&stand_in_url(port, query)).await;
        let sent = server.await.unwrap();
        let types = message_types(&sent);
        assert!(
            !types.contains(&'p'),
            "{query}: the client answered with a password message: {types:?}"
        );
        assert!(
            !sent.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{query}: the password went out"
        );
        assert!(matches!(error, LedgerError::Insecure { .. }), "{query}: {error}");
        assert!(!error.to_string().contains(SECRET), "{error}");
    }
}

/// A message claiming 2 GiB is refused at its header, at once, rather
/// than waited for and buffered (before, the driver reserved room for it
/// and waited for the rest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_claiming_two_gibibytes_is_refused_at_its_header() {
    let (port, server) = stand_in(Then::ClaimTwoGibibytes).await;
    let error = refused(&stand_in_url(port, "sslmode=disable&connect_timeout=60")).await;
    let LedgerError::Unreachable { reason, .. } = &error else {
        panic!("{error}")
    };
    assert!(reason.contains("2147483647") && reason.contains("64 MiB"), "{error}");
    server.abort();
}

/// A server streaming notices without end during the start-up is cut
/// off by the bound on what may come before the session is ready,
/// long before the connect timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn endless_notices_during_the_start_up_are_cut_off() {
    let (port, server) = stand_in(Then::SendNoticesForEver).await;
    let error = refused(&stand_in_url(port, "sslmode=disable&connect_timeout=60")).await;
    let LedgerError::Unreachable { reason, .. } = &error else {
        panic!("{error}")
    };
    assert!(reason.contains("without finishing the start"), "{error}");
    server.abort();
}

/// A listener that accepts and never answers holds the worker only for
/// the connect timeout (1 s here): the timeout covers the whole set-up,
/// not only TCP, whether the client waits for the answer to its request
/// for TLS (the default) or for authentication (`disable`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_never_answers_is_given_up_at_the_connect_timeout() {
    for query in ["connect_timeout=1", "sslmode=disable&connect_timeout=1"] {
        let (port, server) = stand_in(Then::NeverAnswer).await;
        let error = refused(&stand_in_url(port, query)).await;
        let LedgerError::Unreachable { reason, .. } = &error else {
            panic!("{query}: {error}")
        };
        // The 1 s limit, not any later one, ended the wait.
        assert!(reason.contains("within 1 s (connect_timeout)"), "{query}: {error}");
        server.abort();
    }
}
