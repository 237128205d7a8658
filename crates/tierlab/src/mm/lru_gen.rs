//! The multi-generational LRU (CONFIG_LRU_GEN, "MGLRU"): the lru_gen section of
//! mm/vmscan.c and its helpers in include/linux/mm_inline.h, for one lruvec per node (no
//! memcg). `vm.lru_gen_enabled` (/sys/kernel/mm/lru_gen/enabled) switches reclaim from the
//! two-list LRU of `mm/vmscan.rs` to this; the switch is read at boot (lru_gen_change_state
//! while folios are on the lists is not modelled).
//!
//! Folios live in up to MAX_NR_GENS generations per type (anon, file), numbered by sequence
//! numbers between `min_seq[type]` and `max_seq`. Aging (`try_to_inc_max_seq`) walks the
//! page tables of every mm used since the last walk, clears young PTEs and moves their folios
//! to the youngest generation (`folio_update_gen`), then opens a new generation. Eviction
//! (`evict_folios`) takes folios from the oldest generation (`scan_folios` → `sort_folio` /
//! `isolate_folio`) and hands them to the same `shrink_folio_list` (and demotion) as the
//! classic LRU; what it rejects goes back with PG_active, to the youngest generation
//! (lru_gen_add_folio). During eviction's rmap walk a young
//! PTE makes `lru_gen_look_around` age up to MIN_LRU_BATCH neighbouring PTEs.
//!
//! Not modelled: refaults (no swap device and no page-cache shadow entries, so `refaulted`
//! stays 0 and the PID controller of `get_type_to_scan` always prefers file), the access
//! counts of fd reads (`lru_gen_inc_refs` via folio_mark_accessed; tierlab maps every page),
//! PG_reclaim/writeback (writeback is instant, as in the classic path), the bloom filter's
//! false positives (an exact set), and the non-leaf PMD accessed bit, which is taken as "some
//! PTE below is young".
//!
//! The kernel modelled is 6.12: folios join generations as lru_gen_add_folio placed them
//! since "mm/mglru: fix underprotected page cache" (6.7,
//! <20231208061407.2125867-1-yuzhao@google.com>), not as 6.14's "mm/mglru: rework
//! workingset protection" does.

use crate::kernel::Kernel;
use crate::machine::Machine;
use crate::mm::mmzone::{LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use crate::mm::page::{pg, ListHead, NIL};
use crate::mm::pgtable::{pte, PAGE_SHIFT};
use crate::mm::vmscan::{Reclaimer, DEF_PRIORITY, SWAP_CLUSTER_MAX};
use crate::stats::Vm;
use std::collections::HashSet;

/// MIN_NR_GENS: the two youngest generations count as active.
pub const MIN_NR_GENS: u64 = 2;
/// MAX_NR_GENS
pub const MAX_NR_GENS: u64 = 4;
/// MAX_NR_TIERS
pub const MAX_NR_TIERS: usize = 4;
/// LRU_REFS_WIDTH = MAX_NR_TIERS - 2
pub const LRU_REFS_WIDTH: u32 = 2;
/// MIN_LRU_BATCH = BITS_PER_LONG
pub const MIN_LRU_BATCH: u64 = 64;
/// MAX_LRU_BATCH = MIN_LRU_BATCH * 64
pub const MAX_LRU_BATCH: u64 = MIN_LRU_BATCH * 64;
/// LRU_GEN_ANON / LRU_GEN_FILE (folio_is_file_lru)
pub const LRU_GEN_ANON: usize = 0;
pub const LRU_GEN_FILE: usize = 1;
/// NR_BLOOM_FILTERS
const NR_BLOOM_FILTERS: usize = 2;
/// The frame's `lru_gen` byte: gen + 1 in bits 0..3, refs in bits 3..5.
const GEN_MASK: u8 = 0b111;
const REFS_SHIFT: u8 = 3;
const REFS_MASK: u8 = 0b11 << REFS_SHIFT;
const NGENS: usize = MAX_NR_GENS as usize;

/// lru_gen_from_seq
#[inline]
pub fn lru_gen_from_seq(seq: u64) -> usize {
    (seq % MAX_NR_GENS) as usize
}

/// order_base_2
fn order_base_2(x: u64) -> usize {
    if x <= 1 {
        0
    } else {
        (64 - (x - 1).leading_zeros()) as usize
    }
}

/// lru_tier_from_refs (6.12: refs are the accesses beyond PG_referenced, plus PG_workingset)
fn lru_tier_from_refs(refs: u64) -> usize {
    order_base_2(refs + 1)
}

/// fls_long
fn fls_long(x: u64) -> i32 {
    64 - x.leading_zeros() as i32
}

/// struct lru_gen_folio (include/linux/mmzone.h) plus the lruvec's lru_gen_mm_state, for
/// one node; NR_HIST_GENS = 1 (CONFIG_LRU_GEN_STATS off) and one zone.
#[derive(Clone, Debug, Default)]
pub struct LruGenFolio {
    /// lrugen->enabled
    pub enabled: bool,
    pub max_seq: u64,
    pub min_seq: [u64; 2],
    /// Birth time of each generation, CPU cycles (jiffies in the kernel).
    pub timestamps: [u64; NGENS],
    /// folios[gen][type]: the generation lists (head = youngest end).
    pub folios: [[ListHead; 2]; NGENS],
    /// nr_pages[gen][type]: folios whose generation is `gen` (not the list they sit on).
    pub nr_pages: [[i64; 2]; NGENS],
    pub avg_refaulted: [[u64; MAX_NR_TIERS]; 2],
    pub avg_total: [[u64; MAX_NR_TIERS]; 2],
    pub refaulted: [[u64; MAX_NR_TIERS]; 2],
    pub evicted: [[u64; MAX_NR_TIERS]; 2],
    pub protected: [[u64; MAX_NR_TIERS - 1]; 2],
    /// lru_gen_mm_state.seq: the last max_seq a page-table walk finished for.
    pub mm_seq: u64,
    /// mms the walks have reached so far (mm_state.tail: a new mm forces a full scan).
    pub mms_seen: usize,
    /// The bloom filters of PTE tables worth walking, by (mm << 32 | pmd), one per
    /// filter_gen_from_seq; None until the first walk allocates it.
    pub filters: [Option<HashSet<u64>>; NR_BLOOM_FILTERS],
    /// kswapd's pgdat->mm_walk is in use (current->reclaim_state->mm_walk).
    pub kswapd_walk: bool,
    /// kswapd's balance_pgdat run in progress.
    pub kswapd: LruGenKswapd,
    /// Times lru_gen_age_node would have called out_of_memory (min_ttl); no OOM killer.
    pub oom_kills: u64,
    /// Folios the page-table walks and look-around moved to the youngest generation.
    pub walk_updated: u64,
    /// Page-table walks finished (try_to_inc_max_seq) and PTEs they examined.
    pub walks: u64,
    pub walk_ptes: u64,
    /// PTEs lru_gen_look_around examined that are not yet charged to the reclaiming CPU.
    pub look_around_ptes: u64,
}

/// The part of struct scan_control MGLRU reads.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScanCtl {
    pub priority: i32,
    pub nr_to_reclaim: u64,
    pub nr_reclaimed: u64,
    pub nr_scanned: u64,
    /// try_to_shrink_lruvec's own `scanned` (what evict_folios returned).
    pub lruvec_scanned: u64,
}

/// kswapd's balance_pgdat with MGLRU, one try_to_shrink_lruvec iteration per event.
#[derive(Clone, Debug, Default)]
pub struct LruGenKswapd {
    pub active: bool,
    /// Inside kswapd_shrink_node → lru_gen_shrink_node.
    pub in_shrink: bool,
    pub priority: i32,
    pub sc: ScanCtl,
    /// sc.nr_reclaimed over the whole balance_pgdat run.
    pub total: u64,
}

