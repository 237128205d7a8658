//! The shipped scenarios, shortened, under every implemented architecture with the strict
//! invariant checker on: each must run clean and show the behaviour it exists to show.

use std::path::PathBuf;
use tierlab::{Config, RunResult, Simulation};

/// Run `scenarios/FILE` with `sets` through the public facade; no invariant may break.
fn run_scenario(file: &str, sets: &[String]) -> RunResult {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../scenarios")
        .join(file);
    let cfg = Config::load(&path, sets).unwrap_or_else(|e| panic!("{e}"));
    let origin = path.display().to_string();
    let w = workloads::build(&cfg, &origin).unwrap_or_else(|e| panic!("{e}"));
    let r = Simulation::new(cfg, w)
        .and_then(|mut s| s.run(&mut |_| {}))
        .unwrap_or_else(|e| panic!("{file}: {e}"));
    assert!(
        r.check.ran && r.check.level == "strict",
        "{file}: checks ran"
    );
    assert_eq!(r.check.violations, 0, "{file}: {:?}", r.check.details);
    r
}

/// `scenario_test!(name, "file.toml", ["key=value", ...], |result| { assertions })`: one
/// test that runs the scenario under each architecture of `tierlab::arch::IMPLEMENTED`.
/// A `--set` or a list of them, as `scenario_test!` takes them.
trait SetArg {
    fn add_to(self, sets: &mut Vec<String>);
}

impl SetArg for &str {
    fn add_to(self, sets: &mut Vec<String>) {
        sets.push(self.to_string());
    }
}

impl<const N: usize> SetArg for [&str; N] {
    fn add_to(self, sets: &mut Vec<String>) {
        sets.extend(self.iter().map(|s| s.to_string()));
    }
}

macro_rules! scenario_test {
    ($name:ident, $file:literal, [$($set:expr),* $(,)?], |$r:ident| $check:block) => {
        #[test]
        fn $name() {
            for arch in tierlab::arch::IMPLEMENTED {
                let mut sets = vec![
                    format!("machine.arch=\"{arch}\""),
                    "sim.check=\"strict\"".to_string(),
                ];
                $(SetArg::add_to($set, &mut sets);)*
                let $r = run_scenario($file, &sets);
                $check
            }
        }
    };
}

fn phase<'a>(r: &'a RunResult, name: &str) -> &'a tierlab::result::PhaseResult {
    r.phases.iter().find(|p| p.name == name).expect(name)
}

scenario_test!(
    xsbench_small_does_every_lookup,
    "xsbench-small.toml",
    ["workload.particles=300"],
    |r| {
        assert_eq!(r.workload.work, 300 * 34);
        assert!(r.perf.get("dTLB-load-misses") > 0);
    }
);

// Seed 004's sequence with pre-6.1 migration entries: migrated PTEs come back old, so the
// first read after two moves pays an Accessed-bit assist per page that a steady read does not.
scenario_test!(
    swap_young_read_after_moves_pays_for_old_ptes_before_6_1,
    "swap_young.toml",
    [
        "workload.regions.0.size_mib=64",
        "kernel.migration_entry_ad=false"
    ],
    |r| {
        let steady = phase(&r, "first read").duration_us;
        let after = phase(&r, "read after moves").duration_us;
        assert!(
            after > 3.0 * steady,
            "after moves {after} us vs steady {steady} us"
        );
        assert!(phase(&r, "move to node 1").vmstat.get("pgmigrate_success") >= 64 * 256);
    }
);

// With 6.1's entries the moved pages keep young and dirty: the read and the write after the
// moves cost what a steady pass costs.
scenario_test!(
    swap_young_moves_keep_young_and_dirty_from_6_1,
    "swap_young.toml",
    ["workload.regions.0.size_mib=64"],
    |r| {
        let steady = phase(&r, "first read").duration_us;
        for p in ["read after moves", "write after moves"] {
            let after = phase(&r, p).duration_us;
            assert!(
                (after - steady).abs() < 0.01 * steady,
                "{p} {after} us vs steady {steady} us"
            );
        }
    }
);

