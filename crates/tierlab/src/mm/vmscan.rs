//! Page reclaim (mm/vmscan.c): kswapd and `balance_pgdat`, `shrink_node` →
//! `shrink_lruvec` → `shrink_active_list` / `shrink_inactive_list` → `shrink_folio_list`,
//! the classic two-list LRU aging (CONFIG_LRU_GEN off), and direct reclaim. With
//! `vm.lru_gen_enabled` kswapd, direct reclaim and LRU isolation branch to MGLRU
//! (`mm/lru_gen.rs`), which shares `shrink_folio_list` and the demotion path.
//!
//! There is no swap device: without demotion `get_scan_count` picks SCAN_FILE and only clean
//! page-cache pages are dropped; with a demotion target anon pages are reclaimable by
//! demotion (`can_demote`, `demote_folio_list`).

use crate::config::NUMA_BALANCING_MEMORY_TIERING;
use crate::kernel::{Event, Kernel};
use crate::machine::Machine;
use crate::mm::migrate::{MigrateMode, MigrateTarget};
use crate::mm::mmzone::{
    lru_index, LRU_ACTIVE_ANON, LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE,
};
use crate::mm::page::{pg, NIL};
use crate::mm::page_io::AnonReclaim;
use crate::mm::pgtable::HPAGE_PMD_NR;
use crate::stats::Vm;

pub const SWAP_CLUSTER_MAX: u64 = 32;
pub const DEF_PRIORITY: u32 = 12;
pub const MAX_RECLAIM_RETRIES: u32 = 16;
/// vm.swappiness's maximum: anon and file weighed as swappiness : 200 - swappiness.
pub const MAX_SWAPPINESS: u64 = 200;

/// kswapd_try_to_sleep's short sleep, schedule_timeout(HZ/10): 100 ms.
const KSWAPD_SHORT_SLEEP_NS: f64 = 1e8;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reclaimer {
    Kswapd,
    Direct,
}

/// A reclaim pass in progress (scan_control for one priority of balance_pgdat).
#[derive(Clone, Debug, Default)]
pub struct ShrinkPass {
    pub active: bool,
    pub priority: u32,
    /// Pages left to scan per LRU list at this priority.
    pub nr: [u64; 4],
    /// get_scan_count's targets, for the proportional cut once nr_to_reclaim is met.
    pub targets: [u64; 4],
    pub may_deactivate: [bool; 2],
    /// proportional_reclaim: direct reclaim at DEF_PRIORITY scans its whole target.
    pub proportional: bool,
    /// Reclaimed at this priority, and over the whole balance_pgdat run.
    pub reclaimed: u64,
    pub total: u64,
    /// sc->nr_scanned at this priority: inactive pages isolated.
    pub scanned: u64,
    pub nr_to_reclaim: u64,
}

impl ShrinkPass {
    /// shrink_lruvec's loop condition: inactive anon or either file list left to scan.
    pub fn more(&self) -> bool {
        self.nr[LRU_INACTIVE_ANON] + self.nr[LRU_INACTIVE_FILE] + self.nr[LRU_ACTIVE_FILE] > 0
    }
}

/// get_scan_count's scan_balance.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScanBalance {
    Equal,
    Fract,
    Anon,
    File,
}

/// The scan_control fields prepare_scan_control sets for get_scan_count.
#[derive(Clone, Copy, Debug)]
pub struct ScanPrep {
    /// DEACTIVATE_ANON and DEACTIVATE_FILE: the active list may be shrunk.
    pub may_deactivate: [bool; 2],
    pub cache_trim_mode: bool,
    pub file_is_tiny: bool,
}

/// folio_check_references outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FolioRef {
    Activate,
    Keep,
    Reclaim,
    ReclaimClean,
}

fn int_sqrt(x: u64) -> u64 {
    (x as f64).sqrt() as u64
}

impl Kernel {
    /// pgdat_balanced: the zone has free pages above the high watermark.
    /// In memory-tiering mode kswapd balances to the promo watermark (promotion headroom);
    /// with TPP's decoupling, a top-tier node that can demote balances to WMARK_DEMOTE.
    pub fn pgdat_balanced(&self, n: usize) -> bool {
        let z = &self.nodes[n].zone;
        let mut mark = if self.cfg.kernel.numa_balancing & NUMA_BALANCING_MEMORY_TIERING != 0 {
            z.wmark.promo
        } else {
            z.wmark.high
        };
        if self.can_demote(n) {
            mark = mark.max(self.nodes[n].demote_wmark);
        }
        z.watermark_ok(mark)
    }

    /// The tiering policy's demotion watermark of every node (TPP's WMARK_DEMOTE; 0: none).
    pub(crate) fn setup_demote_wmarks(&mut self) {
        let policy = self.policy.take().expect("a tiering policy");
        for n in 0..self.nodes.len() {
            let mark = policy.demote_wmark(self, n);
            self.nodes[n].demote_wmark = mark;
        }
        self.policy = Some(policy);
    }

    /// can_reclaim_anon_pages: a free swap slot, or a demotion target.
    pub fn can_reclaim_anon_pages(&self, n: usize) -> bool {
        self.swap.nr_swap_pages() > 0 || self.can_demote(n)
    }

    /// can_demote: demotion is enabled and the node has a demotion target.
    pub fn can_demote(&self, n: usize) -> bool {
        self.cfg.vm.demotion_enabled && !self.tiers.preferred[n].is_empty()
    }

