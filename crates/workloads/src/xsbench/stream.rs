//! One thread's lazy op stream: its program as a list of segments, expanded ~`CHUNK` ops per
//! `refill`.

use tierlab::workload::{Op, OpBuf, ThreadStream};

use super::lookup::Lookups;
use super::PAGE;

/// A piece of a thread's program.
#[derive(Clone, Copy, Debug)]
pub(super) enum Seg {
    Op(Op),
    /// One `Store` per page (ascending) followed by `Compute(cycles)`.
    Touch {
        start: u64,
        pages: u64,
        cycles: u32,
    },
    /// `count` times `Compute(cycles)`.
    Compute {
        count: u64,
        cycles: u32,
    },
    /// This thread's lookups.
    Lookups {
        count: u64,
    },
}

impl Seg {
    /// The loads, stores and fetches this segment makes, `per_lookup` for each lookup.
    pub fn expected_accesses(&self, per_lookup: f64) -> f64 {
        match self {
            Seg::Op(Op::Load(_) | Op::Store(_) | Op::IFetch(_)) => 1.0,
            Seg::Op(_) | Seg::Compute { .. } => 0.0,
            Seg::Touch { pages, .. } => *pages as f64,
            Seg::Lookups { count } => *count as f64 * per_lookup,
        }
    }
}

/// Ops emitted per `refill` (at least; the current lookup is finished).
pub(super) const CHUNK: usize = 1024;

pub(super) struct XsStream {
    segs: Vec<Seg>,
    seg: usize,
    /// Progress inside the current segment.
    cursor: u64,
    lookups: Lookups,
}

impl XsStream {
    pub fn new(segs: Vec<Seg>, lookups: Lookups) -> Self {
        XsStream {
            segs,
            seg: 0,
            cursor: 0,
            lookups,
        }
    }
}

impl ThreadStream for XsStream {
    fn refill(&mut self, out: &mut OpBuf) {
        let target = out.len() + CHUNK;
        while out.len() < target {
            let Some(&seg) = self.segs.get(self.seg) else {
                return;
            };
            match seg {
                Seg::Op(op) => {
                    out.push(op);
                    self.seg += 1;
                }
                Seg::Touch {
                    start,
                    pages,
                    cycles,
                } => {
                    while self.cursor < pages && out.len() < target {
                        out.push(Op::Store(start + self.cursor * PAGE));
                        out.push(Op::Compute(cycles));
                        self.cursor += 1;
                    }
                    if self.cursor == pages {
                        self.seg += 1;
                        self.cursor = 0;
                    }
                }
                Seg::Compute { count, cycles } => {
                    while self.cursor < count && out.len() < target {
                        out.push(Op::Compute(cycles));
                        self.cursor += 1;
                    }
                    if self.cursor == count {
                        self.seg += 1;
                        self.cursor = 0;
                    }
                }
                Seg::Lookups { count } => {
                    while self.cursor < count && out.len() < target {
                        self.lookups.emit(out);
                        self.cursor += 1;
                    }
                    if self.cursor == count {
                        self.seg += 1;
                        self.cursor = 0;
                    }
                }
            }
        }
    }
}
