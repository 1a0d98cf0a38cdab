//! What the command learns about a service, kept across runs in small files
//! in the user's cache folder: task durations ([`DURATIONS`], per service
//! address), so the first wait of a new run is already well aimed, and the
//! prices the account was charged ([`PRICES`], per service: see
//! [`prices_key`]), so `batch --estimate` can say what a job file will cost
//! and a capped batch holds a first submission of a kind seen before at its
//! price.
//!
//! A file is a convenience: a missing one is ignored, one that is not a
//! small regular file of the expected shape is ignored with a warning (and
//! replaced), and failing to write it never fails a command. What it holds is
//! trimmed as it is read (see `genapi::Learned`), and it keeps the
//! [`MOST_SERVICES`] services last written: an older one is dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{out, Global};

/// What the prices of a mock are kept under, whatever its address: every
/// mock charges the same illustrative prices, and a `genapi mock` takes
/// another port each time it starts.
pub const MOCK_PRICES: &str = "the mock";

/// The most services a file keeps: the ones last written (a mock started
/// on a new port each run is a new address for durations).
pub const MOST_SERVICES: usize = 16;

/// What learned prices are kept under, decided once per connection from
/// the configuration alone, before anything is sent (so no answer can
/// choose it), and the same for loading and saving: the mock's one name
/// for the built-in mock and for one that can only be a mock (a loopback
/// address with the mock's default key); else the base URL's origin, so a
/// live service is one service whatever path, region or trusted host it is
/// configured with.
pub fn prices_key(global: &Global) -> String {
    let settings = &global.settings;
    let mock_key = settings
        .key
        .as_ref()
        .is_some_and(|key| key.value.expose() == genapi_mock::DEFAULT_KEY);
    key_of(base_url(global), crate::uses_builtin_mock(global), mock_key)
}

/// [`prices_key`] for a service at `base`, the built-in mock or not, given
/// the mock's default key or not.
fn key_of(base: Option<&str>, builtin_mock: bool, mock_key: bool) -> String {
    if builtin_mock || (loopback(base) && mock_key) {
        return MOCK_PRICES.to_string();
    }
    match base.and_then(|base| url::Url::parse(base).ok()) {
        Some(url) => url.origin().ascii_serialization(),
        None => base.unwrap_or_default().to_string(),
    }
}

/// The configured base URL.
fn base_url(global: &Global) -> Option<&str> {
    global.settings.base_url.as_ref().map(|base| base.value.as_str())
}

/// Whether the configured base URL is on this machine (a loopback address
/// or `localhost`): only such a service may be a mock, whatever its
/// answers say.
pub fn on_loopback(global: &Global) -> bool {
    loopback(base_url(global))
}

/// Whether `base` is an address on this machine.
pub fn loopback(base: Option<&str>) -> bool {
    base.and_then(|base| url::Url::parse(base).ok())
        .is_some_and(|url| match url.host() {
            Some(url::Host::Domain(name)) => name.eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            None => false,
        })
}

/// One kind of thing learned, and its file in the command's cache folder.
pub struct Kept {
    file: &'static crate::cache::CacheFile,
    what: &'static str,
    /// Largest file read.
    limit: u64,
}

/// Task durations (`genapi::Learned`).
pub const DURATIONS: Kept = Kept {
    file: &crate::cache::DURATIONS,
    what: "learned task durations",
    // Far more than the durations of every operation of a few services.
    limit: 1024 * 1024,
};

/// Prices the account was charged (`genapi_batch::Prices`).
pub const PRICES: Kept = Kept {
    file: &crate::cache::PRICES,
    what: "learned prices",
    // The prices of tens of thousands of kinds.
    limit: 4 * 1024 * 1024,
};

/// One service's values in a file, with when they were written: a count
/// that grows with each write, so the oldest are known without a clock.
#[derive(Serialize, Deserialize)]
#[serde(untagged)]
enum Stored<T> {
    /// As written now.
    Counted {
        /// The file's write count when they were written.
        written: u64,
        /// The values.
        learned: T,
    },
    /// As written by an earlier release: older than any counted.
    Bare(T),
}

impl<T> Stored<T> {
    fn written(&self) -> u64 {
        match self {
            Stored::Counted { written, .. } => *written,
            Stored::Bare(_) => 0,
        }
    }

    fn learned(self) -> T {
        match self {
            Stored::Counted { learned, .. } | Stored::Bare(learned) => learned,
        }
    }
}

/// Every service's values, as kept in a file.
type All<T> = BTreeMap<String, Stored<T>>;

/// Every service's values, as kept in `file` at `path` (none when there is
/// no file, or none the command kept: see [`crate::cache::read_kept`]); why
/// the file is not usable otherwise.
fn read_all<T: DeserializeOwned>(file: &crate::cache::CacheFile, path: &Path, limit: u64) -> Result<All<T>, String> {
    match crate::cache::read_kept(file, path, limit) {
        Ok(Some(bytes)) => serde_json::from_slice(&bytes).map_err(|e| e.to_string()),
        Ok(None) => Ok(BTreeMap::new()),
        // Replaced after the next task: the fix is the command's own.
        Err(refused) => Err(refused.problem()),
    }
}

/// Puts `learned` in `all` as the service's newest values, and drops the
/// services written longest ago beyond [`MOST_SERVICES`].
fn keep<T>(all: &mut All<T>, service: &str, learned: T) {
    let written = all.values().map(Stored::written).max().unwrap_or(0) + 1;
    all.insert(service.to_string(), Stored::Counted { written, learned });
    while all.len() > MOST_SERVICES {
        let oldest = all
            .iter()
            .min_by_key(|(_, stored)| stored.written())
            .map(|(service, _)| service.clone());
        match oldest {
            Some(oldest) => all.remove(&oldest),
            None => break,
        };
    }
}

