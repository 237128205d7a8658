//! Migration entries that remember the PTE's young and dirty bits (seed 004): what a page's
//! PTE looks like after move_pages with and without them, when the swap offset has no room
//! for them, and what that does to MIGRC's read-only, clean deferral.

mod common;

use common::*;
use tierlab::mm::pgtable::pte;
use tierlab::workload::{prot, FileSpec, Op, Placement};
use tierlab::Sim;

const FBASE: u64 = 0x2000_0000;

/// Write 8 anon pages and read 8 file pages (young, dirty / young, clean), move both ranges
/// to node 1, and return the run.
fn write_read_move(sets: &[&str]) -> Sim {
    let mut ops = vec![anon_rw(BASE, 8), file_ro(FBASE, 8)];
    ops.extend((0..8).map(|i| Op::Store(BASE + i * PAGE)));
    ops.extend((0..8).map(|i| Op::Load(FBASE + i * PAGE)));
    for addr in [BASE, FBASE] {
        ops.push(Op::MovePages {
            addr,
            len: 8 * PAGE,
            node: 1,
        });
    }
    let mut cfg = tiered_config(sets);
    cfg.kernel.numa_balancing = 0;
    let files = vec![FileSpec {
        name: "f".into(),
        pages: 8,
        shmem: false,
    }];
    run(cfg, one_process(vec![(Placement::Pinned(0), ops)], files))
}

fn ptes(sim: &Sim, base: u64) -> Vec<u64> {
    (0..8)
        .map(|i| sim.k.mms[0].pgtable.get(((base >> 12) + i) as u32))
        .collect()
}

fn on_node_1(sim: &Sim, p: u64) -> bool {
    sim.hw.node_of_pfn(pte::pfn(p)) == 1
}

#[test]
fn a_migrated_page_keeps_young_and_keeps_dirty_only_if_it_was_dirty() {
    let sim = write_read_move(&[]);
    assert!(sim.k.swap_migration_ad_supported);
    for p in ptes(&sim, BASE) {
        assert!(on_node_1(&sim, p));
        assert_eq!(
            p & (pte::YOUNG | pte::DIRTY),
            pte::YOUNG | pte::DIRTY,
            "{p:#x}"
        );
    }
    for p in ptes(&sim, FBASE) {
        assert!(on_node_1(&sim, p));
        assert_eq!(p & (pte::YOUNG | pte::DIRTY), pte::YOUNG, "{p:#x}");
    }
}

#[test]
fn before_6_1_or_without_room_in_the_swap_offset_a_migrated_page_comes_back_old_and_clean() {
    for sets in [
        &["kernel.migration_entry_ad=false"][..],
        // L1TF on a core with 39 physical address bits: swap offsets stop at 2^29.
        &["machine.l1tf=true", "machine.phys_bits=39"][..],
    ] {
        let sim = write_read_move(sets);
        assert!(!sim.k.swap_migration_ad_supported, "{sets:?}");
        for p in ptes(&sim, BASE).into_iter().chain(ptes(&sim, FBASE)) {
            assert!(on_node_1(&sim, p));
            assert_eq!(p & (pte::YOUNG | pte::DIRTY), 0, "{sets:?}: {p:#x}");
        }
    }
}

#[test]
fn with_dirty_kept_a_written_read_only_page_no_longer_qualifies_for_migrc_after_a_move() {
    // Write 8 pages, make them read-only (mprotect keeps the dirty bit), move them to node 1
    // and back to node 0 (sync, never deferred), then ask whether an asynchronous migration
    // from another CPU would defer the flush (can_migrc_test: every mapping read-only and
    // clean). Before 6.1 the move left them clean, so they qualify; with dirty kept, not.
    let deferred = |ad: &str| {
        let mut ops = vec![anon_rw(BASE, 8)];
        ops.extend((0..8).map(|i| Op::Store(BASE + i * PAGE)));
        ops.push(Op::Mprotect {
            addr: BASE,
            len: 8 * PAGE,
            prot: prot::READ,
        });
        for node in [1, 0] {
            ops.push(Op::MovePages {
                addr: BASE,
                len: 8 * PAGE,
                node,
            });
        }
        let mut cfg = tiered_config(&["kernel.migrc=on", ad]);
        cfg.kernel.numa_balancing = 0;
        let mut sim = run(cfg, one_process(vec![(Placement::Pinned(0), ops)], vec![]));
        let pfn = pte::pfn(sim.k.mms[0].pgtable.get((BASE >> 12) as u32));
        sim.k.try_to_migrate(&mut sim.hw, 1, pfn, true)
    };
    assert!(deferred("kernel.migration_entry_ad=false"));
    assert!(!deferred("kernel.migration_entry_ad=true"));
}
