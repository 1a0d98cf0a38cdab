//! The protocol between workers sharing a batch, explored exhaustively.
//!
//! Two or three workers share two lines through a store, as the PostgreSQL
//! ledger does: a line is claimed under a lease; a credit hold and a seat
//! are taken before sending; the intent is stored (only while the claim is
//! still the worker's) before the request leaves; the answer and the end
//! are stored whatever became of the claim. What a worker does with a line
//! it claimed is [`genapi_batch::decide`] on the line folded from the
//! store's events, the same function a run calls.
//!
//! Around it, everything that can go wrong: a worker crashes at any step
//! (and starts again), an answer is lost after the request left, a lease
//! lapses under a paused worker that then wakes up and goes on, the
//! database restarts under a write. The checker visits every state these
//! reach and holds four properties: no line is sent twice; every line ends
//! or is reported unknown (or not sent: stopped at the cap, or its intent
//! refused by a restarting database, which a rerun sends); the credits held
//! and charged never exceed the cap; a seat never serves two tasks.
//!
//! Two broken variants must each yield a counterexample: a worker that
//! sends before its intent is stored, and a claim that takes a line whose
//! lease is still live.

use std::hash::Hash;

use genapi_batch::{decide, Action, Asked, Event, Line, Seen};
use stateright::{Checker, Model, Property};

/// What one task costs, in whole credits.
const PRICE: u8 = 1;
/// Seats: tasks in flight at once over the whole batch.
const SEATS: usize = 2;

/// What a worker knows of its work.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Phase {
    /// Looking for a line.
    Idle,
    /// Holds the claim of a line; has not decided yet.
    Claimed(usize),
    /// Decided to send: holds credits and a seat.
    Holding(usize),
    /// Its intent is stored: the request may leave.
    Intended(usize),
    /// The request left; its answer has not come.
    Sent(usize),
    /// The answer came: the task was accepted.
    Answered(usize),
    /// Polls the line's task (holds a seat).
    Polling(usize),
}

/// A stored event, small enough to hash: folded into real events.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Stored {
    Intent,
    Accepted,
    Saved,
}

/// A line as the store keeps it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
struct StoreLine {
    events: Vec<Stored>,
    /// The worker holding the claim, and whether its lease is still live.
    lease: Option<(usize, bool)>,
    /// The worker holding credits (one price) for a submission whose cost
    /// is not settled.
    hold: Option<usize>,
    /// Credits charged.
    charged: u8,
}

/// One worker process.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Worker {
    phase: Phase,
    /// Lines this process has reported (it does not take them again).
    reported: Vec<bool>,
}

/// The whole system.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct System {
    lines: Vec<StoreLine>,
    workers: Vec<Worker>,
    /// Tasks the service created for each line.
    tasks: Vec<u8>,
    /// Whether each line's (latest) task has ended at the service.
    task_ended: Vec<bool>,
    /// The worker and line each seat serves.
    seats: Vec<(usize, usize)>,
    /// Lines a worker reported not sent: stopped at the cap, or the store
    /// refused their intent (a rerun sends them).
    reported_unsent: Vec<bool>,
    /// Faults still allowed: crashes (a process that crashes starts
    /// again), answers lost, leases lapsing under a live worker, database
    /// restarts.
    crashes_left: u8,
    lost_answers_left: u8,
    lapses_left: u8,
    restarts_left: u8,
}

/// One step of one actor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Step {
    Claim(usize, usize),
    Decide(usize),
    StoreIntent(usize),
    Send(usize),
    Answer(usize),
    LoseAnswer(usize),
    StoreAccepted(usize),
    TaskEnds(usize),
    SeeEnd(usize),
    Crash(usize),
    Lapse(usize),
    RestartDatabase(usize),
}

/// Which protocol the workers follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Variant {
    /// The protocol as built.
    AsBuilt,
    /// Broken: the request leaves before the intent is stored.
    SendsBeforeTheIntent,
    /// Broken: a claim takes a line whose lease is still live.
    IgnoresLiveLeases,
    /// Broken: an intent is stored without checking that the claim is
    /// still the worker's (a paused worker, waking after its lease lapsed
    /// and the line was taken, sends all the same).
    UnfencedIntent,
}

/// The model: how many workers and lines, the cap, how many crashes, and
/// the variant.
struct Protocol {
    workers: usize,
    lines: usize,
    cap: u8,
    crashes: u8,
    variant: Variant,
}

