//! MIGRC (seed 000): deferral of read-only migrated folios, the flush on reuse, write-upgrade
//! give-up, pause under pressure, counters — and proof that the invariant checker catches each
//! hazard when MIGRC is deliberately broken.

mod common;

use common::{anon_rw, one_process as workload, tiered_config, BASE, PAGE};
use tierlab::arch::Arch;
use tierlab::check::ViolationKind;
use tierlab::machine::tlb::tlb_data;
use tierlab::mm::migrate::{MigrateMode, MigrateTarget};
use tierlab::mm::page::pg;
use tierlab::mm::pgtable::pte;
use tierlab::sim::AccessKind;
use tierlab::stats::Vm;
use tierlab::workload::{prot, Op, Placement};
use tierlab::{Config, Sim};

const N: u64 = 64;

fn config(migrc_break: &str) -> Config {
    let brk = format!("debug.migrc_break=\"{migrc_break}\"");
    tiered_config(&[
        "kernel.migrc=on",
        // The setup's move_pages leaves the written pages clean only when migration entries
        // drop the dirty bit, as before 6.1 (with it kept they would never qualify).
        "kernel.migration_entry_ad=false",
        "kernel.numa_balancing=0",
        "vm.demotion_enabled=false",
        &brk,
    ])
}

fn vpn(i: u64) -> u32 {
    ((BASE / PAGE) + i) as u32
}

fn pfn_of(sim: &Sim, i: u64) -> u32 {
    pte::pfn(sim.k.mms[0].pgtable.get(vpn(i)))
}

/// Thread 0 writes N pages, makes them read-only, and moves them to node 1 (a sync migration:
/// the new PTEs are read-only and clean). CPUs 1–3 are left "running" the process with
/// read-only translations of every page, as if they had just read them.
fn readers_of_clean_ro_pages(migrc_break: &str) -> Sim {
    let mut t0 = vec![anon_rw(BASE, N)];
    t0.extend((0..N).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Mprotect {
        addr: BASE,
        len: N * PAGE,
        prot: prot::READ,
    });
    t0.push(Op::MovePages {
        addr: BASE,
        len: N * PAGE,
        node: 1,
    });
    t0.push(Op::Barrier);
    let mut threads = vec![(Placement::Pinned(0), t0)];
    for c in 1..4 {
        threads.push((Placement::Pinned(c), vec![Op::Barrier]));
    }
    let mut sim = Sim::new(config(migrc_break), workload(threads, vec![])).unwrap();
    sim.run(&mut |_| {}).unwrap();
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
    for i in 0..N {
        let p = sim.k.mms[0].pgtable.get(vpn(i));
        assert_eq!(
            p & (pte::WRITE | pte::DIRTY),
            0,
            "read-only and clean after migration"
        );
    }
    let Arch::X86(x86) = &mut sim.k.arch else {
        panic!("MIGRC is modelled on x86 only");
    };
    for c in 1..4 {
        let cpu = &mut sim.hw.cpus[c];
        x86.cpus[c].is_lazy = false;
        let asid = cpu.cur_asid;
        for i in 0..N {
            let p = sim.k.mms[0].pgtable.get(vpn(i));
            cpu.stlb
                .insert(vpn(i), asid, tlb_data(pte::pfn(p), false, false));
        }
        x86.cpus[c].asids[asid as usize].tlb_gen = sim.k.mms[0].tlb_gen;
    }
    sim
}

/// Async (batched) migration of pages [from, to) to `node`, as demotion/promotion do.
fn migrate_async(sim: &mut Sim, from: u64, to: u64, node: usize) -> Vec<u32> {
    let folios: Vec<u32> = (from..to).map(|i| pfn_of(sim, i)).collect();
    for &f in &folios {
        assert!(sim.k.folio_isolate_lru(f));
    }
    let (moved, failed) = sim.k.migrate_pages(
        &mut sim.hw,
        0,
        folios.clone(),
        &MigrateTarget::Node(node),
        MigrateMode::Async,
    );
    assert_eq!((moved as usize, failed.len()), (folios.len(), 0));
    folios
}

