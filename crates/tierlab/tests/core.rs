//! End-to-end tests of the simulated machine and memory manager on small hand-written
//! workloads. Every test runs with the strict invariant checker.

use tierlab::check::ViolationKind;
use tierlab::mm::mmzone::{LRU_ACTIVE_FILE, LRU_INACTIVE_ANON, LRU_INACTIVE_FILE};
use tierlab::mm::page::pg;
use tierlab::mm::pgtable::pte;
use tierlab::stats::{Perf, Vm};
mod common;

use common::*;
use tierlab::workload::{prot, Backing, FileSpec, Mark, Op, Placement, Workload};
use tierlab::{Config, Sim};

fn machine(cpus: u32, mib: u64) -> String {
    format!(
        r#"
[scenario]
name = "test"
[machine]
cpus = {cpus}
[[machine.nodes]]
capacity_mib = {mib}
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-{last}"
[workload]
type = "test"
[sim]
check = "strict"
timeline_interval_ms = 1
"#,
        last = cpus - 1
    )
}

fn config(text: &str, sets: &[&str]) -> Config {
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::from_str_with(text, "test.toml", None, &sets).expect("config")
}

#[test]
fn first_touch_faults_once_per_page_and_tlb_hits_after() {
    let mut ops = vec![anon_rw(BASE, 100)];
    for i in 0..100 {
        ops.push(Op::Store(BASE + i * PAGE));
    }
    for i in 0..100 {
        ops.push(Op::Load(BASE + i * PAGE + 8));
    }
    let sim = run(
        config(&machine(1, 64), &[]),
        workload(vec![(0, Placement::Pinned(0), ops)], vec![]),
    );
    assert_eq!(sim.k.vm.get(Vm::PgFault), 100);
    assert_eq!(sim.k.vm.get(Vm::PgAllocNormal), 100);
    assert_eq!(sim.k.nodes[0].nr_anon, 100);
    assert_eq!(
        sim.k.nodes[0].lru_size(LRU_INACTIVE_ANON),
        100,
        "new anon starts inactive"
    );
    let perf = sim.perf_total();
    // 100 store walks (each faulting first); the 100 loads hit the STLB (1536 entries) or dTLB.
    assert_eq!(perf.get(Perf::DtlbStoreMisses), 100);
    assert_eq!(perf.get(Perf::DtlbLoadMisses), 0);
    // New PTEs are young and dirty: no A/D assists on the fault path.
    assert_eq!(perf.get(Perf::AbitAssists), 0);
}

#[test]
fn reads_of_untouched_anon_map_the_zero_page_then_a_write_copies() {
    let ops = vec![
        anon_rw(BASE, 4),
        Op::Load(BASE),
        Op::Load(BASE + PAGE),
        Op::Store(BASE),
    ];
    let sim = run(
        config(&machine(1, 64), &[]),
        workload(vec![(0, Placement::Pinned(0), ops)], vec![]),
    );
    // Two read faults map the zero page, the write faults again and allocates.
    assert_eq!(sim.k.vm.get(Vm::PgFault), 3);
    assert_eq!(sim.k.vm.get(Vm::PgAllocNormal), 1);
    let p0 = sim.k.mms[0].pgtable.get((BASE / PAGE) as u32);
    let p1 = sim.k.mms[0].pgtable.get((BASE / PAGE + 1) as u32);
    assert_eq!(pte::pfn(p1), sim.k.zero_pfn);
    assert_ne!(pte::pfn(p0), sim.k.zero_pfn);
    assert!(p0 & pte::WRITE != 0 && p0 & pte::DIRTY != 0);
}

#[test]
fn segfaults_and_bad_syscalls_stop_the_run_with_a_clear_error() {
    let ops = vec![anon_rw(BASE, 1), Op::Load(BASE + 10 * PAGE)];
    let mut sim = Sim::new(
        config(&machine(1, 64), &[]),
        workload(vec![(0, Placement::Pinned(0), ops)], vec![]),
    )
    .unwrap();
    let e = sim.run(&mut |_| {}).unwrap_err();
    assert!(e.0.contains("SIGSEGV") && e.0.contains("0x1000a000"), "{e}");

    let ops = vec![
        Op::Mmap {
            addr: BASE,
            len: PAGE,
            prot: prot::READ,
            backing: Backing::Anon,
        },
        Op::Store(BASE),
    ];
    let mut sim = Sim::new(
        config(&machine(1, 64), &[]),
        workload(vec![(0, Placement::Pinned(0), ops)], vec![]),
    )
    .unwrap();
    assert!(sim
        .run(&mut |_| {})
        .unwrap_err()
        .0
        .contains("not permitted"));

    let ops = vec![anon_rw(BASE, 2), anon_rw(BASE + PAGE, 2)];
    let mut sim = Sim::new(
        config(&machine(1, 64), &[]),
        workload(vec![(0, Placement::Pinned(0), ops)], vec![]),
    )
    .unwrap();
    assert!(sim.run(&mut |_| {}).unwrap_err().0.contains("overlaps"));
}

#[test]
fn pcid_keeps_translations_across_context_switches() {
    // Two processes share CPU 0 with a short slice; each re-reads its own 8 pages.
    let mk = |base: u64| {
        let mut ops = vec![anon_rw(base, 8)];
        for _ in 0..2000 {
            for i in 0..8 {
                ops.push(Op::Store(base + i * PAGE));
                ops.push(Op::Compute(200));
            }
        }
        ops
    };
    let cfg = config(&machine(1, 64), &["kernel.sched_base_slice_ns=100000"]);
    let sim = run(
        cfg,
        workload(
            vec![
                (0, Placement::Pinned(0), mk(BASE)),
                (1, Placement::Pinned(0), mk(BASE)),
            ],
            vec![],
        ),
    );
    let perf = sim.perf_total();
    // Same virtual addresses in two address spaces: with PCID tagging each page misses once.
    assert_eq!(perf.get(Perf::DtlbStoreMisses), 16);
    // choose_new_asid flushes a PCID once when an mm first gets it; switching between
    // resident PCIDs afterwards flushes nothing.
    assert_eq!(perf.get(Perf::ItlbFlush), 2);
    let with_one_asid = run(
        config(
            &machine(1, 64),
            &[
                "kernel.sched_base_slice_ns=100000",
                "machine.tlb.nr_dyn_asids=1",
            ],
        ),
        workload(
            vec![
                (0, Placement::Pinned(0), mk(BASE)),
                (1, Placement::Pinned(0), mk(BASE)),
            ],
            vec![],
        ),
    );
    // One PCID: every switch evicts the other address space's translations.
    assert!(with_one_asid.perf_total().get(Perf::DtlbStoreMisses) > 100);
}

