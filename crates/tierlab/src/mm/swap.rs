//! LRU list moves (mm/swap.c, include/linux/mm_inline.h): the one place folios go onto,
//! between and off the LRU lists, with the node's anon/file accounting.

use crate::kernel::Kernel;
use crate::mm::mmzone::lru_index;
use crate::mm::page::pg;
use crate::mm::vmscan::SWAP_CLUSTER_MAX;

impl Kernel {
    /// folio_add_lru: new folios start on the inactive list of their type.
    /// With MGLRU a folio added in a fault is marked active (lru_gen_in_fault), so it joins
    /// generation max_seq - 1; every caller here is a fault.
    pub fn lru_add(&mut self, pfn: u32) {
        let n = self.frames.get(pfn).node as usize;
        if self.lru_gen_on(n) {
            self.frames.get_mut(pfn).flags |= pg::ACTIVE;
        } else {
            self.frames.get_mut(pfn).flags &= !pg::ACTIVE;
        }
        self.lru_add_folio(pfn);
    }

    /// lruvec_add_folio plus node accounting: onto the list the folio's flags name (a
    /// migrated folio keeps PG_active).
    pub fn lru_add_folio(&mut self, pfn: u32) {
        let p = self.frames.get_mut(pfn);
        debug_assert!(!p.has(pg::LRU));
        let anon = p.has(pg::SWAPBACKED);
        let active = p.has(pg::ACTIVE);
        p.flags |= pg::LRU;
        let n = p.node as usize;
        if self.lru_gen_on(n) {
            // lruvec_add_folio → lru_gen_add_folio
            self.lru_gen_add_folio(pfn, false);
        } else {
            let node = &mut self.nodes[n];
            self.frames
                .list_add(&mut node.lru[lru_index(anon, active)], pfn);
        }
        let node = &mut self.nodes[n];
        if anon {
            node.nr_anon += 1;
        } else {
            node.nr_file += 1;
        }
    }

    /// lruvec_del_folio plus the node's anon/file accounting: the frame leaves its user.
    pub fn lru_del_and_uncharge(&mut self, pfn: u32) {
        let p = *self.frames.get(pfn);
        let n = p.node as usize;
        let anon = p.has(pg::SWAPBACKED);
        if p.has(pg::LRU) && self.lru_gen_on(n) {
            // lruvec_del_folio → lru_gen_del_folio
            self.lru_gen_del_folio(pfn, false);
        } else if p.has(pg::LRU) {
            let lru = lru_index(anon, p.has(pg::ACTIVE));
            let node = &mut self.nodes[n];
            self.frames.list_del(&mut node.lru[lru], pfn);
        } else if p.has(pg::ISOLATED) {
            self.nodes[n].nr_isolated -= 1;
        }
        let node = &mut self.nodes[n];
        if anon {
            node.nr_anon -= 1;
        } else {
            node.nr_file -= 1;
        }
        // free_pages_prepare clears LRU_GEN_MASK and LRU_REFS_MASK with the other flags.
        let f = self.frames.get_mut(pfn);
        f.flags &= !(pg::LRU | pg::ACTIVE | pg::ISOLATED);
        f.lru_gen = 0;
        f.lru_gen_list = 0;
    }

    /// folio_activate: an inactive folio on the LRU moves to the head of the active list and
    /// loses PG_referenced.
    pub fn folio_activate(&mut self, pfn: u32) {
        let p = *self.frames.get(pfn);
        if self.lru_gen_on(p.node as usize) {
            self.lru_gen_activate(pfn);
            return;
        }
        debug_assert!(p.has(pg::LRU) && !p.has(pg::ACTIVE));
        let lru = lru_index(p.has(pg::SWAPBACKED), false);
        let node = &mut self.nodes[p.node as usize];
        self.frames.list_del(&mut node.lru[lru], pfn);
        let f = self.frames.get_mut(pfn);
        f.flags = (f.flags & !pg::REFERENCED) | pg::ACTIVE;
        self.frames.list_add(&mut node.lru[lru + 1], pfn);
    }

    /// folio_deactivate: an active folio on the LRU moves to the head of the inactive list;
    /// either way it loses PG_referenced. Returns whether it moved.
    pub fn folio_deactivate(&mut self, pfn: u32) -> bool {
        let p = *self.frames.get(pfn);
        if self.lru_gen_on(p.node as usize) {
            // lru_deactivate: with MGLRU any LRU folio is re-added
            return self.lru_gen_deactivate(pfn);
        }
        if !(p.has(pg::LRU) && p.has(pg::ACTIVE)) {
            self.frames.get_mut(pfn).flags &= !pg::REFERENCED;
            return false;
        }
        let anon = p.has(pg::SWAPBACKED);
        let node = &mut self.nodes[p.node as usize];
        self.frames
            .list_del(&mut node.lru[lru_index(anon, true)], pfn);
        self.frames.get_mut(pfn).flags &= !(pg::ACTIVE | pg::REFERENCED);
        self.frames
            .list_add(&mut node.lru[lru_index(anon, false)], pfn);
        true
    }

    /// lru_note_cost: charge a reclaim cost to the node's anon or file lists (a written page
    /// costs SWAP_CLUSTER_MAX, a rotated one 1), halving both costs once they exceed a quarter
    /// of the LRU pages, so recent costs weigh most.
    pub fn lru_note_cost(&mut self, n: usize, file: bool, nr_io: u64, nr_rotated: u64) {
        let cost = nr_io * SWAP_CLUSTER_MAX + nr_rotated;
        let node = &mut self.nodes[n];
        if file {
            node.file_cost += cost;
        } else {
            node.anon_cost += cost;
        }
        let lrusize: u64 = (0..4).map(|l| node.lru_size(l)).sum();
        if node.file_cost + node.anon_cost > lrusize / 4 {
            node.file_cost /= 2;
            node.anon_cost /= 2;
        }
    }
}
