//! The page allocator of one zone per node: buddy free lists, per-CPU pagesets (orders up to
//! PAGE_ALLOC_COSTLY_ORDER, their rules in pcp.rs at each level of seed 002's series),
//! watermarks and the zone lock as a timed resource (Linux mm/page_alloc.c,
//! include/linux/mmzone.h).
//!
//! One migratetype, no fallback stealing, no compaction, no guard pages, no page shuffling.
//! Buddy alignment is relative to the zone's first frame (`pfn - start_pfn`), so a node whose
//! frames start at an odd global pfn still gets naturally aligned blocks.

use crate::cost::CostTable;
use crate::mm::page::{pg, FrameTable, ListHead};
use crate::mm::pcp::{
    kclamp, order_to_pindex, pcp_allowed_order, pindex_to_order, BOOT_PAGESET_BATCH,
    BOOT_PAGESET_HIGH, NR_PCP_LISTS,
};
pub use crate::mm::pcp::{PerCpuPages, PAGE_ALLOC_COSTLY_ORDER, PCP_BATCH_SCALE_MAX};

pub const MAX_PAGE_ORDER: usize = 10;
pub const NR_PAGE_ORDERS: usize = MAX_PAGE_ORDER + 1;
/// MIN_PERCPU_PAGELIST_HIGH_FRACTION: the fraction that bounds auto-tuned pcp->high_max.
pub const MIN_PERCPU_PAGELIST_HIGH_FRACTION: u32 = 8;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Watermarks {
    pub min: u64,
    pub low: u64,
    pub high: u64,
    pub promo: u64,
}

/// int_sqrt(): floor of the square root.
fn int_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while (r as u128) * (r as u128) > x as u128 {
        r -= 1;
    }
    while ((r + 1) as u128) * ((r + 1) as u128) <= x as u128 {
        r += 1;
    }
    r
}

/// calculate_min_free_kbytes(): clamp(int_sqrt(lowmem_kbytes*16), 128, 262144); lowmem_kbytes = pages*4
pub fn calculate_min_free_kbytes(lowmem_pages: u64) -> u64 {
    let lowmem_kbytes = lowmem_pages.saturating_mul(4);
    int_sqrt(lowmem_kbytes.saturating_mul(16)).clamp(128, 262_144)
}

/// zone_batchsize() (CONFIG_MMU). May return 0 for zones under 32 MiB, as in Linux; the
/// pageset setup uses max(1, zone_batchsize()).
pub fn zone_batchsize(managed_pages: u64) -> u32 {
    // min(managed >> 10, SZ_1M / PAGE_SIZE = 256) / 4, at least 1
    let b = ((managed_pages >> 10).min(256) / 4).max(1);
    let x = b + b / 2;
    // rounddown_pow_of_two(x) - 1
    let pow = 1u64 << (63 - x.leading_zeros());
    (pow - 1) as u32
}

/// zone_highsize(): max(total / nr_split_cpus, batch * 4) with total = managed / fraction or
/// the low watermark; nr_split_cpus = CPUs of the zone's node, or all online CPUs when the node
/// has none. (Linux adds a `cpu_online` hotplug term to nr_split_cpus; it is 0 outside hotplug.)
pub fn zone_highsize(
    managed_pages: u64,
    low_wmark: u64,
    batch: u32,
    cpus_on_node: u32,
    online_cpus: u32,
    high_fraction: u32,
) -> u32 {
    let total = if high_fraction != 0 {
        managed_pages / high_fraction as u64
    } else {
        low_wmark
    };
    let mut nr_split_cpus = cpus_on_node as u64;
    if nr_split_cpus == 0 {
        nr_split_cpus = (online_cpus as u64).max(1);
    }
    let high = (total / nr_split_cpus).max((batch as u64) << 2);
    high.min(i32::MAX as u64) as u32
}

/// zone->lock as a timed resource in the machine-wide cycle clock. The CPUs' clocks run up
/// to a quantum apart and are simulated one at a time, so requests do not arrive in time
/// order: the lock keeps a calendar of its holds, and a request at `now` takes the first gap
/// from `now` on long enough for its hold (a spinning CPU gets the lock when the holders
/// before it in time are done). Records what lock contention reports need.
#[derive(Clone, Debug, Default)]
pub struct ZoneLock {
    /// Holds, start → end, non-overlapping; those long past are pruned.
    busy: std::collections::BTreeMap<u64, u64>,
    pub acquisitions: u64,
    pub contended: u64,
    pub wait_cycles: u64,
    pub hold_cycles: u64,
}

/// Holds that ended this many cycles before a request are forgotten when the calendar grows
/// past `LOCK_CALENDAR_MAX` (no CPU lags that far behind another).
const LOCK_CALENDAR_HORIZON: u64 = 1 << 26;
const LOCK_CALENDAR_MAX: usize = 4096;

impl ZoneLock {
    /// spin_lock(&zone->lock) … spin_unlock() at `now` for `hold` cycles: returns the wait;
    /// the caller is charged wait + hold.
    pub fn acquire(&mut self, now: u64, hold: u64) -> u64 {
        let mut start = now;
        if let Some((_, &end)) = self.busy.range(..=start).next_back() {
            start = start.max(end);
        }
        for (&b, &e) in self.busy.range(start..) {
            if b >= start + hold {
                break;
            }
            start = start.max(e);
        }
        if hold > 0 {
            self.busy.insert(start, start + hold);
        }
        if self.busy.len() > LOCK_CALENDAR_MAX {
            let horizon = now.saturating_sub(LOCK_CALENDAR_HORIZON);
            self.busy.retain(|_, &mut e| e >= horizon);
            // Still full (a burst at one time, as boot's): the oldest holds go.
            while self.busy.len() > LOCK_CALENDAR_MAX / 2 {
                self.busy.pop_first();
            }
        }
        let wait = start - now;
        self.acquisitions += 1;
        if wait > 0 {
            self.contended += 1;
        }
        self.wait_cycles += wait;
        self.hold_cycles += hold;
        wait
    }

    /// The cycle at which the latest hold ends.
    pub fn free_at(&self) -> u64 {
        self.busy.values().copied().max().unwrap_or(0)
    }
}

/// struct zone (one per node, ZONE_NORMAL-like).
pub struct Zone {
    pub nid: u8,
    pub start_pfn: u32,
    pub managed_pages: u64,
    pub free_area: [ListHead; NR_PAGE_ORDERS],
    /// NR_FREE_PAGES: pages in buddy only (pcp pages are NOT counted, as in Linux).
    pub nr_free: u64,
    pub wmark: Watermarks,
    /// One per CPU of the machine (index = cpu id).
    pub pcp: Vec<PerCpuPages>,
    pub lock: ZoneLock,
    /// ZONE_BELOW_HIGH
    pub below_high: bool,
    /// ZONE_RECLAIM_ACTIVE (set by kswapd)
    pub reclaim_active: bool,
    /// Counters the caller exports as pgalloc_normal / pgfree.
    pub pgalloc: u64,
    pub pgfree: u64,
    /// Frees that drained a pageset for high-order freeing (free_unref_page_commit with
    /// free_high): seed 002's "free_high".
    pub free_high: u64,
    /// Pages taken from buddy rather than a pageset (rmqueue_bulk's refills and
    /// rmqueue_buddy): seed 002's "alloc_zone", "the number of pages allocated from zone".
    pub alloc_zone: u64,
    /// Spanned pages: frames [start_pfn, start_pfn + spanned_pages) belong to the zone.
    spanned_pages: u64,
    /// Zone-relative first frame of the deferred max-order blocks (pgdat->first_deferred_pfn):
    /// [first_deferred, deferred_end) is free but not yet on free_area[MAX_PAGE_ORDER].
    pub(crate) first_deferred: u64,
    /// Zone-relative end of the max-order blocks.
    pub(crate) deferred_end: u64,
}