impl LruGenFolio {
    /// lru_gen_init_lruvec: max_seq = MIN_NR_GENS + 1, mm_state->seq = MIN_NR_GENS.
    pub fn new(enabled: bool) -> Self {
        LruGenFolio {
            enabled,
            max_seq: MIN_NR_GENS + 1,
            mm_seq: MIN_NR_GENS,
            ..Default::default()
        }
    }

    /// get_nr_gens
    pub fn nr_gens(&self, type_: usize) -> u64 {
        self.max_seq - self.min_seq[type_] + 1
    }

    /// lru_gen_is_active
    pub fn is_active(&self, gen: usize) -> bool {
        gen == lru_gen_from_seq(self.max_seq) || gen == lru_gen_from_seq(self.max_seq - 1)
    }

    /// NR_{IN,}ACTIVE_{ANON,FILE} as lru_gen_update_size keeps them.
    pub fn lru_size(&self, lru: usize) -> u64 {
        let type_ = if lru >= LRU_INACTIVE_FILE {
            LRU_GEN_FILE
        } else {
            LRU_GEN_ANON
        };
        let active = lru % 2 == 1;
        (0..NGENS)
            .filter(|&g| self.is_active(g) == active)
            .map(|g| self.nr_pages[g][type_].max(0) as u64)
            .sum()
    }

    /// filter_gen_from_seq + test_bloom_filter: true when no filter exists yet.
    fn test_bloom_filter(&self, seq: u64, key: u64) -> bool {
        match &self.filters[(seq % NR_BLOOM_FILTERS as u64) as usize] {
            None => true,
            Some(f) => f.contains(&key),
        }
    }

    /// update_bloom_filter
    fn update_bloom_filter(&mut self, seq: u64, key: u64) {
        if let Some(f) = &mut self.filters[(seq % NR_BLOOM_FILTERS as u64) as usize] {
            f.insert(key);
        }
    }

    /// reset_bloom_filter
    fn reset_bloom_filter(&mut self, seq: u64) {
        let slot = &mut self.filters[(seq % NR_BLOOM_FILTERS as u64) as usize];
        match slot {
            Some(f) => f.clear(),
            None => *slot = Some(HashSet::new()),
        }
    }

    /// read_ctrl_pos (NR_HIST_GENS = 1)
    fn read_ctrl_pos(&self, type_: usize, tier: usize, gain: u64) -> CtrlPos {
        let mut total = self.avg_total[type_][tier] + self.evicted[type_][tier];
        if tier > 0 {
            total += self.protected[type_][tier - 1];
        }
        CtrlPos {
            refaulted: self.avg_refaulted[type_][tier] + self.refaulted[type_][tier],
            total,
            gain,
        }
    }

    /// reset_ctrl_pos(carryover = true); with NR_HIST_GENS = 1 the carryover = false call is a
    /// no-op.
    fn reset_ctrl_pos(&mut self, type_: usize) {
        for tier in 0..MAX_NR_TIERS {
            self.avg_refaulted[type_][tier] =
                (self.avg_refaulted[type_][tier] + self.refaulted[type_][tier]) / 2;
            let mut sum = self.avg_total[type_][tier] + self.evicted[type_][tier];
            if tier > 0 {
                sum += self.protected[type_][tier - 1];
            }
            self.avg_total[type_][tier] = sum / 2;
            self.refaulted[type_][tier] = 0;
            self.evicted[type_][tier] = 0;
            if tier > 0 {
                self.protected[type_][tier - 1] = 0;
            }
        }
    }
}

/// struct ctrl_pos
#[derive(Clone, Copy, Debug)]
struct CtrlPos {
    refaulted: u64,
    total: u64,
    gain: u64,
}

/// positive_ctrl_err: the PV (pv) is not above the SP (sp), allowing for noise.
fn positive_ctrl_err(sp: &CtrlPos, pv: &CtrlPos) -> bool {
    pv.refaulted < MIN_LRU_BATCH
        || pv.refaulted * (sp.total + MIN_LRU_BATCH) * sp.gain
            <= (sp.refaulted + 1) * pv.total * pv.gain
}

/// suitable_to_scan: n = clamp(cache_line_size() / sizeof(pte_t), 2, 8) = 8 on x86.
fn suitable_to_scan(total: u64, young: u64) -> bool {
    young * 8 >= total
}

impl Kernel {
    /// lru_gen_enabled() for the node's lruvec.
    #[inline]
    pub fn lru_gen_on(&self, n: usize) -> bool {
        self.nodes[n].lrugen.enabled
    }

    /// folio_lru_gen: the folio's generation, if it is on a generation list.
    pub fn folio_lru_gen(&self, pfn: u32) -> Option<usize> {
        let g = self.frames.get(pfn).lru_gen & GEN_MASK;
        (g != 0).then(|| (g - 1) as usize)
    }

    /// folio_lru_refs (6.12): the LRU_REFS_MASK count plus PG_workingset.
    fn folio_lru_refs(&self, pfn: u32) -> u64 {
        let p = self.frames.get(pfn);
        ((p.lru_gen & REFS_MASK) >> REFS_SHIFT) as u64 + p.has(pg::WORKINGSET) as u64
    }

    fn set_gen_bits(&mut self, pfn: u32, gen: Option<usize>) {
        let p = self.frames.get_mut(pfn);
        p.lru_gen = (p.lru_gen & !GEN_MASK) | gen.map_or(0, |g| g as u8 + 1);
    }

    /// set_mask_bits(&folio->flags, LRU_REFS_MASK | LRU_REFS_FLAGS, 0): clear the refs,
    /// PG_referenced and PG_workingset.
    fn clear_refs_and_flags(&mut self, pfn: u32) {
        let p = self.frames.get_mut(pfn);
        p.lru_gen &= !REFS_MASK;
        p.flags &= !(pg::REFERENCED | pg::WORKINGSET);
    }

    /// folio_migrate_refs: the new folio takes the old one's LRU_REFS_MASK.
    pub fn folio_migrate_refs(&mut self, dst: u32, src: u32) {
        let refs = self.frames.get(src).lru_gen & REFS_MASK;
        let d = self.frames.get_mut(dst);
        d.lru_gen = (d.lru_gen & !REFS_MASK) | refs;
    }

    fn folio_type(&self, pfn: u32) -> usize {
        if self.frames.get(pfn).has(pg::SWAPBACKED) {
            LRU_GEN_ANON
        } else {
            LRU_GEN_FILE
        }
    }

    /// list_add / list_add_tail onto folios[gen][type], remembering the list.
    fn gen_list_add(&mut self, n: usize, pfn: u32, gen: usize, tail: bool) {
        let type_ = self.folio_type(pfn);
        let list = &mut self.nodes[n].lrugen.folios[gen][type_];
        if tail {
            self.frames.list_add_tail(list, pfn);
        } else {
            self.frames.list_add(list, pfn);
        }
        self.frames.get_mut(pfn).lru_gen_list = gen as u8 + 1;
    }

    /// list_del from whichever generation list the folio is on.
    fn gen_list_del(&mut self, n: usize, pfn: u32) {
        let type_ = self.folio_type(pfn);
        let l = self.frames.get(pfn).lru_gen_list;
        debug_assert!(l != 0, "frame {pfn} is on no generation list");
        let list = &mut self.nodes[n].lrugen.folios[(l - 1) as usize][type_];
        self.frames.list_del(list, pfn);
        self.frames.get_mut(pfn).lru_gen_list = 0;
    }

    /// list_move (head) or list_move_tail onto folios[gen][type].
    fn gen_list_move(&mut self, n: usize, pfn: u32, gen: usize, tail: bool) {
        self.gen_list_del(n, pfn);
        self.gen_list_add(n, pfn, gen, tail);
    }

    /// lru_gen_update_size's nr_pages part (the active/inactive sizes follow from it).
    fn gen_update_size(&mut self, n: usize, pfn: u32, old: Option<usize>, new: Option<usize>) {
        let type_ = self.folio_type(pfn);
        let g = &mut self.nodes[n].lrugen;
        if let Some(o) = old {
            g.nr_pages[o][type_] -= 1;
        }
        if let Some(nw) = new {
            g.nr_pages[nw][type_] += 1;
        }
    }

