//! The run's results: the JSON document (design.md "Result JSON") and the human summary in
//! the style of `perf stat`, `/proc/vmstat` and `/proc/interrupts`.

use crate::mm::mmzone::{LRU_NAMES, NR_LRU_LISTS};
use crate::sim::Sim;
use crate::stats::{Perf, PerfCounters, Vm};
use serde_json::{json, Map, Value};
use std::fmt::Write;

/// Workload metrics derived from the threads' marks.
pub struct WorkloadMetrics {
    pub work: u64,
    pub roi_seconds: f64,
    pub per_second: f64,
}

impl Sim {
    pub fn perf_total(&self) -> PerfCounters {
        let mut p = PerfCounters::default();
        for c in &self.hw.cpus {
            p.merge(&c.perf);
        }
        p
    }

    pub fn accesses(&self) -> u64 {
        self.k.sched.threads.iter().map(|t| t.accesses).sum()
    }

    /// XSBench's Runtime: from the first RoiBegin to the last RoiEnd (omp_get_wtime around the
    /// simulation loop); the whole run when the workload marks no region.
    pub fn workload_metrics(&self) -> WorkloadMetrics {
        let work = self.k.sched.threads.iter().map(|t| t.work).sum();
        let begin = self.k.sched.threads.iter().filter_map(|t| t.roi_begin).min();
        let end = self.k.sched.threads.iter().filter_map(|t| t.roi_end).max();
        let roi = match (begin, end) {
            (Some(b), Some(e)) if e > b => e - b,
            _ => self.hw.end_cycles(),
        };
        let roi_seconds = self.hw.cycles_to_s(roi);
        WorkloadMetrics {
            work,
            roi_seconds,
            per_second: if roi_seconds > 0.0 {
                work as f64 / roi_seconds
            } else {
                0.0
            },
        }
    }

    fn vmstat_json(&self) -> Value {
        let mut m = match self.k.vm.to_json() {
            Value::Object(m) => m,
            _ => Map::new(),
        };
        // Node items, summed over nodes (as /proc/vmstat prints them).
        let free: u64 = self.k.nodes.iter().map(|n| n.zone.nr_free).sum();
        m.insert("nr_free_pages".into(), free.into());
        for (i, name) in LRU_NAMES.iter().enumerate().take(NR_LRU_LISTS) {
            let v: u64 = self.k.nodes.iter().map(|n| n.lru_size(i)).sum();
            m.insert((*name).into(), v.into());
        }
        let iso: u64 = self.k.nodes.iter().map(|n| n.nr_isolated).sum();
        m.insert("nr_isolated".into(), iso.into());
        let anon: u64 = self.k.mms.iter().map(|mm| mm.rss_anon).sum();
        m.insert("nr_anon_pages".into(), anon.into());
        let mapped: u64 = self.k.mms.iter().map(|mm| mm.rss_file).sum();
        m.insert("nr_mapped".into(), mapped.into());
        let cached: u64 = self.k.files.iter().map(|f| f.nr_cached).sum();
        m.insert("nr_file_pages".into(), cached.into());
        Value::Object(m)
    }

    fn nodes_json(&self) -> Value {
        let total = self.hw.end_cycles().max(1);
        Value::Array(
            self.k.nodes
                .iter()
                .enumerate()
                .map(|(n, node)| {
                    let z = &node.zone;
                    let pcp: Vec<Value> = z
                        .pcp
                        .iter()
                        .map(|p| json!({"count": p.count, "high": p.high, "batch": p.batch}))
                        .collect();
                    json!({
                        "node": n,
                        "name": self.k.cfg.machine.nodes[n].name,
                        "tier": self.k.tiers.tier_id(n),
                        "cpus": node.cpus,
                        "capacity_pages": z.managed_pages,
                        "free": z.nr_free + z.pcp_pages(),
                        "nr_free_pages": z.nr_free,
                        "pcp_pages": z.pcp_pages(),
                        "anon": node.nr_anon,
                        "file": node.nr_file,
                        "lru": {
                            "inactive_anon": node.lru_size(0), "active_anon": node.lru_size(1),
                            "inactive_file": node.lru_size(2), "active_file": node.lru_size(3),
                        },
                        "watermarks": {"min": z.wmark.min, "low": z.wmark.low, "high": z.wmark.high, "promo": z.wmark.promo},
                        "pageset": {"batch": z.pcp.first().map(|p| p.batch).unwrap_or(0),
                                    "high_min": z.pcp.first().map(|p| p.high_min).unwrap_or(0),
                                    "high_max": z.pcp.first().map(|p| p.high_max).unwrap_or(0),
                                    "per_cpu": pcp},
                        "zone_lock": {
                            "acquisitions": z.lock.acquisitions,
                            "contended": z.lock.contended,
                            "wait_cycles": z.lock.wait_cycles,
                            "hold_cycles": z.lock.hold_cycles,
                            "contention_percent": 100.0 * z.lock.wait_cycles as f64 / (total as f64 * self.hw.cpus.len() as f64),
                        },
                        "kswapd_failures": node.kswapd_failures,
                        "toptier": self.k.tiers.node_is_toptier(n),
                        "demotion_targets": self.k.tiers.preferred[n],
                        "accesses": self.hw.mem[n].accesses,
                        "pgpromote_success": node.numab.pgpromote_success,
                        "pgpromote_candidate": node.numab.pgpromote_candidate,
                        "pgdemote": node.numab.pgdemote,
                        "hot_threshold_ms": if node.numab.nbp_threshold == 0 { self.k.cfg.kernel.numa_balancing_hot_threshold_ms } else { node.numab.nbp_threshold },
                    })
                })
                .collect(),
        )
    }