/// hot_set.toml shrunk to a 64 MiB DRAM node, with a faster scanner, and readers that run
/// flat out (a rate they cannot keep up with): a reader paced in short bursts between the
/// ticks is never found running by one, and task_tick_numa never queues its scan.
const SMALL_HOT_SET: [&str; 8] = [
    "machine.nodes.0.capacity_mib=64",
    "machine.nodes.1.capacity_mib=256",
    "workload.regions.0.size_mib=96",
    "workload.regions.1.size_mib=32",
    "workload.phases.2.duration_ms=300",
    "workload.phases.2.rate_per_s=50000000",
    "kernel.numa_balancing_scan_delay_ms=100",
    "kernel.numa_balancing_scan_period_min_ms=100",
];

// The hot part starts on CXL and NUMA balancing promotes it.
scenario_test!(
    hot_set_gets_promoted,
    "hot_set.toml",
    [SMALL_HOT_SET,],
    |r| {
        let first = r
            .timeline
            .iter()
            .find(|t| t.vm.get("pgpromote_success") == 0)
            .expect("a sample before promotion");
        let last = r.timeline.last().expect("a timeline");
        let hot =
            |t: &tierlab::result::TimelinePoint| t.regions.as_ref().expect("regions")[1].1.clone();
        assert!(r.vmstat.get("pgpromote_success") > 0);
        assert!(
            hot(last)[0] > hot(first)[0],
            "hot pages on DRAM: {:?} → {:?}",
            hot(first),
            hot(last)
        );
    }
);

// The same hot set with MGLRU (vm.lru_gen_enabled): kswapd ages by walking the page tables,
// demotes the cold region and the hot one still reaches DRAM.
scenario_test!(
    hot_set_with_mglru_demotes_cold_and_promotes_hot,
    "hot_set.toml",
    ["vm.lru_gen_enabled=true", SMALL_HOT_SET,],
    |r| {
        let first = r
            .timeline
            .iter()
            .find(|t| t.vm.get("pgpromote_success") == 0)
            .expect("a sample before promotion");
        let last = r.timeline.last().expect("a timeline");
        let region = |t: &tierlab::result::TimelinePoint, i: usize| {
            t.regions.as_ref().expect("regions")[i].1.clone()
        };
        assert!(r.vmstat.get("pgpromote_success") > 0);
        assert!(r.vmstat.get("pgdemote_kswapd") > 0);
        // No shrink_active_list: MGLRU never deactivates, where the classic path would.
        assert_eq!(r.vmstat.get("pgdeactivate"), 0);
        assert!(
            region(last, 1)[0] > region(first, 1)[0],
            "hot pages on DRAM: {:?} → {:?}",
            region(first, 1),
            region(last, 1)
        );
        assert!(
            region(last, 0)[1] > region(first, 0)[1],
            "cold pages on the slow node: {:?} → {:?}",
            region(first, 0),
            region(last, 0)
        );
    }
);

// With zram, every MADV_PAGEOUT swaps the whole (shmem) buffer out and every pass reads it
// back in, most of it ahead of the faults (cluster readahead).
scenario_test!(
    swap_bench_swaps_the_buffer_out_and_in_through_zram,
    "swap_bench.toml",
    ["workload.loop.0.times=20"],
    |r| {
        assert_eq!(r.pageout_kept_no_swap, 0);
        assert_eq!(r.vmstat.get("pswpout"), 20 * 256);
        assert_eq!(
            r.vmstat.get("pswpin"),
            19 * 256,
            "the first pass finds the pages resident"
        );
        let (majflt, hits) = (r.vmstat.get("pgmajfault"), r.vmstat.get("swap_ra_hit"));
        assert_eq!(
            majflt + hits,
            19 * 256,
            "each page read by a fault or ahead of one"
        );
        assert_eq!(r.vmstat.get("swap_ra"), hits);
        assert!(majflt < 19 * 256 / 4, "{majflt} major faults");
        assert_eq!(r.swap[0].used_kib, 1024, "the buffer ends swapped out");
    }
);

// Without a swap device MADV_PAGEOUT cannot reclaim the dirty shmem pages and says so.
scenario_test!(
    swap_bench_keeps_the_buffer_resident_without_swap,
    "swap_bench.toml",
    ["workload.loop.0.times=20", "machine.swap=[]"],
    |r| {
        assert!(r.pageout_kept_no_swap > 0);
        assert_eq!(r.vmstat.get("pgsteal_anon"), 0);
    }
);

