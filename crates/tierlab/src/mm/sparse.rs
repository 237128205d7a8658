//! SPARSEMEM (mm/sparse.c, include/linux/mmzone.h): the frame table is cut into sections of
//! `PAGES_PER_SECTION` frames, found through a small table of section pointers indexed by
//! `pfn >> PFN_SECTION_SHIFT` (`__pfn_to_section`). A section's `struct page`s are allocated
//! and initialised (node stamped, lists empty) the first time a frame in it is needed, as the
//! kernel's deferred struct page init does (mm/mm_init.c deferred_init_memmap): the host
//! memory follows what the workload uses, not the machine's size.

use crate::mm::page::{FrameTable, Page};

/// SECTION_SIZE_BITS - PAGE_SHIFT on x86_64: 27 - 12.
pub const PFN_SECTION_SHIFT: u32 = 15;
/// PAGES_PER_SECTION: 32768 frames, 128 MiB.
pub const PAGES_PER_SECTION: u32 = 1 << PFN_SECTION_SHIFT;
pub const PAGE_SECTION_MASK: u32 = PAGES_PER_SECTION - 1;
/// NR_MEM_SECTIONS: sections enough for every u32 pfn (16 TiB), 8 bytes each.
pub const NR_MEM_SECTIONS: usize = 1 << (32 - PFN_SECTION_SHIFT);

/// One section's frames (its part of the memmap).
pub type Section = Box<[Page; PAGES_PER_SECTION as usize]>;

/// pfn_to_section_nr()
#[inline]
pub fn pfn_to_section_nr(pfn: u32) -> usize {
    (pfn >> PFN_SECTION_SHIFT) as usize
}

/// section_nr_to_pfn()
#[inline]
pub fn section_nr_to_pfn(nr: usize) -> u32 {
    (nr as u32) << PFN_SECTION_SHIFT
}

/// One value per frame of the initialised sections (the checks' per-frame tallies): a
/// section no frame of which was ever initialised holds nothing.
pub struct PerFrame<T> {
    sections: Vec<Vec<T>>,
}

impl<T: Clone> PerFrame<T> {
    /// `v` for every frame of every initialised section of `frames`.
    pub fn new(frames: &FrameTable, v: T) -> Self {
        PerFrame {
            sections: (0..frames.nr_sections())
                .map(|nr| vec![v.clone(); frames.section(nr).len()])
                .collect(),
        }
    }
}

impl<T> std::ops::Index<u32> for PerFrame<T> {
    type Output = T;
    fn index(&self, pfn: u32) -> &T {
        &self.sections[pfn_to_section_nr(pfn)][(pfn & PAGE_SECTION_MASK) as usize]
    }
}

impl<T> std::ops::IndexMut<u32> for PerFrame<T> {
    fn index_mut(&mut self, pfn: u32) -> &mut T {
        &mut self.sections[pfn_to_section_nr(pfn)][(pfn & PAGE_SECTION_MASK) as usize]
    }
}

impl FrameTable {
    /// sparse_init_one_section() + memmap_init_range(): allocate section `nr`'s frames and
    /// stamp each with its node (set_page_node); no-op when already present.
    pub fn init_section(&mut self, nr: usize) {
        if self.sections[nr].is_some() {
            return;
        }
        let base = section_nr_to_pfn(nr);
        let end = (base as u64 + PAGES_PER_SECTION as u64).min(self.len() as u64) as u32;
        let pages: Box<[Page]> = vec![Page::EMPTY; PAGES_PER_SECTION as usize].into_boxed_slice();
        let mut pages: Section = pages.try_into().expect("PAGES_PER_SECTION frames");
        let mut node = self.node_end.partition_point(|&e| e <= base);
        for (i, p) in pages[..(end - base) as usize].iter_mut().enumerate() {
            while base + i as u32 >= self.node_end[node] {
                node += 1;
            }
            p.node = node as u8;
        }
        self.sections[nr] = Some(pages);
        self.present_sections += 1;
    }

    /// Initialise every section that frames [start, end) touch.
    pub fn init_range(&mut self, start: u32, end: u32) {
        if start >= end {
            return;
        }
        for nr in pfn_to_section_nr(start)..=pfn_to_section_nr(end - 1) {
            self.init_section(nr);
        }
    }

