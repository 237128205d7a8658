//! Transparent huge pages: faults that map 2 MiB, the huge zero page, splits, NUMA balancing
//! of whole THPs, and a checker that catches a 2 MiB translation left behind. Each test runs
//! under the strict invariant checker.

mod common;

use common::{anon_rw, one_process, run, tiered_config, BASE, PAGE};
use tierlab::mm::pgtable::pte;
use tierlab::stats::{Perf, Vm};
use tierlab::workload::{advice, prot, Op, Placement};
use tierlab::Sim;

/// 4 KiB pages in 2 MiB.
const HUGE: u64 = 512;

fn vpn(i: u64) -> u32 {
    ((BASE / PAGE) + i) as u32
}

fn stores(pages: std::ops::Range<u64>) -> impl Iterator<Item = Op> {
    pages.map(|i| Op::Store(BASE + i * PAGE))
}

fn loads(pages: std::ops::Range<u64>) -> impl Iterator<Item = Op> {
    pages.map(|i| Op::Load(BASE + i * PAGE))
}

fn config(thp: &str, extra: &[&str]) -> tierlab::config::Config {
    let mut sets = vec![
        "kernel.numa_balancing=0".to_string(),
        format!("vm.transparent_hugepage_enabled={thp}"),
    ];
    sets.extend(extra.iter().map(|s| s.to_string()));
    let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
    tiered_config(&sets)
}

fn walks(sim: &Sim) -> u64 {
    sim.hw
        .cpus
        .iter()
        .map(|c| c.perf.get(Perf::PageWalks))
        .sum()
}

/// Write 4 MiB and read it back twice.
fn fill_and_read(thp: &str) -> Sim {
    let mut ops = vec![anon_rw(BASE, 2 * HUGE)];
    ops.extend(stores(0..2 * HUGE));
    for _ in 0..2 {
        ops.extend(loads(0..2 * HUGE));
    }
    run(
        config(thp, &[]),
        one_process(vec![(Placement::Pinned(0), ops)], vec![]),
    )
}

#[test]
fn a_write_fault_maps_a_thp_and_one_2m_entry_serves_its_pages() {
    let sim = fill_and_read("always");
    assert_eq!(sim.k.vm.get(Vm::ThpFaultAlloc), 2);
    assert_eq!(sim.k.vm.get(Vm::ThpFaultFallback), 0);
    let huge = sim.k.mms[0].pgtable.huge_pmds();
    assert_eq!(huge.len(), 2);
    for (base, pmd) in huge {
        assert!(pte::present(pmd) && pmd & pte::WRITE != 0 && pmd & pte::DIRTY != 0);
        // Page i of the range is frame head + i, a member of an order-9 folio.
        let head = pte::pfn(pmd);
        assert_eq!(sim.k.thp_head(head + 7), Some(head));
        assert_eq!(pte::pfn(sim.k.mms[0].pgtable.get(base + 7)), head + 7);
    }
    assert_eq!(sim.k.mms[0].rss_anon, 2 * HUGE);
    // Two faults instead of 1,024, and two walks serve 3 × 1,024 accesses.
    assert_eq!(sim.k.vm.get(Vm::PgFault), 2);
    assert_eq!(walks(&sim), 2);
    let off = fill_and_read("never");
    assert_eq!(off.k.vm.get(Vm::ThpFaultAlloc), 0);
    assert!(off.k.mms[0].pgtable.huge_pmds().is_empty());
    assert!(
        walks(&off) >= 2 * HUGE,
        "4 KiB pages: a walk per page at least"
    );
}

#[test]
fn a_read_maps_the_huge_zero_page_and_a_write_splits_it_to_4k() {
    let mut ops = vec![anon_rw(BASE, HUGE)];
    ops.extend(loads(0..HUGE));
    ops.push(Op::Store(BASE + 5 * PAGE));
    let sim = run(
        config("always", &[]),
        one_process(vec![(Placement::Pinned(0), ops)], vec![]),
    );
    assert_eq!(sim.k.vm.get(Vm::ThpZeroPageAlloc), 1);
    assert_eq!(sim.k.vm.get(Vm::ThpFaultAlloc), 0);
    // do_huge_pmd_wp_page on the huge zero page: split, then a 4 KiB copy-on-write.
    assert_eq!(sim.k.vm.get(Vm::ThpSplitPmd), 1);
    let pt = &sim.k.mms[0].pgtable;
    assert!(pt.huge_pmds().is_empty());
    assert_eq!(pte::pfn(pt.get(vpn(6))), sim.k.zero_pfn);
    let written = pte::pfn(pt.get(vpn(5)));
    assert!(!sim.k.is_zero_pfn(written) && pt.get(vpn(5)) & pte::WRITE != 0);
    assert_eq!(sim.k.mms[0].rss_anon, 1);
}

