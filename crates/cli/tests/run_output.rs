//! What `tierlab run` and `tierlab compare` show and write: interval lines, CSV tables,
//! outputs opened before the run, Ctrl-C keeping what was simulated, and compare's modes.

use std::path::PathBuf;
use std::process::{Command, Stdio};

mod common;
use common::{repo, tierlab};

/// A scratch directory of this test's own.
fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("tierlab-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// hot_small cut to its first 300 ms of simulated time: a fill on two nodes, quick.
const SHORT: [&str; 3] = [
    "scenarios/validate/hot_small.toml",
    "--set",
    "sim.max_seconds=0.3",
];

fn json(path: &PathBuf) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn interval_prints_one_perf_block_per_timeline_sample() {
    let dir = scratch("interval");
    let out = dir.join("r.json");
    let mut args = vec!["run"];
    args.extend(SHORT);
    args.extend([
        "--quiet",
        "--interval",
        "50",
        "--interval-style",
        "perf",
        "--json",
        out.to_str().unwrap(),
    ]);
    let o = tierlab(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let doc = json(&out);
    let samples = doc["timeline"].as_array().unwrap();
    assert_eq!(
        samples[0]["t_ms"], 50.0,
        "--interval sets the timeline's interval"
    );
    let dtlb: Vec<&str> = stdout
        .lines()
        .filter(|l| l.ends_with("dTLB-load-misses"))
        .collect();
    assert_eq!(dtlb.len(), samples.len(), "{stdout}");
    // The counts are per interval: they add up to the run's total.
    let sum: u64 = dtlb
        .iter()
        .map(|l| {
            l.split_whitespace()
                .nth(1)
                .unwrap()
                .replace(',', "")
                .parse::<u64>()
                .unwrap()
        })
        .sum();
    assert_eq!(sum, doc["timeline"][samples.len() - 1]["dTLB-load-misses"]);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn vmstat_interval_rows_show_each_node_and_the_fill_rate() {
    let mut args = vec!["run"];
    args.extend(SHORT);
    args.extend(["--interval", "100", "--quiet"]);
    let o = tierlab(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let header = stdout.lines().find(|l| l.contains("sim_s")).expect(&stdout);
    for col in [
        "free:dram0",
        "free:cxl1",
        "anon:dram0",
        "pgfault",
        "promote",
    ] {
        assert!(header.contains(col), "{header}");
    }
    let rows: Vec<&str> = stdout
        .lines()
        .filter(|l| l.trim_start().starts_with("0."))
        .collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    // The fill faults pages in: the first 100 ms has a non-zero fault rate.
    let pgfault_col = header
        .split_whitespace()
        .position(|c| c == "pgfault")
        .unwrap();
    let first: f64 = rows[0]
        .split_whitespace()
        .nth(pgfault_col)
        .unwrap()
        .parse()
        .unwrap();
    assert!(first > 0.0, "{}", rows[0]);
}

#[test]
fn csv_writes_the_timeline_phases_cpus_and_nodes() {
    let dir = scratch("csv");
    let out = dir.join("r.json");
    let csv = dir.join("tables");
    let mut args = vec!["run"];
    args.extend(SHORT);
    args.extend([
        "--quiet",
        "--json",
        out.to_str().unwrap(),
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let o = tierlab(&args);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json(&out);
    let read = |f: &str| std::fs::read_to_string(csv.join(f)).unwrap();
    let timeline = read("timeline.csv");
    let header = timeline.lines().next().unwrap();
    assert!(header.starts_with("t_ms,work,pgfault"), "{header}");
    assert!(header.contains("regions.hot[1]"), "{header}");
    assert_eq!(
        timeline.lines().count() - 1,
        doc["timeline"].as_array().unwrap().len()
    );
    let cpus = read("cpus.csv");
    assert_eq!(cpus.lines().count() - 1, 3, "one row per CPU:\n{cpus}");
    assert!(cpus.lines().next().unwrap().contains("interrupts.TLB"));
    assert_eq!(read("nodes.csv").lines().count() - 1, 2);
    assert!(read("phases.csv").contains("fill cold"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_bad_output_path_fails_before_the_run() {
    let o = tierlab(&["run", "--json", "/nonexistent-dir/x/r.json"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--json /nonexistent-dir/x/r.json"), "{err}");
    // The default scenario takes seconds; failing at once prints no summary.
    assert!(
        o.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&o.stdout)
    );
}

#[test]
fn max_seconds_is_reported_as_cutting_the_run_short() {
    let dir = scratch("cut");
    let out = dir.join("r.json");
    let mut args = vec!["run"];
    args.extend(SHORT);
    args.extend(["--json", out.to_str().unwrap()]);
    let o = tierlab(&args);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("cut short: sim.max_seconds"));
    assert_eq!(json(&out)["ended"], "max_seconds");
    let _ = std::fs::remove_dir_all(dir);
}

#[cfg(unix)]
#[test]
fn ctrl_c_stops_the_run_and_writes_what_was_simulated() {
    let dir = scratch("sigint");
    let out = dir.join("r.json");
    // The default scenario runs for many seconds; SIGINT comes long before its end.
    let child = Command::new(env!("CARGO_BIN_EXE_tierlab"))
        .args(["run", "--quiet", "--json", out.to_str().unwrap()])
        .current_dir(repo())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2500));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    assert_eq!(
        o.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(String::from_utf8_lossy(&o.stderr).contains("interrupted at"));
    let doc = json(&out);
    assert_eq!(doc["ended"], "interrupted");
    assert!(!doc["timeline"].as_array().unwrap().is_empty());
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn compare_with_two_files_applies_set_to_both_and_warns_when_they_match() {
    let dir = scratch("cmp2");
    let out = dir.join("c.json");
    let o = tierlab(&[
        "compare",
        "scenarios/xsbench-small.toml",
        "scenarios/xsbench-small.toml",
        "--set",
        "workload.particles=50",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("have the same configuration"));
    let doc = json(&out);
    // 50 particles × 34 lookups on both sides: --set reached the second file too.
    assert_eq!(doc["before"]["workload"]["lookups"], 1700);
    assert_eq!(doc["after"]["workload"]["lookups"], 1700);
    assert!(doc["table"].as_array().unwrap().len() > 10);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn compare_variants_write_json_and_refuse_a_stray_set() {
    let dir = scratch("cmpv");
    let out = dir.join("v.json");
    let o = tierlab(&[
        "compare",
        "scenarios/xsbench-small.toml",
        "--both",
        "workload.particles=50",
        "--variant",
        "a:vm.swappiness=60",
        "--variant",
        "b:vm.swappiness=10",
        "--json",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = json(&out);
    let labels: Vec<&str> = doc["variants"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["a", "b"]);
    let o = tierlab(&[
        "compare",
        "scenarios/xsbench-small.toml",
        "--variant",
        "a:vm.swappiness=60",
        "--set",
        "vm.swappiness=10",
    ]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--both"));
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_interval_below_the_timeline_floor_is_blamed_on_interval() {
    let o = tierlab(&["run", "scenarios/xsbench-small.toml", "--interval", "0.001"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("--interval 0.001") && err.contains("sim.timeline_interval_ms"),
        "{err}"
    );
}