impl Kept {
    /// The file's name in the command's cache folder.
    pub fn file_name(&self) -> &'static str {
        self.file.name
    }

    /// The file, in the command's cache folder.
    fn path(&self) -> Option<PathBuf> {
        Some(crate::cache::dir()?.join(self.file_name()))
    }

    /// What was learned for this service.
    pub fn load<T: DeserializeOwned + Default>(&self, service: &str) -> T {
        let Some(path) = self.path() else { return T::default() };
        match read_all::<T>(self.file, &path, self.limit) {
            Ok(mut all) => all.remove(service).map(Stored::learned).unwrap_or_default(),
            Err(why) => {
                out::err(&format!(
                    "warning: ignoring the {} in {}: {}; it is replaced after the next task",
                    self.what,
                    out::clean(&path.display().to_string()),
                    out::clean(&why)
                ));
                T::default()
            }
        }
    }

    /// Keeps `learned` for this service, dropping the services written
    /// longest ago beyond [`MOST_SERVICES`].
    pub fn save<T: Serialize + DeserializeOwned>(&self, service: &str, learned: T) {
        self.save_with(service, learned, |_, learned| learned);
    }

    /// Keeps `learned` for this service merged with what the file holds for
    /// it (`merge(kept, learned)`), as another command may have written it
    /// since it was loaded.
    pub fn save_with<T: Serialize + DeserializeOwned>(&self, service: &str, learned: T, merge: impl FnOnce(T, T) -> T) {
        let Some(path) = self.path() else { return };
        // An unusable file was reported when it was loaded; it is replaced.
        let mut all = read_all::<T>(self.file, &path, self.limit).unwrap_or_default();
        let learned = match all.remove(service) {
            Some(kept) => merge(kept.learned(), learned),
            None => learned,
        };
        keep(&mut all, service, learned);
        let Ok(text) = serde_json::to_string(&all) else { return };
        // Written whole beside it, then put in its place: a reader never sees
        // half a file, and two commands ending at once each write their own.
        crate::cache::keep_private(self.file, &path, text.as_bytes());
    }
}

/// Keeps the prices charged by `service` ([`prices_key`]): each kind kept
/// for it stays, at the most it was charged, so a command that saw fewer
/// kinds never drops the others.
pub fn save_prices(service: &str, prices: genapi_batch::Prices) {
    PRICES.save_with(service, prices, |mut kept, learned| {
        kept.merge(&learned);
        kept
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Only the built-in mock, or one on this machine with the mock's key,
    /// keeps prices under the mock's name: a remote service never can,
    /// whatever key or answers it has, and a mock with its own key is its
    /// origin.
    #[test]
    fn only_a_mock_by_configuration_keeps_prices_under_the_mock() {
        assert_eq!(key_of(None, true, false), MOCK_PRICES);
        assert_eq!(key_of(Some("http://127.0.0.1:8080"), false, true), MOCK_PRICES);
        assert_eq!(key_of(Some("http://localhost:1/v1"), false, true), MOCK_PRICES);
        assert_eq!(
            key_of(Some("https://api.example.com/x"), false, true),
            "https://api.example.com"
        );
        assert_eq!(
            key_of(Some("https://127.0.0.1.example.com"), false, true),
            "https://127.0.0.1.example.com"
        );
        assert_eq!(
            key_of(Some("http://127.0.0.1:9000"), false, false),
            "http://127.0.0.1:9000"
        );
    }

    /// Saving prices merges them with the kinds kept: a command that saw
    /// fewer kinds drops none.
    #[test]
    fn saved_prices_keep_the_kinds_kept() {
        let job = |width: u64| {
            genapi_batch::Job::new(
                0,
                "/v1/gen-2-pro".to_string(),
                serde_json::json!({"prompt": "p", "width": width}),
            )
        };
        let mut kept = genapi_batch::Prices::default();
        kept.learn(&job(64), 1.0);
        kept.learn(&job(128), 2.0);
        let mut fewer = genapi_batch::Prices::default();
        fewer.learn(&job(64), 1.5);
        kept.merge(&fewer);
        assert_eq!(kept.price_of(&job(128)), Some(2.0));
        assert_eq!(kept.price_of(&job(64)), Some(1.5));
    }

    /// The file keeps the services written last: an older one is dropped,
    /// and one written again is the newest.
    #[test]
    fn a_file_keeps_the_services_written_last() {
        let mut all: All<u32> = BTreeMap::new();
        all.insert("from an earlier release".into(), Stored::Bare(7));
        for n in 0..MOST_SERVICES as u32 {
            keep(&mut all, &format!("service {n}"), n);
        }
        assert_eq!(all.len(), MOST_SERVICES);
        assert!(!all.contains_key("from an earlier release"), "the oldest goes first");
        keep(&mut all, "service 0", 100);
        keep(&mut all, "service new", 1);
        assert_eq!(all.len(), MOST_SERVICES);
        assert!(!all.contains_key("service 1"), "then the one written longest ago");
        assert_eq!(all.remove("service 0").map(Stored::learned), Some(100));
    }

    /// A file of an earlier release (values without a write count) is read
    /// as it was, and written back counted.
    #[test]
    fn a_file_of_an_earlier_release_is_read() {
        let earlier = r#"{"a": {"kinds": {}}, "b": {"written": 3, "learned": {"kinds": {}}}}"#;
        let all: All<genapi_batch::Prices> = serde_json::from_str(earlier).unwrap();
        assert_eq!(all["a"].written(), 0);
        assert_eq!(all["b"].written(), 3);
        let text = serde_json::to_string(&all).unwrap();
        assert!(text.contains(r#""b":{"written":3,"learned":"#), "{text}");
    }
}
