//! The validated program every thread of a scripted workload runs: regions laid out at fixed
//! addresses, phases resolved to op bodies, loop groups resolved to steps.

use std::sync::Arc;

use tierlab::workload::{Backing, Op};

/// A region at its address.
pub(super) struct Region {
    pub name: String,
    pub start: u64,
    pub pages: u64,
    pub prot: u8,
    pub backing: Backing,
    /// A shmem object (`kind = "shmem"`) rather than a file on disk.
    pub shmem: bool,
    /// Node the region is moved to after each `touch` of it (approximated mbind).
    pub node: Option<u32>,
}

/// Which accesses of an access phase are stores.
#[derive(Clone, Copy, Debug)]
pub(super) enum Writes {
    Never,
    Always,
    Fraction(f64),
}

/// The order (or distribution) of an access phase's addresses.
pub(super) enum Pattern {
    Seq,
    Rev,
    /// A random order of the pages, shared by all threads.
    Perm(Arc<[u32]>),
    Stride {
        bytes: u64,
        count: u64,
    },
    Uniform {
        count: u64,
    },
    Zipf {
        count: u64,
        /// Cumulative probability of ranks 0..=k, shared by all threads.
        cdf: Arc<[f64]>,
        /// The exponent the CDF was built with (`zipf_s`).
        s: f64,
        hot_last: bool,
    },
}

/// A paced thread sleeps until the first slot of each batch of slots at least this long
/// (ns), then makes the batch's accesses: the C program's `MIN_SLEEP_NS` (runtime.c).
pub const PACE_BATCH_MIN_NS: u64 = 50_000;

/// Loads and stores over `pages` pages from `start`.
pub(super) struct Access {
    pub start: u64,
    pub pages: u64,
    pub pattern: Pattern,
    pub writes: Writes,
    /// Interval (ns) between access slots (`rate_per_s`); the thread paces in batches
    /// (`PACE_BATCH_MIN_NS`).
    pub pace: Option<u32>,
    /// Slots per pacing batch: PACE_BATCH_MIN_NS over the slot, rounded up (1 when unpaced).
    pub pace_batch: u64,
    /// `Op::Compute` cycles between accesses, per workload thread (empty: none).
    pub gap: Vec<u32>,
    /// `Op::PaceOrigin` ns per workload thread (empty: each thread's schedule opens where
    /// it is).
    pub pace_delay: Vec<u32>,
}

impl Access {
    /// Accesses one participating thread makes.
    pub fn count(&self) -> u64 {
        match &self.pattern {
            Pattern::Seq | Pattern::Rev => self.pages,
            Pattern::Perm(p) => p.len() as u64,
            Pattern::Stride { count, .. }
            | Pattern::Uniform { count }
            | Pattern::Zipf { count, .. } => *count,
        }
    }
}

/// What a participating thread does in a phase.
pub(super) enum Body {
    Nothing,
    Op(Op),
    Access(Access),
    /// `count` × fork(2); each child runs the phases `child` lists (indices), alone, and exits.
    Fork {
        count: u64,
        child: Vec<usize>,
    },
    /// wait(2) for every child the thread forked and has not waited for.
    Wait,
}

pub(super) struct PhasePlan {
    /// `Mark::Phase` id: the phase's index in the phase list.
    pub id: u32,
    pub participants: Vec<bool>,
    pub body: Body,
    /// Emitted by thread `lead` at the end of the phase (region binding).
    pub after: Option<Op>,
    pub lead: u32,
}

/// Phases run together `times` times (a loop group, or one phase once).
pub(super) struct Step {
    pub members: Vec<usize>,
    pub times: u64,
}

pub(super) struct Program {
    /// The main thread's mmaps of every region.
    pub prologue: Vec<Op>,
    /// What each worker does first (touch its stack).
    pub worker_start: Vec<Vec<Op>>,
    pub phases: Vec<PhasePlan>,
    pub steps: Vec<Step>,
    /// Repetitions of the whole step list.
    pub loops: u64,
}

impl Program {
    /// Loads and stores every thread makes over the whole run (children included), for the
    /// progress bar: each step's access phases × their participants × the step's repetitions,
    /// a fork's children running their phases alone; saturating, as it only scales a bar.
    pub fn expected_accesses(&self) -> u64 {
        let alone = |pi: usize| match &self.phases[pi].body {
            Body::Access(a) => a.count(),
            _ => 0,
        };
        let per_pass = self.steps.iter().fold(0u64, |sum, step| {
            let once = step.members.iter().fold(0u64, |acc, &pi| {
                let plan = &self.phases[pi];
                let threads = plan.participants.iter().filter(|&&p| p).count() as u64;
                let each = match &plan.body {
                    Body::Access(a) => a.count(),
                    Body::Fork { count, child } => {
                        let child_sum = child.iter().fold(0u64, |s, &c| s.saturating_add(alone(c)));
                        count.saturating_mul(child_sum)
                    }
                    _ => 0,
                };
                acc.saturating_add(each.saturating_mul(threads))
            });
            sum.saturating_add(once.saturating_mul(step.times))
        });
        per_pass.saturating_mul(self.loops)
    }
}
