//! Tiering rules against the kernel (mm/vmscan.c, mm/migrate.c, kernel/sched/fair.c): scanning, hint faults, promotion policy, the
//! rate limit and threshold adjustment, demotion and its fallback, migration batching and
//! TLB flushing. The strict invariant checker runs in every test.

use tierlab::mm::migrate::{MigrateMode, MigrateTarget};
use tierlab::mm::numa_scan_trace::NumaScanWhat;
use tierlab::mm::pgtable::pte;
use tierlab::stats::Vm;
mod common;

use common::{
    anon_rw, fill_then_random_reads, one_process as workload, run, tiered_config, BASE, PAGE,
};
use tierlab::sim::AccessKind;
use tierlab::workload::{FileSpec, Mark, Op, Placement, Workload};
use tierlab::{Config, Sim};

/// The tiered machine with the scanner never due on its own (tests call it directly).
fn no_auto_scan() -> Config {
    tiered_config(&["kernel.numa_balancing_scan_delay_ms=100000"])
}

/// Thread 0 touches `pages` pages in order (DRAM fills to its low watermark, the rest lands
/// on the slow node), then every thread reads the last `hot` pages at random.
fn hot_tail_workload(pages: u64, hot: u64, reads: u64) -> Workload {
    fill_then_random_reads(pages, (pages - hot, hot), reads, 12345, 2000)
}

#[test]
fn mode_2_scans_only_the_slow_tier() {
    let mut t0 = vec![anon_rw(BASE, 6000)];
    t0.extend((0..6000).map(|i| Op::Store(BASE + i * PAGE)));
    let mut sim = run(
        no_auto_scan(),
        workload(vec![(Placement::Pinned(0), t0)], vec![]),
    );
    let on_dram = sim.k.nodes[0].nr_anon;
    let on_cxl = sim.k.nodes[1].nr_anon;
    assert!(on_dram > 3000 && on_cxl > 1000, "{on_dram} / {on_cxl}");
    let before = sim.k.vm.get(Vm::NumaPteUpdates);
    sim.k.sched.threads[0].numa_scan_period_ms = 100;
    sim.k.task_numa_work(&mut sim.hw, 0, 0);
    let marked = sim.k.vm.get(Vm::NumaPteUpdates) - before;
    let mut protnone = [0u64; 2];
    for (_, p) in sim.k.mms[0].pgtable.iter() {
        if p & pte::PROTNONE != 0 {
            protnone[sim.hw.node_of_pfn(pte::pfn(p))] += 1;
        }
    }
    assert_eq!(
        protnone[0], 0,
        "top-tier PTEs are never made PROT_NONE in mode 2"
    );
    assert_eq!(protnone[1], marked);
    assert!(marked > 0);
    sim.k.check_invariants(&sim.hw, "after scan");
    assert_eq!(sim.k.checker.count, 0);
}

#[test]
fn a_fault_returns_through_the_scan_and_its_store_runs_again() {
    // One thread writes each page once, in order, past DRAM onto the slow node; the scanner
    // (64 MB a pass, so one chunk covers the region) runs during the fill. Scans run as task
    // work on the return to user mode: one that ends a first-touch fault makes the
    // just-mapped slow page PROT_NONE before the store runs again, so a fill that never
    // revisits a page takes hint faults.
    let pages = 16_000;
    let mut t0 = vec![anon_rw(BASE, pages)];
    t0.extend((0..pages).map(|i| Op::Store(BASE + i * PAGE)));
    let cfg = tiered_config(&[
        "sim.trace_numa_scan=true",
        "kernel.numa_balancing_scan_size_mb=64",
    ]);
    let sim = run(cfg, workload(vec![(Placement::Pinned(0), t0)], vec![]));
    let trace = sim.k.numa_scan_trace.as_ref().expect("traced");
    let marking = trace
        .iter()
        .filter(|e| matches!(e.what, NumaScanWhat::Chunk { updated, .. } if updated > 0))
        .count() as u64;
    let hint_faults = sim.k.vm.get(Vm::NumaHintFaults);
    assert!(marking > 0, "the scanner marked slow pages during the fill");
    assert!(
        hint_faults > 0 && hint_faults <= marking,
        "{hint_faults} hint faults from {marking} marking scans"
    );
}

/// 6,000 pages written by one thread (the tail on the slow node), then one slow walk
/// (2,000 cycles per PTE: ~5 ms, charged to CPU 0 at once) over them. Returns the walk's
/// start and end on CPU 0's clock and the PTEs it made PROT_NONE, with their vpns.
fn one_slow_walk() -> (Sim, u64, u64, Vec<(u32, u64)>) {
    let mut t0 = vec![anon_rw(BASE, 6000)];
    t0.extend((0..6000).map(|i| Op::Store(BASE + i * PAGE)));
    let mut cfg = no_auto_scan();
    cfg.cost.numa_scan_pte_cycles = 2000;
    let mut sim = run(cfg, workload(vec![(Placement::Pinned(0), t0)], vec![]));
    let start = sim.hw.cpus[0].clock;
    let (s, e) = ((BASE / PAGE) as u32, (BASE / PAGE) as u32 + 6000);
    assert!(sim.k.change_prot_numa(&mut sim.hw, 0, 0, s, e) > 0);
    let end = sim.hw.cpus[0].clock;
    let marked = (s..e)
        .map(|v| (v, sim.k.mms[0].pgtable.get(v)))
        .filter(|(_, p)| p & pte::PROTNONE != 0)
        .collect();
    (sim, start, end, marked)
}