fn ipis(sim: &Sim) -> u64 {
    sim.hw.cpus.iter().map(|c| c.irq.tlb).sum()
}

#[test]
fn read_only_folios_are_migrated_without_a_shootdown_and_tagged() {
    let mut sim = readers_of_clean_ro_pages("none");
    let before = ipis(&sim);
    let old = migrate_async(&mut sim, 0, 32, 0);
    assert_eq!(ipis(&sim), before, "the flush was deferred");
    assert_eq!(sim.k.vm.get(Vm::MigrcDeferred), 32);
    assert_eq!(sim.k.vm.get(Vm::MigrcDeferredBatches), 1);
    assert_eq!(
        sim.k.vm.get(Vm::MigrcIpisDeferred),
        3,
        "three remote readers would have been IPI'd"
    );
    for &f in &old {
        let p = sim.k.frames.get(f);
        assert!(p.has(pg::NEED_FLUSH) && p.flush_gen == 1);
    }
    // The stale read-only entries are covered by the pending flush: no violation.
    sim.k.check_invariants(&sim.hw, "deferred");
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
    // Without MIGRC the same migration sends one IPI per remote CPU.
    let mut plain = readers_of_clean_ro_pages("none");
    plain.k.cfg.kernel.migrc = false;
    let before = ipis(&plain);
    migrate_async(&mut plain, 0, 32, 0);
    assert_eq!(ipis(&plain) - before, 3);
}

#[test]
fn writable_or_dirty_folios_are_not_deferred() {
    let mut sim = readers_of_clean_ro_pages("none");
    // Make page 0 writable and page 1 dirty: neither qualifies.
    *sim.k.mms[0].pgtable.get_mut(vpn(0)).unwrap() |= pte::WRITE;
    *sim.k.mms[0].pgtable.get_mut(vpn(1)).unwrap() |= pte::DIRTY;
    let before = ipis(&sim);
    migrate_async(&mut sim, 0, 2, 0);
    assert_eq!(sim.k.vm.get(Vm::MigrcDeferred), 0);
    assert_eq!(ipis(&sim) - before, 3, "a normal batched flush");
}

#[test]
fn reuse_of_a_tagged_frame_flushes_every_older_generation_first() {
    let mut sim = readers_of_clean_ro_pages("none");
    let gen1 = migrate_async(&mut sim, 0, 16, 0);
    let gen2 = migrate_async(&mut sim, 16, 32, 0);
    assert_eq!(sim.k.frames.get(gen1[0]).flush_gen, 1);
    assert_eq!(sim.k.frames.get(gen2[0]).flush_gen, 2);
    assert_eq!(sim.k.migrc.gen, 2);
    assert_eq!(sim.k.migrc.done, 0);
    // Allocate on node 1 until a tagged frame comes back out of CPU 0's pageset.
    let before = ipis(&sim);
    let mut got = vec![];
    while !got.iter().any(|p| gen1.contains(p) || gen2.contains(p)) {
        got.push(sim.k.alloc_page(&mut sim.hw, 0, 1).unwrap());
    }
    assert_eq!(sim.k.vm.get(Vm::MigrcFlushAlloc), 1);
    assert_eq!(
        sim.k.migrc.done, 2,
        "all outstanding generations are flushed at once"
    );
    assert_eq!(ipis(&sim) - before, 3);
    assert_eq!(sim.k.vm.get(Vm::MigrcFlushIpis), 3);
    // Later reuse of frames of either generation needs no further flush.
    for _ in 0..64 {
        sim.k.alloc_page(&mut sim.hw, 0, 1).unwrap();
    }
    assert_eq!(sim.k.vm.get(Vm::MigrcFlushAlloc), 1);
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
}

