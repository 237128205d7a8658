//! Reverse mapping (mm/rmap.c): find the PTEs that map a frame, test-and-clear their young
//! bits (`folio_referenced`), unmap them (`try_to_unmap`) and batch the TLB flush
//! (`tlbflush_unmap_batch`, `set_tlb_ubc_flush_pending`, `try_to_unmap_flush`).

use crate::arch::ArchTlbBatch;
use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::page::{pg, NIL};
use crate::mm::pgtable::{pte, PAGE_SHIFT};
use crate::workload::Backing;

/// current->tlb_ubc (struct tlbflush_unmap_batch): what must be flushed before the unmapped
/// frames may be freed.
#[derive(Clone, Copy, Debug, Default)]
pub struct TlbUbc {
    pub arch: ArchTlbBatch,
    pub flush_required: bool,
    /// A dirty PTE was unmapped (try_to_unmap_flush_dirty must flush before I/O).
    pub writable: bool,
}

/// Every struct anon_vma, by id: the mms chained to it (its anon_vma_chain entries), which
/// rmap_walk_anon visits. An anon folio's `owner` names one; fork never moves a folio, so a
/// folio is mapped at the same virtual page in each of them (anon folios do not move in this
/// simulator's address spaces: no mremap).
#[derive(Clone, Debug, Default)]
pub struct AnonVmas {
    pub members: Vec<Vec<u32>>,
}

impl AnonVmas {
    /// One anon_vma per boot-time mm, mm i's being anon_vma i.
    pub fn for_mms(nproc: u32) -> Self {
        AnonVmas {
            members: (0..nproc).map(|i| vec![i]).collect(),
        }
    }

    /// anon_vma_alloc for `mm`'s own VMAs: a new anon_vma with `mm` in it.
    pub fn alloc(&mut self, mm: u32) -> u32 {
        self.members.push(vec![mm]);
        (self.members.len() - 1) as u32
    }

    /// anon_vma_clone: `child` joins every anon_vma of `chain`.
    pub fn clone_chain(&mut self, chain: &[u32], child: u32) {
        for &av in chain {
            self.members[av as usize].push(child);
        }
    }

    /// unlink_anon_vmas: `mm` leaves every anon_vma of `chain`; an emptied one keeps its id
    /// (swap-cache folios may still name it) and no memory.
    pub fn unlink(&mut self, chain: &[u32], mm: u32) {
        for &av in chain {
            let m = &mut self.members[av as usize];
            m.retain(|&x| x != mm);
            if m.is_empty() {
                *m = Vec::new();
            }
        }
    }
}

impl Kernel {
    /// rmap_walk_anon / rmap_walk_file: the (mm, vpn) pairs whose PTE maps `pfn`.
    pub fn rmap_mappings(&self, pfn: u32) -> Vec<(u32, u32)> {
        self.rmap_walk(pfn, |p| pte::maps_frame(p) && pte::pfn(p) == pfn)
    }

    /// The places the folio's owner record says it may be mapped (anon_vma / i_mmap), kept
    /// where the PTE there satisfies `keep`.
    pub fn rmap_walk(&self, pfn: u32, keep: impl Fn(u64) -> bool) -> Vec<(u32, u32)> {
        let page = self.frames.get(pfn);
        let mut out = Vec::new();
        if page.has(pg::ANON) {
            if page.owner == NIL {
                return out;
            }
            let vpn = page.index;
            for &mm in &self.anon_vmas.members[page.owner as usize] {
                if keep(self.mms[mm as usize].pgtable.get(vpn)) {
                    out.push((mm, vpn));
                }
            }
            return out;
        }
        let file = page.owner;
        if file == NIL {
            // A swap-cache folio no page table or page cache names yet (swap readahead).
            return out;
        }
        let index = page.index as u64;
        for &mm in &self.files[file as usize].mappers {
            for vma in &self.mms[mm as usize].vmas {
                if let Backing::File { file: f, pgoff } = vma.backing {
                    let pages = (vma.end - vma.start) >> PAGE_SHIFT;
                    if f == file && index >= pgoff && index < pgoff + pages {
                        let vpn = ((vma.start >> PAGE_SHIFT) + index - pgoff) as u32;
                        if keep(self.mms[mm as usize].pgtable.get(vpn)) {
                            out.push((mm, vpn));
                        }
                    }
                }
            }
        }
        out
    }

