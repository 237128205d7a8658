//! NUMA balancing in memory-tiering mode (kernel/sched/fair.c, mm/memory.c, mm/mprotect.c):
//! the `task_numa_work` scanner that makes slow-tier PTEs PROT_NONE, the hint fault
//! (`do_numa_page`), `should_numa_migrate_memory` with the hot threshold, the promotion rate
//! limit and the 60-second threshold adjustment, and promotion (`migrate_misplaced_folio`).
//!
//! Mode 1 (NUMA_BALANCING_NORMAL) is scanned and counted, but its task-placement filter
//! (cpupid two-stage filter, group fault ratios) is not modelled: such faults never migrate.

use crate::config::{NUMA_BALANCING_MEMORY_TIERING, NUMA_BALANCING_NORMAL};
use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::migrate::{MigrateMode, MigrateTarget};
use crate::mm::page::pg;
use crate::mm::pgtable::{pte, HPAGE_PMD_NR, PAGE_SHIFT};
use crate::stats::Vm;

/// MAX_SCAN_WINDOW (MB/s)
pub const MAX_SCAN_WINDOW: u64 = 2560;
/// NUMA_MIGRATION_ADJUST_STEPS
pub const NUMA_MIGRATION_ADJUST_STEPS: u64 = 16;

/// Per-node promotion state kept in pglist_data.
#[derive(Clone, Debug, Default)]
pub struct NumaBalancingNode {
    pub nbp_rl_start: u64,
    pub nbp_rl_nr_cand: u64,
    /// Current hot threshold in ms (0: the default).
    pub nbp_threshold: u64,
    pub nbp_th_start: u64,
    pub nbp_th_nr_cand: u64,
    /// PGPROMOTE_CANDIDATE of this node.
    pub pgpromote_candidate: u64,
    pub pgpromote_success: u64,
}

pub use crate::mm::numa_scan::VmaNumabState;

/// Per-mm scanner state (mm->numa_next_scan, numa_scan_offset, numa_scan_seq).
#[derive(Clone, Debug, Default)]
pub struct NumaScanState {
    /// Cycles; 0 until the first tick sets now + scan_delay.
    pub next_scan: u64,
    pub scan_offset: u64,
    pub scan_seq: u32,
}

impl Kernel {
    pub fn tiering_mode(&self) -> bool {
        self.cfg.kernel.numa_balancing & NUMA_BALANCING_MEMORY_TIERING != 0
    }

    /// task_scan_min (= task_scan_start without a numa_group): max(1000 / (MAX_SCAN_WINDOW /
    /// scan_size), scan_period_min / windows) ms, with windows = RSS in scan_size chunks.
    pub fn task_scan_min_ms(&self, mm: usize) -> u64 {
        let k = &self.cfg.kernel;
        let nr_scan_pages = k.numa_balancing_scan_size_mb << (20 - PAGE_SHIFT);
        let rss = self.mms[mm].rss_anon + self.mms[mm].rss_file + self.mms[mm].rss_shmem;
        let windows = rss.div_ceil(nr_scan_pages).max(1);
        let floor = 1000 / (MAX_SCAN_WINDOW / k.numa_balancing_scan_size_mb).max(1);
        floor.max(k.numa_balancing_scan_period_min_ms / windows)
    }

    /// task_tick_numa: once the thread has run a scan period since its node_stamp, run the
    /// scan work if the mm is due; the work's own time, ×32, is added to the stamp so that
    /// scanning costs a task at most ~3 % of its runtime. A process's first thread (node_stamp
    /// 0) sets its period to task_scan_start on its first tick; promotions lengthen it
    /// (update_task_scan_period, numa_placement.rs).
    /// Returns whether the scan work ran.
    pub(crate) fn task_tick_numa(&mut self, m: &mut Machine, c: usize, tid: usize) -> bool {
        if self.cfg.kernel.numa_balancing == 0 {
            return false;
        }
        let mm = self.sched.threads[tid].mm as usize;
        let now = m.cpus[c].clock;
        self.init_numa_next_scan(m, c, tid);
        let t = &self.sched.threads[tid];
        let period = m.ns_to_cycles(t.numa_scan_period_ms as f64 * 1e6);
        if t.runtime <= t.numa_node_stamp + period {
            return false;
        }
        if t.numa_node_stamp == 0 {
            self.sched.threads[tid].numa_scan_period_ms = self.task_scan_min_ms(mm);
        }
        self.sched.threads[tid].numa_node_stamp += period;
        if now >= self.mms[mm].numa.next_scan {
            let before = m.cpus[c].clock;
            self.task_numa_work(m, c, tid);
            let spent = m.cpus[c].clock - before;
            self.sched.threads[tid].numa_node_stamp += 32 * spent;
            return true;
        }
        false
    }

