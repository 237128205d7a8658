//! Page migration (mm/migrate.c, try_to_migrate in mm/rmap.c): `migrate_pages` in batches of
//! up to 512 pages — unmap every folio into migration entries, one TLB flush, copy, remap
//! from the migration entries, free the sources.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::page::{pg, NIL};
use crate::mm::pgtable::{pte, PAGE_SHIFT, PAGE_SIZE, USER_VA_END};
use crate::sim::SimError;
use crate::stats::Vm;

/// NR_MAX_BATCHED_MIGRATION (HPAGE_PMD_NR)
pub const NR_MAX_BATCHED_MIGRATION: usize = 512;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MigrateMode {
    /// MIGRATE_ASYNC: unmaps with TTU_BATCH_FLUSH (demotion, promotion).
    Async,
    /// MIGRATE_SYNC: each PTE is cleared and flushed at once (move_pages, mbind).
    Sync,
}

/// Where migration targets come from (the get_new_folio callbacks).
#[derive(Clone, Debug)]
pub enum MigrateTarget {
    /// alloc_migrate_folio for demotion: the target node, then the other allowed lower nodes;
    /// GFP_NOWAIT may wake their kswapd but never reclaims directly.
    Demote { target: usize, allowed: Vec<u8> },
    /// alloc_misplaced_dst_folio (promotion): __GFP_THISNODE without __GFP_RECLAIM.
    Misplaced(usize),
    /// move_pages(2) / alloc_migration_target: __GFP_THISNODE, kswapd may be woken.
    Node(usize),
}

impl Kernel {
    fn alloc_migration_target(
        &mut self,
        m: &mut Machine,
        c: usize,
        target: &MigrateTarget,
    ) -> Option<u32> {
        match target {
            MigrateTarget::Demote { target, allowed } => {
                if let Some(p) = self.alloc_page_thisnode(m, c, *target, true) {
                    return Some(p);
                }
                allowed
                    .iter()
                    .filter(|&&n| n as usize != *target)
                    .find_map(|&n| self.alloc_page_thisnode(m, c, n as usize, true))
            }
            MigrateTarget::Misplaced(n) => self.alloc_page_thisnode(m, c, *n, false),
            MigrateTarget::Node(n) => self.alloc_page_thisnode(m, c, *n, true),
        }
    }

    /// migrate_pages: move isolated folios. Returns the number moved and the folios that
    /// could not be (still isolated, for the caller to put back).
    pub fn migrate_pages(
        &mut self,
        m: &mut Machine,
        c: usize,
        folios: Vec<u32>,
        target: &MigrateTarget,
        mode: MigrateMode,
    ) -> (u64, Vec<u32>) {
        let mut failed = Vec::new();
        let mut succeeded = 0u64;
        for batch in folios.chunks(NR_MAX_BATCHED_MIGRATION) {
            // Phase 1: allocate and unmap every folio of the batch (migrate_folio_unmap).
            let mut moving = Vec::with_capacity(batch.len());
            let mut out_of_memory = false;
            for &src in batch {
                if out_of_memory {
                    failed.push(src);
                    continue;
                }
                match self.alloc_migration_target(m, c, target) {
                    Some(dst) => {
                        let deferred = self.try_to_migrate(m, c, src, mode == MigrateMode::Async);
                        moving.push((src, dst, deferred));
                    }
                    None => {
                        out_of_memory = true;
                        failed.push(src);
                    }
                }
            }
            // Phase 2: MIGRC keeps the read-only part pending (migrc_add_pending_ubc), then one
            // flush for everything else unmapped in this batch.
            let gen = self.migrc_add_pending(c);
            self.try_to_unmap_flush(m, c);
            // Phase 3: copy and remap (migrate_folios_move).
            for (src, dst, deferred) in moving {
                self.migrate_folio_move(m, c, src, dst, if deferred { gen } else { None });
                succeeded += 1;
            }
        }
        self.vm.add(Vm::PgMigrateSuccess, succeeded);
        self.vm.add(Vm::PgMigrateFail, failed.len() as u64);
        (succeeded, failed)
    }

