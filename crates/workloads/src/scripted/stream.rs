//! One thread's lazy op stream: walks the shared `Program`, ~`CHUNK` ops per `refill`. A
//! worker runs the steps; a forked child (`Stream::child`) runs its fork's `child` list.

use std::collections::VecDeque;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tierlab::workload::{Mark, Op, OpBuf, ThreadStream};

use super::plan::{Access, Body, Pattern, Program, Writes};
use super::uniform_draws::uniform_addrs;
use super::{mix, PAGE};

/// Ops generated per `refill` (at least; the phase end markers may add a few).
pub(super) const CHUNK: usize = 1024;

/// `mix` salt of a forked child's random stream.
const CHILD_SALT: u64 = 0x6368_6c64;

/// The per-thread state machine.
pub(super) struct Stream {
    prog: Arc<Program>,
    /// The worker's index; a forked child's is its forking worker's (per-thread keys).
    tid: u32,
    seed: u64,
    rng: ChaCha8Rng,
    /// A forked child's fork phase: it runs that phase's `child` list, with no barriers.
    child_of: Option<usize>,
    started: bool,
    done: bool,
    /// Iteration of the whole program (`loops`).
    outer: u64,
    /// Step of the program (a child: position in its `child` list).
    step: usize,
    /// Iteration of the current step (`times`).
    rep: u64,
    /// Phase of the current step.
    member: usize,
    in_phase: bool,
    /// Next access (or fork) of the current phase.
    next: u64,
    /// Children forked so far: the next one's number, which seeds its random stream.
    forked: u64,
    /// Children whose `Op::Fork` is out but `fork_child` has not handed over yet, in
    /// order: (fork phase, child number).
    to_hand_over: VecDeque<(usize, u64)>,
    /// Children forked and not yet waited for.
    unwaited: u64,
}

impl Stream {
    pub fn new(prog: Arc<Program>, tid: u32, seed: u64) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(mix(seed, 0x7468_7264, tid as u64));
        Stream::with(prog, tid, seed, rng, None)
    }

    /// Child number `k` of worker `tid`, forked by phase `fork`: it starts in that phase
    /// (its memory is the worker's), so it skips the workers' start.
    fn child(prog: Arc<Program>, tid: u32, seed: u64, fork: usize, k: u64) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(mix(mix(seed, CHILD_SALT, tid as u64), CHILD_SALT, k));
        let mut s = Stream::with(prog, tid, seed, rng, Some(fork));
        s.started = true;
        s
    }

    fn with(
        prog: Arc<Program>,
        tid: u32,
        seed: u64,
        rng: ChaCha8Rng,
        child_of: Option<usize>,
    ) -> Self {
        Stream {
            prog,
            tid,
            seed,
            rng,
            child_of,
            started: false,
            done: false,
            outer: 0,
            step: 0,
            rep: 0,
            member: 0,
            in_phase: false,
            next: 0,
            forked: 0,
            to_hand_over: VecDeque::new(),
            unwaited: 0,
        }
    }

    /// The phase at the current position; None past the end.
    fn phase_at(&self, prog: &Program) -> Option<usize> {
        match self.child_of {
            Some(f) => match &prog.phases[f].body {
                Body::Fork { child, .. } => child.get(self.step).copied(),
                _ => None,
            },
            None if self.outer >= prog.loops => None,
            None => prog.steps.get(self.step).map(|s| s.members[self.member]),
        }
    }

    fn advance(&mut self) {
        if self.child_of.is_some() {
            self.step += 1;
            return;
        }
        let step = &self.prog.steps[self.step];
        self.member += 1;
        if self.member < step.members.len() {
            return;
        }
        self.member = 0;
        self.rep += 1;
        if self.rep < step.times {
            return;
        }
        self.rep = 0;
        self.step += 1;
        if self.step == self.prog.steps.len() {
            self.step = 0;
            self.outer += 1;
        }
    }

    /// Access phase `a`'s accesses from the current one on, until `out` reaches `target`,
    /// then its work mark; false if some are left for the next refill.
    fn accesses(&mut self, a: &Access, out: &mut OpBuf, target: usize) -> bool {
        let n = a.count();
        let no_gap = a.gap.get(self.tid as usize).is_none();
        if a.pace.is_none() && no_gap && !matches!(a.writes, Writes::Fraction(_)) {
            // One op per access: the accesses that fit, in one run (what `access` would
            // push, in the same order of random draws).
            let k = (n - self.next.min(n)).min(target.saturating_sub(out.len()) as u64);
            let (i0, rng) = (self.next, &mut self.rng);
            match a.writes {
                Writes::Always => run::<true>(rng, a, i0, k, out),
                _ => run::<false>(rng, a, i0, k, out),
            }
            self.next += k;
        }
        while self.next < n && out.len() < target {
            let i = self.next;
            self.access(a, i, out);
            self.next += 1;
        }
        if self.next < n {
            return false;
        }
        let mut left = n;
        while left > 0 {
            let w = left.min(u32::MAX as u64);
            out.push(Op::Mark(Mark::Work(w as u32)));
            left -= w;
        }
        true
    }

    fn access(&mut self, a: &Access, i: u64, out: &mut OpBuf) {
        if let Some(p) = a.pace {
            if i == 0 {
                if let Some(&d) = a.pace_delay.get(self.tid as usize) {
                    out.push(Op::PaceOrigin(d));
                }
            }
            // As the C program: one clock_nanosleep per batch of slots at least
            // PACE_BATCH_MIN_NS long, until the batch's first slot.
            if i.is_multiple_of(a.pace_batch) {
                out.push(Op::Pace((p as u64 * a.pace_batch) as u32));
            }
        }
        if let Some(&g) = a.gap.get(self.tid as usize) {
            if i > 0 {
                out.push(Op::Compute(g));
            }
        }
        let addr = match &a.pattern {
            Pattern::Seq => a.start + i * PAGE,
            Pattern::Rev => a.start + (a.pages - 1 - i) * PAGE,
            Pattern::Perm(p) => a.start + p[i as usize] as u64 * PAGE,
            Pattern::Stride { bytes, .. } => a.start + i * bytes,
            Pattern::Uniform { .. } => {
                let page = self.rng.gen_range(0..a.pages);
                a.start + page * PAGE + self.rng.gen_range(0..PAGE / 8) * 8
            }
            Pattern::Zipf { cdf, hot_last, .. } => {
                let u: f64 = self.rng.gen();
                let rank = (cdf.partition_point(|&c| c <= u) as u64).min(a.pages - 1);
                let page = if *hot_last { a.pages - 1 - rank } else { rank };
                a.start + page * PAGE + self.rng.gen_range(0..PAGE / 8) * 8
            }
        };
        let store = match a.writes {
            Writes::Never => false,
            Writes::Always => true,
            Writes::Fraction(f) => self.rng.gen::<f64>() < f,
        };
        out.push(if store {
            Op::Store(addr)
        } else {
            Op::Load(addr)
        });
    }

    /// Phase `fork`'s `Op::Fork`s from the current one on, until `out` reaches `target`;
    /// false if some are left for the next refill.
    fn fork(&mut self, fork: usize, count: u64, out: &mut OpBuf, target: usize) -> bool {
        while self.next < count && out.len() < target {
            out.push(Op::Fork);
            self.to_hand_over.push_back((fork, self.forked));
            self.forked += 1;
            self.unwaited += 1;
            self.next += 1;
        }
        self.next == count
    }

    /// One `Op::Wait` per child not yet waited for, until `out` reaches `target`; false if
    /// some are left for the next refill.
    fn wait(&mut self, out: &mut OpBuf, target: usize) -> bool {
        while self.unwaited > 0 && out.len() < target {
            out.push(Op::Wait);
            self.unwaited -= 1;
        }
        self.unwaited == 0
    }
}