    /// Is frame `pfn`'s section initialised (pfn_valid/online_section)?
    #[inline]
    pub fn initialised(&self, pfn: u32) -> bool {
        self.sections[pfn_to_section_nr(pfn)].is_some()
    }

    /// Sections in the machine (present or not): the section pointer table's length.
    pub fn nr_sections(&self) -> usize {
        self.nr_sections
    }

    /// Section `nr`'s frames (those below the machine's end); empty until initialised.
    pub fn section(&self, nr: usize) -> &[Page] {
        let base = section_nr_to_pfn(nr) as u64;
        let len = (self.len() as u64)
            .saturating_sub(base)
            .min(PAGES_PER_SECTION as u64);
        match &self.sections[nr] {
            Some(s) => &s[..len as usize],
            None => &[],
        }
    }

    /// Sections initialised so far.
    pub fn present_sections(&self) -> usize {
        self.present_sections
    }

    /// Every initialised frame with its pfn, in pfn order (for_each_valid_pfn).
    pub fn iter(&self) -> impl Iterator<Item = (u32, &Page)> + '_ {
        (0..self.nr_sections).flat_map(|nr| {
            let base = section_nr_to_pfn(nr);
            (self.section(nr).iter().enumerate()).map(move |(i, p)| (base + i as u32, p))
        })
    }

    /// The initialised frames of [start, end), with their pfns.
    pub fn iter_range(&self, start: u32, end: u32) -> impl Iterator<Item = (u32, &Page)> + '_ {
        let first = pfn_to_section_nr(start);
        let last = if end > start {
            pfn_to_section_nr(end - 1) + 1
        } else {
            first
        };
        (first..last.min(self.nr_sections)).flat_map(move |nr| {
            let base = section_nr_to_pfn(nr);
            (self.section(nr).iter().enumerate())
                .map(move |(i, p)| (base + i as u32, p))
                .filter(move |&(pfn, _)| pfn >= start && pfn < end)
        })
    }

    /// Host bytes of the frame table: the section pointer table and the present sections.
    pub fn host_bytes(&self) -> usize {
        std::mem::size_of::<[Option<Section>; NR_MEM_SECTIONS]>()
            + self.present_sections * std::mem::size_of::<[Page; PAGES_PER_SECTION as usize]>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_stamped_with_their_nodes_on_first_use() {
        // node 0 ends inside section 1: section 1 holds frames of both nodes
        let a = PAGES_PER_SECTION as u64 + 100;
        let mut ft = FrameTable::new(&[a, 3 * PAGES_PER_SECTION as u64]);
        assert_eq!(ft.present_sections(), 0);
        assert_eq!(ft.nr_sections(), 5);
        assert!(!ft.initialised(0));
        ft.init_range(a as u32 - 1, a as u32 + 1);
        assert_eq!(ft.present_sections(), 1);
        assert!(ft.initialised(PAGES_PER_SECTION) && !ft.initialised(0));
        assert_eq!(ft.get(a as u32 - 1).node, 0);
        assert_eq!(ft.get(a as u32).node, 1);
        // the last section is cut at the machine's end
        ft.init_section(4);
        assert_eq!(ft.section(4).len(), 100);
        assert_eq!(ft.get(ft.len() as u32 - 1).node, 1);
        let pfns: Vec<u32> = ft
            .iter_range(a as u32 - 2, a as u32 + 2)
            .map(|(p, _)| p)
            .collect();
        assert_eq!(pfns, (a as u32 - 2..a as u32 + 2).collect::<Vec<_>>());
        assert_eq!(ft.iter().count(), PAGES_PER_SECTION as usize + 100);
    }

    #[test]
    fn a_four_tib_table_starts_with_the_pointer_table_alone() {
        let ft = FrameTable::new(&[1 << 30]);
        assert_eq!(ft.nr_sections(), 32_768);
        assert_eq!(ft.present_sections(), 0);
        assert!(ft.host_bytes() <= 1 << 20);
    }

    #[test]
    fn per_frame_tallies_cover_the_initialised_sections() {
        let mut ft = FrameTable::new(&[4 * PAGES_PER_SECTION as u64]);
        ft.init_section(2);
        let mut t = PerFrame::new(&ft, 0u8);
        let pfn = 2 * PAGES_PER_SECTION + 5;
        t[pfn] += 1;
        assert_eq!(t[pfn], 1);
        assert_eq!(t[pfn + 1], 0);
    }
}