    /// try_to_migrate: replace every PTE mapping `src` by a migration entry that keeps the
    /// write permission; queue the TLB flush in tlb_ubc when batching, else flush now. With
    /// MIGRC a folio whose mappings are all read-only and clean goes to tlb_ubc_ro instead;
    /// returns whether it did. The entry keeps young and dirty when
    /// migration_entry_supports_ad() (6.1 and later, room in the swap offset).
    pub fn try_to_migrate(&mut self, m: &mut Machine, c: usize, src: u32, batch: bool) -> bool {
        let mappings = self.rmap_mappings(src);
        let ptes: Vec<u64> = mappings
            .iter()
            .map(|&(mm, vpn)| self.mms[mm as usize].pgtable.get(vpn))
            .collect();
        let ro = batch && self.can_migrc(&ptes);
        let mut deferred = false;
        for (mm, vpn) in mappings {
            let old = self.mms[mm as usize].pgtable.get(vpn);
            let mut entry = pte::mk(src, pte::MIGRATION);
            if old & pte::WRITE != 0 {
                entry |= pte::MIG_WRITE;
            }
            // try_to_migrate_one: make_migration_entry_young/_dirty from the present PTE.
            if self.swap_migration_ad_supported && pte::maps_frame(old) {
                if old & pte::YOUNG != 0 {
                    entry |= pte::MIG_YOUNG;
                }
                if old & pte::DIRTY != 0 {
                    entry |= pte::MIG_DIRTY;
                }
            }
            self.mms[mm as usize].pgtable.set(vpn, entry);
            let page = self.frames.get_mut(src);
            page.mapcount -= 1;
            if old & pte::DIRTY != 0 {
                page.flags |= pg::DIRTY;
            }
            if batch && self.should_defer_flush(c, mm as usize) {
                if ro {
                    self.migrc_add_ro(m, c, mm as usize, vpn);
                    deferred = true;
                } else {
                    self.set_tlb_ubc_flush_pending(m, c, mm as usize, vpn, old);
                }
            } else {
                self.ptep_clear_flush(m, c, mm as usize, vpn, old);
            }
        }
        deferred
    }

    /// migrate_folio_move: copy the data and flags, switch the page cache slot, put the new
    /// folio on its node's LRU, restore the mappings and free the source.
    fn migrate_folio_move(
        &mut self,
        m: &mut Machine,
        c: usize,
        src: u32,
        dst: u32,
        migrc_gen: Option<u32>,
    ) {
        let (sn, dn) = (m.node_of_pfn(src), m.node_of_pfn(dst));
        let gbps = self.cfg.migrate_copy_gbps(sn, dn, m.cost.migrate_copy_gbps);
        let copy = m.ns_to_cycles(PAGE_SIZE as f64 / gbps);
        m.charge_sys(c, copy + m.cost.migrate_page_cycles as u64);

        let s = *self.frames.get(src);
        self.folio_migrate_flags(dst, src, sn, dn);
        self.frames.get_mut(dst).mapcount = 0;
        if !s.has(pg::ANON) && s.owner != NIL {
            self.files[s.owner as usize].pages[s.index as usize] = dst;
        }
        // folio_migrate_mapping: a swap-cache folio's slot now names the new folio.
        self.swap.migrate_cache(src, dst);
        self.lru_del_and_uncharge(src);
        self.lru_add_folio(dst);
        // remove_migration_ptes
        let entries = self.rmap_walk(dst, |p| p & pte::MIGRATION != 0 && pte::pfn(p) == src);
        for (mm, vpn) in entries {
            let old = self.mms[mm as usize].pgtable.get(vpn);
            let mut new = pte::mk(dst, pte::PRESENT);
            if old & pte::MIG_WRITE != 0 {
                new |= pte::WRITE;
            }
            // remove_migration_pte: pte_mkold unless the entry kept young; dirty only if
            // the entry kept it and the folio is dirty (entries without bits: old, clean).
            if old & pte::MIG_YOUNG != 0 {
                new |= pte::YOUNG;
            }
            if old & pte::MIG_DIRTY != 0 && self.frames.get(dst).has(pg::DIRTY) {
                new |= pte::DIRTY;
            }
            self.mms[mm as usize].pgtable.set(vpn, new);
            self.frames.get_mut(dst).mapcount += 1;
        }
        self.free_frame(m, c, src);
        if let Some(gen) = migrc_gen {
            self.migrc_tag_frame(src, gen);
        }
    }
}