impl Zone {
    /// free_area_init_core + memblock_free_all → __free_pages_memory → __free_pages_core:
    /// build the zone over frames [start_pfn, start_pfn+pages) and free every frame into buddy
    /// as the largest aligned blocks (to the list tail, FPI_TO_TAIL). ncpus = CPUs of the whole
    /// machine. Pagesets start as boot pagesets until `setup_zone_pagesets`.
    ///
    /// The max-order blocks are deferred (CONFIG_DEFERRED_STRUCT_PAGE_INIT): counted free
    /// but left off free_area[MAX_PAGE_ORDER], whose tail they form in pfn order, until
    /// `deferred_grow_zone` (mm_init.rs) pulls them in; only the blocks below max order at
    /// the zone's end are freed now, and only their sections initialised.
    pub fn new(nid: u8, start_pfn: u32, pages: u64, ncpus: usize, frames: &mut FrameTable) -> Zone {
        assert!(
            start_pfn as u64 + pages <= frames.len() as u64,
            "zone extends past the frame table"
        );
        let deferred_end = (pages >> MAX_PAGE_ORDER) << MAX_PAGE_ORDER;
        let mut zone = Zone {
            nid,
            start_pfn,
            managed_pages: pages,
            free_area: [ListHead::new(); NR_PAGE_ORDERS],
            nr_free: deferred_end,
            wmark: Watermarks::default(),
            pcp: vec![PerCpuPages::default(); ncpus],
            lock: ZoneLock::default(),
            below_high: false,
            reclaim_active: false,
            pgalloc: 0,
            pgfree: 0,
            free_high: 0,
            alloc_zone: 0,
            spanned_pages: pages,
            first_deferred: 0,
            deferred_end,
        };
        frames.init_range(start_pfn + deferred_end as u32, start_pfn + pages as u32);
        let mut rel: u64 = deferred_end;
        while rel < pages {
            let mut order = if rel == 0 {
                MAX_PAGE_ORDER
            } else {
                (rel.trailing_zeros() as usize).min(MAX_PAGE_ORDER)
            };
            while rel + (1u64 << order) > pages {
                order -= 1;
            }
            zone.free_one_page(frames, start_pfn + rel as u32, order, true);
            rel += 1u64 << order;
        }
        zone
    }

    /// zone_end_pfn(): one past the zone's last frame.
    pub fn end_pfn(&self) -> u32 {
        (self.start_pfn as u64 + self.spanned_pages) as u32
    }

    #[inline]
    fn contains(&self, pfn: u32) -> bool {
        pfn >= self.start_pfn && ((pfn - self.start_pfn) as u64) < self.spanned_pages
    }

    /// page_is_buddy(): `pfn` (zone-relative `rel`) heads a free buddy block of `order`
    /// lying entirely inside this zone.
    #[inline]
    fn is_free_buddy(&self, frames: &FrameTable, rel: u64, order: usize) -> bool {
        if rel + (1u64 << order) > self.spanned_pages {
            return false;
        }
        let p = frames.get(self.start_pfn + rel as u32);
        p.has(pg::BUDDY) && p.order as usize == order
    }

    /// buddy_merge_likely(): is the buddy of the next-higher block free (so that this block
    /// is likely to merge soon and should go to the list tail)?
    fn buddy_merge_likely(&self, frames: &FrameTable, rel: u64, order: usize) -> bool {
        if order >= MAX_PAGE_ORDER - 1 {
            return false;
        }
        let buddy_rel = rel ^ (1u64 << order);
        let higher_rel = rel & buddy_rel;
        let higher_buddy_rel = higher_rel ^ (1u64 << (order + 1));
        self.is_free_buddy(frames, higher_buddy_rel, order + 1)
    }

    /// __free_one_page(): merge with free buddies as far as possible and add the block to
    /// free_area (tail if `to_tail` or buddy_merge_likely, else head).
    fn free_one_page(&mut self, frames: &mut FrameTable, pfn: u32, order: usize, to_tail: bool) {
        debug_assert!(order <= MAX_PAGE_ORDER);
        debug_assert!(self.contains(pfn), "pfn {pfn} outside zone {}", self.nid);
        let orig_order = order;
        let mut rel = (pfn - self.start_pfn) as u64;
        debug_assert_eq!(rel & ((1u64 << order) - 1), 0, "misaligned block");
        debug_assert!(rel + (1u64 << order) <= self.spanned_pages);
        let mut order = order;
        while order < MAX_PAGE_ORDER {
            let buddy_rel = rel ^ (1u64 << order);
            if !self.is_free_buddy(frames, buddy_rel, order) {
                break;
            }
            let buddy = self.start_pfn + buddy_rel as u32;
            // del_page_from_free_list(): the buddy stops being a block head
            frames.list_del(&mut self.free_area[order], buddy);
            let b = frames.get_mut(buddy);
            b.flags &= !pg::BUDDY;
            b.order = 0;
            rel &= buddy_rel;
            order += 1;
        }
        if to_tail && order == MAX_PAGE_ORDER {
            // The deferred blocks are the list's tail: this block goes after them.
            while self.deferred_grow_zone(frames) {}
        }
        let head = self.start_pfn + rel as u32;
        {
            let p = frames.get_mut(head);
            p.flags = (p.flags & !pg::PCP) | pg::BUDDY;
            p.order = order as u8;
        }
        if to_tail || self.buddy_merge_likely(frames, rel, order) {
            frames.list_add_tail(&mut self.free_area[order], head);
        } else {
            frames.list_add(&mut self.free_area[order], head);
        }
        self.nr_free += 1u64 << orig_order;
    }

    /// __rmqueue_smallest() + expand(): take the first block of the smallest order ≥ `order`
    /// and return the unused upper halves to the heads of the lower free lists.
    fn rmqueue_smallest(&mut self, frames: &mut FrameTable, order: usize) -> Option<u32> {
        for cur in order..NR_PAGE_ORDERS {
            if cur == MAX_PAGE_ORDER && self.free_area[cur].is_empty() {
                self.deferred_grow_zone(frames);
            }
            let Some(pfn) = frames.list_pop_head(&mut self.free_area[cur]) else {
                continue;
            };
            {
                let p = frames.get_mut(pfn);
                p.flags &= !pg::BUDDY;
                p.order = 0;
            }
            // expand()
            let mut high = cur;
            let mut size = 1u32 << cur;
            while high > order {
                high -= 1;
                size >>= 1;
                let half = pfn + size;
                let p = frames.get_mut(half);
                p.flags |= pg::BUDDY;
                p.order = high as u8;
                frames.list_add(&mut self.free_area[high], half);
            }
            self.nr_free -= 1u64 << order;
            return Some(pfn);
        }
        None
    }

    /// Hold time of one zone->lock section that moves `pages` pages (or blocks).
    #[inline]
    fn lock_hold(cost: &CostTable, pages: u64) -> u64 {
        cost.zone_lock_base_cycles as u64 + cost.zone_lock_per_page_cycles as u64 * pages
    }

    /// rmqueue_bulk(): move up to `count` blocks of `order` from buddy to the tail of `cpu`'s
    /// list of that order. Returns the blocks moved (the caller times the lock).
    fn rmqueue_bulk(
        &mut self,
        frames: &mut FrameTable,
        cpu: usize,
        order: usize,
        count: u32,
    ) -> u32 {
        let pindex = order_to_pindex(order);
        let mut list = self.pcp[cpu].lists[pindex];
        let mut alloced = 0;
        while alloced < count {
            let Some(pfn) = self.rmqueue_smallest(frames, order) else {
                break;
            };
            let p = frames.get_mut(pfn);
            p.flags |= pg::PCP;
            p.order = order as u8;
            frames.list_add_tail(&mut list, pfn);
            alloced += 1;
        }
        self.pcp[cpu].lists[pindex] = list;
        alloced
    }

    /// free_pcppages_bulk(): under zone->lock, return at least `count` pages (whole blocks)
    /// of `cpu`'s lists to buddy, oldest first, list by list in round-robin order from the
    /// list of `order`, each emptied before the next. Returns the cycles to charge.
    fn free_pcppages_bulk(
        &mut self,
        frames: &mut FrameTable,
        cpu: usize,
        count: u32,
        order: usize,
        now: u64,
        cost: &CostTable,
    ) -> u64 {
        let mut count = count.min(self.pcp[cpu].count) as i64;
        if count == 0 {
            return 0;
        }
        let mut freed = 0u64;
        let mut pindex = order_to_pindex(order) + NR_PCP_LISTS - 1;
        while count > 0 {
            loop {
                pindex = (pindex + 1) % NR_PCP_LISTS;
                if !self.pcp[cpu].lists[pindex].is_empty() {
                    break;
                }
            }
            let mut list = self.pcp[cpu].lists[pindex];
            while count > 0 {
                let Some(pfn) = frames.list_pop_tail(&mut list) else {
                    break;
                };
                frames.get_mut(pfn).flags &= !pg::PCP;
                let order = pindex_to_order(pindex);
                self.free_one_page(frames, pfn, order, false);
                count -= 1 << order;
                self.pcp[cpu].count -= 1 << order;
                freed += 1 << order;
            }
            self.pcp[cpu].lists[pindex] = list;
        }
        let hold = Self::lock_hold(cost, freed);
        let wait = self.lock.acquire(now, hold);
        wait + hold
    }

