//! Page faults (mm/memory.c): `handle_mm_fault` → `handle_pte_fault` → anonymous, file and
//! write-protect faults. Every fault charges its cost to the faulting CPU.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::page::pg;
use crate::mm::pgtable::{pte, PAGE_SHIFT, PAGE_SIZE};
use crate::sim::AccessKind;
use crate::stats::Vm;
use crate::workload::prot;

impl Kernel {
    /// What an order-0 allocation failure reports: memory is full, and so is swap, by what.
    pub(crate) fn oom_message(&self) -> String {
        let mut s = "out of memory: no node can satisfy an order-0 allocation".to_string();
        let total = self.swap.total_pages();
        if total == 0 {
            s += " (no swap device)";
        } else {
            let rss: u64 = self.mms.iter().map(|mm| mm.rss_anon).sum();
            let used = total - self.swap.nr_swap_pages();
            let full = if used == total { "swap full" } else { "swap" };
            let pool: usize = self.swap.devices.iter().map(|d| d.pool.len()).sum();
            // Who holds the slots: swap PTEs per process (MM_SWAPENTS) and swapped shmem
            // pages per file, counted now.
            let mut by_process: Vec<String> = self
                .mms
                .iter()
                .enumerate()
                .map(|(i, mm)| {
                    let swapped = mm.pgtable.iter().filter(|&(_, p)| pte::is_swap(p)).count();
                    format!("process {i} {swapped}")
                })
                .collect();
            for f in self.files.iter().filter(|f| !f.swapped.is_empty()) {
                by_process.push(format!("shmem '{}' {}", f.name, f.swapped.len()));
            }
            s += &format!(
                "; {full}: {used} of {total} slots in use ({}), zram's pool holds {pool} \
                 frames, anon still resident: {rss} pages",
                by_process.join(", ")
            );
        }
        s
    }

    /// handle_mm_fault: resolve a fault at `vaddr` for thread memory `mm`, or report the signal.
    pub fn handle_mm_fault(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vaddr: u64,
        kind: AccessKind,
    ) -> Result<(), String> {
        self.vm.inc(Vm::PgFault);
        let vma = match self.mms[mm].find_vma(vaddr) {
            Some(v) => *v,
            None => return Err("SIGSEGV: no mapping at this address".into()),
        };
        // access_error()
        let allowed = match kind {
            AccessKind::Store => vma.prot & prot::WRITE != 0,
            AccessKind::IFetch => vma.prot & prot::EXEC != 0,
            AccessKind::Load => vma.prot & (prot::READ | prot::WRITE | prot::EXEC) != 0,
        };
        if !allowed {
            return Err(format!(
                "SIGSEGV: {kind:?} not permitted by the mapping's protection"
            ));
        }
        let vpn = (vaddr >> PAGE_SHIFT) as u32;
        let store = kind == AccessKind::Store;
        // __handle_mm_fault's PMD level: a huge PMD, or an empty one THP may fill.
        let pmd = self.mms[mm].pgtable.huge_pmd(vpn);
        if pmd != 0 {
            if pmd & pte::PROTNONE != 0 {
                self.do_huge_pmd_numa_page(m, c, mm, vpn, pmd);
                return Ok(());
            }
            if !store || pmd & pte::WRITE != 0 {
                // Spurious: the PMD already allows the access.
                return Ok(());
            }
            self.do_huge_pmd_wp_page(m, c, mm, vpn, pmd);
            if self.mms[mm].pgtable.huge_pmd(vpn) != 0 {
                return Ok(());
            }
            // VM_FAULT_FALLBACK: the PMD was split, the PTE below handles the write.
        } else if m.huge_tlb
            && self.mms[mm].pgtable.pmd_none(vpn)
            && self.thp_vma_allowable(&vma, vpn)
            && self.do_huge_pmd_anonymous_page(m, c, mm, &vma, vpn, store)?
        {
            return Ok(());
        }
        let p = self.mms[mm].pgtable.get(vpn);
        if pte::is_none(p) {
            self.pte_alloc(m, c, mm, vpn)?;
            if vma.is_anon() {
                self.do_anonymous_page(m, c, mm, vpn, store)
            } else {
                self.do_file_fault(m, c, mm, &vma, vpn, store)
            }
        } else if p & pte::PROTNONE != 0 {
            self.do_numa_page(m, c, mm, vpn, p);
            Ok(())
        } else if pte::is_swap(p) {
            self.do_swap_page(m, c, mm, &vma, vpn, p, store)
        } else if p & pte::MIGRATION != 0 {
            // migrate_pages runs start to finish inside one kernel step, so no thread can see
            // its migration entries (no migration_entry_wait); reaching one is a simulator bug.
            Err("internal error: a thread faulted on a migration entry mid-migration".into())
        } else if store && p & pte::WRITE == 0 {
            self.do_wp_page(m, c, mm, vpn, p)
        } else {
            // Spurious fault: the PTE already allows the access (another CPU fixed it up).
            Ok(())
        }
    }

