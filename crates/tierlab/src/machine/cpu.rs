//! A CPU: its cycle clock, its TLBs, its PCID slots and its counters.

use crate::config::TlbConfig;
use crate::machine::tlb::Tlb;
use crate::mm::page::NIL;
use crate::stats::{IrqStat, PerfCounters};
use std::collections::VecDeque;

/// One of the CPU's dynamic ASIDs/PCIDs (cpu_tlbstate.ctxs[]): which mm it holds and the
/// mm's tlb_gen the TLB contents are known to be current with.
#[derive(Clone, Copy, Debug)]
pub struct AsidSlot {
    pub mm: u32,
    pub tlb_gen: u64,
}

pub struct Cpu {
    pub id: u32,
    pub node: u8,
    /// Cycles since boot; every CPU runs at the machine's clock rate.
    pub clock: u64,
    pub dtlb: Tlb,
    pub itlb: Tlb,
    pub stlb: Tlb,
    pub perf: PerfCounters,
    pub irq: IrqStat,
    /// cpu_tlbstate.loaded_mm (NIL: init_mm).
    pub loaded_mm: u32,
    /// cpu_tlbstate_shared.is_lazy: running no user task but keeping the last mm loaded.
    pub is_lazy: bool,
    pub asids: Vec<AsidSlot>,
    /// PCID of loaded_mm.
    pub cur_asid: u8,
    /// Round-robin victim for the next ASID allocation (choose_new_asid's next_asid).
    pub next_asid: u8,
    /// Thread running here (NIL: idle).
    pub current: u32,
    pub runqueue: VecDeque<u32>,
    /// When the current thread's slice ends.
    pub slice_end: u64,
    /// Cycles spent in the kernel (faults, reclaim, IPI handlers).
    pub sys_cycles: u64,
    /// Cycles spent running user ops.
    pub user_cycles: u64,
    /// Idle cycles of the current quantum (rate-control waits).
    pub idle_cycles: u64,
    /// Data cache filter; None when machine.cache_kib = 0.
    pub cache: Option<crate::machine::cache::Cache>,
}

impl Cpu {
    pub fn new(id: u32, node: u8, tlb: &TlbConfig, cache_kib: u32, cache_ways: u32) -> Self {
        Cpu {
            id,
            node,
            clock: 0,
            dtlb: Tlb::new(tlb.dtlb_entries, tlb.dtlb_ways),
            itlb: Tlb::new(tlb.itlb_entries, tlb.itlb_ways),
            stlb: Tlb::new(tlb.stlb_entries, tlb.stlb_ways),
            perf: PerfCounters::default(),
            irq: IrqStat::default(),
            loaded_mm: NIL,
            is_lazy: false,
            asids: vec![
                AsidSlot {
                    mm: NIL,
                    tlb_gen: 0
                };
                tlb.nr_dyn_asids as usize
            ],
            cur_asid: 0,
            next_asid: 0,
            current: NIL,
            runqueue: VecDeque::new(),
            slice_end: 0,
            sys_cycles: 0,
            user_cycles: 0,
            idle_cycles: 0,
            cache: (cache_kib > 0)
                .then(|| crate::machine::cache::Cache::new(cache_kib, cache_ways)),
        }
    }

    /// Whether the CPU has a thread to run.
    pub fn busy(&self) -> bool {
        self.current != NIL || !self.runqueue.is_empty()
    }

    /// Drop every TLB entry of one PCID from all three TLBs.
    pub fn flush_asid(&mut self, asid: u8) {
        self.dtlb.flush_pcid(asid);
        self.itlb.flush_pcid(asid);
        self.stlb.flush_pcid(asid);
    }

    /// Drop the translations of one page of one PCID (INVLPG / INVPCID individual).
    pub fn flush_page(&mut self, vpn: u32, asid: u8) {
        self.dtlb.invalidate_page(vpn, asid);
        self.itlb.invalidate_page(vpn, asid);
        self.stlb.invalidate_page(vpn, asid);
    }
}