    /// wakeup_kswapd: start the node's kswapd unless it is running, failing or not needed; CPU
    /// `waker` wakes it, and try_to_wake_up places it (select_kswapd_cpu).
    pub fn wakeup_kswapd(&mut self, m: &mut Machine, n: usize, waker: usize) {
        let node = &self.nodes[n];
        if node.kswapd_awake
            || node.kswapd_failures >= MAX_RECLAIM_RETRIES
            || self.pgdat_balanced(n)
        {
            return;
        }
        // Woken in its short sleep: schedule_timeout returned time remaining.
        if self.now < node.kswapd_short_sleep_until {
            self.vm.inc(Vm::KswapdLowWmarkHitQuickly);
        }
        self.nodes[n].kswapd_short_sleep_until = 0;
        self.try_to_wake_up_kswapd(m, n, waker, self.now);
    }

    /// try_to_wake_up for kswapd at `t`, woken from CPU `waker`: select_kswapd_cpu places it,
    /// and its next balance_pgdat step runs there.
    fn try_to_wake_up_kswapd(&mut self, m: &mut Machine, n: usize, waker: usize, t: u64) {
        let (c, recent) = self.select_kswapd_cpu(m, n, waker);
        let node = &mut self.nodes[n];
        (node.kswapd_prev_cpu, node.kswapd_recent_cpu) = (Some(c as u32), recent);
        node.kswapd_awake = true;
        node.kswapd_waiting = true;
        self.schedule(t, Event::KswapdRun(n as u8));
    }

    /// available_idle_cpu at `t`: no thread runnable on CPU `c` (none there, or its thread
    /// sleeps until a timer, as a paced thread does) and no other node's kswapd running there.
    pub(crate) fn cpu_idle_at(&self, m: &Machine, c: usize, t: u64) -> bool {
        let rq = &self.sched.rq[c];
        let thread_idle = rq.queue.is_empty() && (rq.current == NIL || m.cpus[c].idle_at(t));
        thread_idle
            && !self
                .nodes
                .iter()
                .any(|p| p.kswapd_awake && p.kswapd_prev_cpu == Some(c as u32))
    }

    /// select_task_rq_fair → select_idle_sibling for kswapd (asleep) woken from CPU `waker`:
    /// its previous CPU if idle (wake_affine_idle keeps it, the waker's CPU being busy), else
    /// its recently used CPU if idle, else the first idle CPU after the previous one
    /// (select_idle_cpu's for_each_cpu_wrap from target + 1), else the previous CPU after all.
    /// Only the node's CPUs are allowed (kswapd's set_cpus_allowed_ptr), any CPU for a
    /// memory-only node. Returns the CPU and the new p->recent_used_cpu.
    fn select_kswapd_cpu(&self, m: &Machine, n: usize, waker: usize) -> (usize, Option<u32>) {
        let ncpus = m.cpus.len();
        let t = m.cpus[waker].clock;
        let node = &self.nodes[n];
        let allowed = |c: usize| node.cpus.is_empty() || node.cpus.contains(&(c as u32));
        let prev = node.kswapd_prev_cpu.map(|p| p as usize);
        let Some(prev) = prev.filter(|&p| p < ncpus && allowed(p)) else {
            return (self.kswapd_fallback_cpu(m, n), node.kswapd_recent_cpu);
        };
        let idle = |c: usize| allowed(c) && self.cpu_idle_at(m, c, t);
        if idle(prev) {
            return (prev, node.kswapd_recent_cpu);
        }
        let recent = node.kswapd_recent_cpu.map(|r| r as usize);
        let c = recent
            .filter(|&r| r != prev && r < ncpus && idle(r))
            .or_else(|| (1..ncpus).map(|i| (prev + i) % ncpus).find(|&c| idle(c)))
            .unwrap_or(prev);
        (c, Some(prev as u32))
    }

    /// The busy CPU `c` takes its tick at `t` with its thread running and node kswapd
    /// waiting there (nr_running 2): nohz_balancer_kick kicks the first idle CPU
    /// (find_new_ilb), whose _nohz_idle_balance balances the other idle CPUs from the next
    /// one on and itself last, and the first allowed to run kswapd pulls it
    /// (sched_balance_rq → detach_tasks takes the least recently run task, kswapd, which has
    /// not run since its wake-up).
    pub(crate) fn nohz_idle_pull_kswapd(&mut self, m: &Machine, c: usize, t: u64) {
        for n in 0..self.nodes.len() {
            if let Some(dst) = self.idle_puller(m, n, c, t) {
                self.nodes[n].kswapd_prev_cpu = Some(dst as u32);
            }
        }
    }

    /// The idle CPU that pulls node `n`'s kswapd waiting on CPU `c` (nohz_idle_pull_kswapd).
    fn idle_puller(&self, m: &Machine, n: usize, c: usize, t: u64) -> Option<usize> {
        let node = &self.nodes[n];
        // Only a kswapd that has not run since its wake-up waits here: one that has is the
        // running task (kswapd's steps run before the CPU's thread), which can_migrate_task
        // refuses (task_on_cpu).
        if !node.kswapd_awake || !node.kswapd_waiting || node.kswapd_prev_cpu != Some(c as u32) {
            return None;
        }
        let ncpus = m.cpus.len();
        let idle = |i: usize| i != c && self.cpu_idle_at(m, i, t);
        let ilb = (0..ncpus).find(|&i| idle(i))?;
        let allowed = |i: usize| node.cpus.is_empty() || node.cpus.contains(&(i as u32));
        let mut order = (1..=ncpus).map(|k| (ilb + k) % ncpus);
        order.find(|&i| idle(i) && allowed(i))
    }

