//! The frame table grows with what is used (mm/sparse.rs, deferred_grow_zone in mm_init.rs):
//! a machine far larger than the host runs, and the lazily grown free lists give the same
//! simulated results as free lists filled at boot.
mod common;
use common::*;
use tierlab::{RunResult, Sim};

/// The same run with every zone's deferred blocks pulled onto the free lists before the
/// first access (the eager boot), or left deferred.
fn run_both(sets: &[&str], w: impl Fn() -> tierlab::workload::Workload) -> (Sim, Sim) {
    let lazy = run(tiered_config(sets), w());
    let mut eager = Sim::new(tiered_config(sets), w()).expect("sim");
    for n in 0..eager.k.nodes.len() {
        let k = &mut eager.k;
        while k.nodes[n].zone.deferred_grow_zone(&mut k.frames) {}
        assert_eq!(k.nodes[n].zone.nr_deferred_pages(), 0);
    }
    eager.run(&mut |_| {}).expect("run");
    assert_eq!(eager.k.checker.count, 0, "{:?}", eager.k.checker.violations);
    (lazy, eager)
}

/// The result as JSON without the host's wall-clock fields.
fn simulated(sim: &Sim) -> serde_json::Value {
    let mut v = serde_json::to_value(RunResult::collect(sim, 1.0)).unwrap();
    let o = v.as_object_mut().unwrap();
    o.retain(|k, _| !k.starts_with("wall") && !k.contains("per_wall"));
    v
}

/// Fill 60,000 pages (DRAM, then CXL), free a middle part, move CXL pages to DRAM, map and
/// fill again, while three threads read at random: frames of every order are freed, merged
/// and handed out again, on both nodes.
fn churn() -> tierlab::workload::Workload {
    use tierlab::workload::{Op, Placement};
    let other = BASE + (1 << 32);
    let mut t0 = vec![anon_rw(BASE, 60_000)];
    t0.extend((0..60_000).map(|i| Op::Store(BASE + i * PAGE)));
    t0.push(Op::Munmap {
        addr: BASE + 10_000 * PAGE,
        len: 20_000 * PAGE,
    });
    t0.push(Op::MovePages {
        addr: BASE + 52_000 * PAGE,
        len: 4_000 * PAGE,
        node: 0,
    });
    t0.push(anon_rw(other, 25_000));
    t0.extend((0..25_000).map(|i| Op::Store(other + i * PAGE)));
    t0.push(Op::Barrier);
    let mut threads = vec![(Placement::Pinned(0), t0)];
    for t in 1..4u64 {
        let mut ops = vec![Op::Barrier];
        let mut x = t;
        for _ in 0..3_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ops.push(Op::Load(BASE + (30_000 + (x >> 33) % 30_000) * PAGE));
            ops.push(Op::Compute(200));
        }
        threads.push((Placement::Pinned(t as u32), ops));
    }
    one_process(threads, vec![])
}

#[test]
fn lazy_free_lists_give_the_eager_results() {
    // 200 MiB of DRAM: node 1 starts inside a section, and each node spans several.
    let sets = [
        "machine.nodes.0.capacity_mib=200",
        "machine.nodes.1.capacity_mib=600",
    ];
    let (lazy, eager) = run_both(&sets, churn);
    assert_eq!(simulated(&lazy), simulated(&eager));
    for n in 0..2 {
        let (a, b) = (&lazy.k.nodes[n].zone, &eager.k.nodes[n].zone);
        assert_eq!(a.nr_free, b.nr_free, "node {n}");
        assert_eq!((a.pgalloc, a.pgfree), (b.pgalloc, b.pgfree), "node {n}");
        assert!(a.pgfree > [10_000, 1_000][n], "node {n} freed {}", a.pgfree);
    }
    // the lazy run initialised fewer sections than the machine has, the eager one all
    assert!(lazy.k.frames.present_sections() < eager.k.frames.present_sections());
    assert_eq!(
        eager.k.frames.present_sections(),
        eager.k.frames.nr_sections()
    );
}

#[test]
fn a_four_tib_machine_runs_a_small_workload_in_little_host_memory() {
    // 1 TiB of DRAM and 3 TiB of CXL: 2^30 frames, 32 GiB of struct pages if all were made.
    let sets = [
        "machine.nodes.0.capacity_mib=1048576",
        "machine.nodes.1.capacity_mib=3145728",
    ];
    let sim = run(
        tiered_config(&sets),
        fill_then_random_reads(20_000, (0, 20_000), 2_000, 3, 100),
    );
    assert_eq!(sim.k.frames.len(), 1 << 30);
    assert_eq!(sim.k.frames.nr_sections(), 32_768);
    // boot's set-aside (the lower zones below 4 GiB) and 80 MiB of workload: a few dozen
    // sections of the 32768
    let present = sim.k.frames.present_sections();
    assert!(present < 64, "{present} sections initialised");
    assert!(sim.k.frames.host_bytes() < 128 << 20);
    // The frames the run used are all on initialised sections; the rest is still free.
    let free: u64 = sim.k.nodes.iter().map(|n| n.zone.nr_free).sum();
    assert!(free > (1 << 30) - (2 << 20), "{free}");
    assert!(sim.k.checker.full_checks > 0);
}