impl Protocol {
    /// The line a worker's decision is made on, folded from the store as a
    /// run folds it.
    fn line_of(&self, stored: &StoreLine, line: usize) -> Line {
        let line = line as u64;
        let task = format!("task-{line}");
        Line::of(stored.events.iter().map(|event| match event {
            Stored::Intent => Event::Intent {
                line,
                name: format!("l{line}"),
                digest: "d".into(),
                sent_at: Some(1),
                ephemeral: false,
            },
            Stored::Accepted => Event::Accepted {
                line,
                id: task.clone(),
                polling_url: format!("https://api.example.com/v1/get_result?id={task}"),
                cost: None,
                adopted: false,
            },
            Stored::Saved => Event::Finished {
                line,
                status: "Ready".into(),
                file: Some(format!("l{line}.jpg")),
                seed: None,
                cost: Some(f64::from(PRICE)),
                duration: None,
                error: None,
                class: None,
            },
        }))
    }

    fn committed(&self, system: &System) -> u8 {
        system
            .lines
            .iter()
            .map(|line| line.charged + if line.hold.is_some() { PRICE } else { 0 })
            .sum()
    }

    /// Whether the worker still holds a live claim of the line.
    fn holds(system: &System, worker: usize, line: usize) -> bool {
        system.lines[line].lease == Some((worker, true))
    }

    fn claimable(&self, system: &System, worker: usize, line: usize) -> bool {
        match system.lines[line].lease {
            None | Some((_, false)) => true,
            Some((holder, true)) => holder == worker || self.variant == Variant::IgnoresLiveLeases,
        }
    }

    /// The worker gives the line back and is done with it.
    fn report(system: &mut System, worker: usize, line: usize) {
        if system.lines[line].lease.is_some_and(|(holder, _)| holder == worker) {
            system.lines[line].lease = None;
        }
        system.workers[worker].reported[line] = true;
        system.workers[worker].phase = Phase::Idle;
    }

    fn free_seat(system: &mut System, worker: usize, line: usize) {
        system.seats.retain(|served| *served != (worker, line));
    }

    /// Lets go of the worker's hold on the line, if the hold is its own.
    fn drop_hold(system: &mut System, worker: usize, line: usize) {
        if system.lines[line].hold == Some(worker) {
            system.lines[line].hold = None;
        }
    }

    /// Whether a decision to send or poll must wait for a seat.
    fn waits_for_a_seat(&self, system: &System, worker: usize) -> bool {
        let Phase::Claimed(line) = system.workers[worker].phase else {
            return false;
        };
        let action = decide(
            &self.line_of(&system.lines[line], line),
            self.seen(system),
            Asked::default(),
        );
        matches!(action, Action::Send | Action::Poll) && system.seats.len() >= SEATS
    }

    fn seen(&self, system: &System) -> Seen {
        Seen {
            saved_file: true,
            cap_reached: self.committed(system) + PRICE > self.cap,
            ..Seen::default()
        }
    }

    /// What the worker's decision on a claimed line leads to.
    fn decided(&self, system: &mut System, worker: usize, line: usize) {
        let folded = self.line_of(&system.lines[line], line);
        match decide(&folded, self.seen(system), Asked::default()) {
            Action::Send => {
                system.lines[line].hold = Some(worker);
                system.seats.push((worker, line));
                system.workers[worker].phase = Phase::Holding(line);
            }
            Action::Poll => {
                system.seats.push((worker, line));
                system.workers[worker].phase = Phase::Polling(line);
            }
            Action::StopAtCap => {
                system.reported_unsent[line] = true;
                Self::report(system, worker, line);
            }
            _ => Self::report(system, worker, line),
        }
    }

    fn claim(&self, system: &mut System, worker: usize, line: usize) {
        system.lines[line].lease = Some((worker, true));
        system.workers[worker].phase = Phase::Claimed(line);
    }

    /// The request leaves: the service creates (and will charge) a task.
    fn send(system: &mut System, worker: usize, line: usize) {
        system.tasks[line] += 1;
        system.task_ended[line] = false;
        system.workers[worker].phase = Phase::Sent(line);
    }

    fn store_intent(&self, system: &mut System, worker: usize, line: usize) {
        // An intent is stored only under a claim still the worker's.
        if Self::holds(system, worker, line) || self.variant == Variant::UnfencedIntent {
            system.lines[line].events.push(Stored::Intent);
            system.workers[worker].phase = Phase::Intended(line);
        } else {
            Self::drop_hold(system, worker, line);
            Self::free_seat(system, worker, line);
            system.workers[worker].phase = Phase::Idle;
        }
    }

    /// The task's end is seen: the result saved, the cost settled.
    fn see_end(system: &mut System, worker: usize, line: usize) {
        let stored = &mut system.lines[line];
        stored.events.push(Stored::Saved);
        stored.hold = None;
        // The charge is set from the settled cost, not added: a task two
        // workers saw end is charged once.
        stored.charged = PRICE;
        Self::free_seat(system, worker, line);
        Self::report(system, worker, line);
    }

