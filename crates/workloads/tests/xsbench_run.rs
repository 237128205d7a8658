//! XSBench end to end on the simulator: determinism and the expected counter shape.

use serde_json::Value;
use tierlab::{Config, Simulation};

/// A small XSBench run on a 4-CPU, one-node machine (strict invariant checks).
fn scenario(seed: u64) -> Config {
    let text = format!(
        r#"
[scenario]
name = "xsbench-small-test"
seed = {seed}
[machine]
cpus = 4
[[machine.nodes]]
capacity_mib = 512
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-3"
[workload]
type = "xsbench"
size = "small"
threads = 4
particles = 200
[sim]
check = "strict"
timeline_interval_ms = 5
"#
    );
    Config::from_str_with(&text, "test.toml", None, &[]).unwrap()
}

fn run(cfg: Config) -> Value {
    let w = workloads::build(&cfg, "test.toml").unwrap();
    let mut sim = Simulation::new(cfg, w).unwrap();
    let mut v = sim.run(&mut |_| {}).unwrap().to_json();
    // Wall-clock fields are the only ones allowed to differ.
    v["wall_seconds"] = Value::Null;
    v["accesses_per_wall_second"] = Value::Null;
    v
}

#[test]
fn same_config_and_seed_give_identical_results() {
    let a = serde_json::to_string(&run(scenario(7))).unwrap();
    let b = serde_json::to_string(&run(scenario(7))).unwrap();
    assert_eq!(a, b);
    let c = serde_json::to_string(&run(scenario(8))).unwrap();
    assert_ne!(a, c, "a different seed changes the run");
}

#[test]
fn xsbench_counters_have_the_expected_shape() {
    let v = run(scenario(1));
    let lookups = v["workload"]["lookups"].as_u64().unwrap();
    assert_eq!(lookups, 200 * 34);
    assert!(v["workload"]["lookups_per_second"].as_f64().unwrap() > 0.0);
    // Every page of the three arrays (plus heap and text) is faulted exactly once at init.
    let faults = v["vmstat"]["pgfault"].as_u64().unwrap();
    let anon = v["nodes"][0]["anon"].as_u64().unwrap();
    let file = v["nodes"][0]["file"].as_u64().unwrap();
    assert_eq!(faults, anon + file, "faults = pages touched");
    // small unionized ≈ 240.4 MiB ≈ 61.5 k pages
    assert!((61_000..63_000).contains(&anon), "{anon}");
    // Each lookup walks for many pages: ≈ 15.5 nuclides + index row + energy pages.
    let walks = v["perf"]["dTLB-load-misses"].as_u64().unwrap();
    assert!(walks > lookups * 5, "walks {walks} for {lookups} lookups");
    assert_eq!(v["check"]["violations"].as_u64().unwrap(), 0);
    assert!(v["check"]["checks_run"].as_u64().unwrap() > 1);
    for key in [
        "scenario",
        "seed",
        "sim_seconds",
        "runtime_s",
        "wall_seconds",
        "accesses",
        "accesses_per_wall_second",
        "perf",
        "vmstat",
        "interrupts",
        "nodes",
        "workload",
        "timeline",
        "check",
    ] {
        assert!(v.get(key).is_some(), "result JSON lacks {key}");
    }
    assert!(v["timeline"].as_array().unwrap().len() > 2);
}

#[test]
fn workload_errors_name_the_key() {
    let mut cfg = scenario(1);
    cfg.workload
        .insert("size".into(), toml::Value::String("huge".into()));
    let e = workloads::build(&cfg, "s.toml").err().unwrap();
    assert!(e.to_string().contains("workload.size"), "{e}");
    let mut cfg = scenario(1);
    cfg.workload
        .insert("threadz".into(), toml::Value::Integer(3));
    let e = workloads::build(&cfg, "s.toml").err().unwrap();
    assert!(e.to_string().contains("threadz"), "{e}");
    let mut cfg = scenario(1);
    cfg.workload
        .insert("type".into(), toml::Value::String("nope".into()));
    assert!(workloads::build(&cfg, "s.toml")
        .err()
        .unwrap()
        .to_string()
        .contains("workload.type"));
}

#[test]
fn the_pre_run_estimate_counts_the_accesses_the_run_makes() {
    // Small (68 nuclides, 34 of them in fuel) and large (355, 321): the estimate's lookup is
    // the workload's own mean (`accesses_per_lookup`; a search's probes vary by one) and its
    // initialisation every array page, so it lands within 5 % of the count (1.3 and 1.4 %
    // when written), where a per-nuclide constant missed small by 39 %.
    for size in ["small", "large"] {
        let text = format!(
            r#"
[machine]
cpus = 2
[[machine.nodes]]
capacity_mib = 2048
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-1"
[workload]
type = "xsbench"
size = "{size}"
threads = 2
particles = 100
scale = 0.05
"#
        );
        let cfg = Config::from_str_with(&text, "test.toml", None, &[]).unwrap();
        let est = workloads::estimate::estimate(&cfg).accesses;
        let v = run(cfg);
        let counted = v["accesses"].as_f64().unwrap();
        let ratio = est / counted;
        assert!(
            (0.95..1.05).contains(&ratio),
            "{size}: estimate {est:.0} for {counted} accesses ({ratio:.3})"
        );
    }
}