#[test]
fn the_scan_marks_each_pte_when_its_walk_reaches_it() {
    let (mut sim, start, end, marked) = one_slow_walk();
    let stamp = |p: u64| sim.k.frames.get(pte::pfn(p)).numa_access_ms;
    let (first, last) = (marked[0].1, marked.last().unwrap().1);
    assert!(
        stamp(last) > stamp(first),
        "{} {}",
        stamp(first),
        stamp(last)
    );
    // CPU 1 at the walk's start does not see the last PTE yet; at its end it does.
    sim.hw.cpus[1].clock = start;
    assert!(sim.k.numa_scan_ahead(&sim.hw, 1, last));
    sim.hw.cpus[1].clock = end;
    assert!(!sim.k.numa_scan_ahead(&sim.hw, 1, last));
    assert!(!sim.k.numa_scan_ahead(&sim.hw, 1, first));
}

#[test]
fn a_prot_none_pte_needs_a_flush_while_its_scan_has_not_flushed() {
    // pte_accessible: the walk's PROT_NONE PTEs may still sit in TLBs until change_prot_numa's
    // tlb_finish_mmu, so unmapping one in that span must flush; after it, not.
    let (mut sim, start, end, marked) = one_slow_walk();
    let (vpn, p) = marked[0];
    sim.hw.cpus[1].clock = (start + end) / 2;
    assert!(sim.k.pte_accessible(&sim.hw, 1, 0, p));
    sim.k.set_tlb_ubc_flush_pending(&mut sim.hw, 1, 0, vpn, p);
    assert!(sim.k.tlb_ubc.flush_required, "unmapped during the walk");
    sim.k.tlb_ubc = Default::default();
    sim.hw.cpus[1].clock = end;
    assert!(!sim.k.pte_accessible(&sim.hw, 1, 0, p));
    sim.k.set_tlb_ubc_flush_pending(&mut sim.hw, 1, 0, vpn, p);
    let required = sim.k.tlb_ubc.flush_required;
    assert!(!required, "unmapped after tlb_finish_mmu");
}

fn sim_with_slow_page() -> (Sim, u32) {
    let mut t0 = vec![anon_rw(BASE, 6000)];
    t0.extend((0..6000).map(|i| Op::Store(BASE + i * PAGE)));
    let mut sim = run(
        no_auto_scan(),
        workload(vec![(Placement::Pinned(0), t0)], vec![]),
    );
    let pfn = pte::pfn(sim.k.mms[0].pgtable.get(((BASE >> 12) + 5999) as u32));
    assert_eq!(sim.hw.node_of_pfn(pfn), 1);
    // Ten simulated seconds in, so latencies and windows are well defined.
    sim.hw.cpus[0].clock = (10.0 * 2.2e9) as u64;
    (sim, pfn)
}

#[test]
fn hot_threshold_accepts_recent_and_rejects_old_scans() {
    let (mut sim, pfn) = sim_with_slow_page();
    assert!(
        !sim.k.pgdat_free_space_enough(0),
        "a small DRAM node never has 1 GiB spare"
    );
    let now = sim.hw.now_ms(0) as u32;
    sim.k.frames.get_mut(pfn).numa_access_ms = now - 500;
    assert!(
        sim.k.should_numa_migrate_memory(&mut sim.hw, 0, pfn, 1, 0),
        "500 ms < 1000 ms threshold"
    );
    sim.k.frames.get_mut(pfn).numa_access_ms = now - 1500;
    assert!(
        !sim.k.should_numa_migrate_memory(&mut sim.hw, 0, pfn, 1, 0),
        "1500 ms is too cold"
    );
    // The fault stored its time: an immediate second fault is hot.
    assert!(sim.k.should_numa_migrate_memory(&mut sim.hw, 0, pfn, 1, 0));
    // Only latency-passing faults are promotion candidates.
    assert_eq!(sim.k.vm.get(Vm::PgPromoteCandidate), 2);
    // A top-tier source is not a tiering promotion.
    assert!(!sim.k.should_numa_migrate_memory(&mut sim.hw, 0, pfn, 0, 0));
}

#[test]
fn rate_limit_engages_when_set_low() {
    let (mut sim, _) = sim_with_slow_page();
    // 1 MB/s = 256 pages per second.
    let limit = 1u64 << (20 - 12);
    let now = 10_000;
    let refused: Vec<bool> = (0..300)
        .map(|_| sim.k.numa_promotion_rate_limit(0, limit, 1, now))
        .collect();
    // The first call opens the 1-second window; 256 candidates later the limit binds.
    assert!(refused[..255].iter().all(|r| !r));
    assert!(refused[256..].iter().all(|r| *r));
    // A new second resets the window.
    assert!(!sim.k.numa_promotion_rate_limit(0, limit, 1, now + 1001));
}