    /// init_numa_balancing (the process's first thread, at its first run): the mm's first
    /// scan is due scan_delay later (mm->numa_next_scan), whether or not a tick finds the
    /// thread running.
    #[inline]
    pub(crate) fn init_numa_next_scan(&mut self, m: &Machine, c: usize, tid: usize) {
        let mm = self.sched.threads[tid].mm as usize;
        if self.cfg.kernel.numa_balancing != 0 && self.mms[mm].numa.next_scan == 0 {
            let delay = m.ns_to_cycles(self.cfg.kernel.numa_balancing_scan_delay_ms as f64 * 1e6);
            self.mms[mm].numa.next_scan = m.cpus[c].clock + delay;
        }
    }

    /// change_prot_numa over [s, e): PROT_NONE every PTE prot_numa_skip allows, recording the
    /// scan time in slow-tier folios; flush the range if anything changed.
    pub fn change_prot_numa(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        s: u32,
        e: u32,
    ) -> u64 {
        let tiering = self.tiering_mode();
        let normal = self.cfg.kernel.numa_balancing & NUMA_BALANCING_NORMAL != 0;
        // change_pte_range walks the range in order while the other CPUs run on: each PTE
        // is made PROT_NONE, and its folio gets the access time, when the walk reaches it.
        let start = m.cpus[c].clock;
        let (per_pte, per_update) = (
            m.cost.numa_scan_pte_cycles as u64 * m.cpus[c].share,
            m.cost.pte_update_cycles as u64 * m.cpus[c].share,
        );
        let cycles_per_ms = m.cycles_per_ns * 1e6;
        let mut n = 0u64;
        // change_pmd_range: a huge PMD the range covers in part is split, one it covers
        // whole goes to change_huge_pmd (HPAGE_PMD_NR pages, one numa_huge_pte_updates).
        self.split_huge_pmds_in(m, c, mm, s, e, false);
        let mut huge_walked = 0u64;
        let mut huge_updates = 0u64;
        for (base, _) in self.mms[mm].pgtable.huge_pmds_in(s, e) {
            huge_walked += 1;
            let at = start + (base - s + 1) as u64 * per_pte + n * per_update;
            if self.change_huge_pmd_numa(m, mm, base, at, normal) {
                n += HPAGE_PMD_NR as u64;
                huge_updates += 1;
            }
        }
        for vpn in s..e {
            let p = self.mms[mm].pgtable.get(vpn);
            if p & pte::HUGE != 0 {
                continue;
            }
            if !pte::present(p) {
                continue;
            }
            let pfn = pte::pfn(p);
            if pfn == self.zero_pfn {
                continue;
            }
            let nid = m.node_of_pfn(pfn);
            let toptier = self.tiers.node_is_toptier(nid);
            if toptier && !normal {
                continue;
            }
            let page = self.frames.get_mut(pfn);
            if !page.has(pg::SWAPBACKED) && page.has(pg::DIRTY) {
                continue;
            }
            if tiering && !toptier {
                let at = start + (vpn - s + 1) as u64 * per_pte + n * per_update;
                page.numa_access_ms = (at as f64 / cycles_per_ms) as u32;
            }
            // pte_modify(PAGE_NONE) keeps pfn, A and D but drops _PAGE_RW.
            self.mms[mm]
                .pgtable
                .set(vpn, (p & !(pte::PRESENT | pte::WRITE)) | pte::PROTNONE);
            n += 1;
        }
        // A huge PMD is one entry to walk and one to update, not 512.
        let walked = (e - s) as u64 - huge_walked * (HPAGE_PMD_NR as u64 - 1);
        let updated = n - huge_updates * (HPAGE_PMD_NR as u64 - 1);
        let cycles =
            m.cost.numa_scan_pte_cycles as u64 * walked + m.cost.pte_update_cycles as u64 * updated;
        m.charge_sys(c, cycles);
        self.vm.add(Vm::NumaPteUpdates, n);
        self.vm.add(Vm::NumaHugePteUpdates, huge_updates);
        if n > 0 {
            self.flush_tlb_range(m, c, mm, s, e);
        }
        // tlb_gather_mmu → tlb_finish_mmu: a flush is pending in the mm meanwhile.
        self.mms[mm].tlb_flush_pending = (start, m.cpus[c].clock);
        n
    }

