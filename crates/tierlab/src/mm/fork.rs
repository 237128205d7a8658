//! An address space copied for fork (kernel/fork.c `dup_mmap`, mm/memory.c
//! `copy_page_range`): the child gets every VMA, and for private anonymous memory every PTE,
//! write-protected on both sides so that the first write copies (`wp_page_copy`). Shared file
//! and shmem VMAs copy no PTE (`vma_needs_copy`): the child faults them in from the page cache.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::mm_types::Mm;
use crate::mm::page::pg;
use crate::mm::pgtable::{pte, PAGE_SHIFT};
use crate::workload::Backing;

impl Kernel {
    /// mm_alloc: a new, empty address space with an anon_vma of its own (a new fork family,
    /// as exec starts one). Returns its id; ids are never reused.
    pub(crate) fn mm_alloc(&mut self, m: &mut Machine, c: usize) -> Result<usize, String> {
        self.mm_new(m, c, Vec::new())
    }

    /// A new mm chained to the anon_vmas of `chain` (a fork's parent's), plus its own, with
    /// its PGD from the page allocator (mm_alloc_pgd → pgd_alloc).
    fn mm_new(&mut self, m: &mut Machine, c: usize, mut chain: Vec<u32>) -> Result<usize, String> {
        let order = self.pgd_order();
        let pgd = self
            .alloc_pages_kernel(m, c, order)
            .ok_or_else(|| format!("{} (for a page table)", self.oom_message()))?;
        let id = self.mms.len() as u32;
        self.anon_vmas.clone_chain(&chain, id);
        let own = self.anon_vmas.alloc(id);
        chain.push(own);
        let mut mm = Mm::new(id, own);
        mm.anon_vma_chain = chain;
        mm.pgd = Some(pgd);
        self.mms.push(mm);
        self.sched.barrier_waiting.push(Vec::new());
        Ok(id as usize)
    }

    /// The PGD's order: two pages on x86 with page-table isolation, which Debian's kernels
    /// build in (PGD_ALLOCATION_ORDER, arch/x86/include/asm/pgalloc.h; the order-1 free at
    /// exit that seed 002's patch 1 is about); one page on arm64 with 4 KiB pages.
    pub(crate) fn pgd_order(&self) -> usize {
        match self.cfg.machine.arch {
            crate::config::Arch::X86 => 1,
            crate::config::Arch::Arm64 => 0,
        }
    }

    /// dup_mm run by CPU `c` for a fork of `parent`: the child's mm (anon_vma_fork: chained
    /// to the parent's anon_vmas, with one of its own), its VMAs (without NUMA scan state,
    /// vm_area_dup) and its copied PTEs, then flush_tlb_mm(oldmm) for the write-protected
    /// parent PTEs. Err: a swap entry has no room for another reference.
    pub(crate) fn dup_mm(
        &mut self,
        m: &mut Machine,
        c: usize,
        parent: usize,
    ) -> Result<usize, String> {
        let child = self.mm_new(m, c, self.mms[parent].anon_vma_chain.clone())?;
        let mut vmas = self.mms[parent].vmas.clone();
        for v in &mut vmas {
            v.numab = None;
        }
        self.mms[child].vmas = vmas;
        for f in 0..self.files.len() {
            if self.files[f].mappers.contains(&(parent as u32)) {
                self.files[f].mappers.push(child as u32);
            }
        }
        // tierlab splits the parent's THPs before copying (the kernel's copy_huge_pmd shares
        // the PMD write-protected, and a later write splits it).
        for (base, _) in self.mms[parent].pgtable.huge_pmds() {
            self.split_huge_pmd(m, c, parent, base);
        }
        let ptes: Vec<(u32, u64)> = self.mms[parent].pgtable.iter().collect();
        for (vpn, p) in ptes {
            let anon = self.mms[parent]
                .find_vma((vpn as u64) << PAGE_SHIFT)
                .is_some_and(|v| v.backing == Backing::Anon);
            if !anon {
                continue;
            }
            m.charge_sys(c, m.cost.pte_update_cycles as u64);
            let copied = if pte::is_swap(p) {
                // copy_nonpresent_pte: one more reference to the slot.
                let (ty, offset) = pte::swap_entry(p);
                if !self.swap.swap_duplicate(ty, offset) {
                    return Err(format!(
                        "fork: swap slot {offset} of area {ty} has no room for another reference"
                    ));
                }
                p
            } else if pte::maps_frame(p) {
                // copy_present_pte: a COW mapping loses its write bit in both; the child's
                // PTE starts old.
                let pfn = pte::pfn(p);
                if pfn != self.zero_pfn {
                    let page = self.frames.get_mut(pfn);
                    page.mapcount += 1;
                    // folio_try_dup_anon_rmap_pte: neither side may reuse it on a write now.
                    page.flags &= !pg::ANON_EXCLUSIVE;
                    self.mms[child].rss_anon += 1;
                }
                if p & pte::WRITE != 0 {
                    self.mms[parent].pgtable.set(vpn, p & !pte::WRITE);
                }
                p & !(pte::WRITE | pte::YOUNG)
            } else {
                continue;
            };
            // copy_pte_range allocates the child's PTE table as it reaches each one.
            self.pte_alloc(m, c, child, vpn)?;
            self.mms[child].pgtable.set(vpn, copied);
        }
        // dup_mmap ends with flush_tlb_mm(oldmm), for the parent PTEs it write-protected.
        self.flush_tlb_range(m, c, parent, 0, u32::MAX);
        Ok(child)
    }
}