#[test]
fn munmap_shoots_down_remote_cpus_once_and_frees_the_frames() {
    // Thread 0 maps and touches 16 pages; thread 1 (same process, CPU 1) reads them; both meet
    // at a barrier; thread 0 unmaps 4 pages (below the 33-page ceiling: INVLPG per page).
    let mut t0 = vec![anon_rw(BASE, 16)];
    t0.extend((0..16).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Barrier);
    t0.push(Op::Barrier);
    t0.push(Op::Munmap {
        addr: BASE,
        len: 4 * PAGE,
    });
    t0.push(Op::Barrier);
    let mut t1 = vec![Op::Barrier];
    t1.extend((0..16).map(|i| Op::Load(BASE + i * PAGE)));
    t1.push(Op::Barrier);
    t1.push(Op::Barrier);
    for _ in 0..100 {
        t1.push(Op::Load(BASE + 8 * PAGE));
        t1.push(Op::Compute(1000));
    }
    let sim = run(
        config(&machine(2, 64), &[]),
        workload(
            vec![(0, Placement::Pinned(0), t0), (0, Placement::Pinned(1), t1)],
            vec![],
        ),
    );
    assert_eq!(
        sim.hw.cpus[1].irq.tlb, 1,
        "one shootdown IPI for one munmap"
    );
    assert_eq!(
        sim.hw.cpus[0].irq.tlb, 0,
        "the initiator's own flush is not an interrupt"
    );
    assert_eq!(sim.hw.cpus[1].irq.cal, 1);
    assert_eq!(sim.k.vm.get(Vm::PgFree), 4);
    assert_eq!(sim.k.nodes[0].nr_anon, 12);
    assert_eq!(sim.k.vm.get(Vm::NrTlbLocalFlushOne), 4);
}

#[test]
fn large_ranges_flush_fully_above_the_ceiling() {
    let mut t0 = vec![anon_rw(BASE, 64)];
    t0.extend((0..64).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Barrier);
    t0.push(Op::Mprotect {
        addr: BASE,
        len: 34 * PAGE,
        prot: prot::READ,
    });
    t0.push(Op::Barrier);
    let t1 = vec![Op::Load(BASE), Op::Barrier, Op::Barrier];
    let sim = run(
        config(&machine(2, 64), &[]),
        workload(
            vec![(0, Placement::Pinned(0), t0), (0, Placement::Pinned(1), t1)],
            vec![],
        ),
    );
    assert_eq!(
        sim.k.vm.get(Vm::NrTlbLocalFlushAll),
        1,
        "34 pages > ceiling 33: full flush"
    );
    assert_eq!(sim.k.vm.get(Vm::NrTlbLocalFlushOne), 0);
    // CPU 1: one flush when its PCID was first assigned, one from the shootdown.
    assert_eq!(sim.hw.cpus[1].perf.get(Perf::ItlbFlush), 2);
    assert_eq!(sim.hw.cpus[1].irq.tlb, 1);
    let p = sim.k.mms[0].pgtable.get((BASE / PAGE) as u32);
    assert_eq!(
        p & pte::WRITE,
        0,
        "mprotect(PROT_READ) write-protects the PTEs"
    );
}

#[test]
fn idle_lazy_cpus_get_no_shootdown() {
    // Thread 1 touches the region and exits; its CPU goes idle in lazy TLB mode.
    let mut t0 = vec![anon_rw(BASE, 8), Op::Store(BASE), Op::Barrier];
    for _ in 0..20 {
        t0.push(Op::Compute(100_000));
    }
    t0.push(Op::Munmap {
        addr: BASE,
        len: 8 * PAGE,
    });
    let t1 = vec![Op::Barrier, Op::Load(BASE)];
    let sim = run(
        config(&machine(2, 64), &[]),
        workload(
            vec![(0, Placement::Pinned(0), t0), (0, Placement::Pinned(1), t1)],
            vec![],
        ),
    );
    assert!(sim.k.cpu_is_lazy(1));
    assert_eq!(
        sim.hw.cpus[1].irq.tlb, 0,
        "lazy CPUs are skipped by should_flush_tlb"
    );
}

fn file_workload(file_pages: u64, anon_pages: u64, rereads: u32) -> Workload {
    let fbase = 0x4000_0000u64;
    let mut ops = vec![file_ro(fbase, file_pages)];
    ops.extend((0..file_pages).map(|i| Op::Load(fbase + i * PAGE)));
    // A small hot part of the file is re-read (and so referenced) several times.
    for _ in 0..rereads {
        ops.extend((0..16).map(|i| Op::Load(fbase + i * PAGE)));
        ops.push(Op::Compute(2_000_000));
    }
    ops.push(anon_rw(BASE, anon_pages));
    for i in 0..anon_pages {
        ops.push(Op::Store(BASE + i * PAGE));
        if i % 64 == 0 {
            ops.push(Op::Compute(200_000));
        }
        if i % 1024 == 0 {
            ops.extend((0..16).map(|j| Op::Load(fbase + j * PAGE)));
        }
    }
    workload(
        vec![(0, Placement::Pinned(0), ops)],
        vec![FileSpec {
            name: "data".into(),
            pages: file_pages,
            shmem: false,
        }],
    )
}

#[test]
fn kswapd_reclaims_clean_file_pages_below_the_low_watermark() {
    // 64 MiB node = 16384 pages, low watermark 320 (min 256 + gap 64): 10000 file pages,
    // then 6200 anon pages push free below low.
    let sim = run(
        config(&machine(2, 64), &[]),
        file_workload(10_000, 6_200, 3),
    );
    let z = &sim.k.nodes[0].zone;
    assert!(sim.k.vm.get(Vm::PgScanKswapd) > 0, "kswapd scanned");
    assert!(
        sim.k.vm.get(Vm::PgStealKswapd) > 0,
        "kswapd freed clean file pages"
    );
    assert_eq!(
        sim.k.vm.get(Vm::PgStealKswapd) + sim.k.vm.get(Vm::PgStealDirect),
        sim.k.vm.get(Vm::PgStealFile)
    );
    assert_eq!(
        sim.k.vm.get(Vm::PgScanAnon),
        0,
        "no swap, no demotion: anon is not scanned"
    );
    assert_eq!(
        sim.k.nodes[0].nr_anon, 6200,
        "anon pages are never reclaimed without swap"
    );
    assert!(sim.k.nodes[0].nr_file < 10_000);
    assert!(sim.k.vm.get(Vm::PageOutRun) > 0);
    assert!(
        z.nr_free + z.pcp_pages() > z.wmark.min,
        "reclaim kept the node above min"
    );
    // Reclaim takes cold pages: the hot pages are re-read throughout, and few of the
    // reclaimed pages come back as refaults (major faults beyond the 10000 first reads).
    let refaults = sim.k.vm.get(Vm::PgMajFault) - 10_000;
    let stolen = sim.k.vm.get(Vm::PgStealFile);
    assert!(
        refaults * 4 < stolen,
        "refaults {refaults}, stolen {stolen}"
    );
    let hot_cached = (0..16)
        .filter(|&i| sim.k.files[0].lookup(i).is_some())
        .count();
    assert_eq!(hot_cached, 16);
}