#[test]
fn hot_threshold_adjusts_in_125_ms_steps_within_bounds() {
    let (mut sim, _) = sim_with_slow_page();
    let limit = 65536u64 << 8;
    let mut now = 0;
    let mut seen = vec![];
    // No candidates at all: too few → the threshold loosens toward 2 s.
    for _ in 0..12 {
        now += 60_001;
        sim.k.numa_promotion_adjust_threshold(0, limit, 1000, now);
        seen.push(sim.k.nodes[0].numab.nbp_threshold);
    }
    assert_eq!(
        &seen[..9],
        &[1125, 1250, 1375, 1500, 1625, 1750, 1875, 2000, 2000]
    );
    // Far too many candidates: tighten down to 125 ms and no lower.
    let small_limit = 1;
    seen.clear();
    for _ in 0..20 {
        now += 60_001;
        sim.k.nodes[0].numab.pgpromote_candidate += 1000;
        sim.k
            .numa_promotion_adjust_threshold(0, small_limit, 1000, now);
        seen.push(sim.k.nodes[0].numab.nbp_threshold);
    }
    assert_eq!(seen[0], 1875);
    assert!(seen
        .windows(2)
        .all(|w| w[0] - w[1] == 125 || (w[0] == 125 && w[1] == 125)));
    assert_eq!(*seen.last().unwrap(), 125);
    // Within one period nothing moves.
    sim.k
        .numa_promotion_adjust_threshold(0, small_limit, 1000, now + 10);
    assert_eq!(sim.k.nodes[0].numab.nbp_threshold, 125);
}

#[test]
fn promotion_is_refused_and_kswapd_woken_when_the_target_is_short() {
    let (mut sim, pfn) = sim_with_slow_page();
    let z = &sim.k.nodes[0].zone;
    assert!(
        z.nr_free <= z.wmark.high + 1,
        "DRAM filled to its low watermark"
    );
    assert!(!sim.k.nodes[0].kswapd_awake);
    assert!(!sim
        .k
        .migrate_misplaced_folio_prepare(&mut sim.hw, 0, pfn, 0));
    assert!(
        sim.k.nodes[0].kswapd_awake,
        "kswapd woken on the target node"
    );
    // With room above high + 1 (lower the marks instead of freeing memory), the folio is
    // isolated and promoted.
    let w = &mut sim.k.nodes[0].zone.wmark;
    (w.min, w.low, w.high) = (0, 0, 0);
    let before = sim.k.mms[0].pgtable.get(((BASE >> 12) + 5999) as u32);
    assert_eq!(before & (pte::YOUNG | pte::DIRTY), pte::YOUNG | pte::DIRTY);
    assert!(sim
        .k
        .migrate_misplaced_folio_prepare(&mut sim.hw, 0, pfn, 0));
    assert!(sim.k.migrate_misplaced_folio(&mut sim.hw, 0, pfn, 1, 0));
    assert_eq!(sim.k.vm.get(Vm::PgPromoteSuccess), 1);
    assert_eq!(sim.k.vm.get(Vm::NumaPagesMigrated), 1);
    let p = sim.k.mms[0].pgtable.get(((BASE >> 12) + 5999) as u32);
    assert_eq!(sim.hw.node_of_pfn(pte::pfn(p)), 0, "remapped to DRAM");
    assert!(
        p & pte::WRITE != 0,
        "the migration entry kept write permission"
    );
    assert_eq!(
        p & (pte::YOUNG | pte::DIRTY),
        pte::YOUNG | pte::DIRTY,
        "the migration entry kept young and dirty (6.1 and later)"
    );
}

#[test]
fn a_batch_of_unmaps_sends_one_ipi_per_remote_cpu_and_protnone_queues_none() {
    // Four threads of one process on four CPUs touch 200 pages, then keep running.
    let mut t0 = vec![anon_rw(BASE, 200)];
    t0.extend((0..200).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Barrier);
    let mut threads = vec![(Placement::Pinned(0), t0)];
    for c in 1..4 {
        let mut ops = vec![Op::Barrier];
        ops.extend((0..200).map(|i| Op::Load(BASE + i * PAGE)));
        ops.extend((0..50).map(|_| Op::Compute(1_000_000)));
        threads.push((Placement::Pinned(c), ops));
    }
    let mut cfg = tiered_config(&["sim.max_seconds=0.005"]);
    cfg.kernel.numa_balancing = 0;
    let mut sim = run(cfg, workload(threads, vec![]));
    let folios: Vec<u32> = (0..100)
        .map(|i| pte::pfn(sim.k.mms[0].pgtable.get(((BASE >> 12) + i) as u32)))
        .collect();
    for &f in &folios {
        assert!(sim.k.folio_isolate_lru(f));
    }
    let before: Vec<u64> = sim.hw.cpus.iter().map(|c| c.irq.tlb).collect();
    let (moved, failed) = sim.k.migrate_pages(
        &mut sim.hw,
        0,
        folios,
        &MigrateTarget::Node(1),
        MigrateMode::Async,
    );
    assert_eq!((moved, failed.len()), (100, 0));
    for (c, b) in before.iter().enumerate().skip(1) {
        assert_eq!(
            sim.hw.cpus[c].irq.tlb - b,
            1,
            "CPU {c}: one IPI for a batch of 100"
        );
    }
    assert_eq!(sim.hw.cpus[0].irq.tlb, before[0]);
    // PROT_NONE PTEs are inaccessible: migrating them queues no flush at all.
    let folios: Vec<u32> = (100..150)
        .map(|i| {
            let vpn = ((BASE >> 12) + i) as u32;
            let slot = sim.k.mms[0].pgtable.get_mut(vpn).unwrap();
            *slot = (*slot & !pte::PRESENT) | pte::PROTNONE;
            pte::pfn(*slot)
        })
        .collect();
    // (A real scan flushed these when it made them PROT_NONE.)
    for c in 0..4 {
        let asid = sim.hw.cpus[c].cur_asid;
        sim.hw.cpus[c].flush_asid(asid);
    }
    for &f in &folios {
        assert!(sim.k.folio_isolate_lru(f));
    }
    let before: Vec<u64> = sim.hw.cpus.iter().map(|c| c.irq.tlb).collect();
    sim.k.migrate_pages(
        &mut sim.hw,
        0,
        folios,
        &MigrateTarget::Node(1),
        MigrateMode::Async,
    );
    let after: Vec<u64> = sim.hw.cpus.iter().map(|c| c.irq.tlb).collect();
    assert_eq!(before, after, "no shootdown for PROT_NONE PTEs");
    sim.k.check_invariants(&sim.hw, "end");
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
}