    /// do_anonymous_page: a read maps the shared zero page; a write allocates a zeroed frame.
    fn do_anonymous_page(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
        store: bool,
    ) -> Result<(), String> {
        m.charge_sys(c, m.cost.anon_fault_cycles as u64);
        if !store {
            // mm_forbids_zeropage() is false: map my_zero_pfn read-only.
            let zero = self.zero_pfn;
            self.mms[mm]
                .pgtable
                .set(vpn, pte::mk(zero, pte::PRESENT | pte::YOUNG));
            return Ok(());
        }
        let pfn = self.alloc_user_page(m, c, mm, vpn)?;
        m.charge_sys(c, m.cost.clear_page_cycles as u64);
        self.mms[mm].pgtable.set(
            vpn,
            pte::mk(pfn, pte::PRESENT | pte::WRITE | pte::YOUNG | pte::DIRTY),
        );
        Ok(())
    }

    /// do_swap_page: the slot's folio from the swap cache (no I/O), or read: on zram (one
    /// reference, SWP_SYNCHRONOUS_IO) a new folio without the swap cache or readahead, on a
    /// block device through swap_vma_readahead. The folio is mapped exclusive (writable in a
    /// writable VMA, dirty on a write fault) and the PTE's reference dropped; a write fault,
    /// or swap more than half full, also takes the folio out of the swap cache
    /// (should_try_to_free_swap → folio_free_swap).
    #[allow(clippy::too_many_arguments)]
    fn do_swap_page(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vma: &crate::mm::mm_types::Vma,
        vpn: u32,
        p: u64,
        store: bool,
    ) -> Result<(), String> {
        let (ty, offset) = pte::swap_entry(p);
        if self.swap.count(ty, offset) == 0 {
            return Err(format!(
                "internal error: a swap PTE points at free slot {offset} of swap area {ty}"
            ));
        }
        m.charge_sys(c, m.cost.anon_fault_cycles as u64);
        let pfn = match self.swap.lookup(ty, offset) {
            Some(pfn) => {
                if self.swap.readahead.remove(&pfn) {
                    self.vm.inc(Vm::SwapRaHit);
                    self.mms[mm].swap_ra.hits += 1;
                }
                pfn
            }
            None if self.swap.devices[ty].sync_io => {
                self.vm.inc(Vm::PgMajFault);
                let pfn = self
                    .new_anon_folio(m, c, mm, vpn)
                    .ok_or_else(|| self.oom_message())?;
                self.lru_add(pfn);
                self.swap_read_folio(m, c);
                pfn
            }
            None => {
                self.vm.inc(Vm::PgMajFault);
                self.swap_vma_readahead(m, c, mm, vma, vpn)?
            }
        };
        // The PTE was the slot's only reference and nobody maps the folio: exclusive (the
        // kernel keeps that in the swap PTE, pte_swp_exclusive, which fork clears in both).
        let exclusive = self.swap.count(ty, offset) == 1 && self.frames.get(pfn).mapcount == 0;
        let (own, root) = (self.mms[mm].anon_vma(), self.mms[mm].anon_vma_root());
        {
            let page = self.frames.get_mut(pfn);
            if page.mapcount == 0 {
                // folio_add_new_anon_rmap → __folio_set_anon: a folio that is not exclusive
                // goes to the oldest anon_vma of the family, which every sharer chains to.
                page.owner = if exclusive { own } else { root };
                page.index = vpn;
            }
            page.flags |= pg::ANON;
            if exclusive {
                page.flags |= pg::ANON_EXCLUSIVE;
            } else {
                page.flags &= !pg::ANON_EXCLUSIVE;
            }
            page.mapcount += 1;
        }
        self.mms[mm].rss_anon += 1;
        let mut flags = pte::PRESENT | pte::YOUNG;
        if vma.writable() && exclusive {
            flags |= pte::WRITE;
            if store {
                flags |= pte::DIRTY;
            }
        }
        self.mms[mm].pgtable.set(vpn, pte::mk(pfn, flags));
        self.free_swap_slot(m, c, ty, offset);
        if (store || self.swap.vm_swap_full()) && !self.swap.writeback.contains_key(&pfn) {
            self.swap.delete_from_swap_cache(pfn);
        }
        Ok(())
    }