    /// The sequence number lru_gen_add_folio (mm_inline.h, 6.12) adds a folio at: a hot one
    /// (PG_active, freshly faulted or activated) to the youngest generation, anon not in the
    /// swap cache to the second youngest, one from reclaim to the oldest, the rest to the
    /// second oldest when that is not an active generation.
    fn lru_gen_folio_seq(&self, n: usize, pfn: u32, reclaiming: bool) -> u64 {
        let p = self.frames.get(pfn);
        let g = &self.nodes[n].lrugen;
        let type_ = self.folio_type(pfn);
        let min_seq = g.min_seq[type_];
        if p.has(pg::ACTIVE) {
            g.max_seq
        } else if type_ == LRU_GEN_ANON {
            // !folio_test_swapcache (no swap cache here); PG_reclaim with dirty or writeback
            // never holds here, writeback being instant.
            g.max_seq - 1
        } else if reclaiming || min_seq + MIN_NR_GENS >= g.max_seq {
            min_seq
        } else {
            min_seq + 1
        }
    }

    /// lru_gen_add_folio: onto the generation lru_gen_folio_seq picks; PG_active is cleared.
    pub fn lru_gen_add_folio(&mut self, pfn: u32, reclaiming: bool) {
        let n = self.frames.get(pfn).node as usize;
        debug_assert!(self.folio_lru_gen(pfn).is_none());
        let seq = self.lru_gen_folio_seq(n, pfn, reclaiming);
        let gen = lru_gen_from_seq(seq);
        self.set_gen_bits(pfn, Some(gen));
        self.frames.get_mut(pfn).flags &= !pg::ACTIVE;
        self.gen_update_size(n, pfn, None, Some(gen));
        // reclaiming: list_add_tail, for rotate_reclaimable_page()
        self.gen_list_add(n, pfn, gen, reclaiming);
    }

    /// lru_gen_del_folio: off its list; outside reclaim a folio of an active generation keeps
    /// PG_active (for folio_migrate_flags).
    pub fn lru_gen_del_folio(&mut self, pfn: u32, reclaiming: bool) -> bool {
        let Some(gen) = self.folio_lru_gen(pfn) else {
            return false;
        };
        let n = self.frames.get(pfn).node as usize;
        let active = !reclaiming && self.nodes[n].lrugen.is_active(gen);
        self.set_gen_bits(pfn, None);
        if active {
            self.frames.get_mut(pfn).flags |= pg::ACTIVE;
        }
        self.gen_update_size(n, pfn, Some(gen), None);
        self.gen_list_del(n, pfn);
        true
    }

    /// folio_update_gen: a young folio moves to `gen` (the youngest) in its flags only; an
    /// isolated folio gets PG_referenced for shrink_folio_list. Returns the old generation.
    fn folio_update_gen(&mut self, n: usize, pfn: u32, gen: usize) -> Option<usize> {
        let Some(old) = self.folio_lru_gen(pfn) else {
            self.frames.get_mut(pfn).flags |= pg::REFERENCED;
            return None;
        };
        self.clear_refs_and_flags(pfn);
        self.set_gen_bits(pfn, Some(gen));
        if old != gen {
            // update_batch_size → reset_batch_size, applied at once
            self.gen_update_size(n, pfn, Some(old), Some(gen));
            self.nodes[n].lrugen.walk_updated += 1;
        }
        Some(old)
    }

    /// folio_inc_gen: a folio of the oldest generation moves one generation up (refs cleared);
    /// one already promoted by the walk keeps its generation.
    fn folio_inc_gen(&mut self, n: usize, pfn: u32) -> usize {
        let type_ = self.folio_type(pfn);
        let old_gen = lru_gen_from_seq(self.nodes[n].lrugen.min_seq[type_]);
        let cur = self
            .folio_lru_gen(pfn)
            .expect("folio_inc_gen on a listed folio");
        if cur != old_gen {
            return cur;
        }
        let new_gen = (old_gen + 1) % NGENS;
        self.clear_refs_and_flags(pfn);
        self.set_gen_bits(pfn, Some(new_gen));
        self.gen_update_size(n, pfn, Some(old_gen), Some(new_gen));
        new_gen
    }

    /// lru_activate with MGLRU (folio_activate): del, PG_active, add → generation max_seq.
    /// Returns whether it moved.
    pub fn lru_gen_activate(&mut self, pfn: u32) -> bool {
        let p = *self.frames.get(pfn);
        if !p.has(pg::LRU) || p.has(pg::ACTIVE) {
            return false;
        }
        self.lru_gen_del_folio(pfn, false);
        self.frames.get_mut(pfn).flags |= pg::ACTIVE;
        self.lru_gen_add_folio(pfn, false);
        true
    }

    /// lru_deactivate with MGLRU (folio_deactivate): del, clear PG_active and PG_referenced,
    /// add. Returns whether it moved.
    pub fn lru_gen_deactivate(&mut self, pfn: u32) -> bool {
        if !self.frames.get(pfn).has(pg::LRU) {
            self.frames.get_mut(pfn).flags &= !pg::REFERENCED;
            return false;
        }
        self.lru_gen_del_folio(pfn, false);
        self.frames.get_mut(pfn).flags &= !(pg::ACTIVE | pg::REFERENCED);
        self.lru_gen_add_folio(pfn, false);
        true
    }

    /// lru_gen_eviction (mm/workingset.c): an evicted file folio counts in `evicted` of its
    /// tier (the shadow entry that would let a refault find it is not modelled).
    pub(crate) fn lru_gen_eviction(&mut self, pfn: u32) {
        let n = self.frames.get(pfn).node as usize;
        let type_ = self.folio_type(pfn);
        let tier = lru_tier_from_refs(self.folio_lru_refs(pfn)).min(MAX_NR_TIERS - 1);
        self.nodes[n].lrugen.evicted[type_][tier] += 1;
    }

    /// get_swappiness: 0 when anon cannot be reclaimed (no demotion target and fewer than
    /// MIN_LRU_BATCH free swap slots, mem_cgroup_get_nr_swap_pages).
    pub fn lru_gen_swappiness(&self, n: usize) -> u32 {
        if !self.can_demote(n) && self.swap.nr_swap_pages() < MIN_LRU_BATCH {
            return 0;
        }
        self.cfg.vm.swappiness
    }

    // ---------------------------------------------------------------------------- aging

    /// try_to_inc_max_seq: walk every mm's page tables (iterate_mm_list + walk_mm), then
    /// inc_max_seq. One walker at a time, so the walk always finishes the round.
    pub fn try_to_inc_max_seq(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        max_seq: u64,
        can_swap: bool,
        force_scan: bool,
    ) -> bool {
        if max_seq <= self.nodes[n].lrugen.mm_seq {
            return false;
        }
        // iterate_mm_list: reset_bloom_filter(max_seq + 1) with the round's first mm; an mm
        // the walks have not reached before (mm_state->tail) forces the rest of the round.
        let nr_mms = self.mms.len();
        let mut force = force_scan;
        let mut first = true;
        let mut examined = 0u64;
        let mut young = 0u64;
        for mm in 0..nr_mms {
            if mm >= self.nodes[n].lrugen.mms_seen {
                force = true;
            }
            // should_skip_mm: an mm no CPU switched to since the last walk, unless forced;
            // then one with fewer than MIN_LRU_BATCH pages of the scannable types.
            let key = 1u64 << (n % 64);
            if !force && self.mms[mm].lru_gen_bitmap & key == 0 {
                continue;
            }
            self.mms[mm].lru_gen_bitmap &= !key;
            let sp = &self.mms[mm];
            let size = sp.rss_file
                + if can_swap {
                    sp.rss_anon + sp.rss_shmem
                } else {
                    0
                };
            if size < MIN_LRU_BATCH {
                continue;
            }
            if first {
                self.nodes[n].lrugen.reset_bloom_filter(max_seq + 1);
                first = false;
            }
            let (e, y) = self.walk_mm(n, mm, max_seq, can_swap, force);
            examined += e;
            young += y;
        }
        let g = &mut self.nodes[n].lrugen;
        g.mms_seen = nr_mms;
        g.mm_seq += 1;
        g.walks += 1;
        g.walk_ptes += examined;
        m.charge_sys(
            c,
            examined * m.cost.lru_gen_walk_pte_cycles as u64
                + young * m.cost.lru_gen_update_gen_cycles as u64,
        );
        let now = m.cpus[c].clock;
        self.inc_max_seq(m, c, n, can_swap, force_scan, now);
        true
    }