#[test]
fn sync_migration_flushes_each_page_instead_of_batching() {
    let mut t0 = vec![anon_rw(BASE, 64)];
    t0.extend((0..64).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Barrier);
    let mut t1 = vec![Op::Barrier];
    t1.extend((0..64).map(|i| Op::Load(BASE + i * PAGE)));
    t1.extend((0..50).map(|_| Op::Compute(1_000_000)));
    let mut cfg = tiered_config(&["sim.max_seconds=0.003"]);
    cfg.kernel.numa_balancing = 0;
    let mut sim = run(
        cfg,
        workload(
            vec![(Placement::Pinned(0), t0), (Placement::Pinned(1), t1)],
            vec![],
        ),
    );
    let folios: Vec<u32> = (0..10)
        .map(|i| pte::pfn(sim.k.mms[0].pgtable.get(((BASE >> 12) + i) as u32)))
        .collect();
    for &f in &folios {
        sim.k.folio_isolate_lru(f);
    }
    let before = sim.hw.cpus[1].irq.tlb;
    sim.k.migrate_pages(
        &mut sim.hw,
        0,
        folios,
        &MigrateTarget::Node(1),
        MigrateMode::Sync,
    );
    assert_eq!(
        sim.hw.cpus[1].irq.tlb - before,
        10,
        "MIGRATE_SYNC: ptep_clear_flush per page"
    );
}

#[test]
fn demotion_falls_back_to_reclaim_when_the_target_is_full() {
    // A slow node as small as DRAM: anon fills DRAM, spills and fills it too, so kswapd's
    // demotions fail and shrink_folio_list retries them as normal reclaim.
    let mut cfg = tiered_config(&[]);
    cfg.machine.nodes[1].capacity_mib = 16;
    cfg.kernel.numa_balancing = 0;
    // 3000 file pages on DRAM, then enough anon to fill DRAM and the slow node.
    let fbase = 0x4000_0000u64;
    let ops = common::file_then_anon(fbase, 3000, 6000);
    let sim = run(
        cfg,
        workload(
            vec![(Placement::Pinned(0), ops)],
            vec![FileSpec {
                name: "f".into(),
                pages: 3000,
                shmem: false,
            }],
        ),
    );
    assert!(
        sim.k.vm.get(Vm::PgMigrateFail) > 0,
        "demotion to the full node failed"
    );
    assert!(
        sim.k.vm.get(Vm::PgStealFile) > 0,
        "…and reclaim dropped clean file pages instead"
    );
    assert!(sim.k.vm.get(Vm::PgScanKswapd) + sim.k.vm.get(Vm::PgScanDirect) > 0);
}

#[test]
fn the_tiering_loop_promotes_the_hot_set_and_demotes_cold_pages() {
    // 6000 pages: ~3700 fit in DRAM, the hot last 800 land on the slow node.
    // Long enough for several scan passes: promotions slow the scanner down (the period
    // doubles after each sequence with promotions).
    let sim = run(tiered_config(&[]), hot_tail_workload(6000, 800, 200_000));
    let v = |c| sim.k.vm.get(c);
    assert!(v(Vm::NumaPteUpdates) > 0);
    assert!(v(Vm::NumaHintFaults) > 0);
    assert_eq!(
        v(Vm::NumaHintFaultsLocal),
        0,
        "hint faults only on slow-tier pages"
    );
    assert!(
        v(Vm::PgPromoteSuccess) > 100,
        "promoted {}",
        v(Vm::PgPromoteSuccess)
    );
    assert!(
        v(Vm::PgDemoteKswapd) > 100,
        "demoted {}",
        v(Vm::PgDemoteKswapd)
    );
    assert!(v(Vm::PgPromoteSuccess) <= v(Vm::PgPromoteCandidate));
    assert_eq!(v(Vm::NumaPagesMigrated), v(Vm::PgPromoteSuccess));
    assert_eq!(
        v(Vm::PgMigrateSuccess),
        v(Vm::PgPromoteSuccess) + v(Vm::PgDemoteKswapd) + v(Vm::PgDemoteDirect)
    );
    // pgsteal counts demoted pages (nr_reclaimed += nr_demoted).
    assert!(v(Vm::PgStealKswapd) >= v(Vm::PgDemoteKswapd));
    // The hot set moved: most of it now lives in DRAM.
    let hot_in_dram = (5200..6000u64)
        .filter(|i| {
            let p = sim.k.mms[0].pgtable.get(((BASE >> 12) + i) as u32);
            sim.hw.node_of_pfn(pte::pfn(p)) == 0
        })
        .count();
    assert!(
        hot_in_dram > 400,
        "hot pages in DRAM: {hot_in_dram} of 800 (none at the start)"
    );
    // And the share of accesses served by DRAM rose across the run.
    let tl = &sim.timeline;
    let share = |s: &tierlab::sim::Sample| {
        let (a0, a1) = (s.nodes[0].3 as f64, s.nodes[1].3 as f64);
        a0 / (a0 + a1).max(1.0)
    };
    let first_read = tl.iter().position(|s| s.nodes[1].3 > 10_000).unwrap();
    let early = share(&tl[first_read]);
    let window = |a: &tierlab::sim::Sample, b: &tierlab::sim::Sample| {
        let d0 = (b.nodes[0].3 - a.nodes[0].3) as f64;
        let d1 = (b.nodes[1].3 - a.nodes[1].3) as f64;
        d0 / (d0 + d1).max(1.0)
    };
    let late = window(&tl[tl.len() - 3], &tl[tl.len() - 1]);

    assert!(
        late > early + 0.3,
        "DRAM share early {early:.2}, late {late:.2}"
    );
}