#[test]
fn lru_aging_follows_folio_check_references() {
    use tierlab::mm::vmscan::FolioRef;
    let mut ops = vec![file_ro(BASE, 4)];
    ops.extend((0..4).map(|i| Op::Load(BASE + i * PAGE)));
    let mut sim = run(
        config(&machine(1, 64), &[]),
        workload(
            vec![(0, Placement::Pinned(0), ops)],
            vec![FileSpec {
                name: "f".into(),
                pages: 4,
                shmem: false,
            }],
        ),
    );
    let pfn = sim.k.files[0].lookup(0).unwrap();
    // Young PTE, not PG_referenced: keep and mark referenced.
    assert_eq!(
        sim.k.folio_check_references(&mut sim.hw, 0, pfn),
        FolioRef::Keep
    );
    assert!(sim.k.frames.get(pfn).has(pg::REFERENCED));
    // Not young now (the check cleared it), but PG_referenced: reclaim clean (file).
    assert_eq!(
        sim.k.folio_check_references(&mut sim.hw, 0, pfn),
        FolioRef::ReclaimClean
    );
    // Young again and PG_referenced set: activate.
    let vpn = (BASE / PAGE) as u32;
    *sim.k.mms[0].pgtable.get_mut(vpn).unwrap() |= pte::YOUNG;
    sim.k.frames.get_mut(pfn).flags |= pg::REFERENCED;
    assert_eq!(
        sim.k.folio_check_references(&mut sim.hw, 0, pfn),
        FolioRef::Activate
    );
    // Activation leaves PG_referenced set (folio_set_referenced before returning): one more
    // unreferenced pass reclaims it clean, and only then is it plain reclaim.
    assert_eq!(
        sim.k.folio_check_references(&mut sim.hw, 0, pfn),
        FolioRef::ReclaimClean
    );
    assert_eq!(
        sim.k.folio_check_references(&mut sim.hw, 0, pfn),
        FolioRef::Reclaim
    );

    // shrink_active_list deactivates unreferenced pages of a non-exec mapping.
    let before = sim.k.nodes[0].lru_size(LRU_INACTIVE_FILE);
    assert_eq!(before, 4);
    for p in (0..4).map(|i| sim.k.files[0].lookup(i).unwrap()) {
        let node = &mut sim.k.nodes[0];
        sim.k.frames.list_del(&mut node.lru[LRU_INACTIVE_FILE], p);
        sim.k.frames.get_mut(p).flags |= pg::ACTIVE;
        sim.k.frames.list_add(&mut node.lru[LRU_ACTIVE_FILE], p);
    }
    sim.k
        .shrink_active_list(&mut sim.hw, 0, 0, 32, LRU_ACTIVE_FILE);
    assert_eq!(sim.k.nodes[0].lru_size(LRU_ACTIVE_FILE), 0);
    assert_eq!(sim.k.nodes[0].lru_size(LRU_INACTIVE_FILE), 4);
    assert_eq!(sim.k.vm.get(Vm::PgDeactivate), 4);
    assert_eq!(sim.k.vm.get(Vm::PgRefill), 4);
    sim.k.check_invariants(&sim.hw, "test");
    assert_eq!(sim.k.checker.count, 0);
}

#[test]
fn allocation_falls_back_to_the_next_node_in_distance_order() {
    let text = r#"
[machine]
cpus = 1
[[machine.nodes]]
capacity_mib = 16
read_latency_ns = 100
write_latency_ns = 100
cpus = "0"
[[machine.nodes]]
capacity_mib = 64
read_latency_ns = 250
write_latency_ns = 250
[workload]
type = "test"
[sim]
check = "strict"
"#;
    let mut ops = vec![anon_rw(BASE, 8192)];
    ops.extend((0..8192).map(|i| Op::Store(BASE + i * PAGE)));
    let sim = run(
        config(text, &[]),
        workload(vec![(0, Placement::Pinned(0), ops)], vec![]),
    );
    assert!(
        sim.k.nodes[1].nr_anon > 4000,
        "spilled to node 1: {}",
        sim.k.nodes[1].nr_anon
    );
    assert!(sim.k.vm.get(Vm::NumaMiss) > 0);
    assert_eq!(sim.k.vm.get(Vm::NumaHit) + sim.k.vm.get(Vm::NumaMiss), 8192);
    // Node 0 stopped at its low watermark (fast path), give or take the per-CPU list.
    let z = &sim.k.nodes[0].zone;
    assert!(z.nr_free <= z.wmark.low + z.pcp[0].batch as u64 * 2);
}