    /// A crash loses what the process knew; its claim lapses in time, and
    /// the seat it held is freed with the process. A hold for a request
    /// that may have left stays (it may have been charged).
    fn crash(system: &mut System, worker: usize) {
        if let Phase::Holding(line) = system.workers[worker].phase {
            Self::drop_hold(system, worker, line);
        }
        system.seats.retain(|(holder, _)| *holder != worker);
        let process = &mut system.workers[worker];
        process.phase = Phase::Idle;
        process.reported.iter_mut().for_each(|reported| *reported = false);
        system.crashes_left -= 1;
    }
}

/// The line a worker is busy with.
fn working_on(phase: &Phase) -> Option<usize> {
    match phase {
        Phase::Idle => None,
        Phase::Claimed(line)
        | Phase::Holding(line)
        | Phase::Intended(line)
        | Phase::Sent(line)
        | Phase::Answered(line)
        | Phase::Polling(line) => Some(*line),
    }
}

impl Model for Protocol {
    type State = System;
    type Action = Step;

    fn init_states(&self) -> Vec<System> {
        vec![System {
            lines: vec![StoreLine::default(); self.lines],
            workers: vec![
                Worker {
                    phase: Phase::Idle,
                    reported: vec![false; self.lines],
                };
                self.workers
            ],
            tasks: vec![0; self.lines],
            task_ended: vec![false; self.lines],
            seats: Vec::new(),
            reported_unsent: vec![false; self.lines],
            crashes_left: self.crashes,
            lost_answers_left: 1,
            lapses_left: 1,
            restarts_left: 1,
        }]
    }

    fn actions(&self, system: &System, steps: &mut Vec<Step>) {
        for (worker, process) in system.workers.iter().enumerate() {
            match process.phase {
                Phase::Idle => {
                    for line in 0..self.lines {
                        if !process.reported[line] && self.claimable(system, worker, line) {
                            steps.push(Step::Claim(worker, line));
                        }
                    }
                }
                // A decision to send or poll waits while every seat is taken.
                Phase::Claimed(_) if self.waits_for_a_seat(system, worker) => {}
                Phase::Claimed(_) => steps.push(Step::Decide(worker)),
                Phase::Holding(_) => {
                    steps.push(Step::StoreIntent(worker));
                    if system.restarts_left > 0 {
                        steps.push(Step::RestartDatabase(worker));
                    }
                }
                Phase::Intended(_) => steps.push(Step::Send(worker)),
                Phase::Sent(_) => {
                    steps.push(Step::Answer(worker));
                    if system.lost_answers_left > 0 {
                        steps.push(Step::LoseAnswer(worker));
                    }
                }
                Phase::Answered(_) => steps.push(Step::StoreAccepted(worker)),
                Phase::Polling(line) if system.task_ended[line] => steps.push(Step::SeeEnd(worker)),
                Phase::Polling(_) => {}
            }
            if process.phase != Phase::Idle && system.crashes_left > 0 {
                steps.push(Step::Crash(worker));
            }
        }
        for line in 0..self.lines {
            if system.tasks[line] > 0 && !system.task_ended[line] {
                steps.push(Step::TaskEnds(line));
            }
            if let Some((holder, true)) = system.lines[line].lease {
                // A crashed holder's lease always lapses in time; a live
                // one's only while it is paused (once here).
                let holder_alive = working_on(&system.workers[holder].phase) == Some(line);
                if !holder_alive || system.lapses_left > 0 {
                    steps.push(Step::Lapse(line));
                }
            }
        }
    }

