//! arm64 TLB management (arch/arm64/include/asm/tlbflush.h, arch/arm64/mm/context.c): the
//! hardware broadcasts TLB invalidation, so there are no IPIs; a CPU issues `TLBI VALE1IS`
//! per page (or `TLBI ASIDE1IS` for the whole address space) and waits for their completion
//! everywhere with `DSB ISH`. Until that DSB completes, any CPU may still use the entries.
//! Switching mm only changes the ASID in TTBR0, no flush, except the first switch of each CPU
//! after an ASID generation rollover (`arm64_asid`).
//! Batched unmap (`arch_tlbbatch_add_pending`, mainline 43b3dfdd0455, seed 001) issues the
//! TLBIs without waiting and `arch_tlbbatch_flush` waits once.

use crate::arch::arm64_asid::AsidAllocator;
use crate::arch::{ArchTlbBatch, TlbCtx};
use crate::config::Config;
use crate::mm::mm_types::CpuMask;
use crate::mm::page::NIL;
use crate::stats::Perf;

/// MAX_TLBI_OPS = PTRS_PER_PTE: __flush_tlb_range flushes the whole ASID for ranges of at
/// least this many pages (without FEAT_TLBIRANGE, which tierlab does not model).
pub const MAX_TLBI_OPS: u32 = 512;

/// MAX_PHYSMEM_BITS with 48-bit physical addresses (arch/arm64/include/asm/sparsemem.h,
/// CONFIG_ARM64_PA_BITS_48).
pub const MAX_PHYSMEM_BITS: u32 = 48;

/// Swap offset bits of an arm64 swap PTE (arch/arm64/include/asm/pgtable.h: __SWP_TYPE_BITS
/// 5 at bit 3, __SWP_OFFSET_BITS 50 at bit 8).
pub const SWP_OFFSET_BITS: u32 = 50;

/// What each CPU runs (tierlab's bookkeeping: arm64 keeps no per-CPU flush state).
#[derive(Clone, Copy, Debug)]
pub struct CpuState {
    pub loaded_mm: u32,
    pub is_lazy: bool,
}

/// A broadcast invalidation issued and not yet completed by a DSB, with the mm it was for.
#[derive(Clone, Copy, Debug)]
enum Tlbi {
    /// TLBI VALE1IS: one page of one ASID.
    Page { mm: usize, asid: u16, vpn: u32 },
    /// TLBI ASIDE1IS: every entry of one ASID.
    Asid { mm: usize, asid: u16 },
}

pub struct Arm64 {
    pub cpus: Vec<CpuState>,
    /// TLBIs issued without a DSB (batched unmap). A DSB completes them all: the issuing
    /// CPU's own, and on a task switch (__switch_to's dsb(ish)) any moved task's.
    pending: Vec<Tlbi>,
    /// ARM64_WORKAROUND_REPEAT_TLBI (Falkor erratum 1009, Cortex-A76 erratum 1286807): every
    /// TLBI is repeated after a DSB, so arch_tlbbatch_should_defer refuses to batch.
    repeat_tlbi: bool,
    /// Which ASID each mm has.
    pub asids: AsidAllocator,
    /// debug.tlb_break = "skip_rollover_flush".
    skip_rollover_flush: bool,
}

impl Arm64 {
    pub fn new(cfg: &Config) -> Arm64 {
        let state = CpuState {
            loaded_mm: NIL,
            is_lazy: false,
        };
        Arm64 {
            cpus: vec![state; cfg.machine.cpus as usize],
            pending: Vec::new(),
            repeat_tlbi: cfg.arch.repeat_tlbi_erratum,
            asids: AsidAllocator::new(cfg.arch.asid_bits, cfg.arch.kpti, cfg.machine.cpus as usize),
            skip_rollover_flush: cfg.debug.tlb_break == crate::config::TlbBreak::SkipRolloverFlush,
        }
    }

    /// check_and_switch_context / cpu_switch_mm: TTBR0 takes the mm's ASID, allocated at its
    /// first switch (a rollover then may oblige this CPU to flush its whole TLB first). The
    /// DSB of __switch_to completes any TLBI still in flight.
    pub fn switch_mm(&mut self, t: &mut TlbCtx, c: usize, mm: usize) {
        self.complete_pending(t);
        let rollovers = self.asids.rollovers;
        let (asid, flush_all) = self.asids.check_and_switch_context(c, mm);
        if self.asids.rollovers != rollovers {
            t.m.cpus[c].perf.inc(Perf::AsidRollovers);
        }
        if flush_all && !self.skip_rollover_flush {
            // local_flush_tlb_all: TLBI VMALLE1, DSB NSH on this CPU only.
            let cycles = t.m.cost.tlbi_cycles as u64;
            charge_counted(t, c, cycles, Perf::Tlbi, Perf::TlbiCycles);
            t.m.cpus[c].flush_all();
        }
        let st = &mut self.cpus[c];
        st.loaded_mm = mm as u32;
        st.is_lazy = false;
        t.m.cpus[c].cur_asid = asid;
        t.mms[mm].cpumask.set(c);
    }

    pub fn enter_lazy_tlb(&mut self, c: usize) {
        if self.cpus[c].loaded_mm != NIL {
            self.cpus[c].is_lazy = true;
        }
    }

