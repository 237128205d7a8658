//! The compare table: `tierlab compare`'s headline metrics per run, read from each run's JSON,
//! with the change in percent against the first run.

use super::html::escape;
use crate::compare::{change, fmt_value, METRICS};
use serde_json::Value;

/// `compare::metrics`, computed from a run's JSON; same names, same order (METRICS).
pub fn metrics(doc: &Value) -> Vec<f64> {
    let f = |v: &Value| v.as_f64().unwrap_or(0.0);
    let perf = |k: &str| f(&doc["perf"][k]);
    let vm = |k: &str| f(&doc["vmstat"][k]);
    let nodes = doc["nodes"].as_array().cloned().unwrap_or_default();
    let sum = |get: &dyn Fn(&Value) -> f64| nodes.iter().map(get).sum::<f64>();
    let tlb = doc["interrupts"]["TLB"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let per_second = doc["workload"]
        .as_object()
        .and_then(|w| w.iter().find(|(k, _)| k.ends_with("_per_second")))
        .map_or(0.0, |(_, v)| f(v));
    let share = |key: &str| {
        let all = sum(&|n| f(&n[key]));
        let top = sum(&|n| {
            if n["toptier"] == true {
                f(&n[key])
            } else {
                0.0
            }
        });
        if all == 0.0 {
            0.0
        } else {
            100.0 * top / all
        }
    };
    let wait = sum(&|n| f(&n["zone_lock"]["wait_cycles"]));
    vec![
        perf("itlb.itlb_flush"),
        perf("tlb_flush.dtlb_thread"),
        perf("tlb_flush.stlb_any"),
        perf("dTLB-load-misses"),
        perf("dTLB-store-misses"),
        perf("iTLB-load-misses"),
        tlb.iter().map(f).sum::<f64>() / tlb.len().max(1) as f64,
        f(&doc["workload"]["runtime_s"]),
        per_second,
        vm("pgpromote_success"),
        vm("pgdemote_kswapd"),
        vm("numa_hint_faults"),
        vm("pgmigrate_success"),
        vm("migrc_deferred"),
        vm("migrc_flush_ipis"),
        share("anon"),
        share("file"),
        100.0 * wait / f(&doc["cpu_time"]["cycles"]).max(1.0),
        sum(&|n| f(&n["zone_lock"]["free_high"])),
        sum(&|n| f(&n["zone_lock"]["alloc_zone"])),
        sum(&|n| f(&n["pcp_pages_mean"])),
        f(&doc["check"]["violations"]),
    ]
}

/// An HTML table: one row per metric, per run its value and (after the first) the change.
pub fn html(runs: &[(&str, &Value)]) -> String {
    let values: Vec<Vec<f64>> = runs.iter().map(|(_, d)| metrics(d)).collect();
    let mut out = String::from("<table class=\"compare\"><thead><tr><th>metric</th>");
    for (i, (label, _)) in runs.iter().enumerate() {
        out += &format!("<th>{}</th>", escape(label));
        if i > 0 {
            out += "<th>change</th>";
        }
    }
    out += "</tr></thead><tbody>";
    for (m, name) in METRICS.iter().enumerate() {
        out += &format!("<tr><td>{}</td>", escape(name));
        let base = values[0][m];
        for (i, v) in values.iter().enumerate() {
            out += &format!("<td>{}</td>", fmt_value(v[m]));
            if i > 0 {
                out += &match change(base, v[m]) {
                    Some(c) => format!("<td>{c:+.1} %</td>"),
                    None => "<td>—</td>".to_string(),
                };
            }
        }
        out += "</tr>";
    }
    out + "</tbody></table>"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_against_the_first_run() {
        let a =
            serde_json::json!({"interrupts": {"TLB": [10, 30]}, "workload": {"runtime_s": 2.0}});
        let b = serde_json::json!({"interrupts": {"TLB": [5, 15]}, "workload": {"runtime_s": 1.0}});
        let t = html(&[("before", &a), ("after<", &b)]);
        assert!(t.contains("<th>after&lt;</th>"));
        assert!(t.contains("<td>TLB shootdowns per CPU</td><td>20</td><td>10</td><td>-50.0 %</td>"));
        assert_eq!(metrics(&a).len(), METRICS.len());
    }
}
