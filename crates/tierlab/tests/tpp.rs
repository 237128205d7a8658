//! TPP mechanisms (seed 003): the decoupled demotion watermark and active-LRU promotion,
//! each a switch on its own, and the anon/file promotion and demotion counters.

mod common;

use common::{
    anon_rw, fill_then_random_reads, one_process as workload, run, tiered_config, BASE, PAGE,
};
use tierlab::mm::page::pg;
use tierlab::mm::pgtable::pte;
use tierlab::stats::Vm;
use tierlab::workload::{Op, Placement};
use tierlab::{Config, Sim};

fn tiered(sets: &[&str]) -> Config {
    tiered_config(sets)
}

/// Thread 0 touches `pages` pages, then idles long enough for kswapd to settle.
fn fill(pages: u64) -> tierlab::workload::Workload {
    let mut ops = vec![anon_rw(BASE, pages)];
    ops.extend((0..pages).map(|i| Op::Store(BASE + i * PAGE)));
    ops.extend((0..20).map(|_| Op::Compute(1_000_000)));
    workload(vec![(Placement::Pinned(0), ops)], vec![])
}

#[test]
fn kswapd_keeps_the_top_tier_above_the_demotion_watermark() {
    let sim = run(
        tiered(&[
            "kernel.tiering_policy=tpp",
            "vm.demote_scale_factor=1000",
            "kernel.numa_balancing=0",
        ]),
        fill(6000),
    );
    let n = &sim.k.nodes[0];
    // WMARK_DEMOTE = high + 10 % of the node.
    assert_eq!(
        n.demote_wmark,
        n.zone.wmark.high + n.zone.managed_pages / 10
    );
    assert!(
        n.zone.nr_free > n.demote_wmark,
        "free {} vs demote wmark {}",
        n.zone.nr_free,
        n.demote_wmark
    );
    assert!(sim.k.vm.get(Vm::PgDemoteKswapd) > 0);
    // Upstream (no decoupling): allocation falls back to the slow node at the low watermark
    // without waking kswapd, so the top tier stays full.
    let plain = run(tiered(&["kernel.numa_balancing=0"]), fill(6000));
    let z = &plain.k.nodes[0].zone;
    assert_eq!(plain.k.nodes[0].demote_wmark, 0);
    assert!(z.nr_free < n.demote_wmark, "free {} without TPP", z.nr_free);
    assert_eq!(plain.k.vm.get(Vm::PgDemoteKswapd), 0);
}

fn slow_page_sim(sets: &[&str]) -> (Sim, u32) {
    let mut all = vec!["kernel.numa_balancing_scan_delay_ms=100000"];
    all.extend_from_slice(sets);
    let sim = run(tiered(&all), fill(6000));
    let pfn = pte::pfn(sim.k.mms[0].pgtable.get(((BASE >> 12) + 5999) as u32));
    assert_eq!(sim.hw.node_of_pfn(pfn), 1);
    (sim, pfn)
}

#[test]
fn active_lru_promotion_needs_a_second_fault_and_an_active_folio() {
    let (mut sim, pfn) = slow_page_sim(&["kernel.tiering_policy=tpp", "vm.demote_scale_factor=0"]);
    let f = |s: &Sim| s.k.frames.get(pfn).flags;
    assert_eq!(f(&sim) & (pg::ACTIVE | pg::REFERENCED), 0);
    // First fault: marked referenced, not promoted.
    assert!(!sim.k.should_numa_migrate_memory(&mut sim.hw, 0, pfn, 1, 0));
    assert!(f(&sim) & pg::REFERENCED != 0);
    // Second fault: activated, still not promoted.
    assert!(!sim.k.should_numa_migrate_memory(&mut sim.hw, 0, pfn, 1, 0));
    assert!(f(&sim) & pg::ACTIVE != 0);
    assert_eq!(sim.k.vm.get(Vm::PgActivate), 1);
    // Third fault: an active folio is promoted, whatever its scan time.
    sim.k.frames.get_mut(pfn).numa_access_ms = 0;
    assert!(sim.k.should_numa_migrate_memory(&mut sim.hw, 0, pfn, 1, 0));
    sim.k.check_invariants(&sim.hw, "after activation");
    assert_eq!(sim.k.checker.count, 0, "{:?}", sim.k.checker.violations);
    // Without the switch the hot threshold decides instead (a stale scan time is rejected).
    let (mut plain, pfn) = slow_page_sim(&[]);
    plain.hw.cpus[0].clock = (10.0 * 2.2e9) as u64;
    plain.k.frames.get_mut(pfn).numa_access_ms = 0;
    assert!(!plain
        .k
        .should_numa_migrate_memory(&mut plain.hw, 0, pfn, 1, 0));
}

#[test]
fn promotion_and_demotion_counters_split_by_anon_and_file() {
    // The first 800 pages are touched first, then pushed out by 5200 colder ones (kswapd
    // demotes them as the oldest), then read at random by four threads under TPP.
    let sim = run(
        tiered(&["kernel.tiering_policy=tpp"]),
        fill_then_random_reads(6000, (0, 800), 150_000, 99, 2000),
    );
    let v = |c| sim.k.vm.get(c);
    assert!(v(Vm::PgPromoteSuccess) > 0);
    assert_eq!(
        v(Vm::PgPromoteAnon),
        v(Vm::PgPromoteSuccess),
        "all anon here"
    );
    assert_eq!(v(Vm::PgPromoteFile), 0);
    assert_eq!(
        v(Vm::PgDemoteAnon) + v(Vm::PgDemoteFile),
        v(Vm::PgDemoteKswapd) + v(Vm::PgDemoteDirect)
    );
    assert!(v(Vm::PgDemoteAnon) > 0);
}

/// Pages re-accessed only sporadically: every page of a large slow-tier range is read now and
/// then, uniformly. The hot threshold promotes any page touched soon after its scan; TPP's
/// active-LRU gate wants repeated faults, so it promotes far fewer (seed 003: "up to 11x less
/// promotion traffic").
fn sporadic(sets: &[&str]) -> Sim {
    let mut all = vec!["kernel.tiering_policy=tpp"];
    all.extend_from_slice(sets);
    run(
        tiered(&all),
        fill_then_random_reads(6000, (0, 6000), 60_000, 7, 4000),
    )
}

#[test]
fn tpp_promotes_far_less_than_the_hot_threshold_on_sporadic_accesses() {
    // Both with TPP's demotion watermark; only the promotion gate differs. Compared per hint
    // fault: the scan passes each run makes before it ends (two or three here, each started
    // by a tick that finds a reader running) are not what the gate decides.
    let hot_threshold = sporadic(&["kernel.numa_balancing_active_lru_promotion=off"]);
    let tpp = sporadic(&[]);
    let per_fault = |sim: &Sim| {
        let promoted = sim.k.vm.get(Vm::PgPromoteSuccess);
        let faults = sim.k.vm.get(Vm::NumaHintFaults);
        (promoted, promoted as f64 / faults.max(1) as f64)
    };
    let (a, a_rate) = per_fault(&hot_threshold);
    let (b, b_rate) = per_fault(&tpp);
    eprintln!("sporadic accesses: hot threshold promoted {a} ({a_rate:.2} per hint fault), TPP {b} ({b_rate:.2})");
    assert!(a > 100, "hot-threshold promotions {a}");
    assert!(
        b_rate * 3.0 < a_rate,
        "TPP {b_rate:.2} vs hot threshold {a_rate:.2} per hint fault"
    );
}