    /// walk_mm → walk_pud_range → walk_pmd_range → walk_pte_range over the mm's VMAs
    /// (should_skip_vma): clear young PTEs of this node's folios and folio_update_gen them to
    /// max_seq. Returns (entries examined, young PTEs).
    fn walk_mm(
        &mut self,
        n: usize,
        mm: usize,
        max_seq: u64,
        can_swap: bool,
        force: bool,
    ) -> (u64, u64) {
        let new_gen = lru_gen_from_seq(max_seq);
        let vmas: Vec<(u32, u32)> = self.mms[mm]
            .vmas
            .iter()
            .filter(|v| v.prot != 0 && (can_swap || !v.is_anon()))
            .map(|v| ((v.start >> PAGE_SHIFT) as u32, (v.end >> PAGE_SHIFT) as u32))
            .collect();
        let zero = self.zero_pfn;
        let mut examined = 0u64;
        let mut young_total = 0u64;
        let mut updates: Vec<(u32, bool)> = Vec::new();
        for (s, e) in vmas {
            if s >= e {
                continue;
            }
            for pmd in (s >> 9)..=((e - 1) >> 9) {
                // In u64: the last PTE table's end is 2^32 pages, beyond u32.
                let lo = s.max(pmd << 9);
                let hi = (e as u64).min(((pmd as u64) + 1) << 9) as u32;
                let key = ((mm as u64) << 32) | pmd as u64;
                let huge = self.mms[mm].pgtable.huge_pmd(pmd << 9);
                if huge != 0 {
                    // walk_pmd_range's THP branch (a leaf, MM_LEAF_TOTAL): a young huge PMD of
                    // this node's THP is made old without a flush (walk_pmd_range_locked,
                    // pmdp_test_and_clear_young) and its folio joins the youngest generation.
                    examined += 1;
                    let head = pte::pfn(huge);
                    if pte::present(huge) && huge & pte::YOUNG != 0 && !self.is_zero_pfn(head) {
                        let f = *self.frames.get(head);
                        if f.node as usize == n && (!f.has(pg::SWAPBACKED) || can_swap) {
                            self.mms[mm]
                                .pgtable
                                .set_huge_pmd(pmd << 9, huge & !pte::YOUNG);
                            young_total += 1;
                            for p in head..head + crate::mm::pgtable::HPAGE_PMD_NR {
                                self.folio_update_gen(n, p, new_gen);
                            }
                        }
                    }
                    continue;
                }
                // walk_page_range skips unpopulated upper levels: only a populated PMD entry
                // costs a look (MM_NONLEAF_TOTAL).
                let Some(table) = self.mms[mm].pgtable.pte_table_mut(pmd) else {
                    continue;
                };
                examined += 1;
                let range = (lo & 511) as usize..=((hi - 1) & 511) as usize;
                // should_clear_pmd_young: the non-leaf accessed bit, taken as "some PTE young".
                if !table[range.clone()]
                    .iter()
                    .any(|&p| pte::maps_frame(p) && p & pte::YOUNG != 0)
                {
                    continue;
                }
                if !force && !self.nodes[n].lrugen.test_bloom_filter(max_seq, key) {
                    continue;
                }
                // walk_pte_range
                let mut total = 0u64;
                let mut young = 0u64;
                for slot in &mut table[range] {
                    total += 1;
                    let p = *slot;
                    if !pte::maps_frame(p) || pte::pfn(p) == zero || p & pte::YOUNG == 0 {
                        continue;
                    }
                    let pfn = pte::pfn(p);
                    // get_pfn_folio: this node's folios, anon only when it can be reclaimed
                    let f = self.frames.get(pfn);
                    if f.node as usize != n || (f.has(pg::SWAPBACKED) && !can_swap) {
                        continue;
                    }
                    *slot &= !pte::YOUNG;
                    young += 1;
                    updates.push((pfn, p & pte::DIRTY != 0));
                }
                examined += total;
                young_total += young;
                if suitable_to_scan(total, young) {
                    self.nodes[n].lrugen.update_bloom_filter(max_seq + 1, key);
                }
                for (pfn, dirty) in updates.drain(..) {
                    // folio_mark_dirty for a file folio with a dirty PTE
                    if dirty && !self.frames.get(pfn).has(pg::ANON) {
                        self.frames.get_mut(pfn).flags |= pg::DIRTY;
                    }
                    self.folio_update_gen(n, pfn, new_gen);
                }
            }
        }
        (examined, young_total)
    }

    /// inc_max_seq: make room (inc_min_seq on a type with MAX_NR_GENS generations), stamp
    /// and open the next generation.
    fn inc_max_seq(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        can_swap: bool,
        force_scan: bool,
        now: u64,
    ) {
        for type_ in [LRU_GEN_FILE, LRU_GEN_ANON] {
            if self.nodes[n].lrugen.nr_gens(type_) != MAX_NR_GENS {
                continue;
            }
            debug_assert!(force_scan || !(type_ == LRU_GEN_FILE || can_swap));
            self.inc_min_seq(m, c, n, type_, can_swap);
        }
        let g = &mut self.nodes[n].lrugen;
        let next = lru_gen_from_seq(g.max_seq + 1);
        g.timestamps[next] = now;
        g.max_seq += 1;
    }

    /// inc_min_seq: move the oldest generation's folios up one generation (not anon when it
    /// cannot be reclaimed) and retire it.
    fn inc_min_seq(&mut self, m: &mut Machine, c: usize, n: usize, type_: usize, can_swap: bool) {
        if type_ != LRU_GEN_ANON || can_swap {
            let old_gen = lru_gen_from_seq(self.nodes[n].lrugen.min_seq[type_]);
            let mut moved = 0u64;
            loop {
                let tail = self.nodes[n].lrugen.folios[old_gen][type_].tail;
                if tail == NIL {
                    break;
                }
                let new_gen = self.folio_inc_gen(n, tail);
                self.gen_list_move(n, tail, new_gen, true);
                moved += 1;
            }
            m.charge_sys(c, moved * m.cost.lru_gen_update_gen_cycles as u64);
        }
        let g = &mut self.nodes[n].lrugen;
        g.reset_ctrl_pos(type_);
        g.min_seq[type_] += 1;
    }

    /// try_to_inc_min_seq: retire empty oldest generations; anon may not be younger than file.
    pub fn try_to_inc_min_seq(&mut self, n: usize, can_swap: bool) -> bool {
        let g = &mut self.nodes[n].lrugen;
        let mut min_seq = g.min_seq;
        for (type_, seq) in min_seq.iter_mut().enumerate().skip(!can_swap as usize) {
            while *seq + MIN_NR_GENS <= g.max_seq {
                let gen = lru_gen_from_seq(*seq);
                if !g.folios[gen][type_].is_empty() {
                    break;
                }
                *seq += 1;
            }
        }
        if can_swap {
            min_seq[LRU_GEN_ANON] = min_seq[LRU_GEN_ANON].min(min_seq[LRU_GEN_FILE]);
            min_seq[LRU_GEN_FILE] = min_seq[LRU_GEN_ANON].max(g.min_seq[LRU_GEN_FILE]);
        }
        let mut success = false;
        for (type_, &seq) in min_seq.iter().enumerate().skip(!can_swap as usize) {
            if seq == g.min_seq[type_] {
                continue;
            }
            g.reset_ctrl_pos(type_);
            g.min_seq[type_] = seq;
            success = true;
        }
        success
    }