#[test]
fn a_partial_munmap_splits_the_pmd_and_defers_the_unmapped_half() {
    let mut ops = vec![anon_rw(BASE, HUGE)];
    ops.extend(stores(0..HUGE));
    ops.push(Op::Munmap {
        addr: BASE + HUGE / 2 * PAGE,
        len: HUGE / 2 * PAGE,
    });
    ops.extend(loads(0..HUGE / 2));
    let sim = run(
        config("always", &[]),
        one_process(vec![(Placement::Pinned(0), ops)], vec![]),
    );
    assert_eq!(sim.k.vm.get(Vm::ThpSplitPmd), 1);
    assert_eq!(sim.k.vm.get(Vm::ThpDeferredSplitPage), 1);
    // The unmapped half stays allocated on the deferred split queue: no reclaim ran, so its
    // shrinker has not split the folio.
    assert_eq!(sim.k.vm.get(Vm::ThpSplitPage), 0);
    assert_eq!(sim.k.nodes[0].deferred_split.len(), 1);
    assert_eq!(sim.k.nodes[0].deferred_split[0].len() as u64, HUGE / 2);
    assert_eq!(sim.k.mms[0].rss_anon, HUGE / 2);
    let pt = &sim.k.mms[0].pgtable;
    assert!(pte::present(pt.get(vpn(0))) && pt.get(vpn(0)) & pte::HUGE == 0);
    assert_eq!(pt.get(vpn(HUGE - 1)), 0);
    assert_eq!(sim.k.thp_head(pte::pfn(pt.get(vpn(0)))), None);
}

#[test]
fn madvise_mode_gives_thp_only_to_advised_ranges() {
    let mut ops = vec![anon_rw(BASE, 2 * HUGE)];
    ops.push(Op::Madvise {
        addr: BASE,
        len: HUGE * PAGE,
        advice: advice::MADV_HUGEPAGE,
    });
    ops.extend(stores(0..2 * HUGE));
    let sim = run(
        config("madvise", &[]),
        one_process(vec![(Placement::Pinned(0), ops)], vec![]),
    );
    assert_eq!(sim.k.vm.get(Vm::ThpFaultAlloc), 1);
    let huge = sim.k.mms[0].pgtable.huge_pmds();
    assert_eq!(huge.iter().map(|h| h.0).collect::<Vec<_>>(), vec![vpn(0)]);
}

/// Thread 0 writes 24 MiB (then `after_fill`, if any); then four threads, one per CPU, read
/// every 7th to 11th page of the last `tail` pages, 300 rounds with 1 M cycles of work each.
fn fill_24m_then_read_the_tail(after_fill: Option<Op>, tail: u64) -> Vec<(Placement, Vec<Op>)> {
    let pages = 12 * HUGE;
    let mut t0 = vec![anon_rw(BASE, pages)];
    t0.extend(stores(0..pages));
    t0.extend(after_fill);
    t0.push(Op::Barrier);
    (0..4u64)
        .map(|t| {
            let mut ops = if t == 0 {
                t0.clone()
            } else {
                vec![Op::Barrier]
            };
            for r in 0..300 {
                ops.extend(loads(pages - tail..pages).step_by(7 + r % 5));
                ops.push(Op::Compute(1_000_000));
            }
            (Placement::Pinned(t as u32), ops)
        })
        .collect()
}

#[test]
fn a_hot_thp_on_the_slow_tier_is_promoted_whole() {
    // 24 MiB written into a 16 MiB DRAM node: with defrag=always the THP faults that find
    // DRAM short reclaim and fall back to the CXL node. The first 8 MiB are then unmapped,
    // which leaves DRAM room; four readers read the last 4 MiB, on CXL, and NUMA balancing
    // moves those THPs back whole.
    let unmap = Op::Munmap {
        addr: BASE,
        len: 4 * HUGE * PAGE,
    };
    let threads = fill_24m_then_read_the_tail(Some(unmap), 2 * HUGE);
    let cfg = tiered_config(&[
        "vm.transparent_hugepage_enabled=always",
        "vm.transparent_hugepage_defrag=always",
        "sim.max_seconds=0.5",
    ]);
    let sim = run(cfg, one_process(threads, vec![]));
    let vm = &sim.k.vm;
    assert!(
        vm.get(Vm::NumaHugePteUpdates) > 0,
        "the scanner reaches the PMDs"
    );
    assert!(
        vm.get(Vm::NumaPteUpdates) >= HUGE * vm.get(Vm::NumaHugePteUpdates),
        "a huge PMD counts 512 PTE updates"
    );
    assert!(vm.get(Vm::ThpMigrationSuccess) > 0, "{:?}", vm);
    assert!(vm.get(Vm::PgPromoteSuccess) >= HUGE * vm.get(Vm::ThpMigrationSuccess));
}