#[test]
fn invariant_checker_catches_each_broken_state() {
    let mk = || {
        let mut ops = vec![anon_rw(BASE, 32)];
        ops.extend((0..32).map(|i| Op::Store(BASE + i * PAGE)));
        ops.push(Op::Barrier);
        workload(
            vec![
                (0, Placement::Pinned(0), ops),
                (0, Placement::Pinned(1), vec![Op::Load(BASE), Op::Barrier]),
            ],
            vec![],
        )
    };
    let fresh = || run(config(&machine(2, 64), &[]), mk());
    let vpn = (BASE / PAGE) as u32;

    // Frame conservation: a frame vanishes from the free lists.
    let mut sim = fresh();
    let z = &mut sim.k.nodes[0].zone;
    let order = (0..z.free_area.len())
        .rev()
        .find(|&o| !z.free_area[o].is_empty())
        .unwrap();
    let pfn = sim.k.frames.list_pop_head(&mut z.free_area[order]).unwrap();
    sim.k.frames.get_mut(pfn).flags = 0;
    sim.k.check_invariants(&sim.hw, "broken");
    assert!(sim.k.checker.count_of(ViolationKind::FrameConservation) > 0);

    // rmap: a PTE points at a frame owned by another address.
    let mut sim = fresh();
    let other = pte::pfn(sim.k.mms[0].pgtable.get(vpn + 1));
    let slot = sim.k.mms[0].pgtable.get_mut(vpn).unwrap();
    *slot = pte::mk(other, *slot & 0xfff);
    sim.k.check_invariants(&sim.hw, "broken");
    assert!(sim.k.checker.count_of(ViolationKind::Rmap) > 0);

    // LRU membership: an in-use frame falls off its list.
    let mut sim = fresh();
    let pfn = pte::pfn(sim.k.mms[0].pgtable.get(vpn + 2));
    let node = &mut sim.k.nodes[0];
    sim.k.frames.list_del(&mut node.lru[LRU_INACTIVE_ANON], pfn);
    sim.k.check_invariants(&sim.hw, "broken");
    assert!(sim.k.checker.count_of(ViolationKind::LruMembership) > 0);

    // TLB coherence: the PTE changes under a CPU's cached translation with no flush.
    let mut sim = fresh();
    let other = pte::pfn(sim.k.mms[0].pgtable.get(vpn + 3));
    sim.k.frames.get_mut(other).mapcount += 1; // keep rmap counts consistent: only the TLB is wrong
    let old = pte::pfn(sim.k.mms[0].pgtable.get(vpn));
    sim.k.frames.get_mut(old).mapcount -= 1;
    // Point the PTE elsewhere without flushing CPU 1, which cached it.
    *sim.k.mms[0].pgtable.get_mut(vpn).unwrap() = 0;
    sim.k.check_invariants(&sim.hw, "broken");
    assert!(
        sim.k.checker.count_of(ViolationKind::TlbCoherence) > 0,
        "{:?}",
        sim.k.checker.violations
    );
}

#[test]
fn frame_reuse_with_a_live_tlb_entry_is_reported() {
    // Simulate a broken unmap: clear the PTE and free the frame without any flush, then let
    // the frame be allocated again.
    let mut ops = vec![anon_rw(BASE, 4), Op::Store(BASE)];
    ops.push(Op::Barrier);
    let t1 = vec![Op::Load(BASE), Op::Barrier];
    let mut sim = Sim::new(
        config(&machine(2, 64), &[]),
        workload(
            vec![
                (0, Placement::Pinned(0), ops),
                (0, Placement::Pinned(1), t1),
            ],
            vec![],
        ),
    )
    .unwrap();
    sim.run(&mut |_| {}).unwrap();
    let vpn = (BASE / PAGE) as u32;
    let pfn = pte::pfn(sim.k.mms[0].pgtable.get(vpn));
    *sim.k.mms[0].pgtable.get_mut(vpn).unwrap() = 0;
    sim.k.frames.get_mut(pfn).mapcount = 0;
    sim.k.lru_del_and_uncharge(pfn);
    sim.k.mms[0].rss_anon -= 1;
    sim.k.free_frame(&mut sim.hw, 0, pfn);
    // The freed frame is at the head of CPU 0's pageset: the next allocation gets it.
    let got = sim.k.alloc_page(&mut sim.hw, 0, 0).unwrap();
    assert_eq!(got, pfn);
    assert!(
        sim.k.checker.count_of(ViolationKind::FrameReuse) > 0,
        "{:?}",
        sim.k.checker.violations
    );
}

#[test]
fn reclaim_shoots_down_cpus_that_cache_the_unmapped_pages() {
    // Thread 1 (CPU 1) reads 1000 file pages, then keeps running; thread 0 (CPU 0) fills the
    // node with anon memory so kswapd reclaims those file pages while CPU 1's TLB still
    // holds their translations. The batched flush must reach CPU 1 before the frames are
    // reused; without it the checker reports the stale entries.
    let fbase = 0x4000_0000u64;
    let mut t1 = vec![file_ro(fbase, 1000)];
    t1.extend((0..1000).map(|i| Op::Load(fbase + i * PAGE)));
    t1.push(Op::Barrier);
    t1.extend((0..200).map(|_| Op::Compute(1_000_000)));
    let mut t0 = vec![anon_rw(BASE, 15_500), Op::Barrier];
    t0.extend((0..15_500).map(|i| Op::Store(BASE + i * PAGE)));
    let sim = run(
        config(&machine(2, 64), &[]),
        workload(
            vec![(0, Placement::Pinned(0), t0), (0, Placement::Pinned(1), t1)],
            vec![FileSpec {
                name: "f".into(),
                pages: 1000,
                shmem: false,
            }],
        ),
    );
    assert!(
        sim.k.vm.get(Vm::PgStealFile) > 0,
        "file pages were reclaimed"
    );
    assert!(
        sim.hw.cpus[1].irq.tlb > 0,
        "CPU 1 received the batched shootdown"
    );
    assert!(sim.k.vm.get(Vm::NrTlbRemoteFlush) > 0);
}

#[test]
fn memory_the_kernel_holds_at_boot_is_off_the_free_lists() {
    let plain = Sim::new(config(&machine(1, 64), &[]), one_process(vec![], vec![])).unwrap();
    let held = Sim::new(
        config(&machine(1, 64), &["machine.nodes.0.reserved_mib=8"]),
        one_process(vec![], vec![]),
    )
    .unwrap();
    let free = |s: &Sim| s.k.nodes[0].zone.nr_free;
    assert_eq!(free(&plain) - free(&held), 8 * 256);
    let mut held = held;
    held.k.check_invariants(&held.hw, "boot");
    assert_eq!(held.k.checker.count, 0, "{:?}", held.k.checker.violations);
    // A reservation that leaves no room is refused, naming the key.
    let e = Config::from_str_with(
        &machine(1, 64),
        "t.toml",
        None,
        &["machine.nodes.0.reserved_mib=60".to_string()],
    )
    .unwrap_err();
    assert!(e.to_string().contains("reserved_mib"), "{e}");
}

