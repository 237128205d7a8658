//! The headline metrics of one run, read from its result JSON (`RunResult::to_json`), so a
//! row can be built from a run's file alone, whoever ran it.

use serde_json::Value;

/// A metric's value: counters stay integers, rates and times are floats.
#[derive(Clone, Debug, PartialEq)]
pub enum Num {
    Int(i64),
    Float(f64),
}

/// Headline metric names, in column order.
pub const HEADLINE: [&str; 13] = [
    "sim_seconds",
    "runtime_s",
    "accesses",
    "work_per_second",
    "sys_seconds",
    "dtlb_load_misses",
    "tlb_shootdowns",
    "numa_hint_faults",
    "pgpromote_success",
    "pgdemote_kswapd",
    "pgmigrate_success",
    "toptier_anon_percent",
    "invariant_violations",
];

/// Wall-clock columns (they differ between two runs of one point).
pub const WALL: [&str; 2] = ["wall_seconds", "wall_accesses_per_second"];

fn int(v: Option<&Value>) -> Num {
    Num::Int(v.and_then(Value::as_i64).unwrap_or(0))
}

fn float(v: Option<&Value>) -> Num {
    Num::Float(v.and_then(Value::as_f64).unwrap_or(0.0))
}

/// The HEADLINE values of a run, in order; missing fields count as zero.
pub fn headline(run: &Value) -> Vec<Num> {
    let vm = |k: &str| int(run.pointer(&format!("/vmstat/{k}")));
    let tlb: i64 = run
        .pointer("/interrupts/TLB")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_i64).sum())
        .unwrap_or(0);
    vec![
        float(run.get("sim_seconds")),
        float(run.get("runtime_s")),
        int(run.get("accesses")),
        Num::Float(work_per_second(run)),
        float(run.pointer("/cpu_time/sys_s")),
        int(run.pointer("/perf/dTLB-load-misses")),
        Num::Int(tlb),
        vm("numa_hint_faults"),
        vm("pgpromote_success"),
        vm("pgdemote_kswapd"),
        vm("pgmigrate_success"),
        Num::Float(toptier_anon_percent(run)),
        int(run.pointer("/check/violations")),
    ]
}

/// The WALL values of a run.
pub fn wall(run: &Value) -> Vec<Num> {
    vec![
        float(run.get("wall_seconds")),
        float(run.get("accesses_per_wall_second")),
    ]
}

/// The workload's rate: its map spells the key after its unit (`lookups_per_second`).
fn work_per_second(run: &Value) -> f64 {
    run.get("workload")
        .and_then(Value::as_object)
        .and_then(|w| w.iter().find(|(k, _)| k.ends_with("_per_second")))
        .and_then(|(_, v)| v.as_f64())
        .unwrap_or(0.0)
}

/// Percent of anon pages on top-tier nodes at the end (as `compare`'s top-tier anon share).
fn toptier_anon_percent(run: &Value) -> f64 {
    let (mut top, mut all) = (0.0, 0.0);
    for node in run
        .get("nodes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let anon = node.get("anon").and_then(Value::as_f64).unwrap_or(0.0);
        all += anon;
        if node.get("toptier").and_then(Value::as_bool) == Some(true) {
            top += anon;
        }
    }
    if all == 0.0 {
        0.0
    } else {
        100.0 * top / all
    }
}
