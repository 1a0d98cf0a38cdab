//! How the ledger's connection is protected, read from the ledger URL as
//! libpq reads it.
//!
//! # Modes (`sslmode`)
//!
//! - `disable`: no TLS; everything, the password included, travels in
//!   clear.
//! - `prefer` (the default): TLS when the server offers it, else in clear.
//!   The certificate is not checked, so this protects against a listener on
//!   the path, not against a machine that answers in the server's place.
//! - `require`: TLS or nothing; the certificate is not checked.
//! - `verify-ca`: TLS, and the certificate must be signed by a CA in
//!   `sslrootcert`; its host name is not compared.
//! - `verify-full`: TLS, the certificate signed by a CA in `sslrootcert` (or,
//!   without it, by one the platform trusts), and made out to the host name
//!   of the URL (or to its `hostaddr` when it names no host).
//!
//! `sslrootcert=PATH` names a PEM file of CA certificates. Given with
//! `prefer` or `require`, the chain is checked as with `verify-ca` whenever
//! TLS is used, as libpq does. `sslrootcert=system` stands for the
//! platform's roots and asks for `verify-full`. `verify-ca` has no such
//! fallback: a CA check against every CA the platform trusts, with any name,
//! would accept any certificate bought for any site.
//!
//! PostgreSQL offers no TLS over a Unix socket: there the connection is
//! never encrypted, whatever the mode, as with libpq.
//!
//! # When the password is sent
//!
//! A server asks for the password in one of several ways. SCRAM and MD5 never
//! put the password itself on the wire; a clear-text request
//! (`password` in `pg_hba.conf`) does. On an unencrypted connection anyone on
//! the path would read it, and on one whose certificate was not checked
//! (`prefer` or `require` without `sslrootcert`) a machine answering in the
//! server's place would: such a request is refused on both, before the
//! password is sent (stricter than libpq, which sends it over any TLS),
//! unless the URL allows it with libpq's `require_auth`: a comma list of `password`,
//! `md5`, `scram-sha-256`, `gss`, `sspi` and `none` (the server asks for
//! nothing), or the same names each preceded by `!` for every way but
//! those. When `require_auth` is given, exactly the ways it allows are
//! accepted, encrypted or not; when it is absent, every way is accepted but
//! a clear-text password on a connection that is not encrypted to a checked
//! certificate.
//!
//! Channel binding (SCRAM's proof that the TLS session ends at the server
//! itself) is not offered: the TLS stream reports no binding data, so
//! `channel_binding=require` fails to authenticate.

use std::io;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::LedgerError;

/// libpq's `sslmode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    const NAMES: &'static str = "disable, prefer, require, verify-ca, verify-full";

    fn read(value: &str) -> Result<Mode, String> {
        Ok(match value {
            "disable" => Mode::Disable,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            other => return Err(format!("sslmode {other:?} is not one of {}", Mode::NAMES)),
        })
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Mode::Disable => "disable",
            Mode::Prefer => "prefer",
            Mode::Require => "require",
            Mode::VerifyCa => "verify-ca",
            Mode::VerifyFull => "verify-full",
        }
    }

    /// Whether a connection without TLS is refused.
    pub(super) fn requires_tls(self) -> bool {
        !matches!(self, Mode::Disable | Mode::Prefer)
    }

    /// tokio-postgres's mode: whether it asks for TLS and whether it may go
    /// on without.
    fn driver(self) -> tokio_postgres::config::SslMode {
        use tokio_postgres::config::SslMode;
        match self {
            Mode::Disable => SslMode::Disable,
            Mode::Prefer => SslMode::Prefer,
            Mode::Require | Mode::VerifyCa | Mode::VerifyFull => SslMode::Require,
        }
    }
}

/// Where the CA certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Roots {
    /// None given: nothing checked, or the platform's for `verify-full`.
    Unset,
    /// `sslrootcert=system`.
    System,
    /// `sslrootcert=PATH`, or `PGSSLROOTCERT` (the second: where it was
    /// given, for messages).
    File(PathBuf, &'static str),
}

