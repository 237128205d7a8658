//! `tierlab validate SCENARIO`: the scripted workload as a static C program on Debian's 6.12
//! kernel under QEMU (a machine mirroring the scenario's), the same scenario in tierlab on a
//! machine that stands for the emulated one, and the two side by side.
//!
//! The stand-in machine: under TCG with `-icount shift=0` the guest executes one instruction
//! per virtual nanosecond and QEMU emulates no memory latency, so tierlab runs the scenario
//! with `machine.cpu_ghz = 1`, `mlp = 1` and every node's latency at 1 ns, keeping each node's
//! abstract distance (`adistance`, from the scenario's real latencies and bandwidths, as the
//! guest's HMAT gives its kernel) so both kernels build the same tiers. What is compared is
//! the memory manager's dynamics against the workload's own clock (paced phases run at the
//! same rate in both), not performance.

use super::guest::{self, Accel, GuestMachine, GuestRun};
use super::report;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tierlab::mm::memory_tiers::node_adistance;
use tierlab::{Config, Simulation};
use workloads::scripted::c_program::{generate, CProgramOptions};

/// The counters compared, by their /proc/vmstat names.
pub const COUNTERS: &[&str] = &[
    "pgpromote_candidate",
    "pgpromote_success",
    "pgdemote_kswapd",
    "numa_hint_faults",
    "numa_pte_updates",
    "pgmigrate_success",
    "pgmigrate_fail",
    "pgscan_kswapd",
    "pgfault",
];

/// What `tierlab validate` was asked to do.
pub struct ValidateArgs {
    pub scenario: PathBuf,
    pub sets: Vec<String>,
    pub accel: Accel,
    pub kernel: Option<PathBuf>,
    pub json: Option<PathBuf>,
    pub timeout_s: Option<u64>,
}

/// The scenario's knobs as the guest's sysctl and sysfs writes. Knobs with no upstream
/// equivalent (MIGRC, TPP) cannot be validated on a stock kernel.
pub fn guest_sysctls(cfg: &Config) -> Result<Vec<(String, String)>, String> {
    let (k, vm) = (&cfg.kernel, &cfg.vm);
    if k.migrc {
        return Err("kernel.migrc is not upstream: a stock kernel cannot validate it".into());
    }
    if k.tiering_policy != "linux" {
        return Err(format!(
            "kernel.tiering_policy = \"{}\" is not upstream: a stock kernel runs \"linux\"",
            k.tiering_policy
        ));
    }
    let dbg = "/sys/kernel/debug/sched/numa_balancing";
    let mut s: Vec<(String, String)> = vec![
        // The LRU tierlab models (classic, or MGLRU with every cap: "y") and no THP; the
        // guest must match.
        (
            "/sys/kernel/mm/lru_gen/enabled".into(),
            if vm.lru_gen_enabled { "y" } else { "n" }.into(),
        ),
        (
            "/sys/kernel/mm/lru_gen/min_ttl_ms".into(),
            vm.lru_gen_min_ttl_ms.to_string(),
        ),
        (
            "/sys/kernel/mm/transparent_hugepage/enabled".into(),
            "never".into(),
        ),
        (
            "/proc/sys/vm/watermark_scale_factor".into(),
            vm.watermark_scale_factor.to_string(),
        ),
        ("/proc/sys/vm/swappiness".into(), vm.swappiness.to_string()),
        (
            "/proc/sys/vm/percpu_pagelist_high_fraction".into(),
            vm.percpu_pagelist_high_fraction.to_string(),
        ),
        (
            "/sys/kernel/mm/numa/demotion_enabled".into(),
            vm.demotion_enabled.to_string(),
        ),
        (
            "/proc/sys/kernel/numa_balancing_promote_rate_limit_MBps".into(),
            k.numa_balancing_promote_rate_limit_mbps.to_string(),
        ),
        (
            format!("{dbg}/scan_delay_ms"),
            k.numa_balancing_scan_delay_ms.to_string(),
        ),
        (
            format!("{dbg}/scan_period_min_ms"),
            k.numa_balancing_scan_period_min_ms.to_string(),
        ),
        (
            format!("{dbg}/scan_period_max_ms"),
            k.numa_balancing_scan_period_max_ms.to_string(),
        ),
        (
            format!("{dbg}/scan_size_mb"),
            k.numa_balancing_scan_size_mb.to_string(),
        ),
        (
            format!("{dbg}/hot_threshold_ms"),
            k.numa_balancing_hot_threshold_ms.to_string(),
        ),
        // Last, so that the scanner starts with every other knob in place.
        (
            "/proc/sys/kernel/numa_balancing".into(),
            k.numa_balancing.to_string(),
        ),
    ];
    if vm.min_free_kbytes > 0 {
        s.insert(
            2,
            (
                "/proc/sys/vm/min_free_kbytes".into(),
                vm.min_free_kbytes.to_string(),
            ),
        );
    }
    Ok(s)
}