#[test]
fn the_checker_catches_a_2m_entry_left_after_a_split() {
    // CPU 1 caches the THP's 2 MiB translation; CPU 0 then makes half of it read-only, which
    // splits the PMD. Without the split's flush CPU 1 keeps a writable 2 MiB entry over PTEs.
    let run_with = |skip: bool| {
        let mut t0 = vec![anon_rw(BASE, HUGE)];
        t0.extend(stores(0..HUGE));
        t0.push(Op::Barrier);
        t0.push(Op::Barrier);
        t0.push(Op::Mprotect {
            addr: BASE,
            len: HUGE / 2 * PAGE,
            prot: prot::READ,
        });
        t0.push(Op::Sleep(2_000_000));
        let t1 = vec![
            Op::Barrier,
            Op::Store(BASE + 3 * PAGE),
            Op::Barrier,
            Op::Sleep(2_000_000),
        ];
        let cfg = config("always", &[&format!("debug.thp_split_skip_flush={skip}")]);
        let w = one_process(
            vec![(Placement::Pinned(0), t0), (Placement::Pinned(1), t1)],
            vec![],
        );
        let mut sim = Sim::new(cfg, w).expect("sim");
        sim.run(&mut |_| {}).expect("run");
        sim
    };
    let good = run_with(false);
    assert_eq!(good.k.checker.count, 0, "{:?}", good.k.checker.violations);
    assert_eq!(good.k.vm.get(Vm::ThpSplitPmd), 1);
    let broken = run_with(true);
    assert!(
        broken.k.checker.count > 0,
        "a writable 2 MiB entry over read-only PTEs must be reported"
    );
}

/// kswapd demoting cold THPs, with the two-list LRU or MGLRU (`lru_gen`).
fn kswapd_demotes_a_cold_thp_whole(lru_gen: bool) {
    // 24 MiB into a 16 MiB DRAM node: the THPs that fit stay in DRAM, the rest falls back
    // to 4 KiB pages on CXL (defrag=madvise: a THP fault tries its own node only). Readers
    // of those 4 KiB pages want them promoted, find DRAM short and wake its kswapd, which
    // demotes the cold THPs whole: a migration of 512 pages each, no split.
    let threads = fill_24m_then_read_the_tail(None, 3 * HUGE);
    let cfg = tiered_config(&[
        "vm.transparent_hugepage_enabled=always",
        "sim.max_seconds=0.5",
        &format!("vm.lru_gen_enabled={lru_gen}"),
    ]);
    let sim = run(cfg, one_process(threads, vec![]));
    let vm = &sim.k.vm;
    assert!(vm.get(Vm::ThpFaultFallback) > 0, "DRAM ran short of THPs");
    assert!(vm.get(Vm::ThpMigrationSuccess) > 0, "a THP was demoted");
    assert!(vm.get(Vm::PgDemoteKswapd) >= HUGE);
    assert_eq!(vm.get(Vm::ThpSplitPage), 0, "demotion moves THPs whole");
    assert!(sim.k.anon_thps_on(1) > 0, "THPs now on the CXL node");
}

#[test]
fn kswapd_demotes_a_cold_thp_whole_from_the_two_list_lru() {
    kswapd_demotes_a_cold_thp_whole(false);
}

#[test]
fn kswapd_demotes_a_cold_thp_whole_from_mglru() {
    kswapd_demotes_a_cold_thp_whole(true);
}

