//! `tierlab compare` (and the runs of `tierlab reproduce`): run variants of a scenario side by
//! side (in parallel when the host has cores) and print before/after tables like the seeds'
//! tables.

use tierlab::report::group;
use tierlab::stats::{Perf, Vm};
use tierlab::{Config, RunResult, Simulation};

/// One side of a comparison.
pub struct Variant {
    pub label: String,
    pub cfg: Config,
    pub origin: String,
}

/// The figures a comparison reports, in the order of the seeds' tables.
pub const METRICS: [&str; 22] = [
    "itlb.itlb_flush",
    "tlb_flush.dtlb_thread",
    "tlb_flush.stlb_any",
    "dTLB-load-misses",
    "dTLB-store-misses",
    "iTLB-load-misses",
    "TLB shootdowns per CPU",
    "runtime (s)",
    "work per second",
    "pgpromote_success",
    "pgdemote_kswapd",
    "numa_hint_faults",
    "pgmigrate_success",
    "migrc_deferred",
    "migrc_flush_ipis",
    "top-tier anon share (%)",
    "top-tier file share (%)",
    "zone lock contention (%)",
    "free_high",
    "alloc_zone",
    "pcp pages (mean)",
    "invariant violations",
];

/// The metric values of a finished run, in METRICS order.
pub fn metrics(r: &RunResult) -> Vec<f64> {
    let p = &r.perf;
    let ncpu = r.interrupts.tlb.len().max(1) as f64;
    let tlb: u64 = r.interrupts.tlb.iter().sum();
    vec![
        p.get(Perf::ItlbFlush.name()) as f64,
        p.get(Perf::TlbFlushDtlbThread.name()) as f64,
        p.get(Perf::TlbFlushStlbAny.name()) as f64,
        p.get(Perf::DtlbLoadMisses.name()) as f64,
        p.get(Perf::DtlbStoreMisses.name()) as f64,
        p.get(Perf::ItlbLoadMisses.name()) as f64,
        tlb as f64 / ncpu,
        r.workload.runtime_s,
        r.workload.per_second,
        r.vmstat.vm(Vm::PgPromoteSuccess) as f64,
        r.vmstat.vm(Vm::PgDemoteKswapd) as f64,
        r.vmstat.vm(Vm::NumaHintFaults) as f64,
        r.vmstat.vm(Vm::PgMigrateSuccess) as f64,
        r.vmstat.vm(Vm::MigrcDeferred) as f64,
        r.vmstat.vm(Vm::MigrcFlushIpis) as f64,
        toptier_share(r, true),
        toptier_share(r, false),
        lock_contention(r),
        r.nodes.iter().map(|n| n.zone_lock.free_high).sum::<u64>() as f64,
        r.nodes.iter().map(|n| n.zone_lock.alloc_zone).sum::<u64>() as f64,
        r.nodes.iter().map(|n| n.pcp_pages_mean).sum(),
        r.check.violations as f64,
    ]
}

/// Cycles spent waiting for a zone lock as a share of the CPUs' busy cycles, as perf's
/// cycles% of the spinlock slow path counts them (seed 002's "lock contend%").
pub fn lock_contention(r: &RunResult) -> f64 {
    let wait: u64 = r.nodes.iter().map(|n| n.zone_lock.wait_cycles).sum();
    100.0 * wait as f64 / r.cpu_time.cycles.max(1) as f64
}

/// A finished variant: its label and its result.
pub type Finished = (String, RunResult);

/// Percent of the anon (or file) pages that live on top-tier nodes at the end of the run.
pub fn toptier_share(r: &RunResult, anon: bool) -> f64 {
    let (mut top, mut all) = (0u64, 0u64);
    for node in &r.nodes {
        let pages = if anon { node.anon } else { node.file };
        all += pages;
        if node.toptier {
            top += pages;
        }
    }
    if all == 0 {
        0.0
    } else {
        100.0 * top as f64 / all as f64
    }
}