    /// numa_migrate_check, the start do_numa_page and do_huge_pmd_numa_page share: charge
    /// the hint fault, mark the VMA accessed by the task, count it. Returns the folio's node,
    /// the faulting CPU's node and the task.
    pub(crate) fn numa_migrate_check(
        &mut self,
        m: &mut Machine,
        c: usize,
        mm: usize,
        vpn: u32,
        pfn: u32,
    ) -> (usize, usize, usize) {
        m.charge_sys(c, m.cost.numa_hint_fault_cycles as u64);
        let nid = m.node_of_pfn(pfn);
        let this = m.cpus[c].node as usize;
        let tid = self.sched.rq[c].current as usize;
        self.vma_set_access_pid_bit(mm, vpn, tid);
        self.vm.inc(Vm::NumaHintFaults);
        if nid == this {
            self.vm.inc(Vm::NumaHintFaultsLocal);
        }
        (nid, this, tid)
    }

    /// do_numa_page: a hint fault on a PROT_NONE PTE. Promote if the policy says so,
    /// otherwise restore the PTE.
    pub(crate) fn do_numa_page(&mut self, m: &mut Machine, c: usize, mm: usize, vpn: u32, p: u64) {
        let pfn = pte::pfn(p);
        let (nid, this, tid) = self.numa_migrate_check(m, c, mm, vpn, pfn);
        let mut failed = false;
        // mpol_misplaced with MPOL_F_MORON: the target is the faulting CPU's node.
        if nid != this && self.should_numa_migrate_memory(m, c, pfn, nid, this) {
            let anon = self.frames.get(pfn).has(pg::SWAPBACKED);
            if self.migrate_misplaced_folio_prepare(m, c, pfn, this)
                && self.migrate_misplaced_folio(m, c, pfn, nid, this)
            {
                self.vm.inc(if anon {
                    Vm::PgPromoteAnon
                } else {
                    Vm::PgPromoteFile
                });
                // task_numa_fault(.., target, .., TNF_MIGRATED): counted on the new node.
                self.task_numa_fault(m, c, tid, this, 1, false, false);
                return;
            }
            failed = true;
            if self.tiering_mode() && !self.tiers.node_is_toptier(nid) {
                self.vm.inc(if anon {
                    Vm::PgPromoteFailAnon
                } else {
                    Vm::PgPromoteFailFile
                });
            }
        }
        // out_map: make the PTE accessible again; an exclusive anon folio in a writable VMA
        // gets its write permission back (can_change_pte_writable), and so does shmem, whose
        // shared writable VMAs map writable (no writenotify: vm_page_prot has the write bit).
        let page = *self.frames.get(pfn);
        let writable = self.mms[mm]
            .find_vma((vpn as u64) << PAGE_SHIFT)
            .is_some_and(|v| v.writable())
            && (page.has(pg::ANON_EXCLUSIVE) || page.is_shmem());
        let slot = self.mms[mm].pgtable.entry(vpn);
        if *slot & pte::PROTNONE != 0 {
            *slot = (*slot & !pte::PROTNONE) | pte::PRESENT | pte::YOUNG;
            if writable {
                *slot |= pte::WRITE;
            }
        }
        self.task_numa_fault(m, c, tid, nid, 1, nid == this, failed);
    }

    /// Whether the NUMA scan made `p` PROT_NONE at a time later than CPU `c`'s clock: the
    /// scanner's walk is charged in one piece and the other CPUs trail it, so a CPU behind
    /// it must not see a PTE the walk had not reached (change_prot_numa stamps slow-tier
    /// folios with the time it reaches them).
    pub fn numa_scan_ahead(&self, m: &Machine, c: usize, p: u64) -> bool {
        if p & pte::PROTNONE == 0 || !self.tiering_mode() {
            return false;
        }
        let pfn = pte::pfn(p);
        !self.tiers.node_is_toptier(m.node_of_pfn(pfn))
            && self.frames.get(pfn).numa_access_ms as u64 > m.now_ms(c)
    }

    /// should_numa_migrate_memory, memory-tiering branch: the tiering policy decides
    /// (`policy/`; upstream's is the hot threshold and rate limit).
    pub fn should_numa_migrate_memory(
        &mut self,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        src: usize,
        dst: usize,
    ) -> bool {
        if !self.tiering_mode() || self.tiers.node_is_toptier(src) {
            // Classic NUMA-balancing placement is not modelled (see the module comment).
            return false;
        }
        self.with_policy(m, |policy, k, m| {
            policy.should_promote(k, m, c, pfn, src, dst)
        })
    }

