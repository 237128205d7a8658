//! MGLRU (vm.lru_gen_enabled, CONFIG_LRU_GEN): generations under aging, eviction order, the
//! tiering loop on top of it, and its accounting. The strict invariant checker runs in every
//! test; with MGLRU it checks every in-use frame is on exactly one generation list and that
//! nr_pages per generation matches the lists and the node's anon + file count.

use tierlab::mm::lru_gen::{
    lru_gen_from_seq, LRU_GEN_ANON, LRU_GEN_FILE, MAX_NR_GENS, MIN_NR_GENS,
};
use tierlab::mm::mmzone::{LRU_ACTIVE_ANON, LRU_INACTIVE_ANON};
use tierlab::mm::pgtable::pte;
use tierlab::stats::Vm;
use tierlab::workload::{FileSpec, Op, Placement};
use tierlab::Sim;
mod common;

use common::{
    anon_rw, fill_then_random_reads, one_process as workload, run, tiered_config, BASE, PAGE,
};

fn mglru(sets: &[&str]) -> tierlab::Config {
    let mut all = vec!["vm.lru_gen_enabled=true"];
    all.extend_from_slice(sets);
    tiered_config(&all)
}

/// One thread writes `pages` anon pages on DRAM (node 0) and exits; NUMA balancing off so
/// nothing moves on its own.
fn dram_pages(pages: u64) -> Sim {
    let mut ops = vec![anon_rw(BASE, pages)];
    ops.extend((0..pages).map(|i| Op::Store(BASE + i * PAGE)));
    let sim = run(
        mglru(&["kernel.numa_balancing=0"]),
        workload(vec![(Placement::Pinned(0), ops)], vec![]),
    );
    assert_eq!(sim.k.nodes[0].nr_anon, pages, "all on DRAM");
    sim
}

fn vpn(i: u64) -> u32 {
    ((BASE >> 12) + i) as u32
}

/// The generation accounting the checker enforces, asserted here directly as well.
fn assert_generations_valid(sim: &mut Sim) {
    for n in 0..sim.k.nodes.len() {
        let g = &sim.k.nodes[n].lrugen;
        for t in [LRU_GEN_ANON, LRU_GEN_FILE] {
            let gens = g.max_seq - g.min_seq[t];
            assert!(
                (MIN_NR_GENS - 1..=MAX_NR_GENS - 1).contains(&gens),
                "node {n} type {t}: max_seq {} min_seq {:?}",
                g.max_seq,
                g.min_seq
            );
        }
        let listed: i64 = g.nr_pages.iter().flatten().sum();
        let node = &sim.k.nodes[n];
        assert_eq!(
            listed as u64,
            node.nr_anon + node.nr_file - node.nr_isolated,
            "node {n}: nr_pages per generation sums to the LRU pages"
        );
        assert_eq!(
            node.lru_size(LRU_INACTIVE_ANON) + node.lru_size(LRU_ACTIVE_ANON),
            node.nr_anon - node.nr_isolated
        );
    }
    sim.k.check_invariants(&sim.hw, "test");
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
}

#[test]
fn new_anon_folios_join_the_youngest_generation() {
    let sim = dram_pages(500);
    let g = &sim.k.nodes[0].lrugen;
    // lru_gen_add_folio (6.12): a folio faulted in is hot (PG_active) and joins max_seq
    // (6.14's workingset rework puts it at max_seq - 1).
    let gen = lru_gen_from_seq(g.max_seq);
    assert_eq!(g.nr_pages[gen][LRU_GEN_ANON], 500);
    for i in 0..500 {
        let pfn = pte::pfn(sim.k.mms[0].pgtable.get(vpn(i)));
        assert_eq!(sim.k.folio_lru_gen(pfn), Some(gen));
    }
    // The two youngest generations count as active.
    assert_eq!(sim.k.nodes[0].lru_size(LRU_ACTIVE_ANON), 500);
    assert_eq!(sim.k.nodes[0].lru_size(LRU_INACTIVE_ANON), 0);
}