    /// swap_vma_readahead: read the faulting slot and, in a window around the fault sized by
    /// __swapin_nr_pages from the last fault and the readahead hits since, every other page
    /// of the VMA (within its page table) whose PTE holds a swap entry not in the swap cache.
    /// The pages go to the swap cache and the LRU; the fault waits for the one batch of I/O.
    fn swap_vma_readahead(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vma: &crate::mm::mm_types::Vma,
        vpn: u32,
    ) -> Result<u32, String> {
        let max = 1u32 << self.cfg.vm.page_cluster;
        let ra = self.mms[mm].swap_ra;
        let win = swapin_nr_pages(ra.prev_vpn, vpn, ra.hits, max, ra.win);
        self.mms[mm].swap_ra = crate::mm::mm_types::SwapRa {
            prev_vpn: vpn,
            win,
            hits: 0,
        };
        // swap_ra_clamp_pfn: forward after a forward step, backward after a backward one,
        // centred otherwise; within the VMA and the PMD.
        let (left, right) = if win == 1 {
            (0, 1)
        } else if vpn == ra.prev_vpn.wrapping_add(1) {
            (0, win)
        } else if vpn.wrapping_add(1) == ra.prev_vpn {
            (win - 1, 1)
        } else {
            ((win - 1) / 2, win - (win - 1) / 2)
        };
        let pmd_start = vpn & !511;
        let start = vpn
            .saturating_sub(left)
            .max((vma.start >> PAGE_SHIFT) as u32)
            .max(pmd_start);
        let end = (vpn + right)
            .min((vma.end >> PAGE_SHIFT) as u32)
            .min(pmd_start + 512);
        let mut faulting = None;
        let mut read = Vec::new();
        let mut per_area = vec![0u64; self.swap.devices.len()];
        for v in start..end {
            let p = self.mms[mm].pgtable.get(v);
            if !pte::is_swap(p) {
                continue;
            }
            let (ty, offset) = pte::swap_entry(p);
            if self.swap.lookup(ty, offset).is_some() || self.swap.devices[ty].sync_io {
                continue;
            }
            let Some(pfn) = self.new_anon_folio(m, c, mm, v) else {
                if v == vpn {
                    return Err(self.oom_message());
                }
                continue;
            };
            self.swap_cache_add_read(pfn, ty, offset, v == vpn);
            per_area[ty] += 1;
            read.push(pfn);
            if v == vpn {
                faulting = Some(pfn);
            }
        }
        self.swapin_folios_read(m, c, &read);
        // One request per area (the plug merges the window); the fault sleeps until the
        // last completes.
        let mut done = 0;
        for (ty, &pages) in per_area.iter().enumerate().filter(|(_, &p)| p > 0) {
            done = done.max(self.swap_bdev_submit(m, c, ty, pages, false));
        }
        m.cpus[c].idle_until(done);
        faulting.ok_or_else(|| "internal error: swap readahead missed the faulting page".into())
    }

    /// Allocate and account a new anonymous frame for (mm, vpn) and put it on the LRU.
    fn alloc_user_page(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
    ) -> Result<u32, String> {
        let pfn = self
            .new_anon_folio(m, c, mm, vpn)
            .ok_or_else(|| self.oom_message())?;
        let page = self.frames.get_mut(pfn);
        page.mapcount = 1;
        page.flags |= pg::ANON_EXCLUSIVE;
        self.lru_add(pfn);
        self.mms[mm].rss_anon += 1;
        Ok(pfn)
    }

