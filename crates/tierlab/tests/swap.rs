//! Swap to zram: MADV_PAGEOUT and reclaim put swap entries in the PTEs and compressed copies
//! in zram's pool; do_swap_page reads them back; munmap frees the slots; a full swap area
//! keeps anon resident and an OOM then says what filled swap; and the checker catches a swap
//! PTE left on a freed slot.

mod common;

use common::{anon_rw, one_process, pageout, ptes, swap_config, BASE, PAGE};
use tierlab::check::ViolationKind;
use tierlab::mm::pgtable::pte;
use tierlab::stats::Vm;
use tierlab::workload::{Op, Placement};
use tierlab::{Config, Sim};

/// One 16 MiB DRAM node, 4 CPUs, a zram device of `swap_mib`, strict checks.
fn config(swap_mib: u64) -> Config {
    config_with(16, swap_mib)
}

/// One DRAM node of `node_mib`, 4 CPUs, a zram device of `swap_mib`, strict checks.
fn config_with(node_mib: u64, swap_mib: u64) -> Config {
    swap_config(node_mib, "zram", swap_mib, &[])
}

fn run(cfg: Config, ops: Vec<Op>) -> Sim {
    common::run(cfg, one_process(vec![(Placement::Pinned(0), ops)], vec![]))
}

#[test]
fn pageout_swaps_out_to_zram_and_a_read_swaps_back_in() {
    let n = 64;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(pageout(n));
    let sim = run(config(4), ops.clone());
    assert!(ptes(&sim, n).iter().all(|&p| pte::is_swap(p)));
    assert_eq!(sim.k.vm.get(Vm::Pswpout), n);
    assert_eq!(sim.k.swap.devices[0].inuse_pages(), n);
    // Compression ratio 2: the pool holds half as many frames as pages stored.
    assert_eq!(sim.k.swap.devices[0].pool.len() as u64, n / 2);

    ops.extend((0..n).map(|i| Op::Load(BASE + i * PAGE)));
    let sim = run(config(4), ops);
    assert_eq!(sim.k.vm.get(Vm::Pswpin), n);
    assert_eq!(sim.k.vm.get(Vm::PgMajFault), n);
    for p in ptes(&sim, n) {
        // Exclusive anon comes back writable (do_swap_page), clean after a read.
        assert!(pte::present(p) && p & pte::WRITE != 0 && p & pte::DIRTY == 0);
    }
    assert_eq!(sim.k.swap.devices[0].inuse_pages(), 0, "every slot freed");
    assert!(sim.k.swap.devices[0].pool.is_empty(), "zram's pool empty");
}

#[test]
fn munmap_frees_the_slots_of_swapped_out_pages() {
    let n = 32;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(pageout(n));
    ops.push(Op::Munmap {
        addr: BASE,
        len: n * PAGE,
    });
    let sim = run(config(4), ops);
    assert_eq!(sim.k.swap.nr_swap_pages(), sim.k.swap.total_pages());
    assert!(sim.k.swap.devices[0].pool.is_empty());
}

#[test]
fn a_full_swap_area_keeps_the_rest_resident() {
    // 1 MiB of zram: 255 slots (slot 0 is the header).
    let n = 512;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(pageout(n));
    let sim = run(config(1), ops);
    assert_eq!(sim.k.vm.get(Vm::Pswpout), 255);
    assert_eq!(sim.k.pageout_kept_no_swap, n - 255);
    assert_eq!(sim.k.swap.nr_swap_pages(), 0);
}

#[test]
fn reclaim_swaps_anon_out_when_memory_runs_short() {
    // 20 MiB written on a 16 MiB node with 16 MiB of zram (nothing to demote to).
    let n = 20 * 256;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    let sim = run(config(16), ops);
    assert!(sim.k.vm.get(Vm::Pswpout) > 0);
    assert!(sim.k.vm.get(Vm::PgStealAnon) > 0);
}

#[test]
fn out_of_memory_with_swap_full_says_so() {
    // 40 MiB written on a 16 MiB node with 4 MiB of zram.
    let n = 40 * 256;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    let w = one_process(vec![(Placement::Pinned(0), ops)], vec![]);
    let mut sim = Sim::new(config(4), w).unwrap();
    let err = sim.run(&mut |_| {}).unwrap_err().to_string();
    assert!(
        err.contains("out of memory")
            && err.contains("swap full: 1023 of 1023 slots in use (process 0 1023)"),
        "{err}"
    );
}

#[test]
fn the_checker_catches_a_swap_pte_left_on_a_freed_slot() {
    let n = 8;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(pageout(n));
    let mut sim = run(config(4), ops);
    let (ty, offset) = pte::swap_entry(ptes(&sim, 1)[0]);
    // The slot is freed while the PTE still names it (a lost swap_duplicate, say).
    assert!(sim.k.swap.swap_free(ty, offset));
    sim.k.check_invariants(&sim.hw, "after the bad free");
    assert_eq!(sim.k.checker.count_of(ViolationKind::SwapMap), 1);
}

/// The same machine with a block device of `swap_mib` instead of zram.
fn block_config(swap_mib: u64) -> Config {
    let mut cfg = config(swap_mib);
    cfg.machine.swap[0].kind = "block".into();
    cfg.validate("swap.toml").unwrap();
    cfg
}

#[test]
fn a_block_device_writes_back_asynchronously_and_keeps_the_folios_in_the_swap_cache() {
    let n = 64;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(pageout(n));
    let sim = run(block_config(4), ops);
    assert_eq!(sim.k.vm.get(Vm::Pswpout), n);
    assert!(ptes(&sim, n).iter().all(|&p| pte::is_swap(p)));
    // Under writeback: still in memory, in the swap cache, not freed by MADV_PAGEOUT.
    assert_eq!(sim.k.swap.folio_entry.len() as u64, n);
    assert_eq!(sim.k.swap.writeback.len() as u64, n);
    assert_eq!(sim.k.nodes[0].nr_anon, n);
}

