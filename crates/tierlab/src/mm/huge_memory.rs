//! Transparent huge pages (mm/huge_memory.c): an order-9 anon folio mapped by one huge PMD,
//! from the fault (`do_huge_pmd_anonymous_page`) through NUMA balancing
//! (`change_huge_pmd`, `do_huge_pmd_numa_page`) and migration to the split
//! (`__split_huge_pmd_locked`, `split_huge_page`).
//!
//! A THP's 512 frames each keep their own record: `order` 9 marks them members, `index`
//! their own virtual page, `mapcount` the huge PMDs that map them, and each is on the LRU
//! (a split folio's pages are where `lru_add_split_folio` puts them). The folio is always
//! PMD-mapped: whatever would map part of it by PTEs, or reclaim a part, splits it first
//! (`split_huge_page` at once: tierlab has no PTE-mapped large folios and no deferred split
//! queue, so a partial munmap frees the unmapped part at once and counts
//! `thp_deferred_split_page` where the kernel would queue the folio).

use crate::config::{ThpDefrag, ThpEnabled};
use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::alloc_pages::AllocMark;
use crate::mm::mm_types::Vma;
use crate::mm::page::pg;
use crate::mm::pgtable::{pte, HPAGE_PMD_NR, PAGE_SHIFT};
use crate::stats::Vm;
use crate::workload::advice;

/// HPAGE_PMD_ORDER
pub const HPAGE_PMD_ORDER: usize = 9;

/// vm_flags bits tierlab keeps per VMA for THP (VM_HUGEPAGE / VM_NOHUGEPAGE).
pub mod vm_thp {
    pub const HUGEPAGE: u8 = 1 << 0;
    pub const NOHUGEPAGE: u8 = 1 << 1;
}

/// The first vpn of the 2 MiB range holding `vpn` (haddr >> PAGE_SHIFT).
#[inline]
pub fn haddr(vpn: u32) -> u32 {
    vpn & !(HPAGE_PMD_NR - 1)
}

/// The zones up to ZONE_NORMAL that hold memory, for nodes laid out in order from physical
/// address 0: on x86-64 ZONE_DMA below 16 MiB, ZONE_DMA32 below 4 GiB, ZONE_NORMAL above;
/// elsewhere (tierlab's arm64) one zone per node.
pub fn populated_zones(x86: bool, node_pages: &[u64]) -> u64 {
    if !x86 {
        return node_pages.len() as u64;
    }
    const DMA_END: u64 = (16 << 20) >> PAGE_SHIFT;
    const DMA32_END: u64 = (4 << 30) >> PAGE_SHIFT;
    let mut start = 0u64;
    let mut zones = 0;
    for &pages in node_pages {
        let end = start + pages;
        zones += u64::from(start < DMA_END)
            + u64::from(start < DMA32_END && end > DMA_END)
            + u64::from(end > DMA32_END);
        start = end;
    }
    zones
}

/// set_recommended_min_free_kbytes (mm/khugepaged.c): two free pageblocks per zone for
/// fragmentation avoidance plus MIGRATE_PCPTYPES² per zone, at most 5 % of the pages above
/// the high watermarks (`free_buffer_pages`, nr_free_buffer_pages), in KiB.
pub fn recommended_min_free_kbytes(nr_zones: u64, free_buffer_pages: u64) -> u64 {
    const PAGEBLOCK_NR_PAGES: u64 = HPAGE_PMD_NR as u64;
    const MIGRATE_PCPTYPES: u64 = 3;
    let pages = PAGEBLOCK_NR_PAGES * nr_zones * 2
        + PAGEBLOCK_NR_PAGES * nr_zones * MIGRATE_PCPTYPES * MIGRATE_PCPTYPES;
    pages.min(free_buffer_pages / 20) << (PAGE_SHIFT - 10)
}

impl Kernel {
    /// The head frame of the THP `pfn` belongs to, if it does (folio_test_large).
    pub fn thp_head(&self, pfn: u32) -> Option<u32> {
        let p = self.frames.get(pfn);
        if !p.has(pg::USED) || p.order as usize != HPAGE_PMD_ORDER {
            return None;
        }
        // Buddy blocks are aligned relative to the zone's first frame.
        let start = self.nodes[p.node as usize].zone.start_pfn;
        Some(pfn - ((pfn - start) & (HPAGE_PMD_NR - 1)))
    }