#[test]
fn without_demotion_kswapd_cannot_make_room_and_promotions_stall() {
    let cfg = tiered_config(&["vm.demotion_enabled=false"]);
    let sim = run(cfg, hot_tail_workload(6000, 800, 20_000));
    assert_eq!(sim.k.vm.get(Vm::PgDemoteKswapd), 0);
    assert!(sim.k.vm.get(Vm::NumaHintFaults) > 0);
    assert!(
        sim.k.vm.get(Vm::PgPromoteSuccess) < 50,
        "{}",
        sim.k.vm.get(Vm::PgPromoteSuccess)
    );
}

#[test]
fn scan_period_follows_task_scan_min() {
    let (mut sim, _) = sim_with_slow_page();
    let cfg = &mut sim.k.cfg.kernel;
    (
        cfg.numa_balancing_scan_size_mb,
        cfg.numa_balancing_scan_period_min_ms,
    ) = (256, 1000);
    // RSS ~6000 pages: one 256 MB window → max(100 ms floor, 1000 ms / 1) = 1000 ms.
    assert_eq!(sim.k.task_scan_min_ms(0), 1000);
    // 23 windows (XSBench large): 1000 / 23 = 43 ms, below the 100 ms floor.
    sim.k.mms[0].rss_anon = 23 * 65536;
    assert_eq!(sim.k.task_scan_min_ms(0), 100);
    sim.k.mms[0].rss_anon = 4 * 65536;
    assert_eq!(sim.k.task_scan_min_ms(0), 250);
}

#[test]
fn move_pages_moves_a_range_with_a_flush_per_page() {
    // Thread 0 writes 64 pages (DRAM), thread 1 reads them; then thread 0 moves 16 to node 1
    // and back, and both keep reading.
    let mut t0 = vec![anon_rw(BASE, 64)];
    t0.extend((0..64).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Barrier);
    t0.push(Op::Barrier);
    t0.push(Op::MovePages {
        addr: BASE,
        len: 16 * PAGE,
        node: 1,
    });
    t0.push(Op::Barrier);
    let mut t1 = vec![Op::Barrier];
    t1.extend((0..64).map(|i| Op::Load(BASE + i * PAGE)));
    t1.push(Op::Barrier);
    t1.push(Op::Barrier);
    t1.extend((0..64).map(|i| Op::Load(BASE + i * PAGE)));
    let run_with = |ad: &str| {
        let mut cfg = tiered_config(&[ad]);
        cfg.kernel.numa_balancing = 0;
        run(
            cfg,
            workload(
                vec![
                    (Placement::Pinned(0), t0.clone()),
                    (Placement::Pinned(1), t1.clone()),
                ],
                vec![],
            ),
        )
    };
    let sim = run_with("kernel.migration_entry_ad=true");
    let node_of = |i: u64| {
        sim.hw.node_of_pfn(pte::pfn(
            sim.k.mms[0].pgtable.get(((BASE >> 12) + i) as u32),
        ))
    };
    assert!((0..16).all(|i| node_of(i) == 1));
    assert!((16..64).all(|i| node_of(i) == 0));
    assert_eq!(sim.k.vm.get(Vm::PgMigrateSuccess), 16);
    assert_eq!(sim.k.nodes[1].nr_anon, 16);
    // MIGRATE_SYNC: each of the 16 PTEs was flushed on its own, so CPU 1 took 16 IPIs.
    assert_eq!(sim.hw.cpus[1].irq.tlb, 16);
    // Before 6.1 the moved pages came back old, and CPU 1's re-read set the Accessed bit of
    // each again; with young kept in the migration entry it sets none.
    let assists = |sim: &Sim| sim.perf_total().get(tierlab::stats::Perf::AbitAssists);
    let old = run_with("kernel.migration_entry_ad=false");
    assert_eq!(assists(&old), assists(&sim) + 16);
}

#[test]
fn only_the_first_thread_takes_task_scan_start() {
    // Thread 0 touches and reads; threads 1-3 only compute, so they never fault or promote.
    let mut t0 = vec![anon_rw(BASE, 6000)];
    t0.extend((0..6000).map(|i| Op::Store(BASE + i * PAGE)));
    t0.extend((0..5000).map(|i| Op::Load(BASE + (5000 + i % 1000) * PAGE)));
    let idle = vec![Op::Compute(20_000_000)];
    let sim = run(
        tiered_config(&[]),
        workload(
            (0..4)
                .map(|c| {
                    (
                        Placement::Pinned(c),
                        if c == 0 { t0.clone() } else { idle.clone() },
                    )
                })
                .collect(),
            vec![],
        ),
    );
    let t = &sim.k.sched.threads;
    // tiered_config: scan_delay 5 ms; task_scan_min = max(1000 / (2560 / 16), 10 / 1) = 10 ms.
    assert_ne!(t[0].numa_node_stamp, 0);
    assert!(
        t[0].numa_scan_period_ms >= 10,
        "{}",
        t[0].numa_scan_period_ms
    );
    for other in &t[1..] {
        assert_eq!(
            other.numa_scan_period_ms, 5,
            "CLONE_VM threads keep scan_delay"
        );
    }
}