    /// A frame from the faulting CPU's node made an anon folio of (mm, vpn) for the rmap,
    /// not yet mapped nor on the LRU (None: out of memory).
    fn new_anon_folio(&mut self, m: &mut Machine, c: usize, mm: usize, vpn: u32) -> Option<u32> {
        let node = m.cpus[c].node as usize;
        let pfn = self.alloc_page(m, c, node)?;
        let anon_vma = self.mms[mm].anon_vma();
        let p = self.frames.get_mut(pfn);
        p.flags = (p.flags & pg::NEED_FLUSH) | pg::USED | pg::ANON | pg::SWAPBACKED;
        p.owner = anon_vma;
        p.index = vpn;
        p.mapcount = 0;
        Some(pfn)
    }

    /// do_read_fault / do_shared_fault through filemap_fault (shmem_fault for shmem): find or
    /// read the page-cache page and map it.
    fn do_file_fault(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vma: &crate::mm::mm_types::Vma,
        vpn: u32,
        store: bool,
    ) -> Result<(), String> {
        let (file, index) = vma.file_index(vpn).expect("file VMA");
        let f = file as usize;
        if index >= self.files[f].pages.len() as u64 {
            return Err(format!(
                "SIGBUS: page {index} is beyond the end of file '{}'",
                self.files[f].name
            ));
        }
        let shmem = self.files[f].shmem;
        let pfn = match self.files[f].lookup(index) {
            _ if shmem => self.shmem_get_folio(m, c, f, index as u32)?,
            Some(pfn) => {
                m.charge_sys(c, m.cost.file_minor_fault_cycles as u64);
                pfn
            }
            None => {
                let node = m.cpus[c].node as usize;
                let pfn = self.alloc_page(m, c, node).ok_or_else(|| {
                    "out of memory: no node can satisfy a page-cache allocation".to_string()
                })?;
                // filemap_fault → page_cache_sync_ra → read I/O: a major fault.
                self.vm.inc(Vm::PgMajFault);
                self.vm.add(Vm::PgPgIn, 4);
                let io = m.ns_to_cycles(m.cost.file_major_fault_ns as f64);
                m.charge_sys(c, io);
                let p = self.frames.get_mut(pfn);
                p.flags = (p.flags & pg::NEED_FLUSH) | pg::USED;
                p.owner = file;
                p.index = index as u32;
                p.mapcount = 0;
                self.files[f].pages[index as usize] = pfn;
                self.files[f].nr_cached += 1;
                self.lru_add(pfn);
                pfn
            }
        };
        let mut flags = pte::PRESENT | pte::YOUNG;
        // A file's first write faults again (page_mkwrite tracks it); shmem needs no
        // writenotify, so its shared writable VMA maps writable at once.
        if store || (shmem && vma.writable()) {
            flags |= pte::WRITE;
        }
        if store {
            flags |= pte::DIRTY;
            self.frames.get_mut(pfn).flags |= pg::DIRTY;
        }
        if vma.exec() {
            self.frames.get_mut(pfn).flags |= pg::EXEC;
        }
        self.frames.get_mut(pfn).mapcount += 1;
        if shmem {
            self.mms[mm].rss_shmem += 1;
        } else {
            self.mms[mm].rss_file += 1;
        }
        self.mms[mm].pgtable.set(vpn, pte::mk(pfn, flags));
        Ok(())
    }

    /// do_wp_page: a write to a present read-only PTE of a writable VMA.
    fn do_wp_page(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
        p: u64,
    ) -> Result<(), String> {
        m.charge_sys(c, m.cost.wp_fault_cycles as u64);
        let pfn = pte::pfn(p);
        if pfn == self.zero_pfn {
            // wp_page_copy from the zero page: new frame, then ptep_clear_flush of the old PTE.
            let new = self.alloc_user_page(m, c, mm, vpn)?;
            self.mms[mm].pgtable.set(
                vpn,
                pte::mk(new, pte::PRESENT | pte::WRITE | pte::YOUNG | pte::DIRTY),
            );
            self.flush_tlb_range(m, c, mm, vpn, vpn + 1);
            return Ok(());
        }
        let page = *self.frames.get(pfn);
        if page.has(pg::ANON) && !page.has(pg::ANON_EXCLUSIVE) && !self.wp_can_reuse_anon_folio(pfn)
        {
            return self.wp_page_copy(m, c, mm, vpn, pfn);
        }
        // wp_page_reuse (exclusive anon) or wp_page_shared (shared file mapping): upgrade in place;
        // x86 needs no flush to add permissions, but MIGRC must give up its deferrals first:
        // another CPU may still read the old copy of a page that is about to change.
        self.migrc_before_write_upgrade(m, c);
        let slot = self.mms[mm].pgtable.entry(vpn);
        *slot |= pte::WRITE | pte::DIRTY | pte::YOUNG;
        self.check_stale_after_upgrade(m, mm, vpn, pfn);
        let page = self.frames.get_mut(pfn);
        if !page.has(pg::ANON) {
            page.flags |= pg::DIRTY;
        }
        Ok(())
    }
}