    /// The CPU kswapd of node `n` runs on: where its wake-up placed it.
    pub(crate) fn kswapd_cpu(&self, m: &Machine, n: usize) -> usize {
        match self.nodes[n].kswapd_prev_cpu {
            Some(c) if (c as usize) < m.cpus.len() => c as usize,
            _ => self.kswapd_fallback_cpu(m, n),
        }
    }

    /// Where kswapd goes before it has run anywhere: a node CPU with no thread if any, else
    /// the one furthest behind; any CPU for a memory-only node.
    fn kswapd_fallback_cpu(&self, m: &Machine, n: usize) -> usize {
        let all: Vec<u32>;
        let cands: &[u32] = if self.nodes[n].cpus.is_empty() {
            all = (0..m.cpus.len() as u32).collect();
            &all
        } else {
            &self.nodes[n].cpus
        };
        let key = |c: &&u32| {
            let c = **c;
            (
                self.sched.rq[c as usize].busy(),
                // Under vcpu_turns the CPUs' clocks lag by their turns, not their load.
                if m.vcpu_turns {
                    0
                } else {
                    m.cpus[c as usize].clock
                },
                c,
            )
        };
        *cands.iter().min_by_key(key).expect("a CPU") as usize
    }

    /// kswapd, one SWAP_CLUSTER_MAX step of balance_pgdat per event: each step's work is
    /// charged to kswapd's CPU and the next step is scheduled at that CPU's clock, so its TLB
    /// flushes reach the other CPUs spread over time as they would on a real machine. As in
    /// balance_pgdat, the node is checked for balance only at the top of each priority
    /// iteration, and each iteration (kswapd_shrink_node) aims at max(high, SWAP_CLUSTER_MAX).
    pub fn kswapd_run(&mut self, m: &mut Machine, n: usize, t: u64) {
        let c = self.kswapd_cpu(m, n);
        self.nodes[n].kswapd_prev_cpu = Some(c as u32);
        self.nodes[n].kswapd_waiting = false;
        if !self.sched.rq[c].busy() {
            m.cpus[c].idle_until(t);
        }
        // A thread that sleeps until a later timer leaves the CPU to kswapd meanwhile (under
        // vcpu_turns, run_turn has done this for the whole turn).
        let sleeper_wakes = if m.vcpu_turns {
            None
        } else {
            m.cpus[c].interrupt_idle(t)
        };
        self.kswapd_step(m, n, c);
        if let Some(wake) = sleeper_wakes {
            m.cpus[c].idle_until(wake);
        }
    }

    /// One step of kswapd's balance_pgdat on CPU `c` (kswapd_run).
    fn kswapd_step(&mut self, m: &mut Machine, n: usize, c: usize) {
        self.set_share(m, c);
        if self.lru_gen_on(n) {
            // balance_pgdat → kswapd_age_node / shrink_node branch to lru_gen
            self.lru_gen_kswapd_run(m, n, c);
            return;
        }
        if !self.nodes[n].kswapd_pass.active {
            if self.pgdat_balanced(n) {
                // Balanced at the top of the first iteration: out.
                self.kswapd_try_to_sleep(m, n, c);
                return;
            }
            // balance_pgdat starts at DEF_PRIORITY.
            self.vm.inc(Vm::PageOutRun);
            self.nodes[n].zone.reclaim_active = true;
            self.kswapd_age_node(m, n, c);
            let nr_to_reclaim = self.kswapd_nr_to_reclaim(n);
            self.nodes[n].kswapd_pass =
                self.start_shrink(n, DEF_PRIORITY, nr_to_reclaim, Reclaimer::Kswapd);
        }
        let mut pass = self.nodes[n].kswapd_pass.clone();
        self.shrink_step(m, n, c, &mut pass, Reclaimer::Kswapd);
        if pass.more() {
            self.nodes[n].kswapd_pass = pass;
            let at = m.cpus[c].clock;
            self.schedule(at, Event::KswapdRun(n as u8));
            return;
        }
        self.finish_shrink(m, n, c);
        // The bottom of the priority loop: raise the priority (scan harder) unless enough was
        // scanned (or reclaimed) to meet the high watermark at 100 % efficiency and something
        // was reclaimed (kswapd_shrink_node).
        let raise = pass.scanned.max(pass.reclaimed) < pass.nr_to_reclaim;
        let priority = if raise || pass.reclaimed == 0 {
            pass.priority - 1
        } else {
            pass.priority
        };
        // The top of the loop: stop once balanced or out of priorities.
        let balanced = self.pgdat_balanced(n);
        if priority >= 1 && !balanced {
            let total = pass.total;
            self.kswapd_age_node(m, n, c);
            let nr_to_reclaim = self.kswapd_nr_to_reclaim(n);
            let mut next = self.start_shrink(n, priority, nr_to_reclaim, Reclaimer::Kswapd);
            next.total = total;
            self.nodes[n].kswapd_pass = next;
            let at = m.cpus[c].clock;
            self.schedule(at, Event::KswapdRun(n as u8));
            return;
        }
        // out: the end of this balance_pgdat run.
        self.nodes[n].zone.reclaim_active = false;
        if pass.total == 0 {
            self.nodes[n].kswapd_failures += 1;
        } else {
            self.nodes[n].kswapd_failures = 0;
        }
        self.nodes[n].kswapd_pass.active = false;
        self.kswapd_try_to_sleep(m, n, c);
    }

    /// prepare_kswapd_sleep: kswapd may sleep once the node is balanced, or hopeless.
    fn prepare_kswapd_sleep(&self, n: usize) -> bool {
        self.nodes[n].kswapd_failures >= MAX_RECLAIM_RETRIES || self.pgdat_balanced(n)
    }