#[test]
fn tagged_frames_flush_when_they_leave_buddy_too() {
    let mut sim = readers_of_clean_ro_pages("none");
    let old = migrate_async(&mut sim, 0, 32, 0);
    // Drain CPU 0's pageset of node 1 into buddy: the tagged frames now sit in buddy.
    let now = sim.hw.cpus[0].clock;
    let cost = sim.hw.cost.clone();
    sim.k.nodes[1]
        .zone
        .drain_pages(&mut sim.k.frames, 0, now, &cost);
    assert!(old
        .iter()
        .all(|&f| sim.k.frames.get(f).has(pg::BUDDY) || !sim.k.frames.get(f).has(pg::PCP)));
    let mut n = 0;
    while sim.k.vm.get(Vm::MigrcFlushAlloc) == 0 {
        sim.k.alloc_page(&mut sim.hw, 1, 1).unwrap();
        n += 1;
        assert!(
            n < 20_000,
            "a tagged frame must come out of buddy eventually"
        );
    }
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
}

#[test]
fn a_write_upgrade_gives_up_and_flushes_at_once() {
    let mut sim = readers_of_clean_ro_pages("none");
    migrate_async(&mut sim, 0, 32, 0);
    assert!(!sim.k.migrc.pending.is_empty());
    // mprotect back to RW, then a write fault upgrades a read-only PTE (do_wp_page).
    sim.k.mms[0].vmas[0].prot = prot::READ | prot::WRITE;
    sim.k
        .handle_mm_fault(&mut sim.hw, 0, 0, BASE + 40 * PAGE, AccessKind::Store)
        .unwrap();
    assert_eq!(sim.k.vm.get(Vm::MigrcFlushUpgrade), 1);
    assert!(sim.k.migrc.pending.is_empty());
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
}

#[test]
fn migrc_pauses_before_direct_reclaim() {
    // migrc_pause flushes what is pending and stops deferring until migrc_resume.
    let mut sim = readers_of_clean_ro_pages("none");
    migrate_async(&mut sim, 0, 16, 0);
    sim.k.migrc_pause(&mut sim.hw, 0);
    assert_eq!(sim.k.vm.get(Vm::MigrcFlushPause), 1);
    assert!(sim.k.migrc.pending.is_empty());
    migrate_async(&mut sim, 16, 32, 0);
    assert_eq!(
        sim.k.vm.get(Vm::MigrcDeferred),
        16,
        "nothing deferred while paused"
    );
    sim.k.migrc_resume();
    migrate_async(&mut sim, 32, 48, 0);
    assert_eq!(sim.k.vm.get(Vm::MigrcDeferred), 32);
    // The allocator pauses MIGRC when it is about to reclaim directly.
    while sim.k.alloc_page(&mut sim.hw, 0, 0).is_some() {}
    assert!(sim.k.vm.get(Vm::AllocStallNormal) > 0);
    assert!(sim.k.vm.get(Vm::MigrcPause) >= 2);
    assert_eq!(sim.k.migrc.paused, 0, "resumed after reclaim");
}

#[test]
fn checker_catches_reuse_without_the_deferred_flush() {
    let mut sim = readers_of_clean_ro_pages("alloc_flush");
    let old = migrate_async(&mut sim, 0, 32, 0);
    let mut got = vec![];
    while !got.iter().any(|p| old.contains(p)) {
        got.push(sim.k.alloc_page(&mut sim.hw, 0, 1).unwrap());
    }
    assert!(sim.k.checker.count_of(ViolationKind::FrameReuse) > 0);
    // Unbroken, the same sequence is clean.
    let mut ok = readers_of_clean_ro_pages("none");
    let old = migrate_async(&mut ok, 0, 32, 0);
    let mut got = vec![];
    while !got.iter().any(|p| old.contains(p)) {
        got.push(ok.k.alloc_page(&mut ok.hw, 0, 1).unwrap());
    }
    assert_eq!(ok.k.checker.count, 0);
}

