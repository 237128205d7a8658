//! What a task learns from its NUMA hint faults (kernel/sched/fair.c): `task_numa_fault` →
//! `task_numa_placement` (once per `mm->numa_scan_seq`, gated by `numa_migrate_retry`) →
//! `update_task_scan_period`. In memory-tiering mode only successful promotions are counted
//! (faults on slow-tier memory return early); they are private (the folio's cpupid holds a
//! scan time, so `last_cpupid` is -1) and remote (the folio was on another node), so
//! `local + shared == 0` and every placement doubles the task's scan period up to
//! `task_scan_max` and pushes `mm->numa_next_scan`: the scan slows down after promotions.
//! Task migration to the preferred node (`numa_migrate_preferred`'s `task_numa_migrate`) is
//! not modelled: tierlab's threads stay on the CPUs their placement gives them.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::page::NIL;
use crate::mm::pgtable::PAGE_SHIFT;

/// CONFIG_HZ of Debian's 6.12 amd64 kernel (CONFIG_HZ_250): one jiffy is 4 ms.
pub const HZ: u64 = 250;
/// NUMA_PERIOD_SLOTS and NUMA_PERIOD_THRESHOLD (fair.c).
const NUMA_PERIOD_SLOTS: u64 = 10;
const NUMA_PERIOD_THRESHOLD: u64 = 7;

/// The NUMA-balancing fields of task_struct this model needs.
#[derive(Clone, Debug, Default)]
pub struct TaskNuma {
    /// p->numa_scan_seq: the mm's sequence at the last placement.
    pub scan_seq: u32,
    /// p->numa_migrate_retry, in ms (jiffies granularity).
    pub migrate_retry_ms: u64,
    /// p->numa_preferred_nid (NIL: NUMA_NO_NODE).
    pub preferred_nid: u32,
    /// p->numa_faults != NULL: the first counted fault allocates the statistics.
    pub has_faults: bool,
    /// Decayed fault total (sum of p->numa_faults[NUMA_MEM]) and faults since the last
    /// placement (NUMA_MEMBUF), private and shared.
    pub faults_mem: u64,
    pub faults_buf: [u64; 2],
    /// p->numa_faults_locality: [remote, local, migration failures].
    pub locality: [u64; 3],
}

impl TaskNuma {
    pub fn new() -> TaskNuma {
        TaskNuma {
            preferred_nid: NIL,
            ..Default::default()
        }
    }
}

impl Kernel {
    /// task_scan_max (no numa_group): max(task_scan_min, scan_period_max / windows) ms.
    pub fn task_scan_max_ms(&self, mm: usize) -> u64 {
        let k = &self.cfg.kernel;
        let nr_scan_pages = k.numa_balancing_scan_size_mb << (20 - PAGE_SHIFT);
        let rss = self.mms[mm].rss_anon + self.mms[mm].rss_file + self.mms[mm].rss_shmem;
        let windows = rss.div_ceil(nr_scan_pages).max(1);
        self.task_scan_min_ms(mm)
            .max(k.numa_balancing_scan_period_max_ms / windows)
    }

    /// init_numa_balancing's node_stamp for a new thread of `mm`: 0 for a process's first
    /// thread (its first tick sets task_scan_start); a CLONE_VM thread gets
    /// min(task_scan_max, period × users × NSEC_PER_MSEC) + 2 ticks in ns of runtime, so it
    /// keeps numa_scan_period = scan_delay.
    pub fn init_numa_node_stamp(&self, m: &Machine, mm: usize) -> u64 {
        let users = self
            .sched
            .threads
            .iter()
            .filter(|t| t.mm as usize == mm)
            .count() as u64;
        if users == 0 {
            return 0;
        }
        // task_scan_max() returns ms; the kernel compares it with ns as a plain number.
        let period_ns = self.cfg.kernel.numa_balancing_scan_delay_ms * users * 1_000_000;
        let delay_ns = self.task_scan_max_ms(mm).min(period_ns) + 2 * (1_000_000_000 / HZ);
        m.ns_to_cycles(delay_ns as f64)
    }