    /// kswapd_try_to_sleep, after a balance_pgdat run: if the node is balanced now, a short
    /// sleep (schedule_timeout(HZ/10), which a wakeup_kswapd ends early), then the full sleep
    /// if it still is (kswapd_sleep_timeout); if not, balance_pgdat again at once.
    pub fn kswapd_try_to_sleep(&mut self, m: &mut Machine, n: usize, c: usize) {
        if self.prepare_kswapd_sleep(n) {
            self.nodes[n].kswapd_awake = false;
            let until = m.cpus[c].clock + m.ns_to_cycles(KSWAPD_SHORT_SLEEP_NS);
            self.nodes[n].kswapd_short_sleep_until = until;
            self.schedule(until, Event::KswapdSleepTimeout(n as u8));
            return;
        }
        self.vm.inc(Vm::KswapdHighWmarkHitQuickly);
        let at = m.cpus[c].clock;
        self.schedule(at, Event::KswapdRun(n as u8));
    }

    /// The end of kswapd's short sleep at `t`, unless a wake-up ended it first: asleep until
    /// woken if the node is still balanced, else back to balance_pgdat
    /// (KSWAPD_HIGH_WMARK_HIT_QUICKLY), on the CPU its timer's wake-up picks.
    pub fn kswapd_sleep_timeout(&mut self, m: &mut Machine, n: usize, t: u64) {
        let node = &self.nodes[n];
        if node.kswapd_awake || node.kswapd_short_sleep_until != t {
            return;
        }
        self.nodes[n].kswapd_short_sleep_until = 0;
        if self.prepare_kswapd_sleep(n) {
            return;
        }
        self.vm.inc(Vm::KswapdHighWmarkHitQuickly);
        // Its own timer wakes it, on the CPU it slept on.
        let prev = self.kswapd_cpu(m, n);
        self.try_to_wake_up_kswapd(m, n, prev, t);
    }

    /// kswapd_shrink_node's target: max(high_wmark_pages, SWAP_CLUSTER_MAX) summed over the
    /// node's zones (the one zone's whole-node mark here).
    pub(crate) fn kswapd_nr_to_reclaim(&self, n: usize) -> u64 {
        self.nodes[n].zone.wmark.high.max(SWAP_CLUSTER_MAX)
    }

    /// try_to_free_pages → do_try_to_free_pages: direct reclaim by the allocating CPU.
    pub fn try_to_free_pages(&mut self, m: &mut Machine, c: usize, preferred: usize) -> u64 {
        if self.lru_gen_on(preferred) {
            // shrink_node → lru_gen_shrink_node
            return self.lru_gen_try_to_free_pages(m, c, preferred);
        }
        let zonelist = self.nodes[preferred].zonelist.clone();
        let mut reclaimed = 0;
        for priority in (0..=DEF_PRIORITY).rev() {
            for &n in &zonelist {
                reclaimed += self.shrink_node(
                    m,
                    n as usize,
                    c,
                    priority,
                    Reclaimer::Direct,
                    SWAP_CLUSTER_MAX,
                );
                if reclaimed >= SWAP_CLUSTER_MAX {
                    return reclaimed;
                }
            }
        }
        reclaimed
    }

    /// inactive_is_low: inactive * int_sqrt(10 * size_in_GB) < active.
    pub fn inactive_is_low(&self, n: usize, inactive_lru: usize) -> bool {
        let inactive = self.nodes[n].lru_size(inactive_lru);
        let active = self.nodes[n].lru_size(inactive_lru + 1);
        let gb = (inactive + active) >> (30 - 12);
        let ratio = if gb > 0 { int_sqrt(10 * gb) } else { 1 };
        inactive * ratio < active
    }

    /// prepare_scan_control: the list ratios and the anon/file balance inputs of one
    /// shrink_node call. No refaults are modelled (no workingset shadow entries), so
    /// may_deactivate follows inactive_is_low alone.
    pub fn prepare_scan_control(&self, n: usize, priority: u32) -> ScanPrep {
        let node = &self.nodes[n];
        let may_deactivate = [
            self.inactive_is_low(n, LRU_INACTIVE_ANON),
            self.inactive_is_low(n, LRU_INACTIVE_FILE),
        ];
        // Plenty of inactive page cache that isn't thrashing: reclaim it before anon.
        let cache_trim_mode =
            node.lru_size(LRU_INACTIVE_FILE) >> priority > 0 && !may_deactivate[1];
        // The cache trap: file pages nearly gone, while anon is not low too. Free pages and
        // high watermarks are summed over the node's zones: the lower zones' free pages
        // count, and the one zone's high watermark is the whole node's.
        let file = node.lru_size(LRU_INACTIVE_FILE) + node.lru_size(LRU_ACTIVE_FILE);
        let free = node.zone.nr_free + node.lower_free.len() as u64;
        let total_high_wmark = node.zone.wmark.high;
        let file_is_tiny = file + free <= total_high_wmark
            && !may_deactivate[0]
            && node.lru_size(LRU_INACTIVE_ANON) >> priority > 0;
        ScanPrep {
            may_deactivate,
            cache_trim_mode,
            file_is_tiny,
        }
    }