    /// should_run_aging: (whether to age, nr_to_scan = total >> priority).
    fn should_run_aging(
        &self,
        n: usize,
        max_seq: u64,
        can_swap: bool,
        priority: i32,
    ) -> (bool, u64) {
        let g = &self.nodes[n].lrugen;
        let min_seq = g.min_seq;
        let first = !can_swap as usize;
        if min_seq[first] + MIN_NR_GENS > max_seq {
            return (true, 0);
        }
        let (mut old, mut young, mut total) = (0u64, 0u64, 0u64);
        for (type_, &min) in min_seq.iter().enumerate().skip(first) {
            for seq in min..=max_seq {
                let size = g.nr_pages[lru_gen_from_seq(seq)][type_].max(0) as u64;
                total += size;
                if seq == max_seq {
                    young += size;
                } else if seq + MIN_NR_GENS == max_seq {
                    old += size;
                }
            }
        }
        let nr_to_scan = total >> priority.max(0);
        if min_seq[first] + MIN_NR_GENS < max_seq {
            return (false, nr_to_scan);
        }
        // aging if the young generation holds too much or the old one too little
        if young * MIN_NR_GENS > total || old * (MIN_NR_GENS + 2) < total {
            return (true, nr_to_scan);
        }
        (false, nr_to_scan)
    }

    /// get_nr_to_scan: aging runs here (not at DEF_PRIORITY); -1 after a successful aging.
    fn get_nr_to_scan(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        sc: &ScanCtl,
        swappiness: u32,
    ) -> i64 {
        let max_seq = self.nodes[n].lrugen.max_seq;
        let (age, nr) = self.should_run_aging(n, max_seq, swappiness != 0, sc.priority);
        if !age || sc.priority == DEF_PRIORITY as i32 {
            return nr as i64;
        }
        if self.try_to_inc_max_seq(m, c, n, max_seq, swappiness != 0, false) {
            -1
        } else {
            0
        }
    }

    /// lruvec_is_sizable
    fn lruvec_is_sizable(&self, n: usize, priority: i32) -> bool {
        let g = &self.nodes[n].lrugen;
        let can_swap = self.lru_gen_swappiness(n) != 0;
        let mut total = 0u64;
        for type_ in (!can_swap as usize)..2 {
            for seq in g.min_seq[type_]..=g.max_seq {
                total += g.nr_pages[lru_gen_from_seq(seq)][type_].max(0) as u64;
            }
        }
        total >> priority.max(0) != 0
    }

    /// lru_gen_age_node (kswapd_age_node with MGLRU): with min_ttl set, if the oldest file
    /// generation is younger than min_ttl (or the lruvec too small), the kernel calls the
    /// OOM killer; tierlab has none and counts the call.
    fn lru_gen_age_node(&mut self, m: &Machine, n: usize, priority: i32, now: u64) {
        let min_ttl_ms = self.cfg.vm.lru_gen_min_ttl_ms;
        if min_ttl_ms == 0 || priority == DEF_PRIORITY as i32 {
            return;
        }
        // lruvec_is_reclaimable
        let g = &self.nodes[n].lrugen;
        let birth = g.timestamps[lru_gen_from_seq(g.min_seq[LRU_GEN_FILE])];
        let min_ttl = m.ns_to_cycles(min_ttl_ms as f64 * 1e6);
        let reclaimable = now >= birth + min_ttl && self.lruvec_is_sizable(n, priority);
        if !reclaimable {
            self.nodes[n].lrugen.oom_kills += 1;
        }
    }

    // ------------------------------------------------------------------------- eviction

    /// sort_folio: folios that must not be evicted from the oldest generation move on.
    fn sort_folio(&mut self, n: usize, pfn: u32, tier_idx: usize) -> bool {
        let gen = self.folio_lru_gen(pfn).expect("a listed folio");
        let type_ = self.folio_type(pfn);
        let refs = self.folio_lru_refs(pfn);
        let tier = lru_tier_from_refs(refs);
        let min_gen = lru_gen_from_seq(self.nodes[n].lrugen.min_seq[type_]);
        // promoted by folio_update_gen: to the head of its generation
        if gen != min_gen {
            self.gen_list_move(n, pfn, gen, false);
            return true;
        }
        // protected by tier
        if tier > tier_idx || refs == 1 << LRU_REFS_WIDTH {
            let new_gen = self.folio_inc_gen(n, pfn);
            self.gen_list_move(n, pfn, new_gen, true);
            let t = tier.clamp(1, MAX_NR_TIERS - 1);
            self.nodes[n].lrugen.protected[type_][t - 1] += 1;
            return true;
        }
        // dirty file folios go to writeback (instant here) and one generation up
        if type_ == LRU_GEN_FILE && self.frames.get(pfn).has(pg::DIRTY) {
            self.frames.get_mut(pfn).flags &= !pg::DIRTY;
            let new_gen = self.folio_inc_gen(n, pfn);
            self.gen_list_move(n, pfn, new_gen, false);
            return true;
        }
        false
    }

    /// isolate_folio: off the LRU for shrink_folio_list; refs survive only with PG_referenced.
    fn isolate_folio(&mut self, n: usize, pfn: u32) {
        if !self.frames.get(pfn).has(pg::REFERENCED) {
            self.clear_refs_and_flags(pfn);
        }
        let p = self.frames.get_mut(pfn);
        p.flags = (p.flags & !(pg::LRU | pg::REFERENCED)) | pg::ISOLATED;
        self.nodes[n].nr_isolated += 1;
        self.lru_gen_del_folio(pfn, true);
    }

    /// scan_folios: from the tail of the oldest generation, sort or isolate until
    /// MIN_LRU_BATCH are isolated or MAX_LRU_BATCH scanned.
    fn scan_folios(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        type_: usize,
        tier: usize,
        who: Reclaimer,
    ) -> (u64, Vec<u32>) {
        let mut list = Vec::new();
        if self.nodes[n].lrugen.nr_gens(type_) == MIN_NR_GENS {
            return (0, list);
        }
        let gen = lru_gen_from_seq(self.nodes[n].lrugen.min_seq[type_]);
        let (mut scanned, mut sorted, mut isolated) = (0u64, 0u64, 0u64);
        let mut remaining = MAX_LRU_BATCH;
        loop {
            let pfn = self.nodes[n].lrugen.folios[gen][type_].tail;
            if pfn == NIL {
                break;
            }
            scanned += 1;
            if self.sort_folio(n, pfn, tier) {
                sorted += 1;
            } else {
                self.isolate_folio(n, pfn);
                // A THP is isolated whole and counts its pages (folio_nr_pages).
                let (folio, nr) = self.isolate_rest_of_thp(pfn);
                list.push(folio);
                isolated += nr;
                scanned += nr - 1;
            }
            remaining -= 1;
            if remaining == 0 || isolated >= MIN_LRU_BATCH {
                break;
            }
        }
        m.charge_sys(c, m.cost.reclaim_scan_cycles as u64 * scanned);
        self.vm.add(
            if who == Reclaimer::Kswapd {
                Vm::PgScanKswapd
            } else {
                Vm::PgScanDirect
            },
            isolated,
        );
        self.vm.add(Vm::PgRefill, sorted);
        self.vm.add(
            if type_ == LRU_GEN_FILE {
                Vm::PgScanFile
            } else {
                Vm::PgScanAnon
            },
            isolated,
        );
        let ret = if isolated > 0 || remaining == 0 {
            scanned
        } else {
            0
        };
        (ret, list)
    }