impl Kernel {
    /// folio_migrate_flags for frame `src` of node `sn` copied to `dst` of node `dn`: the
    /// flags a folio keeps, its rmap owner and index; the access time (cpupid) resets when
    /// crossing tiers; then folio_migrate_refs (MGLRU's access count travels with the folio;
    /// PG_active and PG_workingset pick its generation on the new node).
    pub(crate) fn folio_migrate_flags(&mut self, dst: u32, src: u32, sn: usize, dn: usize) {
        const KEPT: u16 = pg::ANON
            | pg::SWAPBACKED
            | pg::ACTIVE
            | pg::REFERENCED
            | pg::DIRTY
            | pg::WORKINGSET
            | pg::EXEC
            // The migration entry keeps PageAnonExclusive (SWP_MIGRATION_READ_EXCLUSIVE).
            | pg::ANON_EXCLUSIVE;
        let s = *self.frames.get(src);
        let same_tier = self.tiers.node_is_toptier(sn) == self.tiers.node_is_toptier(dn);
        let d = self.frames.get_mut(dst);
        d.flags = (d.flags & pg::NEED_FLUSH) | pg::USED | (s.flags & KEPT);
        d.owner = s.owner;
        d.index = s.index;
        d.numa_access_ms = if same_tier { s.numa_access_ms } else { 0 };
        self.folio_migrate_refs(dst, src);
    }

    /// move_pages(2) (do_pages_move → add_page_for_migration → do_move_pages_to_node):
    /// isolate every mapped page of the range that is not on `node` and migrate them with
    /// MIGRATE_SYNC. Unmapped pages and the zero page are skipped, as -EFAULT / -ENOENT
    /// entries in the status array would report.
    pub fn sys_move_pages(
        &mut self,
        m: &mut Machine,
        c: usize,
        tid: usize,
        addr: u64,
        len: u64,
        node: u32,
    ) -> Result<(), SimError> {
        let node = node as usize;
        if node >= self.nodes.len() {
            return Err(SimError(format!(
                "thread {tid}: move_pages to node {node}, but the machine has {} nodes (ENODEV)",
                self.nodes.len()
            )));
        }
        if addr.checked_add(len).is_none_or(|e| e > USER_VA_END) {
            return Err(SimError(format!(
                "thread {tid}: move_pages({addr:#x}, {len}) beyond the user address space"
            )));
        }
        m.charge_sys(c, m.cost.syscall_cycles as u64);
        let mm = self.sched.threads[tid].mm as usize;
        let (s, e) = (
            (addr >> PAGE_SHIFT) as u32,
            (addr + len).div_ceil(PAGE_SIZE) as u32,
        );
        // tierlab migrates 4 KiB folios only here: split the range's THPs (the kernel's
        // move_pages moves a THP whole).
        self.split_huge_pmds_in(m, c, mm, s, e, true);
        let mut folios = Vec::new();
        for vpn in s..e {
            let p = self.mms[mm].pgtable.get(vpn);
            if !pte::maps_frame(p) || pte::pfn(p) == self.zero_pfn {
                continue;
            }
            let pfn = pte::pfn(p);
            if m.node_of_pfn(pfn) != node && self.folio_isolate_lru(pfn) {
                folios.push(pfn);
            }
        }
        let (_, failed) =
            self.migrate_pages(m, c, folios, &MigrateTarget::Node(node), MigrateMode::Sync);
        for f in failed {
            self.putback_folio(f);
        }
        Ok(())
    }
}