    /// get_scan_count: how many pages of each LRU list to scan at this priority. SCAN_FILE
    /// when anon cannot be reclaimed (no swap slot, no demotion target); SCAN_EQUAL at
    /// priority 0; SCAN_ANON when file is tiny; SCAN_FILE in cache trim mode; otherwise
    /// SCAN_FRACT by swappiness, weighted by each type's recent reclaim cost.
    pub fn get_scan_count(&self, n: usize, priority: u32, prep: &ScanPrep) -> [u64; 4] {
        let node = &self.nodes[n];
        let swappiness = self.cfg.vm.swappiness as u64;
        let balance = if !self.can_reclaim_anon_pages(n) {
            ScanBalance::File
        } else if priority == 0 && swappiness != 0 {
            ScanBalance::Equal
        } else if prep.file_is_tiny {
            ScanBalance::Anon
        } else if prep.cache_trim_mode {
            ScanBalance::File
        } else {
            ScanBalance::Fract
        };
        // At least a third of the pressure goes to each type, before swappiness.
        let total_cost = node.anon_cost + node.file_cost;
        let anon_cost = total_cost + node.anon_cost;
        let file_cost = total_cost + node.file_cost;
        let total_cost = anon_cost + file_cost;
        let ap = swappiness * (total_cost + 1) / (anon_cost + 1);
        let fp = (MAX_SWAPPINESS - swappiness) * (total_cost + 1) / (file_cost + 1);
        let mut nr = [0; 4];
        for (lru, scan) in nr.iter_mut().enumerate() {
            let file = lru >= LRU_INACTIVE_FILE;
            let size = node.lru_size(lru) >> priority;
            *scan = match balance {
                ScanBalance::Equal => size,
                ScanBalance::Fract => size * if file { fp } else { ap } / (ap + fp),
                ScanBalance::Anon if file => 0,
                ScanBalance::File if !file => 0,
                ScanBalance::Anon | ScanBalance::File => size,
            };
        }
        nr
    }

    /// shrink_node → shrink_lruvec: scan the lists in SWAP_CLUSTER_MAX chunks.
    pub fn shrink_node(
        &mut self,
        m: &mut Machine,
        n: usize,
        c: usize,
        priority: u32,
        who: Reclaimer,
        nr_to_reclaim: u64,
    ) -> u64 {
        let mut pass = self.start_shrink(n, priority, nr_to_reclaim, who);
        while pass.more() {
            self.shrink_step(m, n, c, &mut pass, who);
        }
        self.finish_shrink(m, n, c);
        pass.reclaimed
    }

    /// The scan targets of one shrink_lruvec pass (prepare_scan_control, get_scan_count).
    /// Direct reclaim at DEF_PRIORITY scans its whole target (proportional_reclaim).
    pub fn start_shrink(
        &self,
        n: usize,
        priority: u32,
        nr_to_reclaim: u64,
        who: Reclaimer,
    ) -> ShrinkPass {
        let prep = self.prepare_scan_control(n, priority);
        let nr = self.get_scan_count(n, priority, &prep);
        ShrinkPass {
            active: true,
            priority,
            nr,
            targets: nr,
            may_deactivate: prep.may_deactivate,
            proportional: who == Reclaimer::Direct && priority == DEF_PRIORITY,
            reclaimed: 0,
            total: 0,
            scanned: 0,
            nr_to_reclaim,
        }
    }

    /// One iteration of shrink_lruvec's loop: up to SWAP_CLUSTER_MAX pages from each list;
    /// once nr_to_reclaim is met, stop the smaller type and cut the other to the share of
    /// its target the smaller one had left.
    pub fn shrink_step(
        &mut self,
        m: &mut Machine,
        n: usize,
        c: usize,
        pass: &mut ShrinkPass,
        who: Reclaimer,
    ) {
        for lru in 0..4 {
            if pass.nr[lru] == 0 {
                continue;
            }
            let scan = pass.nr[lru].min(SWAP_CLUSTER_MAX);
            pass.nr[lru] -= scan;
            if lru % 2 == 1 {
                if pass.may_deactivate[lru / 2] {
                    self.shrink_active_list(m, n, c, scan, lru);
                }
            } else {
                let before = self.nodes[n].lru_size(lru);
                let got = self.shrink_inactive_list(m, n, c, scan, lru, who);
                pass.scanned += scan.min(before);
                pass.reclaimed += got;
                pass.total += got;
            }
        }
        if pass.reclaimed < pass.nr_to_reclaim || pass.proportional {
            return;
        }
        let nr_file = pass.nr[LRU_INACTIVE_FILE] + pass.nr[LRU_ACTIVE_FILE];
        let nr_anon = pass.nr[LRU_INACTIVE_ANON] + pass.nr[LRU_ACTIVE_ANON];
        if nr_file == 0 || nr_anon == 0 {
            pass.nr = [0; 4];
            return;
        }
        let t = pass.targets;
        let (stop, other, percentage) = if nr_file > nr_anon {
            let target = t[LRU_INACTIVE_ANON] + t[LRU_ACTIVE_ANON] + 1;
            (LRU_INACTIVE_ANON, LRU_INACTIVE_FILE, nr_anon * 100 / target)
        } else {
            let target = t[LRU_INACTIVE_FILE] + t[LRU_ACTIVE_FILE] + 1;
            (LRU_INACTIVE_FILE, LRU_INACTIVE_ANON, nr_file * 100 / target)
        };
        pass.nr[stop] = 0;
        pass.nr[stop + 1] = 0;
        for lru in [other, other + 1] {
            let scanned = t[lru] - pass.nr[lru];
            let left = t[lru] * (100 - percentage) / 100;
            pass.nr[lru] = left - left.min(scanned);
        }
    }

    /// The end of shrink_lruvec: rebalance the anon active/inactive ratio even if no anon
    /// was scanned, as kswapd_age_node does.
    fn finish_shrink(&mut self, m: &mut Machine, n: usize, c: usize) {
        self.kswapd_age_node(m, n, c);
        // shrink_slab after shrink_lruvec: the deferred split queue's shrinker.
        self.deferred_split_scan(m, c, n);
    }

