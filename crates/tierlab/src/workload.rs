//! The stream-of-operations interface shared by workload generators and trace readers.
//!
//! A workload is a set of processes (address spaces) and threads; each thread is a stream of
//! `Op`s. The simulator pulls ops in chunks (`ThreadStream::refill`), so the per-access path
//! reads a plain array and dispatches dynamically once per chunk, not once per access.

use crate::sim::AccessKind;

/// Protection bits of a mapping (PROT_READ / PROT_WRITE / PROT_EXEC).
pub mod prot {
    pub const READ: u8 = 1;
    pub const WRITE: u8 = 2;
    pub const EXEC: u8 = 4;
}

/// madvise(2) advice values (include/uapi/asm-generic/mman-common.h).
pub mod advice {
    pub const MADV_DONTNEED: u8 = 4;
    /// VM_HUGEPAGE: THP for this range when `enabled` is `madvise` (and direct compaction
    /// when `defrag` is `madvise`).
    pub const MADV_HUGEPAGE: u8 = 14;
    /// VM_NOHUGEPAGE: never THP for this range.
    pub const MADV_NOHUGEPAGE: u8 = 15;
    pub const MADV_COLD: u8 = 20;
    pub const MADV_PAGEOUT: u8 = 21;
}

/// What backs a mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// MAP_PRIVATE | MAP_ANONYMOUS.
    Anon,
    /// A file (by workload-local id) starting at page offset `pgoff`.
    File { file: u32, pgoff: u64 },
}

/// How a socket lays out the data it carries in pages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SockKind {
    /// AF_UNIX stream (net/unix/af_unix.c unix_stream_sendmsg): skbs of a small linear
    /// head and page fragments of order up to 3 (alloc_skb_with_frags).
    UnixStream,
    /// One linear buffer per message (SCTP's chunks, net/sctp/sm_make_chunk.c
    /// _sctp_make_chunk → alloc_skb): above 8 KiB kmalloc hands it to the page allocator.
    Linear,
}

/// Markers a workload uses to report its own metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mark {
    /// Start of the timed region (XSBench: omp_get_wtime before the simulation loop).
    RoiBegin,
    /// End of the timed region for this thread.
    RoiEnd,
    /// `n` units of work completed (XSBench: lookups).
    Work(u32),
    /// The thread enters phase `id` (an index into `Workload::phases`).
    Phase(u32),
}

