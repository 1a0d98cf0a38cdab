//! What is remembered of a submission, in whichever memory keeps it: its
//! entry (phase, fate, holder, the service's answer), the claim that holds
//! it, and what a claim gets.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::decide::{Fate, Phase};
use crate::identity::{Naming, SubmissionId};

/// How long a submission is remembered: far past any SDK's retries.
pub(crate) const KEPT_FOR: Duration = Duration::from_secs(24 * 60 * 60);

/// What a caller's submission gets from the memory.
#[derive(Debug)]
pub(crate) enum Claimed {
    /// Send it: it is remembered as in flight, held by this claim.
    Send(Claim),
    /// The remembered acceptance, now held by this claim.
    Replay(Claim, Answer),
    /// Wait for the same job's change
    /// (the memory's `changed`), then claim again.
    Wait,
    /// The same job may have a task whose answer never came.
    RefuseUnknown,
    /// What is remembered cannot be read (the shared memory is out of
    /// reach): nothing may be sent.
    Unavailable(String),
}

/// A caller's hold on a remembered submission: its writes land only while
/// the submission is still its own.
#[derive(Clone, Debug)]
pub(crate) struct Claim {
    pub(crate) id: SubmissionId,
    pub(crate) holder: String,
}

/// The service's answer to a submission, as it came.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Answer {
    /// Its status.
    pub(crate) status: u16,
    /// Its `Content-Type`, when it had one.
    pub(crate) content_type: Option<String>,
    /// Its `Retry-After`, when it had one (a refusal's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) retry_after: Option<String>,
    /// Its body (JSON text; its addresses are the service's).
    pub(crate) body: String,
}

impl Answer {
    /// The task the acceptance names.
    /// Whether it accepts a task: a success that names one. A success
    /// that names none (not JSON, no `id`) cannot be replayed as one, and
    /// may still have made a task the service charged for.
    pub(crate) fn accepts_a_task(&self) -> bool {
        (200..300).contains(&self.status) && self.task_id().is_some()
    }

    pub(crate) fn task_id(&self) -> Option<String> {
        let value: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        value.get("id")?.as_str().map(str::to_string)
    }

    /// The cost the acceptance reports, when it does.
    pub(crate) fn cost(&self) -> Option<f64> {
        let value: serde_json::Value = serde_json::from_str(&self.body).ok()?;
        value
            .get("cost")?
            .as_f64()
            .filter(|cost| cost.is_finite() && *cost >= 0.0)
    }
}

/// One remembered submission.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Entry {
    #[serde(with = "phase_text")]
    pub(crate) phase: Phase,
    #[serde(with = "fate_text", default = "undelivered")]
    pub(crate) fate: Fate,
    /// Named by an `Idempotency-Key`.
    pub(crate) idempotent: bool,
    /// When it was sent, in seconds since 1970.
    pub(crate) sent_at: u64,
    /// The claim that holds it.
    #[serde(default)]
    pub(crate) holder: String,
    pub(crate) answer: Option<Answer>,
}

impl Entry {
    /// A submission about to be sent by `holder`.
    pub(crate) fn sending(holder: &str, naming: Naming) -> Entry {
        Entry {
            phase: Phase::InFlight,
            fate: Fate::Owned,
            idempotent: naming == Naming::ByIdempotencyKey,
            sent_at: now(),
            holder: holder.to_string(),
            answer: None,
        }
    }

    /// Whether a caller heard its acceptance and did not name it one job:
    /// a repeat is a new job, and nothing is left to keep.
    pub(crate) fn heard(&self) -> bool {
        !self.idempotent && self.fate == Fate::Delivered
    }
}

fn undelivered() -> Fate {
    Fate::Undelivered
}

mod phase_text {
    use super::Phase;

    pub(super) fn serialize<S: serde::Serializer>(phase: &Phase, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match phase {
            Phase::Accepted => "accepted",
            Phase::InFlight => "in_flight",
            Phase::Unknown => "unknown",
        })
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Phase, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        Ok(match text.as_str() {
            "accepted" => Phase::Accepted,
            "in_flight" => Phase::InFlight,
            // Anything else may hold a task.
            _ => Phase::Unknown,
        })
    }
}

mod fate_text {
    use super::Fate;

    pub(super) fn serialize<S: serde::Serializer>(fate: &Fate, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match fate {
            Fate::Owned => "owned",
            Fate::Delivered => "delivered",
            Fate::Undelivered => "undelivered",
        })
    }

    pub(super) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Fate, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        Ok(match text.as_str() {
            "owned" => Fate::Owned,
            "delivered" => Fate::Delivered,
            // Not surely heard: a retry gets it.
            _ => Fate::Undelivered,
        })
    }
}

/// Seconds since 1970.
pub(crate) fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// A name for this proxy among those sharing a memory: its process and 64
/// random bits, so that two proxies never take each other's claims for
/// their own.
pub(crate) fn random_name() -> String {
    let mut bytes = [0u8; 8];
    // Without randomness, the time stands in: unique enough per process.
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        bytes = now().to_be_bytes();
    }
    let random: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("{}-{random}", std::process::id())
}
