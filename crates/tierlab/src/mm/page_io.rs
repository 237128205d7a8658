//! Swap I/O (mm/page_io.c, drivers/block/zram/zram_drv.c): writing an anon folio out to its
//! swap slot and reading it back. zram is SWP_SYNCHRONOUS_IO: the write completes before
//! swap_writepage returns, so reclaim frees the folio in the same pass, and swap-in of a slot
//! with one reference skips the swap cache and readahead (do_swap_page).

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::alloc_pages::AllocMark;
use crate::mm::page::pg;
use crate::mm::pgtable::PAGE_SIZE;
use crate::stats::Vm;

/// What reclaim does with an anon folio it cannot demote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnonReclaim {
    /// Swapped out (or already clean in the swap cache): free it.
    Free,
    /// Keep it on the LRU (writeback in flight, or it could not be unmapped).
    Keep,
    /// No free swap slot: activate it.
    NoSwap,
}

impl Kernel {
    /// The anon part of shrink_folio_list for a folio it cannot demote: a folio still under
    /// writeback is kept; otherwise add_to_swap (a slot, and for a block device the swap
    /// cache) unless the folio already has one, try_to_unmap puts the entry in every mapping
    /// PTE, and a dirty folio is written (after try_to_unmap_flush_dirty: no CPU may write
    /// the page while it is written out). zram writes synchronously and the folio is freed
    /// now; a block device writes asynchronously and the folio is freed by a later pass.
    pub(crate) fn reclaim_anon(&mut self, m: &mut Machine, c: usize, pfn: u32) -> AnonReclaim {
        if let Some(&done) = self.swap.writeback.get(&pfn) {
            if m.cpus[c].clock < done {
                return AnonReclaim::Keep;
            }
            // folio_end_writeback
            self.swap.writeback.remove(&pfn);
        }
        let entry = match self.swap.folio_entry.get(&pfn) {
            Some(&e) => e,
            None => {
                let Some(e) = self.swap.get_swap_page() else {
                    return AnonReclaim::NoSwap;
                };
                m.charge_sys(c, m.cost.swap_slot_cycles as u64);
                if !self.swap.devices[e.0].sync_io {
                    self.swap.add_to_swap_cache(pfn, e.0, e.1);
                }
                // add_to_swap marks the folio dirty: the slot does not hold its data yet.
                self.frames.get_mut(pfn).flags |= pg::DIRTY;
                e
            }
        };
        let sync = self.swap.devices[entry.0].sync_io;
        // zs_malloc: the compressed copy needs room in zram's pool first; without it the
        // write fails and the folio stays (tierlab asks before unmapping, with the same end).
        if sync && !self.zram_pool_grow(m, c, entry.0) {
            self.swap.put_swap_folio(entry.0, entry.1);
            return AnonReclaim::Keep;
        }
        if self.frames.get(pfn).mapcount > 0 && !self.try_to_unmap(m, c, pfn, Some(entry)) {
            if sync {
                self.swap.put_swap_folio(entry.0, entry.1);
                self.zram_pool_shrink(m, c, entry.0);
            }
            return AnonReclaim::Keep;
        }
        if !self.frames.get(pfn).has(pg::DIRTY) {
            // A clean swap-cache folio: the slot already holds its data.
            self.swap.delete_from_swap_cache(pfn);
            return AnonReclaim::Free;
        }
        self.pageout_to_swap(m, c, pfn, entry.0)
    }

    /// pageout of a dirty, unmapped folio to swap area `ty`, its slot taken: after
    /// try_to_unmap_flush_dirty (no CPU may write the page while it is written out), zram
    /// writes synchronously and the folio leaves the swap cache to be freed now; a block
    /// device writes asynchronously and a later pass frees the folio.
    pub(crate) fn pageout_to_swap(
        &mut self,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        ty: usize,
    ) -> AnonReclaim {
        if self.tlb_ubc.writable {
            self.try_to_unmap_flush(m, c);
        }
        self.frames.get_mut(pfn).flags &= !pg::DIRTY;
        if self.swap.devices[ty].sync_io {
            self.swap_writepage(m, c);
            self.swap.delete_from_swap_cache(pfn);
            return AnonReclaim::Free;
        }
        self.swap_writepage_async(m, c, ty, pfn);
        AnonReclaim::Keep
    }

    /// swap_writepage_bdev_async: the write to area `ty` joins the device's queue; until it
    /// completes the folio is under writeback.
    fn swap_writepage_async(&mut self, m: &mut Machine, c: usize, ty: usize, pfn: u32) {
        let done = self.swap_bdev_submit(m, c, ty, 1, true);
        m.charge_sys(c, m.cost.swap_slot_cycles as u64);
        self.swap.writeback.insert(pfn, done);
        self.vm.inc(Vm::Pswpout);
    }

