//! A throwaway PostgreSQL cluster on a free loopback port, for the ledger's
//! tests: Debian's server binaries, run as the `postgres` user when the
//! tests run as root (the server refuses root). Gone when dropped.
//!
//! Where no server is installed the tests say so and pass without it, except
//! under CI (`CI` set), where a missing server is a failure: `.ci/run`
//! installs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

/// The password of the `postgres` user for TCP connections.
pub const PASSWORD: &str = "ledger-test-password";

/// How a cluster is set up beyond the defaults.
#[derive(Default)]
pub struct Setup {
    /// `ssl=on` with this certificate chain and key (PEM).
    pub tls: Option<(String, String)>,
    /// pg_hba's method for TCP connections (`scram-sha-256` when `None`),
    /// e.g. `password` for a clear-text password.
    pub host_auth: Option<&'static str>,
    /// The port tried first (a test of a port taken meanwhile); a free one
    /// when `None`.
    pub first_port: Option<u16>,
    /// Commits are acknowledged only once written (`synchronous_commit=on`),
    /// so a server stopped as a crash would be loses none: for tests that
    /// stop it mid-run. Otherwise the last commits before such a stop may
    /// be lost, which only a server set up to lose them would do.
    pub durable_commits: bool,
}

pub struct Postgres {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    as_postgres: bool,
    /// The server's options, to start it again as it was.
    options: String,
}

impl Postgres {
    /// A new cluster, or `None` (outside CI) when PostgreSQL is not installed.
    pub fn start(name: &str) -> Option<Postgres> {
        Postgres::start_with(name, Setup::default())
    }

