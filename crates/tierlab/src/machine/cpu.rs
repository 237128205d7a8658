//! A CPU as hardware: its cycle clock, its TLBs, the address-space id it tags new entries
//! with, and its counters. What the kernel keeps per CPU (loaded mm, ASID slots, run queue)
//! is in `arch/` and `sched.rs`.

use crate::config::TlbConfig;
use crate::machine::tlb::Tlb;
use crate::stats::{IrqStat, PerfCounters};

pub struct Cpu {
    pub id: u32,
    pub node: u8,
    /// Cycles since boot; every CPU runs at the machine's clock rate.
    pub clock: u64,
    pub dtlb: Tlb,
    /// The L1 dTLB for 2 MiB pages (THP); 4 KiB and 2 MiB entries share the STLB.
    pub dtlb_2m: Tlb,
    pub itlb: Tlb,
    pub stlb: Tlb,
    pub perf: PerfCounters,
    pub irq: IrqStat,
    /// The address-space id in the translation base register (x86: the PCID in CR3; arm64:
    /// the ASID in TTBR): lookups match it and new entries are tagged with it.
    pub cur_asid: u16,
    /// Cycles spent in the kernel (faults, reclaim, IPI handlers).
    pub sys_cycles: u64,
    /// Cycles spent running user ops.
    pub user_cycles: u64,
    /// Idle cycles of the current quantum (rate-control waits).
    pub idle_cycles: u64,
    /// Data cache filter; None when machine.cache_kib = 0.
    pub cache: Option<crate::machine::cache::Cache>,
    /// How many times longer work takes on this CPU: 1, or with `machine.shared_core` the
    /// number of CPUs busy when its current quantum (or kswapd step) began.
    pub share: u64,
    /// The CPU's latest idle span [from, to) before its clock (a pacing wait, or no thread).
    pub idle_from: u64,
    pub idle_to: u64,
    /// Under `machine.vcpu_turns`: when this vCPU, having sent a flush IPI, began spinning on
    /// the acknowledgements (csd_lock_wait), whose PAUSE ends its turn (sim/turns.rs).
    pub ipi_wait_from: Option<u64>,
    /// Under `machine.vcpu_turns`: the targets of that flush (a bit per CPU below 64) that
    /// have not answered yet; each answers in its next turn that has a budget.
    pub ipi_wait_targets: u64,
}

impl Cpu {
    pub fn new(id: u32, node: u8, tlb: &TlbConfig, cache_kib: u32, cache_ways: u32) -> Self {
        Cpu {
            id,
            node,
            clock: 0,
            dtlb: Tlb::new(tlb.dtlb_entries, tlb.dtlb_ways),
            dtlb_2m: Tlb::new(tlb.dtlb_2m_entries, tlb.dtlb_2m_ways),
            itlb: Tlb::new(tlb.itlb_entries, tlb.itlb_ways),
            stlb: Tlb::new(tlb.stlb_entries, tlb.stlb_ways),
            perf: PerfCounters::default(),
            irq: IrqStat::default(),
            cur_asid: 0,
            sys_cycles: 0,
            user_cycles: 0,
            idle_cycles: 0,
            share: 1,
            idle_from: 0,
            idle_to: 0,
            ipi_wait_from: None,
            ipi_wait_targets: 0,
            cache: (cache_kib > 0)
                .then(|| crate::machine::cache::Cache::new(cache_kib, cache_ways)),
        }
    }

    /// Move the clock to `t` without work (the CPU was idle until then).
    #[inline]
    pub fn idle_until(&mut self, t: u64) {
        if t > self.clock {
            self.idle_from = self.clock;
            self.idle_to = t;
            self.clock = t;
        }
    }

    /// Whether the CPU ends in a halt: its clock stands at the end of a non-empty idle span
    /// (the timer that wakes it), not at the end of work.
    #[inline]
    pub fn halted(&self) -> bool {
        self.clock == self.idle_to && self.idle_from < self.idle_to
    }

    /// The CPU's last work ends `by` later (it waited for its turn on a shared core): if it
    /// halted after that work, the halt still ends at its timer, shortened by as much, or
    /// gone if the work now runs past it.
    pub fn delay_work(&mut self, by: u64) {
        if !self.halted() {
            self.clock += by;
            return;
        }
        let work_end = self.idle_from + by;
        if work_end < self.idle_to {
            self.idle_from = work_end;
        } else {
            self.idle_from = self.idle_to;
            self.clock = work_end;
        }
    }

    /// Whether the CPU was halted at `t` in its latest idle span (its thread sleeping until a
    /// timer), a time its clock has already run to.
    #[inline]
    pub fn idle_at(&self, t: u64) -> bool {
        self.idle_from <= t && t < self.idle_to
    }

    /// An interrupt at `t` ends the idle span the CPU is in early, if it has not run on past
    /// it: the CPU runs from `t`. Returns when the span was to end (the sleeping thread's
    /// timer), to go back to idle until then.
    pub fn interrupt_idle(&mut self, t: u64) -> Option<u64> {
        if self.clock != self.idle_to || !self.idle_at(t) {
            return None;
        }
        let until = self.idle_to;
        self.clock = t;
        self.idle_to = t;
        Some(until)
    }

    /// Whether the CPU was doing work at `t`, a time it has already run past (its clock is
    /// beyond `t`): only its latest idle span is remembered.
    #[inline]
    pub fn worked_at(&self, t: u64) -> bool {
        t < self.clock && !(self.idle_from <= t && t < self.idle_to)
    }

    /// Drop every TLB entry (TLBI VMALLE1 / a CR3 write without PCID).
    pub fn flush_all(&mut self) {
        self.dtlb.flush_all();
        self.dtlb_2m.flush_all();
        self.itlb.flush_all();
        self.stlb.flush_all();
    }

    /// Drop every TLB entry of one PCID from all three TLBs.
    pub fn flush_asid(&mut self, asid: u16) {
        self.dtlb.flush_pcid(asid);
        self.dtlb_2m.flush_pcid(asid);
        self.itlb.flush_pcid(asid);
        self.stlb.flush_pcid(asid);
    }

    /// Drop the translations of one address of one PCID, of either page size (INVLPG /
    /// INVPCID individual).
    pub fn flush_page(&mut self, vpn: u32, asid: u16) {
        self.dtlb.invalidate_page(vpn, asid);
        self.dtlb_2m.invalidate_page(vpn, asid);
        self.itlb.invalidate_page(vpn, asid);
        self.stlb.invalidate_page(vpn, asid);
    }
}