    /// kswapd_age_node: background aging of the anon lists (at the top of each priority, and
    /// shrink_lruvec's end runs the same test).
    fn kswapd_age_node(&mut self, m: &mut Machine, n: usize, c: usize) {
        if self.can_age_anon_pages(n) && self.inactive_is_low(n, LRU_INACTIVE_ANON) {
            self.shrink_active_list(m, n, c, SWAP_CLUSTER_MAX, LRU_ACTIVE_ANON);
        }
    }

    /// can_age_anon_pages: a swap device (full or not), or a demotion target.
    fn can_age_anon_pages(&self, n: usize) -> bool {
        self.swap.total_pages() > 0 || self.can_demote(n)
    }

    /// isolate_lru_folios from the tail of `lru`, `nr` pages' worth: a THP counts its 512
    /// pages and is taken whole (its other frames from wherever they sit on the LRU), named
    /// by its head. Returns the folios and the pages scanned.
    fn isolate_lru_folios(&mut self, n: usize, nr: u64, lru: usize) -> (Vec<u32>, u64) {
        let mut out = Vec::with_capacity(nr.min(SWAP_CLUSTER_MAX) as usize);
        let mut scanned = 0;
        while scanned < nr {
            let node = &mut self.nodes[n];
            let Some(pfn) = self.frames.list_pop_tail(&mut node.lru[lru]) else {
                break;
            };
            let p = self.frames.get_mut(pfn);
            p.flags = (p.flags & !pg::LRU) | pg::ISOLATED;
            node.nr_isolated += 1;
            let (folio, nr) = self.isolate_rest_of_thp(pfn);
            out.push(folio);
            scanned += nr;
        }
        (out, scanned)
    }

    /// folio_isolate_lru: take a folio off its LRU for migration.
    pub fn folio_isolate_lru(&mut self, pfn: u32) -> bool {
        let p = *self.frames.get(pfn);
        if !p.has(pg::LRU) {
            return false;
        }
        if self.lru_gen_on(p.node as usize) {
            // lruvec_del_folio → lru_gen_del_folio(reclaiming = false)
            self.lru_gen_del_folio(pfn, false);
            self.nodes[p.node as usize].nr_isolated += 1;
            let f = self.frames.get_mut(pfn);
            f.flags = (f.flags & !pg::LRU) | pg::ISOLATED;
            return true;
        }
        let node = &mut self.nodes[p.node as usize];
        let lru = lru_index(p.has(pg::SWAPBACKED), p.has(pg::ACTIVE));
        self.frames.list_del(&mut node.lru[lru], pfn);
        node.nr_isolated += 1;
        let f = self.frames.get_mut(pfn);
        f.flags = (f.flags & !pg::LRU) | pg::ISOLATED;
        true
    }

    /// putback: an isolated folio returns to the head of the list its flags name; a THP's
    /// frames all take its head's LRU flags (one folio, one set of flags).
    pub fn putback_folio(&mut self, pfn: u32) {
        if self.thp_head(pfn) == Some(pfn) {
            const FOLIO: u16 = pg::ACTIVE | pg::REFERENCED | pg::WORKINGSET;
            let keep = self.frames.get(pfn).flags & FOLIO;
            for f in pfn + 1..pfn + HPAGE_PMD_NR {
                let p = self.frames.get_mut(f);
                p.flags = (p.flags & !FOLIO) | keep;
                self.putback_one(f);
            }
        }
        self.putback_one(pfn);
    }

    fn putback_one(&mut self, pfn: u32) {
        let p = self.frames.get_mut(pfn);
        p.flags = (p.flags & !pg::ISOLATED) | pg::LRU;
        let n = p.node as usize;
        if self.lru_gen_on(n) {
            // folio_putback_lru → lruvec_add_folio → lru_gen_add_folio
            self.nodes[n].nr_isolated -= 1;
            self.lru_gen_add_folio(pfn, false);
            return;
        }
        let p = self.frames.get(pfn);
        let lru = lru_index(p.has(pg::SWAPBACKED), p.has(pg::ACTIVE));
        let node = &mut self.nodes[p.node as usize];
        node.nr_isolated -= 1;
        self.frames.list_add(&mut node.lru[lru], pfn);
    }

    /// shrink_active_list: deactivate, except referenced executable file folios.
    pub fn shrink_active_list(&mut self, m: &mut Machine, n: usize, c: usize, nr: u64, lru: usize) {
        let (list, scanned) = self.isolate_lru_folios(n, nr, lru);
        self.vm.add(Vm::PgRefill, scanned);
        m.charge_sys(c, m.cost.reclaim_scan_cycles as u64 * list.len() as u64);
        let mut nr_rotated = 0;
        for pfn in list {
            let (referenced, exec) = self.folio_referenced(m, c, pfn);
            let file = !self.frames.get(pfn).has(pg::SWAPBACKED);
            if referenced > 0 && exec && file {
                nr_rotated += 1;
                self.putback_folio(pfn);
                continue;
            }
            let p = self.frames.get_mut(pfn);
            p.flags = (p.flags & !pg::ACTIVE) | pg::WORKINGSET;
            self.vm.inc(Vm::PgDeactivate);
            self.putback_folio(pfn);
        }
        if nr_rotated > 0 {
            self.lru_note_cost(n, lru == LRU_ACTIVE_FILE, 0, nr_rotated);
        }
    }

