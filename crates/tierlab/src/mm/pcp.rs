//! struct per_cpu_pages and its rules (mm/page_alloc.c `free_unref_page_commit`,
//! `nr_pcp_high`, `nr_pcp_free`, `nr_pcp_alloc`, `decay_pcp_high`), at each level of seed 002's
//! series (`vm.pcp_series`, config `PcpSeries`): Linux 6.6 (`base`), the v2 patches the seed's
//! tables measure, and 6.7 as merged (v3, commits ca71fe1ad922..6ccdcb6d3a74).
//!
//! One migratetype, so one list per order up to PAGE_ALLOC_COSTLY_ORDER and one THP list
//! (NR_PCP_THP, for HPAGE_PMD_ORDER blocks).

use crate::config::PcpSeries;
use crate::mm::page::ListHead;

/// CONFIG_PCP_BATCH_SCALE_MAX (default 5; patch 4).
pub const PCP_BATCH_SCALE_MAX: u32 = 5;
/// PAGE_ALLOC_COSTLY_ORDER: the highest order the per-CPU lists keep.
pub const PAGE_ALLOC_COSTLY_ORDER: usize = 3;
/// NR_PCP_LISTS for one migratetype: one list per order 0..=PAGE_ALLOC_COSTLY_ORDER, then
/// the THP list.
pub const NR_PCP_LISTS: usize = PAGE_ALLOC_COSTLY_ORDER + 2;
/// HPAGE_PMD_ORDER, the one order above PAGE_ALLOC_COSTLY_ORDER the lists keep.
const PCP_THP_ORDER: usize = 9;

/// pcp_allowed_order: orders up to PAGE_ALLOC_COSTLY_ORDER and HPAGE_PMD_ORDER.
pub fn pcp_allowed_order(order: usize) -> bool {
    order <= PAGE_ALLOC_COSTLY_ORDER || order == PCP_THP_ORDER
}

/// order_to_pindex: the list of an allowed order (the THP list last).
pub fn order_to_pindex(order: usize) -> usize {
    if order > PAGE_ALLOC_COSTLY_ORDER {
        PAGE_ALLOC_COSTLY_ORDER + 1
    } else {
        order
    }
}

/// pindex_to_order
pub fn pindex_to_order(pindex: usize) -> usize {
    if pindex > PAGE_ALLOC_COSTLY_ORDER {
        PCP_THP_ORDER
    } else {
        pindex
    }
}
/// PCPF_PREV_FREE_HIGH_ORDER (patch 1): the last free was of order 1..=3.
const PCPF_PREV_FREE_HIGH_ORDER: u8 = 1 << 0;
/// PCPF_FREE_HIGH_BATCH (patch 3): the CPU's data cache holds more than a few batches, so a
/// high-order drain keeps a batch on the list.
const PCPF_FREE_HIGH_BATCH: u8 = 1 << 1;
/// BOOT_PAGESET_HIGH / BOOT_PAGESET_BATCH: a pageset before zone_set_pageset_high_and_batch
/// (effectively disabled: every free goes straight back to buddy, every alloc refills one page).
pub(crate) const BOOT_PAGESET_HIGH: u32 = 0;
pub(crate) const BOOT_PAGESET_BATCH: u32 = 1;

/// Kernel clamp(): min(max(v, lo), hi) (hi wins when lo > hi, unlike `Ord::clamp`, which panics).
pub(crate) fn kclamp(v: i64, lo: i64, hi: i64) -> i64 {
    v.max(lo).min(hi)
}