    /// pgdat_free_space_enough: free above promo + max(1 GiB, node size / 16).
    pub fn pgdat_free_space_enough(&self, n: usize) -> bool {
        let z = &self.nodes[n].zone;
        let enough = (1u64 << (30 - PAGE_SHIFT)).max(z.managed_pages >> 4);
        z.watermark_ok(z.wmark.promo + enough)
    }

    /// numa_promotion_rate_limit: count the candidate; true when this second's candidates
    /// already reach the limit.
    pub fn numa_promotion_rate_limit(
        &mut self,
        n: usize,
        rate_limit: u64,
        nr: u64,
        now_ms: u64,
    ) -> bool {
        self.vm.add(Vm::PgPromoteCandidate, nr);
        let st = &mut self.nodes[n].numab;
        st.pgpromote_candidate += nr;
        let nr_cand = st.pgpromote_candidate;
        if now_ms.saturating_sub(st.nbp_rl_start) > 1000 {
            st.nbp_rl_start = now_ms;
            st.nbp_rl_nr_cand = nr_cand;
        }
        nr_cand - st.nbp_rl_nr_cand >= rate_limit
    }

    /// numa_promotion_adjust_threshold: every scan_period_max, move the threshold one step
    /// (ref_th / 8) toward the rate limit, within [ref_th / 8, 2 × ref_th].
    pub fn numa_promotion_adjust_threshold(
        &mut self,
        n: usize,
        rate_limit: u64,
        ref_th: u64,
        now_ms: u64,
    ) {
        let period = self.cfg.kernel.numa_balancing_scan_period_max_ms;
        let st = &mut self.nodes[n].numab;
        if now_ms.saturating_sub(st.nbp_th_start) <= period {
            return;
        }
        st.nbp_th_start = now_ms;
        let ref_cand = rate_limit * period / 1000;
        let nr_cand = st.pgpromote_candidate;
        let diff_cand = nr_cand - st.nbp_th_nr_cand;
        let unit_th = ref_th * 2 / NUMA_MIGRATION_ADJUST_STEPS;
        let mut th = if st.nbp_threshold != 0 {
            st.nbp_threshold
        } else {
            ref_th
        };
        if diff_cand > ref_cand * 11 / 10 {
            th = th.saturating_sub(unit_th).max(unit_th);
        } else if diff_cand < ref_cand * 9 / 10 {
            th = (th + unit_th).min(ref_th * 2);
        }
        st.nbp_th_nr_cand = nr_cand;
        st.nbp_threshold = th;
    }

    /// migrate_balanced_pgdat: the target has free pages above high + nr.
    pub fn migrate_balanced_pgdat(&self, n: usize, nr: u64) -> bool {
        let z = &self.nodes[n].zone;
        z.watermark_ok(z.wmark.high + nr)
    }

    /// migrate_misplaced_folio_prepare on CPU `c`: refuse when the target is short of memory
    /// (and wake its kswapd to demote), or for dirty / shared-exec file folios; isolate from
    /// the LRU.
    pub fn migrate_misplaced_folio_prepare(
        &mut self,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        target: usize,
    ) -> bool {
        let page = *self.frames.get(pfn);
        if !page.has(pg::SWAPBACKED)
            && (page.has(pg::DIRTY) || (page.has(pg::EXEC) && page.mapcount > 1))
        {
            return false;
        }
        if !self.migrate_balanced_pgdat(target, 1) {
            if self.tiering_mode() {
                self.wakeup_kswapd(m, target, c);
            }
            return false;
        }
        self.folio_isolate_lru(pfn)
    }

    /// migrate_misplaced_folio: promote one isolated folio; counts numa_pages_migrated and
    /// pgpromote_success. On failure the folio goes back to its LRU.
    pub fn migrate_misplaced_folio(
        &mut self,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        src: usize,
        target: usize,
    ) -> bool {
        let (moved, failed) = self.migrate_pages(
            m,
            c,
            vec![pfn],
            &MigrateTarget::Misplaced(target),
            MigrateMode::Async,
        );
        for f in failed {
            self.putback_folio(f);
        }
        if moved == 0 {
            return false;
        }
        self.vm.add(Vm::NumaPagesMigrated, moved);
        if self.tiering_mode()
            && !self.tiers.node_is_toptier(src)
            && self.tiers.node_is_toptier(target)
        {
            self.vm.add(Vm::PgPromoteSuccess, moved);
            self.nodes[target].numab.pgpromote_success += moved;
        }
        true
    }
}
