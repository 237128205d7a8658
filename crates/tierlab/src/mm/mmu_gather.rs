//! The mmu_gather of a teardown (mm/mmu_gather.c, include/asm-generic/tlb.h): pages whose
//! PTEs were cleared wait in batches until a TLB flush makes freeing them safe.

use crate::kernel::Kernel;
use crate::machine::Machine;

/// MAX_GATHER_BATCH: page pointers per batch page, (4,096 − 16-byte header) / 8.
const MAX_GATHER_BATCH: usize = 510;
/// MAX_GATHER_BATCH_COUNT: batches one gather may chain (10,000 / MAX_GATHER_BATCH).
const MAX_GATHER_BATCH_COUNT: usize = 10_000 / MAX_GATHER_BATCH;
/// MMU_GATHER_BUNDLE: the batch built into struct mmu_gather.
const MMU_GATHER_BUNDLE: usize = 8;
/// The pages a gather holds before `__tlb_remove_page` reports it full (tlb_next_batch
/// refuses a batch beyond MAX_GATHER_BATCH_COUNT) and zap_pte_range forces a flush.
pub const MMU_GATHER_MAX_PAGES: usize =
    MMU_GATHER_BUNDLE + MAX_GATHER_BATCH_COUNT * MAX_GATHER_BATCH;

/// struct mmu_gather for a whole-mm teardown (tlb_gather_mmu_fullmm).
pub struct MmuGather {
    pub mm: usize,
    /// Pages unmapped and not yet freed (the batches' encoded_pages).
    pub pages: Vec<u32>,
}

impl MmuGather {
    pub fn fullmm(mm: usize) -> Self {
        MmuGather {
            mm,
            pages: Vec::new(),
        }
    }

    /// __tlb_remove_page: queue `pfn`; true when the gather is full and must be flushed.
    pub fn remove_page(&mut self, pfn: u32) -> bool {
        self.pages.push(pfn);
        self.pages.len() >= MMU_GATHER_MAX_PAGES
    }
}

impl Kernel {
    /// tlb_flush_mmu run by CPU `c`: flush the mm's translations (x86's tlb_flush:
    /// flush_tlb_mm_range over the whole mm for a fullmm gather; `freed_tables` once the page
    /// tables are gone), then free the gathered pages (tlb_batch_pages_flush →
    /// free_pages_and_swap_cache).
    pub fn tlb_flush_mmu(
        &mut self,
        m: &mut Machine,
        c: usize,
        tlb: &mut MmuGather,
        freed_tables: bool,
    ) {
        if self.cfg.debug.migrc_break == crate::config::MigrcBreak::ExitFlush {
            // (deliberately broken: no flush)
        } else if freed_tables {
            self.flush_tlb_mm_freed_tables(m, c, tlb.mm);
        } else if !tlb.pages.is_empty() {
            self.flush_tlb_range(m, c, tlb.mm, 0, u32::MAX);
        }
        for pfn in std::mem::take(&mut tlb.pages) {
            self.free_folio(m, c, pfn);
        }
    }
}
