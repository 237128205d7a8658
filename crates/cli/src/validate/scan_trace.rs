//! `validate --scan-trace`: the NUMA scanner of the real kernel beside tierlab's, pass by
//! pass. The guest traces `task_numa_work` and `change_prot_numa` with kprobes (entry and
//! return: when, which thread, which range, how many PTEs it made PROT_NONE) and the
//! `sched_skip_vma_numa` tracepoint (which VMA was passed over, and why); tierlab records the
//! same events (`sim.trace_numa_scan`, mm/numa_scan_trace.rs). Both are summarised per pass:
//! the PTEs each region had updated and the regions skipped with the kernel's reason.

use super::ftrace::{Ftrace, Trace};
use std::collections::HashMap;
use std::fmt::Write as _;
use tierlab::mm::numa_scan_trace::{NumaScanEvent, NumaScanWhat, NumabSkip};

/// The probes: x86-64 passes change_prot_numa(vma, addr, end) in %di, %si, %dx and returns
/// the number of PTEs updated (mm/mempolicy.c); task_numa_work is a task_work callback
/// (kernel/sched/fair.c), so it stays a symbol kprobes can hook.
pub fn ftrace() -> Ftrace {
    Ftrace {
        kprobes: vec![
            "p:tierlab/tnw task_numa_work".into(),
            "r:tierlab/tnw_ret task_numa_work".into(),
            "p:tierlab/cpn change_prot_numa start=%si:x64 end=%dx:x64".into(),
            "r:tierlab/cpn_ret change_prot_numa updated=$retval:s64".into(),
            "p:tierlab/tnf task_numa_fault".into(),
        ],
        events: vec![
            "tierlab/tnw".into(),
            "tierlab/tnw_ret".into(),
            "tierlab/cpn".into(),
            "tierlab/cpn_ret".into(),
            "tierlab/tnf".into(),
            "sched/sched_skip_vma_numa".into(),
            "vmscan/mm_vmscan_wakeup_kswapd".into(),
        ],
        buffer_kib: 4096,
        ..Ftrace::default()
    }
}

/// The guest's scanner events in tierlab's terms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GuestScan {
    pub events: Vec<NumaScanEvent>,
    /// Events of other processes (the harness's sampler is scanned too), with the pid as
    /// `tid`: not compared, but reported, since their hint faults can wake kswapd.
    pub others: Vec<NumaScanEvent>,
    /// Hint faults (task_numa_fault calls) and kswapd wake-ups (mm_vmscan_wakeup_kswapd)
    /// by the program's threads and by other tasks, with the first time of each (ms).
    pub hint_faults: Tally,
    pub kswapd_wakeups: Tally,
    /// Events the ring buffer dropped.
    pub lost: u64,
}

/// Events counted by whose they were.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Tally {
    pub program: u64,
    pub others: u64,
    pub first_program_ms: Option<f64>,
    pub first_other_ms: Option<f64>,
}

impl Tally {
    fn add(&mut self, ours: bool, t_ms: f64) {
        let (n, first) = if ours {
            (&mut self.program, &mut self.first_program_ms)
        } else {
            (&mut self.others, &mut self.first_other_ms)
        };
        *n += 1;
        first.get_or_insert(t_ms);
    }

    fn text(&self) -> String {
        let at = |t: Option<f64>| t.map_or(String::new(), |t| format!(" (first at {t:.1} ms)"));
        format!(
            "{} by the program{}, {} by other tasks{}",
            self.program,
            at(self.first_program_ms),
            self.others,
            at(self.first_other_ms)
        )
    }
}