    /// get_tier_idx
    fn get_tier_idx(&self, n: usize, type_: usize) -> usize {
        let g = &self.nodes[n].lrugen;
        let sp = g.read_ctrl_pos(type_, 0, 1);
        let mut tier = 1;
        while tier < MAX_NR_TIERS {
            let pv = g.read_ctrl_pos(type_, tier, 2);
            if !positive_ctrl_err(&sp, &pv) {
                break;
            }
            tier += 1;
        }
        tier - 1
    }

    /// get_type_to_scan: the PID controller compares the refault rates of anon and file
    /// (gains swappiness and 200 - swappiness). Returns (type, tier).
    fn get_type_to_scan(&self, n: usize, swappiness: u32) -> (usize, usize) {
        let g = &self.nodes[n].lrugen;
        let gain = [swappiness as u64, 200 - swappiness as u64];
        let sp = g.read_ctrl_pos(LRU_GEN_ANON, 0, gain[LRU_GEN_ANON]);
        let pv = g.read_ctrl_pos(LRU_GEN_FILE, 0, gain[LRU_GEN_FILE]);
        let type_ = positive_ctrl_err(&sp, &pv) as usize;
        let sp = g.read_ctrl_pos(1 - type_, 0, gain[1 - type_]);
        let mut tier = 1;
        while tier < MAX_NR_TIERS {
            let pv = g.read_ctrl_pos(type_, tier, gain[type_]);
            if !positive_ctrl_err(&sp, &pv) {
                break;
            }
            tier += 1;
        }
        (type_, tier - 1)
    }

    /// isolate_folios: pick the type, scan it, fall back to the other type.
    fn isolate_folios(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        swappiness: u32,
        who: Reclaimer,
    ) -> (u64, usize, Vec<u32>) {
        let min_seq = self.nodes[n].lrugen.min_seq;
        let mut tier: Option<usize> = None;
        let mut type_ = if swappiness == 0 {
            LRU_GEN_FILE
        } else if min_seq[LRU_GEN_ANON] < min_seq[LRU_GEN_FILE] {
            LRU_GEN_ANON
        } else if swappiness == 1 {
            LRU_GEN_FILE
        } else if swappiness == 200 {
            LRU_GEN_ANON
        } else {
            let (t, ti) = self.get_type_to_scan(n, swappiness);
            tier = Some(ti);
            t
        };
        let mut scanned = 0;
        for _ in (swappiness == 0) as usize..2 {
            let t = match tier {
                Some(t) => t,
                None => self.get_tier_idx(n, type_),
            };
            let (s, list) = self.scan_folios(m, c, n, type_, t, who);
            scanned = s;
            if s > 0 {
                return (s, type_, list);
            }
            type_ = 1 - type_;
            tier = None;
        }
        (scanned, type_, Vec::new())
    }

    /// evict_folios: isolate a batch of the oldest generation, shrink_folio_list it (the
    /// classic path, demotion included), retry clean folios once, put the rest back with
    /// PG_active (generation max_seq). Returns `scanned` (0 stops try_to_shrink_lruvec).
    fn evict_folios(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        sc: &mut ScanCtl,
        swappiness: u32,
        who: Reclaimer,
    ) -> u64 {
        let (isolated_scan, _type, list) = self.isolate_folios(m, c, n, swappiness, who);
        let mut scanned = isolated_scan + self.try_to_inc_min_seq(n, swappiness != 0) as u64;
        let first = if swappiness == 0 {
            LRU_GEN_FILE
        } else {
            LRU_GEN_ANON
        };
        if self.nodes[n].lrugen.nr_gens(first) == MIN_NR_GENS {
            scanned = 0;
        }
        if list.is_empty() {
            return scanned;
        }
        let mut list = list;
        let mut skip_retry = false;
        loop {
            // shrink_folio_list accounts base pages: a THP counts HPAGE_PMD_NR.
            sc.nr_scanned += list.iter().map(|&f| self.folio_nr_pages(f)).sum::<u64>();
            let (reclaimed, kept) = self.shrink_folio_list_keep(m, c, list, who, false);
            sc.nr_reclaimed += reclaimed;
            let ptes = std::mem::take(&mut self.nodes[n].lrugen.look_around_ptes);
            m.charge_sys(c, ptes * m.cost.lru_gen_walk_pte_cycles as u64);
            let mut clean = Vec::new();
            let mut back = Vec::new();
            for &pfn in kept.iter().rev() {
                let p = self.frames.get(pfn);
                if skip_retry
                    || p.has(pg::ACTIVE)
                    || p.has(pg::REFERENCED)
                    || p.mapcount > 0
                    || p.has(pg::DIRTY)
                {
                    // don't add rejected folios to the oldest generation
                    self.clear_refs_and_flags(pfn);
                    self.frames.get_mut(pfn).flags |= pg::ACTIVE;
                    back.push(pfn);
                    continue;
                }
                // retry folios that may have missed folio_rotate_reclaimable()
                clean.push(pfn);
                sc.nr_scanned -= self.folio_nr_pages(pfn);
            }
            // move_folios_to_lru
            for pfn in back {
                self.putback_folio(pfn);
            }
            if clean.is_empty() {
                break;
            }
            skip_retry = true;
            list = clean;
        }
        scanned
    }

    /// should_abort_scan (root reclaim, order 0)
    fn should_abort_scan(&self, n: usize, sc: &ScanCtl, who: Reclaimer) -> bool {
        if sc.nr_reclaimed >= sc.nr_to_reclaim.max(2) {
            return true;
        }
        if who != Reclaimer::Kswapd {
            return false;
        }
        let z = &self.nodes[n].zone;
        let mark =
            if self.cfg.kernel.numa_balancing & crate::config::NUMA_BALANCING_MEMORY_TIERING != 0 {
                z.wmark.promo
            } else {
                z.wmark.high
            };
        z.watermark_ok(mark + MIN_LRU_BATCH)
    }

    /// One iteration of try_to_shrink_lruvec's loop; true when the loop ends.
    fn try_to_shrink_lruvec_step(
        &mut self,
        m: &mut Machine,
        c: usize,
        n: usize,
        sc: &mut ScanCtl,
        swappiness: u32,
        who: Reclaimer,
    ) -> bool {
        let nr_to_scan = self.get_nr_to_scan(m, c, n, sc, swappiness);
        if nr_to_scan <= 0 {
            return true;
        }
        let delta = self.evict_folios(m, c, n, sc, swappiness, who);
        if delta == 0 {
            return true;
        }
        sc.lruvec_scanned += delta;
        if sc.lruvec_scanned >= nr_to_scan as u64 {
            return true;
        }
        self.should_abort_scan(n, sc, who)
    }

    /// set_initial_priority: start where one pass over the inactive folios meets the target,
    /// at DEF_PRIORITY / 2 or above ("mm/mglru: fix overshooting shrinker memory", 6.11).
    fn set_initial_priority(&self, n: usize, sc: &mut ScanCtl) {
        if sc.priority != DEF_PRIORITY as i32 || sc.nr_to_reclaim < MIN_LRU_BATCH {
            return;
        }
        let node = &self.nodes[n];
        let mut reclaimable = node.lru_size(LRU_INACTIVE_FILE);
        if self.lru_gen_swappiness(n) != 0 {
            reclaimable += node.lru_size(LRU_INACTIVE_ANON);
        }
        let priority = fls_long(reclaimable) - 1 - fls_long(sc.nr_to_reclaim - 1);
        sc.priority = priority.clamp(DEF_PRIORITY as i32 / 2, DEF_PRIORITY as i32);
    }

    /// lru_gen_shrink_node → shrink_one → try_to_shrink_lruvec, all at once (direct reclaim).
    fn lru_gen_shrink_node(
        &mut self,
        m: &mut Machine,
        n: usize,
        c: usize,
        sc: &mut ScanCtl,
        who: Reclaimer,
    ) {
        let reclaimed = sc.nr_reclaimed;
        self.set_initial_priority(n, sc);
        let swappiness = self.lru_gen_swappiness(n);
        sc.lruvec_scanned = 0;
        while !self.try_to_shrink_lruvec_step(m, c, n, sc, swappiness, who) {}
        // shrink_one's shrink_slab: the deferred split queue's shrinker.
        self.deferred_split_scan(m, c, n);
        if sc.nr_reclaimed > reclaimed {
            self.nodes[n].kswapd_failures = 0;
        }
    }