impl Kernel {
    /// __pte_alloc: the fault at `vpn` of `mm` needs a PTE table where none is: a page from
    /// the allocator, for mms made while the workload runs (the others' tables predate it).
    pub(crate) fn pte_alloc(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
    ) -> Result<(), String> {
        if self.mms[mm].pgd.is_none() || self.mms[mm].pgtable.covers(vpn) {
            return Ok(());
        }
        let pfn = self
            .alloc_pages_kernel(m, c, 0)
            .ok_or_else(|| format!("{} (for a page table)", self.oom_message()))?;
        self.mms[mm].pte_pages.push(pfn);
        Ok(())
    }

    /// wp_can_reuse_anon_folio: a shared-after-fork anon folio that only this PTE maps now
    /// (the others wrote their own copies or exited) is reused, once out of the swap cache
    /// (folio_free_swap, not while under writeback); it is exclusive again.
    fn wp_can_reuse_anon_folio(&mut self, pfn: u32) -> bool {
        if self.frames.get(pfn).mapcount != 1 {
            return false;
        }
        if let Some(&(ty, offset)) = self.swap.folio_entry.get(&pfn) {
            // folio_free_swap fails while another swap PTE holds the slot or I/O runs.
            if self.swap.count(ty, offset) > 0 || self.swap.writeback.contains_key(&pfn) {
                return false;
            }
            self.swap.delete_from_swap_cache(pfn);
        }
        self.frames.get_mut(pfn).flags |= pg::ANON_EXCLUSIVE;
        true
    }

    /// wp_page_copy: a write to an anon page other mms still map. Copy it into a new
    /// exclusive folio, replace the PTE and flush the old translation (ptep_clear_flush),
    /// then drop this mapping of the old folio (folio_remove_rmap_pte).
    fn wp_page_copy(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
        old: u32,
    ) -> Result<(), String> {
        let new = self
            .new_anon_folio(m, c, mm, vpn)
            .ok_or_else(|| self.oom_message())?;
        // copy_user_highpage: a 4 KiB copy at the machine's copy bandwidth on the node.
        let n = m.node_of_pfn(new);
        let gbps = self.cfg.migrate_copy_gbps(n, n, m.cost.migrate_copy_gbps);
        m.charge_sys(c, m.ns_to_cycles(PAGE_SIZE as f64 / gbps));
        let page = self.frames.get_mut(new);
        page.mapcount = 1;
        page.flags |= pg::ANON_EXCLUSIVE;
        self.lru_add(new);
        self.mms[mm].pgtable.set(
            vpn,
            pte::mk(new, pte::PRESENT | pte::WRITE | pte::YOUNG | pte::DIRTY),
        );
        self.flush_tlb_range(m, c, mm, vpn, vpn + 1);
        let page = self.frames.get_mut(old);
        page.mapcount -= 1;
        if page.mapcount == 0 && !self.swap.folio_entry.contains_key(&old) {
            // The last mapping went (a sharer exited meanwhile): the old folio is freed.
            self.lru_del_and_uncharge(old);
            self.free_frame(m, c, old);
        }
        Ok(())
    }
}

/// __swapin_nr_pages: the readahead window from the hits since the last fault ("+ 2", rounded
/// up to a power of two from 4, or 1 without hits unless the fault is next to the last one),
/// at most `max_pages`, and never below half the last window.
pub fn swapin_nr_pages(prev: u32, vpn: u32, hits: u32, max_pages: u32, prev_win: u32) -> u32 {
    let mut pages = hits + 2;
    if pages == 2 {
        if vpn != prev.wrapping_add(1) && vpn.wrapping_add(1) != prev {
            pages = 1;
        }
    } else {
        let mut roundup = 4;
        while roundup < pages {
            roundup <<= 1;
        }
        pages = roundup;
    }
    pages = pages.min(max_pages);
    pages.max(prev_win / 2)
}
