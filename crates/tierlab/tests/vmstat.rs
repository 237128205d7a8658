//! The vmstat worker's pageset duties (mm/vmstat.rs): decay_pcp_high once a second on each
//! CPU, and the drain of a remote node's list after three idle updates.

mod common;
use common::*;
use tierlab::workload::{Op, Placement};
use tierlab::Sim;

/// 256 MiB of DRAM (pageset batch 15, high_min 142, high_max 2048 for 4 CPUs) and one thread
/// on CPU 0 that sleeps `seconds`.
fn sleeper(seconds: f64, sets: &[&str]) -> Sim {
    let mut all = vec![
        "machine.nodes.0.capacity_mib=256",
        "kernel.numa_balancing=0",
    ];
    all.extend_from_slice(sets);
    let sleep = Op::Sleep((seconds * 1e9) as u64);
    run(
        tiered_config(&all),
        one_process(vec![(Placement::Pinned(0), vec![sleep])], vec![]),
    )
}

/// CPU 1's list holds 600 free pages under a high of 1000 when the run starts.
fn idle_list(seconds: f64) -> Sim {
    sleeper(
        seconds,
        &[
            "machine.nodes.0.boot_pcp_count=[0, 600]",
            "machine.nodes.0.boot_pcp_high=[0, 1000]",
        ],
    )
}

#[test]
fn an_idle_cpus_list_gives_pages_back_once_its_decaying_high_falls_below_them() {
    let start = idle_list(0.5);
    let pcp = &start.k.nodes[0].zone.pcp[1];
    assert_eq!((pcp.count, pcp.high, pcp.batch), (600, 1000, 15));
    assert_eq!((pcp.high_min, pcp.high_max), (142, 2048));
    let free_at_start = start.k.nodes[0].zone.nr_free;

    // Updates at 0.988, 1.988 and 2.988 s (whole seconds, 3 jiffies earlier per CPU): each
    // lowers high by an eighth, 1000 → 875 → 766 → 671, still above the 600 pages.
    let three = idle_list(3.5);
    let pcp = &three.k.nodes[0].zone.pcp[1];
    assert_eq!((pcp.count, pcp.high), (600, 671));
    assert_eq!(three.k.nodes[0].zone.nr_free, free_at_start);

    // Two more: 671 → 588 → 515; the 85 pages above it go back to the buddy lists.
    let five = idle_list(5.5);
    let pcp = &five.k.nodes[0].zone.pcp[1];
    assert_eq!((pcp.count, pcp.high), (515, 515));
    assert_eq!(five.k.nodes[0].zone.nr_free, free_at_start + 85);
}

#[test]
fn a_remote_list_is_drained_a_batch_at_a_time_three_updates_after_its_last_use() {
    let mut sim = sleeper(0.0, &[]);
    let (k, hw) = (&mut sim.k, &mut sim.hw);
    // CPU 1 used node 1 (remote: CPU-less) and node 0 (local); both lists hold 20 pages at
    // high_min, so decay_pcp_high has nothing to do.
    for n in 0..2 {
        let zone = &mut k.nodes[n].zone;
        zone.fill_pcp(&mut k.frames, 1, 20, 0);
        zone.pcp[1].stat_diff = true;
    }
    let batch = k.nodes[1].zone.pcp[1].batch;
    assert!(batch < 20);
    let counts =
        |k: &tierlab::kernel::Kernel| (k.nodes[0].zone.pcp[1].count, k.nodes[1].zone.pcp[1].count);
    for update in 1..=2 {
        k.vmstat_update(hw, 1, 0);
        assert_eq!(counts(k), (20, 20), "update {update}");
    }
    k.vmstat_update(hw, 1, 0);
    assert_eq!(counts(k), (20, 20 - batch));
    // Expired: the list is left alone until it is used again.
    k.vmstat_update(hw, 1, 0);
    assert_eq!(counts(k), (20, 20 - batch));
}