/// `--set` assignments that turn the scenario's machine into the stand-in for the emulated
/// one. With the guest's nodes (as seen at /init), each node's capacity is the guest's
/// MemTotal (what the kernel manages) and the memory its kernel already holds there
/// (MemTotal − MemFree: image, memmap, slab, the initramfs) is reserved.
pub fn stand_in_sets(cfg: &Config, guest_nodes: &[guest::GuestNodeInfo]) -> Vec<String> {
    let mut sets = vec![
        "machine.cpu_ghz=1.0".to_string(),
        "machine.mlp=1.0".to_string(),
    ];
    for n in 0..cfg.machine.nodes.len() {
        sets.push(format!(
            "machine.nodes.{n}.adistance={}",
            node_adistance(cfg, n)
        ));
        sets.push(format!("machine.nodes.{n}.read_latency_ns=1.0"));
        sets.push(format!("machine.nodes.{n}.write_latency_ns=1.0"));
        if let Some(g) = guest_nodes.iter().find(|g| g.id as usize == n) {
            let total = g.memtotal_kib / 1024;
            let held = g.memtotal_kib.saturating_sub(g.memfree_kib) / 1024;
            sets.push(format!("machine.nodes.{n}.capacity_mib={total}"));
            sets.push(format!("machine.nodes.{n}.reserved_mib={held}"));
        }
    }
    sets
}

/// The scenario simulated on the stand-in machine.
fn simulate(
    args: &ValidateArgs,
    cfg: &Config,
    guest_nodes: &[guest::GuestNodeInfo],
    extra: &[String],
) -> Result<tierlab::RunResult, String> {
    let origin = args.scenario.display().to_string();
    let mut sets = args.sets.clone();
    sets.extend(stand_in_sets(cfg, guest_nodes));
    sets.extend(extra.iter().cloned());
    let sim_cfg = Config::load(&args.scenario, &sets).map_err(|e| e.to_string())?;
    let w = workloads::build(&sim_cfg, &origin).map_err(|e| e.to_string())?;
    let mut sim = Simulation::new(sim_cfg, w).map_err(|e| format!("{origin}: {e}"))?;
    sim.run(&mut |_| {})
        .map_err(|e| format!("{origin}: simulation stopped: {e}"))
}