#[test]
fn aging_walks_the_page_tables_and_keeps_generations_in_bounds() {
    let mut sim = dram_pages(1000);
    let start = sim.k.nodes[0].lrugen.max_seq;
    for round in 0..6u64 {
        // Touch every third page between agings (the hardware sets the Accessed bit).
        for i in (0..1000).step_by(3) {
            *sim.k.mms[0].pgtable.get_mut(vpn(i)).unwrap() |= pte::YOUNG;
        }
        let g = &sim.k.nodes[0].lrugen;
        let max_seq = g.max_seq;
        assert!(sim
            .k
            .try_to_inc_max_seq(&mut sim.hw, 0, 0, max_seq, true, true));
        let g = &sim.k.nodes[0].lrugen;
        assert_eq!(g.max_seq, start + round + 1, "one generation per aging");
        // Every accessed folio is in the youngest generation's previous seq (the walk ran at
        // the old max_seq) and its PTE is old again.
        for i in (0..1000).step_by(3) {
            let p = sim.k.mms[0].pgtable.get(vpn(i));
            assert_eq!(p & pte::YOUNG, 0, "the walk cleared the young bit");
            assert_eq!(
                sim.k.folio_lru_gen(pte::pfn(p)),
                Some(lru_gen_from_seq(max_seq))
            );
        }
        assert_generations_valid(&mut sim);
    }
    assert!(sim.k.nodes[0].lrugen.walks == 6 && sim.k.nodes[0].lrugen.walk_ptes > 6000);
}

#[test]
fn a_folio_accessed_between_agings_is_not_evicted_before_an_untouched_one() {
    let mut sim = dram_pages(2000);
    // A forced aging moves every (young, freshly written) folio to one generation and clears
    // the bits; then only the even pages are accessed.
    let max_seq = sim.k.nodes[0].lrugen.max_seq;
    assert!(sim
        .k
        .try_to_inc_max_seq(&mut sim.hw, 0, 0, max_seq, true, true));
    for i in (0..2000).step_by(2) {
        *sim.k.mms[0].pgtable.get_mut(vpn(i)).unwrap() |= pte::YOUNG;
    }
    // Direct reclaim (demotion to the slow node) until ~600 pages have gone.
    let mut demoted = 0;
    while demoted < 600 {
        let got = sim.k.try_to_free_pages(&mut sim.hw, 0, 0);
        assert!(got > 0, "reclaim makes progress");
        demoted += got;
        assert_generations_valid(&mut sim);
    }
    assert!(sim.k.vm.get(Vm::PgDemoteDirect) >= 600);
    let on_slow = |sim: &Sim, i: u64| {
        let p = sim.k.mms[0].pgtable.get(vpn(i));
        sim.hw.node_of_pfn(pte::pfn(p)) == 1
    };
    let touched_gone = (0..2000).step_by(2).filter(|&i| on_slow(&sim, i)).count();
    let untouched_gone = (1..2000).step_by(2).filter(|&i| on_slow(&sim, i)).count();
    assert_eq!(
        touched_gone, 0,
        "no accessed page demoted while untouched ones remain ({untouched_gone} demoted)"
    );
    assert!(untouched_gone >= 600);
}

#[test]
fn the_walk_skips_an_mm_no_cpu_switched_to_since_the_last_walk() {
    let mut sim = dram_pages(1000);
    let young = |sim: &Sim| {
        (0..1000)
            .filter(|&i| sim.k.mms[0].pgtable.get(vpn(i)) & pte::YOUNG != 0)
            .count()
    };
    let age = |sim: &mut Sim| {
        // Retire the empty oldest generations first, as eviction does: reclaim ages only
        // below MAX_NR_GENS generations (inc_max_seq's VM_WARN_ON_ONCE).
        sim.k.try_to_inc_min_seq(0, true);
        let max_seq = sim.k.nodes[0].lrugen.max_seq;
        assert!(sim
            .k
            .try_to_inc_max_seq(&mut sim.hw, 0, 0, max_seq, true, false));
    };
    // The first walk reaches the mm for the first time: iterate_mm_list forces it.
    assert_eq!(young(&sim), 1000, "the fill left every PTE young");
    age(&mut sim);
    assert_eq!(young(&sim), 0, "the first walk cleared them");
    // should_skip_mm: the walk cleared the mm's bit, and no CPU has switched to the mm since.
    for i in 0..1000 {
        *sim.k.mms[0].pgtable.get_mut(vpn(i)).unwrap() |= pte::YOUNG;
    }
    age(&mut sim);
    assert_eq!(young(&sim), 1000, "an unused mm is not walked");
    // context_switch → lru_gen_use_mm: walked again.
    sim.k.switch_mm(&mut sim.hw, 0, 0);
    age(&mut sim);
    assert_eq!(young(&sim), 0, "a used mm is walked");
    assert_generations_valid(&mut sim);
}

