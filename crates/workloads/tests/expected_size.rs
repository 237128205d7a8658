//! The progress bar's denominator: each workload's own estimate of its size (`Expected`)
//! against what it does once simulated.

use std::path::Path;
use tierlab::workload::Expected;
use tierlab::{Config, Simulation};

/// The workload's stated accesses and the accesses its run made.
fn stated_and_made(cfg: Config) -> (u64, u64) {
    let w = workloads::build(&cfg, "test").unwrap();
    let Some(Expected::Accesses(stated)) = w.expected else {
        panic!("the workload states its size in accesses: {:?}", w.expected);
    };
    let mut sim = Simulation::new(cfg, w).unwrap();
    (stated, sim.run(&mut |_| {}).unwrap().accesses)
}

fn scenario(name: &str, sets: &[&str]) -> Config {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(name);
    let sets: Vec<String> = sets.iter().map(|s| s.to_string()).collect();
    Config::load(&path, &sets).unwrap()
}

/// XSBench: the initialisation's stores exactly, the lookups at their mean (the binary
/// search's probes vary by one, the material by pick_mat's distribution).
#[test]
fn xsbench_states_its_accesses_within_a_few_percent() {
    let (stated, made) = stated_and_made(scenario(
        "xsbench-small.toml",
        &["workload.particles=200", "sim.check=\"off\""],
    ));
    let off = (stated as f64 - made as f64).abs() / made as f64;
    assert!(
        off < 0.02,
        "stated {stated}, made {made} ({:.1} % off)",
        off * 100.0
    );
}

/// A scripted workload counts its phases' accesses exactly; only the process image's
/// start-up touches (stacks, libraries) come on top.
#[test]
fn scripted_states_its_phase_accesses() {
    let (stated, made) = stated_and_made(scenario(
        "validate/hot_small.toml",
        &["workload.phases.2.duration_ms=200", "sim.check=\"off\""],
    ));
    assert!(stated <= made, "stated {stated}, made {made}");
    let off = (made - stated) as f64 / made as f64;
    assert!(
        off < 0.01,
        "stated {stated}, made {made} ({:.2} % off)",
        off * 100.0
    );
}
