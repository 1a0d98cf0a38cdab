//! What makes two submissions one job, for the proxy.
//!
//! An SDK that did not hear the answer to a submission sends the same
//! request again: the same key, the same path, the same body. Those three
//! name the submission. A request that carries an `Idempotency-Key` is named
//! by that key and its path instead (with the API key, so two accounts never
//! share one), whatever its body: the caller said it is the same job. The
//! path stays in the name because one key sent to two models asks for two
//! images: a program that numbers its jobs per model must not get one
//! model's image for the other's job.
//!
//! Only a digest is kept, never the key or the body: the memory file holds
//! nothing a reader could use.

use ring::digest::{Context, SHA256};

/// The name of a submission: a SHA-256 digest, in hex.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(transparent)]
pub(crate) struct SubmissionId(String);

/// How a submission was named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Naming {
    /// By its key, path and body: a repeat is the same job only while its
    /// first answer has not reached anyone.
    ByContent,
    /// By the caller's `Idempotency-Key` and the path it was sent to: a
    /// repeat is always the same job.
    ByIdempotencyKey,
}

impl SubmissionId {
    /// The digest, in hex.
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    /// The submission `body` to `path_and_query`, sent with `key` (the one
    /// the service will see; empty when none), or with `idempotency_key`
    /// (its bytes as sent, whatever characters they spell).
    pub(crate) fn of(
        key: &str,
        path_and_query: &str,
        body: &[u8],
        idempotency_key: Option<&[u8]>,
    ) -> (SubmissionId, Naming) {
        let mut digest = Context::new(&SHA256);
        // Each part is preceded by its length, so no two different triples
        // spell the same bytes.
        let mut part = |bytes: &[u8]| {
            digest.update(&(bytes.len() as u64).to_be_bytes());
            digest.update(bytes);
        };
        part(key.as_bytes());
        let naming = match idempotency_key {
            Some(idempotency_key) => {
                part(b"idempotency-key");
                // A key names one job of the endpoint: a retry that adds
                // or changes a query string is still that job.
                let path = path_and_query.split('?').next().unwrap_or_default();
                part(path.as_bytes());
                part(idempotency_key);
                Naming::ByIdempotencyKey
            }
            None => {
                part(b"content");
                part(path_and_query.as_bytes());
                part(body);
                Naming::ByContent
            }
        };
        let hex: String = digest.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect();
        (SubmissionId(hex), naming)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_key_path_and_body_name_one_submission() {
        let a = SubmissionId::of("k", "/v1/gen-2-pro", b"{\"prompt\":\"x\"}", None);
        let b = SubmissionId::of("k", "/v1/gen-2-pro", b"{\"prompt\":\"x\"}", None);
        assert_eq!(a, b);
        assert_eq!(a.1, Naming::ByContent);
    }

    #[test]
    fn another_key_path_or_body_names_another() {
        let first = SubmissionId::of("k", "/v1/gen-2-pro", b"{}", None).0;
        for other in [
            SubmissionId::of("k2", "/v1/gen-2-pro", b"{}", None).0,
            SubmissionId::of("k", "/v1/gen-2-flex", b"{}", None).0,
            SubmissionId::of("k", "/v1/gen-2-pro", b"{ }", None).0,
            // The boundary between the parts moved: still another.
            SubmissionId::of("k/v1/gen-2-pro", "", b"{}", None).0,
        ] {
            assert_ne!(first, other);
        }
    }

    #[test]
    fn an_idempotency_key_names_the_job_whatever_its_body() {
        let a = SubmissionId::of("k", "/v1/gen-2-pro", b"{\"seed\":1}", Some(b"job-7".as_slice()));
        let b = SubmissionId::of("k", "/v1/gen-2-pro", b"{\"seed\":2}", Some(b"job-7".as_slice()));
        assert_eq!(a, b);
        assert_eq!(a.1, Naming::ByIdempotencyKey);
        // Another account's same idempotency key is its own job.
        assert_ne!(
            a.0,
            SubmissionId::of("other", "/v1/gen-2-pro", b"{}", Some(b"job-7".as_slice())).0
        );
        // So is the same key sent to another model.
        assert_ne!(
            a.0,
            SubmissionId::of("k", "/v1/gen-2-flex", b"{\"seed\":1}", Some(b"job-7".as_slice())).0
        );
    }
}
