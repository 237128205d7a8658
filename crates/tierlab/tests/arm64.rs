//! arm64 (seed 001's architecture): broadcast TLBI and DSB instead of IPIs, one TLBI per page
//! and one DSB per batch with the batched unmap flush, one DSB per page without it or with
//! the REPEAT_TLBI erratum, and the invariant checker catching a batch whose DSB is skipped.

mod common;

use common::{anon_rw, one_process, tiered_config, BASE, PAGE};
use tierlab::check::ViolationKind;
use tierlab::mm::migrate::{MigrateMode, MigrateTarget};
use tierlab::mm::pgtable::pte;
use tierlab::stats::Perf;
use tierlab::workload::{Op, Placement};
use tierlab::Sim;

const N: u64 = 64;

/// Thread 0 writes N pages on CPU 0; threads on CPUs 1–3 read them all, so every CPU's TLB
/// holds their translations when the run ends.
fn readers_on_every_cpu(sets: &[&str]) -> Sim {
    let mut all = vec![
        "machine.arch=\"arm64\"",
        "kernel.numa_balancing=0",
        "vm.demotion_enabled=false",
    ];
    all.extend_from_slice(sets);
    let mut t0 = vec![anon_rw(BASE, N)];
    t0.extend((0..N).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Barrier);
    let mut threads = vec![(Placement::Pinned(0), t0)];
    for c in 1..4 {
        let mut t = vec![Op::Barrier];
        t.extend((0..N).map(|i| Op::Load(BASE + i * PAGE)));
        threads.push((Placement::Pinned(c), t));
    }
    let mut sim = Sim::new(tiered_config(&all), one_process(threads, vec![])).unwrap();
    sim.run(&mut |_| {}).unwrap();
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
    sim
}

fn pfn_of(sim: &Sim, i: u64) -> u32 {
    pte::pfn(sim.k.mms[0].pgtable.get(((BASE / PAGE) + i) as u32))
}

/// CPU 0 migrates every page to node 1 asynchronously (the batched path of demotion and
/// promotion); returns the TLBIs and DSBs it issued for it.
fn migrate_all(sim: &mut Sim) -> (u64, u64) {
    let count = |sim: &Sim, p: Perf| sim.hw.cpus[0].perf.get(p);
    let before = (count(sim, Perf::Tlbi), count(sim, Perf::DsbIsh));
    let folios: Vec<u32> = (0..N).map(|i| pfn_of(sim, i)).collect();
    for &f in &folios {
        assert!(sim.k.folio_isolate_lru(f));
    }
    let (moved, failed) = sim.k.migrate_pages(
        &mut sim.hw,
        0,
        folios,
        &MigrateTarget::Node(1),
        MigrateMode::Async,
    );
    assert_eq!((moved, failed.len()), (N, 0));
    (
        count(sim, Perf::Tlbi) - before.0,
        count(sim, Perf::DsbIsh) - before.1,
    )
}

fn remote_entries(sim: &Sim) -> usize {
    (1..4)
        .map(|c| {
            let cpu = &sim.hw.cpus[c];
            cpu.dtlb.valid_entries().count() + cpu.stlb.valid_entries().count()
        })
        .sum()
}

#[test]
fn a_batched_unmap_issues_a_tlbi_per_page_and_waits_in_one_dsb_without_an_ipi() {
    let mut sim = readers_on_every_cpu(&[]);
    assert!(remote_entries(&sim) > 0, "the readers cache the pages");
    assert_eq!(migrate_all(&mut sim), (N, 1));
    assert_eq!(remote_entries(&sim), 0, "the DSB completed every TLBI");
    let ipis: u64 = sim.hw.cpus.iter().map(|c| c.irq.tlb + c.irq.cal).sum();
    assert_eq!(ipis, 0, "arm64 sends no IPIs");
    sim.k.check_invariants(&sim.hw, "after migration");
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
}

#[test]
fn without_batching_or_with_the_repeat_tlbi_erratum_every_page_waits_in_its_own_dsb() {
    for sets in [
        &["arch.batched_unmap_flush=false"][..],
        &["arch.repeat_tlbi_erratum=true"][..],
    ] {
        let mut sim = readers_on_every_cpu(sets);
        assert_eq!(migrate_all(&mut sim), (N, N), "{sets:?}");
        sim.k.check_invariants(&sim.hw, "after migration");
        assert_eq!(sim.k.checker.count, 0, "{sets:?}");
    }
}

#[test]
fn the_checker_catches_a_batch_freed_before_its_dsb() {
    let mut sim = readers_on_every_cpu(&["debug.tlb_break=\"skip_batched_flush\""]);
    migrate_all(&mut sim);
    assert!(remote_entries(&sim) > 0, "the TLBIs never completed");
    sim.k.check_invariants(&sim.hw, "after migration");
    assert!(
        sim.k.checker.count_of(ViolationKind::TlbCoherence) > 0,
        "{:?}",
        sim.k.checker.violations
    );
}

#[test]
fn a_dsb_waits_longer_on_more_cpus() {
    let dsb_cycles = |cpus: u32| {
        let machine = [
            format!("machine.cpus={cpus}"),
            format!("machine.nodes.0.cpus=\"0-{}\"", cpus - 1),
        ];
        let mut sim = readers_on_every_cpu(&[&machine[0], &machine[1]]);
        let before = sim.hw.cpus[0].perf.get(Perf::DsbIshCycles);
        migrate_all(&mut sim);
        sim.hw.cpus[0].perf.get(Perf::DsbIshCycles) - before
    };
    let (four, sixty_four) = (dsb_cycles(4), dsb_cycles(64));
    assert!(sixty_four > four, "{four} vs {sixty_four}");
}

/// 300 single-thread processes, half on CPU 0 and half on CPU 1, each writing a page of its
/// own mm (at its own address, so the entries do not evict each other), sleeping (so the CPU
/// switches to the next) and reading it again: with 8-bit ASIDs the 256th mm rolls the
/// generation over.
fn many_processes(sets: &[&str]) -> Sim {
    let mut all = vec![
        "machine.arch=\"arm64\"",
        "arch.asid_bits=8",
        "kernel.numa_balancing=0",
        "vm.demotion_enabled=false",
        "sim.timeline_interval_ms=0.05",
    ];
    all.extend_from_slice(sets);
    let threads = (0..300u32)
        .map(|p| {
            let at = BASE + p as u64 * PAGE;
            let ops = vec![
                anon_rw(at, 1),
                Op::Store(at),
                Op::Sleep(200_000),
                Op::Load(at),
            ];
            (p, Placement::Pinned(p % 2), ops)
        })
        .collect();
    let mut sim = Sim::new(tiered_config(&all), common::workload(threads, vec![])).unwrap();
    sim.run(&mut |_| {}).unwrap();
    sim
}

#[test]
fn an_asid_rollover_keeps_every_tlb_coherent() {
    let sim = many_processes(&[]);
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
    let rollovers: u64 = sim
        .hw
        .cpus
        .iter()
        .map(|c| c.perf.get(Perf::AsidRollovers))
        .sum();
    assert!(rollovers >= 1, "300 mms and 255 ASIDs");
}

#[test]
fn the_checker_catches_an_asid_reused_without_the_rollover_flush() {
    let sim = many_processes(&["debug.tlb_break=\"skip_rollover_flush\""]);
    assert!(
        sim.k.checker.count_of(ViolationKind::TlbCoherence) > 0,
        "{:?}",
        sim.k.checker.violations
    );
}
