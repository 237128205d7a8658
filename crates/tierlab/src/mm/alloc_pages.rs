//! Node-level page allocation and freeing (`__alloc_pages` in mm/page_alloc.c): walk the
//! zonelist at the low watermark, then the slow path (wake kswapd, min watermark, direct
//! reclaim). Per-zone mechanics (buddy, per-CPU pagesets, zone lock) are in page_alloc.rs.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::page::{pg, NIL};
use crate::stats::Vm;

/// The watermark an allocation must leave free (ALLOC_WMARK_*).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocMark {
    Low,
    Min,
    /// ALLOC_NO_WATERMARKS: reclaim's own allocations (PF_MEMALLOC) may take the reserves.
    NoWatermarks,
}

impl Kernel {
    /// __alloc_pages(GFP_HIGHUSER_MOVABLE, order 0, preferred node): one frame or None (OOM).
    pub fn alloc_page(&mut self, m: &mut Machine, c: usize, preferred: usize) -> Option<u32> {
        // get_page_from_freelist, ALLOC_WMARK_LOW: fall back along the zonelist.
        if let Some(pfn) = self.alloc_from_zonelist(m, c, preferred, AllocMark::Low) {
            return Some(pfn);
        }
        // __alloc_pages_slowpath: wake_all_kswapds, then retry at the min watermark.
        let zonelist = self.nodes[preferred].zonelist.clone();
        for &n in &zonelist {
            self.wakeup_kswapd(m, n as usize, c);
        }
        if let Some(pfn) = self.alloc_from_zonelist(m, c, preferred, AllocMark::Min) {
            return Some(pfn);
        }
        // __alloc_pages_direct_reclaim: try_to_free_pages, then retry; MIGRC pauses meanwhile.
        self.migrc_pause(m, c);
        let got = self.direct_reclaim_and_retry(m, c, preferred);
        self.migrc_resume();
        got
    }

    fn direct_reclaim_and_retry(
        &mut self,
        m: &mut Machine,
        c: usize,
        preferred: usize,
    ) -> Option<u32> {
        for _ in 0..crate::mm::vmscan::MAX_RECLAIM_RETRIES {
            self.vm.inc(Vm::AllocStallNormal);
            let reclaimed = self.try_to_free_pages(m, c, preferred);
            if let Some(pfn) = self.alloc_from_zonelist(m, c, preferred, AllocMark::Min) {
                return Some(pfn);
            }
            if reclaimed == 0 && !self.reclaim_throttle_writeback(m, c) {
                break;
            }
        }
        None
    }

    /// reclaim_throttle(VMSCAN_THROTTLE_WRITEBACK): reclaim found only folios under
    /// writeback, so the task sleeps until the first write completes, at most HZ/10.
    /// Returns false when nothing is under writeback.
    fn reclaim_throttle_writeback(&mut self, m: &mut Machine, c: usize) -> bool {
        let Some(&done) = self.swap.writeback.values().min() else {
            return false;
        };
        let limit = m.cpus[c].clock + m.ns_to_cycles(100e6);
        m.cpus[c].idle_until(done.min(limit));
        true
    }

    pub(crate) fn alloc_from_zonelist(
        &mut self,
        m: &mut Machine,
        c: usize,
        preferred: usize,
        mark: AllocMark,
    ) -> Option<u32> {
        for i in 0..self.nodes[preferred].zonelist.len() {
            let n = self.nodes[preferred].zonelist[i] as usize;
            if let Some(pfn) = self.rmqueue_node(m, c, preferred, n, mark) {
                return Some(pfn);
            }
        }
        None
    }

    /// One zone's try in get_page_from_freelist: the watermark check, rmqueue, zone_statistics.
    pub(crate) fn rmqueue_node(
        &mut self,
        m: &mut Machine,
        c: usize,
        preferred: usize,
        n: usize,
        mark: AllocMark,
    ) -> Option<u32> {
        self.rmqueue_node_order(m, c, preferred, n, mark, 0)
    }

    /// `rmqueue_node` for a block of 2^`order` pages: pgalloc counts its pages, the NUMA
    /// statistics one allocation (rmqueue: zone_statistics(.., 1)), and every frame of it is
    /// checked for MIGRC's deferred flush and for stale translations.
    pub(crate) fn rmqueue_node_order(
        &mut self,
        m: &mut Machine,
        c: usize,
        preferred: usize,
        n: usize,
        mark: AllocMark,
        order: usize,
    ) -> Option<u32> {
        let now = m.cpus[c].clock;
        let zone = &mut self.nodes[n].zone;
        let no_watermarks = mark == AllocMark::NoWatermarks;
        let mark = match mark {
            AllocMark::Low => zone.wmark.low,
            AllocMark::Min => zone.wmark.min,
            AllocMark::NoWatermarks => 0,
        };
        let (pfn, cycles) = zone.rmqueue(&mut self.frames, c, order, now, &m.cost, mark);
        m.charge_sys(c, cycles);
        // Without watermarks (PF_MEMALLOC) the lower zones' free pages are in reach too.
        let pfn = match pfn {
            Some(pfn) => pfn,
            None if no_watermarks && order == 0 => {
                let pfn = self.nodes[n].lower_free.pop()?;
                self.frames.get_mut(pfn).flags &= pg::NEED_FLUSH;
                pfn
            }
            None => return None,
        };
        if n == preferred {
            self.vm.inc(Vm::NumaHit);
        } else {
            self.vm.inc(Vm::NumaMiss);
            self.vm.inc(Vm::NumaForeign);
        }
        if n == m.cpus[c].node as usize {
            self.vm.inc(Vm::NumaLocal);
        } else {
            self.vm.inc(Vm::NumaOther);
        }
        self.vm.add(Vm::PgAllocNormal, 1 << order);
        // TPP: a top-tier node below WMARK_DEMOTE wakes kswapd before it reaches low.
        let dw = self.nodes[n].demote_wmark;
        if dw > 0 && !self.nodes[n].zone.watermark_ok(dw) && self.can_demote(n) {
            self.wakeup_kswapd(m, n, c);
        }
        for p in pfn..pfn + (1 << order) {
            self.check_migrc_flush(m, c, p);
            self.check_frame_reuse(m, p, c);
        }
        Some(pfn)
    }