#[test]
fn a_promotion_after_a_new_scan_sequence_doubles_the_scan_period() {
    let (mut sim, _) = sim_with_slow_page();
    let tid = 0;
    sim.k.sched.threads[tid].numa_scan_period_ms = 10;
    let max = sim.k.task_scan_max_ms(0);
    // A fault on slow-tier memory is not counted in tiering mode.
    sim.k.mms[0].numa.scan_seq += 1;
    sim.k.task_numa_fault(&sim.hw, 0, tid, 1, 1, false, false);
    assert_eq!(sim.k.sched.threads[tid].numa_scan_period_ms, 10);
    // A promotion (counted on the top-tier target, remote, private): placement runs once per
    // new sequence and doubles the period, and the mm's next scan is now + that period.
    sim.hw.cpus[0].clock += 1_000_000_000;
    sim.k.task_numa_fault(&sim.hw, 0, tid, 0, 1, false, false);
    assert_eq!(sim.k.sched.threads[tid].numa_scan_period_ms, 20.min(max));
    let expect = sim.hw.cpus[0].clock + sim.hw.ns_to_cycles(20.min(max) as f64 * 1e6);
    assert_eq!(sim.k.mms[0].numa.next_scan, expect);
    // The same sequence again: no new placement.
    sim.hw.cpus[0].clock += 1_000_000_000;
    sim.k.task_numa_fault(&sim.hw, 0, tid, 0, 1, false, false);
    assert_eq!(sim.k.sched.threads[tid].numa_scan_period_ms, 20.min(max));
    // Each new sequence doubles it again, up to task_scan_max.
    for _ in 0..20 {
        sim.k.mms[0].numa.scan_seq += 1;
        sim.hw.cpus[0].clock += 1_000_000_000;
        sim.k.task_numa_fault(&sim.hw, 0, tid, 0, 1, false, false);
    }
    assert_eq!(sim.k.sched.threads[tid].numa_scan_period_ms, max);
}

#[test]
fn a_thp_hint_fault_weighs_its_512_pages_in_the_task_statistics() {
    // task_numa_fault(.., pages = HPAGE_PMD_NR, ..) from do_huge_pmd_numa_page: the locality
    // and fault buffers grow by the folio's pages, as for 512 faults on 4 KiB pages.
    let (mut sim, _) = sim_with_slow_page();
    let tid = 0;
    let before = sim.k.sched.threads[tid].numab.clone();
    sim.k.task_numa_fault(&sim.hw, 0, tid, 0, 512, true, true);
    let after = &sim.k.sched.threads[tid].numab;
    assert_eq!(after.locality[1] - before.locality[1], 512);
    assert_eq!(after.locality[2] - before.locality[2], 512);
    assert_eq!(after.faults_buf[1] - before.faults_buf[1], 512);
}

#[test]
fn the_scanner_skips_vmas_the_task_has_not_faulted_in_after_two_sequences() {
    // Two VMAs whose pages sit on the slow tier; the task faults only in the first.
    let mut sim = Sim::new(
        no_auto_scan(),
        workload(
            vec![(
                Placement::Pinned(0),
                vec![anon_rw(BASE, 512), anon_rw(BASE + (4 << 20), 512)],
            )],
            vec![],
        ),
    )
    .unwrap();
    sim.run(&mut |_| {}).unwrap();
    // Map every page of both VMAs on node 1 (migrate them there first).
    for vma in 0..2u64 {
        let base = BASE + vma * (4 << 20);
        for i in 0..512 {
            let vaddr = base + i * PAGE;
            sim.k
                .handle_mm_fault(&mut sim.hw, 0, 0, vaddr, AccessKind::Store)
                .unwrap();
        }
        sim.k
            .sys_move_pages(&mut sim.hw, 0, 0, base, 512 * PAGE, 1)
            .unwrap();
    }
    sim.k.sched.threads[0].numa_scan_period_ms = 1;
    // As if the process still ran four threads (get_nr_threads): a VMA left unscanned for
    // more than four sequences is scanned again anyway.
    sim.k.mms[0].nr_threads = 4;
    let updates = |sim: &Sim| sim.k.vm.get(Vm::NumaPteUpdates);
    let scan = |sim: &mut Sim| {
        sim.hw.cpus[0].clock += sim.hw.ns_to_cycles(200e9);
        sim.k.task_numa_work(&mut sim.hw, 0, 0);
    };
    // Restore the PTEs (no hint fault) so the next pass has something to mark.
    let restore = |sim: &mut Sim| {
        for (vpn, p) in sim.k.mms[0].pgtable.iter().collect::<Vec<_>>() {
            if p & pte::PROTNONE != 0 {
                sim.k.mms[0]
                    .pgtable
                    .set(vpn, (p & !pte::PROTNONE) | pte::PRESENT);
            }
        }
    };
    // The first pass (sequence 0) makes the per-VMA state.
    scan(&mut sim);
    restore(&mut sim);
    let mut seen = vec![];
    for _ in 0..8 {
        let before = updates(&sim);
        scan(&mut sim);
        seen.push(updates(&sim) - before);
        restore(&mut sim);
    }
    eprintln!("PTE updates per pass: {seen:?}");
    // Early sequences scan both VMAs (1024 PTEs per pass); once the unconditional scans are
    // over and no hint fault set the task's PID bit, a pass scans only the one forced VMA.
    assert_eq!(seen[0], 1024, "{seen:?}");
    assert_eq!(&seen[1..3], &[512, 512], "{seen:?}");
}