/// `--set`s that put every timer of a `vcpu_turns` run on a 16 ns grid: a 1 GHz clock, an
/// exact LAPIC calibration (one count per 16 ns, machine/lapic.rs) and a timer interrupt
/// handler of exactly 219 × 16 ns (no drawn phase). Re-arms for the same jiffy then land on
/// the same nanosecond, and a tie does not kick: when both CPUs' ticks fire, CPU 0 takes its
/// interrupt first and re-arms the only pending timer, which kicks; CPU 1 re-arms next, ties,
/// and keeps the turn to the next tick. Workloads whose ops are multiples of 16 ns stay on
/// the grid.
const TICK_GRID: [&str; 6] = [
    "machine.shared_core=true",
    "machine.cpu_ghz=1",
    "machine.lapic_timer_period=4000000",
    "cost.timer_interrupt_cycles=3504",
    "machine.lapic_handler_phase=false",
    "sim.timeline_interval_ms=1000",
];

#[test]
fn vcpu_turns_share_the_ticks_between_two_busy_vcpus_when_the_handlers_end_at_drawn_points() {
    // Two threads compute 60 ms each in 1 µs ops, on CPUs 0 and 1. With every handler the
    // same length, CPU 0 re-arms first at every tick and kicks, and CPU 1 holds every tick:
    // its 60 ms end at 64.112 ms (as in the test below), CPU 0's only then. With the
    // handler's end drawn within the LAPIC's 16 ns count, whose tick fires first is even
    // odds at each tick, so both advance together and end within a few ticks of each other.
    let ends = |drawn: bool| {
        let threads = vec![
            (0, Placement::Pinned(0), busy_60ms()),
            (0, Placement::Pinned(1), busy_60ms()),
        ];
        let phase = format!("machine.lapic_handler_phase={drawn}");
        let mut sets: Vec<&str> = TICK_GRID
            .iter()
            .copied()
            .filter(|s| !s.contains("phase"))
            .collect();
        sets.extend(["machine.vcpu_turns=true", &phase]);
        let sim = run(config(&machine(2, 64), &sets), workload(threads, vec![]));
        let ms = |t: u64| sim.hw.cycles_to_s(t) * 1e3;
        let end = |i: usize| ms(sim.k.sched.threads[i].roi_end.unwrap());
        (end(0), end(1))
    };
    let (cpu0, cpu1) = ends(false);
    assert!((64.112..64.113).contains(&cpu1), "{cpu1} ms");
    assert!(cpu0 > 120.0, "{cpu0} ms");
    let (cpu0, cpu1) = ends(true);
    assert!((cpu0 - cpu1).abs() < 20.0, "{cpu0} and {cpu1} ms");
    assert!(cpu0.min(cpu1) > 100.0, "{cpu0} and {cpu1} ms");
}

#[test]
fn vcpu_turns_give_a_thread_behind_schedule_one_batch_per_tick_or_none_by_who_holds_the_tick() {
    // One thread paces 50 batches of 100 µs of work into 50 µs slots, so it falls behind by
    // more than the 50 µs timer slack, and each clock_nanosleep arms a minimum-delta timer
    // that kicks every vCPU; the other thread computes (`busy_ms` of work). After the kick
    // the next vCPU's budget ends as the timer expires, the one after it runs to the next
    // deadline, and the paced thread takes the interrupt (3.504 µs) in its next turn.
    let ends = |turns: bool, busy_ms: u32, slot_ns: u32, paced_cpu: u32| {
        let mut threads = vec![];
        if busy_ms > 0 {
            let cpu = Placement::Pinned(1 - paced_cpu);
            let mut ops = vec![Op::Compute(100_000); busy_ms as usize * 10];
            ops.push(Op::Mark(Mark::RoiEnd));
            threads.push((0, cpu, ops));
        }
        let batch = (0..50).flat_map(|_| [Op::Pace(slot_ns), Op::Compute(100_000)]);
        let ops = batch.chain([Op::Mark(Mark::RoiEnd)]).collect();
        threads.push((0, Placement::Pinned(paced_cpu), ops));
        let turns = format!("machine.vcpu_turns={turns}");
        let mut sets = TICK_GRID.to_vec();
        sets.push(&turns);
        let sim = run(config(&machine(2, 64), &sets), workload(threads, vec![]));
        let ms = |t: u64| sim.hw.cycles_to_s(t) * 1e3;
        let paced = sim.k.sched.threads.last().unwrap().roi_end.unwrap();
        let busy = &sim.k.sched.threads[0];
        let busy_end = (busy_ms > 0).then(|| ms(busy.roi_end.unwrap()));
        let busy_runtime = (busy_ms > 0).then(|| ms(busy.runtime));
        (ms(paced), busy_end, busy_runtime)
    };
    // Paced on CPU 1: it holds each tick from its re-arm and runs one batch, whose kick
    // leaves CPU 0 the rest of the tick; CPU 1's minimum-delta timer has fired, so only CPU
    // 0's tick is pending and CPU 0 runs to it. At each tick CPU 0 re-arms first (kick) and
    // CPU 1 second (tie): batch k ≥ 2 runs from 4k ms + 16 ns + 2 × 3.504 µs, and the 50th
    // ends at 200 ms + 7.024 µs + 100 µs.
    let (behind, _, busy_runtime) = ends(true, 260, 50_000, 1);
    assert!((200.10..200.11).contains(&behind), "{behind} ms");
    // The busy thread kept its CPU while waiting for its turns: all of it is run time.
    let (_, busy_end, _) = ends(true, 260, 50_000, 1);
    let (busy_runtime, busy_end) = (busy_runtime.unwrap(), busy_end.unwrap());
    assert!(
        (busy_end - busy_runtime).abs() < 0.01,
        "{busy_runtime} of {busy_end} ms"
    );
    // Paced on CPU 0, beside 20 ms of work on CPU 1: before the first tick every re-arm of
    // CPU 0 ties with CPU 1's pending tick and does not kick, so it runs batch after batch,
    // each minimum-delta kick giving CPU 1 the 1.008 µs to that timer's expiry ((62 + 1) ×
    // 16 ns): 104.512 µs per batch with the interrupt, and it is cut 20.432 µs before the
    // end of its 38th at the tick. CPU 1 has done 50 µs + 37 × 1.008 µs of its work by then;
    // from then it holds every tick (3.993 ms of work in each, after the two handlers) until
    // its work ends at 23.94776 ms. The paced thread's rest of batch 38 and 12 batches
    // follow alone (its own minimum-delta budgets are its time), with one more tick's
    // handler: 23.94776 + 0.020432 + 12 × 0.103504 + 0.003504 = 25.213744 ms.
    let (first, busy_end, _) = ends(true, 20, 50_000, 0);
    let busy_end = busy_end.unwrap();
    assert!((23.9477..23.9478).contains(&busy_end), "{busy_end} ms");
    assert!((25.2137..25.2138).contains(&first), "{first} ms");
    // Alone: the 50 µs slack, 50 batches, and 51 handlers (the wake's, 49 minimum-delta
    // timers' and the 4 ms tick's).
    let (alone, _, _) = ends(true, 0, 50_000, 1);
    assert!((5.228..5.229).contains(&alone), "{alone} ms");
    // With an even share instead of turns it runs at half speed.
    let (even, _, _) = ends(false, 260, 50_000, 1);
    assert!((9.9..10.2).contains(&even), "{even} ms");
    // Ahead of schedule (5 ms slots, from its first turn at 4.007 ms), it sleeps to its slot
    // plus the slack, a deadline that ends the busy CPU's turn, and its wake-up's re-arm
    // ties: the 50th batch starts at 4.007 + 49 × 5 + 0.05 + 0.0035 ms and ends 0.1 ms later.
    let (ahead, _, _) = ends(true, 260, 5_000_000, 1);
    assert!((249.16..249.161).contains(&ahead), "{ahead} ms");
}