/// One operation of a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Load(u64),
    Store(u64),
    /// Instruction fetch: goes through the iTLB.
    IFetch(u64),
    /// Cycles of computation between accesses.
    Compute(u32),
    Mmap {
        addr: u64,
        len: u64,
        prot: u8,
        backing: Backing,
    },
    Munmap {
        addr: u64,
        len: u64,
    },
    Mprotect {
        addr: u64,
        len: u64,
        prot: u8,
    },
    /// madvise(addr, len, advice) with an `advice::*` value.
    Madvise {
        addr: u64,
        len: u64,
        advice: u8,
    },
    /// nanosleep: the thread leaves its CPU for this many simulated nanoseconds.
    Sleep(u64),
    /// Rate control: wait (idle) until this thread's next slot, `interval_ns` after the
    /// previous one; the first Pace opens the schedule.
    Pace(u32),
    /// `tierlab validate`'s sampler between samples (runtime.c sampler_process): the first
    /// opens its schedule; each later one waits for the next slot, `interval_ns` on, with
    /// poll(2)'s whole-millisecond timeout and slack (`sim/poll_wait.rs`).
    PollSlot(u32),
    /// The first `Pace` of this phase falls this many ns after the process's last barrier
    /// released its threads, instead of where the thread happens to be (`tierlab validate`
    /// sets it from where the guest program's threads began their pace slots).
    PaceOrigin(u32),
    /// move_pages(2) of every page in [addr, addr + len) to `node` (MPOL_MF_MOVE).
    MovePages {
        addr: u64,
        len: u64,
        node: u32,
    },
    /// read(2) of /proc/PID/numa_maps of process `process` (`tierlab validate`'s sampler):
    /// show_numa_map walks its page tables, `cycles_per_entry` for each present PTE and each
    /// PMD-mapped THP (gather_pte_stats, gather_pmd_stats in fs/proc/task_mmu.c).
    ReadNumaMaps {
        process: u32,
        cycles_per_entry: u32,
    },
    /// Wait until every live thread of the process has reached a barrier (an OpenMP barrier).
    /// Threads waiting in `Join` do not take part.
    Barrier,
    /// pthread_join of every other thread of the process: sleep until they have all exited
    /// (a C program's main thread after pthread_create).
    Join,
    Mark(Mark),
    /// fork(2): a child process with a copy-on-write copy of this process's memory and one
    /// thread, which runs the program `ThreadStream::fork_child` gives.
    Fork,
    /// execve(2) in a single-threaded process: its memory is replaced by a new, empty
    /// address space (the program maps what it needs next).
    Exec,
    /// wait(2): reap a child process that has exited, sleeping until one does; returns at
    /// once if there is no child.
    Wait,
    /// send(2) of `bytes` on socket `sock` (a workload-wide id): the kernel allocates the
    /// buffer pages on this CPU as a socket of `kind` does, and the thread sleeps while the
    /// socket's send buffer is full.
    Send {
        sock: u32,
        bytes: u32,
        kind: SockKind,
    },
    /// recv(2) of `bytes` from socket `sock`: sleeps until that much has been sent, then
    /// frees the buffer pages on this CPU.
    Recv {
        sock: u32,
        bytes: u32,
    },
    /// The thread ends (also implied when the stream runs dry); with the process's last
    /// thread the process exits and its memory is freed.
    Exit,
}

/// One op as the engine reads it from an `OpBuf`: the ops a thread runs by the million
/// (accesses, compute, marks, pacing) as they are, the rest (syscalls and the like, which carry
/// up to 40 bytes of arguments) by index into the buffer's side vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Slot {
    /// A load, store or instruction fetch: one arm in the engine's loop.
    Access(AccessKind, u64),
    Compute(u32),
    Mark(Mark),
    Pace(u32),
    /// `OpBuf::side[i]`.
    Other(u32),
}

/// A `Slot` in 8 bytes: what it is in the top `TAG_BITS` bits (one of the `TAG_*`), its
/// payload below (an address below 2^61, a count, a side index; a mark's kind from bit 32).
const TAG_SHIFT: u32 = 61;
const PAYLOAD: u64 = (1 << TAG_SHIFT) - 1;
const TAG_LOAD: u64 = 0;
const TAG_STORE: u64 = 1;
const TAG_IFETCH: u64 = 2;
const TAG_COMPUTE: u64 = 3;
const TAG_MARK: u64 = 4;
const TAG_PACE: u64 = 5;
const TAG_OTHER: u64 = 6;

#[inline(always)]
fn word(tag: u64, payload: u64) -> u64 {
    (tag << TAG_SHIFT) | payload
}

/// A chunk of a thread's ops, as `ThreadStream::refill` appends them and the engine reads
/// them: a `Vec<Op>` in behaviour (push, extend, len), stored as 8-byte words (a packed
/// `Slot`) so that the per-access path writes and reads 8 bytes, not the 40 of an `Op`.
#[derive(Clone, Debug, Default)]
pub struct OpBuf {
    words: Vec<u64>,
    side: Vec<Op>,
}

impl OpBuf {
    pub fn new() -> Self {
        OpBuf::default()
    }

    pub fn with_capacity(n: usize) -> Self {
        OpBuf {
            words: Vec::with_capacity(n),
            side: Vec::new(),
        }
    }

