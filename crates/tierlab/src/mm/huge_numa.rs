//! NUMA balancing on huge PMDs (mm/huge_memory.c `change_huge_pmd` with MM_CP_PROT_NUMA,
//! `do_huge_pmd_numa_page`) and the migration of a whole THP it triggers
//! (`migrate_misplaced_folio` with an order-9 folio, `set_pmd_migration_entry`,
//! `remove_migration_pmd`).

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::alloc_pages::AllocMark;
use crate::mm::huge_memory::{haddr, HPAGE_PMD_ORDER};
use crate::mm::migrate::MigrateTarget;
use crate::mm::page::pg;
use crate::mm::pgtable::{pte, HPAGE_PMD_NR, PAGE_SHIFT, PAGE_SIZE};
use crate::stats::Vm;

const NR: u64 = HPAGE_PMD_NR as u64;

impl Kernel {
    /// change_huge_pmd(MM_CP_PROT_NUMA) for the huge PMD at `base` of `mm`, reached `at`
    /// cycles into the walk: skip the huge zero page, a PMD already PROT_NONE and (in
    /// tiering mode only) a top-tier folio; else stamp the folio's access time and make the
    /// PMD PROT_NONE. Returns whether it changed (HPAGE_PMD_NR pages for the caller).
    pub(crate) fn change_huge_pmd_numa(
        &mut self,
        m: &Machine,
        mm: usize,
        base: u32,
        at: u64,
        normal: bool,
    ) -> bool {
        let pmd = self.mms[mm].pgtable.huge_pmd(base);
        let head = pte::pfn(pmd);
        if !pte::present(pmd) || self.is_zero_pfn(head) {
            return false;
        }
        let toptier = self.tiers.node_is_toptier(m.node_of_pfn(head));
        if toptier && !normal {
            return false;
        }
        if self.tiering_mode() && !toptier {
            let ms = (at as f64 / (m.cycles_per_ns * 1e6)) as u32;
            for i in 0..HPAGE_PMD_NR {
                self.frames.get_mut(head + i).numa_access_ms = ms;
            }
        }
        self.mms[mm]
            .pgtable
            .set_huge_pmd(base, (pmd & !(pte::PRESENT | pte::WRITE)) | pte::PROTNONE);
        true
    }

    /// do_huge_pmd_numa_page: a hint fault on a PROT_NONE huge PMD. One hint fault for the
    /// folio; a misplaced THP moves whole or not at all (a THP is never split for NUMA
    /// migration), then the PMD is made accessible again.
    pub(crate) fn do_huge_pmd_numa_page(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
        pmd: u64,
    ) {
        let base = haddr(vpn);
        let head = pte::pfn(pmd);
        let (nid, this, tid) = self.numa_migrate_check(m, c, mm, vpn, head);
        let mut failed = false;
        if nid != this && self.should_numa_migrate_memory(m, c, head, nid, this) {
            if self.migrate_misplaced_thp(m, c, head, nid, this) {
                self.vm.add(Vm::PgPromoteAnon, NR);
                self.task_numa_fault(m, c, tid, this, NR, false, false);
                return;
            }
            failed = true;
            if self.tiering_mode() && !self.tiers.node_is_toptier(nid) {
                self.vm.add(Vm::PgPromoteFailAnon, NR);
            }
        }
        // out_map: the PMD made accessible, writable again for an exclusive folio of a
        // writable VMA.
        let writable = self.mms[mm]
            .find_vma((vpn as u64) << PAGE_SHIFT)
            .is_some_and(|v| v.writable())
            && self.frames.get(head).has(pg::ANON_EXCLUSIVE);
        let cur = self.mms[mm].pgtable.huge_pmd(base);
        if cur & pte::PROTNONE != 0 {
            let mut new = (cur & !pte::PROTNONE) | pte::PRESENT | pte::YOUNG;
            if writable {
                new |= pte::WRITE;
            }
            self.mms[mm].pgtable.set_huge_pmd(base, new);
        }
        self.task_numa_fault(m, c, tid, nid, NR, nid == this, failed);
    }

    /// migrate_misplaced_folio_prepare + migrate_misplaced_folio for the THP at `head`:
    /// refuse when `dst` is short of 512 pages (waking its kswapd in tiering mode), isolate
    /// the folio and move it whole (__GFP_THISNODE, no reclaim), or put it back.
    pub(crate) fn migrate_misplaced_thp(
        &mut self,
        m: &mut Machine,
        c: usize,
        head: u32,
        src: usize,
        dst: usize,
    ) -> bool {
        if !self.migrate_balanced_pgdat(dst, NR) {
            if self.tiering_mode() {
                self.wakeup_kswapd(m, dst, c);
            }
            return false;
        }
        if (0..HPAGE_PMD_NR).any(|i| !self.frames.get(head + i).has(pg::LRU)) {
            return false;
        }
        for i in 0..HPAGE_PMD_NR {
            self.folio_isolate_lru(head + i);
        }
        if !self.migrate_thp(m, c, head, &MigrateTarget::Misplaced(dst)) {
            self.putback_folio(head);
            // The folio failed whole (nosplit for MR_NUMA_MISPLACED).
            self.vm.add(Vm::PgMigrateFail, NR);
            return false;
        }
        self.vm.add(Vm::NumaPagesMigrated, NR);
        if self.tiering_mode()
            && !self.tiers.node_is_toptier(src)
            && self.tiers.node_is_toptier(dst)
        {
            self.vm.add(Vm::PgPromoteSuccess, NR);
            self.nodes[dst].numab.pgpromote_success += NR;
        }
        true
    }