    /// do_try_to_free_pages with MGLRU: shrink_zones → shrink_node → lru_gen_shrink_node over
    /// the zonelist, priority by priority, until SWAP_CLUSTER_MAX are reclaimed.
    pub(crate) fn lru_gen_try_to_free_pages(
        &mut self,
        m: &mut Machine,
        c: usize,
        preferred: usize,
    ) -> u64 {
        let zonelist = self.nodes[preferred].zonelist.clone();
        let mut sc = ScanCtl {
            priority: DEF_PRIORITY as i32,
            nr_to_reclaim: SWAP_CLUSTER_MAX,
            ..Default::default()
        };
        loop {
            sc.nr_scanned = 0;
            for &n in &zonelist {
                self.lru_gen_shrink_node(m, n as usize, c, &mut sc, Reclaimer::Direct);
            }
            if sc.nr_reclaimed >= sc.nr_to_reclaim {
                break;
            }
            sc.priority -= 1;
            if sc.priority < 0 {
                break;
            }
        }
        sc.nr_reclaimed
    }

    /// balance_pgdat with MGLRU, one step per event: at the top of each priority iteration
    /// kswapd_age_node (lru_gen_age_node) and kswapd_shrink_node → lru_gen_shrink_node
    /// (set_initial_priority); each event runs one try_to_shrink_lruvec iteration (an aging
    /// walk or one evict_folios batch of up to MIN_LRU_BATCH folios), charged to kswapd's CPU.
    pub(crate) fn lru_gen_kswapd_run(&mut self, m: &mut Machine, n: usize, c: usize) {
        let mut st = self.nodes[n].lrugen.kswapd.clone();
        if !st.active {
            if self.pgdat_balanced(n) {
                // Balanced at the top of the first iteration: out.
                self.kswapd_try_to_sleep(m, n, c);
                return;
            }
            self.vm.inc(Vm::PageOutRun);
            self.nodes[n].zone.reclaim_active = true;
            // kswapd's shrink_one runs shrink_slab too: the deferred split queue's shrinker.
            self.deferred_split_scan(m, c, n);
            st = LruGenKswapd {
                active: true,
                priority: DEF_PRIORITY as i32,
                ..Default::default()
            };
        }
        if !st.in_shrink {
            let now = m.cpus[c].clock;
            self.lru_gen_age_node(m, n, st.priority, now);
            st.sc = ScanCtl {
                priority: st.priority,
                nr_to_reclaim: self.kswapd_nr_to_reclaim(n),
                ..Default::default()
            };
            self.set_initial_priority(n, &mut st.sc);
            st.in_shrink = true;
        }
        let swappiness = self.lru_gen_swappiness(n);
        self.nodes[n].lrugen.kswapd_walk = true;
        let done =
            self.try_to_shrink_lruvec_step(m, c, n, &mut st.sc, swappiness, Reclaimer::Kswapd);
        self.nodes[n].lrugen.kswapd_walk = false;
        if !done {
            self.nodes[n].lrugen.kswapd = st;
            let at = m.cpus[c].clock;
            self.schedule(at, crate::kernel::Event::KswapdRun(n as u8));
            return;
        }
        // The end of lru_gen_shrink_node and kswapd_shrink_node.
        st.in_shrink = false;
        if st.sc.nr_reclaimed > 0 {
            self.nodes[n].kswapd_failures = 0;
        }
        st.total += st.sc.nr_reclaimed;
        // kswapd_shrink_node: progress is what was scanned or reclaimed, whichever is more
        // (6.11, "mm/mglru: fix overshooting shrinker memory"); sc here is this pass's own.
        let raise = st.sc.nr_scanned.max(st.sc.nr_reclaimed) < st.sc.nr_to_reclaim;
        let mut priority = st.sc.priority;
        if raise || st.sc.nr_reclaimed == 0 {
            priority -= 1;
        }
        let balanced = self.pgdat_balanced(n);
        if priority >= 1 && !balanced {
            st.priority = priority;
            self.nodes[n].lrugen.kswapd = st;
            let at = m.cpus[c].clock;
            self.schedule(at, crate::kernel::Event::KswapdRun(n as u8));
            return;
        }
        // out
        self.nodes[n].zone.reclaim_active = false;
        if st.total == 0 {
            self.nodes[n].kswapd_failures += 1;
        } else {
            self.nodes[n].kswapd_failures = 0;
        }
        st.active = false;
        self.nodes[n].lrugen.kswapd = st;
        self.kswapd_try_to_sleep(m, n, c);
    }

    /// lru_gen_look_around: eviction's rmap walk found the PTE at (mm, vpn) young; age the
    /// young PTEs around it (up to MIN_LRU_BATCH, inside its PMD and VMA), including this one.
    /// With kswapd's walk they go to max_seq (folio_update_gen); in direct reclaim a listed
    /// folio of an older generation is activated. Returns the PTEs examined.
    pub(crate) fn lru_gen_look_around(&mut self, mm: usize, vpn: u32, pfn: u32) -> u64 {
        let n = self.frames.get(pfn).node as usize;
        let can_swap = self.frames.get(pfn).has(pg::SWAPBACKED);
        let Some(vma) = self.mms[mm].find_vma((vpn as u64) << PAGE_SHIFT) else {
            return 0;
        };
        let (vs, ve) = (
            (vma.start >> PAGE_SHIFT) as u32,
            (vma.end >> PAGE_SHIFT) as u32,
        );
        let mut start = (vpn & !511).max(vs);
        let mut end = (vpn | 511).min(ve - 1) + 1;
        let batch = MIN_LRU_BATCH as u32;
        if end - start > batch {
            if vpn - start < batch / 2 {
                end = start + batch;
            } else if end - vpn < batch / 2 {
                start = end - batch;
            } else {
                start = vpn - batch / 2;
                end = vpn + batch / 2;
            }
        }
        let max_seq = self.nodes[n].lrugen.max_seq;
        let new_gen = lru_gen_from_seq(max_seq);
        let walk = self.nodes[n].lrugen.kswapd_walk;
        let zero = self.zero_pfn;
        let pmd = vpn >> 9;
        let mut young_pfns = Vec::new();
        {
            let Some(table) = self.mms[mm].pgtable.pte_table_mut(pmd) else {
                return 0;
            };
            for slot in &mut table[(start & 511) as usize..=((end - 1) & 511) as usize] {
                let p = *slot;
                if !pte::maps_frame(p) || pte::pfn(p) == zero || p & pte::YOUNG == 0 {
                    continue;
                }
                let f = self.frames.get(pte::pfn(p));
                if f.node as usize != n || (f.has(pg::SWAPBACKED) && !can_swap) {
                    continue;
                }
                *slot &= !pte::YOUNG;
                young_pfns.push((pte::pfn(p), p & pte::DIRTY != 0));
            }
        }
        let young = young_pfns.len() as u64;
        for (f, dirty) in young_pfns {
            if dirty && !self.frames.get(f).has(pg::ANON) {
                self.frames.get_mut(f).flags |= pg::DIRTY;
            }
            if walk {
                self.folio_update_gen(n, f, new_gen);
                continue;
            }
            match self.folio_lru_gen(f) {
                None => self.frames.get_mut(f).flags |= pg::REFERENCED,
                Some(old) if old != new_gen => {
                    if self.lru_gen_activate(f) {
                        self.vm.inc(Vm::PgActivate);
                    }
                }
                Some(_) => {}
            }
        }
        let total = (end - start) as u64;
        if suitable_to_scan(total, young) {
            let key = ((mm as u64) << 32) | pmd as u64;
            self.nodes[n].lrugen.update_bloom_filter(max_seq, key);
        }
        total
    }