    /// shrink_inactive_list: isolate, count the scan, shrink_folio_list.
    pub fn shrink_inactive_list(
        &mut self,
        m: &mut Machine,
        n: usize,
        c: usize,
        nr: u64,
        lru: usize,
        who: Reclaimer,
    ) -> u64 {
        let (list, scanned) = self.isolate_lru_folios(n, nr, lru);
        self.vm.add(
            if who == Reclaimer::Kswapd {
                Vm::PgScanKswapd
            } else {
                Vm::PgScanDirect
            },
            scanned,
        );
        self.vm.add(
            if lru == LRU_INACTIVE_FILE {
                Vm::PgScanFile
            } else {
                Vm::PgScanAnon
            },
            scanned,
        );
        m.charge_sys(c, m.cost.reclaim_scan_cycles as u64 * list.len() as u64);
        // stat.nr_pageout: the folios shrink_folio_list wrote out.
        let written = self.vm.get(Vm::Pswpout);
        let reclaimed = self.shrink_folio_list(m, c, list, who, false);
        let nr_pageout = self.vm.get(Vm::Pswpout) - written;
        self.lru_note_cost(n, lru == LRU_INACTIVE_FILE, nr_pageout, scanned - reclaimed);
        reclaimed
    }

    /// folio_check_references (mm/vmscan.c).
    pub fn folio_check_references(&mut self, m: &mut Machine, c: usize, pfn: u32) -> FolioRef {
        let (referenced_ptes, exec) = self.folio_referenced(m, c, pfn);
        let p = self.frames.get_mut(pfn);
        let referenced_folio = p.has(pg::REFERENCED);
        p.flags &= !pg::REFERENCED;
        let file = !p.has(pg::SWAPBACKED);
        if referenced_ptes > 0 {
            p.flags |= pg::REFERENCED;
            if referenced_folio || referenced_ptes > 1 || (exec && file) {
                return FolioRef::Activate;
            }
            return FolioRef::Keep;
        }
        if referenced_folio && file {
            return FolioRef::ReclaimClean;
        }
        FolioRef::Reclaim
    }

    /// shrink_folio_list: decide each folio's fate; demote what can be demoted; unmap the rest
    /// with a batched flush; flush before freeing; put back what stays.
    /// `reclaim_pages` (MADV_PAGEOUT) passes `pageout`: no demotion, references ignored.
    pub fn shrink_folio_list(
        &mut self,
        m: &mut Machine,
        c: usize,
        list: Vec<u32>,
        who: Reclaimer,
        pageout: bool,
    ) -> u64 {
        let (reclaimed, keep) = self.shrink_folio_list_keep(m, c, list, who, pageout);
        for pfn in keep {
            self.putback_folio(pfn);
        }
        reclaimed
    }

    /// shrink_folio_list up to the putback: returns (reclaimed, the folios it kept, still
    /// isolated), so that evict_folios can sort them itself.
    pub(crate) fn shrink_folio_list_keep(
        &mut self,
        m: &mut Machine,
        c: usize,
        list: Vec<u32>,
        who: Reclaimer,
        pageout: bool,
    ) -> (u64, Vec<u32>) {
        let Some(&first) = list.first() else {
            return (0, Vec::new());
        };
        let n = self.frames.get(first).node as usize;
        let mut to_free = Vec::new();
        let mut keep = Vec::new();
        let mut demote = Vec::new();
        let mut do_demote_pass = self.can_demote(n) && !pageout;
        // A THP is demoted whole; one reclaim would swap or drop is split first (tierlab
        // swaps 4 KiB folios only: the kernel's THP_SWPOUT fallback).
        let mut pending = if do_demote_pass {
            list
        } else {
            self.split_thps_in_list(m, c, list)
        };
        let mut nr_demoted = 0;
        // folio_update_gen() tried to promote this page? (MGLRU, 6.12: a walk or a
        // look-around found it young while it was isolated.) Not for MADV_PAGEOUT.
        let keep_referenced = self.lru_gen_on(n) && !pageout;
        loop {
            for pfn in pending {
                let p = self.frames.get(pfn);
                if keep_referenced && p.mapcount > 0 && p.has(pg::REFERENCED) {
                    keep.push(pfn);
                    continue;
                }
                let verdict = if pageout {
                    FolioRef::Reclaim
                } else {
                    self.folio_check_references(m, c, pfn)
                };
                let page = *self.frames.get(pfn);
                let swap_backed = page.has(pg::SWAPBACKED);
                match verdict {
                    FolioRef::Activate => {
                        self.frames.get_mut(pfn).flags |= pg::ACTIVE;
                        self.vm.inc(Vm::PgActivate);
                        keep.push(pfn);
                    }
                    FolioRef::Keep => keep.push(pfn),
                    FolioRef::Reclaim | FolioRef::ReclaimClean => {
                        if do_demote_pass {
                            // Dirty and clean alike, still mapped: migration unmaps them.
                            demote.push(pfn);
                            continue;
                        }
                        if swap_backed {
                            let outcome = if page.is_shmem() {
                                self.reclaim_shmem(m, c, pfn)
                            } else {
                                // anon, or a swap-cache folio no one maps (readahead, or
                                // shmem written out)
                                self.reclaim_anon(m, c, pfn)
                            };
                            match outcome {
                                AnonReclaim::Free => to_free.push(pfn),
                                AnonReclaim::Keep => keep.push(pfn),
                                AnonReclaim::NoSwap => {
                                    // Without a free slot the folio is activated.
                                    self.frames.get_mut(pfn).flags |= pg::ACTIVE;
                                    self.vm.inc(Vm::PgActivate);
                                    if pageout {
                                        self.pageout_kept_no_swap += 1;
                                    }
                                    keep.push(pfn);
                                }
                            }
                            continue;
                        }
                        if self.frames.get(pfn).mapcount > 0 && !self.try_to_unmap(m, c, pfn, None)
                        {
                            keep.push(pfn);
                            continue;
                        }
                        if self.frames.get(pfn).has(pg::DIRTY) {
                            // Dirty page cache goes to the flusher threads; it is reclaimable
                            // once clean (the write-back I/O is not modelled).
                            self.frames.get_mut(pfn).flags &= !pg::DIRTY;
                            keep.push(pfn);
                            continue;
                        }
                        to_free.push(pfn);
                    }
                }
            }
            if demote.is_empty() {
                break;
            }
            let (moved, failed) = self.demote_folio_list(m, c, n, std::mem::take(&mut demote), who);
            nr_demoted += moved;
            if failed.is_empty() {
                break;
            }
            // Demotion failed for some: retry them with normal reclaim.
            do_demote_pass = false;
            pending = self.split_thps_in_list(m, c, failed);
        }
        // try_to_unmap_flush before any unmapped frame goes back to the allocator.
        self.try_to_unmap_flush(m, c);
        let freed = to_free.len() as u64;
        let swapped = to_free
            .iter()
            .filter(|&&p| self.frames.get(p).has(pg::SWAPBACKED))
            .count() as u64;
        for pfn in to_free {
            if self.lru_gen_on(n) {
                // __remove_mapping → workingset_eviction → lru_gen_eviction
                self.lru_gen_eviction(pfn);
            }
            let page = self.frames.get(pfn);
            if !page.has(pg::ANON) && page.owner != NIL {
                self.remove_mapping(pfn);
            }
            self.lru_del_and_uncharge(pfn);
            m.charge_sys(c, m.cost.reclaim_free_cycles as u64);
            self.free_frame(m, c, pfn);
        }
        let steal = if who == Reclaimer::Kswapd {
            Vm::PgStealKswapd
        } else {
            Vm::PgStealDirect
        };
        self.vm.add(steal, freed + nr_demoted);
        self.vm.add(Vm::PgStealFile, freed - swapped);
        self.vm.add(Vm::PgStealAnon, swapped);
        (freed + nr_demoted, keep)
    }