/// struct per_cpu_pages.
#[derive(Clone, Debug)]
pub struct PerCpuPages {
    /// Pages on the lists (a block of order n counts 2^n).
    pub count: u32,
    pub high: u32,
    pub high_min: u32,
    pub high_max: u32,
    pub batch: u32,
    /// The series level this pageset follows.
    pub level: PcpSeries,
    /// PCPF_* bits.
    pub flags: u8,
    /// pcp->free_factor (6.6 to v2 patch 9): batch scaling of frees, 2^free_factor.
    pub free_factor: u8,
    /// pcp->alloc_factor (patch 5): refill batch = batch << alloc_factor.
    pub alloc_factor: u8,
    /// pcp->free_count (patch 10): pages freed since the last allocation halved it, capped at
    /// batch << PCP_BATCH_SCALE_MAX.
    pub free_count: u32,
    /// pcp->count_min (v2 patch 9): the lowest count since the last decay.
    pub count_min: u32,
    /// pcp->expire (CONFIG_NUMA): vmstat updates left before a remote pageset is drained.
    pub expire: u8,
    /// This CPU changed the zone's counters since its last vmstat update (a nonzero
    /// vm_stat_diff): an allocation or a free of the zone's pages on it.
    pub stat_diff: bool,
    /// One list per order (pcp->lists[order_to_pindex()]).
    pub lists: [ListHead; NR_PCP_LISTS],
}

impl Default for PerCpuPages {
    /// per_cpu_pages_init(): the boot pageset (high 0, batch 1) with empty lists.
    fn default() -> Self {
        PerCpuPages {
            count: 0,
            high: BOOT_PAGESET_HIGH,
            high_min: BOOT_PAGESET_HIGH,
            high_max: BOOT_PAGESET_HIGH,
            batch: BOOT_PAGESET_BATCH,
            level: PcpSeries::Merged,
            flags: 0,
            free_factor: 0,
            alloc_factor: 0,
            free_count: 0,
            count_min: 0,
            expire: 0,
            stat_diff: false,
            lists: [ListHead::new(); NR_PCP_LISTS],
        }
    }
}

impl PerCpuPages {
    fn has(&self, patch: u32) -> bool {
        self.level.has(patch)
    }

    /// zone_pcp_update_cacheinfo (patch 3, v2): a CPU whose data cache holds more than four
    /// batches keeps a batch when it drains for high-order frees.
    pub fn set_cacheinfo(&mut self, data_cache_pages: u64) {
        if data_cache_pages > 4 * self.batch as u64 {
            self.flags |= PCPF_FREE_HIGH_BATCH;
        } else {
            self.flags &= !PCPF_FREE_HIGH_BATCH;
        }
    }

    /// The part of free_unref_page_commit before the high check, after the block of `order`
    /// joined the list: alloc_factor decays (patch 5), and whether this free drains the list
    /// for high-order frees (free_high: 6.6 on any high-order free after a free burst; patch
    /// 1 only on the second in a row; patch 3 not below a batch when the cache holds it;
    /// patch 10 counting the burst in pages).
    pub fn commit_free(&mut self, order: usize) -> bool {
        if self.has(5) {
            self.alloc_factor >>= 1;
        }
        let batch = self.batch;
        let high_order = order > 0 && order <= PAGE_ALLOC_COSTLY_ORDER;
        let burst = if self.has(10) {
            self.free_count >= batch
        } else {
            self.free_factor > 0
        };
        let free_high = if !self.has(1) {
            burst && high_order
        } else if high_order {
            let keep_batch = self.has(3) && self.flags & PCPF_FREE_HIGH_BATCH != 0;
            let fh = burst
                && self.flags & PCPF_PREV_FREE_HIGH_ORDER != 0
                && (!keep_batch || self.count >= batch);
            self.flags |= PCPF_PREV_FREE_HIGH_ORDER;
            fh
        } else {
            self.flags &= !PCPF_PREV_FREE_HIGH_ORDER;
            false
        };
        if self.has(10) && self.free_count < batch << PCP_BATCH_SCALE_MAX {
            self.free_count += 1 << order;
        }
        free_high
    }

    /// The burst a shrinking high is lowered by: free_count (merged: at least a batch), or
    /// before patch 10 the free scaling, batch << free_factor.
    fn free_burst(&self) -> i64 {
        let batch = self.batch as i64;
        match self.level {
            PcpSeries::Merged => (self.free_count as i64).max(batch),
            _ if self.has(10) => self.free_count as i64,
            _ => batch << self.free_factor.min(31),
        }
    }