    /// folio_referenced: how many mapping PTEs (or huge PMDs) were young (clearing them), and
    /// whether a mapping is VM_EXEC. x86's ptep_clear_flush_young does not flush the TLB, so a CPU that
    /// still caches the translation keeps using it without setting the bit again.
    pub fn folio_referenced(&mut self, m: &mut Machine, c: usize, pfn: u32) -> (u32, bool) {
        let mut referenced = 0;
        let mut exec = false;
        let n = self.frames.get(pfn).node as usize;
        let lru_gen = self.lru_gen_on(n);
        for (mm, vpn) in self.rmap_mappings(pfn) {
            let space = &mut self.mms[mm as usize];
            if let Some(vma) = space.find_vma((vpn as u64) << PAGE_SHIFT) {
                exec |= vma.exec();
            }
            let pmd = space.pgtable.huge_pmd(vpn);
            if pmd != 0 {
                // pmdp_clear_flush_young: x86 flushes the 2 MiB translation of a young PMD.
                if pmd & pte::YOUNG != 0 {
                    space.pgtable.set_huge_pmd(vpn, pmd & !pte::YOUNG);
                    self.flush_tlb_pmd_range(m, c, mm as usize, vpn);
                    referenced += 1;
                }
                continue;
            }
            let Some(slot) = space.pgtable.get_mut(vpn) else {
                continue;
            };
            if *slot & pte::YOUNG == 0 {
                continue;
            }
            if lru_gen {
                // folio_referenced_one: lru_gen_look_around clears this PTE with its
                // neighbours; its work is charged by evict_folios.
                let ptes = self.lru_gen_look_around(mm as usize, vpn, pfn);
                self.nodes[n].lrugen.look_around_ptes += ptes;
            } else {
                *slot &= !pte::YOUNG;
            }
            referenced += 1;
        }
        (referenced, exec)
    }

    /// try_to_unmap(folio, TTU_BATCH_FLUSH) run by CPU `c`: clear every mapping PTE (an anon
    /// folio in the swap cache leaves its swap entry there, swap_duplicate), move dirty bits
    /// to the folio and queue (or do) the TLB flush. Returns true when unmapped.
    pub fn try_to_unmap(
        &mut self,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        swap: Option<(usize, u32)>,
    ) -> bool {
        for (mm, vpn) in self.rmap_mappings(pfn) {
            let new = match swap {
                Some((ty, offset)) => {
                    if !self.swap.swap_duplicate(ty, offset) {
                        // try_to_unmap_one's walk_abort: the rest stays mapped.
                        return false;
                    }
                    pte::mk_swap(ty, offset)
                }
                None => 0,
            };
            let old = std::mem::replace(self.mms[mm as usize].pgtable.entry(vpn), new);
            let page = self.frames.get_mut(pfn);
            page.mapcount -= 1;
            if old & pte::DIRTY != 0 {
                page.flags |= pg::DIRTY;
            }
            let space = &mut self.mms[mm as usize];
            if page.has(pg::ANON) {
                space.rss_anon -= 1;
            } else if page.has(pg::SWAPBACKED) {
                space.rss_shmem -= 1;
            } else {
                space.rss_file -= 1;
            }
            if self.should_defer_flush(c, mm as usize) {
                self.set_tlb_ubc_flush_pending(m, c, mm as usize, vpn, old);
            } else {
                self.ptep_clear_flush(m, c, mm as usize, vpn, old);
            }
        }
        self.frames.get(pfn).mapcount == 0
    }

    /// set_tlb_ubc_flush_pending: CPU `c` cleared PTE `vpn` of `mm`; nothing to flush unless
    /// the PTE was accessible.
    pub fn set_tlb_ubc_flush_pending(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
        old_pte: u64,
    ) {
        if !self.pte_accessible(m, c, mm, old_pte) {
            return;
        }
        let mut batch = self.tlb_ubc.arch;
        self.arch_tlbbatch_add_pending(m, c, &mut batch, mm, vpn);
        self.tlb_ubc.arch = batch;
        self.tlb_ubc.flush_required = true;
        if old_pte & pte::DIRTY != 0 {
            self.tlb_ubc.writable = true;
        }
    }

    /// pte_accessible (arch/x86/include/asm/pgtable.h): whether a TLB may hold the PTE. A
    /// PROT_NONE PTE may, while a change_protection that made it so has not flushed yet.
    pub fn pte_accessible(&self, m: &Machine, c: usize, mm: usize, pte: u64) -> bool {
        pte::present(pte)
            || (pte & pte::PROTNONE != 0 && self.mms[mm].tlb_flush_pending_at(m.cpus[c].clock))
    }

    /// ptep_clear_flush's flush (mm/pgtable-generic.c), after the caller replaced the PTE
    /// `old` of page `vpn`: only an accessible PTE may be cached.
    pub fn ptep_clear_flush(&mut self, m: &mut Machine, c: usize, mm: usize, vpn: u32, old: u64) {
        if self.pte_accessible(m, c, mm, old) {
            self.flush_tlb_range(m, c, mm, vpn, vpn + 1);
        }
    }

    /// try_to_unmap_flush: flush what the reclaim batch collected, then tell MIGRC which CPUs
    /// are now clean (arch_tlbbatch_done).
    pub fn try_to_unmap_flush(&mut self, m: &mut Machine, c: usize) {
        if !self.tlb_ubc.flush_required {
            return;
        }
        let batch = std::mem::take(&mut self.tlb_ubc).arch;
        self.tlbbatch_flush(m, c, &batch);
    }

    /// arch_tlbbatch_flush, then arch_tlbbatch_done for MIGRC's pending CPUs.
    pub(crate) fn tlbbatch_flush(&mut self, m: &mut Machine, c: usize, batch: &ArchTlbBatch) {
        self.arch_tlbbatch_flush(m, c, batch);
        self.migrc_flushed(&batch.cpumask);
    }
}