/// The ways of authentication libpq's `require_auth` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Password,
    Md5,
    ScramSha256,
    Gss,
    Sspi,
    None,
}

impl Method {
    const ALL: [Method; 6] = [
        Method::Password,
        Method::Md5,
        Method::ScramSha256,
        Method::Gss,
        Method::Sspi,
        Method::None,
    ];
    const NAMES: &'static str = "password, md5, scram-sha-256, gss, sspi, none (or each with a leading !)";

    fn read(name: &str) -> Option<Method> {
        Method::ALL.into_iter().find(|method| method.name() == name)
    }

    fn name(self) -> &'static str {
        match self {
            Method::Password => "password",
            Method::Md5 => "md5",
            Method::ScramSha256 => "scram-sha-256",
            Method::Gss => "gss",
            Method::Sspi => "sspi",
            Method::None => "none",
        }
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

/// The ways `require_auth` allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Allowed {
    bits: u8,
    /// As written, for messages.
    negated: bool,
}

impl Allowed {
    fn read(value: &str) -> Result<Allowed, String> {
        let bad = |what: String| format!("require_auth: {what}; the methods are {}", Method::NAMES);
        let mut listed = 0u8;
        let mut negated = None;
        for item in value.split(',') {
            let (negative, name) = match item.strip_prefix('!') {
                Some(name) => (true, name),
                None => (false, item),
            };
            if *negated.get_or_insert(negative) != negative {
                return Err(bad("negated and plain methods cannot be mixed".into()));
            }
            let method = Method::read(name).ok_or_else(|| bad(format!("{item:?} is not a method")))?;
            if listed & method.bit() != 0 {
                return Err(bad(format!("{name:?} is listed twice")));
            }
            listed |= method.bit();
        }
        let negated = negated.unwrap_or(false);
        let every = Method::ALL.iter().fold(0, |bits, method| bits | method.bit());
        let bits = if negated { every & !listed } else { listed };
        Ok(Allowed { bits, negated })
    }

    fn allows(self, method: Method) -> bool {
        self.bits & method.bit() != 0
    }

    fn describe(self) -> String {
        let names: Vec<&str> = Method::ALL
            .iter()
            .filter(|method| self.allows(**method))
            .map(|method| method.name())
            .collect();
        if names.is_empty() {
            "require_auth allows no method".into()
        } else {
            format!("require_auth allows only {}", names.join(", "))
        }
    }
}

/// The protection the ledger URL asks for.
#[derive(Clone, Debug)]
pub(super) struct Security {
    pub(super) mode: Mode,
    roots: Roots,
    require_auth: Option<Allowed>,
}