    /// nr_pcp_high(): the count at which a free drains the list. Before patch 7 a fixed high
    /// (0 for a high-order drain; 4 batches while kswapd reclaims); from patch 7 high is tuned
    /// between high_min and high_max: lowered by a drain or a burst under pressure, raised to
    /// hold a batch of frees.
    pub fn nr_pcp_high(&mut self, reclaim_active: bool, below_high: bool, free_high: bool) -> u32 {
        let batch = self.batch as i64;
        if !self.has(7) {
            let high = self.high;
            if high == 0 || free_high {
                return 0;
            }
            if !reclaim_active {
                return high;
            }
            return (self.batch << 2).min(high);
        }
        let high_min = self.high_min as i64;
        let high_max = self.high_max as i64;
        let mut high = kclamp(self.high as i64, high_min, high_max);
        self.high = high as u32;
        if high == 0 {
            return 0;
        }
        if free_high {
            self.high = (high - (batch << PCP_BATCH_SCALE_MAX)).max(high_min) as u32;
            return 0;
        }
        if reclaim_active {
            self.high = (high - self.free_burst()).max(high_min) as u32;
            return (batch << 2).min(self.high as i64) as u32;
        }
        if high_min == high_max {
            return high as u32;
        }
        if self.has(8) && below_high {
            self.high = (high - self.free_burst()).max(high_min) as u32;
            high = (self.count as i64).max(high_min);
        } else if self.count as i64 >= high {
            // pcp->high should be large enough to hold a batch of freed pages
            let burst = if self.has(10) {
                self.free_count as i64
            } else {
                batch << self.free_factor.min(31)
            };
            let need_high = burst + batch;
            if (self.high as i64) < need_high {
                self.high = kclamp(need_high, high_min, high_max) as u32;
            }
        }
        high as u32
    }

    /// nr_pcp_free(): how many pages a drain at `high` returns to buddy: all (6.6) or up to
    /// batch << PCP_BATCH_SCALE_MAX (patch 7) for a high-order drain; else at least a batch,
    /// more after a run of frees (free_factor, capped by patch 4; free_count from patch 10),
    /// leaving a batch.
    pub fn nr_pcp_free(&mut self, high: u32, free_high: bool) -> u32 {
        let batch = self.batch as i64;
        if free_high {
            if self.has(7) {
                return self.count.min(self.batch << PCP_BATCH_SCALE_MAX);
            }
            return self.count;
        }
        let high = high as i64;
        // PCP disabled or boot pageset
        if high < batch {
            return 1;
        }
        let (min_nr_free, max_nr_free) = (batch, high - batch);
        if self.has(10) {
            return kclamp(self.free_count as i64, min_nr_free, max_nr_free) as u32;
        }
        let scaled = batch << self.free_factor.min(31);
        let grows = if self.has(7) {
            scaled <= max_nr_free
        } else {
            scaled < max_nr_free
        };
        if grows && (!self.has(4) || (self.free_factor as u32) < PCP_BATCH_SCALE_MAX) {
            self.free_factor += 1;
        }
        kclamp(scaled, min_nr_free, max_nr_free) as u32
    }

    /// The blocks of `order` a refill takes from buddy: 6.6's batch (>> order, at least 2);
    /// from patch 5 nr_pcp_alloc(), which scales an order-0 batch by alloc_factor up to the
    /// room under high, and from patch 7 first raises high by the batch (not while the zone
    /// is below its high watermark, patch 8; before it, not while kswapd reclaims).
    pub fn nr_pcp_alloc(&mut self, order: usize, below_high: bool, reclaim_active: bool) -> u32 {
        let base_batch = self.batch as i64;
        let shrink = |b: i64| if b > 1 { (b >> order).max(2) } else { b };
        if !self.has(5) {
            return shrink(base_batch) as u32;
        }
        let mut high = if self.has(7) {
            let h = kclamp(self.high as i64, self.high_min as i64, self.high_max as i64);
            self.high = h as u32;
            h
        } else {
            self.high as i64
        };
        // PCP disabled or boot pageset
        if high < base_batch {
            return 1;
        }
        let mut batch = if order > 0 {
            base_batch
        } else {
            base_batch << self.alloc_factor
        };
        let pressure = if self.has(8) {
            below_high
        } else {
            reclaim_active
        };
        if self.has(7) && self.high_min != self.high_max && !pressure {
            high = (high + batch).min(self.high_max as i64);
            self.high = high as u32;
        }
        if order == 0 {
            let max_nr_alloc = (high - self.count as i64 - base_batch).max(base_batch);
            if batch <= max_nr_alloc && (self.alloc_factor as u32) < PCP_BATCH_SCALE_MAX {
                self.alloc_factor += 1;
            }
            batch = batch.min(max_nr_alloc);
        }
        shrink(batch) as u32
    }