    /// The MGLRU invariants of node `n`: every listed folio's generation is valid and within
    /// [min_seq, max_seq] of its type, nr_pages per generation matches the folios, the
    /// sequence numbers satisfy seq_is_valid, and the classic lists are empty.
    pub(crate) fn lru_gen_check(&self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        let node = &self.nodes[n];
        let g = &node.lrugen;
        let nf = g.nr_gens(LRU_GEN_FILE);
        let na = g.nr_gens(LRU_GEN_ANON);
        if !(MIN_NR_GENS <= nf && nf <= na && na <= MAX_NR_GENS) {
            out.push(format!(
                "node {n}: max_seq {} min_seq {:?} violate seq_is_valid",
                g.max_seq, g.min_seq
            ));
        }
        for (l, list) in node.lru.iter().enumerate() {
            if !list.is_empty() {
                out.push(format!(
                    "node {n}: classic list {l} holds {} folios",
                    list.len
                ));
            }
        }
        let mut count = [[0i64; 2]; NGENS];
        for (lg, lists) in g.folios.iter().enumerate() {
            for (type_, list) in lists.iter().enumerate() {
                for pfn in self.frames.list_iter(list) {
                    let p = self.frames.get(pfn);
                    let Some(gen) = self.folio_lru_gen(pfn) else {
                        out.push(format!(
                            "frame {pfn} on generation list {lg} has no generation"
                        ));
                        continue;
                    };
                    count[gen][type_] += 1;
                    if p.lru_gen_list as usize != lg + 1
                        || self.folio_type(pfn) != type_
                        || p.has(pg::ACTIVE)
                    {
                        out.push(format!(
                            "frame {pfn} on node {n} generation list {lg}/{type_}: list mark {}, flags {:#x}",
                            p.lru_gen_list, p.flags
                        ));
                    }
                    let seq_ok = (g.min_seq[type_]..=g.max_seq).any(|s| lru_gen_from_seq(s) == gen);
                    if !seq_ok {
                        out.push(format!(
                            "frame {pfn} on node {n}: generation {gen} outside min_seq {} .. max_seq {}",
                            g.min_seq[type_], g.max_seq
                        ));
                    }
                }
            }
        }
        if count != g.nr_pages {
            out.push(format!(
                "node {n}: nr_pages {:?} but the lists hold {:?}",
                g.nr_pages, count
            ));
        }
        let listed: i64 = count.iter().flatten().sum();
        let expected = node.nr_anon + node.nr_file - node.nr_isolated;
        if listed as u64 != expected {
            out.push(format!(
                "node {n}: {listed} folios in generations but anon + file - isolated = {expected}"
            ));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mm::mmzone::LRU_ACTIVE_ANON;

    #[test]
    fn tiers_from_refs() {
        assert_eq!(lru_tier_from_refs(0), 0);
        assert_eq!(lru_tier_from_refs(1), 1);
        assert_eq!(lru_tier_from_refs(2), 2);
        assert_eq!(lru_tier_from_refs(3), 2);
        assert_eq!(lru_tier_from_refs(4), 3);
    }

    #[test]
    fn without_refaults_the_controller_prefers_file_and_every_tier() {
        let g = LruGenFolio::new(true);
        let sp = g.read_ctrl_pos(LRU_GEN_ANON, 0, 60);
        let pv = g.read_ctrl_pos(LRU_GEN_FILE, 0, 140);
        assert!(positive_ctrl_err(&sp, &pv));
    }

    #[test]
    fn the_initial_priority_stays_at_def_priority_half_or_above() {
        let text = "[machine]\ncpus = 1\n[[machine.nodes]]\nname = \"dram\"\ncapacity_mib = 16\n\
                    read_latency_ns = 100\nwrite_latency_ns = 100\ncpus = \"0\"\n\
                    [vm]\nlru_gen_enabled = true\n[workload]\ntype = \"test\"\n";
        let mut sim = crate::sim::sim_for_test(text, vec![]);
        let start = |sim: &crate::Sim| {
            let mut sc = ScanCtl {
                priority: DEF_PRIORITY as i32,
                nr_to_reclaim: 4096,
                ..Default::default()
            };
            sim.k.set_initial_priority(0, &mut sc);
            sc.priority
        };
        // Every folio in the two youngest generations (a fill): no inactive folio, and the
        // estimate, fls(0) - 1 - fls(4095) = -13, starts at DEF_PRIORITY / 2, not at 0.
        sim.k.nodes[0].lrugen.nr_pages[2][LRU_GEN_FILE] = 1 << 20;
        assert_eq!(start(&sim), DEF_PRIORITY as i32 / 2);
        // 2^20 inactive file pages: fls - 1 = 20, less fls(4095) = 12: priority 8.
        sim.k.nodes[0].lrugen.nr_pages[0][LRU_GEN_FILE] = 1 << 20;
        assert_eq!(start(&sim), 8);
    }

    #[test]
    fn eviction_counts_a_thp_as_its_base_pages_scanned() {
        use crate::workload::{prot, Backing, Op};
        let text = "[machine]\ncpus = 1\n[[machine.nodes]]\nname = \"dram\"\ncapacity_mib = 64\n\
                    read_latency_ns = 100\nwrite_latency_ns = 100\ncpus = \"0\"\n\
                    [[machine.nodes]]\nname = \"cxl\"\ncapacity_mib = 64\n\
                    read_latency_ns = 250\nwrite_latency_ns = 250\ncpus = \"\"\n\
                    [vm]\nlru_gen_enabled = true\ndemotion_enabled = true\n\
                    transparent_hugepage_enabled = \"always\"\n[workload]\ntype = \"test\"\n";
        // Four THPs written on DRAM.
        let base = 0x4000_0000u64;
        let huge = 2u64 << 20;
        let mut ops = vec![Op::Mmap {
            addr: base,
            len: 4 * huge,
            prot: prot::READ | prot::WRITE,
            backing: Backing::Anon,
        }];
        ops.extend((0..4).map(|i| Op::Store(base + i * huge)));
        let mut sim = crate::sim::run_pinned_for_test(text, ops);
        assert_eq!(sim.k.anon_thps_on(0), 4);
        // Two forced agings: the first makes the PMDs old, the second leaves the THPs in the
        // generation it found them in, which then retires to the oldest.
        for _ in 0..2 {
            sim.k.try_to_inc_min_seq(0, true);
            let max_seq = sim.k.nodes[0].lrugen.max_seq;
            assert!(sim
                .k
                .try_to_inc_max_seq(&mut sim.hw, 0, 0, max_seq, true, true));
        }
        sim.k.try_to_inc_min_seq(0, true);
        let mut sc = ScanCtl {
            priority: DEF_PRIORITY as i32,
            nr_to_reclaim: 4096,
            ..Default::default()
        };
        sim.k
            .evict_folios(&mut sim.hw, 0, 0, &mut sc, 60, Reclaimer::Kswapd);
        // scan_folios stops once MIN_LRU_BATCH pages are isolated: one THP, demoted whole;
        // shrink_folio_list counts its 512 pages in sc->nr_scanned as in sc->nr_reclaimed.
        assert_eq!(sc.nr_reclaimed, 512);
        assert_eq!(sc.nr_scanned, 512);
    }

    #[test]
    fn active_generations_are_the_two_youngest() {
        let mut g = LruGenFolio::new(true);
        assert_eq!(g.max_seq, 3);
        assert!(g.is_active(3) && g.is_active(2) && !g.is_active(1) && !g.is_active(0));
        g.nr_pages[2][LRU_GEN_ANON] = 5;
        g.nr_pages[1][LRU_GEN_ANON] = 7;
        g.nr_pages[0][LRU_GEN_FILE] = 3;
        assert_eq!(g.lru_size(LRU_ACTIVE_ANON), 5);
        assert_eq!(g.lru_size(LRU_INACTIVE_ANON), 7);
        assert_eq!(g.lru_size(LRU_INACTIVE_FILE), 3);
    }
}