impl Security {
    /// Judges an authentication request (message `R`) of the server:
    /// `code` is its kind, `asked` whether the server asked for a way of
    /// authentication earlier on this connection.
    pub(super) fn judge_auth(&self, code: u32, encrypted: bool, asked: bool) -> Result<(), Refusal> {
        let method = match code {
            // AuthenticationOk: after an exchange, or at once (no method).
            0 if asked => return Ok(()),
            0 => Method::None,
            3 => Method::Password,
            5 => Method::Md5,
            7 | 8 => Method::Gss,
            9 => Method::Sspi,
            10..=12 => Method::ScramSha256,
            // Unknown to libpq's `require_auth` and to the driver: the
            // driver refuses it unless `require_auth` already does.
            _ => {
                return match self.require_auth {
                    Some(allowed) => Err(Refusal::Insecure {
                        reason: format!(
                            "the server asked for authentication of kind {code}, which {}",
                            allowed.describe()
                        ),
                        fix: "change require_auth in the ledger URL".into(),
                    }),
                    None => Ok(()),
                }
            }
        };
        match self.require_auth {
            Some(allowed) if allowed.allows(method) => Ok(()),
            Some(allowed) => Err(Refusal::Insecure {
                reason: match method {
                    Method::None => format!(
                        "the server let the user in without authentication, and {}",
                        allowed.describe()
                    ),
                    _ => format!(
                        "the server asked for {} authentication, and {}{}",
                        method.name(),
                        allowed.describe(),
                        if allowed.negated { " (given as negations)" } else { "" }
                    ),
                },
                fix: "change require_auth in the ledger URL, or the server's pg_hba.conf".into(),
            }),
            None if method == Method::Password && !encrypted => Err(Refusal::Insecure {
                reason: "the server asked for the password in clear text over an unencrypted connection; \
                         it was not sent"
                    .into(),
                fix: "in the ledger URL, use sslmode=verify-full (with sslrootcert=PATH for a private CA) to \
                      encrypt the connection to a checked server (the server needs ssl=on), or add \
                      require_auth=password to send it in clear all the same"
                    .into(),
            }),
            None if method == Method::Password && !self.checks_certificate() => Err(Refusal::Insecure {
                reason: "the server asked for the password in clear text over a connection whose certificate \
                         was not checked, so whoever answered in its place would read it; it was not sent"
                    .into(),
                fix: "in the ledger URL, use sslmode=verify-full (with sslrootcert=PATH for a private CA), or \
                      add require_auth=password to send it all the same"
                    .into(),
            }),
            None => Ok(()),
        }
    }

    /// Whether a TLS connection's certificate is checked: `verify-ca`,
    /// `verify-full`, or any mode with `sslrootcert`.
    fn checks_certificate(&self) -> bool {
        matches!(self.mode, Mode::VerifyCa | Mode::VerifyFull) || !matches!(self.roots, Roots::Unset)
    }

    /// The TLS configuration for this mode, `None` for `disable`.
    pub(super) async fn client_config(&self) -> Result<Option<Arc<rustls::ClientConfig>>, LedgerError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match (&self.roots, self.mode) {
            (_, Mode::Disable) => return Ok(None),
            (Roots::File(path, given), mode) => {
                let roots = read_roots(path, given).await?;
                Arc::new(Verifier {
                    roots: Some(Arc::new(roots)),
                    check_name: mode == Mode::VerifyFull,
                    provider: provider.clone(),
                })
            }
            (Roots::System, _) | (Roots::Unset, Mode::VerifyFull) => {
                let platform =
                    rustls_platform_verifier::Verifier::new(provider.clone()).map_err(|e| LedgerError::Url {
                        reason: format!(
                            "the platform's certificate roots cannot be loaded ({e}); give sslrootcert=PATH"
                        ),
                    })?;
                Arc::new(platform)
            }
            // `read_url` refuses verify-ca without roots.
            (Roots::Unset, Mode::Prefer | Mode::Require | Mode::VerifyCa) => Arc::new(Verifier {
                roots: None,
                check_name: false,
                provider: provider.clone(),
            }),
        };
        let mut config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| LedgerError::Url {
                reason: format!("TLS versions: {e}"),
            })?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        // PostgreSQL 17 and later check it on a direct TLS connection;
        // earlier servers ignore it.
        config.alpn_protocols = vec![b"postgresql".to_vec()];
        Ok(Some(Arc::new(config)))
    }

    /// What a failed TLS handshake means and what to change, when the
    /// server's certificate is what failed it (`None` otherwise: a network
    /// or protocol failure).
    pub(super) fn certificate_refusal(&self, error: &io::Error, name: &str) -> Option<Refusal> {
        let error = error.get_ref()?.downcast_ref::<rustls::Error>()?;
        let fix = match error {
            rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            ) => format!(
                "in the ledger URL, name the server as its certificate does (it is not made out to {name:?}), \
                 or use sslmode=verify-ca to check the CA alone"
            ),
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => match self.roots {
                Roots::File(..) => "in the ledger URL, give the CA that signed the server's certificate with \
                                   sslrootcert=PATH (the one given did not sign it)"
                    .into(),
                _ => "in the ledger URL, give the CA that signed the server's certificate with sslrootcert=PATH, \
                      or use sslmode=require to encrypt without checking it"
                    .into(),
            },
            rustls::Error::InvalidCertificate(_) => {
                "renew the server's certificate, or give the CA that signed it with sslrootcert=PATH in the \
                 ledger URL"
                    .into()
            }
            // The platform's verifier, unable to check (no roots found).
            rustls::Error::General(_) | rustls::Error::Other(_) => {
                "in the ledger URL, give the CA that signed the server's certificate with sslrootcert=PATH".into()
            }
            _ => return None,
        };
        Some(Refusal::Insecure {
            reason: format!(
                "sslmode={}: the server's certificate was not accepted ({error})",
                self.mode.name()
            ),
            fix,
        })
    }
}