    /// rmqueue_pcplist's bookkeeping of an allocation: the free burst is halved (free_factor,
    /// from patch 10 free_count).
    pub fn on_alloc(&mut self) {
        if self.has(10) {
            self.free_count >>= 1;
        } else {
            self.free_factor >>= 1;
        }
    }

    /// After a block left the list: v2 patch 9 tracks the lowest count since the last decay.
    pub fn after_take(&mut self) {
        if self.has(9) {
            self.count_min = self.count_min.min(self.count);
        }
    }

    /// decay_pcp_high() from the vmstat update (patch 7): lower high towards high_min (never
    /// below count − batch << PCP_BATCH_SCALE_MAX) by a fifth (v2), by the list's minimum
    /// since the last decay up to a fifth (v2 patch 9), or by an eighth (merged). Returns the
    /// pages to drain above it.
    pub fn decay_pcp_high(&mut self) -> i64 {
        if !self.has(7) {
            return 0;
        }
        let (high_min, batch) = (self.high_min as i64, self.batch as i64);
        let high = self.high as i64;
        if high > high_min {
            let decayed = match self.level {
                PcpSeries::Merged => high - (high >> 3),
                _ if self.has(9) => high - (self.count_min as i64).min(high / 5),
                _ => high * 4 / 5,
            };
            let floor = self.count as i64 - (batch << PCP_BATCH_SCALE_MAX);
            self.high = floor.max(decayed).max(high_min) as u32;
        }
        self.count as i64 - self.high as i64
    }

