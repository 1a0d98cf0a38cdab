//! What the command learns about a service, kept across runs in small files
//! in the user's cache folder, per service address: task durations
//! ([`DURATIONS`]), so the first wait of a new run is already well aimed, and
//! the prices the account was charged ([`PRICES`]), so `batch --estimate`
//! can say what a job file will cost and a capped batch holds a first
//! submission of a kind seen before at its price.
//!
//! A file is a convenience: a missing one is ignored, one that is not a
//! small regular file of the expected shape is ignored with a warning (and
//! replaced), and failing to write it never fails a command. What it holds is
//! trimmed as it is read (see `genapi::Learned`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::{files, out};

/// One kind of thing learned, and its file in the command's cache folder.
pub struct Kept {
    file: &'static str,
    what: &'static str,
    /// Largest file read.
    limit: u64,
}

/// Task durations (`genapi::Learned`).
pub const DURATIONS: Kept = Kept {
    file: "learned.json",
    what: "learned task durations",
    // Far more than the durations of every operation of a few services.
    limit: 1024 * 1024,
};

/// Prices the account was charged (`genapi_batch::Prices`).
pub const PRICES: Kept = Kept {
    file: "prices.json",
    what: "learned prices",
    // The prices of tens of thousands of kinds.
    limit: 4 * 1024 * 1024,
};

/// Every service's values, as kept in the file (none when there is no
/// file); why the file is not usable otherwise.
fn read_all<T: DeserializeOwned>(path: &Path, limit: u64) -> Result<BTreeMap<String, T>, String> {
    if !path.exists() {
        return Ok(BTreeMap::new());
    }
    let text = files::read_to_string(path, limit)?;
    serde_json::from_str(&text).map_err(|e| e.to_string())
}

impl Kept {
    /// The file's name in the command's cache folder.
    pub fn file_name(&self) -> &'static str {
        self.file
    }

    /// The file, in the command's cache folder.
    fn path(&self) -> Option<PathBuf> {
        Some(crate::cache::dir()?.join(self.file_name()))
    }

    /// What was learned for this service address.
    pub fn load<T: DeserializeOwned + Default>(&self, service: &str) -> T {
        let Some(path) = self.path() else { return T::default() };
        match read_all::<T>(&path, self.limit) {
            Ok(mut all) => all.remove(service).unwrap_or_default(),
            Err(why) => {
                out::err(&format!(
                    "warning: ignoring the {} in {} ({}); it is replaced after the next task",
                    self.what,
                    out::clean(&path.display().to_string()),
                    out::clean(&why)
                ));
                T::default()
            }
        }
    }

    /// Keeps `learned` for this service address.
    pub fn save<T: Serialize + DeserializeOwned>(&self, service: &str, learned: T) {
        let Some(path) = self.path() else { return };
        // An unusable file was reported when it was loaded; it is replaced.
        let mut all = read_all::<T>(&path, self.limit).unwrap_or_default();
        all.insert(service.to_string(), learned);
        let Ok(text) = serde_json::to_string(&all) else { return };
        // Written whole beside it, then put in its place: a reader never sees
        // half a file, and two commands ending at once each write their own.
        // The cache is the command's own file, so it is replaced.
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                let write = || genapi_files::write_whole(&path, text.as_bytes(), genapi_files::Existing::Replace);
                match write() {
                    // The cache's own name holds a pipe or a device (it was
                    // reported when it was read): the name is freed, as an
                    // unusable cache is replaced.
                    Err(genapi_files::FileError::NotRegular { .. }) => {
                        std::fs::remove_file(&path).map_err(|e| e.to_string())?;
                        write().map(drop).map_err(|e| e.to_string())
                    }
                    written => written.map(drop).map_err(|e| e.to_string()),
                }
            });
        if let Err(error) = written {
            tracing::debug!(%error, file = %path.display(), "cannot keep what was learned");
        }
    }
}