    /// folio_nr_pages of the folio `pfn` belongs to.
    pub fn folio_nr_pages(&self, pfn: u32) -> u64 {
        if self.thp_head(pfn).is_some() {
            HPAGE_PMD_NR as u64
        } else {
            1
        }
    }

    /// folio_xchg_access_time: every frame of the folio holding `pfn` gets access time `ms`.
    pub fn folio_xchg_access_time(&mut self, pfn: u32, ms: u32) {
        match self.thp_head(pfn) {
            Some(head) => {
                (head..head + HPAGE_PMD_NR).for_each(|p| self.frames.get_mut(p).numa_access_ms = ms)
            }
            None => self.frames.get_mut(pfn).numa_access_ms = ms,
        }
    }

    /// NR_ANON_THPS of node `n` in THPs (`nr_anon_transparent_hugepages`).
    pub fn anon_thps_on(&self, n: usize) -> u64 {
        self.nodes[n].nr_anon_thps
    }

    /// NR_ANON_THPS recounted from the page tables: the PMD-mapped anon folios on node `n`
    /// (once however many PMDs map them), for the checker.
    pub fn anon_thps_mapped_on(&self, n: usize) -> u64 {
        let mut heads: Vec<u32> = self
            .mms
            .iter()
            .flat_map(|mm| mm.pgtable.huge_pmds())
            .map(|(_, pmd)| pte::pfn(pmd))
            .filter(|&h| !self.is_zero_pfn(h) && self.frames.get(h).node as usize == n)
            .collect();
        heads.sort_unstable();
        heads.dedup();
        heads.len() as u64
    }

    /// Whether `pfn` is the zero page or a frame of the huge zero page.
    pub fn is_zero_pfn(&self, pfn: u32) -> bool {
        pfn == self.zero_pfn
            || self
                .huge_zero_pfn
                .is_some_and(|h| pfn.wrapping_sub(h) < HPAGE_PMD_NR)
    }

    /// thp_vma_allowable_order(PMD_ORDER, TVA_IN_PF | TVA_ENFORCE_SYSFS) and
    /// thp_vma_suitable_order: an anon VMA THP may back (sysfs `enabled`, VM_HUGEPAGE,
    /// VM_NOHUGEPAGE), whose aligned 2 MiB range around `vpn` lies inside it.
    pub(crate) fn thp_vma_allowable(&self, vma: &Vma, vpn: u32) -> bool {
        if !vma.is_anon() || vma.thp & vm_thp::NOHUGEPAGE != 0 {
            return false;
        }
        let on = match self.cfg.vm.transparent_hugepage_enabled {
            ThpEnabled::Always => true,
            ThpEnabled::Madvise => vma.thp & vm_thp::HUGEPAGE != 0,
            ThpEnabled::Never => false,
        };
        let start = (haddr(vpn) as u64) << PAGE_SHIFT;
        on && start >= vma.start && start + ((HPAGE_PMD_NR as u64) << PAGE_SHIFT) <= vma.end
    }

    /// vma_thp_gfp_mask: (direct reclaim, wake kswapd) for a THP fault in `vma`.
    fn vma_thp_gfp(&self, vma: &Vma) -> (bool, bool) {
        let madvised = vma.thp & vm_thp::HUGEPAGE != 0;
        match self.cfg.vm.transparent_hugepage_defrag {
            ThpDefrag::Always => (true, true),
            ThpDefrag::Defer => (false, true),
            ThpDefrag::DeferMadvise => (madvised, !madvised),
            ThpDefrag::Madvise => (madvised, madvised),
            ThpDefrag::Never => (false, false),
        }
    }