    /// After a decay (and its drain): v2 patch 9 starts the next minimum from here.
    pub fn after_decay(&mut self) {
        if self.has(9) {
            self.count_min = self.count;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pageset as setup_zone_pagesets leaves it on a large zone: batch 63, high 361 (the
    /// seed's kbuild machine), auto-tuned up to 4 × that from patch 7.
    fn pcp(level: PcpSeries) -> PerCpuPages {
        let mut p = PerCpuPages {
            level,
            batch: 63,
            high: 361,
            high_min: 361,
            high_max: if level.has(7) { 1444 } else { 361 },
            ..Default::default()
        };
        p.count = 100;
        p
    }

    /// Frees of `order` after a burst of order-0 frees that raised the free scaling.
    fn high_order_frees(level: PcpSeries, orders: &[usize]) -> Vec<bool> {
        let mut p = pcp(level);
        // A drain after order-0 frees raises free_factor (6.6) / free_count (patch 10).
        for _ in 0..70 {
            p.count += 1;
            p.commit_free(0);
        }
        let high = p.nr_pcp_high(false, false, false);
        p.nr_pcp_free(high, false);
        orders
            .iter()
            .map(|&o| {
                p.count += 1 << o;
                p.commit_free(o)
            })
            .collect()
    }

    #[test]
    fn base_drains_on_the_first_high_order_free_patch1_on_the_second() {
        assert_eq!(high_order_frees(PcpSeries::Base, &[1]), vec![true]);
        // Patch 1: the PGD's order-1 free at exit no longer drains on its own.
        assert_eq!(high_order_frees(PcpSeries::Patch1, &[1]), vec![false]);
        assert_eq!(
            high_order_frees(PcpSeries::Patch1, &[1, 1]),
            vec![false, true]
        );
        // An order-0 free in between resets the run.
        assert_eq!(
            high_order_frees(PcpSeries::Patch1, &[1, 0, 1]),
            vec![false, false, false]
        );
    }

    #[test]
    fn patch3_keeps_a_batch_when_the_cache_holds_it() {
        let mut p = pcp(PcpSeries::Patch3);
        p.set_cacheinfo(2008 / 4); // the seed's Sapphire Rapids: 502 pages > 4 batches
        p.free_factor = 1;
        p.count = 10;
        assert!(!p.commit_free(2), "the first high-order free never drains");
        assert!(!p.commit_free(2), "below a batch on the list: no drain");
        p.count = 63;
        assert!(p.commit_free(2));
        // Without the cache information, patch 3 behaves as patch 1.
        let mut q = pcp(PcpSeries::Patch3);
        q.free_factor = 1;
        q.count = 10;
        q.commit_free(2);
        assert!(q.commit_free(2));
    }

    #[test]
    fn a_high_order_drain_frees_everything_before_patch7_and_a_capped_batch_after() {
        let mut p = pcp(PcpSeries::Patch5);
        p.count = 5000;
        assert_eq!(p.nr_pcp_high(false, false, true), 0);
        assert_eq!(p.nr_pcp_free(0, true), 5000);
        let mut q = pcp(PcpSeries::Patch7);
        q.count = 5000;
        assert_eq!(q.nr_pcp_high(false, false, true), 0);
        assert_eq!(q.nr_pcp_free(0, true), 63 << PCP_BATCH_SCALE_MAX);
    }

    #[test]
    fn free_factor_is_capped_from_patch4_and_alloc_batches_scale_from_patch5() {
        let mut base = pcp(PcpSeries::Patch1);
        base.high = 100_000;
        base.high_min = 100_000;
        base.high_max = 100_000;
        for _ in 0..20 {
            base.nr_pcp_free(100_000, false);
        }
        assert!(
            base.free_factor as u32 > PCP_BATCH_SCALE_MAX,
            "6.6 has no cap"
        );
        let mut capped = base.clone();
        capped.level = PcpSeries::Patch5;
        capped.free_factor = 0;
        for _ in 0..20 {
            capped.nr_pcp_free(100_000, false);
        }
        assert_eq!(capped.free_factor as u32, PCP_BATCH_SCALE_MAX);
        // Refills: 6.6 takes a batch; patch 5 doubles it on each refill while there is room.
        let mut p = pcp(PcpSeries::Patch3);
        p.count = 0;
        assert_eq!(p.nr_pcp_alloc(0, false, false), 63);
        assert_eq!(p.nr_pcp_alloc(2, false, false), 15);
        let mut q = pcp(PcpSeries::Patch5);
        q.count = 0;
        assert_eq!(q.nr_pcp_alloc(0, false, false), 63);
        assert_eq!(q.nr_pcp_alloc(0, false, false), 126);
        assert_eq!(q.nr_pcp_alloc(0, false, false), 252);
        assert_eq!(
            q.nr_pcp_alloc(0, false, false),
            361 - 63,
            "capped by the room under high"
        );
    }

    #[test]
    fn high_grows_from_patch7_and_decays_by_level() {
        let mut p = pcp(PcpSeries::Patch5);
        p.nr_pcp_alloc(0, false, false);
        assert_eq!(p.high, 361, "fixed before patch 7");
        assert_eq!(p.decay_pcp_high(), 0, "no decay before patch 7");
        let mut q = pcp(PcpSeries::Patch7);
        q.nr_pcp_alloc(0, false, false);
        assert_eq!(q.high, 361 + 63, "a refill raises high by its batch");
        q.high = 1000;
        q.decay_pcp_high();
        assert_eq!(q.high, 800, "v2 decays by a fifth");
        let mut m = pcp(PcpSeries::Merged);
        m.high = 1000;
        m.decay_pcp_high();
        assert_eq!(m.high, 875, "6.7 decays by an eighth");
        let mut n = pcp(PcpSeries::Patch9);
        n.high = 1000;
        n.count_min = 30;
        n.decay_pcp_high();
        assert_eq!(n.high, 970, "v2 patch 9 decays by the list's minimum");
        // Patch 8: below the high watermark a refill does not raise high; patch 7 alone
        // stops only while kswapd reclaims.
        let mut b = pcp(PcpSeries::Patch8);
        b.nr_pcp_alloc(0, true, false);
        assert_eq!(b.high, 361);
        let mut a = pcp(PcpSeries::Patch7);
        a.nr_pcp_alloc(0, true, false);
        assert_eq!(a.high, 361 + 63);
        a.nr_pcp_alloc(0, false, true);
        assert_eq!(a.high, 361 + 63, "no growth while kswapd reclaims");
    }
}