#[test]
fn vcpu_turns_cut_a_long_op_at_each_deadline_and_the_other_vcpus_run_between() {
    // Thread 0 (CPU 0) does 11 ms of work in one op, as task_numa_work's walk is charged;
    // thread 1 (CPU 1) computes 60 ms in small ops. Under QEMU's turns a turn ends at the
    // deadline whatever the vCPU is doing: CPU 0 runs to the first tick (4.000016 ms on the
    // TICK_GRID), and from then CPU 1 holds every tick (it re-arms second and ties), running
    // 4 ms less the two 3.504 µs handlers of each: its 60 ms end 105.12 µs into the 16th tick,
    // at 64.112 ms. The rest of thread 0's op (6.999984 ms) runs then, with its 68 ms tick's
    // handler: it ends at 71.116 ms, all of which is its run time. Without the cut, CPU 0
    // held the machine for 11 ms.
    let long = vec![Op::Compute(11_000_000), Op::Mark(Mark::RoiEnd)];
    let mut small = vec![Op::Compute(1_000); 60_000];
    small.push(Op::Mark(Mark::RoiEnd));
    let threads = vec![
        (0, Placement::Pinned(0), long),
        (0, Placement::Pinned(1), small),
    ];
    let mut sets = TICK_GRID.to_vec();
    sets.push("machine.vcpu_turns=true");
    let sim = run(config(&machine(2, 64), &sets), workload(threads, vec![]));
    let ms = |t: u64| sim.hw.cycles_to_s(t) * 1e3;
    let t0 = &sim.k.sched.threads[0];
    let small_done = ms(sim.k.sched.threads[1].roi_end.unwrap());
    assert!((64.112..64.113).contains(&small_done), "{small_done} ms");
    let done = ms(t0.roi_end.unwrap());
    assert!((71.115..71.116).contains(&done), "{done} ms");
    let run_time = ms(t0.runtime);
    assert!((71.115..71.116).contains(&run_time), "{run_time} ms");
}

/// 60 ms of work in 1 µs ops (TICK_GRID's 1 GHz), then the end of the region of interest.
fn busy_60ms() -> Vec<Op> {
    let mut ops = vec![Op::Compute(1_000); 60_000];
    ops.push(Op::Mark(Mark::RoiEnd));
    ops
}

/// Writes a page, then `n` times write-protects it, unprotects it and writes it again, so
/// that each write-protect changes a writable PTE and flushes.
fn write_protect_flips(n: usize) -> Vec<Op> {
    let mut ops = vec![anon_rw(BASE, 1), Op::Store(BASE)];
    for _ in 0..n {
        for prot in [prot::READ, prot::READ | prot::WRITE] {
            ops.push(Op::Mprotect {
                addr: BASE,
                len: PAGE,
                prot,
            });
        }
        ops.push(Op::Store(BASE));
    }
    ops.push(Op::Mark(Mark::RoiEnd));
    ops
}

#[test]
fn vcpu_turns_pass_the_turn_on_while_a_flush_ipi_waits_for_its_acknowledgement() {
    // Thread 1 (CPU 1) write-protects and unprotects a page it wrote, 4 times; a store after
    // each pair makes the PTE writable again, so each write-protect flushes. CPU 0 runs
    // thread 0 of the same process (60 ms of work in small ops), so each flush IPIs CPU 0.
    // The sender spins in csd_lock_wait, whose PAUSE ends its turn in QEMU (helper_pause):
    // CPU 0 takes its turn, handles the IPI and holds the turn to the next deadline, its
    // tick. With an even share instead of turns the 4 flushes take microseconds.
    let run_flushes = |turns: bool| {
        let flips = write_protect_flips(4);
        let threads = vec![
            (0, Placement::Pinned(0), busy_60ms()),
            (0, Placement::Pinned(1), flips),
        ];
        let turns = format!("machine.vcpu_turns={turns}");
        let mut sets = TICK_GRID.to_vec();
        sets.push(&turns);
        let sim = run(config(&machine(2, 64), &sets), workload(threads, vec![]));
        let ms = |t: u64| sim.hw.cycles_to_s(t) * 1e3;
        let t1 = &sim.k.sched.threads[1];
        (
            sim.hw.cpus[0].irq.tlb,
            ms(t1.roi_end.unwrap()),
            ms(t1.runtime),
        )
    };
    // CPU 0 runs first, to its first tick at 4 ms; thread 1's first flush comes just after,
    // and each of the 4 sends it to the next tick: it ends after the 20 ms one, and the
    // spinning was its run time.
    let (ipis, end, run_time) = run_flushes(true);
    assert_eq!(ipis, 4);
    assert!((20.0..20.02).contains(&end), "{end} ms");
    assert!((16.0..16.02).contains(&run_time), "{run_time} ms");
    let (ipis, end, _) = run_flushes(false);
    assert_eq!(ipis, 4);
    assert!(end < 0.1, "{end} ms");
}