    /// vma_alloc_folio(order 9) from CPU `c`'s node: first that node alone (alloc_pages_mpol's
    /// __GFP_THISNODE | __GFP_NORETRY try for HPAGE_PMD_ORDER); only a gfp mask with direct
    /// reclaim goes on to the whole zonelist: the low watermark, kswapd woken (if allowed) and
    /// the min watermark, then one direct reclaim (no compaction: reclaim frees pages,
    /// merged blocks come only from the buddy allocator).
    pub(crate) fn alloc_thp(
        &mut self,
        m: &mut Machine,
        c: usize,
        preferred: usize,
        direct_reclaim: bool,
        wake_kswapd: bool,
    ) -> Option<u32> {
        if let Some(head) =
            self.rmqueue_node_order(m, c, preferred, preferred, AllocMark::Low, HPAGE_PMD_ORDER)
        {
            return Some(head);
        }
        if !direct_reclaim {
            if wake_kswapd {
                self.wakeup_kswapd(m, preferred, c);
            }
            return None;
        }
        let zonelist = self.nodes[preferred].zonelist.clone();
        let try_at = |k: &mut Kernel, m: &mut Machine, mark| {
            zonelist.iter().find_map(|&n| {
                k.rmqueue_node_order(m, c, preferred, n as usize, mark, HPAGE_PMD_ORDER)
            })
        };
        if let Some(head) = try_at(self, m, AllocMark::Low) {
            return Some(head);
        }
        if wake_kswapd {
            for &n in &zonelist {
                self.wakeup_kswapd(m, n as usize, c);
            }
            if let Some(head) = try_at(self, m, AllocMark::Min) {
                return Some(head);
            }
        }
        if direct_reclaim {
            self.vm.inc(Vm::AllocStallNormal);
            self.try_to_free_pages(m, c, preferred);
            return try_at(self, m, AllocMark::Min);
        }
        None
    }

    /// do_huge_pmd_anonymous_page: map the huge zero page on a read fault, else a new zeroed
    /// THP. Ok(false): fall back to 4 KiB pages (thp_fault_fallback).
    pub(crate) fn do_huge_pmd_anonymous_page(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vma: &Vma,
        vpn: u32,
        store: bool,
    ) -> Result<bool, String> {
        let base = haddr(vpn);
        if !store && self.cfg.vm.transparent_hugepage_use_zero_page {
            let Some(zero) = self.mm_get_huge_zero_folio(m, c) else {
                return Ok(false);
            };
            m.charge_sys(c, m.cost.anon_fault_cycles as u64);
            // The deposited page table (pgtable_trans_huge_deposit) a split will use.
            self.pte_alloc(m, c, mm, base)?;
            self.mms[mm]
                .pgtable
                .set_huge_pmd(base, pte::mk(zero, pte::HUGE | pte::PRESENT | pte::YOUNG));
            return Ok(true);
        }
        let (direct, wake) = self.vma_thp_gfp(vma);
        let node = m.cpus[c].node as usize;
        let Some(head) = self.alloc_thp(m, c, node, direct, wake) else {
            self.vm.inc(Vm::ThpFaultFallback);
            return Ok(false);
        };
        self.vm.inc(Vm::ThpFaultAlloc);
        // folio_zero_user: 512 pages cleared, one fault; init_on_alloc's post_alloc_hook cleared
        // them once already.
        let clears = HPAGE_PMD_NR as u64 * (1 + u64::from(self.cfg.vm.init_on_alloc));
        m.charge_sys(
            c,
            m.cost.anon_fault_cycles as u64 + m.cost.clear_page_cycles as u64 * clears,
        );
        self.pte_alloc(m, c, mm, base)?;
        let anon_vma = self.mms[mm].anon_vma();
        for i in 0..HPAGE_PMD_NR {
            let p = self.frames.get_mut(head + i);
            p.flags = (p.flags & pg::NEED_FLUSH)
                | pg::USED
                | pg::ANON
                | pg::SWAPBACKED
                | pg::ANON_EXCLUSIVE;
            p.owner = anon_vma;
            p.index = base + i;
            p.mapcount = 1;
            p.order = HPAGE_PMD_ORDER as u8;
            p.numa_access_ms = 0;
            self.lru_add(head + i);
        }
        self.mms[mm].rss_anon += HPAGE_PMD_NR as u64;
        self.nodes[self.frames.get(head).node as usize].nr_anon_thps += 1;
        self.mms[mm].pgtable.set_huge_pmd(
            base,
            pte::mk(
                head,
                pte::HUGE | pte::PRESENT | pte::WRITE | pte::YOUNG | pte::DIRTY,
            ),
        );
        Ok(true)
    }