// hot_set on one 64 MiB node with a block swap device: the fill swaps through writeback, and
// direct reclaim waits for the device (reclaim_throttle) instead of running out of memory.
scenario_test!(
    hot_set_swaps_to_a_block_device_and_waits_for_writeback,
    "hot_set.toml",
    [
        "machine.nodes=[{ name = \"dram\", capacity_mib = 64, read_latency_ns = 100, write_latency_ns = 100, cpus = \"0-3\" }]",
        "workload.regions.0.size_mib=80",
        "workload.regions.1.size_mib=16",
        "workload.phases.2.duration_ms=100",
        "vm.demotion_enabled=false",
        "kernel.numa_balancing=0",
        "machine.swap=[{ kind = \"block\", size_mib = 128 }]",
    ],
    |r| {
        assert!(r.vmstat.get("pswpout") > 16 * 256);
        assert!(r.swap[0].used_kib > 16 * 1024);
    }
);

/// Seed 002's AF_UNIX pairs, shrunk to 8 CPUs: patch 3 keeps the readers' per-CPU lists
/// from draining on every high-order free, and the writers get their pages faster.
#[test]
fn pcp_unix_patch3_drains_far_less_often_than_base() {
    let sets = |level: &str| -> Vec<String> {
        vec![
            "machine.cpus=8".into(),
            "machine.nodes.0.cpus=\"0-3\"".into(),
            "machine.nodes.1.cpus=\"4-7\"".into(),
            "machine.nodes.0.capacity_mib=2048".into(),
            "machine.nodes.1.capacity_mib=2048".into(),
            "workload.pairs=4".into(),
            "workload.messages=300".into(),
            "sim.check=\"strict\"".into(),
            format!("vm.pcp_series=\"{level}\""),
        ]
    };
    let free_high = |r: &RunResult| -> u64 { r.nodes.iter().map(|n| n.zone_lock.free_high).sum() };
    let base = run_scenario("pcp_unix.toml", &sets("base"));
    let patch3 = run_scenario("pcp_unix.toml", &sets("patch3"));
    assert!(free_high(&base) > 1000, "{}", free_high(&base));
    assert!(
        free_high(&patch3) * 5 < free_high(&base),
        "free_high {} at patch3, {} at base",
        free_high(&patch3),
        free_high(&base)
    );
    assert!(patch3.workload.per_second > base.workload.per_second);
    assert_eq!(
        base.workload.work,
        4 * 300 * 65536,
        "every byte sent was received"
    );
}

/// Seed 002's kbuild, shrunk to 8 CPUs and small compiles, under the strict checker: every
/// compile forks, execs, faults in and exits; with the merged series the pages a compile
/// frees at exit stay on its CPU's list (high tuned up) for the next compile there, so far
/// fewer pages come from the zone than with 6.6's fixed high.
#[test]
fn pcp_kbuild_autotuning_serves_compiles_from_the_cpu_lists() {
    let sets = |level: &str| -> Vec<String> {
        vec![
            "machine.cpus=8".into(),
            "machine.nodes.0.cpus=\"0-3\"".into(),
            "machine.nodes.1.cpus=\"4-7\"".into(),
            "machine.nodes.0.capacity_mib=1024".into(),
            "machine.nodes.1.capacity_mib=1024".into(),
            "workload.instances=2".into(),
            "workload.jobs=3".into(),
            "workload.compiles=36".into(),
            "workload.compile_ms=40".into(),
            "sim.check=\"strict\"".into(),
            "sim.quantum_ns=5000".into(),
            "sim.timeline_interval_ms=10".into(),
            format!("vm.pcp_series=\"{level}\""),
        ]
    };
    let alloc_zone =
        |r: &RunResult| -> u64 { r.nodes.iter().map(|n| n.zone_lock.alloc_zone).sum() };
    let base = run_scenario("pcp_kbuild.toml", &sets("base"));
    let merged = run_scenario("pcp_kbuild.toml", &sets("merged"));
    assert_eq!(base.workload.work, 72, "every compile ran to its end");
    assert_eq!(merged.workload.work, 72);
    assert!(
        alloc_zone(&merged) * 10 < alloc_zone(&base) * 7,
        "alloc_zone {} merged, {} base",
        alloc_zone(&merged),
        alloc_zone(&base)
    );
}