/// Accesses `i0..i0 + k` of unpaced, gapless phase `a`, loads or (`STORE`) stores, appended
/// in one `extend` per run: no per-op dispatch on the pattern, no capacity check per push.
fn run<const STORE: bool>(rng: &mut ChaCha8Rng, a: &Access, i0: u64, k: u64, out: &mut OpBuf) {
    let op = |addr| {
        if STORE {
            Op::Store(addr)
        } else {
            Op::Load(addr)
        }
    };
    let (start, pages) = (a.start, a.pages);
    let idx = i0..i0 + k;
    match &a.pattern {
        Pattern::Seq => out.extend(idx.map(|i| op(start + i * PAGE))),
        Pattern::Rev => out.extend(idx.map(|i| op(start + (pages - 1 - i) * PAGE))),
        Pattern::Perm(p) => out.extend(
            p[i0 as usize..(i0 + k) as usize]
                .iter()
                .map(|&x| op(start + x as u64 * PAGE)),
        ),
        Pattern::Stride { bytes, .. } => out.extend(idx.map(|i| op(start + i * bytes))),
        Pattern::Uniform { .. } => {
            out.reserve(k as usize);
            uniform_addrs(rng, start, pages, k, |run| {
                out.extend(run.iter().map(|&addr| op(addr)))
            });
        }
        Pattern::Zipf { cdf, hot_last, .. } => out.extend(idx.map(|_| {
            let u: f64 = rng.gen();
            let rank = (cdf.partition_point(|&c| c <= u) as u64).min(pages - 1);
            let page = if *hot_last { pages - 1 - rank } else { rank };
            op(start + page * PAGE + rng.gen_range(0..PAGE / 8) * 8)
        })),
    }
}

impl ThreadStream for Stream {
    fn refill(&mut self, out: &mut OpBuf) {
        if self.done {
            return;
        }
        let prog = Arc::clone(&self.prog);
        let target = out.len() + CHUNK;
        if !self.started {
            // Workers start once the main thread has mapped the regions.
            out.push(Op::Barrier);
            out.extend_from_slice(&prog.worker_start[self.tid as usize]);
            self.started = true;
        }
        while out.len() < target {
            let Some(pi) = self.phase_at(&prog) else {
                // As the C program's worker: children do not outlive the workload's process.
                if !self.wait(out, target) {
                    return;
                }
                out.push(Op::Exit);
                self.done = true;
                return;
            };
            let phase = &prog.phases[pi];
            let part = phase.participants[self.tid as usize];
            if !self.in_phase {
                self.in_phase = true;
                self.next = 0;
                if part {
                    out.push(Op::Mark(Mark::Phase(phase.id)));
                    if let Body::Op(op) = phase.body {
                        out.push(op);
                    }
                }
            }
            if part {
                let finished = match &phase.body {
                    Body::Access(a) => self.accesses(a, out, target),
                    &Body::Fork { count, .. } => self.fork(pi, count, out, target),
                    Body::Wait => self.wait(out, target),
                    Body::Nothing | Body::Op(_) => true,
                };
                if !finished {
                    return;
                }
                if self.tid == phase.lead {
                    if let Some(op) = phase.after {
                        out.push(op);
                    }
                }
            }
            // A child is alone in its process: no barrier to wait at.
            if self.child_of.is_none() {
                out.push(Op::Barrier);
            }
            self.in_phase = false;
            self.advance();
        }
    }

    fn fork_child(&mut self) -> Option<Box<dyn ThreadStream>> {
        let (fork, k) = self.to_hand_over.pop_front()?;
        let prog = Arc::clone(&self.prog);
        Some(Box::new(Stream::child(prog, self.tid, self.seed, fork, k)))
    }
}