    /// mm_get_huge_zero_folio: the huge zero page, allocated at its first use (order 9 on
    /// the faulting CPU's node, never reclaimed: the shrinker frees it only when unused).
    fn mm_get_huge_zero_folio(&mut self, m: &mut Machine, c: usize) -> Option<u32> {
        if let Some(h) = self.huge_zero_pfn {
            return Some(h);
        }
        let node = m.cpus[c].node as usize;
        let head = self.alloc_thp(m, c, node, false, false)?;
        for i in 0..HPAGE_PMD_NR {
            let p = self.frames.get_mut(head + i);
            p.flags = pg::USED | pg::RESERVED;
            p.order = 0;
        }
        self.vm.inc(Vm::ThpZeroPageAlloc);
        self.huge_zero_pfn = Some(head);
        Some(head)
    }

    /// do_huge_pmd_wp_page: a write to a read-only huge PMD. An exclusive THP is reused in
    /// place; the huge zero page and a THP another mm shares are split and the fault falls
    /// back to the PTEs (`__split_huge_pmd`, VM_FAULT_FALLBACK).
    pub(crate) fn do_huge_pmd_wp_page(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
        pmd: u64,
    ) {
        m.charge_sys(c, m.cost.wp_fault_cycles as u64);
        let head = pte::pfn(pmd);
        if !self.is_zero_pfn(head) {
            let page = *self.frames.get(head);
            if page.mapcount == 1 && page.has(pg::ANON_EXCLUSIVE) {
                self.migrc_before_write_upgrade(m, c);
                self.mms[mm]
                    .pgtable
                    .set_huge_pmd(vpn, pmd | pte::WRITE | pte::DIRTY | pte::YOUNG);
                self.check_stale_after_upgrade(m, mm, vpn, head + (vpn - haddr(vpn)));
                return;
            }
        }
        self.split_huge_pmd(m, c, mm, vpn);
    }

    /// __split_huge_pmd: the huge PMD covering `vpn` becomes a PTE table. For the huge zero
    /// page every PTE maps the 4 KiB zero page; a THP is split as a whole
    /// (`split_huge_page`), which turns every mapping of it into PTEs.
    pub(crate) fn split_huge_pmd(&mut self, m: &mut Machine, c: usize, mm: usize, vpn: u32) {
        let pmd = self.mms[mm].pgtable.huge_pmd(vpn);
        if pmd == 0 {
            return;
        }
        let head = pte::pfn(pmd);
        if self.is_zero_pfn(head) {
            // __split_huge_zero_page_pmd
            let zero = pte::mk(self.zero_pfn, pte::PRESENT | (pmd & pte::YOUNG));
            self.pmd_to_ptes(m, c, mm, haddr(vpn), [zero; 512]);
            return;
        }
        self.split_huge_page(m, c, head);
    }

    /// Replace the huge PMD at `base` by a PTE table of `ptes` (pmdp_invalidate, which
    /// flushes the 2 MiB translation, then pmd_populate with the deposited table).
    fn pmd_to_ptes(&mut self, m: &mut Machine, c: usize, mm: usize, base: u32, ptes: [u64; 512]) {
        let old = self.mms[mm].pgtable.huge_pmd(base);
        self.mms[mm].pgtable.set_huge_pmd(base, 0);
        self.mms[mm].pgtable.populate_pte_table(base, ptes);
        self.vm.inc(Vm::ThpSplitPmd);
        m.charge_sys(c, m.cost.pte_update_cycles as u64 * HPAGE_PMD_NR as u64);
        if pte::present(old) && !self.cfg.debug.thp_split_skip_flush {
            self.flush_tlb_pmd_range(m, c, mm, base);
        }
        self.check_stale_after_split(m, mm, base);
    }