    /// A request of `pages` pages to block device `ty`, submitted by CPU `c` now: the device
    /// serves its queue in order, one transfer at a time at its bandwidth, and each request
    /// completes its service latency after its transfer. Returns the completion cycle.
    pub(crate) fn swap_bdev_submit(
        &mut self,
        m: &Machine,
        c: usize,
        ty: usize,
        pages: u64,
        write: bool,
    ) -> u64 {
        let d = &mut self.swap.devices[ty];
        let transfer = m.ns_to_cycles(pages as f64 * PAGE_SIZE as f64 / d.bandwidth_gbps);
        let start = m.cpus[c].clock.max(d.busy_until);
        d.busy_until = start + transfer;
        let latency = if write {
            d.write_latency_ns
        } else {
            d.read_latency_ns
        };
        d.busy_until + m.ns_to_cycles(latency)
    }

    /// __read_swap_cache_async for a folio about to be read from slot (ty, offset): into the
    /// swap cache, marked PG_readahead (swap_ra) unless a fault waits for it.
    pub(crate) fn swap_cache_add_read(&mut self, pfn: u32, ty: usize, offset: u32, faulting: bool) {
        self.swap.add_to_swap_cache(pfn, ty, offset);
        if !faulting {
            self.swap.readahead.insert(pfn);
            self.vm.inc(Vm::SwapRa);
        }
    }

    /// The folios of one swap-in, read: they join the LRU only now (until their I/O is done
    /// they are locked, and reclaim run by a later allocation of the window must not take
    /// them); each slot's bookkeeping is charged and counted (pswpin).
    pub(crate) fn swapin_folios_read(&mut self, m: &mut Machine, c: usize, read: &[u32]) {
        for &pfn in read {
            self.lru_add(pfn);
        }
        m.charge_sys(c, m.cost.swap_slot_cycles as u64 * read.len() as u64);
        self.vm.add(Vm::Pswpin, read.len() as u64);
    }

    /// swap_writepage → zram_write_page: compress the page into zram, synchronously.
    fn swap_writepage(&mut self, m: &mut Machine, c: usize) {
        let cycles = m.ns_to_cycles(m.cost.zram_compress_ns);
        m.charge_sys(c, cycles);
        self.vm.inc(Vm::Pswpout);
    }

    /// swap_read_folio → zram_read_page: decompress the slot into a new folio, synchronously.
    pub(crate) fn swap_read_folio(&mut self, m: &mut Machine, c: usize) {
        let cycles = m.ns_to_cycles(m.cost.zram_decompress_ns) + m.cost.swap_slot_cycles as u64;
        m.charge_sys(c, cycles);
        self.vm.inc(Vm::Pswpin);
    }

    /// A slot lost its last reference (swap_free → zram_slot_free_notify): its compressed
    /// copy leaves zram's pool.
    pub(crate) fn free_swap_slot(&mut self, m: &mut Machine, c: usize, ty: usize, offset: u32) {
        if self.swap.swap_free(ty, offset) {
            self.zram_pool_shrink(m, c, ty);
        }
    }

    /// free_swap_and_cache (zap_nonpresent_ptes): a PTE dropped its entry; if only the swap
    /// cache still holds the slot, its unmapped folio (not under writeback) goes too.
    pub(crate) fn free_swap_and_cache(
        &mut self,
        m: &mut Machine,
        c: usize,
        ty: usize,
        offset: u32,
    ) {
        self.free_swap_slot(m, c, ty, offset);
        let Some(pfn) = self.swap.lookup(ty, offset) else {
            return;
        };
        let page = *self.frames.get(pfn);
        if self.swap.count(ty, offset) == 0
            && page.mapcount == 0
            && !self.swap.writeback.contains_key(&pfn)
            && page.has(pg::LRU)
        {
            self.lru_del_and_uncharge(pfn);
            self.free_frame(m, c, pfn);
        }
    }

    /// zs_malloc for one more stored page (inuse_pages() counts it once the slot is taken): a
    /// frame from the reclaiming CPU's node, no reclaim; reclaim runs with PF_MEMALLOC, so
    /// the allocation may take the reserves below min (__gfp_pfmemalloc_flags).
    pub(crate) fn zram_pool_grow(&mut self, m: &mut Machine, c: usize, ty: usize) -> bool {
        let stored = self.swap.devices[ty].inuse_pages();
        while self.swap.devices[ty].pool.len() < self.swap.pool_frames_needed(ty, stored) {
            let node = m.cpus[c].node as usize;
            let Some(pfn) = self.alloc_from_zonelist(m, c, node, AllocMark::NoWatermarks) else {
                return false;
            };
            let p = self.frames.get_mut(pfn);
            p.flags = (p.flags & pg::NEED_FLUSH) | pg::USED | pg::RESERVED;
            self.swap.devices[ty].pool.push(pfn);
        }
        true
    }

    /// zs_free: give back pool frames the stored pages no longer need.
    fn zram_pool_shrink(&mut self, m: &mut Machine, c: usize, ty: usize) {
        let stored = self.swap.devices[ty].inuse_pages();
        while self.swap.devices[ty].pool.len() > self.swap.pool_frames_needed(ty, stored) {
            let pfn = self.swap.devices[ty].pool.pop().expect("pool frame");
            self.free_frame(m, c, pfn);
        }
    }
}