    #[inline(always)]
    fn encode(side: &mut Vec<Op>, op: Op) -> u64 {
        match op {
            Op::Load(a) if a <= PAYLOAD => word(TAG_LOAD, a),
            Op::Store(a) if a <= PAYLOAD => word(TAG_STORE, a),
            Op::IFetch(a) if a <= PAYLOAD => word(TAG_IFETCH, a),
            Op::Compute(n) => word(TAG_COMPUTE, n as u64),
            Op::Mark(m) => word(
                TAG_MARK,
                match m {
                    Mark::RoiBegin => 0,
                    Mark::RoiEnd => 1 << 32,
                    Mark::Work(n) => 2 << 32 | n as u64,
                    Mark::Phase(id) => 3 << 32 | id as u64,
                },
            ),
            Op::Pace(ns) => word(TAG_PACE, ns as u64),
            other => {
                let i = u32::try_from(side.len()).expect("under 2^32 ops in a chunk");
                side.push(other);
                word(TAG_OTHER, i as u64)
            }
        }
    }

    #[inline]
    pub fn push(&mut self, op: Op) {
        let w = Self::encode(&mut self.side, op);
        self.words.push(w);
    }

    pub fn extend_from_slice(&mut self, ops: &[Op]) {
        self.extend(ops.iter().copied());
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.words.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.words.is_empty()
    }

    pub fn reserve(&mut self, additional: usize) {
        self.words.reserve(additional);
    }

    pub fn clear(&mut self) {
        self.words.clear();
        self.side.clear();
    }

    /// The op at `i`.
    pub fn get(&self, i: usize) -> Op {
        match self.slot(i) {
            Slot::Access(AccessKind::Load, a) => Op::Load(a),
            Slot::Access(AccessKind::Store, a) => Op::Store(a),
            Slot::Access(AccessKind::IFetch, a) => Op::IFetch(a),
            Slot::Compute(n) => Op::Compute(n),
            Slot::Mark(m) => Op::Mark(m),
            Slot::Pace(ns) => Op::Pace(ns),
            Slot::Other(j) => self.side[j as usize],
        }
    }

    /// The ops in order.
    pub fn iter(&self) -> impl Iterator<Item = Op> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    pub fn to_vec(&self) -> Vec<Op> {
        self.iter().collect()
    }

    #[inline(always)]
    pub(crate) fn slot(&self, i: usize) -> Slot {
        Self::decode(self.words[i])
    }

    /// The packed ops, for a loop that reads them in order (`decode` each).
    #[inline(always)]
    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }

    /// The `Slot` a word of `words` holds.
    #[inline(always)]
    pub(crate) fn decode(w: u64) -> Slot {
        let p = w & PAYLOAD;
        match w >> TAG_SHIFT {
            TAG_LOAD => Slot::Access(AccessKind::Load, p),
            TAG_STORE => Slot::Access(AccessKind::Store, p),
            TAG_IFETCH => Slot::Access(AccessKind::IFetch, p),
            TAG_COMPUTE => Slot::Compute(p as u32),
            TAG_MARK => Slot::Mark(match p >> 32 {
                0 => Mark::RoiBegin,
                1 => Mark::RoiEnd,
                2 => Mark::Work(p as u32),
                _ => Mark::Phase(p as u32),
            }),
            TAG_PACE => Slot::Pace(p as u32),
            _ => Slot::Other(p as u32),
        }
    }

    /// The op a `Slot::Other(i)` stands for.
    #[inline]
    pub(crate) fn side(&self, i: u32) -> Op {
        self.side[i as usize]
    }
}

impl Extend<Op> for OpBuf {
    #[inline]
    fn extend<I: IntoIterator<Item = Op>>(&mut self, ops: I) {
        let side = &mut self.side;
        self.words
            .extend(ops.into_iter().map(|op| Self::encode(side, op)));
    }
}

/// A thread's operation source. `refill` appends at least one op unless the stream has ended;
/// an empty append means the thread exits.
pub trait ThreadStream: Send {
    fn refill(&mut self, out: &mut OpBuf);

    /// The child's program when this thread runs `Op::Fork` (None: this program does not
    /// fork, and its `Op::Fork` is an error).
    fn fork_child(&mut self) -> Option<Box<dyn ThreadStream>> {
        None
    }
}