    fn timeline_json(&self) -> Value {
        Value::Array(
            self.timeline
                .iter()
                .map(|s| {
                    let mut m = Map::new();
                    m.insert("t_ms".into(), s.t_ms.into());
                    m.insert("work".into(), s.work.into());
                    for (v, n) in crate::sim::TIMELINE_VM.iter().zip(&s.vm) {
                        m.insert(v.name().into(), (*n).into());
                    }
                    m.insert("tlb_shootdowns".into(), s.tlb_shootdowns.into());
                    m.insert("dTLB-load-misses".into(), s.dtlb_load_misses.into());
                    let nodes: Vec<Value> = s
                        .nodes
                        .iter()
                        .map(|(f, a, fi, acc)| json!({"free": f, "anon": a, "file": fi, "accesses": acc}))
                        .collect();
                    m.insert("nodes".into(), Value::Array(nodes));
                    if !self.regions.is_empty() {
                        let regions: Map<String, Value> = self
                            .regions
                            .iter()
                            .zip(s.regions.iter())
                            .map(|(r, per_node)| (r.name.clone(), json!(per_node)))
                            .collect();
                        m.insert("regions".into(), Value::Object(regions));
                    }
                    Value::Object(m)
                })
                .collect(),
        )
    }

    /// The full result document. `wall_seconds` is the only field that varies between runs.
    pub fn result_json(&self, wall_seconds: f64) -> Value {
        let wm = self.workload_metrics();
        let accesses = self.accesses();
        let mut workload = Map::new();
        workload.insert("name".into(), self.workload_name.clone().into());
        workload.insert(self.work_unit.clone(), wm.work.into());
        workload.insert(
            format!("{}_per_second", self.work_unit),
            wm.per_second.into(),
        );
        workload.insert("runtime_s".into(), wm.roi_seconds.into());
        workload.insert("threads".into(), self.k.sched.threads.len().into());
        let info: Map<String, Value> = self
            .workload_info
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        workload.insert("info".into(), Value::Object(info));
        let sys: u64 = self.hw.cpus.iter().map(|c| c.sys_cycles).sum();
        let user: u64 = self.hw.cpus.iter().map(|c| c.user_cycles).sum();
        json!({
            "scenario": self.k.cfg.scenario.name,
            "seed": self.k.cfg.scenario.seed,
            "machine": self.k.cfg.machine.name,
            "sim_seconds": self.hw.cycles_to_s(self.hw.end_cycles()),
            "runtime_s": wm.roi_seconds,
            "wall_seconds": wall_seconds,
            "accesses": accesses,
            "accesses_per_wall_second": if wall_seconds > 0.0 { accesses as f64 / wall_seconds } else { 0.0 },
            "cpu_time": {"user_s": self.hw.cycles_to_s(user), "sys_s": self.hw.cycles_to_s(sys)},
            "perf": self.perf_total().to_json(),
            "perf_per_cpu": self.hw.cpus.iter().map(|c| c.perf.to_json()).collect::<Vec<_>>(),
            "vmstat": self.vmstat_json(),
            "interrupts": {
                "TLB": self.hw.cpus.iter().map(|c| c.irq.tlb).collect::<Vec<_>>(),
                "CAL": self.hw.cpus.iter().map(|c| c.irq.cal).collect::<Vec<_>>(),
            },
            "nodes": self.nodes_json(),
            "workload": Value::Object(workload),
            "timeline": self.timeline_json(),
            "phases": self.phases_json(),
            "pageout_kept_no_swap": self.k.pageout_kept_no_swap,
            "check": {
                "level": format!("{:?}", self.k.checker.level).to_lowercase(),
                "ran": self.k.checker.checks_run > 0,
                "checks_run": self.k.checker.checks_run,
                "violations": self.k.checker.count,
                "details": serde_json::to_value(&self.k.checker.violations).unwrap_or(Value::Null),
            },
            "frame_bytes": std::mem::size_of::<crate::mm::page::Page>(),
        })
    }

