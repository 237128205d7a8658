//! The memory system calls a workload makes (mm/mmap.c, mm/mprotect.c): mmap (fixed address,
//! no replace), munmap (zap, flush, then free, as tlb_finish_mmu orders it) and mprotect.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::mm_types::Vma;
use crate::mm::mmu_gather::MmuGather;
use crate::mm::page::pg;
use crate::mm::pgtable::{pte, HPAGE_PMD_NR, PAGE_SHIFT, PAGE_SIZE, USER_VA_END};
use crate::sim::SimError;
use crate::workload::{prot, Backing};

/// change_pte_range / change_huge_pmd's new entry for a mapping of a frame: PROT_NONE keeps
/// the frame and drops access; other protections drop the write bit when not writable.
fn mprotect_entry(old: u64, new_prot: u8) -> u64 {
    let mut new = old;
    if new_prot & (prot::READ | prot::WRITE | prot::EXEC) == 0 {
        new = (new & !(pte::PRESENT | pte::WRITE)) | pte::PROTNONE;
    } else {
        if old & pte::PROTNONE != 0 {
            new = (new & !pte::PROTNONE) | pte::PRESENT;
        }
        if new_prot & prot::WRITE == 0 {
            new &= !pte::WRITE;
        }
    }
    new
}

fn check_range(what: &str, addr: u64, len: u64) -> Result<(), SimError> {
    if !addr.is_multiple_of(PAGE_SIZE) || len == 0 || !len.is_multiple_of(PAGE_SIZE) {
        return Err(SimError(format!(
            "{what}({addr:#x}, {len}): address and length must be non-zero multiples of 4 KiB (EINVAL)"
        )));
    }
    if addr.checked_add(len).is_none_or(|e| e > USER_VA_END) {
        return Err(SimError(format!(
            "{what}({addr:#x}, {len}): beyond the simulated user address space (2^44)"
        )));
    }
    Ok(())
}