    /// An order-9 block for a THP migration to `target` (the get_new_folio callbacks with
    /// the folio's order): __GFP_THISNODE without direct reclaim; demotion falls back to the
    /// other lower nodes and may wake kswapd, promotion does neither.
    fn alloc_thp_migration_target(
        &mut self,
        m: &mut Machine,
        c: usize,
        target: &MigrateTarget,
    ) -> Option<u32> {
        let on = |k: &mut Kernel, m: &mut Machine, n: usize, wake: bool| {
            k.rmqueue_node_order(m, c, n, n, AllocMark::Low, HPAGE_PMD_ORDER)
                .or_else(|| {
                    wake.then(|| {
                        k.wakeup_kswapd(m, n, c);
                        k.rmqueue_node_order(m, c, n, n, AllocMark::Min, HPAGE_PMD_ORDER)
                    })
                    .flatten()
                })
        };
        match target {
            MigrateTarget::Demote { target, allowed } => on(self, m, *target, true).or_else(|| {
                allowed
                    .iter()
                    .filter(|&&n| n as usize != *target)
                    .find_map(|&n| on(self, m, n as usize, true))
            }),
            MigrateTarget::Misplaced(n) => on(self, m, *n, false),
            MigrateTarget::Node(n) => on(self, m, *n, true),
        }
    }

    /// migrate_pages for one isolated THP: an order-9 block on the target, every huge PMD
    /// unmapped into a migration entry with its own flush (set_pmd_migration_entry's
    /// pmdp_invalidate: PMD entries are never batched), 2 MiB copied, the PMDs restored
    /// (remove_migration_pmd) and the source freed. False: no block (thp_migration_fail),
    /// the folio still isolated.
    pub(crate) fn migrate_thp(
        &mut self,
        m: &mut Machine,
        c: usize,
        head: u32,
        target: &MigrateTarget,
    ) -> bool {
        let Some(new) = self.alloc_thp_migration_target(m, c, target) else {
            self.vm.inc(Vm::ThpMigrationFail);
            return false;
        };
        let (src, dst) = (m.node_of_pfn(head), m.node_of_pfn(new));
        let mappings = self.rmap_walk(head, |p| p & pte::HUGE != 0 && pte::maps_frame(p));
        let mut entries = Vec::with_capacity(mappings.len());
        for &(mm, base) in &mappings {
            let old = self.mms[mm as usize].pgtable.huge_pmd(base);
            self.mms[mm as usize].pgtable.set_huge_pmd(base, 0);
            if self.pte_accessible(m, c, mm as usize, old) {
                self.flush_tlb_pmd_range(m, c, mm as usize, base);
            }
            entries.push(old);
        }
        // folio_migrate_copy: 2 MiB at the copy bandwidth between the nodes.
        let gbps = self
            .cfg
            .migrate_copy_gbps(src, dst, m.cost.migrate_copy_gbps);
        let copy = m.ns_to_cycles((PAGE_SIZE * NR) as f64 / gbps);
        m.charge_sys(c, copy + m.cost.migrate_page_cycles as u64);
        for i in 0..HPAGE_PMD_NR {
            self.folio_migrate_flags(new + i, head + i, src, dst);
            let mapcount = self.frames.get(head + i).mapcount;
            let d = self.frames.get_mut(new + i);
            d.mapcount = mapcount;
            d.order = HPAGE_PMD_ORDER as u8;
            self.lru_del_and_uncharge(head + i);
            self.frames.get_mut(head + i).mapcount = 0;
            self.lru_add_folio(new + i);
        }
        // remove_migration_pmd: the entry kept write, young and dirty (6.1 and later).
        for (&(mm, base), &old) in mappings.iter().zip(&entries) {
            let mut pmd = pte::mk(new, pte::HUGE | pte::PRESENT);
            pmd |= old & pte::WRITE;
            if self.swap_migration_ad_supported {
                pmd |= old & (pte::YOUNG | pte::DIRTY);
            }
            self.mms[mm as usize].pgtable.set_huge_pmd(base, pmd);
        }
        self.nodes[dst].nr_anon_thps += 1;
        self.free_thp(m, c, head);
        self.vm.add(Vm::PgMigrateSuccess, NR);
        self.vm.inc(Vm::ThpMigrationSuccess);
        true
    }

    /// Split the THPs of an isolated list into their 4 KiB folios, all still isolated.
    pub(crate) fn split_thps_in_list(
        &mut self,
        m: &mut Machine,
        c: usize,
        list: Vec<u32>,
    ) -> Vec<u32> {
        let mut out = Vec::with_capacity(list.len());
        for pfn in list {
            if self.thp_head(pfn) == Some(pfn) {
                self.split_huge_page(m, c, pfn);
                out.extend(pfn..pfn + HPAGE_PMD_NR);
            } else {
                out.push(pfn);
            }
        }
        out
    }
}