pub fn run(args: &ValidateArgs) -> Result<(), String> {
    let origin = args.scenario.display().to_string();
    let cfg = Config::load(&args.scenario, &args.sets).map_err(|e| e.to_string())?;
    if cfg.workload.get("type").and_then(|v| v.as_str()) != Some("scripted") {
        return Err(format!(
            "{origin}: validate runs scripted workloads only (workload.type = \"scripted\")"
        ));
    }
    let sysctls = guest_sysctls(&cfg).map_err(|e| format!("{origin}: {e}"))?;

    // A first simulation sizes the guest's timeout.
    let estimate = simulate(args, &cfg, &[], &[])?;

    // The real side: the program, compiled statically, on the guest.
    let opts = CProgramOptions {
        sample_interval_ms: cfg.sim.timeline_interval_ms,
        counters: COUNTERS.iter().map(|s| s.to_string()).collect(),
        nodes: cfg.machine.nodes.len() as u32,
        cpus: cfg.machine.cpus,
    };
    let source =
        generate(&cfg.workload, &origin, cfg.scenario.seed, &opts).map_err(|e| e.to_string())?;
    let dir = tempdir()?;
    let program = compile(&source, &dir)?;
    let machine = GuestMachine::from_config(&cfg, args.accel)?;
    let mut run = GuestRun::new(&program);
    run.kernel = args.kernel.clone();
    // TCG runs 3.5–7.5 s of wall time per guest second; boot takes a few guest seconds more.
    let guess = 120.0 + 10.0 * (estimate.sim_seconds + 5.0);
    run.timeout = Duration::from_secs(args.timeout_s.unwrap_or(guess as u64));

    // Calibration: the same program with NUMA balancing and demotion off measures what each
    // random phase costs the guest per access in run time (its loop, the pacing syscalls):
    // the stand-in charges it as the phase's gap_cycles (1 ns = 1 cycle at 1 GHz).
    run.sysctls = calibration_sysctls(&sysctls);
    eprintln!("tierlab: calibrating the program's cost per access on the guest");
    let calib = guest::run(&machine, &run, &mut |line| eprintln!("  guest: {line}"))?;
    let gaps = phase_gaps(&cfg, &calib.stdout_lines);
    for g in &gaps {
        eprintln!("tierlab: stand-in charges {g}");
    }
    run.sysctls = sysctls;
    eprintln!(
        "tierlab: booting Linux under QEMU ({:?}); about {:.0} s of guest time, a few wall seconds each",
        args.accel,
        estimate.sim_seconds + 3.0
    );
    let out = guest::run(&machine, &run, &mut |line| eprintln!("  guest: {line}"))?;
    let expected: Vec<Option<u32>> = machine.expected_tiers().into_iter().map(Some).collect();
    if out.tiers() != expected {
        eprintln!(
            "tierlab: warning: the guest built memory tiers {:?}, expected {:?}",
            out.tiers(),
            expected
        );
    }
    let failed = out.failed_sysctls();
    if !failed.is_empty() {
        eprintln!("tierlab: warning: the guest refused {}", failed.join(", "));
    }
    let real = report::parse_samples(&out.stdout_lines)?;
    // The simulated side, on the machine as the guest booted it.
    eprintln!("tierlab: simulating {origin} on the stand-in machine");
    let sim_result = simulate(args, &cfg, &out.nodes, &gaps)?;
    let cmp = report::compare(&real, &sim_result, COUNTERS);
    println!(
        "{origin}: real Linux {} under QEMU beside tierlab ({} samples; boot {:.0} s, run {:.0} s wall)\n",
        out.kernel_release,
        real.len(),
        out.init_wall_seconds,
        out.wall_seconds - out.init_wall_seconds
    );
    print!("{}", cmp.text());
    if let Some(path) = &args.json {
        let doc = serde_json::json!({
            "scenario": origin,
            "kernel": out.kernel_release,
            "real": real,
            "real_phases": out
                .stdout_lines
                .iter()
                .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
                .filter(|v| v.get("phase").is_some())
                .collect::<Vec<_>>(),
            "simulated": sim_result.to_json(),
            "comparison": cmp,
        });
        let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The scenario's knobs with NUMA balancing and demotion off (the calibration run).
fn calibration_sysctls(sysctls: &[(String, String)]) -> Vec<(String, String)> {
    sysctls
        .iter()
        .map(|(k, v)| {
            let v = match k.as_str() {
                "/proc/sys/kernel/numa_balancing" => "0".to_string(),
                "/sys/kernel/mm/numa/demotion_enabled" => "false".to_string(),
                _ => v.clone(),
            };
            (k.clone(), v)
        })
        .collect()
}

/// `--set workload.phases.N.gap_cycles=G` for each named `random` phase: G is the guest's run
/// time per access in that phase (`cpu_ms` / `accesses` over its instances), in ns, which the
/// 1 GHz stand-in charges as cycles.
pub fn phase_gaps(cfg: &Config, lines: &[String]) -> Vec<String> {
    let mut per_name: Vec<(String, f64, u64)> = Vec::new();
    for line in lines {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        let (Some(name), Some(cpu), Some(n)) = (
            v.get("phase").and_then(|x| x.as_str()),
            v.get("cpu_ms").and_then(|x| x.as_f64()),
            v.get("accesses").and_then(|x| x.as_u64()),
        ) else {
            continue;
        };
        match per_name.iter_mut().find(|p| p.0 == name) {
            Some(p) => {
                p.1 += cpu;
                p.2 += n;
            }
            None => per_name.push((name.to_string(), cpu, n)),
        }
    }
    let phases = cfg
        .workload
        .get("phases")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    let mut sets = Vec::new();
    for (i, p) in phases.iter().enumerate() {
        let kind = p.get("kind").and_then(|k| k.as_str());
        let name = p.get("name").and_then(|k| k.as_str());
        let (Some("random"), Some(name)) = (kind, name) else {
            continue;
        };
        if let Some((_, cpu_ms, n)) = per_name.iter().find(|x| x.0 == name) {
            if *n > 0 {
                let ns = (cpu_ms * 1e6 / *n as f64).round() as u64;
                sets.push(format!("workload.phases.{i}.gap_cycles={ns}"));
            }
        }
    }
    sets
}

fn tempdir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("tierlab-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Compile the generated program statically with the host's C compiler.
pub fn compile(source: &str, dir: &Path) -> Result<PathBuf, String> {
    let c = dir.join("workload.c");
    let bin = dir.join("workload");
    std::fs::write(&c, source).map_err(|e| format!("{}: {e}", c.display()))?;
    let out = std::process::Command::new("cc")
        .args(["-O2", "-static", "-pthread", "-o"])
        .arg(&bin)
        .arg(&c)
        .output()
        .map_err(|e| format!("cannot run cc (install gcc and libc6-dev): {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cc failed on the generated program:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(bin)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tierlab::mm::memory_tiers::MemoryTiers;

    fn scenario(sets: &[String]) -> Config {
        let path =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/validate/hot_small.toml");
        Config::load(&path, sets).unwrap()
    }

    #[test]
    fn the_stand_in_machine_keeps_the_memory_tiers() {
        let real = scenario(&[]);
        let guest = [guest::GuestNodeInfo {
            id: 0,
            memtotal_kib: 218_352,
            memfree_kib: 190_000,
            cpus: "0-2".into(),
            distance: vec![10, 20],
            tier: Some(4),
        }];
        let stand_in = scenario(&stand_in_sets(&real, &guest));
        let (a, b) = (MemoryTiers::new(&real), MemoryTiers::new(&stand_in));
        for n in 0..real.machine.nodes.len() {
            assert_eq!(a.tier_id(n), b.tier_id(n), "node {n}");
            assert_eq!(a.node_is_toptier(n), b.node_is_toptier(n), "node {n}");
        }
        assert_eq!(stand_in.machine.cpu_ghz, 1.0);
        // Node 0 as the guest saw it: MemTotal managed, MemTotal − MemFree held by the kernel.
        assert_eq!(stand_in.machine.nodes[0].capacity_mib, 213);
        assert_eq!(stand_in.machine.nodes[0].reserved_mib, 27);
        assert_eq!(stand_in.machine.nodes[1].capacity_mib, 512);
        assert!(stand_in
            .machine
            .nodes
            .iter()
            .all(|n| n.read_latency_ns == 1.0));
    }

    #[test]
    fn random_phases_get_the_guests_run_time_per_access_as_gap_cycles() {
        let lines: Vec<String> = [
            r#"{"phase":"fill cold","begin_ms":0,"end_ms":9,"accesses":61440,"cpu_ms":200.0}"#,
            r#"{"phase":"hot reads","begin_ms":9,"end_ms":2009,"accesses":400000,"cpu_ms":100.0}"#,
            r#"{"phase":"hot reads","begin_ms":2009,"end_ms":4009,"accesses":400000,"cpu_ms":140.0}"#,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // hot_small's phases: 0 and 1 touch (not charged), 2 is the random "hot reads".
        assert_eq!(
            phase_gaps(&scenario(&[]), &lines),
            vec!["workload.phases.2.gap_cycles=300".to_string()]
        );
        let off = calibration_sysctls(&guest_sysctls(&scenario(&[])).unwrap());
        let get = |p: &str| off.iter().find(|(k, _)| k == p).map(|(_, v)| v.as_str());
        assert_eq!(get("/proc/sys/kernel/numa_balancing"), Some("0"));
        assert_eq!(get("/sys/kernel/mm/numa/demotion_enabled"), Some("false"));
    }

    #[test]
    fn knobs_become_guest_writes_and_non_upstream_ones_are_refused() {
        let s = guest_sysctls(&scenario(&[])).unwrap();
        let get = |p: &str| s.iter().find(|(k, _)| k == p).map(|(_, v)| v.as_str());
        assert_eq!(get("/proc/sys/kernel/numa_balancing"), Some("2"));
        assert_eq!(get("/sys/kernel/mm/numa/demotion_enabled"), Some("true"));
        assert_eq!(get("/sys/kernel/mm/lru_gen/enabled"), Some("n"));
        assert_eq!(get("/sys/kernel/mm/lru_gen/min_ttl_ms"), Some("0"));
        let mglru = guest_sysctls(&scenario(&[
            "vm.lru_gen_enabled=true".into(),
            "vm.lru_gen_min_ttl_ms=1000".into(),
        ]))
        .unwrap();
        let get = |p: &str| mglru.iter().find(|(k, _)| k == p).map(|(_, v)| v.as_str());
        assert_eq!(get("/sys/kernel/mm/lru_gen/enabled"), Some("y"));
        assert_eq!(get("/sys/kernel/mm/lru_gen/min_ttl_ms"), Some("1000"));
        // numa_balancing is written last, once the scanner's knobs are in place.
        assert_eq!(
            s.last().map(|x| x.0.as_str()),
            Some("/proc/sys/kernel/numa_balancing")
        );
        assert!(guest_sysctls(&scenario(&["kernel.migrc=on".into()])).is_err());
        assert!(guest_sysctls(&scenario(&["kernel.tiering_policy=\"tpp\"".into()])).is_err());
    }
}
