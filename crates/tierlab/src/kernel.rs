//! The simulated kernel: everything Linux keeps in memory about memory — frames, nodes and
//! their zones, address spaces, the page cache, memory tiers, vm counters, pending TLB
//! batches, MIGRC state — plus the architecture's TLB state, the tiering policy, the
//! scheduler's tasks and the timers. Its functions (in `mm/`, `arch/`, `sched.rs`,
//! `check.rs`) take the `Machine` they act on explicitly.

use crate::arch::Arch;
use crate::check::Checker;
use crate::config::Config;
use crate::machine::Machine;
use crate::mm::filemap::PageCacheFile;
use crate::mm::memory_tiers::MemoryTiers;
use crate::mm::mm_types::Mm;
use crate::mm::mmzone::Pgdat;
use crate::mm::page::FrameTable;
use crate::mm::rmap::TlbUbc;
use crate::policy::TieringPolicy;
use crate::sched::Scheduler;
use crate::stats::VmCounters;
use rand_chacha::ChaCha8Rng;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// Timed events, ordered by (time, sequence number) for determinism.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Event {
    /// kswapd of a node runs one balance_pgdat pass.
    KswapdRun(u8),
    /// kswapd's short sleep (kswapd_try_to_sleep's schedule_timeout(HZ/10)) ends.
    KswapdSleepTimeout(u8),
    /// Take a timeline sample (and a periodic invariant check).
    Sample,
    /// A sleeping thread wakes up.
    Wake(u32),
    /// The vmstat worker of a CPU runs (mm/vmstat.c vmstat_update).
    VmstatUpdate(u16),
}

/// The kernel's tick rate: Debian's linux-image-6.12 amd64 config has CONFIG_HZ=250.
pub const CONFIG_HZ: u64 = 250;

/// The timer queue: events fire in (cycle, sequence) order, so equal times keep the order in
/// which they were armed.
#[derive(Default)]
pub struct Timers {
    heap: BinaryHeap<Reverse<(u64, u64, Event)>>,
    seq: u64,
}

impl Timers {
    pub fn schedule(&mut self, at: u64, ev: Event) {
        self.seq += 1;
        self.heap.push(Reverse((at, self.seq, ev)));
    }

    /// The next event's time, if any.
    pub fn next_at(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((t, _, _))| *t)
    }

    /// The next event that stands for a timer deadline of the machine (its clockevent
    /// programmed for it): not tierlab's own samples, nor the vmstat worker's deferrable
    /// timer, which the timer wheel runs from a tick.
    pub fn next_deadline(&self) -> Option<u64> {
        (self.heap.iter())
            .filter(|Reverse((_, _, ev))| !matches!(ev, Event::Sample | Event::VmstatUpdate(_)))
            .map(|Reverse((t, _, _))| *t)
            .min()
    }

    /// The next event if it is due by `now`.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Event)> {
        match self.heap.peek() {
            Some(Reverse((t, _, ev))) if *t <= now => {
                let (t, ev) = (*t, *ev);
                self.heap.pop();
                Some((t, ev))
            }
            _ => None,
        }
    }
}

pub struct Kernel {
    /// Kernel knobs (sysctls) and the rest of the scenario.
    pub cfg: Config,
    /// pg_data_t of every node.
    pub nodes: Vec<Pgdat>,
    /// struct page of every frame.
    pub frames: FrameTable,
    pub mms: Vec<Mm>,
    /// Every anon_vma: the mms that may map its folios.
    pub anon_vmas: crate::mm::rmap::AnonVmas,
    /// The workload's sockets.
    pub sockets: crate::net::Sockets,
    pub files: Vec<PageCacheFile>,
    pub vm: VmCounters,
    pub tiers: MemoryTiers,
    /// The shared zero page (my_zero_pfn) that read faults on untouched anon memory map.
    pub zero_pfn: u32,
    /// The huge zero page's first frame, once a read fault in a THP range has made it.
    pub huge_zero_pfn: Option<u32>,
    /// The reclaim context's pending batched flush (current->tlb_ubc).
    pub tlb_ubc: TlbUbc,
    /// MIGRC's deferred-flush state (kernel.migrc).
    pub migrc: crate::mm::migrc::Migrc,
    pub arch: Arch,
    /// The memory-tiering policy (kernel.tiering_policy); taken out while it runs.
    pub policy: Option<Box<dyn TieringPolicy>>,
    pub sched: Scheduler,
    pub timers: Timers,
    /// Time of the latest event or quantum start: "now" for kernel work outside a CPU.
    pub now: u64,
    /// The one seeded random source of kernel choices (demotion targets among equals).
    pub rng: ChaCha8Rng,
    pub checker: Checker,
    /// Anon pages MADV_PAGEOUT could not reclaim for want of a swap device.
    pub pageout_kept_no_swap: u64,
    /// The swap areas (`[[machine.swap]]`).
    pub swap: crate::mm::swapfile::SwapAreas,
    /// swap_migration_ad_supported (swapfile_init): migration entries keep young and dirty.
    pub swap_migration_ad_supported: bool,
    /// The NUMA scanner's events, when `sim.trace_numa_scan` is on.
    pub numa_scan_trace: Option<Vec<crate::mm::numa_scan_trace::NumaScanEvent>>,
}

impl Kernel {
    /// Arm a timer.
    pub fn schedule(&mut self, at: u64, ev: Event) {
        self.timers.schedule(at, ev);
    }

    /// Run `f` with the tiering policy and the kernel it decides for.
    pub fn with_policy<R>(
        &mut self,
        m: &mut Machine,
        f: impl FnOnce(&mut dyn TieringPolicy, &mut Kernel, &mut Machine) -> R,
    ) -> R {
        let mut p = self
            .policy
            .take()
            .expect("the tiering policy is not re-entered");
        let r = f(p.as_mut(), self, m);
        self.policy = Some(p);
        r
    }
}