/// Turn the guest's trace into scanner events: times from the program's t0 marker, threads
/// from the markers each worker wrote (main is tierlab's thread 0, worker t its thread t+1).
pub fn from_guest(trace: &Trace) -> Result<GuestScan, String> {
    let mut tids: HashMap<u32, usize> = HashMap::new();
    let mut t0 = None;
    for l in trace
        .lines
        .iter()
        .filter(|l| l.event == "tracing_mark_write")
    {
        if l.body == "tierlab main t0" {
            t0 = Some(l.t_s);
            tids.insert(l.pid, 0);
        } else if let Some(w) = l.body.strip_prefix("tierlab worker=") {
            if let Ok(w) = w.trim().parse::<usize>() {
                tids.insert(l.pid, w + 1);
            }
        }
    }
    let t0 = t0.ok_or("the guest's trace has no t0 marker from the program")?;
    let mut out = GuestScan {
        lost: trace.lost,
        ..GuestScan::default()
    };
    // A change_prot_numa entry waiting for its return, per thread.
    let mut open: HashMap<(bool, usize), (f64, u64, u64)> = HashMap::new();
    for l in &trace.lines {
        if l.event == "tracing_mark_write" {
            continue;
        }
        let (ours, tid) = match tids.get(&l.pid) {
            Some(&tid) => (true, tid),
            None => (false, l.pid as usize),
        };
        let list = if ours {
            &mut out.events
        } else {
            &mut out.others
        };
        let t_ms = (l.t_s - t0) * 1e3;
        let what = match l.event.as_str() {
            "tnw" => NumaScanWhat::Work,
            "tnw_ret" => NumaScanWhat::WorkDone,
            "cpn" => {
                let (Some(s), Some(e)) = (l.hex_or_dec("start"), l.hex_or_dec("end")) else {
                    return Err(format!("unreadable change_prot_numa probe: {}", l.body));
                };
                open.insert((ours, tid), (t_ms, s, e));
                continue;
            }
            "cpn_ret" => {
                let Some((t, start, end)) = open.remove(&(ours, tid)) else {
                    continue;
                };
                let updated = l.hex_or_dec("updated").unwrap_or(0);
                list.push(NumaScanEvent {
                    t_ms: t,
                    tid,
                    what: NumaScanWhat::Chunk {
                        start,
                        end,
                        updated,
                    },
                });
                continue;
            }
            "tnf" => {
                out.hint_faults.add(ours, t_ms);
                continue;
            }
            "mm_vmscan_wakeup_kswapd" => {
                out.kswapd_wakeups.add(ours, t_ms);
                continue;
            }
            "sched_skip_vma_numa" => {
                let f = l.fields();
                let reason = f
                    .get("reason")
                    .and_then(|r| NumabSkip::from_name(r))
                    .ok_or_else(|| format!("unknown sched_skip_vma_numa reason: {}", l.body))?;
                let (Some(start), Some(end)) = (l.hex("vm_start"), l.hex("vm_end")) else {
                    return Err(format!("unreadable sched_skip_vma_numa: {}", l.body));
                };
                NumaScanWhat::Skip { start, end, reason }
            }
            _ => continue,
        };
        list.push(NumaScanEvent { t_ms, tid, what });
    }
    Ok(out)
}

/// A named address range of the workload (a region).
#[derive(Clone, Debug, PartialEq)]
pub struct Named {
    pub name: String,
    pub start: u64,
    pub end: u64,
}

/// One task_numa_work run, summarised.
#[derive(Clone, Debug, PartialEq)]
pub struct Pass {
    pub t_ms: f64,
    pub tid: usize,
    /// Until task_numa_work returned (NaN if the trace ends first).
    pub ms: f64,
    /// PTEs made PROT_NONE per region (regions it walked), then the rest of the process.
    pub updated: Vec<(String, u64)>,
    /// Regions passed over, with the reason.
    pub skipped: Vec<(String, NumabSkip)>,
}

const OTHER: &str = "other VMAs";

fn region_of(regions: &[Named], start: u64, end: u64) -> &str {
    regions
        .iter()
        .find(|r| start < r.end && r.start < end)
        .map_or(OTHER, |r| r.name.as_str())
}

/// Group events into passes: from a Work event to its thread's WorkDone.
pub fn passes(events: &[NumaScanEvent], regions: &[Named]) -> Vec<Pass> {
    let mut out: Vec<Pass> = Vec::new();
    let mut current: HashMap<usize, usize> = HashMap::new();
    for e in events {
        match e.what {
            NumaScanWhat::Work => {
                current.insert(e.tid, out.len());
                out.push(Pass {
                    t_ms: e.t_ms,
                    tid: e.tid,
                    ms: f64::NAN,
                    updated: Vec::new(),
                    skipped: Vec::new(),
                });
            }
            NumaScanWhat::WorkDone => {
                if let Some(i) = current.remove(&e.tid) {
                    out[i].ms = e.t_ms - out[i].t_ms;
                }
            }
            NumaScanWhat::Chunk {
                start,
                end,
                updated,
            } => {
                let Some(&i) = current.get(&e.tid) else {
                    continue;
                };
                let name = region_of(regions, start, end);
                let u = &mut out[i].updated;
                match u.iter_mut().find(|(n, _)| n == name) {
                    Some((_, n)) => *n += updated,
                    None => u.push((name.to_string(), updated)),
                }
            }
            NumaScanWhat::Skip { start, end, reason } => {
                let Some(&i) = current.get(&e.tid) else {
                    continue;
                };
                let name = region_of(regions, start, end);
                // Skips of the binary's and the stacks' VMAs repeat every pass: only regions'.
                if name != OTHER && !out[i].skipped.contains(&(name.to_string(), reason)) {
                    out[i].skipped.push((name.to_string(), reason));
                }
            }
        }
    }
    out
}

fn thread_name(tid: usize) -> String {
    if tid == 0 {
        "main".into()
    } else {
        format!("w{}", tid - 1)
    }
}