#[test]
fn checker_catches_a_write_after_upgrade_without_flush() {
    let mut sim = readers_of_clean_ro_pages("upgrade_flush");
    migrate_async(&mut sim, 0, 32, 0);
    sim.k.mms[0].vmas[0].prot = prot::READ | prot::WRITE;
    sim.k
        .handle_mm_fault(&mut sim.hw, 0, 0, BASE + 5 * PAGE, AccessKind::Store)
        .unwrap();
    assert!(
        sim.k.checker.count_of(ViolationKind::StaleAfterUpgrade) > 0,
        "{:?}",
        sim.k.checker.violations
    );
}

#[test]
fn checker_catches_a_stale_entry_surviving_munmap() {
    let mut sim = readers_of_clean_ro_pages("munmap_flush");
    migrate_async(&mut sim, 0, 32, 0);
    sim.k
        .sys_munmap(&mut sim.hw, 0, 0, BASE, 32 * PAGE)
        .unwrap();
    assert!(sim.k.checker.count_of(ViolationKind::StaleAfterUnmap) > 0);
    // The real munmap flushes (a CPU that missed a generation flushes fully).
    let mut ok = readers_of_clean_ro_pages("none");
    migrate_async(&mut ok, 0, 32, 0);
    ok.k.sys_munmap(&mut ok.hw, 0, 0, BASE, 32 * PAGE).unwrap();
    assert_eq!(ok.k.checker.count, 0, "{:?}", ok.k.checker.violations);
}

/// The LUF reviewers' exit case: a process exits while CPUs still hold translations, some
/// MIGRC left unflushed. exit_mmap's gather flushes before it frees, and its last flush
/// (freed tables) reaches the lazy CPUs its threads left, so every frame comes back clean;
/// skipping those flushes leaves entries a CPU could use again, which the checker reports.
#[test]
fn exit_after_a_deferral_frees_nothing_a_cpu_still_translates() {
    let run = |brk: &str| {
        let mut sim = readers_of_clean_ro_pages(brk);
        let old = migrate_async(&mut sim, 0, 32, 0);
        assert!(sim.k.vm.get(Vm::MigrcDeferred) > 0);
        // CPUs 1-3 run the process again (switch_mm catches up with the deferred flush)
        // and read every page; then every thread leaves, and the CPUs keep the mm loaded
        // lazily (exit_mm).
        let mapped: Vec<u32> = (0..N).map(|i| pfn_of(&sim, i)).collect();
        for c in 1..4 {
            sim.k.switch_mm(&mut sim.hw, c, 0);
            let asid = sim.hw.cpus[c].cur_asid;
            for i in 0..N {
                let data = tlb_data(mapped[i as usize], false, false);
                sim.hw.cpus[c].stlb.insert(vpn(i), asid, data);
            }
        }
        for c in 0..4 {
            sim.k.enter_lazy_tlb(c);
        }
        sim.k.exit_mmap(&mut sim.hw, 0, 0);
        assert!(sim.k.mms[0].dead && sim.k.mms[0].rss_anon == 0);
        // Reuse every frame the process had: the migration sources and its last pages.
        let mut wanted: Vec<u32> = old.iter().chain(&mapped).copied().collect();
        while !wanted.is_empty() {
            let Some(pfn) = sim.k.alloc_page(&mut sim.hw, 0, 0) else {
                break;
            };
            wanted.retain(|&p| p != pfn);
        }
        assert!(wanted.is_empty(), "every frame was reused");
        sim
    };
    let ok = run("none");
    assert_eq!(ok.k.checker.count, 0, "{:?}", ok.k.checker.violations);
    let broken = run("exit_flush");
    assert!(
        broken.k.checker.count_of(ViolationKind::StaleAfterUnmap) > 0,
        "{:?}",
        broken.k.checker.violations.first()
    );
}