    /// rmqueue() → rmqueue_pcplist() / __rmqueue_pcplist(), behind get_page_from_freelist()'s
    /// watermark checks: an allocation of `order` for `cpu` at time `now`, from its list up to
    /// PAGE_ALLOC_COSTLY_ORDER and for THPs, from buddy otherwise (rmqueue_buddy); `mark` is the watermark
    /// the caller checks against. Returns the pfn (BUDDY/PCP cleared, lru links NIL) and the
    /// cycles to charge (pcp_alloc_cycles, plus lock wait + hold when the zone was taken
    /// from). A refusal costs 0 cycles.
    pub fn rmqueue(
        &mut self,
        frames: &mut FrameTable,
        cpu: usize,
        order: usize,
        now: u64,
        cost: &CostTable,
        mark: u64,
    ) -> (Option<u32>, u64) {
        // get_page_from_freelist(): the first check against the high mark sets ZONE_BELOW_HIGH
        if !self.below_high && !self.watermark_ok(self.wmark.high) {
            self.below_high = true;
        }
        if !self.watermark_ok(mark + (1 << order) - 1) {
            return (None, 0);
        }
        if !pcp_allowed_order(order) {
            let (pfn, cycles) = self.alloc_pages_buddy(frames, order, now, cost);
            if pfn.is_some() {
                self.alloc_zone += 1 << order;
                self.pgalloc += 1 << order;
            }
            return (pfn, cycles);
        }
        let mut cycles = cost.pcp_alloc_cycles as u64;
        self.pcp[cpu].on_alloc();
        self.pcp[cpu].stat_diff = true;
        let pindex = order_to_pindex(order);
        if self.pcp[cpu].lists[pindex].is_empty() {
            let (below_high, reclaim_active) = (self.below_high, self.reclaim_active);
            let batch = self.pcp[cpu].nr_pcp_alloc(order, below_high, reclaim_active);
            let alloced = self.rmqueue_bulk(frames, cpu, order, batch);
            self.alloc_zone += (alloced as u64) << order;
            let hold = Self::lock_hold(cost, (alloced as u64) << order);
            let wait = self.lock.acquire(now, hold);
            cycles += wait + hold;
            self.pcp[cpu].count += alloced << order;
        }
        let pcp = &mut self.pcp[cpu];
        let Some(pfn) = frames.list_pop_head(&mut pcp.lists[pindex]) else {
            return (None, cycles);
        };
        pcp.count -= 1 << order;
        pcp.after_take();
        let p = frames.get_mut(pfn);
        p.flags &= !(pg::PCP | pg::BUDDY);
        p.order = order as u8;
        self.pgalloc += 1 << order;
        (Some(pfn), cycles)
    }

    /// free_unref_page() → free_unref_page_commit(): free a block of `order` to `cpu`'s
    /// pageset, draining nr_pcp_free() pages to buddy (free_pcppages_bulk under the lock)
    /// when the pageset reaches nr_pcp_high(); other orders above PAGE_ALLOC_COSTLY_ORDER straight to buddy
    /// under the lock (free_one_page). Returns cycles to charge.
    #[allow(clippy::too_many_arguments)]
    pub fn free_unref_page(
        &mut self,
        frames: &mut FrameTable,
        cpu: usize,
        pfn: u32,
        order: usize,
        now: u64,
        cost: &CostTable,
    ) -> u64 {
        debug_assert!(self.contains(pfn), "pfn {pfn} outside zone {}", self.nid);
        debug_assert!(
            !frames.get(pfn).has(pg::BUDDY | pg::PCP),
            "double free of pfn {pfn}"
        );
        self.pgfree += 1 << order;
        if !pcp_allowed_order(order) {
            let hold = Self::lock_hold(cost, 1);
            let wait = self.lock.acquire(now, hold);
            self.free_one_page(frames, pfn, order, false);
            return wait + hold;
        }
        let (reclaim_active, below_high) = (self.reclaim_active, self.below_high);
        let pcp = &mut self.pcp[cpu];
        pcp.stat_diff = true;
        frames.list_add(&mut pcp.lists[order_to_pindex(order)], pfn);
        {
            let p = frames.get_mut(pfn);
            p.flags |= pg::PCP;
            p.order = order as u8;
        }
        pcp.count += 1 << order;
        let free_high = pcp.commit_free(order);
        let high = pcp.nr_pcp_high(reclaim_active, below_high, free_high);
        let mut cycles = cost.pcp_free_cycles as u64;
        if pcp.count >= high {
            let to_free = pcp.nr_pcp_free(high, free_high);
            self.free_high += free_high as u64;
            cycles += self.free_pcppages_bulk(frames, cpu, to_free, order, now, cost);
            if self.below_high && self.watermark_ok(self.wmark.high) {
                self.below_high = false;
            }
        }
        cycles
    }

    /// rmqueue_buddy() without the watermark check: __rmqueue_smallest + expand under the
    /// lock for a 2^order block. The head keeps `order` in `Page::order` (folio order); BUDDY
    /// is cleared. The lock hold counts one block moved. Does not count pgalloc (the caller
    /// accounts huge-page allocations).
    pub fn alloc_pages_buddy(
        &mut self,
        frames: &mut FrameTable,
        order: usize,
        now: u64,
        cost: &CostTable,
    ) -> (Option<u32>, u64) {
        if order > MAX_PAGE_ORDER {
            return (None, 0);
        }
        let hold = Self::lock_hold(cost, 1);
        let wait = self.lock.acquire(now, hold);
        let pfn = self.rmqueue_smallest(frames, order);
        if let Some(pfn) = pfn {
            frames.get_mut(pfn).order = order as u8;
        }
        (pfn, wait + hold)
    }

    /// Boot's allocation (memblock-era, before the workload's time 0): rmqueue_buddy without
    /// the lock's calendar, which boot's burst of allocations at one instant would walk
    /// whole each time; boot resets the lock afterwards, so nothing timed is lost.
    pub fn alloc_pages_boot(&mut self, frames: &mut FrameTable, order: usize) -> Option<u32> {
        let pfn = self.rmqueue_smallest(frames, order)?;
        frames.get_mut(pfn).order = order as u8;
        Some(pfn)
    }

    /// __free_one_page(): free a 2^order block straight to buddy, merging with free buddies
    /// (buddy = rel ^ (1 << order) with rel = pfn - start_pfn; never across the zone end).
    /// Untimed and uncounted: the caller holds the lock conceptually and accounts pgfree.
    pub fn free_pages_buddy(&mut self, frames: &mut FrameTable, pfn: u32, order: usize) {
        debug_assert!(
            !frames.get(pfn).has(pg::BUDDY | pg::PCP),
            "double free of pfn {pfn}"
        );
        self.free_one_page(frames, pfn, order, false);
    }

    /// drain_pages_zone(): return every pcp page of `cpu` to buddy, in chunks of
    /// batch << PCP_BATCH_SCALE_MAX, each chunk one zone->lock section. Returns cycles.
    pub fn drain_pages(
        &mut self,
        frames: &mut FrameTable,
        cpu: usize,
        now: u64,
        cost: &CostTable,
    ) -> u64 {
        let mut cycles = 0;
        loop {
            let pcp = &self.pcp[cpu];
            if pcp.count == 0 {
                break;
            }
            let chunk = pcp.batch.max(1) << PCP_BATCH_SCALE_MAX;
            let to_drain = pcp.count.min(chunk);
            cycles += self.free_pcppages_bulk(frames, cpu, to_drain, 0, now + cycles, cost);
        }
        cycles
    }

    /// The pages a CPU's pageset holds before the workload starts (machine.nodes[].boot_pcp_*):
    /// `count` pages from buddy onto its list and `high` (clamped as nr_pcp_alloc clamps it).
    /// Returns the pages moved.
    pub fn fill_pcp(&mut self, frames: &mut FrameTable, cpu: usize, count: u32, high: u32) -> u32 {
        let moved = self.rmqueue_bulk(frames, cpu, 0, count);
        let pcp = &mut self.pcp[cpu];
        pcp.count += moved;
        pcp.high = kclamp(high as i64, pcp.high_min as i64, pcp.high_max as i64) as u32;
        moved
    }

    /// decay_pcp_high(), from the vmstat update of `cpu` (pcp.rs: by how much at each
    /// level; nothing before patch 7): free what lies above the lowered high, holding the
    /// zone lock at `now`. (Its "more to do" result re-arms the worker, which tierlab runs
    /// every second anyway.)
    pub fn decay_pcp_high(
        &mut self,
        frames: &mut FrameTable,
        cpu: usize,
        now: u64,
        cost: &CostTable,
    ) {
        let to_drain = self.pcp[cpu].decay_pcp_high();
        if to_drain > 0 {
            self.free_pcppages_bulk(frames, cpu, to_drain as u32, 0, now, cost);
        }
        self.pcp[cpu].after_decay();
    }

    /// drain_zone_pages(): a remote pageset that expired frees up to a batch, holding the
    /// zone lock at `now`.
    pub fn drain_zone_pages(
        &mut self,
        frames: &mut FrameTable,
        cpu: usize,
        now: u64,
        cost: &CostTable,
    ) {
        let to_drain = self.pcp[cpu].count.min(self.pcp[cpu].batch);
        self.free_pcppages_bulk(frames, cpu, to_drain, 0, now, cost);
    }

    /// Sum of the pageset counts of all CPUs.
    pub fn pcp_pages(&self) -> u64 {
        self.pcp.iter().map(|p| p.count as u64).sum()
    }