/// Writes 6,000 pages into the 16 MiB DRAM node, then keeps reading the last 200 (on the slow
/// node): their promotions wake kswapd.
fn promotions_that_wake_kswapd() -> Vec<Op> {
    let mut ops = vec![anon_rw(BASE, 6_000)];
    ops.extend((0..6_000).map(|i| Op::Store(BASE + i * PAGE)));
    for _ in 0..300 {
        ops.extend((5_800..6_000).map(|i| Op::Load(BASE + i * PAGE)));
        ops.push(Op::Compute(200_000));
    }
    ops
}

#[test]
fn kswapd_wakes_on_the_cpu_it_last_ran_on_while_that_cpu_is_idle() {
    // Thread 0 (CPU 0) wakes kswapd (promotions_that_wake_kswapd). It runs on CPU 3, where it
    // last ran (machine.nodes.0.kswapd_cpu), since CPU 3 stays idle (select_idle_sibling
    // keeps an idle prev_cpu); its work is charged there alone.
    let ops = promotions_that_wake_kswapd();
    let run_with = |sets: &[&str]| {
        run(
            tiered_config(sets),
            workload(vec![(Placement::Pinned(0), ops.clone())], vec![]),
        )
    };
    let sim = run_with(&["machine.nodes.0.kswapd_cpu=3"]);
    assert!(sim.k.vm.get(Vm::PgScanKswapd) > 0);
    assert_eq!(sim.k.nodes[0].kswapd_prev_cpu, Some(3));
    let sys: Vec<u64> = sim.hw.cpus.iter().map(|c| c.sys_cycles).collect();
    assert!(sys[3] > 0 && sys[1] == 0 && sys[2] == 0, "{sys:?}");
    // Unset, it starts on an idle CPU of the node and stays there.
    let sim = run_with(&[]);
    let prev = sim.k.nodes[0].kswapd_prev_cpu.expect("kswapd ran") as usize;
    assert_ne!(prev, 0);
    let sys: Vec<u64> = sim.hw.cpus.iter().map(|c| c.sys_cycles).collect();
    assert!((1..4).all(|c| (sys[c] > 0) == (c == prev)), "{sys:?}");
}

#[test]
fn kswapd_wakes_on_a_cpu_whose_thread_sleeps_until_its_next_slot_and_runs_there_meanwhile() {
    // As above, but CPU 3, where kswapd last ran, has a thread that wakes every 2 ms for 9 µs
    // of work and sleeps in clock_nanosleep between: the CPU is idle between its slots
    // (available_idle_cpu), so select_idle_sibling keeps kswapd there while the thread
    // sleeps, and the thread still starts each batch at its slot. Under vcpu_turns, CPU 0's
    // promotion at 8.07 ms wakes kswapd while CPU 3's vCPU waits for its turn with its
    // thread woken for the batch of its 8 ms slot (at 8.05 ms, the slot plus the timer
    // slack): to the guest that thread is CPU 3's current task, so kswapd goes to the first
    // idle CPU after it, CPU 1 (select_idle_cpu wraps past busy CPU 0). Without vcpu_turns
    // the CPUs' clocks stand up to a quantum, or one long op (task_numa_work's walk), apart,
    // so whether CPU 3 is idle at a wake-up from CPU 0 turns on where its clock stands: that
    // run only checks the pacing and that kswapd ran.
    let ops = promotions_that_wake_kswapd();
    let mut paced: Vec<Op> = (0..100)
        .flat_map(|_| [Op::Pace(2_000_000), Op::Compute(20_000)])
        .collect();
    paced.insert(1, Op::Mark(Mark::RoiBegin));
    paced.push(Op::Mark(Mark::RoiEnd));
    for turns in [false, true] {
        let set = format!("machine.vcpu_turns={turns}");
        let cfg = tiered_config(&["machine.nodes.0.kswapd_cpu=3", &set]);
        let threads = vec![
            (Placement::Pinned(0), ops.clone()),
            (Placement::Pinned(3), paced.clone()),
        ];
        let sim = run(cfg, workload(threads, vec![]));
        assert!(sim.k.vm.get(Vm::PgScanKswapd) > 0, "{set}");
        let sys: Vec<u64> = sim.hw.cpus.iter().map(|c| c.sys_cycles).collect();
        if turns {
            assert_eq!(sim.k.nodes[0].kswapd_prev_cpu, Some(1), "{set}");
            assert!(sys[3] > 0 && sys[1] > 0 && sys[2] == 0, "{set}: {sys:?}");
        }
        // The last batch starts at its slot, 99 × 2 ms after the first (under vcpu_turns
        // 50 µs of timer slack later), and takes 9 µs.
        let t = &sim.k.sched.threads[1];
        let span = sim
            .hw
            .cycles_to_s(t.roi_end.unwrap() - t.roi_begin.unwrap())
            * 1e3;
        assert!((198.0..198.07).contains(&span), "{set}: {span} ms");
    }
}