    fn next_state(&self, last: &System, step: Step) -> Option<System> {
        let mut system = last.clone();
        let line_of = |worker: usize| working_on(&last.workers[worker].phase);
        match step {
            Step::Claim(worker, line) => self.claim(&mut system, worker, line),
            Step::Decide(worker) => self.decided(&mut system, worker, line_of(worker)?),
            Step::StoreIntent(worker) => {
                let line = line_of(worker)?;
                if self.variant == Variant::SendsBeforeTheIntent {
                    // Broken: the request leaves, then the intent is stored.
                    Protocol::send(&mut system, worker, line);
                    system.workers[worker].phase = Phase::Intended(line);
                    return Some(system);
                }
                self.store_intent(&mut system, worker, line);
            }
            Step::Send(worker) => {
                let line = line_of(worker)?;
                if self.variant == Variant::SendsBeforeTheIntent {
                    system.lines[line].events.push(Stored::Intent);
                    system.workers[worker].phase = Phase::Sent(line);
                } else {
                    Protocol::send(&mut system, worker, line);
                }
            }
            Step::Answer(worker) => system.workers[worker].phase = Phase::Answered(line_of(worker)?),
            Step::LoseAnswer(worker) => {
                // Reported unknown; the hold stays, the seat is freed.
                let line = line_of(worker)?;
                system.lost_answers_left -= 1;
                Protocol::free_seat(&mut system, worker, line);
                Protocol::report(&mut system, worker, line);
            }
            Step::StoreAccepted(worker) => {
                // Stored whatever became of the claim: it says what the
                // service did.
                let line = line_of(worker)?;
                system.lines[line].events.push(Stored::Accepted);
                system.workers[worker].phase = Phase::Polling(line);
            }
            Step::TaskEnds(line) => system.task_ended[line] = true,
            Step::SeeEnd(worker) => Protocol::see_end(&mut system, worker, line_of(worker)?),
            Step::Crash(worker) => Protocol::crash(&mut system, worker),
            Step::Lapse(line) => {
                if let Some((holder, true)) = system.lines[line].lease {
                    if working_on(&system.workers[holder].phase) == Some(line) {
                        system.lapses_left -= 1;
                    }
                    system.lines[line].lease = Some((holder, false));
                }
            }
            Step::RestartDatabase(worker) => {
                // The intent's write fails: nothing was sent, the hold and
                // seat go back, and the line is reported not sent (a rerun
                // sends it).
                let line = line_of(worker)?;
                system.restarts_left -= 1;
                Protocol::drop_hold(&mut system, worker, line);
                Protocol::free_seat(&mut system, worker, line);
                system.reported_unsent[line] = true;
                Protocol::report(&mut system, worker, line);
            }
        }
        Some(system)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("no line is sent twice", |_, system: &System| {
                system.tasks.iter().all(|tasks| *tasks <= 1)
            }),
            Property::always("credits never exceed the cap", |model: &Protocol, system: &System| {
                model.committed(system) <= model.cap
            }),
            Property::always("a seat never serves two tasks", |_, system: &System| {
                let mut served = system.seats.clone();
                served.sort_unstable();
                served.dedup();
                served.len() == system.seats.len() && system.seats.len() <= SEATS
            }),
            Property::eventually(
                "every line ends, or is reported unknown or not sent",
                |model: &Protocol, system: &System| {
                    (0..model.lines).all(|line| {
                        let folded = model.line_of(&system.lines[line], line);
                        folded.ending().is_some()
                            || matches!(folded, Line::Unanswered { .. })
                            || system.reported_unsent[line]
                    })
                },
            ),
        ]
    }
}

/// Checks the model to its end; says how many distinct states it saw and
/// how long it took.
fn explored(protocol: Protocol, name: &str) -> impl Checker<Protocol> {
    let started = std::time::Instant::now();
    let checker = protocol.checker().threads(2).spawn_bfs().join();
    println!(
        "{name}: {} states in {:.1?}",
        checker.unique_state_count(),
        started.elapsed()
    );
    checker
}

/// Two workers, two lines, each fault at least once (two crashes); under a
/// cap that lets both lines through, and one that lets one through; and
/// three workers with one crash.
#[test]
fn the_protocol_as_built_keeps_every_property_in_every_state() {
    for (workers, cap, crashes) in [(2, 2, 2), (2, 1, 2), (3, 2, 1)] {
        let name = format!("{workers} workers, 2 lines, cap {cap}, {crashes} crashes");
        let checker = explored(
            Protocol {
                workers,
                lines: 2,
                cap,
                crashes,
                variant: Variant::AsBuilt,
            },
            &name,
        );
        checker.assert_properties();
        let states = checker.unique_state_count();
        assert!(
            states > 10_000,
            "{name}: a model this small explores nothing ({states} states)"
        );
    }
}

/// A broken variant, on two workers and two lines with one crash.
fn broken(variant: Variant) -> impl Checker<Protocol> {
    explored(
        Protocol {
            workers: 2,
            lines: 2,
            cap: 2,
            crashes: 1,
            variant,
        },
        &format!("{variant:?}"),
    )
}

#[test]
fn sending_before_the_intent_is_stored_pays_twice() {
    let path = broken(Variant::SendsBeforeTheIntent).assert_any_discovery("no line is sent twice");
    println!("counterexample: {:?}", path.into_actions());
}

#[test]
fn a_paused_worker_that_sends_without_its_claim_pays_twice() {
    let path = broken(Variant::UnfencedIntent).assert_any_discovery("no line is sent twice");
    println!("counterexample: {:?}", path.into_actions());
}

/// Taking a line whose lease is live breaks no property by itself: the
/// intent is stored only under the worker's own claim, so of two workers
/// holding one line only the last to claim it can send, and it sees what
/// the first stored. With that check gone as well, it pays twice.
#[test]
fn taking_a_line_whose_lease_is_live_is_held_by_the_intents_check() {
    broken(Variant::IgnoresLiveLeases).assert_no_discovery("no line is sent twice");
}