    /// perf-stat / vmstat / interrupts style text.
    pub fn summary_text(&self, wall_seconds: f64) -> String {
        let mut s = String::new();
        let wm = self.workload_metrics();
        let perf = self.perf_total();
        let _ = writeln!(
            s,
            "\n Performance counter stats for '{}' on '{}' ({} CPUs, simulated):\n",
            self.workload_name,
            self.k.cfg.machine.name,
            self.hw.cpus.len()
        );
        for p in [
            Perf::DtlbLoadMisses,
            Perf::DtlbStoreMisses,
            Perf::ItlbLoadMisses,
            Perf::ItlbFlush,
            Perf::TlbFlushDtlbThread,
            Perf::TlbFlushStlbAny,
        ] {
            let _ = writeln!(s, "{:>20}      {}", group(perf.get(p)), p.name());
        }
        let _ = writeln!(
            s,
            "\n{:>20.6} seconds simulated ({:.6} s timed region)",
            self.hw.cycles_to_s(self.hw.end_cycles()),
            wm.roi_seconds
        );
        let _ = writeln!(s, "\n /proc/vmstat (non-zero):");
        for v in Vm::ALL {
            let n = self.k.vm.get(v);
            if n > 0 {
                let _ = writeln!(s, "   {:<32} {}", v.name(), n);
            }
        }
        let _ = writeln!(s, "\n /proc/interrupts:");
        let mut hdr = String::from("      ");
        let mut tlb = String::from("  TLB:");
        let mut cal = String::from("  CAL:");
        for (i, c) in self.hw.cpus.iter().enumerate() {
            let _ = write!(hdr, "{:>11}", format!("CPU{i}"));
            let _ = write!(tlb, "{:>11}", c.irq.tlb);
            let _ = write!(cal, "{:>11}", c.irq.cal);
        }
        let _ = writeln!(
            s,
            "{hdr}\n{tlb}   TLB shootdowns\n{cal}   Function call interrupts"
        );
        let _ = writeln!(s, "\n Nodes (pages):");
        for (n, node) in self.k.nodes.iter().enumerate() {
            let z = &node.zone;
            let _ = writeln!(
                s,
                "   node{n} {:<8} tier {:>2}  free {:>10}  anon {:>10}  file {:>10}  (min {} low {} high {} promo {})",
                self.k.cfg.machine.nodes[n].name,
                self.k.tiers.tier_id(n),
                z.nr_free + z.pcp_pages(),
                node.nr_anon,
                node.nr_file,
                z.wmark.min,
                z.wmark.low,
                z.wmark.high,
                z.wmark.promo
            );
        }
        let _ = writeln!(s, "\n Workload ({}):", self.workload_name);
        for (k, v) in &self.workload_info {
            let _ = writeln!(s, "   {k:<29} {v}");
        }
        let _ = writeln!(s, "   {:<29} {}", "Threads:", self.k.sched.threads.len());
        let _ = writeln!(s, "   {:<29} {:.6} seconds", "Runtime:", wm.roi_seconds);
        let unit = capitalise(&self.work_unit);
        let _ = writeln!(s, "   {:<29} {}", format!("{unit}:"), group(wm.work));
        let _ = writeln!(
            s,
            "   {:<29} {}",
            format!("{unit}/s:"),
            group(wm.per_second as u64)
        );
        if !self.phase_stats.is_empty() {
            let _ = writeln!(s, "\n Phases (simulated time):");
            for p in &self.phase_stats {
                let us = self.hw.cycles_to_s(p.cycles) * 1e6;
                let per = if p.instances > 0 {
                    us / p.instances as f64
                } else {
                    0.0
                };
                let _ = writeln!(
                    s,
                    "   {:<28} took {:>12.1} us over {} run(s) ({:.1} us each), {} accesses, {} faults",
                    p.name,
                    us,
                    p.instances,
                    per,
                    group(p.accesses),
                    p.vm_delta.get(Vm::PgFault)
                );
                let moved: Vec<String> = Vm::ALL
                    .iter()
                    .filter(|&&v| v != Vm::PgFault && p.vm_delta.get(v) > 0)
                    .take(8)
                    .map(|&v| format!("{} {}", v.name(), p.vm_delta.get(v)))
                    .collect();
                if !moved.is_empty() {
                    let _ = writeln!(s, "   {:<28}   {}", "", moved.join(", "));
                }
            }
        }
        if self.k.pageout_kept_no_swap > 0 {
            let _ = writeln!(
                s,
                "\n MADV_PAGEOUT left {} anon pages resident: no swap device is modelled yet.",
                group(self.k.pageout_kept_no_swap)
            );
        }
        let acc = self.accesses();
        let _ = writeln!(
            s,
            "\n {} simulated accesses in {:.2} s wall ({:.1} M accesses/s); invariant checks: {} run, {} violations",
            group(acc),
            wall_seconds,
            acc as f64 / wall_seconds.max(1e-9) / 1e6,
            self.k.checker.checks_run,
            self.k.checker.count
        );
        for v in self.k.checker.violations.iter().take(10) {
            let _ = writeln!(s, "   VIOLATION [{:?}] {}: {}", v.kind, v.when, v.detail);
        }
        s
    }
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// 1234567 → "1,234,567" (XSBench's fancy_int).
pub fn group(n: u64) -> String {
    let d = n.to_string();
    let mut out = String::new();
    for (i, ch) in d.chars().enumerate() {
        if i > 0 && (d.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}