#[test]
fn kswapd_naps_a_tenth_of_a_second_when_balanced_and_balances_again_if_short_at_its_end() {
    // kswapd_try_to_sleep after a balance_pgdat run: a node balanced right then gets a short
    // sleep, schedule_timeout(HZ/10); at its end kswapd sleeps on if the node is still
    // balanced, else balances again (kswapd_high_wmark_hit_quickly), and a wakeup_kswapd
    // during it ends it early (kswapd_low_wmark_hit_quickly). Traced in the guest: after its
    // first pass kswapd0 found the node balanced, slept 107 ms, and balanced again.
    let (mut sim, _) = sim_with_slow_page();
    let full = (sim.k.nodes[0].zone.wmark, sim.k.nodes[0].demote_wmark);
    let set_balanced = |sim: &mut Sim, yes: bool| {
        let node = &mut sim.k.nodes[0];
        (node.zone.wmark, node.demote_wmark) = if yes { Default::default() } else { full };
    };
    let high = |sim: &Sim| sim.k.vm.get(Vm::KswapdHighWmarkHitQuickly);
    assert!(!sim.k.pgdat_balanced(0), "DRAM is full");
    // Short right after the run: balance_pgdat again at once, no sleep.
    sim.k.kswapd_try_to_sleep(&mut sim.hw, 0, 0);
    assert_eq!(high(&sim), 1);
    assert_eq!(sim.k.nodes[0].kswapd_short_sleep_until, 0);
    // Balanced: asleep for 100 ms.
    set_balanced(&mut sim, true);
    let t0 = sim.hw.cpus[0].clock;
    sim.k.kswapd_try_to_sleep(&mut sim.hw, 0, 0);
    let until = sim.k.nodes[0].kswapd_short_sleep_until;
    assert!(!sim.k.nodes[0].kswapd_awake);
    assert!((sim.hw.cycles_to_s(until - t0) - 0.1).abs() < 1e-9);
    // Still balanced at its end: asleep until woken.
    sim.k.kswapd_sleep_timeout(&mut sim.hw, 0, until);
    assert!(!sim.k.nodes[0].kswapd_awake);
    assert_eq!(
        (high(&sim), sim.k.nodes[0].kswapd_short_sleep_until),
        (1, 0)
    );
    // Another short sleep, and the node runs short before it ends: balance again.
    sim.k.kswapd_try_to_sleep(&mut sim.hw, 0, 0);
    let until = sim.k.nodes[0].kswapd_short_sleep_until;
    set_balanced(&mut sim, false);
    sim.k.kswapd_sleep_timeout(&mut sim.hw, 0, until);
    assert!(sim.k.nodes[0].kswapd_awake);
    assert_eq!(high(&sim), 2);
    // A wake-up in the short sleep ends it early; its timer then finds kswapd awake.
    set_balanced(&mut sim, true);
    sim.k.kswapd_try_to_sleep(&mut sim.hw, 0, 0);
    let until = sim.k.nodes[0].kswapd_short_sleep_until;
    set_balanced(&mut sim, false);
    sim.k.now = until - 1;
    sim.k.wakeup_kswapd(&mut sim.hw, 0, 0);
    assert!(sim.k.nodes[0].kswapd_awake);
    assert_eq!(sim.k.vm.get(Vm::KswapdLowWmarkHitQuickly), 1);
    sim.k.kswapd_sleep_timeout(&mut sim.hw, 0, until);
    assert_eq!(high(&sim), 2);
}

#[test]
fn a_thread_whose_bursts_fall_between_ticks_takes_no_numa_scan() {
    // scheduler_tick → task_tick_fair → task_tick_numa runs for the task a tick finds
    // running. Thread 0 fills 6,000 pages (2,000 on the slow node), then runs 100 µs every
    // 4 ms, a tick's period, so every jiffy lands at the same point of its slot: with the
    // jiffies 2 ms into the sleeps no tick finds it running and its run time passes
    // scan_delay (20 ms) with no scan; with them 50 µs into its bursts it scans.
    let mut ops = vec![anon_rw(BASE, 6_000)];
    ops.extend((0..6_000).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(Op::Mark(Mark::RoiBegin));
    ops.extend((0..300).flat_map(|_| [Op::Pace(4_000_000), Op::Compute(220_000)]));
    let run_with = |offset_ns: u64| {
        let offset = format!("machine.tick_offset_ns={offset_ns}");
        run(
            tiered_config(&["kernel.numa_balancing_scan_delay_ms=20", &offset]),
            workload(vec![(Placement::Pinned(0), ops.clone())], vec![]),
        )
    };
    let first = run_with(0);
    // Where the first slot lies against the jiffies (boundaries at k ticks less the offset).
    let t = &first.k.sched.threads[0];
    let slot_ns = (first.hw.cycles_to_s(t.roi_begin.unwrap()) * 1e9).round() as u64;
    let fill_runtime_ms = first.hw.cycles_to_s(t.roi_begin.unwrap()) * 1e3;
    assert!(
        fill_runtime_ms < 20.0,
        "the fill alone passes scan_delay: {fill_runtime_ms} ms"
    );
    let tick_ns = 4_000_000;
    let jiffy_at = |into_slot_ns: u64| (tick_ns - (slot_ns + into_slot_ns) % tick_ns) % tick_ns;
    let updates = |sim: &Sim| sim.k.vm.get(Vm::NumaPteUpdates);
    let between = run_with(jiffy_at(2_000_000));
    let runtime_ms = between.hw.cycles_to_s(between.k.sched.threads[0].runtime) * 1e3;
    assert!(runtime_ms > 40.0, "run time {runtime_ms} ms");
    assert_eq!(updates(&between), 0);
    let inside = run_with(jiffy_at(50_000));
    assert!(updates(&inside) > 0);
}