    /// split_huge_page: every huge PMD mapping the THP at `head` becomes 512 PTEs carrying
    /// its write, young and dirty bits and its PROT_NONE (__split_huge_pmd_locked), then the
    /// folio becomes 512 order-0 folios in place.
    pub(crate) fn split_huge_page(&mut self, m: &mut Machine, c: usize, head: u32) {
        self.split_huge_folio(m, c, head);
        self.vm.inc(Vm::ThpSplitPage);
    }

    /// split_huge_page without its count: every PMD mapping the THP becomes PTEs and the
    /// folio becomes 512 order-0 folios (the deferred split path counts thp_split_page
    /// when its shrinker runs).
    pub(crate) fn split_huge_folio(&mut self, m: &mut Machine, c: usize, head: u32) {
        let mappings = self.rmap_walk(head, |p| p & pte::HUGE != 0 && pte::maps_frame(p));
        for (mm, vpn) in mappings {
            let pmd = self.mms[mm as usize].pgtable.huge_pmd(vpn);
            let mut ptes = [0u64; 512];
            for (i, p) in ptes.iter_mut().enumerate() {
                *p = pte::mk(
                    head + i as u32,
                    pmd & !pte::HUGE & ((1 << pte::PFN_SHIFT) - 1),
                );
            }
            self.pmd_to_ptes(m, c, mm as usize, vpn, ptes);
        }
        for i in 0..HPAGE_PMD_NR {
            self.frames.get_mut(head + i).order = 0;
        }
        self.nodes[self.frames.get(head).node as usize].nr_anon_thps -= 1;
    }

    /// deferred_split_folio(partially_mapped): the pages a partial unmap took from a THP
    /// stay allocated, held by the node's deferred split queue (tierlab's folio is already
    /// split, so they are off the LRU; flagged reserved for the checker).
    pub(crate) fn deferred_split_hold(&mut self, held: Vec<u32>) {
        let Some(&first) = held.first() else {
            return;
        };
        for &p in &held {
            self.frames.get_mut(p).flags |= pg::USED | pg::RESERVED;
        }
        let n = self.frames.get(first).node as usize;
        self.nodes[n].deferred_split.push(held);
    }

    /// deferred_split_scan, the shrinker reclaim runs after the LRU (shrink_slab): split
    /// every queued THP of node `n` (thp_split_page) and free its unmapped pages.
    pub(crate) fn deferred_split_scan(&mut self, m: &mut Machine, c: usize, n: usize) {
        for held in std::mem::take(&mut self.nodes[n].deferred_split) {
            self.vm.inc(Vm::ThpSplitPage);
            for p in held {
                self.frames.get_mut(p).flags &= !pg::RESERVED;
                self.free_frame(m, c, p);
            }
        }
    }

    /// Split every THP mapped by a huge PMD of `mm` that [s, e) covers only in part
    /// (`vma_adjust_trans_huge` / the split in `zap_pmd_range` and `change_pmd_range`), or
    /// every one it touches when `all`.
    pub(crate) fn split_huge_pmds_in(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        s: u32,
        e: u32,
        all: bool,
    ) {
        if !m.huge_tlb && self.huge_zero_pfn.is_none() {
            return;
        }
        let mut base = haddr(s);
        while base < e {
            let pmd = self.mms[mm].pgtable.huge_pmd(base);
            let partial = base < s || base + HPAGE_PMD_NR > e;
            if pmd != 0 && (all || partial) {
                self.split_huge_pmd(m, c, mm, base);
            }
            base = match base.checked_add(HPAGE_PMD_NR) {
                Some(b) => b,
                None => break,
            };
        }
    }

    /// zap_huge_pmd: clear the huge PMD at `base` of `mm`; returns the THP to free after the
    /// flush when this was its last mapping, and whether a TLB may have held the PMD.
    pub(crate) fn zap_huge_pmd(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        base: u32,
    ) -> (Option<u32>, bool) {
        let pmd = self.mms[mm].pgtable.huge_pmd(base);
        self.mms[mm].pgtable.set_huge_pmd(base, 0);
        m.charge_sys(c, m.cost.pte_update_cycles as u64);
        let head = pte::pfn(pmd);
        if self.is_zero_pfn(head) {
            return (None, true);
        }
        self.mms[mm].rss_anon -= HPAGE_PMD_NR as u64;
        let mut last = false;
        for i in 0..HPAGE_PMD_NR {
            let p = self.frames.get_mut(head + i);
            p.mapcount -= 1;
            last = p.mapcount == 0;
        }
        if last {
            for i in 0..HPAGE_PMD_NR {
                self.lru_del_and_uncharge(head + i);
            }
            return (Some(head), true);
        }
        (None, true)
    }

