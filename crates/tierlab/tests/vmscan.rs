//! The classic LRU's scan balance (mm/vmscan.c): prepare_scan_control's cache_trim_mode and
//! file_is_tiny, get_scan_count's SCAN_FRACT split by swappiness and lru_note_cost's reclaim
//! costs, and shrink_lruvec's proportional cut once kswapd has reclaimed its target.

mod common;

use common::*;
use tierlab::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use tierlab::mm::page::pg;
use tierlab::mm::vmscan::{Reclaimer, DEF_PRIORITY};
use tierlab::stats::Vm;
use tierlab::workload::{FileSpec, Placement};
use tierlab::Sim;

/// `file` page-cache pages then `anon` anon pages written on DRAM (16 MiB), demotion on.
fn dram_with(file: u64, anon: u64) -> Sim {
    let mut cfg = tiered_config(&[]);
    cfg.kernel.numa_balancing = 0;
    let ops = if file > 0 {
        file_then_anon(0x4000_0000, file, anon)
    } else {
        let mut ops = vec![anon_rw(BASE, anon)];
        ops.extend((0..anon).map(|i| tierlab::workload::Op::Store(BASE + i * PAGE)));
        ops
    };
    let files = if file > 0 {
        vec![FileSpec {
            name: "f".into(),
            pages: file,
            shmem: false,
        }]
    } else {
        vec![]
    };
    run(cfg, workload(vec![(0, Placement::Pinned(0), ops)], files))
}

fn scan_count(sim: &Sim, priority: u32) -> [u64; 4] {
    let prep = sim.k.prepare_scan_control(0, priority);
    sim.k.get_scan_count(0, priority, &prep)
}

#[test]
fn anon_alone_above_the_high_watermark_gets_the_swappiness_share_of_its_list() {
    let mut sim = dram_with(0, 2000);
    let anon = sim.k.nodes[0].lru_size(LRU_INACTIVE_ANON);
    assert!(anon >= 1900, "{anon}");
    // No reclaim costs yet: SCAN_FRACT with swappiness 60 against 200 - 60.
    let nr = scan_count(&sim, 4);
    assert_eq!(nr[LRU_INACTIVE_ANON], (anon >> 4) * 60 / 200);
    // Anon that cost more to reclaim lately is scanned less: anon_cost 1,000 against 0
    // weighs anon 60 × 3,001 / 2,001 = 89 against file 140 × 3,001 / 1,001 = 419.
    sim.k.nodes[0].anon_cost = 1000;
    let nr = scan_count(&sim, 4);
    assert_eq!(nr[LRU_INACTIVE_ANON], (anon >> 4) * 89 / (89 + 419));
    // Priority 0 (only direct reclaim gets there) scans both types equally: all of it.
    assert_eq!(scan_count(&sim, 0)[LRU_INACTIVE_ANON], anon);
}

#[test]
fn file_is_tiny_counts_the_free_pages_of_zone_dma() {
    let mut sim = dram_with(0, 2000);
    let anon = sim.k.nodes[0].lru_size(LRU_INACTIVE_ANON);
    // ZONE_DMA's low watermark plus its lowmem_reserve against the rest of the node.
    let dma_free = sim.k.nodes[0].lower_free.len() as u64;
    assert!(dma_free > 0);
    // Free pages and file pages at the high watermark: file is tiny, scan anon only.
    let free = sim.k.nodes[0].zone.nr_free;
    sim.k.nodes[0].zone.wmark.high = free + dma_free;
    assert_eq!(scan_count(&sim, 4)[LRU_INACTIVE_ANON], anon >> 4);
    // One page under it, counting ZONE_DMA's free pages: not tiny.
    sim.k.nodes[0].zone.wmark.high = free + dma_free - 1;
    assert_eq!(
        scan_count(&sim, 4)[LRU_INACTIVE_ANON],
        (anon >> 4) * 60 / 200
    );
}

#[test]
fn plenty_of_inactive_page_cache_is_trimmed_before_anon() {
    let sim = dram_with(1000, 1000);
    let file = sim.k.nodes[0].lru_size(LRU_INACTIVE_FILE);
    assert!(file > 900, "{file}");
    // cache_trim_mode: the inactive file list is not low, so only file is scanned.
    let nr = scan_count(&sim, 2);
    assert_eq!(nr, [0, 0, file >> 2, 0]);
}

