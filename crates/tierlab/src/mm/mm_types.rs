//! Address spaces (`struct mm_struct`) and their VMAs (`struct vm_area_struct`),
//! include/linux/mm_types.h.

use crate::mm::pgtable::{PageTable, PAGE_SHIFT};
use crate::workload::{prot, Backing};

/// A set of CPUs (mm_cpumask, flush batches), up to 256.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuMask(pub [u64; 4]);

impl CpuMask {
    #[inline]
    pub fn set(&mut self, cpu: usize) {
        self.0[cpu >> 6] |= 1 << (cpu & 63);
    }
    #[inline]
    pub fn clear(&mut self, cpu: usize) {
        self.0[cpu >> 6] &= !(1 << (cpu & 63));
    }
    #[inline]
    pub fn test(&self, cpu: usize) -> bool {
        self.0[cpu >> 6] & (1 << (cpu & 63)) != 0
    }
    pub fn union(&mut self, other: &CpuMask) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a |= b;
        }
    }
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|w| *w == 0)
    }
    pub fn iter(&self) -> impl Iterator<Item = usize> + '_ {
        (0..256).filter(move |&c| self.test(c))
    }
    /// cpumask_any_but(mask, cpu) < nr_cpu_ids
    pub fn any_but(&self, cpu: usize) -> bool {
        let mut m = *self;
        m.clear(cpu);
        !m.is_empty()
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vma {
    pub start: u64,
    pub end: u64,
    pub prot: u8,
    pub backing: Backing,
    /// vma->numab_state: NUMA-balancing scan state, made on the first scan that reaches it.
    pub numab: Option<crate::mm::numa_balancing::VmaNumabState>,
    /// VM_HUGEPAGE / VM_NOHUGEPAGE (mm/huge_memory.rs `vm_thp`).
    pub thp: u8,
}

impl Vma {
    pub fn contains(&self, addr: u64) -> bool {
        self.start <= addr && addr < self.end
    }
    pub fn writable(&self) -> bool {
        self.prot & prot::WRITE != 0
    }
    pub fn exec(&self) -> bool {
        self.prot & prot::EXEC != 0
    }
    pub fn is_anon(&self) -> bool {
        matches!(self.backing, Backing::Anon)
    }
    /// Page offset in the backing file of the page at `vpn` (linear_page_index).
    pub fn file_index(&self, vpn: u32) -> Option<(u32, u64)> {
        match self.backing {
            Backing::File { file, pgoff } => {
                Some((file, pgoff + vpn as u64 - (self.start >> PAGE_SHIFT)))
            }
            Backing::Anon => None,
        }
    }
}

pub struct Mm {
    pub id: u32,
    /// Sorted, non-overlapping.
    pub vmas: Vec<Vma>,
    pub pgtable: PageTable,
    /// CPUs that may hold TLB entries of this mm (mm_cpumask).
    pub cpumask: CpuMask,
    /// context.tlb_gen: bumped on every flush request (inc_mm_tlb_gen).
    pub tlb_gen: u64,
    /// Last time (cycles) should_trim_cpumask allowed a trim.
    pub next_trim: u64,
    pub rss_anon: u64,
    pub rss_file: u64,
    /// MM_SHMEMPAGES: mapped shmem pages.
    pub rss_shmem: u64,
    /// Live threads using this mm. Nothing tears the mm down at zero yet: exit_mmap is not
    /// modelled, so an exited process keeps its memory.
    pub nr_threads: u32,
    /// NUMA-balancing scanner state.
    pub numa: crate::mm::numa_balancing::NumaScanState,
    /// Swap readahead state (the kernel keeps it per VMA, vma->swap_readahead_info).
    pub swap_ra: SwapRa,
    /// mm->tlb_flush_pending as a span of cycles: from tlb_gather_mmu to tlb_finish_mmu of
    /// the last change_prot_numa, in the scanning CPU's clock.
    pub tlb_flush_pending: (u64, u64),
    /// The anon_vmas this mm's VMAs are chained to (vma->anon_vma_chain, one chain for all
    /// its VMAs): its ancestors' from fork (anon_vma_fork clones the parent's chain), then
    /// its own, last, where its new anon folios go (vma->anon_vma).
    pub anon_vma_chain: Vec<u32>,
    /// exit_mmap has run: the mm is gone (its id is never reused, as x86's ctx_id is not).
    pub dead: bool,
    /// The PGD's frames, for mms made while the workload runs (those it starts with made
    /// theirs before time 0 and keep them).
    pub pgd: Option<u32>,
    /// The frames of its PTE tables, for an mm with a PGD of its own (__pte_alloc).
    pub pte_pages: Vec<u32>,
    /// mm->lru_gen.bitmap: one bit per node (node_id % 64), all set when a CPU switches to
    /// one of its tasks (lru_gen_use_mm), cleared by MGLRU's walk (should_skip_mm).
    pub lru_gen_bitmap: u64,
}

/// SWAP_RA_VAL: the last fault address, the last window and the readahead hits since.
#[derive(Clone, Copy, Debug, Default)]
pub struct SwapRa {
    pub prev_vpn: u32,
    pub win: u32,
    pub hits: u32,
}

impl Mm {
    /// A new, empty mm whose new anon folios go to `anon_vma`.
    pub fn new(id: u32, anon_vma: u32) -> Self {
        Mm {
            id,
            vmas: Vec::new(),
            pgtable: PageTable::new(),
            cpumask: CpuMask::default(),
            tlb_gen: 1,
            next_trim: 0,
            rss_anon: 0,
            rss_file: 0,
            rss_shmem: 0,
            nr_threads: 0,
            numa: Default::default(),
            swap_ra: SwapRa::default(),
            tlb_flush_pending: (0, 0),
            anon_vma_chain: vec![anon_vma],
            dead: false,
            pgd: None,
            pte_pages: Vec::new(),
            // lru_gen_init_mm
            lru_gen_bitmap: 0,
        }
    }

    /// anon_vma->root: the oldest anon_vma of its fork family, which every member chains to.
    #[inline]
    pub fn anon_vma_root(&self) -> u32 {
        self.anon_vma_chain[0]
    }

    /// vma->anon_vma: where this mm's new anon folios are filed for the rmap.
    #[inline]
    pub fn anon_vma(&self) -> u32 {
        *self
            .anon_vma_chain
            .last()
            .expect("an mm has its own anon_vma")
    }

    /// mm_tlb_flush_pending, seen by a CPU whose clock reads `t`.
    #[inline]
    pub fn tlb_flush_pending_at(&self, t: u64) -> bool {
        let (from, to) = self.tlb_flush_pending;
        from <= t && t < to
    }

    /// find_vma for an address inside a VMA.
    pub fn find_vma(&self, addr: u64) -> Option<&Vma> {
        let i = self.vmas.partition_point(|v| v.end <= addr);
        self.vmas.get(i).filter(|v| v.contains(addr))
    }

    /// Index of the first VMA ending after `addr`.
    pub fn vma_index_from(&self, addr: u64) -> usize {
        self.vmas.partition_point(|v| v.end <= addr)
    }

    /// Whether [start, end) overlaps any VMA.
    pub fn overlaps(&self, start: u64, end: u64) -> bool {
        let i = self.vma_index_from(start);
        self.vmas.get(i).is_some_and(|v| v.start < end)
    }

    pub fn insert_vma(&mut self, vma: Vma) {
        let i = self.vmas.partition_point(|v| v.start < vma.start);
        self.vmas.insert(i, vma);
    }

    /// Split VMAs so that `addr` is a VMA boundary (__split_vma).
    pub fn split_at(&mut self, addr: u64) {
        let i = self.vma_index_from(addr);
        if let Some(v) = self.vmas.get(i).copied() {
            if v.start < addr && addr < v.end {
                let mut hi = v;
                hi.start = addr;
                if let Backing::File { file, pgoff } = v.backing {
                    hi.backing = Backing::File {
                        file,
                        pgoff: pgoff + ((addr - v.start) >> PAGE_SHIFT),
                    };
                }
                // vm_area_dup: the new part starts without NUMA scan state.
                hi.numab = None;
                self.vmas[i].end = addr;
                self.vmas.insert(i + 1, hi);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vma(s: u64, e: u64) -> Vma {
        Vma {
            thp: 0,
            numab: None,
            start: s,
            end: e,
            prot: prot::READ,
            backing: Backing::Anon,
        }
    }

    #[test]
    fn find_and_split_vmas() {
        let mut mm = Mm::new(0, 0);
        mm.insert_vma(vma(0x10000, 0x20000));
        mm.insert_vma(vma(0x40000, 0x50000));
        assert!(mm.find_vma(0x10000).is_some());
        assert!(mm.find_vma(0x20000).is_none());
        assert!(mm.find_vma(0x4ffff).is_some());
        assert!(mm.overlaps(0x1f000, 0x21000));
        assert!(!mm.overlaps(0x20000, 0x40000));
        mm.split_at(0x18000);
        assert_eq!(mm.vmas.len(), 3);
        assert_eq!(mm.vmas[0].end, 0x18000);
        assert_eq!(mm.vmas[1].start, 0x18000);
    }

    #[test]
    fn cpumask_ops() {
        let mut m = CpuMask::default();
        m.set(3);
        m.set(200);
        assert!(m.test(200) && m.test(3) && !m.test(4));
        assert!(m.any_but(3));
        m.clear(200);
        assert!(!m.any_but(3));
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![3]);
    }
}
