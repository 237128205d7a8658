//! /proc/PID/numa_maps (fs/proc/task_mmu.c): what reading it costs, which grows with the
//! process's mapped memory, as `tierlab validate`'s sampler reads it every sample.

use crate::kernel::Kernel;
use crate::mm::pgtable::{pte, HPAGE_PMD_NR};

impl Kernel {
    /// The entries show_numa_map's page walk gathers for process `mm` (walk_page_vma):
    /// gather_pte_stats takes each present PTE, and a PMD-mapped THP as one entry
    /// (pmd_trans_huge_lock → gather_stats with HPAGE_PMD_NR). Zero-page PMDs are not
    /// counted (can_gather_numa_stats_pmd: vm_normal_page_pmd is NULL). 0 for no such mm.
    pub fn numa_maps_entries(&self, mm: usize) -> u64 {
        let Some(space) = self.mms.get(mm) else {
            return 0;
        };
        let mapped = space.rss_anon + space.rss_file + space.rss_shmem;
        let thps = (space.pgtable.huge_pmds().iter())
            .filter(|(_, e)| pte::maps_frame(*e))
            .filter(|(_, e)| !self.is_zero_pfn(pte::pfn(*e)))
            .count() as u64;
        mapped.saturating_sub(thps * (HPAGE_PMD_NR as u64 - 1))
    }
}
