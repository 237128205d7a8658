//! Upstream Linux (v6.1+): with `numa_balancing = 2`, a slow-tier folio is promoted when its
//! hint-fault latency is under the hot threshold, within the promotion rate limit
//! (should_numa_migrate_memory in kernel/sched/fair.c); no demotion watermark.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::pgtable::PAGE_SHIFT;
use crate::policy::{PolicyEntry, TieringPolicy};

pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "linux",
    doc: "upstream memory tiering: hot threshold, rate limit, threshold adjustment",
    knob_defaults: &[],
    own_knobs: &[],
    new: || Box::new(HotThreshold),
};

pub struct HotThreshold;

impl TieringPolicy for HotThreshold {
    fn should_promote(
        &mut self,
        k: &mut Kernel,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        _src: usize,
        dst: usize,
    ) -> bool {
        if k.pgdat_free_space_enough(dst) {
            k.nodes[dst].numab.nbp_threshold = 0;
            return true;
        }
        let now = m.now_ms(c);
        let kc = &k.cfg.kernel;
        let def_th = kc.numa_balancing_hot_threshold_ms;
        let rate_limit = kc.numa_balancing_promote_rate_limit_mbps << (20 - PAGE_SHIFT);
        k.numa_promotion_adjust_threshold(dst, rate_limit, def_th, now);
        let th = match k.nodes[dst].numab.nbp_threshold {
            0 => def_th,
            t => t,
        };
        // numa_hint_fault_latency: now minus the scan time, and the folio remembers now.
        let page = *k.frames.get(pfn);
        // A CPU's clock may trail the scanner's by its quantum; jiffies are one clock, and the
        // scan came first, so a fault "before" the scan has latency 0, not a wrapped one.
        let latency = (now as u32).saturating_sub(page.numa_access_ms) as u64;
        k.folio_xchg_access_time(pfn, now as u32);
        if latency >= th {
            return false;
        }
        // numa_promotion_rate_limit counts the folio's pages.
        let nr = k.folio_nr_pages(pfn);
        !k.numa_promotion_rate_limit(dst, rate_limit, nr, now)
    }

    fn demote_wmark(&self, _k: &Kernel, _n: usize) -> u64 {
        0
    }
}