#[test]
fn reclaim_costs_are_charged_and_halved_past_a_quarter_of_the_lru() {
    let mut sim = dram_with(0, 2000);
    let lru: u64 = (0..4).map(|l| sim.k.nodes[0].lru_size(l)).sum();
    // A written page costs SWAP_CLUSTER_MAX, a rotated one 1.
    sim.k.lru_note_cost(0, false, 2, 10);
    assert_eq!(
        (sim.k.nodes[0].anon_cost, sim.k.nodes[0].file_cost),
        (74, 0)
    );
    sim.k.lru_note_cost(0, true, 0, 6);
    assert_eq!(
        (sim.k.nodes[0].anon_cost, sim.k.nodes[0].file_cost),
        (74, 6)
    );
    // Past lru / 4 both decay by half.
    sim.k.lru_note_cost(0, false, 0, lru / 4);
    assert_eq!(
        (sim.k.nodes[0].anon_cost, sim.k.nodes[0].file_cost),
        ((74 + lru / 4) / 2, 3)
    );
}

#[test]
fn once_kswapd_has_its_target_the_smaller_type_stops_and_the_other_is_cut_to_match() {
    let mut sim = dram_with(1000, 2000);
    let c = 0;
    let mut pass = sim.k.start_shrink(0, DEF_PRIORITY, 0, Reclaimer::Kswapd);
    // Targets of 100 anon and 300 file pages, and nothing to reclaim: one round of 32 from
    // each list meets the target.
    pass.nr = [100, 0, 300, 0];
    pass.targets = pass.nr;
    pass.may_deactivate = [false, false];
    sim.k
        .shrink_step(&mut sim.hw, 0, c, &mut pass, Reclaimer::Kswapd);
    // 68 of 100 anon left is 67 % (68 × 100 / 101): anon stops, and file's 300 is cut to
    // 33 % of it, 99, less the 32 scanned.
    assert_eq!(pass.nr, [0, 0, 67, 0]);
    assert!(pass.more());
    // Direct reclaim at DEF_PRIORITY scans its whole target (proportional_reclaim).
    let mut pass = sim.k.start_shrink(0, DEF_PRIORITY, 0, Reclaimer::Direct);
    pass.nr = [100, 0, 300, 0];
    pass.targets = pass.nr;
    sim.k
        .shrink_step(&mut sim.hw, 0, c, &mut pass, Reclaimer::Direct);
    assert_eq!(pass.nr, [68, 0, 268, 0]);
    // The loop runs while inactive anon or either file list has pages left to scan.
    pass.nr = [0, 5, 0, 0];
    assert!(!pass.more());
}

#[test]
fn kswapd_deactivates_anon_at_the_top_of_each_priority_when_the_inactive_list_is_low() {
    let mut sim = dram_with(0, 3000);
    // Every anon page on DRAM active: the inactive anon list is low.
    let pfns: Vec<u32> = sim.k.frames.iter().map(|(pfn, _)| pfn).collect();
    for pfn in pfns {
        let p = sim.k.frames.get(pfn);
        if p.node == 0 && p.has(pg::LRU) && p.has(pg::SWAPBACKED) && !p.has(pg::ACTIVE) {
            sim.k.folio_activate(pfn);
        }
    }
    let active = sim.k.nodes[0].lru_size(LRU_ACTIVE_ANON);
    assert!(active >= 2900, "{active}");
    // A node short of free pages, and kswapd's first step: get_scan_count's share of the
    // active list at priority 12 is (active >> 12) × 60 / 200 = 0 pages, so what is
    // deactivated is SWAP_CLUSTER_MAX three times: kswapd_age_node at priority 12, the end of
    // shrink_lruvec (the inactive list still low), kswapd_age_node at priority 11.
    assert_eq!((active >> DEF_PRIORITY) * 60 / 200, 0);
    let free = sim.k.nodes[0].zone.nr_free;
    sim.k.nodes[0].zone.wmark.high = free + 1;
    sim.k.nodes[0].zone.wmark.promo = free + 1;
    let refill = sim.k.vm.get(Vm::PgRefill);
    let t = sim.hw.cpus[0].clock;
    sim.k.kswapd_run(&mut sim.hw, 0, t);
    assert_eq!(sim.k.vm.get(Vm::PgRefill) - refill, 3 * 32);
    assert_eq!(sim.k.nodes[0].lru_size(LRU_ACTIVE_ANON), active - 3 * 32);
}
