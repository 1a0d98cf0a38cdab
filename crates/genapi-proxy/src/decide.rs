//! What the proxy does with a submission, from what it remembers of the
//! same job: one pure function, tested as a table of every combination.

use crate::identity::Naming;

/// Where the remembered submission stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Sent to the service; its answer is not in yet.
    InFlight,
    /// The service accepted it: its answer is kept.
    Accepted,
    /// Sent, and no answer came: the connection broke after the request
    /// left, or the proxy stopped while it waited. The service may have
    /// made (and charged for) a task.
    Unknown,
}

/// Whether the remembered answer reached the caller that asked for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fate {
    /// A caller is waiting for it, or it is being written to one.
    Owned,
    /// Written to the end of the caller's answer.
    Delivered,
    /// Its caller went away first (or the proxy stopped before it knew).
    Undelivered,
}

/// What to do with a submission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Send it to the service (it is remembered as in flight).
    Send,
    /// Answer with the remembered acceptance: the task exists and is paid.
    Replay,
    /// Wait for the remembered one to be answered or delivered, then
    /// decide again.
    Wait,
    /// Refuse it: an identical submission may have made a task whose answer
    /// never came. Sending it again could pay twice.
    RefuseUnknown,
}

/// The decision for a submission named `naming`, when the same job is
/// remembered as `remembered` (`None`: nothing remembered).
pub(crate) fn decide(naming: Naming, remembered: Option<(Phase, Fate)>) -> Decision {
    match remembered {
        None => Decision::Send,
        Some((Phase::InFlight, _)) => Decision::Wait,
        Some((Phase::Unknown, _)) => Decision::RefuseUnknown,
        // Its caller may yet receive it: only then is this a second job.
        Some((Phase::Accepted, Fate::Owned)) => Decision::Wait,
        // Nobody heard of the task: this is the caller asking again.
        Some((Phase::Accepted, Fate::Undelivered)) => Decision::Replay,
        // Heard: the same body again is another variation, a new job,
        // unless the caller named it one job.
        Some((Phase::Accepted, Fate::Delivered)) => match naming {
            Naming::ByContent => Decision::Send,
            Naming::ByIdempotencyKey => Decision::Replay,
        },
    }
}

/// Where a remembered submission stands once the proxy that held it is gone
/// (stopped, or its hold on a shared record lapsed), as any proxy reads it
/// after: an answer it was waiting for may have made a task, and an
/// acceptance it was writing to its caller did not surely arrive.
pub(crate) fn holder_gone(phase: Phase, fate: Fate) -> (Phase, Fate) {
    let phase = match phase {
        Phase::InFlight => Phase::Unknown,
        kept => kept,
    };
    let fate = match fate {
        Fate::Owned => Fate::Undelivered,
        kept => kept,
    };
    (phase, fate)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PHASES: [Phase; 3] = [Phase::InFlight, Phase::Accepted, Phase::Unknown];
    const FATES: [Fate; 3] = [Fate::Owned, Fate::Delivered, Fate::Undelivered];
    const NAMINGS: [Naming; 2] = [Naming::ByContent, Naming::ByIdempotencyKey];

    /// Every combination of facts, with the decision the proxy's promise
    /// asks for.
    #[test]
    fn the_table() {
        use Decision::*;
        let expected = |naming: Naming, phase: Phase, fate: Fate| match (phase, fate, naming) {
            (Phase::InFlight, _, _) => Wait,
            (Phase::Unknown, _, _) => RefuseUnknown,
            (Phase::Accepted, Fate::Owned, _) => Wait,
            (Phase::Accepted, Fate::Undelivered, _) => Replay,
            (Phase::Accepted, Fate::Delivered, Naming::ByContent) => Send,
            (Phase::Accepted, Fate::Delivered, Naming::ByIdempotencyKey) => Replay,
        };
        for naming in NAMINGS {
            assert_eq!(decide(naming, None), Send);
            for phase in PHASES {
                for fate in FATES {
                    assert_eq!(
                        decide(naming, Some((phase, fate))),
                        expected(naming, phase, fate),
                        "{naming:?} {phase:?} {fate:?}"
                    );
                }
            }
        }
    }

    /// A holder's end, over every combination: nothing waits on it, and
    /// nothing it may have sent is sent again.
    #[test]
    fn what_a_holder_leaves_behind() {
        use {Fate::*, Phase::*};
        let expected = |phase: Phase, fate: Fate| {
            let phase = if phase == InFlight { Unknown } else { phase };
            let fate = if fate == Owned { Undelivered } else { fate };
            (phase, fate)
        };
        for phase in PHASES {
            for fate in FATES {
                let left = holder_gone(phase, fate);
                assert_eq!(left, expected(phase, fate), "{phase:?} {fate:?}");
                for naming in NAMINGS {
                    assert_ne!(decide(naming, Some(left)), Decision::Wait, "{phase:?} {fate:?}");
                }
            }
        }
    }

    /// The promise itself, over every combination: a job that may hold a
    /// task is sent again only when its acceptance reached a caller who
    /// did not name it one job.
    #[test]
    fn a_job_that_may_hold_a_task_is_sent_again_only_as_a_new_variation() {
        for naming in NAMINGS {
            for phase in PHASES {
                for fate in FATES {
                    if decide(naming, Some((phase, fate))) == Decision::Send {
                        assert_eq!(
                            (phase, fate, naming),
                            (Phase::Accepted, Fate::Delivered, Naming::ByContent)
                        );
                    }
                }
            }
        }
    }
}