/// Why a connection was given up.
#[derive(Debug, Clone)]
pub(super) enum Refusal {
    /// For its safety: the URL asks for more than the server gives.
    Insecure {
        /// What happened.
        reason: String,
        /// What to change.
        fix: String,
    },
    /// The server broke the protocol or a bound.
    Broken(String),
}

impl Refusal {
    /// The error for the ledger's caller; `at` is the host and port.
    pub(super) fn into_error(self, at: &str) -> LedgerError {
        match self {
            Refusal::Insecure { reason, fix } => LedgerError::Insecure {
                at: at.to_string(),
                reason,
                fix,
            },
            Refusal::Broken(reason) => LedgerError::Unreachable {
                at: at.to_string(),
                reason,
            },
        }
    }

    pub(super) fn to_io(&self) -> io::Error {
        match self {
            Refusal::Insecure { reason, fix } => {
                io::Error::new(io::ErrorKind::PermissionDenied, format!("{reason}; {fix}"))
            }
            Refusal::Broken(reason) => io::Error::new(io::ErrorKind::InvalidData, reason.clone()),
        }
    }
}

/// Reads the options tokio-postgres does not know (`sslmode` as libpq
/// reads it, `sslrootcert`, `require_auth`) out of the ledger URL and
/// gives the rest to tokio-postgres. As with libpq, the environment's
/// `PGSSLMODE`, `PGSSLROOTCERT` and `PGREQUIREAUTH` stand for options the
/// URL does not give (an empty one for none).
pub(super) fn read_url(url: &str) -> Result<(tokio_postgres::Config, Security), LedgerError> {
    read_url_in(url, |name| std::env::var(name).ok())
}

/// The environment variables libpq reads for this module's options.
const ENVIRONMENT: [(&str, Key); 3] = [
    ("PGSSLMODE", Key::SslMode),
    ("PGSSLROOTCERT", Key::SslRootCert),
    ("PGREQUIREAUTH", Key::RequireAuth),
];