    /// task_numa_fault(last_cpupid = -1 (private), mem_node, pages, flags) for thread `tid`
    /// on CPU `c`: `pages` 1, or HPAGE_PMD_NR for a THP; `local` is TNF_FAULT_LOCAL, `failed`
    /// TNF_MIGRATE_FAIL.
    #[allow(clippy::too_many_arguments)]
    pub fn task_numa_fault(
        &mut self,
        m: &Machine,
        c: usize,
        tid: usize,
        mem_node: usize,
        pages: u64,
        local: bool,
        failed: bool,
    ) {
        // NUMA fault statistics are unnecessary for slow memory in memory-tiering mode.
        if self.tiering_mode() && !self.tiers.node_is_toptier(mem_node) {
            return;
        }
        let now_ms = m.now_ms(c);
        let t = &mut self.sched.threads[tid].numab;
        if !t.has_faults {
            t.has_faults = true;
            t.locality = [0; 3];
        }
        // Retry task placement periodically (time_after(jiffies, numa_migrate_retry)).
        if now_ms > t.migrate_retry_ms {
            self.task_numa_placement(m, c, tid);
            self.numa_migrate_preferred(now_ms, tid);
        }
        let t = &mut self.sched.threads[tid].numab;
        if failed {
            t.locality[2] += pages;
        }
        t.faults_buf[1] += pages;
        t.locality[local as usize] += pages;
    }

    /// task_numa_placement: once per change of mm->numa_scan_seq, fold the faults since the
    /// last placement into the decayed totals, pick the preferred node, and adapt the scan
    /// period.
    fn task_numa_placement(&mut self, m: &Machine, c: usize, tid: usize) {
        let mm = self.sched.threads[tid].mm as usize;
        let seq = self.mms[mm].numa.scan_seq;
        if self.sched.threads[tid].numab.scan_seq == seq {
            return;
        }
        let node = m.cpus[c].node as u32;
        let t = &mut self.sched.threads[tid].numab;
        t.scan_seq = seq;
        // Decay the existing window, copy the faults since the last scan (NUMA_MEMBUF → MEM).
        let fault_types = t.faults_buf;
        let buf = fault_types[0] + fault_types[1];
        t.faults_mem = t.faults_mem - t.faults_mem / 2 + buf;
        t.faults_buf = [0; 2];
        // Every counted fault here is on the faulting CPU's node (a promotion's target).
        if t.faults_mem > 0 {
            t.preferred_nid = node;
        }
        self.update_task_scan_period(m, c, tid, fault_types[0], fault_types[1]);
    }

    /// update_task_scan_period: no local or shared faults (or failed migrations) → scan
    /// slower: double the period up to task_scan_max and push the mm's next scan; otherwise
    /// move it by slots toward 70 % local.
    fn update_task_scan_period(
        &mut self,
        m: &Machine,
        c: usize,
        tid: usize,
        shared: u64,
        private: u64,
    ) {
        let mm = self.sched.threads[tid].mm as usize;
        // p->numa_scan_period_max, set by the placement from task_scan_max.
        let (smin, smax) = (self.task_scan_min_ms(mm), self.task_scan_max_ms(mm));
        let t = &mut self.sched.threads[tid];
        let [remote, local, failed] = t.numab.locality;
        if local + shared == 0 || failed > 0 {
            t.numa_scan_period_ms = smax.min(t.numa_scan_period_ms << 1);
            let next = m.cpus[c].clock + m.ns_to_cycles(t.numa_scan_period_ms as f64 * 1e6);
            self.mms[mm].numa.next_scan = next;
            return;
        }
        let period = t.numa_scan_period_ms;
        let slot = period.div_ceil(NUMA_PERIOD_SLOTS) as i64;
        let lr = local * NUMA_PERIOD_SLOTS / (local + remote);
        let ps = private * NUMA_PERIOD_SLOTS / (private + shared).max(1);
        let diff = if ps >= NUMA_PERIOD_THRESHOLD {
            (ps - NUMA_PERIOD_THRESHOLD).max(1) as i64 * slot
        } else if lr >= NUMA_PERIOD_THRESHOLD {
            (lr - NUMA_PERIOD_THRESHOLD).max(1) as i64 * slot
        } else {
            -((NUMA_PERIOD_THRESHOLD - lr.max(ps)) as i64) * slot
        };
        let p = (period as i64 + diff).clamp(smin as i64, smax as i64);
        t.numa_scan_period_ms = p as u64;
        t.numab.locality = [0; 3];
    }

    /// numa_migrate_preferred: with a preferred node, retry placement after
    /// min(HZ, msecs_to_jiffies(period) / 16) jiffies.
    fn numa_migrate_preferred(&mut self, now_ms: u64, tid: usize) {
        let t = &mut self.sched.threads[tid];
        if t.numab.preferred_nid == NIL || !t.numab.has_faults {
            return;
        }
        let jiffies = HZ.min(t.numa_scan_period_ms * HZ / 1000 / 16);
        t.numab.migrate_retry_ms = now_ms + jiffies * 1000 / HZ;
    }
}