    /// demote_folio_list: migrate to next_demotion_node, falling back to the other lower-tier
    /// nodes; no direct reclaim on the target. Returns (demoted, failed).
    fn demote_folio_list(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        folios: Vec<u32>,
        who: Reclaimer,
    ) -> (u64, Vec<u32>) {
        let Some(target) = self.tiers.next_demotion_node(n, &mut self.rng) else {
            return (0, folios);
        };
        let allowed = self.tiers.lower_tier_mask[n].clone();
        // migrate_pages moves a THP whole; one it cannot place is split and its pages join
        // the 4 KiB batch (THP_MIGRATION_SPLIT).
        let mut small = Vec::with_capacity(folios.len());
        let mut thp_moved = 0u64;
        for pfn in folios {
            if self.thp_head(pfn) != Some(pfn) {
                small.push(pfn);
                continue;
            }
            let dst = MigrateTarget::Demote {
                target,
                allowed: allowed.clone(),
            };
            if self.migrate_thp(m, c, pfn, &dst) {
                thp_moved += HPAGE_PMD_NR as u64;
                continue;
            }
            self.vm.inc(Vm::ThpMigrationSplit);
            self.split_huge_page(m, c, pfn);
            small.extend(pfn..pfn + HPAGE_PMD_NR);
        }
        let demoted = if who == Reclaimer::Kswapd {
            Vm::PgDemoteKswapd
        } else {
            Vm::PgDemoteDirect
        };
        self.vm.add(demoted, thp_moved);
        self.vm.add(Vm::PgStealAnon, thp_moved);
        self.vm.add(Vm::PgDemoteAnon, thp_moved);
        self.nodes[n].nr_demoted += thp_moved;
        let folios = small;
        let anon: Vec<bool> = folios
            .iter()
            .map(|&p| self.frames.get(p).has(pg::SWAPBACKED))
            .collect();
        let first_pfns = folios.clone();
        let (moved, failed) = self.migrate_pages(
            m,
            c,
            folios,
            &MigrateTarget::Demote { target, allowed },
            MigrateMode::Async,
        );
        // pgsteal_anon/file for the demoted folios (nr_reclaimed includes them).
        let anon_flags = anon.clone();
        for (pfn, a) in first_pfns.iter().zip(anon) {
            if !failed.contains(pfn) {
                self.vm
                    .inc(if a { Vm::PgStealAnon } else { Vm::PgStealFile });
            }
        }
        self.vm.add(
            if who == Reclaimer::Kswapd {
                Vm::PgDemoteKswapd
            } else {
                Vm::PgDemoteDirect
            },
            moved,
        );
        self.nodes[n].nr_demoted += moved;
        for (pfn, a) in first_pfns.iter().zip(anon_flags) {
            if !failed.contains(pfn) {
                self.vm.inc(if a {
                    Vm::PgDemoteAnon
                } else {
                    Vm::PgDemoteFile
                });
            }
        }
        (moved + thp_moved, failed)
    }

    /// __remove_mapping: drop a clean, unmapped folio from the page cache.
    fn remove_mapping(&mut self, pfn: u32) {
        let p = *self.frames.get(pfn);
        let f = &mut self.files[p.owner as usize];
        f.pages[p.index as usize] = NIL;
        f.nr_cached -= 1;
    }
}
