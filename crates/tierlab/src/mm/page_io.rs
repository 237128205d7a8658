//! Swap I/O (mm/page_io.c, drivers/block/zram/zram_drv.c): writing an anon folio out to its
//! swap slot and reading it back. zram is SWP_SYNCHRONOUS_IO: the write completes before
//! swap_writepage returns, so reclaim frees the folio in the same pass, and swap-in of a slot
//! with one reference skips the swap cache and readahead (do_swap_page).

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::alloc_pages::AllocMark;
use crate::mm::page::pg;
use crate::stats::Vm;

impl Kernel {
    /// The anon part of shrink_folio_list once add_to_swap gave `entry`: try_to_unmap puts
    /// the entry in every mapping PTE, try_to_unmap_flush_dirty flushes the batch first if a
    /// dirty PTE was unmapped (no CPU may write the page while it is written out), and
    /// pageout → swap_writepage compresses it into zram. Returns true when the folio can be
    /// freed (__remove_mapping drops it from the swap cache; the slot keeps the data).
    pub(crate) fn swap_out_anon(
        &mut self,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        entry: (usize, u32),
    ) -> bool {
        m.charge_sys(c, m.cost.swap_slot_cycles as u64);
        // zs_malloc: the compressed copy needs room in zram's pool first; without it the
        // write fails and the folio stays (tierlab asks before unmapping, with the same end).
        if !self.zram_pool_grow(m, c, entry.0) {
            self.swap.put_swap_folio(entry.0, entry.1);
            return false;
        }
        if self.frames.get(pfn).mapcount > 0 && !self.try_to_unmap(m, c, pfn, Some(entry)) {
            self.swap.put_swap_folio(entry.0, entry.1);
            self.zram_pool_shrink(m, c, entry.0);
            return false;
        }
        // try_to_unmap_flush_dirty
        if self.tlb_ubc.writable {
            self.try_to_unmap_flush(m, c);
        }
        self.swap_writepage(m, c);
        true
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

    /// zs_malloc for one more stored page (inuse_pages counts it once the slot is taken): a
    /// frame from the reclaiming CPU's node, no reclaim; reclaim runs with PF_MEMALLOC, so
    /// the allocation may take the reserves below min (__gfp_pfmemalloc_flags).
    fn zram_pool_grow(&mut self, m: &mut Machine, c: usize, ty: usize) -> bool {
        let stored = self.swap.devices[ty].inuse_pages;
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
        let stored = self.swap.devices[ty].inuse_pages;
        while self.swap.devices[ty].pool.len() > self.swap.pool_frames_needed(ty, stored) {
            let pfn = self.swap.devices[ty].pool.pop().expect("pool frame");
            self.free_frame(m, c, pfn);
        }
    }
}
