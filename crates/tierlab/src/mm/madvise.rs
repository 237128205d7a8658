//! madvise(2) (mm/madvise.c): MADV_DONTNEED zaps the range, MADV_COLD deactivates it,
//! MADV_PAGEOUT reclaims it through `reclaim_pages` (no demotion, references ignored). With no
//! swap device modelled, MADV_PAGEOUT cannot reclaim anon pages: they stay resident and are
//! counted in `pageout_kept_no_swap`.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::pgtable::{pte, PAGE_SHIFT, PAGE_SIZE, USER_VA_END};
use crate::mm::vmscan::Reclaimer;
use crate::sim::SimError;
use crate::stats::Vm;
use crate::workload::advice;

impl Kernel {
    pub fn sys_madvise(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        addr: u64,
        len: u64,
        adv: u8,
    ) -> Result<(), SimError> {
        if !addr.is_multiple_of(PAGE_SIZE) || addr.checked_add(len).is_none_or(|e| e > USER_VA_END)
        {
            return Err(SimError(format!(
                "thread {tid}: madvise({addr:#x}, {len}): bad range (EINVAL)"
            )));
        }
        m.charge_sys(c, m.cost.syscall_cycles as u64);
        let mm = self.sched.threads[tid].mm as usize;
        let end = (addr + len).div_ceil(PAGE_SIZE) * PAGE_SIZE;
        if !self.range_mapped(mm, addr, end) {
            return Err(SimError(format!(
                "thread {tid}: madvise({addr:#x}, {len}) covers unmapped memory (ENOMEM)"
            )));
        }
        let (s, e) = ((addr >> PAGE_SHIFT) as u32, (end >> PAGE_SHIFT) as u32);
        if adv == advice::MADV_COLD || adv == advice::MADV_PAGEOUT {
            // tierlab ages and reclaims 4 KiB folios only: split the THPs first (the kernel
            // deactivates a whole-PMD THP as one folio and splits one it must swap out).
            self.split_huge_pmds_in(m, c, mm, s, e, true);
        }
        match adv {
            advice::MADV_DONTNEED => self.madvise_dontneed(m, c, mm, s, e),
            advice::MADV_COLD => self.madvise_cold(m, c, mm, s, e),
            advice::MADV_PAGEOUT => self.madvise_pageout(m, c, mm, s, e),
            advice::MADV_HUGEPAGE | advice::MADV_NOHUGEPAGE => {
                self.hugepage_madvise(mm, addr, end, adv)
            }
            other => {
                return Err(SimError(format!(
                    "thread {tid}: madvise advice {other} is not modelled"
                )))
            }
        }
        Ok(())
    }

    /// Whether [start, end) is covered by VMAs without holes.
    pub(crate) fn range_mapped(&self, mm: usize, start: u64, end: u64) -> bool {
        let mut cursor = start;
        for v in self.mms[mm]
            .vmas
            .iter()
            .filter(|v| v.end > start && v.start < end)
        {
            if v.start > cursor {
                return false;
            }
            cursor = v.end;
        }
        cursor >= end
    }

    /// madvise_dontneed_single_vma → zap_page_range_single: like munmap, but the VMA stays.
    fn madvise_dontneed(&mut self, m: &mut Machine, c: usize, mm: usize, s: u32, e: u32) {
        let (to_free, was_mapped) = self.zap_pte_range(m, c, mm, s, e);
        if was_mapped {
            self.flush_tlb_range(m, c, mm, s, e);
        }
        for pfn in to_free {
            self.free_folio(m, c, pfn);
        }
    }

    /// The present, non-zero-page frames mapped in [s, e).
    fn mapped_frames(&self, mm: usize, s: u32, e: u32) -> Vec<(u32, u32)> {
        (s..e)
            .filter_map(|vpn| {
                let p = self.mms[mm].pgtable.get(vpn);
                (pte::present(p) && pte::pfn(p) != self.zero_pfn).then(|| (vpn, pte::pfn(p)))
            })
            .collect()
    }

    /// madvise_cold_or_pageout_pte_range (cold): clear young with a flush, deactivate.
    fn madvise_cold(&mut self, m: &mut Machine, c: usize, mm: usize, s: u32, e: u32) {
        let frames = self.mapped_frames(mm, s, e);
        let mut cleared = false;
        for (vpn, pfn) in frames {
            if let Some(slot) = self.mms[mm].pgtable.get_mut(vpn) {
                cleared |= *slot & pte::YOUNG != 0;
                *slot &= !pte::YOUNG;
            }
            if self.folio_deactivate(pfn) {
                self.vm.inc(Vm::PgDeactivate);
            }
        }
        if cleared {
            self.flush_tlb_range(m, c, mm, s, e);
        }
    }

    /// madvise_pageout → reclaim_pages: isolate the range's folios and reclaim them at once.
    fn madvise_pageout(&mut self, m: &mut Machine, c: usize, mm: usize, s: u32, e: u32) {
        let frames = self.mapped_frames(mm, s, e);
        let mut by_node: Vec<Vec<u32>> = vec![Vec::new(); self.nodes.len()];
        for (_, pfn) in frames {
            if self.folio_isolate_lru(pfn) {
                by_node[self.frames.get(pfn).node as usize].push(pfn);
            }
        }
        for list in by_node.into_iter().filter(|l| !l.is_empty()) {
            let n = list.len() as u64;
            self.vm.add(Vm::PgScanDirect, n);
            m.charge_sys(c, m.cost.reclaim_scan_cycles as u64 * n);
            self.shrink_folio_list(m, c, list, Reclaimer::Direct, true);
        }
    }
}