    /// Free a folio no one maps any more: a THP as one order-9 block, else one frame.
    pub(crate) fn free_folio(&mut self, m: &mut Machine, c: usize, pfn: u32) {
        if self.thp_head(pfn) == Some(pfn) {
            self.free_thp(m, c, pfn);
        } else {
            self.free_frame(m, c, pfn);
        }
    }

    /// Free a THP no one maps any more (free_unref_folios with an order-9 folio).
    pub(crate) fn free_thp(&mut self, m: &mut Machine, c: usize, head: u32) {
        for i in 0..HPAGE_PMD_NR {
            self.frames.get_mut(head + i).order = 0;
        }
        self.nodes[self.frames.get(head).node as usize].nr_anon_thps -= 1;
        self.free_frames_order(m, c, head, HPAGE_PMD_ORDER);
    }

    /// flush_pmd_tlb_range: one 2 MiB translation of `mm` (flush_tlb_mm_range with stride
    /// PMD_SHIFT: one INVLPG, or one TLBI on arm64).
    pub(crate) fn flush_tlb_pmd_range(&mut self, m: &mut Machine, c: usize, mm: usize, base: u32) {
        self.flush_tlb_range_stride(m, c, mm, base, base + HPAGE_PMD_NR, HPAGE_PMD_ORDER as u32);
    }

    /// madvise(MADV_HUGEPAGE / MADV_NOHUGEPAGE) → hugepage_madvise: set the VMA flag on
    /// [start, end), splitting VMAs at the edges.
    pub(crate) fn hugepage_madvise(&mut self, mm: usize, start: u64, end: u64, adv: u8) {
        self.mms[mm].split_at(start);
        self.mms[mm].split_at(end);
        for v in self.mms[mm].vmas.iter_mut() {
            if v.start >= start && v.end <= end {
                if adv == advice::MADV_HUGEPAGE {
                    v.thp = (v.thp & !vm_thp::NOHUGEPAGE) | vm_thp::HUGEPAGE;
                } else {
                    v.thp = (v.thp & !vm_thp::HUGEPAGE) | vm_thp::NOHUGEPAGE;
                }
            }
        }
    }

    /// Reclaim takes a THP whole: after one of its frames was isolated, isolate the others
    /// too. Returns the folio (its head, or `pfn` itself) and its pages.
    pub(crate) fn isolate_rest_of_thp(&mut self, pfn: u32) -> (u32, u64) {
        let Some(head) = self.thp_head(pfn) else {
            return (pfn, 1);
        };
        for f in head..head + HPAGE_PMD_NR {
            if self.frames.get(f).has(pg::LRU) {
                self.folio_isolate_lru(f);
            }
        }
        (head, HPAGE_PMD_NR as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn khugepaged_raises_min_free_kbytes_by_zone_count_capped_at_5_percent() {
        // hot_small's machine (256 + 512 MiB): DMA and DMA32 on node 0, DMA32 on node 1.
        assert_eq!(populated_zones(true, &[65_536, 131_072]), 3);
        // 3 × 5,632 pages exceed 5 % of ~700 MiB: the cap. A 6.12 guest of that machine
        // reads 35832 in /proc/sys/vm/min_free_kbytes with THP on.
        assert_eq!(recommended_min_free_kbytes(3, 179_160), 35_832);
        // Two 64 GiB nodes: DMA, DMA32, Normal, then Normal: 4 × 5,632 pages = 88 MiB.
        assert_eq!(populated_zones(true, &[1 << 24, 1 << 24]), 4);
        assert_eq!(recommended_min_free_kbytes(4, 30 << 20), 4 * 5_632 * 4);
        assert_eq!(populated_zones(false, &[1 << 24, 1 << 24]), 2);
    }
}
