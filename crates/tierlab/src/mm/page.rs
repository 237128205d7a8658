//! The frame table: one `Page` record per simulated 4 KiB frame (Linux `struct page`/`folio`,
//! include/linux/mm_types.h), and intrusive doubly linked lists threaded through it.
//!
//! The same `lru_next`/`lru_prev` links serve the LRU lists, the buddy free lists and the
//! per-CPU pageset lists, as `page->lru` / `page->buddy_list` / `page->pcp_list` do in Linux.

use crate::mm::sparse::{
    pfn_to_section_nr, Section, NR_MEM_SECTIONS, PAGES_PER_SECTION, PAGE_SECTION_MASK,
};

/// "No frame": the list terminator and the unset owner.
pub const NIL: u32 = u32::MAX;

/// Page flags (a subset of include/linux/page-flags.h plus simulator bookkeeping).
pub mod pg {
    /// On an LRU list (PG_lru).
    pub const LRU: u16 = 1 << 0;
    /// On the active list (PG_active).
    pub const ACTIVE: u16 = 1 << 1;
    /// Referenced once by reclaim (PG_referenced).
    pub const REFERENCED: u16 = 1 << 2;
    /// Anonymous memory (PageAnon); clear means page cache.
    pub const ANON: u16 = 1 << 3;
    /// Needs writeback (PG_dirty); set from PTE dirty bits when reclaim looks.
    pub const DIRTY: u16 = 1 << 4;
    /// Free in the buddy allocator (PageBuddy); `order` holds the block order.
    pub const BUDDY: u16 = 1 << 5;
    /// Free on a per-CPU pageset list.
    pub const PCP: u16 = 1 << 6;
    /// Taken off the LRU by reclaim or migration (nr_isolated_*).
    pub const ISOLATED: u16 = 1 << 7;
    /// Deactivated once (PG_workingset).
    pub const WORKINGSET: u16 = 1 << 8;
    /// Allocated to a user (anon or page cache).
    pub const USED: u16 = 1 << 9;
    /// Mapped by an executable VMA (VM_EXEC file pages rotate on the active list).
    pub const EXEC: u16 = 1 << 10;
    /// Freed while some TLB may still translate to it (MIGRC: flush before reuse).
    pub const NEED_FLUSH: u16 = 1 << 11;
    /// The kernel's own frame, never on an LRU, never mapped by a user: held since boot
    /// (PG_reserved: machine.nodes[].reserved_mib), or allocated for the kernel's use (zram's
    /// pool, page tables, socket buffers).
    pub const RESERVED: u16 = 1 << 12;
    /// PG_swapbacked: backed by swap, not a file (anon, shmem, and swap-cache folios no one
    /// maps yet); such folios live on the anon LRU (folio_is_file_lru is its negation).
    pub const SWAPBACKED: u16 = 1 << 13;
    /// PageAnonExclusive: only this mm maps the anon page, so a write may reuse it in place
    /// (fork clears it in both, a COW reuse sets it again).
    pub const ANON_EXCLUSIVE: u16 = 1 << 14;
}

/// One simulated frame. Budget: 32 bytes (checked by a test).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Page {
    pub lru_next: u32,
    pub lru_prev: u32,
    /// Reverse-map owner: the anon_vma for anon pages, the file id for page-cache pages.
    pub owner: u32,
    /// Anon: virtual page number in `owner`; file: page offset in the file.
    pub index: u32,
    /// Last NUMA-balancing scan time in ms (folio_xchg_access_time), for the tiering hot threshold.
    pub numa_access_ms: u32,
    /// MIGRC flush generation the frame waits for before reuse.
    pub flush_gen: u32,
    pub flags: u16,
    /// Number of PTEs mapping the frame (folio_mapcount).
    pub mapcount: u16,
    pub node: u8,
    /// Buddy order when free in the buddy allocator.
    pub order: u8,
    /// MGLRU (CONFIG_LRU_GEN) bits of folio->flags: the generation + 1 (LRU_GEN_MASK, 0 = on
    /// no generation list) in bits 0..3 and the access count beyond PG_referenced
    /// (LRU_REFS_MASK) in bits 3..5; see `mm::lru_gen`.
    pub lru_gen: u8,
    /// The generation list the frame is linked on, + 1 (0: none). The kernel's `list_del`
    /// needs no head; this simulator's lists keep a length, so it remembers the list, which
    /// differs from the generation after `folio_update_gen` until `sort_folio` moves it.
    pub lru_gen_list: u8,
}