/// [`read_url`] with the environment read through `env`.
fn read_url_in(
    url: &str,
    env: impl Fn(&str) -> Option<String>,
) -> Result<(tokio_postgres::Config, Security), LedgerError> {
    let invalid = |reason: String| LedgerError::Url { reason };
    let in_environment = |reason: String| LedgerError::Settings { reason };
    let (rest, from_url) = take_options(url).map_err(invalid)?;
    let mut config: tokio_postgres::Config = rest
        .parse()
        .map_err(|e: tokio_postgres::Error| invalid(crate::error::describe(&e)))?;
    // The environment's first, so the URL's own, read after, win.
    let mut options: Vec<(Key, String, Option<&str>)> = ENVIRONMENT
        .iter()
        .filter_map(|(name, key)| Some((*key, env(name).filter(|v| !v.is_empty())?, Some(*name))))
        .collect();
    options.extend(from_url.into_iter().map(|(key, value)| (key, value, None)));
    let mut mode = None;
    let mut roots = Roots::Unset;
    let mut require_auth = None;
    for (key, value, variable) in options {
        let invalid = |reason: String| match variable {
            Some(name) => in_environment(format!("{name} (in the environment): {reason}")),
            None => invalid(reason),
        };
        let given = if variable.is_some() {
            "PGSSLROOTCERT (in the environment)"
        } else {
            "sslrootcert"
        };
        match key {
            Key::SslMode => mode = Some(Mode::read(&value).map_err(invalid)?),
            Key::SslRootCert if value.is_empty() => roots = Roots::Unset,
            Key::SslRootCert if value == "system" => roots = Roots::System,
            Key::SslRootCert => roots = Roots::File(PathBuf::from(value), given),
            Key::RequireAuth => require_auth = Some(Allowed::read(&value).map_err(invalid)?),
        }
    }
    let mode = match (mode, &roots) {
        (None, Roots::System) => Mode::VerifyFull,
        (Some(mode), Roots::System) if mode != Mode::VerifyFull && mode != Mode::Disable => {
            return Err(invalid(format!(
                "sslrootcert=system checks the host name, so it needs sslmode=verify-full, not {}",
                mode.name()
            )))
        }
        (Some(Mode::VerifyCa), Roots::Unset) => {
            return Err(invalid(
                "sslmode=verify-ca needs sslrootcert=PATH, the CA that signed the server's certificate \
                 (for the platform's roots, use verify-full)"
                    .into(),
            ))
        }
        (mode, _) => mode.unwrap_or(Mode::Prefer),
    };
    config.ssl_mode(mode.driver());
    Ok((
        config,
        Security {
            mode,
            roots,
            require_auth,
        },
    ))
}

/// The options read here rather than by tokio-postgres.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
    SslMode,
    SslRootCert,
    RequireAuth,
}

impl Key {
    fn read(name: &str) -> Option<Key> {
        match name {
            "sslmode" => Some(Key::SslMode),
            "sslrootcert" => Some(Key::SslRootCert),
            "require_auth" => Some(Key::RequireAuth),
            _ => None,
        }
    }
}

/// Splits the URL into what tokio-postgres reads and this module's
/// options, in the order given (a later one wins), for both forms: the URI
/// (`postgres://…?sslmode=…`) and key=value pairs (`host=… sslmode=…`).
fn take_options(url: &str) -> Result<(String, Vec<(Key, String)>), String> {
    let rest = ["postgres://", "postgresql://"]
        .iter()
        .find_map(|prefix| url.strip_prefix(prefix));
    match rest {
        Some(rest) => {
            // libpq ends the user and host at the first `/` or `?`, while
            // tokio-postgres takes the first `@` anywhere as the end of the
            // credentials: with an `@` past that point the two read other
            // hosts, users and options (the TLS options would be lost and the
            // password sent where the user did not mean). Such a URL is
            // refused: an `@` there is written `%40`.
            let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
            if rest[authority_end..].contains('@') {
                return Err(
                    "an `@` after the host (in a password, the database name or an option) must be \
                            written %40, and a `/` or `?` in a password %2F or %3F"
                        .to_string(),
                );
            }
            Ok(take_from_uri(url, url.len() - rest.len()))
        }
        None => take_from_pairs(url),
    }
    .and_then(|(rest, options)| {
        let options = options
            .into_iter()
            .map(|(key, value)| Ok((key, value?)))
            .collect::<Result<Vec<_>, String>>()?;
        Ok((rest, options))
    })
}

type Taken = (String, Vec<(Key, Result<String, String>)>);

/// The URI form. The query starts at the first `?` after the credentials,
/// where tokio-postgres looks for it (a password may hold a `?`).
fn take_from_uri(url: &str, prefix: usize) -> Taken {
    let credentials = url[prefix..].find('@').map_or(prefix, |at| prefix + at + 1);
    let Some(question) = url[credentials..].find('?').map(|q| credentials + q) else {
        return (url.to_string(), Vec::new());
    };
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    for piece in url[question + 1..].split('&') {
        let ours = piece
            .split_once('=')
            .and_then(|(key, value)| Some((Key::read(&percent_decode(key).ok()?)?, value)));
        match ours {
            Some((key, value)) => taken.push((key, percent_decode(value))),
            None => kept.push(piece),
        }
    }
    let mut rest = url[..question].to_string();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    (rest, taken)
}

