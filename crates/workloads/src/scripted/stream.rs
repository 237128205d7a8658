//! One thread's lazy op stream: walks the shared `Program`, ~`CHUNK` ops per `refill`.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tierlab::workload::{Mark, Op, ThreadStream};

use super::plan::{Access, Body, Pattern, Program, Writes};
use super::{mix, PAGE};

/// Ops generated per `refill` (at least; the phase end markers may add a few).
pub(super) const CHUNK: usize = 1024;

/// The per-thread state machine.
pub(super) struct Stream {
    prog: Arc<Program>,
    tid: u32,
    rng: ChaCha8Rng,
    started: bool,
    done: bool,
    /// Iteration of the whole program (`loops`).
    outer: u64,
    step: usize,
    /// Iteration of the current step (`times`).
    rep: u64,
    /// Phase of the current step.
    member: usize,
    in_phase: bool,
    /// Next access of the current phase.
    next: u64,
}

impl Stream {
    pub fn new(prog: Arc<Program>, tid: u32, seed: u64) -> Self {
        Stream {
            prog,
            tid,
            rng: ChaCha8Rng::seed_from_u64(mix(seed, 0x7468_7264, tid as u64)),
            started: false,
            done: false,
            outer: 0,
            step: 0,
            rep: 0,
            member: 0,
            in_phase: false,
            next: 0,
        }
    }

    fn advance(&mut self) {
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

    fn access(&mut self, a: &Access, i: u64, out: &mut Vec<Op>) {
        if let Some(p) = a.pace {
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
}

impl ThreadStream for Stream {
    fn refill(&mut self, out: &mut Vec<Op>) {
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
            if prog.steps.is_empty() || self.outer >= prog.loops {
                out.push(Op::Exit);
                self.done = true;
                return;
            }
            let phase = &prog.phases[prog.steps[self.step].members[self.member]];
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
                if let Body::Access(a) = &phase.body {
                    let n = a.count();
                    while self.next < n && out.len() < target {
                        let i = self.next;
                        self.access(a, i, out);
                        self.next += 1;
                    }
                    if self.next < n {
                        return;
                    }
                    let mut left = n;
                    while left > 0 {
                        let w = left.min(u32::MAX as u64);
                        out.push(Op::Mark(Mark::Work(w as u32)));
                        left -= w;
                    }
                }
                if self.tid == phase.lead {
                    if let Some(op) = phase.after {
                        out.push(op);
                    }
                }
            }
            out.push(Op::Barrier);
            self.in_phase = false;
            self.advance();
        }
    }
}