#[test]
fn vcpu_turns_hold_a_flush_ipis_sender_until_every_target_has_run() {
    // As above, with the flips on CPU 0 and two busy CPUs of the process (1 and 2). The first
    // flush (at 7.8 µs) passes the turn to CPU 1, which runs to the 4 ms tick; CPU 2 then has
    // no budget (it runs the expired timers) and has not answered when CPU 0's turn comes,
    // so CPU 0 passes again; CPU 1 takes its tick's handler and kicks; CPU 2 answers and runs
    // to the 8 ms tick, where CPU 0's handler kicks (it re-arms first) and CPU 1 holds the
    // turn to 12 ms. CPU 0 goes on at 12.0035 ms, and each of flushes 2 to 4 waits for the
    // next tick: the flips end at 24.0102 ms. Had CPU 0 gone on at 4 ms without CPU 2's
    // answer, they would end at 20.0102 ms.
    let run_flushes = || {
        let flips = write_protect_flips(4);
        let threads = vec![
            (0, Placement::Pinned(0), flips),
            (0, Placement::Pinned(1), busy_60ms()),
            (0, Placement::Pinned(2), busy_60ms()),
        ];
        let mut sets = TICK_GRID.to_vec();
        sets.push("machine.vcpu_turns=true");
        let sim = run(config(&machine(3, 64), &sets), workload(threads, vec![]));
        let ms = |t: u64| sim.hw.cycles_to_s(t) * 1e3;
        let flips = &sim.k.sched.threads[0];
        let ipis = (sim.hw.cpus[1].irq.tlb, sim.hw.cpus[2].irq.tlb);
        (ipis, ms(flips.roi_end.unwrap()), ms(flips.runtime))
    };
    let (ipis, end, run_time) = run_flushes();
    assert_eq!(ipis, (4, 4));
    assert!((24.0101..24.0103).contains(&end), "{end} ms");
    assert!((24.0101..24.0103).contains(&run_time), "{run_time} ms");
}

#[test]
fn tick_offset_moves_the_jiffy_boundaries_against_the_workloads_start() {
    // One thread computes 10 ms alone, in small ops, and takes each tick's 3.504 µs handler
    // (TICK_GRID) as run time. Started on a jiffy boundary it meets the ticks at 4 and 8 ms;
    // started 3 ms into a jiffy, at 1, 5 and 9 ms: one handler more.
    let run_time = |offset: &str| {
        let mut ops = vec![Op::Compute(1_000); 10_000];
        ops.push(Op::Mark(Mark::RoiEnd));
        let offset = format!("machine.tick_offset_ns={offset}");
        let mut sets = TICK_GRID.to_vec();
        sets.extend(["machine.vcpu_turns=true", &offset]);
        let threads = vec![(0, Placement::Pinned(0), ops)];
        let sim = run(config(&machine(1, 64), &sets), workload(threads, vec![]));
        sim.hw.cycles_to_s(sim.k.sched.threads[0].runtime) * 1e3
    };
    let on_boundary = run_time("0");
    assert!(
        (10.0070..10.0071).contains(&on_boundary),
        "{on_boundary} ms"
    );
    let late = run_time("3000000");
    assert!((10.0105..10.0106).contains(&late), "{late} ms");
    // A jiffy is 4 ms (CONFIG_HZ 250): an offset of a whole jiffy or more is refused.
    let e = Config::from_str_with(
        &machine(1, 64),
        "test.toml",
        None,
        &["machine.tick_offset_ns=4000000".to_string()],
    )
    .unwrap_err();
    assert!(e.to_string().contains("tick_offset_ns"), "{e}");
}

#[test]
fn a_sleep_that_kicks_leaves_its_thread_running_until_the_round_comes_back() {
    // One thread on CPU 0 runs 21 batches of 100 µs of work paced 1 ms apart (ahead of
    // schedule); another computes on CPU 1. A sleep whose timer is the machine's earliest
    // deadline kicks every vCPU from inside hrtimer_start, before the thread reaches
    // schedule(); CPU 1 then runs to that deadline, and when CPU 0's turn comes back the timer
    // has fired: the thread never slept, and the whole round was its run time, with the
    // interrupt that woke it (3.504 µs on the TICK_GRID). Alone on the machine, it sleeps,
    // and its run time is its work.
    let run_time = |busy: bool, sample_ms: &str| {
        let mut paced = vec![];
        for _ in 0..20 {
            paced.extend([Op::Compute(100_000), Op::Pace(1_000_000)]);
        }
        paced.push(Op::Compute(100_000));
        let mut threads = vec![(0, Placement::Pinned(0), paced)];
        if busy {
            // Small ops, so that its turns end within half a µs of their deadlines.
            threads.push((0, Placement::Pinned(1), vec![Op::Compute(1_000); 100_000]));
        }
        let interval = format!("sim.timeline_interval_ms={sample_ms}");
        let mut sets = TICK_GRID.to_vec();
        sets.extend(["machine.vcpu_turns=true", &interval]);
        let sim = run(config(&machine(2, 64), &sets), workload(threads, vec![]));
        sim.hw.cycles_to_s(sim.k.sched.threads[0].runtime) * 1e3
    };
    let alone = run_time(false, "1000");
    assert!((2.099..2.101).contains(&alone), "{alone} ms");
    // Beside the busy CPU the slots end at 0.1 ms + k ms + the 50 µs slack (k = 0..19), and
    // each batch starts after the 3.504 µs interrupt, whose re-arm ties with CPU 1's tick:
    // the last batch ends at 19.2535 ms. Four sleeps kicked nobody: those ending at 4.15,
    // 8.15, 12.15 and 16.15 ms, armed at x.2535 ms, since a 4 ms tick came first; they slept,
    // and their wake-ups' interrupts ran in the idle task. The rest, 19.2535 − 4 × 0.9 ms,
    // is run time.
    let beside_busy = run_time(true, "1000");
    assert!((15.653..15.654).contains(&beside_busy), "{beside_busy} ms");
    // tierlab's own samples are no deadlines of the machine: sampling every 0.3 ms changes
    // nothing.
    assert_eq!(run_time(true, "0.3"), beside_busy);
}

