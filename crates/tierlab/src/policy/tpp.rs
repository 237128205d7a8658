//! TPP (seed 003, Hasan Al Maruf et al., "TPP: Transparent Page Placement for CXL-Enabled
//! Tiered-Memory", ASPLOS '23; the v3 series on linux-mm): two mechanisms, each a switch.
//! - `vm.demote_scale_factor`: WMARK_DEMOTE = high + managed × factor / 10000 on top-tier
//!   nodes, so kswapd demotes before allocations reach the low watermark.
//! - `kernel.numa_balancing_active_lru_promotion`: promote a slow-tier folio only if it is on
//!   the active LRU; otherwise mark it accessed, so a later fault promotes it.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::page::pg;
use crate::policy::{linux::HotThreshold, PolicyEntry, TieringPolicy};
use crate::stats::Vm;

pub const ENTRY: PolicyEntry = PolicyEntry {
    name: "tpp",
    doc: "TPP: demotion watermark above high, active-LRU promotion gate",
    knob_defaults: &[
        ("vm.demote_scale_factor", "200"),
        ("kernel.numa_balancing_active_lru_promotion", "on"),
    ],
    own_knobs: &[
        "vm.demote_scale_factor",
        "kernel.numa_balancing_active_lru_promotion",
    ],
    new: || Box::new(Tpp),
};

pub struct Tpp;

impl TieringPolicy for Tpp {
    fn should_promote(
        &mut self,
        k: &mut Kernel,
        m: &mut Machine,
        c: usize,
        pfn: u32,
        src: usize,
        dst: usize,
    ) -> bool {
        if k.cfg.kernel.numa_balancing_active_lru_promotion {
            promote_if_active(k, pfn)
        } else {
            // The gate switched off: upstream's hot-threshold test decides.
            HotThreshold.should_promote(k, m, c, pfn, src, dst)
        }
    }

    fn demote_wmark(&self, k: &Kernel, n: usize) -> u64 {
        let dsf = k.cfg.vm.demote_scale_factor as u64;
        if dsf == 0 || !k.tiers.node_is_toptier(n) {
            return 0;
        }
        let z = &k.nodes[n].zone;
        z.wmark.high + z.managed_pages * dsf / 10000
    }
}

/// TPP's active-LRU gate: an active folio is promoted; an inactive one is marked accessed
/// (folio_mark_accessed: referenced first, activated on the next fault), so only a page
/// faulted again after a scan period gets promoted.
fn promote_if_active(k: &mut Kernel, pfn: u32) -> bool {
    let p = *k.frames.get(pfn);
    if p.has(pg::ACTIVE) {
        return true;
    }
    if !p.has(pg::REFERENCED) {
        k.frames.get_mut(pfn).flags |= pg::REFERENCED;
        return false;
    }
    // folio_activate: inactive and referenced → active list.
    if p.has(pg::LRU) {
        k.folio_activate(pfn);
        k.vm.inc(Vm::PgActivate);
    }
    false
}
