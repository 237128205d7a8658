//! shmem (`MAP_SHARED | MAP_ANONYMOUS`): MADV_PAGEOUT and reclaim write dirty folios to swap
//! and leave the entries in the page cache (the PTEs become none); a fault reads them back
//! through the swap cache with cluster readahead, frees the slot and keeps the folio dirty;
//! clean hole pages are dropped without a write; the checker counts shmem's references.

mod common;

use common::{one_process, pageout, ptes, swap_config, BASE, PAGE};
use tierlab::check::ViolationKind;
use tierlab::mm::page::pg;
use tierlab::mm::pgtable::pte;
use tierlab::stats::Vm;
use tierlab::workload::{prot, Backing, FileSpec, Op, Placement};
use tierlab::{Config, Sim};

fn zram(sets: &[&str]) -> Config {
    swap_config(16, "zram", 4, sets)
}

/// mmap(BASE, pages, PROT_READ | PROT_WRITE, MAP_SHARED) of shmem object 0.
fn map_shmem(pages: u64) -> Op {
    Op::Mmap {
        addr: BASE,
        len: pages * PAGE,
        prot: prot::READ | prot::WRITE,
        backing: Backing::File { file: 0, pgoff: 0 },
    }
}

fn stores(pages: u64) -> impl Iterator<Item = Op> {
    (0..pages).map(|i| Op::Store(BASE + i * PAGE))
}

fn loads(pages: u64) -> impl Iterator<Item = Op> {
    (0..pages).map(|i| Op::Load(BASE + i * PAGE))
}

fn run(cfg: Config, pages: u64, ops: Vec<Op>) -> Sim {
    let shmem = FileSpec {
        name: "buf".into(),
        pages,
        shmem: true,
    };
    common::run(
        cfg,
        one_process(vec![(Placement::Pinned(0), ops)], vec![shmem]),
    )
}

#[test]
fn pageout_leaves_no_pte_and_the_swap_entry_in_the_page_cache() {
    let n = 64;
    let mut ops = vec![map_shmem(n)];
    ops.extend(stores(n));
    ops.push(pageout(n));
    let sim = run(zram(&[]), n, ops);
    assert!(ptes(&sim, n).iter().all(|&p| p == 0), "PTEs are none");
    let file = &sim.k.files[0];
    assert_eq!(file.swapped.len() as u64, n);
    assert_eq!(file.nr_cached, 0);
    assert_eq!(sim.k.vm.get(Vm::Pswpout), n);
    assert_eq!(sim.k.vm.get(Vm::PgStealAnon), n, "shmem is on the anon LRU");
    assert_eq!(sim.k.swap.devices[0].inuse_pages(), n);
    assert_eq!(sim.k.mms[0].rss_shmem, 0);
}

#[test]
fn a_read_swaps_back_in_with_cluster_readahead_and_frees_every_slot() {
    let n = 64;
    let mut ops = vec![map_shmem(n)];
    ops.extend(stores(n));
    ops.push(pageout(n));
    ops.extend(loads(n));
    let sim = run(zram(&[]), n, ops);
    assert_eq!(sim.k.vm.get(Vm::Pswpin), n);
    let (majflt, ra, hits) = (
        sim.k.vm.get(Vm::PgMajFault),
        sim.k.vm.get(Vm::SwapRa),
        sim.k.vm.get(Vm::SwapRaHit),
    );
    // Slots were taken in ascending order, so every page read ahead is the next one read.
    assert_eq!(ra, hits);
    assert_eq!(
        majflt + hits,
        n,
        "each page read once, by a fault or ahead of one"
    );
    assert!(majflt < n / 4, "{majflt} major faults for {n} pages");
    assert_eq!(sim.k.swap.devices[0].inuse_pages(), 0, "every slot freed");
    assert!(sim.k.swap.devices[0].pool.is_empty());
    assert!(sim.k.files[0].swapped.is_empty());
    for p in ptes(&sim, n) {
        // Writable at once (no writenotify for shmem), clean in the PTE after a read...
        assert!(pte::present(p) && p & pte::WRITE != 0 && p & pte::DIRTY == 0);
        // ...but the folio is dirty: its slot is gone, so reclaim must write it again.
        assert!(sim.k.frames.get(pte::pfn(p)).has(pg::DIRTY));
    }
    assert_eq!(sim.k.mms[0].rss_shmem, n);
}