/// `%XX` decoded, as tokio-postgres decodes the URI's parts.
fn percent_decode(text: &str) -> Result<String, String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |at: usize| bytes.get(at).and_then(|b| (*b as char).to_digit(16));
        match (bytes[i], hex(i + 1), hex(i + 2)) {
            (b'%', Some(high), Some(low)) => {
                out.push((high * 16 + low) as u8);
                i += 3;
            }
            (byte, _, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| "an option of the ledger URL is not UTF-8 once decoded".to_string())
}

/// The key=value form: `key = value` pairs apart by white space, a value
/// either plain (`\` escapes the next character) or in single quotes.
fn take_from_pairs(text: &str) -> Result<Taken, String> {
    let mut kept = Vec::new();
    let mut taken = Vec::new();
    let mut chars = text.char_indices().peekable();
    let syntax = || "the ledger URL is neither postgres://… nor key=value pairs".to_string();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else { break };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace() && *c != '=') {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            return Err(syntax());
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => value.extend(chars.next().map(|(_, c)| c)),
                    Some((_, c)) => value.push(c),
                    None => return Err(syntax()),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                match c {
                    '\\' => value.extend(chars.next().map(|(_, c)| c)),
                    c => value.push(c),
                }
            }
        }
        let end = chars.peek().map_or(text.len(), |(at, _)| *at);
        match Key::read(&key) {
            Some(key) => taken.push((key, Ok(value))),
            None => kept.push(&text[start..end]),
        }
    }
    Ok((kept.join(" "), taken))
}

/// The largest `sslrootcert` file read: a bundle of every CA a platform
/// trusts is a few hundred KiB.
pub(crate) const ROOTS_LIMIT: u64 = 4 << 20;

/// The CA certificates of `sslrootcert`, read by the file policy of
/// `genapi-files` for a file that steers a secret (the user's or root's,
/// writable by no one else): a regular file of at most [`ROOTS_LIMIT`], on a blocking
/// thread that stops with its caller, so the dial's deadline bounds it.
async fn read_roots(path: &std::path::Path, given: &str) -> Result<RootCertStore, LedgerError> {
    let unusable = |what: String| LedgerError::Settings {
        reason: format!("{given} {}: {what}", path.display()),
    };
    // Whoever can change the roots decides which server gets the password.
    let pem = genapi_files::read_sensitive_stoppable(path, ROOTS_LIMIT, genapi_files::Sensitivity::SteersASecret)
        .await
        .map_err(|refused| unusable(refused.reason()))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&pem) {
        let cert = cert.map_err(|e| unusable(format!("not PEM certificates ({e})")))?;
        roots
            .add(cert)
            .map_err(|e| unusable(format!("a certificate cannot be used as a CA ({e})")))?;
    }
    if roots.is_empty() {
        return Err(unusable("holds no certificate".into()));
    }
    Ok(roots)
}