/// Where a thread runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// Pinned to one CPU (sched_setaffinity to a single CPU).
    Pinned(u32),
    /// Placed by the scheduler: the least loaded CPU at start.
    Spread,
}

pub struct ThreadSpec {
    /// Index of the process (address space) this thread belongs to.
    pub process: u32,
    pub placement: Placement,
    pub stream: Box<dyn ThreadStream>,
}

/// A file the workload's mappings may refer to.
#[derive(Clone, Debug, Default)]
pub struct FileSpec {
    pub name: String,
    pub pages: u64,
    /// A shmem object (memfd_create, or what MAP_SHARED | MAP_ANONYMOUS maps through
    /// shmem_zero_setup) rather than a file on disk: swap-backed, zero-filled.
    pub shmem: bool,
}

/// A named address range whose per-node residency the timeline samples.
#[derive(Clone, Debug)]
pub struct RegionSpec {
    pub name: String,
    pub process: u32,
    pub start: u64,
    pub len: u64,
}

pub struct Workload {
    pub name: String,
    /// Name of the unit counted by `Mark::Work` (e.g. "lookups").
    pub work_unit: String,
    pub processes: u32,
    pub files: Vec<FileSpec>,
    pub threads: Vec<ThreadSpec>,
    /// Workload-specific facts for the report (e.g. XSBench's input summary).
    pub info: Vec<(String, String)>,
    /// Names of the phases `Mark::Phase` refers to.
    pub phases: Vec<String>,
    /// Regions whose residency the timeline reports.
    pub regions: Vec<RegionSpec>,
    /// How much the workload will do, when it knows: the progress bar's denominator.
    pub expected: Option<Expected>,
}

/// The size of a workload, known before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expected {
    /// Units of `Mark::Work` over all threads (XSBench: lookups).
    Work(u64),
    /// Loads and stores over all threads (scripted phases).
    Accesses(u64),
}

/// A thread whose operations are given up front (tests, small hand-written workloads).
pub struct OpList {
    ops: Vec<Op>,
    next: usize,
}

impl OpList {
    pub fn new(ops: Vec<Op>) -> Self {
        OpList { ops, next: 0 }
    }
}

impl ThreadStream for OpList {
    fn refill(&mut self, out: &mut OpBuf) {
        let end = (self.next + 1024).min(self.ops.len());
        out.extend_from_slice(&self.ops[self.next..end]);
        self.next = end;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn op_buf_gives_back_what_was_pushed() {
        let ops = vec![
            Op::Load(1 << 43),
            Op::Load(1 << 61),
            Op::Mark(Mark::RoiEnd),
            Op::Mark(Mark::Phase(u32::MAX)),
            Op::Mmap {
                addr: 0x1000,
                len: 0x2000,
                prot: prot::READ,
                backing: Backing::File { file: 3, pgoff: 9 },
            },
            Op::Store(u64::MAX),
            Op::IFetch(0x400000),
            Op::Compute(7),
            Op::Mark(Mark::Work(2)),
            Op::Pace(100),
            Op::Send {
                sock: 1,
                bytes: 4096,
                kind: SockKind::Linear,
            },
            Op::Sleep(5),
            Op::Exit,
        ];
        let mut buf = OpBuf::new();
        buf.push(ops[0]);
        buf.extend(ops[1..7].iter().copied());
        buf.extend_from_slice(&ops[7..]);
        assert_eq!(buf.len(), ops.len());
        assert_eq!(buf.to_vec(), ops);
        assert_eq!(
            buf.side.len(),
            6,
            "addresses from 2^61, Mmap, Send, Sleep and Exit go to the side"
        );
        buf.clear();
        assert!(buf.is_empty() && buf.side.is_empty());
        buf.push(Op::Exit);
        assert_eq!(buf.slot(0), Slot::Other(0));
        assert_eq!(buf.side(0), Op::Exit);
    }
}