    /// zone_watermark_ok() for order 0 with no lowmem reserve (one zone per node).
    pub fn watermark_ok(&self, mark: u64) -> bool {
        self.nr_free > mark
    }
}

/// __setup_per_zone_wmarks(): over all zones (one zone per node; all ZONE_NORMAL-like).
pub fn setup_per_zone_wmarks(
    zones: &mut [Zone],
    min_free_kbytes: u64,
    watermark_scale_factor: u32,
) {
    let lowmem_pages: u64 = zones.iter().map(|z| z.managed_pages).sum();
    for z in zones.iter_mut() {
        z.wmark = zone_wmarks(
            z.managed_pages,
            lowmem_pages,
            min_free_kbytes,
            watermark_scale_factor,
        );
    }
}

/// One zone's share in __setup_per_zone_wmarks: min_free_kbytes split by managed pages over
/// `lowmem_pages` (every zone's), and the min/4 or watermark_scale_factor gap between marks.
pub fn zone_wmarks(
    managed: u64,
    lowmem_pages: u64,
    min_free_kbytes: u64,
    watermark_scale_factor: u32,
) -> Watermarks {
    if lowmem_pages == 0 {
        return Watermarks::default();
    }
    // pages_min = min_free_kbytes >> (PAGE_SHIFT - 10)
    let pages_min = min_free_kbytes >> 2;
    let min = (pages_min as u128 * managed as u128 / lowmem_pages as u128) as u64;
    // mult_frac(managed, watermark_scale_factor, 10000)
    let scaled = (managed as u128 * watermark_scale_factor as u128 / 10_000) as u64;
    let gap = (min >> 2).max(scaled);
    Watermarks {
        min,
        low: min + gap,
        high: min + 2 * gap,
        promo: min + 3 * gap,
    }
}