/// Checks the chain against `roots` and, for `verify-full`, the name; with
/// no roots (`prefer`, `require`), checks nothing but that the server holds
/// the key of the certificate it shows.
#[derive(Debug)]
struct Verifier {
    roots: Option<Arc<RootCertStore>>,
    check_name: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            return Ok(ServerCertVerified::assertion());
        };
        let cert = ParsedCertificate::try_from(end_entity)?;
        verify_server_cert_signed_by_trust_anchor(
            &cert,
            roots,
            intermediates,
            now,
            self.provider.signature_verification_algorithms.all,
        )?;
        if self.check_name {
            verify_server_name(&cert, server_name)?;
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(url: &str) -> (String, Vec<(Key, String)>) {
        take_options(url).unwrap()
    }

    #[test]
    fn uri_options_are_taken_and_the_rest_kept_as_written() {
        let (rest, taken) = options(
            "postgres://u:p%3Fw@db:5433/ledger?application_name=a&sslmode=verify-full&sslrootcert=%2Fca.pem&connect_timeout=3",
        );
        assert_eq!(
            rest,
            "postgres://u:p%3Fw@db:5433/ledger?application_name=a&connect_timeout=3"
        );
        assert_eq!(
            taken,
            vec![
                (Key::SslMode, "verify-full".to_string()),
                (Key::SslRootCert, "/ca.pem".to_string())
            ]
        );
        let (rest, _) = options("postgresql://db/ledger?sslmode=require");
        assert_eq!(rest, "postgresql://db/ledger");
    }

    #[test]
    fn a_question_mark_in_the_password_is_written_encoded_and_an_at_past_the_host_is_refused() {
        let (rest, taken) = options("postgres://u:a%3Fb@db/x?require_auth=password");
        assert_eq!(rest, "postgres://u:a%3Fb@db/x");
        assert_eq!(taken, vec![(Key::RequireAuth, "password".to_string())]);
        // Read by libpq and by tokio-postgres as other hosts and options:
        // the TLS options would be lost and the password sent elsewhere.
        for ambiguous in [
            "postgres://u:a?b@db/x?require_auth=password",
            "postgres://db.invalid/ledger?password=pw&sslmode=verify-full&application_name=me@127.0.0.1:5432",
            "postgres://db/ledger?user=alice@corp&sslmode=require",
        ] {
            let refused = take_options(ambiguous).unwrap_err();
            assert!(refused.contains("%40") && !refused.contains("pw&"), "{refused}");
        }
    }

    #[test]
    fn key_value_options_are_taken_quoted_or_not() {
        let (rest, taken) = options("host=db  password='a b\\'c' sslmode = verify-ca sslrootcert='/x y.pem' dbname=l");
        assert_eq!(rest, "host=db password='a b\\'c' dbname=l");
        assert_eq!(
            taken,
            vec![
                (Key::SslMode, "verify-ca".to_string()),
                (Key::SslRootCert, "/x y.pem".to_string())
            ]
        );
        assert!(take_options("host=db sslmode").is_err());
        assert!(take_options("host='db").is_err());
    }

    #[test]
    fn the_default_mode_is_prefer_and_unknown_modes_name_the_allowed_ones() {
        let (config, security) = read_url("postgres://u@db/x").unwrap();
        assert_eq!(security.mode, Mode::Prefer);
        assert_eq!(config.get_ssl_mode(), tokio_postgres::config::SslMode::Prefer);
        let (config, security) = read_url("host=db sslmode=verify-full").unwrap();
        assert_eq!(security.mode, Mode::VerifyFull);
        assert_eq!(config.get_ssl_mode(), tokio_postgres::config::SslMode::Require);
        let error = read_url("postgres://u@db/x?sslmode=bogus").unwrap_err().to_string();
        assert!(
            error.contains("disable, prefer, require, verify-ca, verify-full"),
            "{error}"
        );
        assert!(read_url("postgres://u@db/x?sslmode=verify-ca").is_err());
        let (_, security) = read_url("postgres://u@db/x?sslrootcert=system").unwrap();
        assert_eq!(security.mode, Mode::VerifyFull);
        assert!(read_url("postgres://u@db/x?sslrootcert=system&sslmode=require").is_err());
    }

    #[test]
    fn the_environment_gives_what_the_url_does_not_as_with_libpq() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        };
        let (_, security) = read_url_in(
            "postgres://u@db/x",
            env(&[("PGSSLMODE", "verify-ca"), ("PGSSLROOTCERT", "/etc/ca.pem")]),
        )
        .unwrap();
        assert_eq!(security.mode, Mode::VerifyCa);
        assert_eq!(
            security.roots,
            Roots::File(PathBuf::from("/etc/ca.pem"), "PGSSLROOTCERT (in the environment)")
        );
        let (_, security) = read_url_in("postgres://u@db/x?sslmode=disable", env(&[("PGSSLMODE", "require")])).unwrap();
        assert_eq!(security.mode, Mode::Disable, "the URL wins");
        let (_, security) = read_url_in("postgres://u@db/x", env(&[("PGSSLMODE", "")])).unwrap();
        assert_eq!(security.mode, Mode::Prefer, "an empty variable is none");
        let (_, security) = read_url_in("postgres://u@db/x", env(&[("PGREQUIREAUTH", "scram-sha-256")])).unwrap();
        assert!(security
            .require_auth
            .is_some_and(|allowed| !allowed.allows(Method::Password)));
        let error = read_url_in("postgres://u@db/x", env(&[("PGSSLMODE", "bogus")]))
            .unwrap_err()
            .to_string();
        assert!(error.contains("PGSSLMODE (in the environment)"), "{error}");
    }

    #[test]
    fn require_auth_lists_or_negates_methods() {
        let allowed = Allowed::read("password,scram-sha-256").unwrap();
        assert!(allowed.allows(Method::Password) && allowed.allows(Method::ScramSha256));
        assert!(!allowed.allows(Method::Md5) && !allowed.allows(Method::None));
        let allowed = Allowed::read("!password,!none").unwrap();
        assert!(!allowed.allows(Method::Password) && !allowed.allows(Method::None));
        assert!(allowed.allows(Method::Md5) && allowed.allows(Method::Gss));
        for bad in ["", "password,!md5", "plain", "md5,md5", "password,"] {
            assert!(Allowed::read(bad).is_err(), "{bad:?}");
        }
    }

    fn security(require_auth: Option<&str>) -> Security {
        Security {
            mode: Mode::Prefer,
            roots: Roots::Unset,
            require_auth: require_auth.map(|value| Allowed::read(value).unwrap()),
        }
    }

    #[test]
    fn a_clear_text_password_needs_a_checked_certificate_or_require_auth() {
        assert!(security(None).judge_auth(3, false, false).is_err());
        assert!(
            security(None).judge_auth(3, true, false).is_err(),
            "encrypted to anyone"
        );
        let checked = Security {
            mode: Mode::VerifyFull,
            ..security(None)
        };
        assert!(checked.judge_auth(3, true, false).is_ok());
        let with_root = Security {
            roots: Roots::File("ca.pem".into(), "sslrootcert"),
            ..security(None)
        };
        assert!(with_root.judge_auth(3, true, false).is_ok());
        assert!(security(Some("password")).judge_auth(3, false, false).is_ok());
        assert!(security(None).judge_auth(5, false, false).is_ok());
        assert!(security(None).judge_auth(10, false, false).is_ok());
        assert!(security(None).judge_auth(0, false, false).is_ok());
    }

    #[test]
    fn require_auth_accepts_exactly_what_it_allows() {
        let scram = security(Some("scram-sha-256"));
        assert!(scram.judge_auth(10, false, false).is_ok());
        assert!(scram.judge_auth(11, false, true).is_ok());
        assert!(scram.judge_auth(12, false, true).is_ok());
        assert!(
            scram.judge_auth(0, false, true).is_ok(),
            "AuthenticationOk after the exchange"
        );
        assert!(scram.judge_auth(0, false, false).is_err(), "no authentication at all");
        assert!(scram.judge_auth(3, true, false).is_err());
        assert!(scram.judge_auth(5, true, false).is_err());
        assert!(scram.judge_auth(2, true, false).is_err());
        let none = security(Some("none"));
        assert!(none.judge_auth(0, false, false).is_ok());
        assert!(none.judge_auth(10, false, false).is_err());
        let not_md5 = security(Some("!md5"));
        assert!(not_md5.judge_auth(5, true, false).is_err());
        assert!(not_md5.judge_auth(3, false, false).is_ok());
    }
}