impl Page {
    pub(crate) const EMPTY: Page = Page {
        lru_next: NIL,
        lru_prev: NIL,
        owner: NIL,
        index: 0,
        numa_access_ms: 0,
        flush_gen: 0,
        flags: 0,
        mapcount: 0,
        node: 0,
        order: 0,
        lru_gen: 0,
        lru_gen_list: 0,
    };

    #[inline]
    pub fn has(&self, flag: u16) -> bool {
        self.flags & flag != 0
    }

    /// A shmem page-cache folio (swap-backed, not anon, owned by a file).
    #[inline]
    pub fn is_shmem(&self) -> bool {
        self.flags & (pg::SWAPBACKED | pg::ANON) == pg::SWAPBACKED && self.owner != NIL
    }
}

/// Head of an intrusive list (Linux `struct list_head` plus a length).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListHead {
    pub head: u32,
    pub tail: u32,
    pub len: u32,
}

impl Default for ListHead {
    /// An empty list (head and tail NIL, not frame 0).
    fn default() -> Self {
        Self::new()
    }
}

impl ListHead {
    pub const fn new() -> Self {
        ListHead {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// All frames of the machine, node after node (pfn = index), in SPARSEMEM sections
/// initialised on first use (mm/sparse.rs): `get` is one more indexed load than a flat array
/// (the section table covers every u32 pfn and a section every offset, so neither index is
/// bounds-checked; what is checked is that the section is present).
pub struct FrameTable {
    /// Section pointer table (mem_section), None until the section is initialised.
    pub(super) sections: Box<[Option<Section>; NR_MEM_SECTIONS]>,
    /// Sections the machine spans (present or not).
    pub(super) nr_sections: usize,
    /// Frames of the machine (present or not).
    pub(super) nr_frames: u32,
    /// First pfn past each node, to stamp a section's frames with their node.
    pub(super) node_end: Vec<u32>,
    pub(super) present_sections: usize,
}

/// The panic of a frame whose section was never initialised: the allocator hands out only
/// frames of initialised sections, so a caller holding such a pfn has a bug.
#[cold]
#[inline(never)]
fn section_not_present(pfn: u32) -> ! {
    panic!("frame {pfn}: its section was never initialised (no allocator handed it out)")
}

impl FrameTable {
    /// `node_pages[n]` frames for node n, contiguous and in node order. Only the section
    /// pointer table is allocated; sections come with `init_section`.
    pub fn new(node_pages: &[u64]) -> Self {
        let total: u64 = node_pages.iter().sum();
        assert!(total < NIL as u64, "more frames than a u32 pfn can name");
        let mut end = 0u32;
        let node_end = node_pages
            .iter()
            .map(|&n| {
                end += n as u32;
                end
            })
            .collect();
        let table: Box<[Option<Section>]> = vec![None; NR_MEM_SECTIONS].into_boxed_slice();
        FrameTable {
            sections: table.try_into().expect("NR_MEM_SECTIONS entries"),
            nr_sections: total.div_ceil(PAGES_PER_SECTION as u64) as usize,
            nr_frames: total as u32,
            node_end,
            present_sections: 0,
        }
    }

    /// The frame `pfn`, whose section must be initialised (__pfn_to_page).
    #[inline]
    pub fn get(&self, pfn: u32) -> &Page {
        match &self.sections[pfn_to_section_nr(pfn)] {
            Some(s) => &s[(pfn & PAGE_SECTION_MASK) as usize],
            None => section_not_present(pfn),
        }
    }

    #[inline]
    pub fn get_mut(&mut self, pfn: u32) -> &mut Page {
        match &mut self.sections[pfn_to_section_nr(pfn)] {
            Some(s) => &mut s[(pfn & PAGE_SECTION_MASK) as usize],
            None => section_not_present(pfn),
        }
    }

    /// Frames of the machine, initialised or not.
    pub fn len(&self) -> usize {
        self.nr_frames as usize
    }

    pub fn is_empty(&self) -> bool {
        self.nr_frames == 0
    }

    /// list_add: insert at the head.
    pub fn list_add(&mut self, list: &mut ListHead, pfn: u32) {
        let old = list.head;
        {
            let p = self.get_mut(pfn);
            p.lru_prev = NIL;
            p.lru_next = old;
        }
        if old == NIL {
            list.tail = pfn;
        } else {
            self.get_mut(old).lru_prev = pfn;
        }
        list.head = pfn;
        list.len += 1;
    }

    /// list_add_tail: insert at the tail.
    pub fn list_add_tail(&mut self, list: &mut ListHead, pfn: u32) {
        let old = list.tail;
        {
            let p = self.get_mut(pfn);
            p.lru_next = NIL;
            p.lru_prev = old;
        }
        if old == NIL {
            list.head = pfn;
        } else {
            self.get_mut(old).lru_next = pfn;
        }
        list.tail = pfn;
        list.len += 1;
    }

    /// list_del: unlink `pfn`, which must be on `list`.
    pub fn list_del(&mut self, list: &mut ListHead, pfn: u32) {
        let (prev, next) = {
            let p = self.get(pfn);
            (p.lru_prev, p.lru_next)
        };
        if prev == NIL {
            list.head = next;
        } else {
            self.get_mut(prev).lru_next = next;
        }
        if next == NIL {
            list.tail = prev;
        } else {
            self.get_mut(next).lru_prev = prev;
        }
        let p = self.get_mut(pfn);
        p.lru_next = NIL;
        p.lru_prev = NIL;
        list.len -= 1;
    }

    /// Remove and return the tail (the oldest entry for LRU lists).
    pub fn list_pop_tail(&mut self, list: &mut ListHead) -> Option<u32> {
        let t = list.tail;
        if t == NIL {
            return None;
        }
        self.list_del(list, t);
        Some(t)
    }

    /// Remove and return the head.
    pub fn list_pop_head(&mut self, list: &mut ListHead) -> Option<u32> {
        let h = list.head;
        if h == NIL {
            return None;
        }
        self.list_del(list, h);
        Some(h)
    }

    /// Walk a list head to tail (for checks and tests, not hot paths).
    pub fn list_iter<'a>(&'a self, list: &ListHead) -> impl Iterator<Item = u32> + 'a {
        let mut cur = list.head;
        std::iter::from_fn(move || {
            if cur == NIL {
                return None;
            }
            let here = cur;
            cur = self.get(cur).lru_next;
            Some(here)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_record_fits_the_32_byte_budget() {
        assert_eq!(std::mem::size_of::<Page>(), 32);
    }

    #[test]
    fn lists_keep_order_and_length() {
        let mut ft = FrameTable::new(&[8]);
        ft.init_range(0, 8);
        let mut l = ListHead::new();
        ft.list_add(&mut l, 1);
        ft.list_add(&mut l, 2);
        ft.list_add_tail(&mut l, 3);
        assert_eq!(ft.list_iter(&l).collect::<Vec<_>>(), vec![2, 1, 3]);
        ft.list_del(&mut l, 1);
        assert_eq!(ft.list_iter(&l).collect::<Vec<_>>(), vec![2, 3]);
        assert_eq!(ft.list_pop_tail(&mut l), Some(3));
        assert_eq!(ft.list_pop_head(&mut l), Some(2));
        assert_eq!(ft.list_pop_tail(&mut l), None);
        assert_eq!(l.len, 0);
        assert_eq!(l.head, NIL);
        assert_eq!(l.tail, NIL);
    }

    #[test]
    fn frames_are_assigned_to_nodes_in_order() {
        let mut ft = FrameTable::new(&[3, 2]);
        ft.init_range(0, 5);
        let nodes: Vec<u8> = ft.iter().map(|(_, p)| p.node).collect();
        assert_eq!(nodes, vec![0, 0, 0, 1, 1]);
    }
}