/// zone_set_pageset_high_and_batch() for every zone (pageset_update on every CPU's pageset).
/// cpus_on_node[i] = number of CPUs on zone i's node (0 for a CPU-less node). The first call
/// sets pcp.high = high_min; later calls keep pcp.high, clamped to the new bounds.
pub fn setup_zone_pagesets(
    zones: &mut [Zone],
    cpus_on_node: &[u32],
    online_cpus: u32,
    high_fraction: u32,
) {
    assert_eq!(zones.len(), cpus_on_node.len(), "one CPU count per zone");
    for (z, &cpus) in zones.iter_mut().zip(cpus_on_node) {
        let batch = zone_batchsize(z.managed_pages).max(1);
        let hs = |fraction| {
            zone_highsize(
                z.managed_pages,
                z.wmark.low,
                batch,
                cpus,
                online_cpus,
                fraction,
            )
        };
        let (high_min, high_max) = if high_fraction != 0 {
            let h = hs(high_fraction);
            (h, h)
        } else {
            (hs(0), hs(MIN_PERCPU_PAGELIST_HIGH_FRACTION))
        };
        for pcp in z.pcp.iter_mut() {
            let first = pcp.high_max == BOOT_PAGESET_HIGH && pcp.batch == BOOT_PAGESET_BATCH;
            pcp.batch = batch;
            pcp.high_min = high_min;
            pcp.high_max = high_max;
            pcp.high = if first {
                high_min
            } else {
                kclamp(pcp.high as i64, high_min as i64, high_max as i64) as u32
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::page::NIL;

    const GIB_PAGES: u64 = 262_144; // 1 GiB / 4 KiB

    /// A test's deterministic random numbers (Knuth's MMIX LCG, high bits).
    fn lcg(mut seed: u64) -> impl FnMut() -> u32 {
        move || {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) as u32
        }
    }

    fn cost() -> CostTable {
        CostTable::default()
    }

    /// Full structural check of one zone: free lists, flags, counts.
    fn check(z: &Zone, frames: &FrameTable) {
        let mut buddy_pages = 0u64;
        let mut heads = 0u64;
        for (o, l) in z.free_area.iter().enumerate() {
            let v: Vec<u32> = frames.list_iter(l).collect();
            assert_eq!(v.len() as u32, l.len, "free_area[{o}] length");
            for &pfn in &v {
                let p = frames.get(pfn);
                assert!(p.has(pg::BUDDY) && !p.has(pg::PCP), "pfn {pfn} flags");
                assert_eq!(p.order as usize, o, "pfn {pfn} order");
                let rel = (pfn - z.start_pfn) as u64;
                assert_eq!(rel % (1 << o), 0, "pfn {pfn} misaligned");
                assert!(rel + (1 << o) <= z.managed_pages);
                buddy_pages += 1 << o;
                heads += 1;
            }
        }
        // the deferred max-order blocks: free, on no list yet, frames maybe uninitialised
        assert_eq!(z.nr_deferred_pages() % (1 << MAX_PAGE_ORDER), 0);
        assert_eq!(
            buddy_pages + z.nr_deferred_pages(),
            z.nr_free,
            "nr_free == pages on free lists + deferred"
        );
        let flagged = (frames.iter_range(z.start_pfn, z.end_pfn()))
            .filter(|(_, p)| p.has(pg::BUDDY))
            .count() as u64;
        assert_eq!(flagged, heads, "only block heads carry PG_buddy");
        let mut pcp_total = 0u64;
        for pcp in &z.pcp {
            let v: Vec<u32> = frames.list_iter(&pcp.lists[0]).collect();
            assert_eq!(v.len() as u32, pcp.count);
            assert_eq!(pcp.lists[0].len, pcp.count);
            for &pfn in &v {
                let p = frames.get(pfn);
                assert!(p.has(pg::PCP) && !p.has(pg::BUDDY));
            }
            pcp_total += pcp.count as u64;
        }
        let pcp_flagged = (frames.iter_range(z.start_pfn, z.end_pfn()))
            .filter(|(_, p)| p.has(pg::PCP))
            .count() as u64;
        assert_eq!(pcp_flagged, pcp_total);
        assert_eq!(z.pcp_pages(), pcp_total);
    }

    /// Blocks free per order, the deferred max-order blocks counted as the tail of
    /// free_area[MAX_PAGE_ORDER] they stand for.
    fn counts(z: &Zone) -> [u32; NR_PAGE_ORDERS] {
        let mut c = [0; NR_PAGE_ORDERS];
        for (o, l) in z.free_area.iter().enumerate() {
            c[o] = l.len;
        }
        c[MAX_PAGE_ORDER] += (z.nr_deferred_pages() >> MAX_PAGE_ORDER) as u32;
        c
    }

    /// A 1 GiB zone on node 0 with `ncpus` CPUs (all on node 0), watermarks from the defaults
    /// (min_free_kbytes 4096, wsf 10 → min 1024 low 1286 high 1548) and the given fraction.
    fn gib_zone(ncpus: usize, fraction: u32) -> (FrameTable, Vec<Zone>) {
        let mut frames = FrameTable::new(&[GIB_PAGES]);
        let z = Zone::new(0, 0, GIB_PAGES, ncpus, &mut frames);
        let mut zones = vec![z];
        setup_per_zone_wmarks(&mut zones, calculate_min_free_kbytes(GIB_PAGES), 10);
        setup_zone_pagesets(&mut zones, &[ncpus as u32], ncpus as u32, fraction);
        (frames, zones)
    }

    #[test]
    fn batchsize_matches_kernel_formula() {
        // ≥ 1 GiB: min(262144>>10 = 256, 256) / 4 = 64; rounddown_pow2(64+32=96) - 1 = 63
        assert_eq!(zone_batchsize(GIB_PAGES), 63);
        assert_eq!(zone_batchsize(64 * GIB_PAGES), 63);
        // 512 MiB = 131072 pages: 128/4 = 32; rounddown_pow2(48) - 1 = 31
        assert_eq!(zone_batchsize(131_072), 31);
        // 64 MiB = 16384 pages: 16/4 = 4; rounddown_pow2(6) - 1 = 3
        assert_eq!(zone_batchsize(16_384), 3);
        // 16 MiB = 4096 pages: 4/4 = 1; rounddown_pow2(1 + 0) - 1 = 0 (kernel value; the
        // pageset setup uses max(1, ·))
        assert_eq!(zone_batchsize(4_096), 0);
        // 1000 pages: 0/4 = 0 → 1; rounddown_pow2(1) - 1 = 0
        assert_eq!(zone_batchsize(1_000), 0);
    }

    #[test]
    fn min_free_kbytes_formula_and_clamps() {
        // 1 GiB: lowmem_kbytes 1048576; *16 = 16777216; sqrt = 4096
        assert_eq!(calculate_min_free_kbytes(GIB_PAGES), 4096);
        // 16 GiB: 16777216 kB; *16 = 268435456; sqrt = 16384
        assert_eq!(calculate_min_free_kbytes(16 * GIB_PAGES), 16384);
        // 4 GiB: 4194304 kB * 16 = 67108864; sqrt = 8192
        assert_eq!(calculate_min_free_kbytes(4 * GIB_PAGES), 8192);
        // 2 GiB: 2097152*16 = 33554432; sqrt = 5792.6 → 5792 (floor)
        assert_eq!(calculate_min_free_kbytes(2 * GIB_PAGES), 5792);
        // lower clamp: 100 pages = 400 kB; *16 = 6400; sqrt 80 → 128
        assert_eq!(calculate_min_free_kbytes(100), 128);
        assert_eq!(calculate_min_free_kbytes(0), 128);
        // 256 pages = 1024 kB; *16 = 16384; sqrt = 128 exactly
        assert_eq!(calculate_min_free_kbytes(256), 128);
        // upper clamp: 4 TiB = 2^30 pages = 2^32 kB; *16 = 2^36; sqrt 2^18 = 262144 exactly
        assert_eq!(calculate_min_free_kbytes(1 << 30), 262_144);
        // 8 TiB: sqrt(2^37) = 370727 → 262144
        assert_eq!(calculate_min_free_kbytes(1 << 31), 262_144);
    }

    #[test]
    fn watermarks_single_4gib_zone() {
        let pages = 4 * GIB_PAGES; // 1048576
        let mut frames = FrameTable::new(&[pages]);
        let mut zones = vec![Zone::new(0, 0, pages, 1, &mut frames)];
        setup_per_zone_wmarks(&mut zones, calculate_min_free_kbytes(pages), 10);
        // min_free_kbytes 8192 → pages_min 2048; tmp = 2048*1048576/1048576 = 2048
        // gap = max(2048>>2 = 512, 1048576*10/10000 = 1048) = 1048
        assert_eq!(
            zones[0].wmark,
            Watermarks {
                min: 2048,
                low: 3096,
                high: 4144,
                promo: 5192
            }
        );
    }

    #[test]
    fn watermarks_split_proportionally_over_two_zones() {
        // 1 GiB + 3 GiB: sum 1048576 → min_free_kbytes 8192 → pages_min 2048
        let (a, b) = (GIB_PAGES, 3 * GIB_PAGES);
        let mut frames = FrameTable::new(&[a, b]);
        let za = Zone::new(0, 0, a, 2, &mut frames);
        let zb = Zone::new(1, a as u32, b, 2, &mut frames);
        let mut zones = vec![za, zb];
        setup_per_zone_wmarks(&mut zones, calculate_min_free_kbytes(a + b), 10);
        // zone 0: tmp = 2048*262144/1048576 = 512; gap = max(128, 262.144→262) = 262
        assert_eq!(
            zones[0].wmark,
            Watermarks {
                min: 512,
                low: 774,
                high: 1036,
                promo: 1298
            }
        );
        // zone 1: tmp = 2048*786432/1048576 = 1536; gap = max(384, 786.432→786) = 786
        assert_eq!(
            zones[1].wmark,
            Watermarks {
                min: 1536,
                low: 2322,
                high: 3108,
                promo: 3894
            }
        );
        // wsf 1: zone 0 gap = max(128, 26) = 128 (the tmp>>2 term wins)
        setup_per_zone_wmarks(&mut zones, 8192, 1);
        assert_eq!(zones[0].wmark.low, 512 + 128);
        assert_eq!(zones[1].wmark.promo, 1536 + 3 * 384);
    }

    #[test]
    fn watermarks_truncate_like_integer_division() {
        let mut frames = FrameTable::new(&[1000, 2000]);
        let za = Zone::new(0, 0, 1000, 1, &mut frames);
        let zb = Zone::new(1, 1000, 2000, 1, &mut frames);
        let mut zones = vec![za, zb];
        // pages_min = 1000 >> 2 = 250; sum managed 3000
        setup_per_zone_wmarks(&mut zones, 1000, 10);
        // zone 0: tmp = 250*1000/3000 = 83 (83.3); gap = max(83>>2 = 20, 1000*10/10000 = 1) = 20
        assert_eq!(
            zones[0].wmark,
            Watermarks {
                min: 83,
                low: 103,
                high: 123,
                promo: 143
            }
        );
        // zone 1: tmp = 250*2000/3000 = 166 (166.7); gap = max(41, 2) = 41
        assert_eq!(
            zones[1].wmark,
            Watermarks {
                min: 166,
                low: 207,
                high: 248,
                promo: 289
            }
        );
    }

    #[test]
    fn highsize_with_and_without_fraction() {
        let managed = 4 * GIB_PAGES; // 1048576, low wmark 3096 (see the 4 GiB test)
                                     // fraction 0: total = low = 3096; 4 CPUs on the node → 774; max(774, 63*4 = 252)
        assert_eq!(zone_highsize(managed, 3096, 63, 4, 8, 0), 774);
        // fraction 8: total = 1048576/8 = 131072; /4 = 32768
        assert_eq!(zone_highsize(managed, 3096, 63, 4, 8, 8), 32768);
        // CPU-less node: split over all 8 online CPUs: 3096/8 = 387; 131072/8 = 16384
        assert_eq!(zone_highsize(managed, 3096, 63, 0, 8, 0), 387);
        assert_eq!(zone_highsize(managed, 3096, 63, 0, 8, 8), 16384);
        // batch*4 floor: low 100 / 4 CPUs = 25 < 252
        assert_eq!(zone_highsize(managed, 100, 63, 4, 8, 0), 252);
        // fraction 1024: 1048576/1024 = 1024; /4 = 256 > 252
        assert_eq!(zone_highsize(managed, 3096, 63, 4, 8, 1024), 256);
    }

    #[test]
    fn pageset_setup_uses_batchsize_and_highsize() {
        // Node 0: 1 GiB, 2 CPUs; node 1: 16 MiB, no CPUs; 2 CPUs online.
        let mut frames = FrameTable::new(&[GIB_PAGES, 4096]);
        let za = Zone::new(0, 0, GIB_PAGES, 2, &mut frames);
        let zb = Zone::new(1, GIB_PAGES as u32, 4096, 2, &mut frames);
        let mut zones = vec![za, zb];
        setup_per_zone_wmarks(&mut zones, 4096, 10);
        // pages_min 1024; sum 266240
        // zone 0: tmp = 1024*262144/266240 = 1008 (1008.2); gap = max(252, 262) = 262 → low 1270
        // zone 1: tmp = 1024*4096/266240 = 15 (15.75); gap = max(3, 4) = 4 → low 19
        assert_eq!(zones[0].wmark.low, 1270);
        assert_eq!(zones[1].wmark.low, 19);
        setup_zone_pagesets(&mut zones, &[2, 0], 2, 0);
        let p0 = &zones[0].pcp[1];
        // batch 63; high_min = max(1270/2 = 635, 252) = 635; high_max = max(262144/8/2, 252) = 16384
        assert_eq!(
            (p0.batch, p0.high_min, p0.high_max, p0.high),
            (63, 635, 16384, 635)
        );
        let p1 = &zones[1].pcp[0];
        // batch = max(1, 0) = 1; CPU-less: split over 2 online CPUs
        // high_min = max(19/2 = 9, 4) = 9; high_max = max(4096/8/2 = 256, 4) = 256
        assert_eq!(
            (p1.batch, p1.high_min, p1.high_max, p1.high),
            (1, 9, 256, 9)
        );
        // manual fraction: high_min == high_max
        setup_zone_pagesets(&mut zones, &[2, 0], 2, 1024);
        let p0 = &zones[0].pcp[0];
        // 262144/1024 = 256; /2 = 128 < 252 → 252; old high 635 clamps to 252
        assert_eq!((p0.high_min, p0.high_max, p0.high), (252, 252, 252));
    }

    #[test]
    fn zone_new_frees_largest_aligned_blocks_relative_to_zone_start() {
        // zone of 1029 (odd) pages starting at global pfn 3 (not aligned)
        let mut frames = FrameTable::new(&[3, 1029]);
        let z = Zone::new(1, 3, 1029, 1, &mut frames);
        // 1029 = 1024 + 4 + 1 → rel 0 order 10, rel 1024 order 2, rel 1028 order 0
        let mut want = [0; NR_PAGE_ORDERS];
        want[10] = 1;
        want[2] = 1;
        want[0] = 1;
        assert_eq!(counts(&z), want);
        assert_eq!(z.nr_free, 1029);
        // the order-10 block is deferred: counted free, on no list yet
        assert_eq!(z.nr_deferred_pages(), 1024);
        assert!(z.free_area[10].is_empty());
        assert_eq!(z.free_area[2].head, 3 + 1024);
        assert_eq!(z.free_area[0].head, 3 + 1028);
        check(&z, &frames);
        let mut z = z;
        assert!(z.deferred_grow_zone(&mut frames));
        assert!(!z.deferred_grow_zone(&mut frames), "nothing left to pull");
        assert_eq!(z.nr_deferred_pages(), 0);
        assert_eq!(counts(&z), want);
        assert_eq!(z.nr_free, 1029);
        assert_eq!(z.free_area[10].head, 3);
        assert_eq!(frames.get(3).order, 10);
        assert!(!frames.get(4).has(pg::BUDDY), "tail page of a free block");
        check(&z, &frames);
    }

    #[test]
    fn order0_alloc_splits_a_max_order_block_and_free_merges_back() {
        let mut frames = FrameTable::new(&[1024]);
        let mut z = Zone::new(0, 0, 1024, 1, &mut frames);
        let c = cost();
        let (pfn, cyc) = z.alloc_pages_buddy(&mut frames, 0, 0, &c);
        assert_eq!(pfn, Some(0));
        // one block moved: 200 + 40
        assert_eq!(cyc, 240);
        // expand(0, 10) leaves the upper halves 512, 256, ..., 1 on orders 9..0
        let mut want = [1; NR_PAGE_ORDERS];
        want[10] = 0;
        assert_eq!(counts(&z), want);
        for o in 0..MAX_PAGE_ORDER {
            assert_eq!(z.free_area[o].head, 1 << o);
        }
        assert_eq!(z.nr_free, 1023);
        assert!(!frames.get(0).has(pg::BUDDY));
        check(&z, &frames);
        z.free_pages_buddy(&mut frames, 0, 0);
        let mut want = [0; NR_PAGE_ORDERS];
        want[10] = 1;
        assert_eq!(counts(&z), want);
        assert_eq!(z.nr_free, 1024);
        check(&z, &frames);
    }

    #[test]
    fn odd_zone_allocs_split_smallest_block_and_frees_restore_blocks() {
        let mut frames = FrameTable::new(&[3, 1029]);
        let mut z = Zone::new(1, 3, 1029, 1, &mut frames);
        let c = cost();
        let mut got = vec![];
        // 1st: the order-0 block at rel 1028
        got.push(z.alloc_pages_buddy(&mut frames, 0, 0, &c).0.unwrap());
        assert_eq!(got[0], 3 + 1028);
        // 2nd: splits order 2 at rel 1024 → keeps 1024, frees 1026 (order 1), 1025 (order 0)
        got.push(z.alloc_pages_buddy(&mut frames, 0, 1000, &c).0.unwrap());
        assert_eq!(got[1], 3 + 1024);
        let mut want = [0; NR_PAGE_ORDERS];
        want[10] = 1;
        want[1] = 1;
        want[0] = 1;
        assert_eq!(counts(&z), want);
        assert_eq!(z.free_area[1].head, 3 + 1026);
        assert_eq!(z.free_area[0].head, 3 + 1025);
        // 3rd: rel 1025; 4th: splits order 1 at 1026 → keeps 1026, frees 1027
        got.push(z.alloc_pages_buddy(&mut frames, 0, 2000, &c).0.unwrap());
        got.push(z.alloc_pages_buddy(&mut frames, 0, 3000, &c).0.unwrap());
        assert_eq!(got[2..], [3 + 1025, 3 + 1026]);
        assert_eq!(z.free_area[0].head, 3 + 1027);
        assert_eq!(z.nr_free, 1025);
        check(&z, &frames);
        for pfn in got {
            z.free_pages_buddy(&mut frames, pfn, 0);
            check(&z, &frames);
        }
        let mut want = [0; NR_PAGE_ORDERS];
        want[10] = 1;
        want[2] = 1;
        want[0] = 1;
        assert_eq!(counts(&z), want);
        assert_eq!(z.nr_free, 1029);
    }

    #[test]
    fn buddy_never_merges_across_the_zone_end() {
        // zone A: pfn 0..3 (order-1 block at 0, order-0 at 2); zone B: pfn 3 (order 0).
        // pfn 2's order-0 buddy is pfn 3, free with order 0 — but in zone B.
        let mut frames = FrameTable::new(&[3, 1]);
        let mut a = Zone::new(0, 0, 3, 1, &mut frames);
        let b = Zone::new(1, 3, 1, 1, &mut frames);
        assert!(frames.get(3).has(pg::BUDDY) && frames.get(3).order == 0);
        let c = cost();
        assert_eq!(a.alloc_pages_buddy(&mut frames, 0, 0, &c).0, Some(2));
        a.free_pages_buddy(&mut frames, 2, 0);
        assert_eq!(
            frames.list_iter(&a.free_area[0]).collect::<Vec<_>>(),
            vec![2]
        );
        assert_eq!(
            frames.list_iter(&a.free_area[1]).collect::<Vec<_>>(),
            vec![0]
        );
        assert_eq!(
            frames.list_iter(&b.free_area[0]).collect::<Vec<_>>(),
            vec![3]
        );
        assert_eq!((a.nr_free, b.nr_free), (3, 1));
        check(&a, &frames);
        check(&b, &frames);
        // and B's page does not merge downwards into A (its buddy pfn 2 is below B's start:
        // rel 0 ^ 1 = rel 1, outside B's single page)
        let mut b = b;
        assert_eq!(b.alloc_pages_buddy(&mut frames, 0, 0, &c).0, Some(3));
        b.free_pages_buddy(&mut frames, 3, 0);
        assert_eq!(counts(&b)[0], 1);
        assert_eq!(counts(&a)[0], 1);
        check(&a, &frames);
        check(&b, &frames);
    }

    #[test]
    fn pcp_refill_takes_one_lock_for_a_batch_then_hits_without_lock() {
        // fraction 1024: high_min = high_max = max(262144/1024/2 = 128, 252) = 252; batch 63
        let (mut frames, mut zones) = gib_zone(2, 1024);
        let z = &mut zones[0];
        assert_eq!((z.pcp[0].batch, z.pcp[0].high), (63, 252));
        let c = cost();
        let (p, cyc) = z.rmqueue(&mut frames, 0, 0, 1_000, &c, z.wmark.low);
        let p = p.unwrap();
        // nr_pcp_alloc: batch = 63 << 0; max_nr = max(252 - 0 - 63, 63) = 189 → 63
        // cost = pcp 60 + hold (200 + 40*63 = 2720), no wait
        assert_eq!(cyc, 60 + 2720);
        assert_eq!(z.lock.acquisitions, 1);
        assert_eq!(z.lock.hold_cycles, 2720);
        assert_eq!(z.pcp[0].count, 62);
        assert_eq!(z.pcp[0].alloc_factor, 1);
        assert_eq!(z.nr_free, GIB_PAGES - 63);
        assert_eq!(z.pcp_pages(), 62);
        let pg0 = frames.get(p);
        assert!(!pg0.has(pg::PCP) && !pg0.has(pg::BUDDY));
        assert_eq!((pg0.lru_next, pg0.lru_prev), (NIL, NIL));
        check(z, &frames);
        // 62 more come from the pageset: 60 cycles each, no lock
        for i in 0..62 {
            let (q, cyc) = z.rmqueue(&mut frames, 0, 0, 10_000 + i, &c, z.wmark.low);
            assert!(q.is_some());
            assert_eq!(cyc, 60);
        }
        assert_eq!(z.lock.acquisitions, 1);
        assert_eq!(z.pcp[0].count, 0);
        assert_eq!(z.pgalloc, 63);
        // next refill is doubled: batch = 63 << 1 = 126 ≤ max_nr 189 → 126 pages, factor 2
        let (_, cyc) = z.rmqueue(&mut frames, 0, 0, 100_000, &c, z.wmark.low);
        assert_eq!(cyc, 60 + 200 + 40 * 126);
        assert_eq!(z.lock.acquisitions, 2);
        assert_eq!(z.pcp[0].count, 125);
        assert_eq!(z.pcp[0].alloc_factor, 2);
        assert_eq!(z.nr_free, GIB_PAGES - 63 - 126);
        // the other CPU's pageset is untouched
        assert_eq!(z.pcp[1].count, 0);
        check(z, &frames);
    }

    #[test]
    fn auto_tuned_high_grows_on_refill_above_high_wmark() {
        // fraction 0: high_min = max(1286/2 = 643, 252) = 643; high_max = 262144/8/2 = 16384
        let (mut frames, mut zones) = gib_zone(2, 0);
        let z = &mut zones[0];
        assert_eq!((z.pcp[0].high_min, z.pcp[0].high_max), (643, 16384));
        let c = cost();
        z.rmqueue(&mut frames, 0, 0, 0, &c, 0);
        // not below high: high = min(643 + 63, 16384) = 706
        assert_eq!(z.pcp[0].high, 706);
        assert!(!z.below_high);
    }

    /// Allocate `n` pages straight from buddy (no pageset involvement), spaced in time.
    fn take(z: &mut Zone, frames: &mut FrameTable, n: usize) -> Vec<u32> {
        let c = cost();
        (0..n)
            .map(|i| {
                z.alloc_pages_buddy(frames, 0, i as u64 * 1_000, &c)
                    .0
                    .unwrap()
            })
            .collect()
    }

    #[test]
    fn frees_beyond_high_spill_a_batch_to_buddy() {
        let (mut frames, mut zones) = gib_zone(2, 1024); // high 252, batch 63
        let z = &mut zones[0];
        let pages = take(z, &mut frames, 300);
        let acq = z.lock.acquisitions;
        let c = cost();
        let t0 = 10_000_000;
        for (i, &pfn) in pages.iter().enumerate() {
            let cyc = z.free_unref_page(&mut frames, 0, pfn, 0, t0 + i as u64 * 100_000, &c);
            if i + 1 == 252 {
                // count reaches 252 ≥ high → nr_pcp_free = clamp(free_count 252, 63, 252-63)
                // = 189 pages; cost 60 + (200 + 40*189 = 7760)
                assert_eq!(cyc, 60 + 7760);
                assert_eq!(z.pcp[0].count, 63);
            } else {
                assert_eq!(cyc, 60, "free #{} should not take the lock", i + 1);
            }
        }
        assert_eq!(z.lock.acquisitions, acq + 1);
        // 300 frees: 189 spilled, 63 + 48 = 111 left on the pageset
        assert_eq!(z.pcp[0].count, 111);
        // nr_free excludes pcp pages
        assert_eq!(z.nr_free, GIB_PAGES - 300 + 189);
        assert_eq!(z.pgfree, 300);
        // the oldest frees (list tail) went back first: pages[0..189] spilled
        assert!(pages[..189].iter().all(|&p| !frames.get(p).has(pg::PCP)));
        assert!(pages[189..].iter().all(|&p| frames.get(p).has(pg::PCP)));
        check(z, &frames);
    }

    #[test]
    fn reclaim_active_caps_the_pageset_at_four_batches() {
        // auto-tuned zone: high 643 > 4*batch = 252
        let (mut frames, mut zones) = gib_zone(2, 0);
        let c = cost();
        for reclaim in [false, true] {
            let z = &mut zones[0];
            z.reclaim_active = reclaim;
            let pages = take(z, &mut frames, 252);
            for (i, &pfn) in pages.iter().enumerate() {
                z.free_unref_page(&mut frames, 1, pfn, 0, 1_000_000 + i as u64, &c);
            }
            if reclaim {
                // nr_pcp_high returns min(63 << 2, high) = 252 → spill clamp(252, 63, 189) = 189
                assert_eq!(z.pcp[1].count, 63);
            } else {
                // high 643: nothing spills
                assert_eq!(z.pcp[1].count, 252);
            }
            check(z, &frames);
            z.drain_pages(&mut frames, 1, 5_000_000, &c);
            assert_eq!(z.nr_free, GIB_PAGES);
        }
    }

    #[test]
    fn drain_returns_everything_in_scaled_batches() {
        let (mut frames, mut zones) = gib_zone(1, 0);
        let z = &mut zones[0];
        let c = cost();
        // batch 63: drain chunk = 63 << 5 = 2016. Free 3000 pages without spilling:
        // raise high so nothing spills.
        z.pcp[0].high_min = 10_000;
        z.pcp[0].high_max = 10_000;
        let pages = take(z, &mut frames, 3000);
        for &pfn in &pages {
            z.free_unref_page(&mut frames, 0, pfn, 0, 0, &c);
        }
        assert_eq!(z.pcp[0].count, 3000);
        let acq = z.lock.acquisitions;
        let free_at = z.lock.free_at();
        let now = free_at + 1;
        let cyc = z.drain_pages(&mut frames, 0, now, &c);
        // two sections: 2016 then 984 pages; the second starts when the first ends (no wait)
        assert_eq!(z.lock.acquisitions, acq + 2);
        assert_eq!(cyc, (200 + 40 * 2016) + (200 + 40 * 984));
        assert_eq!(z.pcp_pages(), 0);
        assert_eq!(z.nr_free, GIB_PAGES);
        let mut want = [0; NR_PAGE_ORDERS];
        want[10] = 256;
        assert_eq!(counts(z), want);
        check(z, &frames);
    }

    #[test]
    fn lock_contention_waits_exactly_the_remaining_hold() {
        let mut l = ZoneLock::default();
        assert_eq!(l.acquire(100, 50), 0); // held 100..150
        assert_eq!(l.acquire(120, 30), 30); // waits 120→150, held 150..180
        assert_eq!(l.acquire(200, 10), 0);
        assert_eq!(
            (l.acquisitions, l.contended, l.wait_cycles, l.hold_cycles),
            (3, 1, 30, 90)
        );
        assert_eq!(l.free_at(), 210);
        // A request from a CPU behind in time takes the gap before later holds.
        assert_eq!(l.acquire(185, 10), 0); // 185..195 is free
                                           // 195..200 is too short for a hold of 10: it waits for 210.
        assert_eq!(l.acquire(186, 10), 24);

        // through the allocator: two CPUs refill at the same instant
        let (mut frames, mut zones) = gib_zone(2, 1024);
        let z = &mut zones[0];
        let c = cost();
        let (_, a) = z.rmqueue(&mut frames, 0, 0, 5_000, &c, 0);
        let (_, b) = z.rmqueue(&mut frames, 1, 0, 5_000, &c, 0);
        let hold = 200 + 40 * 63; // 2720
        assert_eq!(a, 60 + hold);
        assert_eq!(b, 60 + hold + hold); // waits the whole first hold
        assert_eq!(z.lock.contended, 1);
        assert_eq!(z.lock.wait_cycles, hold);
        // CPU 1 a bit later: waits only the remainder
        let (mut frames, mut zones) = gib_zone(2, 1024);
        let z = &mut zones[0];
        z.rmqueue(&mut frames, 0, 0, 5_000, &c, 0);
        let (_, b) = z.rmqueue(&mut frames, 1, 0, 5_000 + 1_000, &c, 0);
        assert_eq!(b, 60 + (hold - 1_000) + hold);
    }

    #[test]
    fn watermark_refusal_and_below_high_flag() {
        let mut frames = FrameTable::new(&[64]);
        let mut zones = vec![Zone::new(0, 0, 64, 1, &mut frames)];
        zones[0].wmark = Watermarks {
            min: 10,
            low: 20,
            high: 30,
            promo: 40,
        };
        setup_zone_pagesets(&mut zones, &[1], 1, 0);
        let z = &mut zones[0];
        let c = cost();
        assert!(z.watermark_ok(63) && !z.watermark_ok(64));
        // nr_free 64 ≤ mark 64 → refused, nothing moves, no cost
        assert_eq!(z.rmqueue(&mut frames, 0, 0, 0, &c, 64), (None, 0));
        assert_eq!(z.nr_free, 64);
        assert_eq!(z.lock.acquisitions, 0);
        assert!(!z.below_high);
        // mark 63: allowed
        assert!(z.rmqueue(&mut frames, 0, 0, 0, &c, 63).0.is_some());
        // drain nr_free down to exactly the high mark via buddy allocations
        let _ = z.drain_pages(&mut frames, 0, 0, &c);
        let mut held = vec![];
        while z.nr_free > 30 {
            held.push(z.alloc_pages_buddy(&mut frames, 0, 0, &c).0.unwrap());
        }
        assert!(!z.below_high);
        // nr_free 30 ≤ high 30 → ZONE_BELOW_HIGH, but 30 > min 10 → page granted
        assert!(z.rmqueue(&mut frames, 0, 0, 0, &c, z.wmark.min).0.is_some());
        assert!(z.below_high);
        let _ = z.drain_pages(&mut frames, 0, 0, &c);
        // at exactly nr_free == min the allocation is refused
        while z.nr_free > 10 {
            held.push(z.alloc_pages_buddy(&mut frames, 0, 0, &c).0.unwrap());
        }
        assert_eq!(z.rmqueue(&mut frames, 0, 0, 0, &c, z.wmark.min).0, None);
        check(z, &frames);
    }

    #[test]
    fn below_high_is_cleared_by_a_spill_that_restores_the_high_mark() {
        // 1 CPU, fraction 1024: high = max(262144/1024/1 = 256, 252) = 256, fixed
        let (mut frames, mut zones) = gib_zone(1, 1024);
        let z = &mut zones[0];
        assert_eq!(z.pcp[0].high, 256);
        let c = cost();
        let pages = take(z, &mut frames, 300);
        z.below_high = true;
        // nr_free 261844 > high 1548, so the first spill (the 256th free) clears the flag
        for (i, &pfn) in pages.iter().enumerate().take(255) {
            z.free_unref_page(&mut frames, 0, pfn, 0, i as u64, &c);
        }
        assert!(z.below_high);
        assert_eq!(z.pcp[0].count, 255);
        z.free_unref_page(&mut frames, 0, pages[255], 0, 1_000, &c);
        // spilled nr_pcp_free = clamp(free_count 256, batch 63, 256 - 63 = 193) = 193
        assert_eq!(z.pcp[0].count, 256 - 193);
        assert!(!z.below_high);
    }

    #[test]
    fn frames_are_conserved_under_a_random_mixed_sequence() {
        // 128 MiB zone on node 1 starting at the odd global pfn 7; 4 CPUs on the node.
        // batch: (32768 >> 10) / 4 = 8 → rounddown_pow2(12) - 1 = 7
        let pages = 32_768u64;
        let mut frames = FrameTable::new(&[7, pages]);
        let z0 = Zone::new(0, 0, 7, 4, &mut frames);
        let z1 = Zone::new(1, 7, pages, 4, &mut frames);
        let mut zones = vec![z0, z1];
        setup_per_zone_wmarks(&mut zones, calculate_min_free_kbytes(pages + 7), 10);
        setup_zone_pagesets(&mut zones, &[0, 4], 4, 0);
        let mut z = zones.pop().unwrap();
        assert_eq!(z.pcp[0].batch, 7);
        let c = cost();
        let mut rnd = lcg(0x2545_f491_4f6c_dd1d);
        let mut allocated: Vec<u32> = vec![];
        let mut now = 0u64;
        let mut refused = 0;
        for step in 0..100_000u32 {
            now += 100;
            let cpu = (rnd() % 4) as usize;
            let r = rnd() % 100;
            // bias towards allocation in the first half, towards freeing in the second
            let alloc_pct = if step < 50_000 { 90 } else { 40 };
            if r < alloc_pct || allocated.is_empty() {
                match z.rmqueue(&mut frames, cpu, 0, now, &c, z.wmark.min) {
                    (Some(pfn), _) => {
                        assert!(z.contains(pfn));
                        frames.get_mut(pfn).flags |= pg::USED;
                        allocated.push(pfn);
                    }
                    (None, _) => refused += 1,
                }
            } else if r < 99 {
                let i = rnd() as usize % allocated.len();
                let pfn = allocated.swap_remove(i);
                frames.get_mut(pfn).flags &= !pg::USED;
                z.free_unref_page(&mut frames, cpu, pfn, 0, now, &c);
            } else {
                z.drain_pages(&mut frames, cpu, now, &c);
                z.reclaim_active = !z.reclaim_active;
            }
            assert_eq!(
                z.nr_free + z.pcp_pages() + allocated.len() as u64,
                pages,
                "step {step}"
            );
            if step % 5_000 == 0 {
                check(&z, &frames);
            }
        }
        assert!(refused > 0, "the sequence should reach the min watermark");
        check(&z, &frames);
        let used = (7..7 + pages as u32)
            .filter(|&p| frames.get(p).has(pg::USED))
            .count();
        assert_eq!(used, allocated.len());
        assert_eq!(z.pgalloc - z.pgfree, allocated.len() as u64);
        // give everything back: the zone must re-form its 32 max-order blocks
        for pfn in allocated.drain(..) {
            frames.get_mut(pfn).flags &= !pg::USED;
            z.free_unref_page(&mut frames, 0, pfn, 0, now, &c);
        }
        for cpu in 0..4 {
            z.drain_pages(&mut frames, cpu, now, &c);
        }
        let mut want = [0; NR_PAGE_ORDERS];
        want[10] = 32;
        assert_eq!(counts(&z), want);
        assert_eq!(z.nr_free, pages);
        check(&z, &frames);
    }

    #[test]
    fn thps_come_and_go_through_the_pcp_thp_list_two_at_a_time() {
        let (mut frames, mut zones) = gib_zone(2, 0);
        let z = &mut zones[0];
        let c = cost();
        let before = z.nr_free;
        // A refill takes 2 blocks (batch >> 9, at least 2); the second waits on the list.
        let a = z.rmqueue(&mut frames, 0, 9, 0, &c, 0).0.unwrap();
        assert_eq!(z.nr_free, before - 1024);
        assert_eq!(z.pcp[0].count, 512);
        assert_eq!((a - z.start_pfn) % 512, 0, "naturally aligned");
        assert_eq!(frames.get(a).order, 9);
        let b = z.rmqueue(&mut frames, 0, 9, 0, &c, 0).0.unwrap();
        assert_eq!(z.nr_free, before - 1024, "served from the list");
        assert_eq!(z.pcp[0].count, 0);
        // Frees go back to the THP list, not buddy, while the list is under high.
        z.free_unref_page(&mut frames, 1, b, 9, 0, &c);
        assert!(frames.get(b).has(pg::PCP));
        assert_eq!(z.pcp[1].count, 512);
        // An order-10 block is not allowed on the lists.
        let big = z.rmqueue(&mut frames, 1, 10, 0, &c, 0).0.unwrap();
        assert!(!frames.get(big).has(pg::PCP));
        z.free_unref_page(&mut frames, 1, big, 10, 0, &c);
        z.free_unref_page(&mut frames, 0, a, 9, 0, &c);
        let drained = z.drain_pages(&mut frames, 0, 0, &c) + z.drain_pages(&mut frames, 1, 0, &c);
        assert!(drained > 0);
        assert_eq!(z.nr_free, before, "every block back in buddy");
        check(z, &frames);
    }

    /// A zone whose deferred blocks were all pulled in at boot: the free lists the kernel
    /// builds without CONFIG_DEFERRED_STRUCT_PAGE_INIT (every max-order block on the list
    /// tail in pfn order).
    fn eager_zone(nid: u8, start: u32, pages: u64, frames: &mut FrameTable) -> Zone {
        let mut z = Zone::new(nid, start, pages, 2, frames);
        while z.deferred_grow_zone(frames) {}
        assert_eq!(z.nr_deferred_pages(), 0);
        z
    }

    #[test]
    fn a_lazily_grown_zone_hands_out_the_eager_pfn_sequence() {
        // Three sections and an odd tail, starting at an unaligned pfn, so blocks straddle
        // section boundaries; orders 0, 3 (pcp), 9 (THP lists) and 10 (buddy).
        let pages = 3 * 32_768 + 1029;
        let build = |eager: bool| {
            let mut frames = FrameTable::new(&[7, pages]);
            let mut zones = vec![if eager {
                eager_zone(1, 7, pages, &mut frames)
            } else {
                Zone::new(1, 7, pages, 2, &mut frames)
            }];
            setup_per_zone_wmarks(&mut zones, calculate_min_free_kbytes(pages), 10);
            setup_zone_pagesets(&mut zones, &[2], 2, 0);
            (frames, zones.pop().unwrap())
        };
        let (mut lf, mut lazy) = build(false);
        let (mut ef, mut eager) = build(true);
        assert_eq!(lazy.nr_free, eager.nr_free);
        assert_eq!(counts(&lazy), counts(&eager));
        let c = cost();
        let mut rnd = lcg(0x9e37_79b9_7f4a_7c15);
        let mut held: Vec<(u32, usize)> = vec![];
        for step in 0..40_000u64 {
            let cpu = (rnd() % 2) as usize;
            let now = step * 1_000;
            let r = rnd() % 100;
            if r < 60 || held.is_empty() {
                let order = [0, 0, 0, 3, 9, 10][rnd() as usize % 6];
                let (a, _) = lazy.rmqueue(&mut lf, cpu, order, now, &c, lazy.wmark.min);
                let (b, _) = eager.rmqueue(&mut ef, cpu, order, now, &c, eager.wmark.min);
                assert_eq!(a, b, "step {step}: order {order}");
                if let Some(pfn) = a {
                    held.push((pfn, order));
                }
            } else if r < 98 {
                let (pfn, order) = held.swap_remove(rnd() as usize % held.len());
                lazy.free_unref_page(&mut lf, cpu, pfn, order, now, &c);
                eager.free_unref_page(&mut ef, cpu, pfn, order, now, &c);
            } else {
                lazy.drain_pages(&mut lf, cpu, now, &c);
                eager.drain_pages(&mut ef, cpu, now, &c);
            }
            assert_eq!(lazy.nr_free, eager.nr_free, "step {step}");
        }
        assert_eq!(counts(&lazy), counts(&eager));
        // `check` follows the order-0 pageset lists only: empty them all first
        for cpu in 0..2 {
            lazy.drain_pages(&mut lf, cpu, 0, &c);
            eager.drain_pages(&mut ef, cpu, 0, &c);
        }
        assert_eq!(counts(&lazy), counts(&eager));
        assert_eq!(lazy.nr_free, eager.nr_free);
        check(&lazy, &lf);
        check(&eager, &ef);
        assert!(lf.present_sections() <= ef.present_sections());
    }

    // The check is a debug_assert: a release build (`cargo test --release`) frees twice.
    #[cfg(debug_assertions)]
    #[test]
    #[should_panic(expected = "double free")]
    fn double_free_is_caught_in_debug_builds() {
        let (mut frames, mut zones) = gib_zone(1, 0);
        let z = &mut zones[0];
        let c = cost();
        let pfn = z.rmqueue(&mut frames, 0, 0, 0, &c, 0).0.unwrap();
        z.free_unref_page(&mut frames, 0, pfn, 0, 0, &c);
        z.free_unref_page(&mut frames, 0, pfn, 0, 0, &c);
    }
}