    /// [`Postgres::start`], set up as `setup` says.
    pub fn start_with(name: &str, setup: Setup) -> Option<Postgres> {
        let Some(bin) = server_binaries() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "PostgreSQL's server binaries are not installed (Debian's postgresql package); CI must have them"
            );
            eprintln!("skipped: PostgreSQL's server binaries are not installed (Debian's postgresql package)");
            return None;
        };
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!("genapi-pg-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        let mut tls_options = String::new();
        if let Some((chain, key)) = &setup.tls {
            let (cert_file, key_file) = (dir.join("server.crt"), dir.join("server.key"));
            std::fs::write(&cert_file, chain).unwrap();
            std::fs::write(&key_file, key).unwrap();
            // The server refuses a key others may read.
            std::fs::set_permissions(&key_file, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
            tls_options = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                path(&cert_file),
                path(&key_file)
            );
        }
        if as_postgres {
            run(Command::new("chown").args(["-R", "postgres:postgres"]).arg(&dir));
        }
        let data = dir.join("data");
        let port = setup.first_port.unwrap_or_else(free_port);
        let mut cluster = Postgres {
            dir: dir.clone(),
            bin,
            port,
            as_postgres,
            options: String::new(),
        };
        cluster.pg(
            "initdb",
            &[
                "-D",
                path(&data),
                "-U",
                "postgres",
                "--auth-local=trust",
                &format!("--auth-host={}", setup.host_auth.unwrap_or("scram-sha-256")),
                "--pwfile",
                path(&pwfile),
                "--no-sync",
            ],
        );
        // A free port is only known free when it is picked: another process
        // (a test's mock, another cluster) may bind it before the server
        // does. The server then fails to start, saying so in its log; a new
        // port is tried, so the race costs a retry, never a failed test.
        let commits = if setup.durable_commits { "on" } else { "off" };
        for attempt in 1..=PORT_ATTEMPTS {
            cluster.options = format!(
                "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit={commits} \
                 -c full_page_writes=off -c max_connections=300{tls_options}",
                cluster.port,
                path(&dir)
            );
            match cluster.try_start() {
                Ok(()) => return Some(cluster),
                Err(said) => assert!(
                    said.contains("could not bind") && attempt < PORT_ATTEMPTS,
                    "pg_ctl start: {said}"
                ),
            }
            cluster.port = free_port();
        }
        unreachable!("the last attempt returns or fails above")
    }

    /// Stops the server as a crash would (`pg_ctl -m immediate stop`): every
    /// connection is cut, nothing is shut down cleanly.
    pub fn stop_immediately(&mut self) {
        let data = self.dir.join("data");
        self.pg("pg_ctl", &["-D", path(&data), "-m", "immediate", "-w", "stop"]);
    }

    /// Starts the server again, on the same port with the same settings,
    /// and waits until it takes connections.
    pub fn start_again(&mut self) {
        if let Err(said) = self.try_start() {
            panic!("pg_ctl start: {said}");
        }
    }

    /// Starts the server with its options; what it said when it did not.
    fn try_start(&mut self) -> Result<(), String> {
        let (data, log) = (self.dir.join("data"), self.dir.join("log"));
        let _ = std::fs::remove_file(&log);
        let options = self.options.clone();
        let started = self
            .command(
                "pg_ctl",
                &["-D", path(&data), "-l", path(&log), "-o", &options, "-w", "start"],
            )
            .output()
            .map_err(|e| e.to_string())?;
        if started.status.success() {
            return Ok(());
        }
        Err(format!(
            "{}{}\n{}",
            String::from_utf8_lossy(&started.stdout),
            String::from_utf8_lossy(&started.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        ))
    }

    /// A URL to database `postgres` as user `postgres`.
    ///
    /// Its `connect_timeout` is a hang detector: the server runs on the
    /// test's machine, which may be slow or busy, and a connection made late
    /// is no failure of what a test looks at.
    pub fn url(&self) -> String {
        format!(
            "postgres://postgres:{PASSWORD}@127.0.0.1:{}/postgres?connect_timeout=120",
            self.port
        )
    }

    /// A URL to the cluster at `host`, with `query` (`key=value&…`) after it.
    pub fn url_at(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres:{PASSWORD}@{host}:{}/postgres?{query}", self.port)
    }

    /// Runs SQL as the superuser through `psql`.
    pub fn sql(&self, statement: &str) -> String {
        let output = self
            .command(
                "psql",
                &[
                    "-h",
                    path(&self.dir),
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    "postgres",
                    "-d",
                    "postgres",
                    "-tAc",
                    statement,
                ],
            )
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }

    /// Blocks until `query` (through [`Postgres::sql`]) answers a row,
    /// asking every 20 ms, and gives its answer; panics, naming `awaited`,
    /// when it has not after `limit`.
    pub fn await_rows(&self, awaited: &str, query: &str, limit: Duration) -> String {
        let until = Instant::now() + limit;
        loop {
            let answer = self.sql(query);
            if !answer.is_empty() {
                return answer;
            }
            assert!(Instant::now() < until, "not within {limit:?}: {awaited}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The server processes holding an advisory lock (a ledger worker's
    /// name, while no migration runs), by process id.
    pub fn advisory_lock_holders(&self) -> Vec<i32> {
        let pids = self.sql("SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND granted ORDER BY pid");
        pids.lines().map(|pid| pid.parse().unwrap()).collect()
    }

    /// Blocks until a server process not in `besides` waits for an advisory
    /// lock (a worker asking for a name another connection holds), for at
    /// most `limit`; its process id.
    pub fn await_advisory_waiter(&self, besides: &[i32], limit: Duration) -> i32 {
        let besides: Vec<String> = besides.iter().map(i32::to_string).chain(["0".into()]).collect();
        let query = format!(
            "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid NOT IN ({}) LIMIT 1",
            besides.join(", ")
        );
        self.await_rows("a request for an advisory lock, waiting", &query, limit)
            .parse()
            .unwrap()
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let binary = self.bin.join(program);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(binary).args(args);
            command
        } else {
            let mut command = Command::new(binary);
            command.args(args);
            command
        }
    }

    fn pg(&mut self, program: &str, args: &[&str]) {
        run(&mut self.command(program, args));
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self
            .command("pg_ctl", &["-D", path(&data), "-m", "immediate", "-w", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The newest installed server's binaries.
fn server_binaries() -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file() && bin.join("pg_ctl").is_file())
        .collect();
    found.sort_by_key(|bin| {
        bin.parent()
            .and_then(Path::file_name)
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// How many ports a cluster tries before its start is a failure.
const PORT_ATTEMPTS: u32 = 8;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn run(command: &mut Command) {
    let output = command.output().unwrap();
    assert!(
        output.status.success(),
        "{command:?}: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

/// A certificate authority made for one test.
pub struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
}

impl Ca {
    /// A certificate authority named `name`.
    pub fn new(name: &str) -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            issuer: Issuer::new(params, key),
            pem,
        }
    }

    /// A server certificate for `names` (DNS names or addresses) and
    /// its key, in PEM.
    pub fn server(&self, names: &[&str]) -> (String, String) {
        let mut params = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    /// The CA's certificate in a file, for `sslrootcert`.
    pub fn file(&self, dir: &crate::Dir) -> String {
        let path = dir.join(&format!("ca-{}.pem", fastrand::u32(..)));
        std::fs::write(&path, &self.pem).unwrap();
        path.to_str().unwrap().to_string()
    }
}

/// A self-signed certificate for localhost and its key.
pub fn self_signed() -> (String, String) {
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    (made.cert.pem(), made.signing_key.serialize_pem())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_port_taken_before_the_server_binds_it_costs_a_retry() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let busy = taken.local_addr().unwrap().port();
        let setup = Setup {
            first_port: Some(busy),
            ..Setup::default()
        };
        let Some(cluster) = Postgres::start_with("port-race", setup) else {
            return;
        };
        assert_ne!(cluster.port, busy, "another port was tried");
        assert_eq!(cluster.sql("SELECT 1"), "1");
    }
}