impl Kernel {
    /// mmap(addr, len, prot, MAP_FIXED_NOREPLACE | …): the range must be free.
    // mmap(2)'s own arguments, plus the machine, CPU and thread that call it.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn sys_mmap(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        addr: u64,
        len: u64,
        prot_bits: u8,
        backing: Backing,
    ) -> Result<(), SimError> {
        check_range("mmap", addr, len)?;
        m.charge_sys(c, m.cost.syscall_cycles as u64);
        let mm = self.sched.threads[tid].mm as usize;
        if self.mms[mm].overlaps(addr, addr + len) {
            return Err(SimError(format!(
                "thread {tid}: mmap({addr:#x}, {len}) overlaps an existing mapping (EEXIST)"
            )));
        }
        if let Backing::File { file, .. } = backing {
            let f = self.files.get_mut(file as usize).ok_or_else(|| {
                SimError(format!(
                    "thread {tid}: mmap of file {file}, which the workload does not declare"
                ))
            })?;
            if !f.mappers.contains(&(mm as u32)) {
                f.mappers.push(mm as u32);
            }
        }
        self.mms[mm].insert_vma(Vma {
            numab: None,
            thp: 0,
            start: addr,
            end: addr + len,
            prot: prot_bits,
            backing,
        });
        Ok(())
    }

    /// munmap: remove the VMAs, clear the PTEs, flush the TLBs, then free the anon frames.
    pub fn sys_munmap(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        addr: u64,
        len: u64,
    ) -> Result<(), SimError> {
        check_range("munmap", addr, len)?;
        m.charge_sys(c, m.cost.syscall_cycles as u64);
        let mm = self.sched.threads[tid].mm as usize;
        let end = addr + len;
        self.mms[mm].split_at(addr);
        self.mms[mm].split_at(end);
        let (s, e) = ((addr >> PAGE_SHIFT) as u32, (end >> PAGE_SHIFT) as u32);
        let (to_free, was_mapped) = self.zap_pte_range(m, c, mm, s, e);
        self.mms[mm]
            .vmas
            .retain(|v| v.end <= addr || v.start >= end);
        // tlb_finish_mmu: flush before the frames go back to the allocator.
        if was_mapped && self.cfg.debug.migrc_break != crate::config::MigrcBreak::MunmapFlush {
            self.flush_tlb_range(m, c, mm, s, e);
        }
        self.check_stale_after_unmap(m, mm, s, e);
        for pfn in to_free {
            self.free_folio(m, c, pfn);
        }
        // Forget file mappers with no VMA left (i_mmap removal).
        for f in 0..self.files.len() {
            let still = self.mms[mm]
                .vmas
                .iter()
                .any(|v| matches!(v.backing, Backing::File { file, .. } if file as usize == f));
            if !still {
                self.files[f].mappers.retain(|&other| other != mm as u32);
            }
        }
        Ok(())
    }

    /// zap_pte_range: clear PTEs in [s, e), drop rmap counts; returns the anon frames to free
    /// and whether any PTE was cleared.
    pub(crate) fn zap_pte_range(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        s: u32,
        e: u32,
    ) -> (Vec<u32>, bool) {
        let mut to_free = Vec::new();
        let mut was_mapped = false;
        // zap_pmd_range: a huge PMD the range covers in part is split, and its THP, now
        // partly mapped, goes on the deferred split queue (deferred_split_folio): the pages
        // unmapped here stay allocated until the queue's shrinker splits the folio. A PMD
        // the range covers whole is zapped. Only the PMDs at the range's two ends can be
        // covered in part.
        let ends = [s & !(HPAGE_PMD_NR - 1), (e - 1) & !(HPAGE_PMD_NR - 1)];
        let mut deferred = Vec::new();
        for (i, base) in ends.into_iter().enumerate() {
            let pmd = self.mms[mm].pgtable.huge_pmd(base);
            let partial = base < s || base + HPAGE_PMD_NR > e;
            let again = i == 1 && base == ends[0];
            let head = pte::pfn(pmd);
            if pmd != 0 && partial && !again && !self.is_zero_pfn(head) {
                self.vm.inc(crate::stats::Vm::ThpDeferredSplitPage);
                self.split_huge_folio(m, c, head);
                deferred.push((head, Vec::new()));
            }
        }
        self.split_huge_pmds_in(m, c, mm, s, e, false);
        for (base, _) in self.mms[mm].pgtable.huge_pmds_in(s, e) {
            let (free, mapped) = self.zap_huge_pmd(m, c, mm, base);
            was_mapped |= mapped;
            to_free.extend(free);
        }
        for vpn in s..e {
            let old = match self.mms[mm].pgtable.get_mut(vpn) {
                Some(slot) if *slot != 0 => std::mem::replace(slot, 0),
                _ => continue,
            };
            let (free, mapped) = self.zap_pte(m, c, mm, old);
            was_mapped |= mapped;
            match free.and_then(|p| {
                deferred
                    .iter_mut()
                    .find(|(h, _)| p.wrapping_sub(*h) < HPAGE_PMD_NR)
            }) {
                Some((_, held)) => held.push(free.unwrap()),
                None => to_free.extend(free),
            }
        }
        for (_, held) in deferred {
            self.deferred_split_hold(held);
        }
        (to_free, was_mapped)
    }

    /// zap_present_ptes / zap_nonpresent_ptes for one PTE `old` of `mm` just cleared: drop
    /// its swap entry, or its mapping of a frame (rmap count, RSS, dirty bit). Returns the
    /// anon frame whose last mapping it was (free it after the flush) and whether the PTE
    /// was not a swap entry (so a TLB may hold it).
    fn zap_pte(&mut self, m: &mut Machine, c: usize, mm: usize, old: u64) -> (Option<u32>, bool) {
        if pte::is_swap(old) {
            // zap_nonpresent_ptes → free_swap_and_cache
            let (ty, offset) = pte::swap_entry(old);
            self.free_swap_and_cache(m, c, ty, offset);
            return (None, false);
        }
        if !pte::maps_frame(old) {
            return (None, true);
        }
        let pfn = pte::pfn(old);
        m.charge_sys(c, m.cost.pte_update_cycles as u64);
        if pfn == self.zero_pfn {
            return (None, true);
        }
        let page = self.frames.get_mut(pfn);
        page.mapcount -= 1;
        if page.has(pg::ANON) {
            self.mms[mm].rss_anon -= 1;
            if page.mapcount == 0 {
                self.lru_del_and_uncharge(pfn);
                return (Some(pfn), true);
            }
        } else {
            if old & pte::DIRTY != 0 {
                page.flags |= pg::DIRTY;
            }
            if page.has(pg::SWAPBACKED) {
                self.mms[mm].rss_shmem -= 1;
            } else {
                self.mms[mm].rss_file -= 1;
            }
        }
        (None, true)
    }

    /// exit_mmap, run by CPU `c` once the last user of `mm` has left it (exit, or exec's old
    /// mm): unmap_vmas through a fullmm mmu_gather, whose pages are freed a full gather at a
    /// time after a flush; then free_pgtables and tlb_finish_mmu, whose flush reaches lazy
    /// CPUs too; then the VMAs and the anon_vma chain go (unlink_anon_vmas).
    pub fn exit_mmap(&mut self, m: &mut Machine, c: usize, mm: usize) {
        let mut tlb = MmuGather::fullmm(mm);
        for (base, _) in self.mms[mm].pgtable.huge_pmds() {
            if let (Some(head), _) = self.zap_huge_pmd(m, c, mm, base) {
                if tlb.remove_page(head) {
                    self.tlb_flush_mmu(m, c, &mut tlb, false);
                }
            }
        }
        let ptes: Vec<(u32, u64)> = self.mms[mm].pgtable.iter_ptes().collect();
        for (vpn, old) in ptes {
            self.mms[mm].pgtable.set(vpn, 0);
            if let (Some(pfn), _) = self.zap_pte(m, c, mm, old) {
                if tlb.remove_page(pfn) {
                    self.tlb_flush_mmu(m, c, &mut tlb, false);
                }
            }
        }
        // free_pgtables: the PTE tables go to the gather (tlb_remove_table) and are freed
        // after tlb_finish_mmu's flush, with the user pages still in it.
        let tables = std::mem::take(&mut self.mms[mm].pte_pages);
        tlb.pages.extend(tables);
        self.tlb_flush_mmu(m, c, &mut tlb, true);
        self.check_stale_after_unmap(m, mm, 0, u32::MAX);
        let space = &mut self.mms[mm];
        space.vmas = Vec::new();
        space.pgtable = crate::mm::pgtable::PageTable::released();
        space.dead = true;
        let chain = std::mem::take(&mut space.anon_vma_chain);
        self.anon_vmas.unlink(&chain, mm as u32);
        self.mms[mm].anon_vma_chain = chain;
        for f in &mut self.files {
            f.mappers.retain(|&other| other != mm as u32);
        }
        // __mmdrop → mm_free_pgd: the PGD goes last.
        if let Some(pgd) = self.mms[mm].pgd.take() {
            let order = self.pgd_order();
            self.free_pages_kernel(m, c, pgd, order);
        }
    }

    /// mprotect: change VMA protection; removing permissions updates PTEs and flushes.
    pub(crate) fn sys_mprotect(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        addr: u64,
        len: u64,
        new_prot: u8,
    ) -> Result<(), SimError> {
        check_range("mprotect", addr, len)?;
        m.charge_sys(c, m.cost.syscall_cycles as u64);
        let mm = self.sched.threads[tid].mm as usize;
        let end = addr + len;
        // mprotect requires the whole range to be mapped (ENOMEM otherwise).
        if !self.range_mapped(mm, addr, end) {
            return Err(SimError(format!(
                "thread {tid}: mprotect({addr:#x}, {len}) covers unmapped memory (ENOMEM)"
            )));
        }
        self.mms[mm].split_at(addr);
        self.mms[mm].split_at(end);
        for v in self.mms[mm].vmas.iter_mut() {
            if v.start >= addr && v.end <= end {
                v.prot = new_prot;
            }
        }
        // change_pmd_range: a huge PMD the range covers in part is split; change_huge_pmd
        // updates one it covers whole, as change_pte_range updates a PTE.
        let (s, e) = ((addr >> PAGE_SHIFT) as u32, (end >> PAGE_SHIFT) as u32);
        let mut changed = false;
        self.split_huge_pmds_in(m, c, mm, s, e, false);
        for (base, old) in self.mms[mm].pgtable.huge_pmds_in(s, e) {
            let new = mprotect_entry(old, new_prot);
            if new != old {
                self.mms[mm].pgtable.set_huge_pmd(base, new);
                changed |= pte::present(old);
            }
        }
        for vpn in s..e {
            let Some(slot) = self.mms[mm].pgtable.get_mut(vpn) else {
                continue;
            };
            let old = *slot;
            if !pte::maps_frame(old) {
                continue;
            }
            let new = mprotect_entry(old, new_prot);
            if new != old {
                *slot = new;
                changed |= pte::present(old);
            }
        }
        let n = (e - s) as u64;
        m.charge_sys(c, m.cost.pte_update_cycles as u64 * n);
        if changed {
            self.flush_tlb_range(m, c, mm, s, e);
        }
        Ok(())
    }
}