#[test]
fn mglru_tiering_loop_promotes_the_hot_set_and_demotes_cold_pages() {
    // As the classic-LRU test in tiering.rs: ~3700 pages fit in DRAM, the hot last 800 land
    // on the slow node; NUMA balancing promotes them and MGLRU's kswapd demotes cold pages.
    let sim = run(
        mglru(&[]),
        fill_then_random_reads(6000, (5200, 800), 200_000, 12345, 2000),
    );
    let v = |c| sim.k.vm.get(c);
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
    assert_eq!(v(Vm::PgDemoteKswapd), v(Vm::PgStealKswapd));
    assert_eq!(
        v(Vm::PgScanKswapd),
        v(Vm::PgScanAnon),
        "only anon is on the LRU"
    );
    assert_eq!(
        v(Vm::PgMigrateSuccess),
        v(Vm::PgPromoteSuccess) + v(Vm::PgDemoteKswapd) + v(Vm::PgDemoteDirect)
    );
    assert!(
        sim.k.nodes[0].lrugen.walks > 0,
        "kswapd aged by walking page tables"
    );
    let hot_in_dram = (5200..6000u64)
        .filter(|&i| {
            sim.hw
                .node_of_pfn(pte::pfn(sim.k.mms[0].pgtable.get(vpn(i))))
                == 0
        })
        .count();
    assert!(hot_in_dram > 400, "hot pages in DRAM: {hot_in_dram} of 800");
    // The cold part (the first pages written, never read again) went to the slow node.
    let cold_on_slow = (0..3000u64)
        .filter(|&i| {
            sim.hw
                .node_of_pfn(pte::pfn(sim.k.mms[0].pgtable.get(vpn(i))))
                == 1
        })
        .count();
    assert!(cold_on_slow > 400, "cold pages demoted: {cold_on_slow}");
}

#[test]
fn without_demotion_mglru_reclaims_only_clean_file_pages() {
    // get_swappiness is 0 without swap or a demotion target: only file generations are
    // scanned; the page cache goes, anon stays.
    // Both nodes 16 MiB: the anon fills them and allocation has to reclaim.
    let cfg = mglru(&[
        "vm.demotion_enabled=false",
        "kernel.numa_balancing=0",
        "machine.nodes.1.capacity_mib=16",
    ]);
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
    let v = |c| sim.k.vm.get(c);
    assert!(v(Vm::PgStealFile) > 0, "file pages reclaimed");
    assert_eq!(v(Vm::PgScanAnon), 0);
    assert_eq!(v(Vm::PgStealAnon), 0);
    assert_eq!(v(Vm::PgDemoteKswapd) + v(Vm::PgDemoteDirect), 0);
    assert_eq!(sim.k.nodes[0].nr_anon + sim.k.nodes[1].nr_anon, 6000);
}

#[test]
fn migrated_folios_keep_their_generation_class() {
    // folio_isolate_lru → lru_gen_del_folio sets PG_active for a folio of an active
    // generation; folio_migrate_flags carries it, so the new folio joins max_seq on the
    // target node.
    let mut sim = dram_pages(200);
    let pfns: Vec<u32> = (0..10)
        .map(|i| pte::pfn(sim.k.mms[0].pgtable.get(vpn(i))))
        .collect();
    for &f in &pfns {
        assert!(sim.k.folio_isolate_lru(f));
        assert!(sim.k.frames.get(f).has(tierlab::mm::page::pg::ACTIVE));
    }
    let (moved, failed) = sim.k.migrate_pages(
        &mut sim.hw,
        0,
        pfns,
        &tierlab::mm::migrate::MigrateTarget::Node(1),
        tierlab::mm::migrate::MigrateMode::Sync,
    );
    assert_eq!((moved, failed.len()), (10, 0));
    let g1 = &sim.k.nodes[1].lrugen;
    let gen = lru_gen_from_seq(g1.max_seq);
    assert_eq!(g1.nr_pages[gen][LRU_GEN_ANON], 10);
    for i in 0..10 {
        let f = pte::pfn(sim.k.mms[0].pgtable.get(vpn(i)));
        assert_eq!(sim.hw.node_of_pfn(f), 1);
        assert_eq!(sim.k.folio_lru_gen(f), Some(gen));
    }
    assert_generations_valid(&mut sim);
}

#[test]
fn same_config_and_seed_give_identical_json() {
    let json = || {
        let sim = run(
            mglru(&[]),
            fill_then_random_reads(6000, (5200, 800), 50_000, 7, 2000),
        );
        let mut j = tierlab::RunResult::collect(&sim, 0.0).to_json();
        let o = j.as_object_mut().unwrap();
        o.remove("wall_seconds");
        o.remove("accesses_per_wall_second");
        serde_json::to_string(&j).unwrap()
    };
    assert_eq!(json(), json());
}