/// The two sides' passes, one list after the other.
pub fn text(real: &[Pass], sim: &[Pass], guest: &GuestScan) -> String {
    let mut s = String::from(
        "\nNUMA scan passes (task_numa_work): start, thread (main, w0, w1, ...), duration, PTEs made \
         PROT_NONE per region walked, regions passed over (sched_skip_vma_numa reason)\n",
    );
    for (side, list) in [("real", real), ("simulated", sim)] {
        let _ = writeln!(s, "  {side}: {} passes", list.len());
        for p in list {
            let upd: Vec<String> = p.updated.iter().map(|(n, u)| format!("{n} {u}")).collect();
            let skip: Vec<String> = p
                .skipped
                .iter()
                .map(|(n, r)| format!("{n} ({})", r.name()))
                .collect();
            let _ = write!(
                s,
                "    {:>8.1} ms  {:<5} {:>7.2} ms  walked: {}",
                p.t_ms,
                thread_name(p.tid),
                p.ms,
                if upd.is_empty() {
                    "-".to_string()
                } else {
                    upd.join(", ")
                }
            );
            if !skip.is_empty() {
                let _ = write!(s, "; skipped: {}", skip.join(", "));
            }
            s.push('\n');
        }
    }
    let other_passes = passes(&guest.others, &[]);
    if !other_passes.is_empty() {
        let updated: u64 = other_passes
            .iter()
            .flat_map(|p| p.updated.iter().map(|(_, n)| n))
            .sum();
        let first = other_passes
            .iter()
            .find(|p| p.updated.iter().any(|(_, n)| *n > 0))
            .map_or(String::new(), |p| {
                format!(", the first that changed a PTE at {:.1} ms", p.t_ms)
            });
        let _ = writeln!(
            s,
            "  the guest also scanned other processes (the harness's sampler): {} passes, {updated} PTEs made PROT_NONE{first}",
            other_passes.len()
        );
    }
    let _ = writeln!(
        s,
        "  in the guest: hint faults {}; kswapd wake-ups {}",
        guest.hint_faults.text(),
        guest.kswapd_wakeups.text()
    );
    if guest.lost > 0 {
        let _ = writeln!(
            s,
            "  warning: the guest's ring buffer dropped {} events",
            guest.lost
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::ftrace;

    fn guest_trace() -> Trace {
        let lines: Vec<String> = [
            "# entries-in-buffer/entries-written: 9/9   #P:3",
            "        workload-70      [000] .....   10.000000: tracing_mark_write: tierlab main t0",
            "        workload-72      [001] .....   10.000100: tracing_mark_write: tierlab worker=0",
            "        workload-72      [001] d....   11.000000: tnw: (task_numa_work+0x4/0x3a0)",
            "        workload-72      [001] .....   11.000010: sched_skip_vma_numa: numa_scan_offset=0 vm_start=400000 vm_end=401000 reason=shared_ro",
            "        workload-72      [001] .....   11.000020: sched_skip_vma_numa: numa_scan_offset=0 vm_start=2E200000 vm_end=36200000 reason=scan_delay",
            "        workload-72      [001] d....   11.000100: cpn: (change_prot_numa+0x0/0xa0) start=0x10000000 end=0x20000000",
            "        workload-72      [001] d....   11.005000: cpn_ret: (task_numa_work+0x1f0/0x3a0 <- change_prot_numa) updated=120",
            "        workload-72      [001] d....   11.010000: tnw_ret: (task_numa_work_fn+0x0 <- task_numa_work)",
            "        workload-80      [002] d....   11.100000: tnw: (task_numa_work+0x4/0x3a0)",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        ftrace::parse(&lines)
    }

    #[test]
    fn the_guest_trace_becomes_passes_by_region_and_thread() {
        let g = from_guest(&guest_trace()).unwrap();
        assert_eq!(g.others.len(), 1, "the sampler's pid is not the program's");
        assert_eq!(g.others[0].tid, 80);
        assert_eq!(g.events.len(), 5);
        let regions = [
            Named {
                name: "cold".into(),
                start: 0x1000_0000,
                end: 0x2e00_0000,
            },
            Named {
                name: "hot".into(),
                start: 0x2e20_0000,
                end: 0x3620_0000,
            },
        ];
        let p = passes(&g.events, &regions);
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].tid, 1, "worker 0 is tierlab's thread 1");
        assert!((p[0].t_ms - 1000.0).abs() < 1e-6);
        assert!((p[0].ms - 10.0).abs() < 1e-6);
        assert_eq!(p[0].updated, vec![("cold".to_string(), 120)]);
        assert_eq!(
            p[0].skipped,
            vec![("hot".to_string(), NumabSkip::ScanDelay)]
        );
        let t = text(&p, &p, &g);
        assert!(
            t.contains("walked: cold 120; skipped: hot (scan_delay)"),
            "{t}"
        );
    }

    #[test]
    fn a_trace_without_the_programs_marker_is_an_error() {
        let mut t = guest_trace();
        t.lines.retain(|l| l.body != "tierlab main t0");
        assert!(from_guest(&t).unwrap_err().contains("t0 marker"));
    }
}
