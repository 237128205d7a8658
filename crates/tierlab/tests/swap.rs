//! Swap to zram: MADV_PAGEOUT and reclaim put swap entries in the PTEs and compressed copies
//! in zram's pool; do_swap_page reads them back; munmap frees the slots; a full swap area
//! keeps anon resident and an OOM then says what filled swap; and the checker catches a swap
//! PTE left on a freed slot.

mod common;

use common::{anon_rw, one_process, BASE, PAGE};
use tierlab::check::ViolationKind;
use tierlab::mm::pgtable::pte;
use tierlab::stats::Vm;
use tierlab::workload::{advice, Op, Placement};
use tierlab::{Config, Sim};

/// One 16 MiB DRAM node, 4 CPUs, a zram device of `swap_mib`, strict checks.
fn config(swap_mib: u64) -> Config {
    let text = format!(
        r#"
[machine]
cpus = 4
[[machine.nodes]]
name = "dram"
capacity_mib = 16
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-3"
[[machine.swap]]
kind = "zram"
size_mib = {swap_mib}
compression_ratio = 2.0
[workload]
type = "test"
[sim]
check = "strict"
timeline_interval_ms = 1
"#
    );
    Config::from_str_with(&text, "swap.toml", None, &[]).unwrap()
}

fn pageout(pages: u64) -> Op {
    Op::Madvise {
        addr: BASE,
        len: pages * PAGE,
        advice: advice::MADV_PAGEOUT,
    }
}

fn run(cfg: Config, ops: Vec<Op>) -> Sim {
    let mut sim = Sim::new(cfg, one_process(vec![(Placement::Pinned(0), ops)], vec![])).unwrap();
    sim.run(&mut |_| {}).unwrap();
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
    sim
}

fn ptes(sim: &Sim, pages: u64) -> Vec<u64> {
    (0..pages)
        .map(|i| sim.k.mms[0].pgtable.get(((BASE / PAGE) + i) as u32))
        .collect()
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
    assert_eq!(sim.k.swap.devices[0].inuse_pages, n);
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
    assert_eq!(sim.k.swap.devices[0].inuse_pages, 0, "every slot freed");
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