#[test]
fn reclaim_runs_the_deferred_split_shrinker_which_frees_the_unmapped_pages() {
    // Half of a THP unmapped, then 14 MiB more written into the 16 MiB DRAM node under
    // TPP, whose demotion watermark wakes kswapd as DRAM fills: its shrink_slab splits the
    // queued folio and frees the 256 unmapped pages.
    let mut ops = vec![anon_rw(BASE, 8 * HUGE)];
    ops.extend(stores(0..HUGE));
    ops.push(Op::Munmap {
        addr: BASE + HUGE / 2 * PAGE,
        len: HUGE / 2 * PAGE,
    });
    ops.extend(stores(2 * HUGE..9 * HUGE - HUGE));
    ops.push(Op::Sleep(50_000_000));
    let cfg = tiered_config(&[
        "vm.transparent_hugepage_enabled=always",
        "kernel.tiering_policy=tpp",
    ]);
    let sim = run(cfg, one_process(vec![(Placement::Pinned(0), ops)], vec![]));
    assert!(sim.k.vm.get(Vm::PageOutRun) > 0, "kswapd ran");
    assert_eq!(sim.k.vm.get(Vm::ThpDeferredSplitPage), 1);
    assert!(sim.k.nodes.iter().all(|n| n.deferred_split.is_empty()));
    assert_eq!(sim.k.vm.get(Vm::ThpSplitPage), 1);
    assert_eq!(
        sim.k.vm.get(Vm::PgFree),
        HUGE / 2,
        "the unmapped half, freed"
    );
}

#[test]
fn mglru_aging_clears_a_young_huge_pmd_and_moves_its_thp_to_the_youngest_generation() {
    // Two THPs written, then only the first read again: a forced aging walk makes the first
    // PMD old (walk_pmd_range_locked, no flush) and puts all 512 of its pages in the
    // generation it walks; the second, old since the first walk, stays where it was.
    let mut ops = vec![anon_rw(BASE, 2 * HUGE)];
    ops.extend(stores(0..2 * HUGE));
    let mut sim = run(
        config("always", &["vm.lru_gen_enabled=true"]),
        one_process(vec![(Placement::Pinned(0), ops)], vec![]),
    );
    let max_seq = sim.k.nodes[0].lrugen.max_seq;
    assert!(sim
        .k
        .try_to_inc_max_seq(&mut sim.hw, 0, 0, max_seq, true, true));
    let huge = sim.k.mms[0].pgtable.huge_pmds();
    assert_eq!(huge.len(), 2);
    assert!(
        huge.iter().all(|&(_, pmd)| pmd & pte::YOUNG == 0),
        "the walk made both old"
    );
    let flushes = sim.k.vm.get(Vm::NrTlbLocalFlushOne) + sim.k.vm.get(Vm::NrTlbLocalFlushAll);
    // The hardware sets the first PMD's Accessed bit again.
    let (first, pmd) = huge[0];
    sim.k.mms[0].pgtable.set_huge_pmd(first, pmd | pte::YOUNG);
    let second_gen = sim.k.folio_lru_gen(pte::pfn(huge[1].1));
    let max_seq = sim.k.nodes[0].lrugen.max_seq;
    assert!(sim
        .k
        .try_to_inc_max_seq(&mut sim.hw, 0, 0, max_seq, true, true));
    let head = pte::pfn(pmd);
    for p in [head, head + 1, head + HUGE as u32 - 1] {
        assert_eq!(
            sim.k.folio_lru_gen(p),
            Some(tierlab::mm::lru_gen::lru_gen_from_seq(max_seq)),
            "every page of the young THP in the walked generation"
        );
    }
    assert_eq!(sim.k.mms[0].pgtable.huge_pmd(first) & pte::YOUNG, 0);
    assert_eq!(sim.k.folio_lru_gen(pte::pfn(huge[1].1)), second_gen);
    let after = sim.k.vm.get(Vm::NrTlbLocalFlushOne) + sim.k.vm.get(Vm::NrTlbLocalFlushAll);
    assert_eq!(
        after, flushes,
        "MGLRU's walk clears young bits without a flush"
    );
}

#[test]
fn numa_maps_walks_a_pmd_mapped_thp_as_one_entry_and_each_4k_page_as_one() {
    // 4 MiB: two THPs, or 1,024 PTEs.
    assert_eq!(fill_and_read("always").k.numa_maps_entries(0), 2);
    assert_eq!(fill_and_read("never").k.numa_maps_entries(0), 2 * HUGE);
    // A read fault maps the huge zero page, which numa_maps does not gather, beside a THP
    // written; no such mm, 0.
    let mut ops = vec![anon_rw(BASE, 2 * HUGE)];
    ops.extend(loads(0..HUGE));
    ops.extend(stores(HUGE..2 * HUGE));
    let zero = run(
        config("always", &[]),
        one_process(vec![(Placement::Pinned(0), ops)], vec![]),
    );
    assert_eq!(zero.k.mms[0].pgtable.huge_pmds().len(), 2);
    assert_eq!(zero.k.numa_maps_entries(0), 1);
    assert_eq!(zero.k.numa_maps_entries(7), 0);
}
