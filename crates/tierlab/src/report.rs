//! The human summary of a run, in the style of `perf stat`, `/proc/vmstat` and
//! `/proc/interrupts`, printed from the typed `RunResult`.

use crate::result::RunResult;
use crate::stats::{Perf, Vm};
use std::fmt::Write;

impl RunResult {
    /// perf-stat / vmstat / interrupts style text.
    pub fn summary_text(&self) -> String {
        let mut s = String::new();
        let w = &self.workload;
        if self.truncated_by_max_seconds {
            let _ = writeln!(
                s,
                "\n NOTE: stopped by sim.max_seconds at {:.3} s simulated: the workload did not \
                 finish, and every figure below covers only that part of it.",
                self.sim_seconds
            );
        }
        let _ = writeln!(
            s,
            "\n Performance counter stats for '{}' on '{}' ({} CPUs, simulated):\n",
            w.name,
            self.machine,
            self.perf_per_cpu.len()
        );
        for p in [
            Perf::DtlbLoadMisses,
            Perf::DtlbStoreMisses,
            Perf::ItlbLoadMisses,
            Perf::ItlbFlush,
            Perf::TlbFlushDtlbThread,
            Perf::TlbFlushStlbAny,
        ] {
            let _ = writeln!(
                s,
                "{:>20}      {}",
                group(self.perf.get(p.name())),
                p.name()
            );
        }
        // arm64 flushes by broadcast TLBI and waits in DSB ISH (tierlab's counts).
        for p in [Perf::Tlbi, Perf::DsbIsh, Perf::DsbIshCycles] {
            let n = self.perf.get(p.name());
            if n > 0 {
                let _ = writeln!(s, "{:>20}      {}", group(n), p.name());
            }
        }
        let _ = writeln!(
            s,
            "\n{:>20.6} seconds simulated ({:.6} s timed region)",
            self.sim_seconds, w.runtime_s
        );
        let _ = writeln!(s, "\n /proc/vmstat (non-zero):");
        for v in Vm::ALL {
            let n = self.vmstat.vm(v);
            if n > 0 {
                let _ = writeln!(s, "   {:<32} {}", v.name(), n);
            }
        }
        let _ = writeln!(s, "\n /proc/interrupts:");
        let mut hdr = String::from("      ");
        let mut tlb = String::from("  TLB:");
        let mut cal = String::from("  CAL:");
        for (i, (t, c)) in self
            .interrupts
            .tlb
            .iter()
            .zip(&self.interrupts.cal)
            .enumerate()
        {
            let _ = write!(hdr, "{:>11}", format!("CPU{i}"));
            let _ = write!(tlb, "{t:>11}");
            let _ = write!(cal, "{c:>11}");
        }
        let _ = writeln!(
            s,
            "{hdr}\n{tlb}   TLB shootdowns\n{cal}   Function call interrupts"
        );
        let _ = writeln!(s, "\n Nodes (pages):");
        for (n, node) in self.nodes.iter().enumerate() {
            let wm = &node.watermarks;
            let _ = writeln!(
                s,
                "   node{n} {:<8} tier {:>2}  free {:>10}  anon {:>10}  file {:>10}  (min {} low {} high {} promo {})",
                node.name, node.tier, node.free, node.anon, node.file, wm.min, wm.low, wm.high, wm.promo
            );
        }
        let _ = writeln!(s, "\n Workload ({}):", w.name);
        for (k, v) in &w.info {
            let _ = writeln!(s, "   {k:<29} {v}");
        }
        let _ = writeln!(s, "   {:<29} {}", "Threads:", w.threads);
        let _ = writeln!(s, "   {:<29} {:.6} seconds", "Runtime:", w.runtime_s);
        let unit = capitalise(&w.work_unit);
        let _ = writeln!(s, "   {:<29} {}", format!("{unit}:"), group(w.work));
        let _ = writeln!(
            s,
            "   {:<29} {}",
            format!("{unit}/s:"),
            group(w.per_second as u64)
        );
        if !self.phases.is_empty() {
            let _ = writeln!(s, "\n Phases (simulated time):");
            for p in &self.phases {
                let _ = writeln!(
                    s,
                    "   {:<28} took {:>12.1} us over {} run(s) ({:.1} us each), {} accesses, {} faults",
                    p.name,
                    p.duration_us,
                    p.instances,
                    p.duration_us_per_instance,
                    group(p.accesses),
                    p.vmstat.vm(Vm::PgFault)
                );
                let moved: Vec<String> = p
                    .vmstat
                    .0
                    .iter()
                    .filter(|(name, _)| name != Vm::PgFault.name())
                    .take(8)
                    .map(|(name, v)| format!("{name} {v}"))
                    .collect();
                if !moved.is_empty() {
                    let _ = writeln!(s, "   {:<28}   {}", "", moved.join(", "));
                }
            }
        }
        if self.pageout_kept_no_swap > 0 {
            let why = if self.swap.is_empty() {
                "no swap device"
            } else {
                "no free swap slot"
            };
            let _ = writeln!(
                s,
                "\n MADV_PAGEOUT left {} anon pages resident: {why}.",
                group(self.pageout_kept_no_swap)
            );
        }
        if !self.swap.is_empty() {
            let _ = writeln!(s, "\n /proc/swaps:");
            for (i, a) in self.swap.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "   {}{i}  size {} kB  used {} kB  priority {}  (zram pool {} kB)",
                    if a.kind == "zram" {
                        "/dev/zram"
                    } else {
                        "/dev/swap"
                    },
                    group(a.size_kib),
                    group(a.used_kib),
                    a.priority,
                    group(a.pool_kib)
                );
            }
        }
        let _ = writeln!(
            s,
            "\n {} simulated accesses in {:.2} s wall ({:.1} M accesses/s); invariant checks: {} run, {} violations",
            group(self.accesses),
            self.wall_seconds,
            self.accesses as f64 / self.wall_seconds.max(1e-9) / 1e6,
            self.check.checks_run,
            self.check.violations
        );
        for v in self.check.details.iter().take(10) {
            let _ = writeln!(s, "   VIOLATION [{:?}] {}: {v}", v.kind(), v.when());
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
