//! MIGRC, "Migration Read Copy" (seed 000, Byungchul Park, v9; later LUF; not upstream):
//! during batched migration, a source folio whose every mapping is read-only and clean is
//! unmapped without a TLB flush. The CPUs that may still cache its old translation are kept in
//! `migrc_ubc` under a generation number (mgen); the source frame is freed as usual but tagged
//! with that generation, and the flush is done when a tagged frame leaves pcp/buddy again
//! (`check_migrc_flush`), when a read-only PTE is made writable (give up, flush now), or when
//! memory pressure pauses MIGRC before direct reclaim (`migrc_pause`).
//!
//! Safety leans on x86 semantics the simulator also models: a stale read-only, clean entry can
//! only read the old frame (a write faults or re-walks the PTE), and `flush_tlb_func` turns a
//! partial flush into a full one on a CPU that missed a generation, so munmap and mprotect of
//! such a range flush every stale entry.

use crate::arch::ArchTlbBatch;
use crate::config::MigrcBreak;
use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::mm_types::CpuMask;
use crate::mm::page::pg;
use crate::stats::Vm;

#[derive(Clone, Debug, Default)]
pub struct Migrc {
    /// Generation of the newest deferred batch (mgen).
    pub gen: u32,
    /// Every generation up to this one has been flushed.
    pub done: u32,
    /// migrc_ubc: CPUs that may still cache read-only translations of deferred folios.
    pub pending: CpuMask,
    /// tlb_ubc_ro of the batch being unmapped.
    pub batch_ro: ArchTlbBatch,
    pub batch_has_ro: bool,
    /// migrc_pause_cnt
    pub paused: u32,
}

/// Why a deferred flush was finally done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrcFlushReason {
    /// A tagged frame left pcp/buddy (check_migrc_flush in the allocation path).
    Alloc,
    /// A read-only PTE became writable.
    Upgrade,
    /// Memory pressure: about to do direct reclaim.
    Pause,
}

impl Kernel {
    pub fn migrc_enabled(&self) -> bool {
        self.cfg.kernel.migrc
    }

    /// can_migrc_init/test for one folio: every mapping PTE is present, read-only and clean.
    pub(crate) fn can_migrc(&self, ptes: &[u64]) -> bool {
        use crate::mm::pgtable::pte;
        self.migrc_enabled()
            && self.migrc.paused == 0
            && !ptes.is_empty()
            && ptes
                .iter()
                .all(|&p| pte::present(p) && p & (pte::WRITE | pte::DIRTY) == 0)
    }

    /// arch_tlbbatch_add_pending into tlb_ubc_ro.
    pub(crate) fn migrc_add_ro(&mut self, m: &mut Machine, c: usize, mm: usize, vpn: u32) {
        let mut batch = self.migrc.batch_ro;
        self.arch_tlbbatch_add_pending(m, c, &mut batch, mm, vpn);
        self.migrc.batch_ro = batch;
        self.migrc.batch_has_ro = true;
    }

    /// migrc_add_pending_ubc: the batch's read-only CPUs join migrc_ubc under a new generation.
    /// Returns the generation the batch's source frames must carry, if anything was deferred.
    pub(crate) fn migrc_add_pending(&mut self, c: usize) -> Option<u32> {
        if !self.migrc.batch_has_ro {
            return None;
        }
        let batch = std::mem::take(&mut self.migrc.batch_ro);
        self.migrc.batch_has_ro = false;
        // IPIs this batch would have cost now.
        let would = self.arch_tlbbatch_targets(c, &batch);
        self.vm.add(Vm::MigrcIpisDeferred, would);
        self.vm.inc(Vm::MigrcDeferredBatches);
        self.migrc.pending.union(&batch.cpumask);
        self.migrc.gen += 1;
        Some(self.migrc.gen)
    }

    /// Tag a freed source frame with the generation whose flush it waits for.
    pub(crate) fn migrc_tag_frame(&mut self, pfn: u32, gen: u32) {
        let p = self.frames.get_mut(pfn);
        p.flags |= pg::NEED_FLUSH;
        p.flush_gen = gen;
        self.vm.inc(Vm::MigrcDeferred);
    }

    /// A full flush just reached `mask` (arch_tlbbatch_flush): those CPUs hold no stale
    /// deferred entries any more (arch_tlbbatch_done).
    pub(crate) fn migrc_flushed(&mut self, mask: &CpuMask) {
        for (p, done) in self.migrc.pending.0.iter_mut().zip(mask.0.iter()) {
            *p &= !done;
        }
        if self.migrc.pending.is_empty() {
            self.migrc.done = self.migrc.gen;
        }
    }

    /// migrc_flush: flush every pending generation now.
    pub fn migrc_flush(&mut self, m: &mut Machine, c: usize, why: MigrcFlushReason) {
        if self.migrc.pending.is_empty() {
            self.migrc.done = self.migrc.gen;
            return;
        }
        let ipis_before: u64 = m.cpus.iter().map(|cpu| cpu.irq.tlb).sum();
        let batch = ArchTlbBatch {
            cpumask: self.migrc.pending,
        };
        self.tlbbatch_flush(m, c, &batch);
        let ipis_after: u64 = m.cpus.iter().map(|cpu| cpu.irq.tlb).sum();
        self.vm.add(Vm::MigrcFlushIpis, ipis_after - ipis_before);
        self.vm.inc(match why {
            MigrcFlushReason::Alloc => Vm::MigrcFlushAlloc,
            MigrcFlushReason::Upgrade => Vm::MigrcFlushUpgrade,
            MigrcFlushReason::Pause => Vm::MigrcFlushPause,
        });
    }

    /// check_migrc_flush: a frame is leaving pcp/buddy; if it still waits for a flush, do
    /// every pending flush up to its generation first.
    pub(crate) fn check_migrc_flush(&mut self, m: &mut Machine, c: usize, pfn: u32) {
        let p = self.frames.get_mut(pfn);
        if !p.has(pg::NEED_FLUSH) {
            return;
        }
        p.flags &= !pg::NEED_FLUSH;
        if p.flush_gen > self.migrc.done && self.cfg.debug.migrc_break != MigrcBreak::AllocFlush {
            self.migrc_flush(m, c, MigrcFlushReason::Alloc);
        }
    }

    /// A read-only PTE is about to become writable: give up on the pending deferrals.
    pub(crate) fn migrc_before_write_upgrade(&mut self, m: &mut Machine, c: usize) {
        if !self.migrc.pending.is_empty() && self.cfg.debug.migrc_break != MigrcBreak::UpgradeFlush
        {
            self.migrc_flush(m, c, MigrcFlushReason::Upgrade);
        }
    }

    /// migrc_pause before direct reclaim: stop deferring and flush what is pending.
    pub fn migrc_pause(&mut self, m: &mut Machine, c: usize) {
        if !self.migrc_enabled() {
            return;
        }
        self.migrc.paused += 1;
        self.vm.inc(Vm::MigrcPause);
        self.migrc_flush(m, c, MigrcFlushReason::Pause);
    }

    pub fn migrc_resume(&mut self) {
        if self.migrc_enabled() {
            self.migrc.paused -= 1;
        }
    }
}
