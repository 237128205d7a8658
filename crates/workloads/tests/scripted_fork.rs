//! A scripted workload that forks, through `workloads::build` and the simulator under the
//! strict invariant checker: the child's writes copy the parent's pages, its exit frees the
//! copies, and the parent's region stays whole.

use tierlab::{Config, RunResult, Simulation};

const SCENARIO: &str = r#"
[scenario]
name = "fork"
seed = 7

[machine]
name = "small-tiered"
cpu_ghz = 2.2
cpus = 3
mlp = 4.0
nodes = [
  { name = "dram0", capacity_mib = 64, read_latency_ns = 106, write_latency_ns = 106, read_bandwidth_gbps = 270, write_bandwidth_gbps = 272, cpus = "0-2" },
  { name = "cxl1", capacity_mib = 128, read_latency_ns = 192, write_latency_ns = 192, read_bandwidth_gbps = 83.2, write_bandwidth_gbps = 84.3, cpus = "" },
]

[kernel]
numa_balancing = 0

[sim]
timeline_interval_ms = 1

[workload]
type = "scripted"
threads = 2
placement = "pinned"

[[workload.regions]]
name = "buf"
pages = 1024

[[workload.phases]]
name = "fill"
kind = "touch"
region = "buf"
write = true

# The child's: it writes the first half of its copy of buf.
[[workload.phases]]
name = "child writes"
kind = "touch"
region = "buf"
pages = 512
write = true

[[workload.phases]]
name = "fork"
kind = "fork"
child = ["child writes"]

# Both workers read while the child writes.
[[workload.phases]]
name = "reads"
kind = "random"
region = "buf"
count = 2000

[[workload.phases]]
name = "reap"
kind = "wait"

[[workload.phases]]
name = "read again"
kind = "touch"
region = "buf"
"#;

/// Run `scenario` under `arch` with the strict checker; no invariant may break.
fn run(scenario: &str, arch: &str) -> RunResult {
    let sets = [
        format!("machine.arch=\"{arch}\""),
        "sim.check=\"strict\"".into(),
    ];
    let cfg =
        Config::from_str_with(scenario, "fork.toml", None, &sets).unwrap_or_else(|e| panic!("{e}"));
    let w = workloads::build(&cfg, "fork.toml").unwrap_or_else(|e| panic!("{e}"));
    let r = Simulation::new(cfg, w)
        .and_then(|mut s| s.run(&mut |_| {}))
        .unwrap_or_else(|e| panic!("{arch}: {e}"));
    assert!(
        r.check.ran && r.check.level == "strict",
        "{arch}: checks ran"
    );
    assert_eq!(r.check.violations, 0, "{arch}: {:?}", r.check.details);
    r
}

fn phase<'a>(r: &'a RunResult, name: &str) -> &'a tierlab::result::PhaseResult {
    r.phases.iter().find(|p| p.name == name).expect(name)
}

#[test]
fn a_forked_child_writes_copies_and_exits_and_the_parents_region_stays_resident() {
    for arch in tierlab::arch::IMPLEMENTED {
        let r = run(SCENARIO, arch);
        let child = phase(&r, "child writes");
        // A phase counts every thread's accesses while it runs: the readers' too.
        assert_eq!(child.instances, 1, "{arch}");
        assert!(child.accesses >= 512, "{arch}: {}", child.accesses);
        // Each write of a page the parent shares faults and copies it (wp_page_copy).
        assert!(
            child.vmstat.get("pgfault") >= 512,
            "{arch}: {:?}",
            child.vmstat
        );
        assert!(
            r.vmstat.get("pgalloc_normal") >= 1024 + 512,
            "{arch}: the fill and the child's copies: {:?}",
            r.vmstat
        );
        assert!(phase(&r, "reads").accesses >= 2 * 2000, "{arch}");
        // The child's exit freed its copies: what is left is the parent's.
        assert!(r.vmstat.get("pgfree") >= 512, "{arch}: {:?}", r.vmstat);
        let anon = r.vmstat.get("nr_anon_pages");
        assert!(
            (1024..1024 + 512).contains(&anon),
            "{arch}: {anon} anon pages"
        );
        assert_eq!(phase(&r, "read again").accesses, 1024, "{arch}");
        // The workers, the main thread and the child ran to their end.
        assert_eq!(r.workload.work, 1024 + 512 + 2 * 2000 + 1024, "{arch}");
        let end = r.timeline.last().expect("a final sample");
        let regions = end.regions.as_ref().expect("the region is sampled");
        let (name, per_node) = &regions[0];
        assert_eq!(name, "buf");
        assert_eq!(
            per_node.iter().sum::<u64>(),
            1024,
            "{arch}: the parent's region is whole at the end: {per_node:?}"
        );
    }
}

#[test]
fn without_a_wait_phase_the_worker_waits_at_its_end_and_the_region_stays() {
    let no_wait = &SCENARIO[..SCENARIO
        .find("[[workload.phases]]\nname = \"reap\"")
        .unwrap()];
    for arch in tierlab::arch::IMPLEMENTED {
        let r = run(no_wait, arch);
        assert_eq!(r.workload.work, 1024 + 512 + 2 * 2000, "{arch}");
        let end = r.timeline.last().expect("a final sample");
        let per_node = &end.regions.as_ref().expect("the region is sampled")[0].1;
        assert_eq!(per_node.iter().sum::<u64>(), 1024, "{arch}: {per_node:?}");
    }
}