#[test]
fn a_clean_swap_cache_folio_is_dropped_without_a_second_write() {
    // Page out and read back three times: the data never changes, so it is written once.
    let n = 64;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    for _ in 0..3 {
        ops.push(pageout(n));
        ops.push(Op::Compute(1_000_000));
        ops.extend((0..n).map(|i| Op::Load(BASE + i * PAGE)));
    }
    let sim = run(block_config(4), ops);
    assert_eq!(
        sim.k.vm.get(Vm::Pswpout),
        n,
        "only the first pageout writes"
    );
    // The first read finds the folios still in the swap cache (writeback kept them); the
    // later pageouts drop the clean folios, so the later reads come from the device.
    assert_eq!(sim.k.vm.get(Vm::Pswpin), 2 * n);
}

#[test]
fn swap_in_from_a_block_device_reads_ahead_along_a_sequential_read() {
    // 1 MiB swapped out, then 15 MiB written: reclaim drops the clean swap-cache folios of
    // the first region; reading it again comes from the device, with readahead.
    let n = 256;
    let big = 15 * 256;
    let other = BASE + (n + 256) * PAGE;
    let mut ops = vec![
        anon_rw(BASE, n),
        Op::Mmap {
            addr: other,
            len: big * PAGE,
            prot: tierlab::workload::prot::READ | tierlab::workload::prot::WRITE,
            backing: tierlab::workload::Backing::Anon,
        },
    ];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(pageout(n));
    ops.push(Op::Compute(1_000_000));
    ops.extend((0..big).map(|i| Op::Store(other + i * PAGE)));
    let reads_from = sim_reads(block_config(64), ops, n);
    assert!(reads_from.0 > 0, "pages read from the device");
    assert!(reads_from.1 > 0, "swap_ra");
    assert!(reads_from.2 > 0, "swap_ra_hit");
    assert!(
        reads_from.3 < reads_from.0,
        "fewer major faults than pages read"
    );
}

/// Run `ops` then a sequential read of the first `n` pages at BASE; return the pages read
/// from swap, swap_ra, swap_ra_hit and major faults during that read.
fn sim_reads(cfg: Config, mut ops: Vec<Op>, n: u64) -> (u64, u64, u64, u64) {
    ops.push(Op::Barrier);
    let before = run(cfg.clone(), ops.clone());
    let counts = |sim: &Sim| {
        (
            sim.k.vm.get(Vm::Pswpin),
            sim.k.vm.get(Vm::SwapRa),
            sim.k.vm.get(Vm::SwapRaHit),
            sim.k.vm.get(Vm::PgMajFault),
        )
    };
    let b = counts(&before);
    ops.extend((0..n).map(|i| Op::Load(BASE + i * PAGE)));
    let after = run(cfg, ops);
    let a = counts(&after);
    (a.0 - b.0, a.1 - b.1, a.2 - b.2, a.3 - b.3)
}

#[test]
fn the_readahead_window_follows_the_kernels_heuristic() {
    use tierlab::mm::memory::swapin_nr_pages;
    // No hits: one page, or two when the fault is next to the last one.
    assert_eq!(swapin_nr_pages(100, 200, 0, 8, 0), 1);
    assert_eq!(swapin_nr_pages(100, 101, 0, 8, 0), 2);
    assert_eq!(swapin_nr_pages(100, 99, 0, 8, 0), 2);
    // hits + 2, rounded up to a power of two from 4, capped by page-cluster.
    assert_eq!(swapin_nr_pages(100, 200, 1, 8, 0), 4);
    assert_eq!(swapin_nr_pages(100, 200, 3, 8, 0), 8);
    assert_eq!(swapin_nr_pages(100, 200, 30, 8, 0), 8);
    // Never below half the last window.
    assert_eq!(swapin_nr_pages(100, 200, 0, 8, 8), 4);
}

#[test]
fn reclaim_swaps_anon_out_to_a_block_device() {
    // 96 MiB written on a 64 MiB node with a 128 MiB block device: a third of it ends on the
    // device. (Direct reclaim waiting for writeback is tested on hot_set in
    // workloads/tests/scenarios.rs, where it is needed.)
    let n = 96 * 256;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    let mut cfg = config_with(64, 128);
    cfg.machine.swap[0].kind = "block".into();
    let sim = run(cfg, ops);
    let swapped = ptes(&sim, n).iter().filter(|&&p| pte::is_swap(p)).count();
    assert!(swapped >= 32 * 256, "{swapped} pages swapped out");
}

#[test]
fn a_block_device_serves_its_queue_one_transfer_at_a_time() {
    // 0.1 GB/s: a 4 KiB write transfers in 40.96 µs, far longer than the CPU takes to
    // submit the next, so the writes of one pageout complete a transfer apart, not at once.
    let n = 16;
    let mut ops = vec![anon_rw(BASE, n)];
    ops.extend((0..n).map(|i| Op::Store(BASE + i * PAGE)));
    ops.push(pageout(n));
    let mut cfg = block_config(4);
    cfg.machine.swap[0].bandwidth_gbps = 0.1;
    let sim = run(cfg, ops);
    let mut done: Vec<u64> = sim.k.swap.writeback.values().copied().collect();
    done.sort_unstable();
    assert_eq!(done.len() as u64, n);
    let transfer = sim.hw.ns_to_cycles(4096.0 / 0.1);
    for w in done.windows(2) {
        assert_eq!(w[1] - w[0], transfer);
    }
}