    /// __flush_tlb_range (flush_tlb_page for one page): TLBI VALE1IS per page, or TLBI
    /// ASIDE1IS for MAX_TLBI_OPS pages or more (flush_tlb_mm), then DSB ISH.
    pub fn flush_tlb_range(&mut self, t: &mut TlbCtx, c: usize, mm: usize, s: u32, e: u32) {
        self.flush_tlb_range_stride(t, c, mm, s, e, 0);
    }

    /// __flush_tlb_range with a stride of 2^`stride_shift` pages (PMD_SIZE for a huge PMD:
    /// one TLBI per 2 MiB).
    pub fn flush_tlb_range_stride(
        &mut self,
        t: &mut TlbCtx,
        c: usize,
        mm: usize,
        s: u32,
        e: u32,
        stride_shift: u32,
    ) {
        let asid = self.asids.asid_of(mm);
        let ops = e.saturating_sub(s) >> stride_shift;
        if ops >= MAX_TLBI_OPS {
            self.tlbi(t, c, Tlbi::Asid { mm, asid });
        } else {
            for vpn in (s..e).step_by(1 << stride_shift) {
                self.tlbi(t, c, Tlbi::Page { mm, asid, vpn });
            }
        }
        self.dsb_ish(t, c);
    }

    /// arch_tlbbatch_should_defer: batch unless the REPEAT_TLBI erratum workaround is on.
    pub fn should_defer(&self) -> bool {
        !self.repeat_tlbi
    }

    /// arch_tlbbatch_add_pending → __flush_tlb_page_nosync: the TLBI is issued now, its
    /// completion waits for the batch's DSB. The batch records every CPU: the broadcast
    /// reaches all of them, and each may use the stale entry until then.
    pub fn arch_tlbbatch_add_pending(
        &mut self,
        t: &mut TlbCtx,
        c: usize,
        batch: &mut ArchTlbBatch,
        mm: usize,
        vpn: u32,
    ) {
        self.tlbi(
            t,
            c,
            Tlbi::Page {
                mm,
                asid: self.asids.asid_of(mm),
                vpn,
            },
        );
        for r in 0..self.cpus.len() {
            batch.cpumask.set(r);
        }
    }

    /// arch_tlbbatch_flush: one DSB ISH for the whole batch.
    pub fn arch_tlbbatch_flush(&mut self, t: &mut TlbCtx, c: usize) {
        self.dsb_ish(t, c);
    }

    /// For the checker: a CPU may use an entry of any ASID of this generation (switching
    /// back to it does not flush), or after a rollover only the ASID it runs; a stale entry is
    /// covered only by a TLBI whose DSB has not completed (the batch's cpumask).
    pub fn entry_usable(&self, m: &crate::machine::Machine, c: usize, asid: u16) -> Option<usize> {
        let st = &self.cpus[c];
        let running = (st.loaded_mm != NIL).then(|| (m.cpus[c].cur_asid, st.loaded_mm as usize));
        self.asids.entry_usable(c, asid, running)
    }

    /// Issue one broadcast TLBI from CPU `c`.
    fn tlbi(&mut self, t: &mut TlbCtx, c: usize, op: Tlbi) {
        let cycles = t.m.cost.tlbi_cycles as u64;
        charge_counted(t, c, cycles, Perf::Tlbi, Perf::TlbiCycles);
        self.pending.push(op);
    }

    /// DSB ISH on CPU `c`: wait until every TLBI issued so far has taken effect on every
    /// CPU. The wait grows with the CPUs the broadcast must reach.
    fn dsb_ish(&mut self, t: &mut TlbCtx, c: usize) {
        let cost = &t.m.cost;
        let ns = cost.dsb_ish_base_ns + cost.dsb_ish_per_cpu_ns * t.m.cpus.len() as f64;
        let cycles = t.m.ns_to_cycles(ns);
        charge_counted(t, c, cycles, Perf::DsbIsh, Perf::DsbIshCycles);
        self.complete_pending(t);
    }

    /// The issued TLBIs take effect on every CPU. Only CPUs that have run the mm (its
    /// mm_cpumask, never cleared on arm64) can hold entries of it a CPU may use, so only they
    /// are visited: entries of the same ASID value elsewhere belong to another generation
    /// and wait for that CPU's flush after the rollover.
    fn complete_pending(&mut self, t: &mut TlbCtx) {
        for op in self.pending.drain(..) {
            let (Tlbi::Page { mm, asid, .. } | Tlbi::Asid { mm, asid }) = op;
            for c in t.mms[mm].cpumask.iter() {
                let cpu = &mut t.m.cpus[c];
                match op {
                    Tlbi::Page { vpn, .. } => cpu.flush_page(vpn, asid),
                    Tlbi::Asid { .. } => cpu.flush_asid(asid),
                }
            }
        }
    }

    /// The CPUs a batched flush would interrupt: none, the hardware broadcasts.
    pub fn ipi_targets(&self, _c: usize, _mask: &CpuMask) -> u64 {
        0
    }
}

/// Charge `cycles` of kernel time to CPU `c` and count the event and the cycles it really
/// took (a shared core stretches them).
fn charge_counted(t: &mut TlbCtx, c: usize, cycles: u64, event: Perf, spent: Perf) {
    let before = t.m.cpus[c].sys_cycles;
    t.m.charge_sys(c, cycles);
    let cpu = &mut t.m.cpus[c];
    let took = cpu.sys_cycles - before;
    cpu.perf.inc(event);
    cpu.perf.add(spent, took);
}