#[test]
fn a_wake_up_whose_tick_re_arm_kicks_leaves_the_woken_thread_waiting_without_run_time() {
    // Thread 0 (CPU 0) works 100 µs, sleeps 1,000,008 ns and works 100 µs more; thread 1
    // (CPU 1) computes 20 ms. On the TICK_GRID the wake-up's handler (in the idle task, from
    // 1.100008 ms) re-arms CPU 0's tick 8 ns off the grid, at 4.000008 ms, before CPU 1's at
    // 4.000016 ms: it kicks, and CPU 1 runs to that tick while thread 0, woken, has not run
    // yet: that wait is not its run time. From the tick on, thread 0 is current (CPU 0 runs
    // its tick handlers, 3.504 µs each, and CPU 1, re-arming second, holds every tick), so
    // it accrues every wait until CPU 1's 20 ms end 131.528 µs into its fifth tick, at
    // 20.138544 ms; then its 100 µs. Run time: 0.1 ms, then 4.000008 → 20.238544 ms; with
    // the wait after the kick counted, it would be 2.9 ms more.
    let threads = vec![
        (
            0,
            Placement::Pinned(0),
            vec![
                Op::Compute(100_000),
                Op::Sleep(1_000_008),
                Op::Compute(100_000),
                Op::Mark(Mark::RoiEnd),
            ],
        ),
        (0, Placement::Pinned(1), vec![Op::Compute(1_000_000); 20]),
    ];
    let mut sets = TICK_GRID.to_vec();
    sets.push("machine.vcpu_turns=true");
    let sim = run(config(&machine(2, 64), &sets), workload(threads, vec![]));
    let ms = |t: u64| sim.hw.cycles_to_s(t) * 1e3;
    let t0 = &sim.k.sched.threads[0];
    let done = ms(t0.roi_end.unwrap());
    assert!((20.2385..20.2386).contains(&done), "{done} ms");
    let run_time = ms(t0.runtime);
    assert!((16.3385..16.3386).contains(&run_time), "{run_time} ms");
}

#[test]
fn a_thread_asleep_between_paced_batches_leaves_its_cpu_lazy_and_skipped_by_flushes() {
    // Thread 0 (CPU 0) writes 16 pages, then reads them in batches paced 5 ms apart; thread 1
    // (CPU 1, same process) computes for a while and then write-protects the pages, which
    // flushes them from every CPU running the mm. Under turns thread 0 is asleep by then:
    // its CPU runs the idle task in lazy TLB mode, the flush skips it (should_flush_tlb),
    // and switch_mm_irqs_off flushes it when the thread comes back (run() checks that no
    // stale entry is used). With an even share no sleep is seen from outside a quantum.
    let tlb_irqs = |turns: bool| {
        let mut paced = vec![anon_rw(BASE, 16)];
        paced.extend((0..16).map(|i| Op::Store(BASE + i * PAGE)));
        for _ in 0..3 {
            paced.push(Op::Pace(5_000_000));
            paced.extend((0..16).map(|i| Op::Load(BASE + i * PAGE)));
        }
        // Thread 1 sleeps first, so that thread 0 has gone to sleep for its second slot when
        // the mprotect comes (a kick's order would otherwise depend on the LAPIC's rounding).
        let protect = vec![
            Op::Sleep(1_000_000),
            Op::Compute(2_000_000),
            Op::Mprotect {
                addr: BASE,
                len: 16 * PAGE,
                prot: prot::READ,
            },
        ];
        let threads = vec![
            (0, Placement::Pinned(0), paced),
            (0, Placement::Pinned(1), protect),
        ];
        let sets = [
            "machine.shared_core=true".to_string(),
            format!("machine.vcpu_turns={turns}"),
        ];
        let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
        let sim = run(config(&machine(2, 64), &sets), workload(threads, vec![]));
        sim.hw.cpus[0].irq.tlb
    };
    assert_eq!(tlb_irqs(true), 0);
    assert_eq!(tlb_irqs(false), 1);
}

#[test]
fn a_shared_core_runs_busy_cpus_in_turn() {
    // Thread 0 computes 10 M cycles; thread 1 computes as much, or paces (1 % busy), or is
    // not there. On a shared core (QEMU's round-robin under -icount) two busy CPUs take
    // twice as long; a CPU that is mostly idle slows the other by about its duty.
    let busy = || vec![Op::Compute(10_000); 1000];
    let paced = || {
        (0..100)
            .flat_map(|_| [Op::Pace(100_000), Op::Compute(2_200)])
            .collect::<Vec<_>>()
    };
    let end = |shared: bool, other: Option<Vec<Op>>| {
        let mut threads = vec![(0, Placement::Pinned(0), busy())];
        if let Some(ops) = other {
            threads.push((0, Placement::Pinned(1), ops));
        }
        let sets = [format!("machine.shared_core={shared}")];
        let sets: Vec<&str> = sets.iter().map(|s| s.as_str()).collect();
        let sim = run(config(&machine(2, 64), &sets), workload(threads, vec![]));
        sim.k.sched.threads[0].runtime
    };
    let alone = end(false, None);
    assert!((10_000_000..10_100_000).contains(&alone), "{alone}");
    assert_eq!(end(true, None), alone, "one busy CPU does not share");
    assert_eq!(
        end(false, Some(busy())),
        alone,
        "separate cores run in parallel"
    );
    let both = end(true, Some(busy())) as f64 / alone as f64;
    assert!((1.95..2.05).contains(&both), "two busy CPUs: {both}");
    let with_paced = end(true, Some(paced())) as f64 / alone as f64;
    assert!(
        (1.0..1.05).contains(&with_paced),
        "one 1 % busy CPU: {with_paced}"
    );
}

#[test]
fn a_pace_origin_opens_the_schedule_that_long_after_the_barrier() {
    // Two threads meet at a barrier; the second opens its pace schedule 3 ms after the
    // release (Op::PaceOrigin), the first where it is. Each marks its first paced slot.
    let first = |origin: Option<u32>| {
        let mut t0 = vec![Op::Compute(2_000_000), Op::Barrier];
        t0.extend([
            Op::Pace(1_000_000),
            Op::Mark(Mark::RoiBegin),
            Op::Compute(1000),
        ]);
        let mut t1 = vec![Op::Barrier];
        t1.extend(origin.map(Op::PaceOrigin));
        t1.extend([
            Op::Pace(1_000_000),
            Op::Mark(Mark::RoiBegin),
            Op::Compute(1000),
        ]);
        let threads = vec![(0, Placement::Pinned(0), t0), (0, Placement::Pinned(1), t1)];
        let sim = run(config(&machine(2, 64), &[]), workload(threads, vec![]));
        let release = sim.k.sched.barrier_released[0];
        let ms = |t: u64| sim.hw.cycles_to_s(t) * 1e3;
        let begins: Vec<f64> = (0..2)
            .map(|t| ms(sim.k.sched.threads[t].roi_begin.unwrap()) - ms(release))
            .collect();
        begins
    };
    let free = first(None);
    assert!(free.iter().all(|&b| (0.0..0.01).contains(&b)), "{free:?}");
    let delayed = first(Some(3_000_000));
    assert!((0.0..0.01).contains(&delayed[0]), "{delayed:?}");
    assert!((delayed[1] - 3.0).abs() < 0.01, "{delayed:?}");
}
