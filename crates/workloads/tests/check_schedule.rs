//! `sim.check = "periodic"`: the TLB check (the safety invariant) at every timeline sample,
//! the bookkeeping checks on an access budget, and everything at the end; `strict` checks
//! everything at every sample.

use std::path::Path;
use tierlab::{Config, Simulation};

fn check_counts(level: &str) -> (u64, u64, usize) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/xsbench-small.toml");
    let cfg = Config::load(&path, &[format!("sim.check=\"{level}\"")]).unwrap();
    let w = workloads::build(&cfg, "test").unwrap();
    let r = Simulation::new(cfg, w).unwrap().run(&mut |_| {}).unwrap();
    assert_eq!(r.check.violations, 0);
    (r.check.checks_run, r.check.full_checks, r.timeline.len())
}

#[test]
fn periodic_checks_the_tlbs_at_every_sample_and_everything_on_a_budget() {
    let (checks, full, samples) = check_counts("periodic");
    // One check per sample; the last sample (end of run) is a full one.
    assert_eq!(checks as usize, samples);
    // 6.8 M accesses over 262,144 frames and 61,557 PTEs: two full checks on the way (one
    // per 8 accesses per item), and the one at the end.
    assert_eq!(full, 3, "{checks} checks");
}

#[test]
fn strict_checks_everything_at_every_sample() {
    let (checks, full, samples) = check_counts("strict");
    assert_eq!(checks as usize, samples);
    assert_eq!(full, checks);
}