/// Run every variant, several at once when the host has the cores; results keep their order.
pub fn run_all(variants: Vec<Variant>, quiet: bool) -> Result<Vec<Finished>, String> {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut out: Vec<Option<Result<Finished, String>>> = Vec::new();
    let mut pending: Vec<(usize, Variant)> = variants.into_iter().enumerate().collect();
    out.resize_with(pending.len(), || None);
    while !pending.is_empty() {
        let take = pending.len().min(cores.max(1));
        let wave: Vec<(usize, Variant)> = pending.drain(..take).collect();
        let results = std::thread::scope(|s| {
            let handles: Vec<_> = wave
                .into_iter()
                .map(|(i, v)| {
                    s.spawn(move || {
                        if !quiet {
                            eprintln!("tierlab: running '{}' ({})", v.label, v.origin);
                        }
                        let r = run_one(v);
                        (i, r)
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a variant thread panicked"))
                .collect::<Vec<_>>()
        });
        for (i, r) in results {
            out[i] = Some(r);
        }
    }
    out.into_iter()
        .map(|r| r.expect("every variant ran"))
        .collect()
}

fn run_one(v: Variant) -> Result<Finished, String> {
    let workload = workloads::build(&v.cfg, &v.origin).map_err(|e| e.to_string())?;
    let mut sim = Simulation::new(v.cfg, workload).map_err(|e| format!("{}: {e}", v.origin))?;
    let result = sim
        .run(&mut |_| {})
        .map_err(|e| format!("{} ({}): simulation stopped: {e}", v.origin, v.label))?;
    Ok((v.label, result))
}

pub fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e18 {
        group(v as u64)
    } else if v.abs() >= 1000.0 {
        group(v.round() as u64)
    } else {
        format!("{v:.3}")
    }
}

/// Percent change from `a` to `b`.
pub fn change(a: f64, b: f64) -> Option<f64> {
    (a != 0.0).then(|| (b - a) / a * 100.0)
}

/// The table as JSON: per metric, each run's value and its change from the first in percent
/// (null where the first is 0).
pub fn table_json(results: &[Finished]) -> serde_json::Value {
    let cols: Vec<Vec<f64>> = results.iter().map(|(_, r)| metrics(r)).collect();
    let rows: Vec<serde_json::Value> = METRICS
        .iter()
        .enumerate()
        .map(|(m, name)| {
            let values: serde_json::Map<String, serde_json::Value> = results
                .iter()
                .zip(&cols)
                .map(|((label, _), col)| (label.clone(), serde_json::json!(col[m])))
                .collect();
            let changes: serde_json::Map<String, serde_json::Value> = results
                .iter()
                .zip(&cols)
                .skip(1)
                .map(|((label, _), col)| {
                    (label.clone(), serde_json::json!(change(cols[0][m], col[m])))
                })
                .collect();
            serde_json::json!({"metric": name, "values": values, "change_percent": changes})
        })
        .collect();
    serde_json::Value::Array(rows)
}

/// The BEFORE/AFTER table (first variant is the baseline).
pub fn table(results: &[Finished]) -> String {
    let mut s = String::new();
    let cols: Vec<Vec<f64>> = results.iter().map(|(_, r)| metrics(r)).collect();
    s.push_str(&format!("{:<26}", "metric"));
    for (label, _) in results {
        s.push_str(&format!("{:>18}", label));
    }
    for (label, _) in results.iter().skip(1) {
        s.push_str(&format!("{:>12}", format!("Δ {label}")));
    }
    s.push('\n');
    for (m, name) in METRICS.iter().enumerate() {
        s.push_str(&format!("{:<26}", name));
        for col in &cols {
            s.push_str(&format!("{:>18}", fmt_value(col[m])));
        }
        for col in cols.iter().skip(1) {
            let d = match change(cols[0][m], col[m]) {
                Some(pct) => format!("{pct:+.1}%"),
                None if col[m] == 0.0 => "=".into(),
                None => "new".into(),
            };
            s.push_str(&format!("{:>12}", d));
        }
        s.push('\n');
    }
    s.push_str(&format!("{:<26}", "wall seconds"));
    for (_, r) in results {
        s.push_str(&format!("{:>18}", format!("{:.1}", r.wall_seconds)));
    }
    s.push('\n');
    s
}
