//! shmem (mm/shmem.c): the swap-backed page cache behind `MAP_SHARED | MAP_ANONYMOUS` and
//! memfd mappings. A fault on a hole gets a zeroed folio; reclaim writes a dirty folio to swap
//! (shmem_writepage) and leaves its swap entry in the page cache, the PTEs becoming none; a
//! fault on that entry reads it back through the swap cache with cluster readahead
//! (shmem_swapin_folio → swap_cluster_readahead), frees the slot and keeps the folio dirty.
//! Modelled as of 6.12: later kernels skip the swap cache for zram here too.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::memory::swapin_nr_pages;
use crate::mm::page::{pg, NIL};
use crate::mm::page_io::AnonReclaim;
use crate::stats::Vm;

/// swapin_nr_pages's globals for cluster readahead (prev_offset, last_readahead_pages,
/// swapin_readahead_hits): shmem's swap-in has no VMA to keep them in.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClusterRa {
    pub prev_offset: u32,
    pub last_pages: u32,
    pub hits: u32,
}

impl Kernel {
    /// shmem_fault → shmem_get_folio_gfp(SGP_CACHE): the folio of page `index` of shmem file
    /// `f`, from the page cache, read back from swap, or new and zeroed for a hole.
    pub(crate) fn shmem_get_folio(
        &mut self,
        m: &mut Machine,
        c: usize,
        f: usize,
        index: u32,
    ) -> Result<u32, String> {
        if let Some(pfn) = self.files[f].lookup(index as u64) {
            m.charge_sys(c, m.cost.file_minor_fault_cycles as u64);
            return Ok(pfn);
        }
        let pfn = match self.files[f].swapped.get(&index).copied() {
            Some((ty, offset)) => {
                let pfn = self.shmem_swapin_folio(m, c, ty, offset)?;
                // shmem_add_to_page_cache took the entry's place: the folio leaves the swap
                // cache (delete_from_swap_cache), stays dirty (its slot is freed at once:
                // swap_free) and is written again if reclaimed.
                self.files[f].swapped.remove(&index);
                self.swap.delete_from_swap_cache(pfn);
                self.frames.get_mut(pfn).flags |= pg::DIRTY;
                self.free_swap_slot(m, c, ty, offset);
                pfn
            }
            None => {
                // shmem_alloc_and_add_folio, then clear_highpage: a hole reads as zeroes.
                let cycles = m.cost.file_minor_fault_cycles + m.cost.clear_page_cycles;
                m.charge_sys(c, cycles as u64);
                let node = m.cpus[c].node as usize;
                let pfn = self
                    .alloc_page(m, c, node)
                    .ok_or_else(|| self.oom_message())?;
                let p = self.frames.get_mut(pfn);
                p.flags = (p.flags & pg::NEED_FLUSH) | pg::USED | pg::SWAPBACKED;
                p.mapcount = 0;
                self.lru_add(pfn);
                pfn
            }
        };
        let p = self.frames.get_mut(pfn);
        p.owner = f as u32;
        p.index = index;
        self.files[f].pages[index as usize] = pfn;
        self.files[f].nr_cached += 1;
        Ok(pfn)
    }

    /// shmem_swapin_folio: the slot's folio from the swap cache (after any writeback of it
    /// ends: folio_wait_writeback), or read with cluster readahead, a major fault.
    fn shmem_swapin_folio(
        &mut self,
        m: &mut Machine,
        c: usize,
        ty: usize,
        offset: u32,
    ) -> Result<u32, String> {
        if let Some(pfn) = self.swap.lookup(ty, offset) {
            m.charge_sys(c, m.cost.file_minor_fault_cycles as u64);
            // swap_cache_get_folio without a VMA: a hit counts for the global window.
            if self.swap.readahead.remove(&pfn) {
                self.vm.inc(Vm::SwapRaHit);
                self.swap.cluster_ra.hits += 1;
            }
            if let Some(done) = self.swap.writeback.remove(&pfn) {
                m.cpus[c].idle_until(done);
            }
            return Ok(pfn);
        }
        self.vm.inc(Vm::PgMajFault);
        m.charge_sys(c, m.cost.file_minor_fault_cycles as u64);
        self.swap_cluster_readahead(m, c, ty, offset)
    }