    /// __GFP_THISNODE without direct reclaim (migration targets): the low watermark, then,
    /// if the gfp mask allows waking kswapd, a wakeup and a retry at min.
    pub fn alloc_page_thisnode(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        wake_kswapd: bool,
    ) -> Option<u32> {
        if let Some(pfn) = self.rmqueue_node(m, c, n, n, AllocMark::Low) {
            return Some(pfn);
        }
        if !wake_kswapd {
            return None;
        }
        self.wakeup_kswapd(m, n, c);
        self.rmqueue_node(m, c, n, n, AllocMark::Min)
    }

    /// Return a frame that no longer has users to `c`'s per-CPU list (free_unref_folios).
    pub fn free_frame(&mut self, m: &mut Machine, c: usize, pfn: u32) {
        // free_swap_cache: a folio freed while in the swap cache leaves it (its slot too,
        // if no PTE holds the entry).
        if !self.swap.folio_entry.is_empty() {
            self.swap.delete_from_swap_cache(pfn);
        }
        let n = self.frames.get(pfn).node as usize;
        // A lower zone below its share of free pages takes the frame back: user allocations
        // leave it there (zone_watermark_fast with lowmem_reserve).
        if self.nodes[n].lower_free.len() < self.nodes[n].lower_free_target {
            self.clear_freed(pfn);
            self.frames.get_mut(pfn).flags |= pg::USED | pg::RESERVED;
            self.nodes[n].lower_free.push(pfn);
            self.vm.inc(Vm::PgFree);
            return;
        }
        self.free_frames_order(m, c, pfn, 0);
    }

    /// What free_pages_prepare leaves of a frame: no user, no flags but MIGRC's mark.
    fn clear_freed(&mut self, pfn: u32) {
        let p = self.frames.get_mut(pfn);
        debug_assert!(
            !p.has(pg::LRU) && p.mapcount == 0,
            "freeing a mapped or listed frame"
        );
        p.flags &= pg::NEED_FLUSH;
        p.owner = NIL;
        p.index = 0;
    }

    /// Free a block of 2^`order` pages no one maps or lists any more (a THP, or the kernel's
    /// own), on CPU `c` (free_unref_folios → free_unref_page).
    pub(crate) fn free_frames_order(&mut self, m: &mut Machine, c: usize, pfn: u32, order: usize) {
        for p in pfn..pfn + (1 << order) {
            self.clear_freed(p);
        }
        let n = self.frames.get(pfn).node as usize;
        let now = m.cpus[c].clock;
        let zone = &mut self.nodes[n].zone;
        let cycles = zone.free_unref_page(&mut self.frames, c, pfn, order, now, &m.cost);
        m.charge_sys(c, cycles);
        self.vm.add(Vm::PgFree, 1 << order);
    }

    /// __alloc_pages(GFP_KERNEL | __GFP_NOWARN, `order`) for the kernel's own use (pipe and
    /// socket buffers, page tables) on CPU `c`'s node first, each zone at its low watermark
    /// (rmqueue); no reclaim (the callers fall back to a lower order). Every page of the
    /// block is in use.
    pub fn alloc_pages_kernel(&mut self, m: &mut Machine, c: usize, order: usize) -> Option<u32> {
        let preferred = m.cpus[c].node as usize;
        for i in 0..self.nodes[preferred].zonelist.len() {
            let n = self.nodes[preferred].zonelist[i] as usize;
            let now = m.cpus[c].clock;
            let zone = &mut self.nodes[n].zone;
            let mark = zone.wmark.low;
            let (pfn, cycles) = zone.rmqueue(&mut self.frames, c, order, now, &m.cost, mark);
            m.charge_sys(c, cycles);
            let Some(pfn) = pfn else {
                continue;
            };
            self.vm.add(Vm::PgAllocNormal, 1 << order);
            for p in pfn..pfn + (1 << order) {
                self.check_migrc_flush(m, c, p);
                self.check_frame_reuse(m, p, c);
                let page = self.frames.get_mut(p);
                page.flags = (page.flags & pg::NEED_FLUSH) | pg::USED | pg::RESERVED;
            }
            self.frames.get_mut(pfn).order = order as u8;
            return Some(pfn);
        }
        None
    }

    /// __free_pages of a block `alloc_pages_kernel` gave, on CPU `c` (free_unref_page).
    pub fn free_pages_kernel(&mut self, m: &mut Machine, c: usize, pfn: u32, order: usize) {
        self.free_frames_order(m, c, pfn, order);
    }
}