#[test]
fn without_page_cluster_every_page_is_a_major_fault() {
    let n = 64;
    let mut ops = vec![map_shmem(n)];
    ops.extend(stores(n));
    ops.push(pageout(n));
    ops.extend(loads(n));
    let sim = run(zram(&["vm.page_cluster=0"]), n, ops);
    assert_eq!(sim.k.vm.get(Vm::PgMajFault), n);
    assert_eq!(sim.k.vm.get(Vm::SwapRa), 0);
}

#[test]
fn every_pageout_after_a_swap_in_writes_again() {
    // swap_bench's loop: the slot is freed at swap-in, so nothing stays clean in swap.
    let n = 32;
    let mut ops = vec![map_shmem(n)];
    ops.extend(stores(n));
    for _ in 0..3 {
        ops.push(pageout(n));
        ops.extend(loads(n));
    }
    let sim = run(zram(&[]), n, ops);
    assert_eq!(sim.k.vm.get(Vm::Pswpout), 3 * n);
    assert_eq!(sim.k.vm.get(Vm::Pswpin), 3 * n);
}

#[test]
fn clean_hole_pages_are_dropped_without_a_write() {
    let n = 16;
    let mut ops = vec![map_shmem(n)];
    ops.extend(loads(n));
    ops.push(pageout(n));
    ops.extend(loads(n));
    let sim = run(zram(&[]), n, ops);
    assert_eq!(sim.k.vm.get(Vm::Pswpout), 0);
    assert_eq!(sim.k.vm.get(Vm::Pswpin), 0);
    assert_eq!(sim.k.vm.get(Vm::PgMajFault), 0);
    // Read faults on holes allocate (no shared zero page for shmem), twice over.
    assert_eq!(sim.k.files[0].nr_cached, n);
    assert_eq!(sim.k.vm.get(Vm::PgStealAnon), n);
}

#[test]
fn without_swap_pageout_keeps_dirty_shmem() {
    let n = 16;
    let mut ops = vec![map_shmem(n)];
    ops.extend(stores(n));
    ops.push(pageout(n));
    let mut cfg = zram(&[]);
    cfg.machine.swap.clear();
    let sim = run(cfg, n, ops);
    assert_eq!(sim.k.files[0].nr_cached, n);
    assert_eq!(sim.k.pageout_kept_no_swap, n);
}

#[test]
fn reclaim_swaps_shmem_out_when_memory_runs_short() {
    // 20 MiB of shmem written on a 16 MiB node with 16 MiB of zram.
    let n = 20 * 256;
    let mut ops = vec![map_shmem(n)];
    ops.extend(stores(n));
    let sim = run(swap_config(16, "zram", 16, &[]), n, ops);
    assert!(sim.k.vm.get(Vm::Pswpout) > 0);
    assert!(!sim.k.files[0].swapped.is_empty());
    assert!(sim.k.vm.get(Vm::PgStealAnon) > 0);
    assert_eq!(sim.k.vm.get(Vm::PgStealFile), 0);
}

#[test]
fn a_read_during_block_writeback_waits_for_the_folio_in_the_swap_cache() {
    let n = 16;
    let mut ops = vec![map_shmem(n)];
    ops.extend(stores(n));
    ops.push(pageout(n));
    let cfg = swap_config(16, "block", 4, &[]);
    let sim = run(cfg.clone(), n, ops.clone());
    // Written asynchronously: the folios wait in the swap cache, no longer in the page cache.
    assert_eq!(sim.k.swap.writeback.len() as u64, n);
    assert_eq!(sim.k.files[0].swapped.len() as u64, n);
    assert_eq!(sim.k.files[0].nr_cached, 0);
    ops.extend(loads(n));
    let sim = run(cfg, n, ops);
    // The fault found them there: no read, no major fault.
    assert_eq!(sim.k.vm.get(Vm::Pswpin), 0);
    assert_eq!(sim.k.vm.get(Vm::PgMajFault), 0);
    assert_eq!(sim.k.swap.devices[0].inuse_pages(), 0);
}

#[test]
fn the_checker_catches_a_shmem_entry_left_on_a_freed_slot() {
    let n = 8;
    let mut ops = vec![map_shmem(n)];
    ops.extend(stores(n));
    ops.push(pageout(n));
    let mut sim = run(zram(&[]), n, ops);
    let (ty, offset) = sim.k.files[0].swapped[&0];
    assert!(sim.k.swap.swap_free(ty, offset));
    sim.k.check_invariants(&sim.hw, "after the bad free");
    assert_eq!(sim.k.checker.count_of(ViolationKind::SwapMap), 1);
}