    /// swap_cluster_readahead: read the aligned block of swapin_nr_pages slots around
    /// `offset` (slot 0 is the header; free slots and slots already cached are skipped) into
    /// the swap cache and the LRU. zram decompresses each page in turn; a block device reads
    /// the batch at once and the fault waits for it.
    fn swap_cluster_readahead(
        &mut self,
        m: &mut Machine,
        c: usize,
        ty: usize,
        offset: u32,
    ) -> Result<u32, String> {
        let max = 1u32 << self.cfg.vm.page_cluster;
        // swapin_nr_pages: the hits since the last call size the window; prev_offset moves
        // only when there were none.
        let pages = if max <= 1 {
            1
        } else {
            let ra = &mut self.swap.cluster_ra;
            let hits = std::mem::take(&mut ra.hits);
            let pages = swapin_nr_pages(ra.prev_offset, offset, hits, max, ra.last_pages);
            if hits == 0 {
                ra.prev_offset = offset;
            }
            ra.last_pages = pages;
            pages
        };
        let mask = pages - 1;
        let last = self.swap.devices[ty].swap_map.len() as u32 - 1;
        let (start, end) = if mask == 0 {
            (offset, offset)
        } else {
            ((offset & !mask).max(1), (offset | mask).min(last))
        };
        let mut faulting = None;
        let mut read = Vec::new();
        for o in start..=end {
            if self.swap.count(ty, o) == 0 || self.swap.lookup(ty, o).is_some() {
                continue;
            }
            // __read_swap_cache_async: a folio no page table or page cache names yet.
            let node = m.cpus[c].node as usize;
            let Some(pfn) = self.alloc_page(m, c, node) else {
                if o == offset {
                    return Err(self.oom_message());
                }
                continue;
            };
            let p = self.frames.get_mut(pfn);
            p.flags = (p.flags & pg::NEED_FLUSH) | pg::USED | pg::SWAPBACKED;
            p.owner = NIL;
            p.index = 0;
            p.mapcount = 0;
            self.swap_cache_add_read(pfn, ty, o, o == offset);
            read.push(pfn);
            if o == offset {
                faulting = Some(pfn);
            }
        }
        self.swapin_folios_read(m, c, &read);
        let n = read.len() as u64;
        if self.swap.devices[ty].sync_io {
            m.charge_sys(c, m.ns_to_cycles(m.cost.zram_decompress_ns * n as f64));
        } else {
            // One request for the cluster (the plug merges it); the fault sleeps until it
            // completes.
            let done = self.swap_bdev_submit(m, c, ty, n, false);
            m.cpus[c].idle_until(done);
        }
        faulting.ok_or_else(|| "internal error: cluster readahead missed the faulting slot".into())
    }

    /// shrink_folio_list for a shmem folio it cannot demote: unmapped like a file folio (its
    /// PTEs become none), then a clean one (a hole never written) is dropped and a dirty one
    /// goes through shmem_writepage: a slot (folio_alloc_swap), the swap cache, the entry in
    /// the page cache in the folio's place (shmem_delete_from_page_cache), swap_writepage.
    pub(crate) fn reclaim_shmem(&mut self, m: &mut Machine, c: usize, pfn: u32) -> AnonReclaim {
        if self.frames.get(pfn).mapcount > 0 && !self.try_to_unmap(m, c, pfn, None) {
            return AnonReclaim::Keep;
        }
        let page = *self.frames.get(pfn);
        if !page.has(pg::DIRTY) {
            // __remove_mapping by the caller: the hole reads as zeroes again.
            return AnonReclaim::Free;
        }
        // Without a slot shmem_writepage redirties it (AOP_WRITEPAGE_ACTIVATE).
        let Some((ty, offset)) = self.swap.get_swap_page() else {
            return AnonReclaim::NoSwap;
        };
        m.charge_sys(c, m.cost.swap_slot_cycles as u64);
        let sync = self.swap.devices[ty].sync_io;
        if sync && !self.zram_pool_grow(m, c, ty) {
            self.swap.put_swap_folio(ty, offset);
            return AnonReclaim::Keep;
        }
        self.swap.add_to_swap_cache(pfn, ty, offset);
        // The page cache's one reference to a fresh slot always fits.
        let _ = self.swap.swap_duplicate(ty, offset);
        let file = &mut self.files[page.owner as usize];
        file.pages[page.index as usize] = NIL;
        file.nr_cached -= 1;
        file.swapped.insert(page.index, (ty, offset));
        let p = self.frames.get_mut(pfn);
        p.owner = NIL;
        p.index = 0;
        self.pageout_to_swap(m, c, pfn, ty)
    }
}
