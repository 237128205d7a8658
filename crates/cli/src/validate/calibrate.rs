//! How fast the guest runs kernel code, measured on the guest.
//!
//! Under TCG the guest executes one instruction per virtual nanosecond, so kernel paths cost
//! it what their instruction counts say, not what the cost table's hardware figures say:
//! hot_4t's fill faults cost the guest 10.5 µs per page against 4.3 µs in a stand-in with
//! hardware costs. NUMA balancing paces its scanner by run time (and pushes a task's next
//! scan by 32× the scan's own run time), kswapd's speed gates promotion, so the stand-in must
//! run kernel code at the guest's speed. The calibration run (NUMA balancing and demotion
//! off) reports each `touch` phase's CPU time, which is almost all page faults; the same
//! configuration simulated on the stand-in gives tierlab's time for the same faults; their
//! ratio scales every kernel-side cost of the stand-in's cost table (`kernel_cost_sets`).
//! Hardware costs (TLB walks, A/D-bit assists, I/O) are left alone. One measured ratio, not
//! a fit to the counters being compared.

use serde_json::Value;
use tierlab::cost::CostTable;
use tierlab::mm::pgtable::HPAGE_PMD_NR;
use tierlab::Config;
use toml::Value as TomlValue;

/// Guest CPU ns per access of each named phase: (name, cpu_ms summed, accesses summed).
pub fn guest_cost_per_access(lines: &[String]) -> Vec<(String, f64, u64)> {
    let mut per_name: Vec<(String, f64, u64)> = Vec::new();
    for line in lines {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
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
    per_name
}

/// The scenario's named phases of `kind`: (index in the phase list, name, table).
pub fn named_phases(cfg: &Config, kind: &str) -> Vec<(usize, String, TomlValue)> {
    let phases = cfg.workload.get("phases").and_then(|p| p.as_array());
    phases
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, p)| p.get("kind").and_then(|k| k.as_str()) == Some(kind))
        .filter_map(|(i, p)| {
            let name = p.get("name").and_then(|n| n.as_str())?;
            Some((i, name.to_string(), p.clone()))
        })
        .collect()
}

/// The program's line for the phase named `name` (its first instance's).
fn phase_line<'a>(phase_lines: &'a [Value], name: &str) -> Option<&'a Value> {
    (phase_lines.iter()).find(|l| l.get("phase").and_then(Value::as_str) == Some(name))
}

/// Where the guest program's threads began each paced `random` phase's pace slots, ns after
/// the phase began (its first instance's line: `pace_start_ms` against `begin_ms`), as
/// `workload.phases.N.pace_delay_ns` sets: the stand-in's threads then open their schedules
/// as far after the barrier that begins the phase. Where their slots fall against each other
/// decides how the readers' batches meet on the shared instruction clock, and so each
/// reader's run time per access (a thread that did not pace there gets 0).
pub fn pace_delay_sets(cfg: &Config, phase_lines: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, name, p) in named_phases(cfg, "random") {
        if p.get("rate_per_s").is_none() {
            continue;
        }
        let Some(line) = phase_line(phase_lines, &name) else {
            continue;
        };
        let (Some(begin), Some(starts)) = (
            line.get("begin_ms").and_then(Value::as_f64),
            line.get("pace_start_ms").and_then(Value::as_array),
        ) else {
            continue;
        };
        let delays: Vec<String> = starts
            .iter()
            .map(|s| {
                let ns = s.as_f64().map_or(0.0, |s| ((s - begin) * 1e6).max(0.0));
                format!("{}", ns.round() as u64)
            })
            .collect();
        out.push(format!(
            "workload.phases.{i}.pace_delay_ns=[{}]",
            delays.join(", ")
        ));
    }
    out
}

/// The guest's run time per touched page over the stand-in's, over every named `touch`
/// phase (`sim_phases`: the stand-in's run of the calibration configuration, as (name,
/// run_time_us, accesses)); None without a touch phase measured on both sides.
pub fn kernel_speed_ratio(
    cfg: &Config,
    guest_lines: &[String],
    sim_phases: &[(String, f64, u64)],
) -> Option<f64> {
    let guest = guest_cost_per_access(guest_lines);
    let (mut guest_ns, mut sim_ns) = (0.0, 0.0);
    for (_, name, _) in named_phases(cfg, "touch") {
        let name = name.as_str();
        let Some((_, cpu_ms, n)) = guest.iter().find(|x| x.0 == name) else {
            continue;
        };
        let Some((_, run_us, sim_n)) = sim_phases.iter().find(|x| x.0 == name) else {
            continue;
        };
        if *n == 0 || *sim_n == 0 {
            continue;
        }
        guest_ns += cpu_ms * 1e6 / *n as f64 * *sim_n as f64;
        sim_ns += run_us * 1e3;
    }
    (sim_ns > 0.0 && guest_ns > 0.0).then(|| guest_ns / sim_ns)
}

/// The guest's run time (ms) and pages of every named `touch` phase, summed.
pub fn guest_touch(cfg: &Config, lines: &[String]) -> Option<(f64, u64)> {
    let guest = guest_cost_per_access(lines);
    let (mut ms, mut pages) = (0.0, 0);
    for (_, name, _) in named_phases(cfg, "touch") {
        if let Some((_, cpu_ms, n)) = guest.iter().find(|x| x.0 == name) {
            ms += cpu_ms;
            pages += n;
        }
    }
    (pages > 0).then_some((ms, pages))
}

/// How much longer per page (a fraction; negative: shorter) the compared run's fill ran on
/// the guest than the calibration run's, whose fill the stand-in's kernel speed is fitted
/// to: both as `guest_touch` gives them (run time ms, pages).
pub fn fill_drift(calibration: (f64, u64), compared: (f64, u64)) -> Option<f64> {
    let per_page = |(ms, pages): (f64, u64)| (pages > 0 && ms > 0.0).then(|| ms / pages as f64);
    Some(per_page(compared)? / per_page(calibration)? - 1.0)
}

/// A 4 KiB fault as the THP-off calibration left it: the guest's run time per touched page
/// (ns) and the stand-in's scaled `anon_fault_cycles` and `clear_page_cycles`.
#[derive(Clone, Copy, Debug)]
pub struct FourKFault {
    pub page_ns: f64,
    pub anon_fault: f64,
    pub clear_page: f64,
}

/// The guest's cost of clearing a page, from its compared run with THP on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThpClear {
    /// The touch phases' run time (ms), pages and THP faults (thp_fault_alloc).
    pub touch_ms: f64,
    pub pages: u64,
    pub thp_faults: u64,
    /// Run time per THP fault (ns): the touch phases' time less their other pages at the
    /// calibration's time per 4 KiB page.
    pub thp_fault_ns: f64,
    /// (thp_fault_ns - one 4 KiB page's time) / (clears - 1): a THP fault is a 4 KiB fault
    /// (one clear) that clears `clears - 1` pages more.
    pub clear_ns: f64,
    /// Pages a THP fault clears: 512 (folio_zero_user), twice that with init_on_alloc.
    pub clears: u64,
    /// The stand-in's anon_fault_cycles: a 4 KiB fault keeps its calibrated total.
    pub anon_fault: f64,
}

/// The guest's clear cost per page from its run with THP on (`lines`: the program's lines,
/// `thp_faults`: thp_fault_alloc over the run, all of them the touch phases' faults, each
/// clearing `clears` pages) and the calibration's 4 KiB fault; None without a THP fault or a
/// touch phase.
pub fn thp_clear(
    cfg: &Config,
    lines: &[String],
    thp_faults: u64,
    clears: u64,
    four_k: FourKFault,
) -> Option<ThpClear> {
    let (touch_ms, pages) = guest_touch(cfg, lines)?;
    let huge = thp_faults * HPAGE_PMD_NR as u64;
    if thp_faults == 0 || huge > pages {
        return None;
    }
    let small_ns = (pages - huge) as f64 * four_k.page_ns;
    let thp_fault_ns = (touch_ms * 1e6 - small_ns) / thp_faults as f64;
    let clear_ns = ((thp_fault_ns - four_k.page_ns) / (clears.max(2) - 1) as f64).max(0.0);
    let anon_fault = (four_k.anon_fault + four_k.clear_page - clear_ns).max(0.0);
    Some(ThpClear {
        touch_ms,
        pages,
        thp_faults,
        thp_fault_ns,
        clear_ns,
        clears,
        anon_fault,
    })
}

impl ThpClear {
    /// The stand-in's touch phases ran `sim_ms` with `sim_thp_faults` THP faults: done within
    /// GAP_TOLERANCE of the guest's; else the difference goes to the clears a THP fault makes
    /// beyond a 4 KiB fault's one (the 4 KiB fault keeps its total). The guest's time per THP
    /// fault includes the other vCPUs' turns, which the stand-in adds itself.
    pub fn step(&mut self, sim_ms: f64, sim_thp_faults: u64, four_k: FourKFault) -> bool {
        let want = self.touch_ms;
        if (sim_ms - want).abs() <= GAP_TOLERANCE * want || sim_thp_faults == 0 {
            return true;
        }
        let extra = (sim_thp_faults * (self.clears.max(2) - 1)) as f64;
        self.clear_ns = (self.clear_ns + (want - sim_ms) * 1e6 / extra).max(0.0);
        self.anon_fault = (four_k.anon_fault + four_k.clear_page - self.clear_ns).max(0.0);
        false
    }

    /// The stand-in's `--set`s: the guest's clear cost per page, and the fault path less the
    /// difference (clamped at 0).
    pub fn sets(&self) -> Vec<String> {
        vec![
            format!("cost.clear_page_cycles={}", self.clear_ns.round()),
            format!("cost.anon_fault_cycles={}", self.anon_fault.round()),
        ]
    }
}

/// The guest's run time per access of each named `random` phase (`cpu_ms` / `accesses` over
/// its instances), in ns: (index in the phase list, ns), the stand-in's first `gap_cycles`.
pub fn guest_gaps(cfg: &Config, lines: &[String]) -> Vec<(usize, f64)> {
    let per_name = guest_cost_per_access(lines);
    named_phases(cfg, "random")
        .into_iter()
        .filter_map(|(i, name, _)| {
            let (_, cpu_ms, n) = per_name.iter().find(|x| x.0 == name)?;
            (*n > 0).then(|| (i, cpu_ms * 1e6 / *n as f64))
        })
        .collect()
}

/// One sample of the workers, for the quiet window: time (ms), NUMA hint faults so far, and
/// every worker's run time (ns) and accesses so far.
pub struct WorkerSample {
    pub t_ms: f64,
    pub hint_faults: u64,
    pub run_ns: Vec<u64>,
    pub accesses: Vec<u64>,
}

/// Minimum span of a quiet window, ms: two samples at the default 100 ms interval.
const QUIET_WINDOW_MIN_MS: f64 = 150.0;

/// The workers' run time per access (ns, summed over workers) inside [begin_ms, end_ms], from
/// the first sample in it to the last one before the next NUMA hint fault: the run's own
/// cost per access while NUMA balancing has not yet touched it. None when that window is
/// shorter than two sample intervals or saw no access.
pub fn quiet_window(samples: &[WorkerSample], begin_ms: f64, end_ms: f64) -> Option<f64> {
    let inside: Vec<&WorkerSample> = samples
        .iter()
        .filter(|s| s.t_ms >= begin_ms && s.t_ms <= end_ms)
        .collect();
    let a = *inside.first()?;
    let b = inside
        .iter()
        .take_while(|s| s.hint_faults == a.hint_faults)
        .last()?;
    let sum = |v: &[u64]| v.iter().sum::<u64>();
    let run = sum(&b.run_ns).checked_sub(sum(&a.run_ns))?;
    let acc = sum(&b.accesses).checked_sub(sum(&a.accesses))?;
    (b.t_ms - a.t_ms >= QUIET_WINDOW_MIN_MS && acc > 0).then(|| run as f64 / acc as f64)
}

/// The stand-in's quiet-window run time per access of each named `random` phase over all its
/// workers, from its timeline: (phase name, ns, 1000), the form `GapSearch::step` takes (run
/// time in µs over accesses). Workers are the scripted process's threads 1..=`threads`
/// (thread 0 is main); the sampler's thread after them is not one, as the guest's schedstat
/// lines, which name the workers only, do not count the harness's sampler.
pub fn sim_quiet_run_times(cfg: &Config, sim: &tierlab::RunResult) -> Vec<(String, f64, u64)> {
    let workers = (cfg.workload.get("threads"))
        .and_then(|t| t.as_integer())
        .map_or(1, |t| t.max(0) as usize);
    let samples: Vec<WorkerSample> = (sim.timeline.iter())
        .map(|p| WorkerSample {
            t_ms: p.t_ms,
            hint_faults: (p.vm.0.iter())
                .find(|(k, _)| k == "numa_hint_faults")
                .map_or(0, |(_, v)| *v),
            run_ns: (p.run_time_ms.iter().skip(1).take(workers))
                .map(|ms| (ms * 1e6) as u64)
                .collect(),
            accesses: p.accesses.iter().skip(1).take(workers).copied().collect(),
        })
        .collect();
    let mut out = Vec::new();
    for (_, name, _) in named_phases(cfg, "random") {
        let Some(ph) = sim.phases.iter().find(|p| p.name == name) else {
            continue;
        };
        let Some(begin) = ph.start_ms else { continue };
        let end = begin + ph.duration_us_per_instance / 1e3;
        if let Some(ns) = quiet_window(&samples, begin, end) {
            out.push((name, ns, 1000));
        }
    }
    out
}

/// Each named `random` phase's quiet-window run time per access in the guest's compared run,
/// over all its workers: (phase index, ns). `phase_lines` are the program's phase lines
/// (first instance).
pub fn guest_quiet_gaps(
    cfg: &Config,
    phase_lines: &[Value],
    samples: &[WorkerSample],
) -> Vec<(usize, f64)> {
    let mut out = Vec::new();
    for (i, name, _) in named_phases(cfg, "random") {
        let Some(line) = phase_line(phase_lines, &name) else {
            continue;
        };
        let (Some(begin), Some(end)) = (
            line.get("begin_ms").and_then(Value::as_f64),
            line.get("end_ms").and_then(Value::as_f64),
        ) else {
            continue;
        };
        if let Some(ns) = quiet_window(samples, begin, end) {
            out.push((i, ns));
        }
    }
    out
}

/// `--set workload.phases.N.gap_cycles=G` for each gap (ns, which the 1 GHz stand-in charges
/// as cycles).
pub fn gap_sets(gaps: &[(usize, f64)]) -> Vec<String> {
    gaps.iter()
        .map(|(i, ns)| format!("workload.phases.{i}.gap_cycles={}", ns.round() as u64))
        .collect()
}

/// The gaps on a shared core. The guest's run time per access counts the turns of the other
/// busy vCPUs, and the stand-in stretches its gap the same way, so each gap is the work that
/// gives the stand-in the guest's run time per access. Run time grows with the gap (steeply
/// near saturation): each phase keeps a bracket [lo, hi] around its answer, starting from
/// [0, guest's run time per access], and steps by guest / stand-in run time per access
/// inside it (bisecting when the step leaves it).
pub struct GapSearch {
    phases: Vec<GapPhase>,
    /// The tried gaps that came closest: the largest relative error of a phase stepped in
    /// that run, and every phase's gap.
    best: Option<(f64, Vec<f64>)>,
}

/// One random phase's search: its gap, for the guest's run time per access (ns).
struct GapPhase {
    index: usize,
    name: String,
    gap: Bracket,
}

/// Stand-in run time within this fraction of the guest's ends a search.
pub const GAP_TOLERANCE: f64 = 0.02;

/// The search for one amount of work that gives the stand-in the guest's run time `want`:
/// a bracket [lo, hi] around the answer, starting from [0, want] (run time is never less
/// than the work). The first step scales the work by guest / stand-in run time; later ones
/// take the secant through the last two tries, since run time is the work plus a fixed part
/// (the pacing's sleeps, the accesses' own cost) that a ratio step only approaches
/// geometrically; a step that leaves the bracket's inner part bisects instead.
#[derive(Clone, Debug)]
struct Bracket {
    want: f64,
    lo: f64,
    hi: f64,
    /// The work to try next.
    value: f64,
    /// The last try before `value` and the stand-in's run time with it.
    last: Option<(f64, f64)>,
    done: bool,
}

/// A secant step within this fraction of either end of the bracket bisects instead, so
/// that a step function (readers keeping up, then falling behind) is still closed in on.
const SECANT_MARGIN: f64 = 0.1;

impl Bracket {
    fn new(want: f64) -> Bracket {
        Bracket {
            want,
            lo: 0.0,
            hi: want,
            value: want,
            last: None,
            done: false,
        }
    }

    /// The stand-in's run time with `value` was `got`: done within GAP_TOLERANCE, else the
    /// next value.
    fn step(&mut self, got: f64) {
        if (got - self.want).abs() <= GAP_TOLERANCE * self.want || got <= 0.0 {
            self.done = true;
            return;
        }
        let ratio = self.value * self.want / got;
        let secant = match self.last {
            Some((v, g)) if g != got && v != self.value => {
                Some(self.value + (self.want - got) * (self.value - v) / (got - g))
            }
            _ => None,
        };
        if got > self.want {
            self.hi = self.value;
        } else {
            self.lo = self.value;
            // Run time grows with the work, so the answer lies above: widen if need be.
            self.hi = self.hi.max(ratio);
        }
        self.last = Some((self.value, got));
        let (next, margin) = match secant {
            Some(x) => (x, SECANT_MARGIN * (self.hi - self.lo)),
            None => (ratio, 0.0),
        };
        self.value = if next > self.lo + margin && next < self.hi - margin {
            next
        } else {
            (self.lo + self.hi) / 2.0
        };
    }
}

impl GapSearch {
    /// A search for each (phase index, guest ns per access) of `wants`.
    pub fn new(cfg: &Config, wants: Vec<(usize, f64)>) -> GapSearch {
        let names = named_phases(cfg, "random");
        let phases = (wants.into_iter())
            .filter_map(|(index, want)| {
                let name = names.iter().find(|p| p.0 == index)?.1.clone();
                Some(GapPhase {
                    index,
                    name,
                    gap: Bracket::new(want),
                })
            })
            .collect();
        GapSearch { phases, best: None }
    }

    /// The gaps to try next: (phase index, ns).
    pub fn gaps(&self) -> Vec<(usize, f64)> {
        (self.phases.iter())
            .map(|p| (p.index, p.gap.value))
            .collect()
    }

    /// The `--set`s of the gaps to try next.
    pub fn sets(&self) -> Vec<String> {
        gap_sets(&self.gaps())
    }

    /// Whether every phase's stand-in matches its guest.
    pub fn done(&self) -> bool {
        self.phases.iter().all(|p| p.gap.done)
    }

    /// Take the stand-in's (name, run_time_us, accesses) per phase from a run with `gaps()`;
    /// returns (name, stand-in ns per access, guest ns per access) for each phase stepped.
    pub fn step(&mut self, sim_phases: &[(String, f64, u64)]) -> Vec<(String, f64, f64)> {
        let mut seen = Vec::new();
        let tried: Vec<f64> = self.phases.iter().map(|p| p.gap.value).collect();
        for p in self.phases.iter_mut().filter(|p| !p.gap.done) {
            let Some(got) = (sim_phases.iter())
                .find(|s| s.0 == p.name && s.2 > 0)
                .map(|s| s.1 * 1e3 / s.2 as f64)
            else {
                p.gap.done = true;
                continue;
            };
            seen.push((p.name.clone(), got, p.gap.want));
            p.gap.step(got);
        }
        let error = (seen.iter())
            .map(|(_, got, want)| (got / want - 1.0).abs())
            .fold(0.0, f64::max);
        if !seen.is_empty() && self.best.as_ref().is_none_or(|(e, _)| error < *e) {
            self.best = Some((error, tried));
        }
        seen
    }

    /// A search that ran out of runs goes back to the gaps of its closest run (the step
    /// after it was never tried, and where run time jumps from keeping up to falling
    /// behind, no gap between may exist). Returns that run's largest relative error.
    pub fn settle(&mut self) -> Option<f64> {
        if self.done() {
            return None;
        }
        let (error, gaps) = self.best.clone()?;
        for (p, g) in self.phases.iter_mut().zip(gaps) {
            p.gap.value = g;
        }
        Some(error)
    }
}

/// `--set cost.X=...` scaling every kernel-side cost of `cost` by `ratio` (a copy bandwidth
/// is divided by it).
pub fn kernel_cost_sets(cost: &CostTable, ratio: f64) -> Vec<String> {
    let c = cost;
    let cycles: [(&str, u32); 21] = [
        ("anon_fault_cycles", c.anon_fault_cycles),
        ("file_minor_fault_cycles", c.file_minor_fault_cycles),
        ("wp_fault_cycles", c.wp_fault_cycles),
        ("clear_page_cycles", c.clear_page_cycles),
        ("pcp_alloc_cycles", c.pcp_alloc_cycles),
        ("pcp_free_cycles", c.pcp_free_cycles),
        ("zone_lock_base_cycles", c.zone_lock_base_cycles),
        ("zone_lock_per_page_cycles", c.zone_lock_per_page_cycles),
        ("reclaim_scan_cycles", c.reclaim_scan_cycles),
        ("reclaim_free_cycles", c.reclaim_free_cycles),
        ("ipi_send_cycles", c.ipi_send_cycles),
        ("ipi_send_per_cpu_cycles", c.ipi_send_per_cpu_cycles),
        ("ipi_receive_cycles", c.ipi_receive_cycles),
        ("invlpg_cycles", c.invlpg_cycles),
        ("full_flush_cycles", c.full_flush_cycles),
        ("context_switch_cycles", c.context_switch_cycles),
        ("syscall_cycles", c.syscall_cycles),
        ("pte_update_cycles", c.pte_update_cycles),
        ("migrate_page_cycles", c.migrate_page_cycles),
        ("numa_hint_fault_cycles", c.numa_hint_fault_cycles),
        ("numa_scan_pte_cycles", c.numa_scan_pte_cycles),
    ];
    let mut sets: Vec<String> = cycles
        .iter()
        .map(|(k, v)| format!("cost.{k}={}", (*v as f64 * ratio).round() as u64))
        .collect();
    sets.push(format!(
        "cost.migrate_copy_gbps={}",
        c.migrate_copy_gbps / ratio
    ));
    sets
}

/// `cost.numa_scan_pte_cycles` from the guest's `{"pte_probe": ...}` line: mprotect of a
/// populated region read-only and back walks and updates every PTE twice in
/// change_pte_range, the walk task_numa_work's change_prot_numa shares; what one PTE costs
/// beyond the (already scaled) `pte_update_cycles` is the scanner's cost per PTE examined.
/// Nothing without a probe line.
pub fn pte_walk_sets(guest_lines: &[String], pte_update_cycles: f64) -> Vec<String> {
    let Some((pages, ns)) = probe(guest_lines, "pte_probe") else {
        return Vec::new();
    };
    let per_pte = (ns / (2.0 * pages) - pte_update_cycles).max(0.0).round();
    vec![format!("cost.numa_scan_pte_cycles={per_pte}")]
}

/// `cost.migrate_page_cycles` from the guest's `{"migrate_probe": ...}` line: move_pages(2)
/// of the probe's pages from node 0 to node 1 runs migrate_pages(), the path promotion and
/// demotion share; what a page costs beyond the stand-in's (already scaled) copy, allocation
/// and local flush is the fixed cost of migrating it. Nothing without a probe line.
pub fn migrate_sets(guest_lines: &[String], other_ns_per_page: f64) -> Vec<String> {
    let Some((pages, ns)) = probe(guest_lines, "migrate_probe") else {
        return Vec::new();
    };
    let per_page = (ns / pages - other_ns_per_page).max(0.0).round();
    vec![format!("cost.migrate_page_cycles={per_page}")]
}

/// `cost.reclaim_scan_cycles` from the guest's `{"reclaim_probe": ...}` line: memory.reclaim
/// scanned pages (shrink_inactive_list and shrink_active_list: folio_referenced's rmap walk,
/// isolation, putback) and demoted some through migrate_pages(); what a scanned page costs
/// beyond those demotions, each at the `migrate_probe`'s measured time per page, is the
/// scan's cost per page. Nothing without the probe line, or when it demoted pages and no
/// migration probe says what they cost.
pub fn reclaim_scan_sets(guest_lines: &[String]) -> Vec<String> {
    let Some(p) = probe_line(guest_lines, "reclaim_probe") else {
        return Vec::new();
    };
    let field = |k: &str| p.get(k).and_then(Value::as_f64);
    let (Some(scanned), Some(demoted), Some(ns)) =
        (field("scanned"), field("demoted"), field("ns"))
    else {
        return Vec::new();
    };
    let migrate_ns = match probe(guest_lines, "migrate_probe") {
        Some((pages, ns)) => ns / pages,
        None if demoted == 0.0 => 0.0,
        None => return Vec::new(),
    };
    if scanned < 1.0 {
        return Vec::new();
    }
    let per_page = ((ns - demoted * migrate_ns) / scanned).max(0.0).round();
    vec![format!("cost.reclaim_scan_cycles={per_page}")]
}

/// `workload.sampler.*` for the stand-in: the harness's sampler wakes every `interval_ms`
/// and walks /proc for the guest's samples, a load on the shared core that the readers
/// accrue as run time while it runs. Most of it is reading the workload's numa_maps, whose
/// page walk grows with the pages mapped (show_numa_map → gather_pte_stats, one entry per
/// present PTE; `Op::ReadNumaMaps`), so the stand-in's sampler repeats a fixed part and a
/// part per page, both taken from the calibration run's samples (`cpu_ms` against the
/// regions' pages, each sample but the first and last, which also read /proc/zoneinfo) by
/// `sampler_line`, for the `run_ms` the workload runs. Nothing without a middle sample.
pub fn sampler_sets(
    samples: &[super::report::RealSample],
    interval_ms: f64,
    run_ms: f64,
) -> Vec<String> {
    let middle = samples
        .get(1..samples.len().saturating_sub(1))
        .unwrap_or(&[]);
    let points: Vec<(f64, f64)> = (middle.iter())
        .filter_map(|s| {
            let pages: u64 = s.regions.iter().flat_map(|(_, n)| n.iter()).sum();
            Some((pages as f64, s.cpu_ms?))
        })
        .collect();
    let Some((base_ms, page_ms)) = sampler_line(&points) else {
        return Vec::new();
    };
    if interval_ms <= 0.0 {
        return Vec::new();
    }
    let count = (run_ms / interval_ms).ceil().max(1.0) as u64 + 1;
    vec![
        format!("workload.sampler.interval_ms={interval_ms}"),
        format!("workload.sampler.cpu_us={}", (base_ms * 1e3).round()),
        format!(
            "workload.sampler.page_ns={}",
            (page_ms * 1e6 * 10.0).round() / 10.0
        ),
        format!("workload.sampler.samples={count}"),
    ]
}

/// The sampler's work against the pages it walks, (fixed ms, ms per page), from samples of
/// (pages, run time ms): the line under every sample that lies closest to them (the most
/// fitted run time in sum), with a non-negative fixed part and slope. A sample's run time
/// counts the other vCPUs' turns while the sampler is current (on a shared core its span and
/// CPU time are equal), which only adds: the samples a deadline did not cut lie on the line,
/// the rest above it. The best such line through two samples is an edge of their lower
/// convex hull, so only those are tried (n log n for a long run's samples). With one page
/// count, the line is flat at the least run time. None without samples.
pub fn sampler_line(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let least = points.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    if !least.is_finite() {
        return None;
    }
    let n = points.len() as f64;
    let sum_x: f64 = points.iter().map(|p| p.0).sum();
    let fitted = |(b, k): (f64, f64)| n * b + k * sum_x;
    let mut sorted = points.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.total_cmp(&b.1)));
    // Andrew's monotone chain, lower half: each kept turn is counter-clockwise.
    let mut hull: Vec<(f64, f64)> = Vec::new();
    for p in sorted {
        if hull.last().is_some_and(|q| q.0 == p.0) {
            continue; // the lower of two samples at one page count came first
        }
        while hull.len() >= 2 {
            let (a, b) = (hull[hull.len() - 2], hull[hull.len() - 1]);
            if (b.0 - a.0) * (p.1 - a.1) - (b.1 - a.1) * (p.0 - a.0) > 0.0 {
                break;
            }
            hull.pop();
        }
        hull.push(p);
    }
    let mut best = (least.max(0.0), 0.0);
    for w in hull.windows(2) {
        let k = (w[1].1 - w[0].1) / (w[1].0 - w[0].0);
        let line = (w[0].1 - k * w[0].0, k);
        if k >= 0.0 && line.0 >= 0.0 && fitted(line) > fitted(best) {
            best = line;
        }
    }
    Some(best)
}

/// The error a guest's probe reported (`{"<key>": {"error": ...}}`), if any.
pub fn probe_error(guest_lines: &[String], key: &str) -> Option<String> {
    let p = probe_line(guest_lines, key)?;
    p.get("error").and_then(Value::as_str).map(str::to_string)
}

/// The value of `<key>` in the first of the guest program's lines that has it (a probe's
/// `{"<key>": {...}}`, or `{"tick_expiry_ns": N}`), if any.
pub(super) fn probe_line(guest_lines: &[String], key: &str) -> Option<Value> {
    guest_lines.iter().find_map(|l| {
        serde_json::from_str::<Value>(l)
            .ok()
            .and_then(|v| v.get(key).cloned())
    })
}

/// `cost.nanosleep_cycles` and `cost.nanosleep_past_cycles` from the guest's
/// `{"sleep_probe": ...}` line: the run time of a paced thread's clock_nanosleep to a slot
/// ahead and to one already past, each the mean over the probe's sleeps (1 ns = 1 cycle at
/// the stand-in's 1 GHz). They are the pacing's own cost, which the readers' gap then no
/// longer carries. Nothing without a probe line.
pub fn sleep_sets(guest_lines: &[String]) -> Vec<String> {
    let Some(p) = probe_line(guest_lines, "sleep_probe") else {
        return Vec::new();
    };
    let field = |k: &str| p.get(k).and_then(|x| x.as_f64());
    let (Some(sleeps), Some(ns), Some(past_ns)) = (field("sleeps"), field("ns"), field("past_ns"))
    else {
        return Vec::new();
    };
    if sleeps < 1.0 {
        return Vec::new();
    }
    vec![
        format!("cost.nanosleep_cycles={}", (ns / sleeps).round()),
        format!("cost.nanosleep_past_cycles={}", (past_ns / sleeps).round()),
    ]
}

/// The (pages, ns) of the guest's `{"<key>": {"pages": .., "ns": ..}}` probe line, if any
/// and if it covered a page at least.
fn probe(guest_lines: &[String], key: &str) -> Option<(f64, f64)> {
    let p = probe_line(guest_lines, key)?;
    let pages = p.get("pages").and_then(|x| x.as_f64())?;
    let ns = p.get("ns").and_then(|x| x.as_f64())?;
    (pages >= 1.0).then_some((pages, ns))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t_ms: f64, hint_faults: u64, run_ns: [u64; 2], accesses: [u64; 2]) -> WorkerSample {
        WorkerSample {
            t_ms,
            hint_faults,
            run_ns: run_ns.to_vec(),
            accesses: accesses.to_vec(),
        }
    }

    #[test]
    fn the_quiet_window_ends_at_the_first_hint_fault() {
        let s = [
            sample(50.0, 0, [40_000_000, 0], [0, 0]),
            // The read phase starts at 100 ms: two workers, 1 µs and 3 µs per access.
            sample(100.0, 0, [90_000_000, 0], [0, 0]),
            sample(200.0, 0, [110_000_000, 60_000_000], [20_000, 20_000]),
            sample(300.0, 0, [130_000_000, 120_000_000], [40_000, 40_000]),
            // A hint fault: what follows is not quiet any more.
            sample(400.0, 7, [300_000_000, 300_000_000], [50_000, 50_000]),
        ];
        // Both workers: 40 + 120 ms over 40,000 + 40,000 accesses.
        let ns = quiet_window(&s, 100.0, 1000.0).unwrap();
        assert!((ns - 2000.0).abs() < 1e-9, "{ns}");
        // Too short a window (one interval) says nothing.
        assert_eq!(quiet_window(&s, 250.0, 1000.0), None);
        assert_eq!(quiet_window(&s, 2000.0, 3000.0), None);
    }

    /// The two-CPU, one-node machine of the tests' scenarios.
    const MACHINE: &str = r#"
[machine]
cpus = 2
[[machine.nodes]]
capacity_mib = 64
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-1"
"#;

    #[test]
    fn the_stand_ins_quiet_window_counts_the_workers_and_not_the_sampler() {
        // One reader on CPU 0 and a sampler that runs 20 ms of every 100 on another CPU.
        let text = MACHINE.to_string()
            + r#"
[sim]
timeline_interval_ms = 100
[workload]
type = "scripted"
threads = 1
placement = [0]
[[workload.regions]]
name = "buf"
pages = 64
[[workload.phases]]
name = "reads"
kind = "random"
region = "buf"
duration_ms = 500
rate_per_s = 100000
[workload.sampler]
interval_ms = 100
cpu_us = 20000
samples = 5
"#;
        let cfg = Config::from_str_with(&text, "t.toml", None, &[]).unwrap();
        let w = workloads::build(&cfg, "t.toml").unwrap();
        let mut sim = tierlab::Simulation::new(cfg.clone(), w).unwrap();
        let result = sim.run(&mut |_| {}).unwrap();
        let got = sim_quiet_run_times(&cfg, &result);
        assert_eq!(got.len(), 1, "{got:?}");
        // The reader's own run time per access over the same window (main is thread 0, the
        // sampler the last thread).
        let (first, last) = (&result.timeline[1], result.timeline.last().unwrap());
        let threads = first.run_time_ms.len();
        assert_eq!(threads, 3, "main, the reader and the sampler");
        let per_access = |t: usize| {
            (last.run_time_ms[t] - first.run_time_ms[t]) * 1e6
                / (last.accesses[1] - first.accesses[1]) as f64
        };
        let reader = per_access(1);
        assert!(
            (got[0].1 - reader).abs() < 1e-6 * reader,
            "{got:?} vs {reader}"
        );
        // The sampler's 20 ms per 100 would more than double it.
        assert!(per_access(2) > reader, "{} vs {reader}", per_access(2));
    }

    fn cfg() -> Config {
        let text = MACHINE.to_string()
            + r#"
[workload]
type = "scripted"
threads = 2
[[workload.regions]]
name = "buf"
pages = 16
[[workload.phases]]
name = "fill"
kind = "touch"
region = "buf"
threads = [0]
[[workload.phases]]
name = "both"
kind = "touch"
region = "buf"
threads = [0, 1]
[[workload.phases]]
name = "alone"
kind = "touch"
region = "buf"
[[workload.phases]]
name = "reads"
kind = "random"
region = "buf"
count = 10
"#;
        Config::from_str_with(&text, "t.toml", None, &[]).unwrap()
    }

    #[test]
    fn the_ratio_weighs_every_touch_phase_by_its_pages() {
        let guest = vec![
            r#"{"phase":"fill","accesses":1000,"cpu_ms":10.0}"#.to_string(),
            r#"{"phase":"both","accesses":2000,"cpu_ms":8.0}"#.to_string(),
            r#"{"phase":"alone","accesses":500,"cpu_ms":6.0}"#.to_string(),
            r#"{"phase":"reads","accesses":10,"cpu_ms":1.0}"#.to_string(),
        ];
        // Guest: 10 + 8 + 6 ms for the touches. Stand-in run time: fill 4 ms, both 4 ms, alone
        // 2 ms; the random phase does not count. 24 / 10.
        let sim = vec![
            ("fill".to_string(), 4000.0, 1000),
            ("both".to_string(), 4000.0, 2000),
            ("alone".to_string(), 2000.0, 500),
            ("reads".to_string(), 5.0, 10),
        ];
        let r = kernel_speed_ratio(&cfg(), &guest, &sim).unwrap();
        assert!((r - 2.4).abs() < 1e-12, "{r}");
        assert_eq!(kernel_speed_ratio(&cfg(), &guest, &sim[3..]), None);
    }

    #[test]
    fn a_thp_fault_is_a_4k_fault_that_clears_its_other_pages() {
        let four_k = FourKFault {
            page_ns: 10_000.0,
            anon_fault: 5458.0,
            clear_page: 1516.0,
        };
        // 2,048 pages: 3 THP faults (1,536 pages) and 512 pages at 10 µs (5.12 ms); each THP
        // fault 10 µs + 511 × 4 µs.
        let lines = [r#"{"phase":"fill","accesses":2048,"cpu_ms":11.282}"#.to_string()];
        let c = thp_clear(&cfg(), &lines, 3, 512, four_k).unwrap();
        assert!((c.thp_fault_ns - 2_054_000.0).abs() < 1e-3, "{c:?}");
        assert!((c.clear_ns - 4000.0).abs() < 1e-6, "{c:?}");
        // The 4 KiB fault keeps its total: 5,458 + 1,516 - 4,000.
        assert_eq!(
            c.sets(),
            vec![
                "cost.clear_page_cycles=4000".to_string(),
                "cost.anon_fault_cycles=2974".to_string()
            ]
        );
        // With init_on_alloc the fault clears 1,024 pages: 2,044 ms over 1,023 clears.
        let twice = thp_clear(&cfg(), &lines, 3, 1024, four_k).unwrap();
        assert!(
            (twice.clear_ns - 2_044_000.0 / 1023.0).abs() < 1e-6,
            "{twice:?}"
        );
        // The stand-in ran 1.023 ms too long over 3 × 1,023 extra clears: 333 ns less each.
        let mut stepped = twice;
        assert!(!stepped.step(11.282 + 1.023, 3, four_k));
        assert!((stepped.clear_ns - (twice.clear_ns - 1e3 / 3.0)).abs() < 1e-6);
        assert!((stepped.anon_fault - (6974.0 - stepped.clear_ns)).abs() < 1e-6);
        assert!(stepped.step(11.282 * 1.01, 3, four_k));
        // No THP fault, or more THP pages than were touched, says nothing.
        assert_eq!(thp_clear(&cfg(), &lines, 0, 512, four_k), None);
        assert_eq!(thp_clear(&cfg(), &lines, 5, 512, four_k), None);
        assert_eq!(thp_clear(&cfg(), &lines[..0], 3, 512, four_k), None);
    }

    #[test]
    fn the_fill_drift_is_the_compared_runs_time_per_page_over_the_calibrations() {
        // 1,001 ms for 122,880 pages in the calibration run, 1,046 ms in the compared one.
        let d = fill_drift((1001.0, 122_880), (1046.0, 122_880)).unwrap();
        assert!((d - 0.044955).abs() < 1e-6, "{d}");
        // Per page: twice the pages in twice the time is no drift.
        assert_eq!(fill_drift((500.0, 1_000), (1000.0, 2_000)), Some(0.0));
        // Nothing to compare without pages or time on either side.
        assert_eq!(fill_drift((0.0, 0), (1000.0, 2_000)), None);
        assert_eq!(fill_drift((500.0, 1_000), (1000.0, 0)), None);
    }

    #[test]
    fn the_guests_first_pace_slots_become_each_threads_pace_delay() {
        let mut c = cfg();
        let phases = c
            .workload
            .get_mut("phases")
            .and_then(|p| p.as_array_mut())
            .unwrap();
        phases[3]
            .as_table_mut()
            .unwrap()
            .insert("rate_per_s".into(), TomlValue::Float(2e5));
        let line = |starts: &str| {
            serde_json::from_str::<Value>(&format!(
                r#"{{"phase":"reads","begin_ms":647.833,"end_ms":700.0{starts}}}"#
            ))
            .unwrap()
        };
        // 28.5 µs and 35.5 µs after the phase began (the first instance's line counts).
        let lines = [
            line(r#","pace_start_ms":[647.861521,647.868459]"#),
            line(r#","pace_start_ms":[700.1,700.2]"#),
        ];
        assert_eq!(
            pace_delay_sets(&c, &lines),
            vec!["workload.phases.3.pace_delay_ns=[28521, 35459]".to_string()]
        );
        // A thread that did not pace: 0. No pace_start_ms (an older guest program): nothing.
        let lines = [line(r#","pace_start_ms":[647.861521,null]"#)];
        assert_eq!(
            pace_delay_sets(&c, &lines),
            vec!["workload.phases.3.pace_delay_ns=[28521, 0]".to_string()]
        );
        assert!(pace_delay_sets(&c, &[line("")]).is_empty());
        // An unpaced phase gets none.
        assert!(pace_delay_sets(&cfg(), &[line(r#","pace_start_ms":[647.9,647.9]"#)]).is_empty());
    }

    #[test]
    fn the_sleep_probe_gives_each_sleeps_mean_run_time() {
        let lines = [
            r#"{"phase":"fill","accesses":1,"cpu_ms":1.0}"#.to_string(),
            r#"{"sleep_probe":{"sleeps":2000,"ns":14000000,"past_ns":7300000}}"#.to_string(),
        ];
        assert_eq!(
            sleep_sets(&lines),
            [
                "cost.nanosleep_cycles=7000",
                "cost.nanosleep_past_cycles=3650"
            ]
        );
        // No probe (an older guest program), or one that slept nothing: nothing charged.
        assert!(sleep_sets(&lines[..1]).is_empty());
        let none = [r#"{"sleep_probe":{"sleeps":0,"ns":0,"past_ns":0}}"#.to_string()];
        assert!(sleep_sets(&none).is_empty());
    }

    #[test]
    fn the_pte_probe_gives_the_scan_cost_per_pte_beyond_the_update() {
        let lines = vec![
            r#"{"phase":"fill","accesses":1,"cpu_ms":1.0}"#.to_string(),
            r#"{"pte_probe":{"region":"cold","pages":1000,"ns":400000}}"#.to_string(),
        ];
        // 400 µs for 2 × 1,000 PTEs is 200 ns each; 48 of them are the update.
        assert_eq!(
            pte_walk_sets(&lines, 48.0),
            vec!["cost.numa_scan_pte_cycles=152".to_string()]
        );
        assert!(pte_walk_sets(&lines[..1], 48.0).is_empty());
    }

    #[test]
    fn the_migrate_probe_gives_the_fixed_cost_per_page_beyond_copy_alloc_and_flush() {
        let lines = vec![
            r#"{"pte_probe":{"region":"cold","pages":1000,"ns":400000}}"#.to_string(),
            r#"{"migrate_probe":{"region":"cold","pages":2000,"ns":30000000}}"#.to_string(),
            r#"{"migrate_probe2":{"region":"cold","pages":0,"ns":1}}"#.to_string(),
        ];
        // 30 ms for 2,000 pages is 15 µs each; 1,000 ns of it the copy, allocation and flush.
        assert_eq!(
            migrate_sets(&lines, 1000.0),
            vec!["cost.migrate_page_cycles=14000".to_string()]
        );
        assert!(migrate_sets(&lines[..1], 1000.0).is_empty());
        let none_moved = [r#"{"migrate_probe":{"region":"cold","pages":0,"ns":5}}"#.to_string()];
        assert!(migrate_sets(&none_moved, 1000.0).is_empty());
    }

    #[test]
    fn the_reclaim_probe_gives_the_scan_cost_per_page_beyond_its_demotions() {
        let migrate = r#"{"migrate_probe":{"region":"cold","pages":2000,"ns":30000000}}"#;
        let reclaim = r#"{"reclaim_probe":{"scanned":50000,"demoted":256,"ns":80000000}}"#;
        let lines = vec![migrate.to_string(), reclaim.to_string()];
        // 80 ms, of which 256 demotions at 15 µs are 3.84 ms: 76.16 ms over 50,000 pages.
        assert_eq!(
            reclaim_scan_sets(&lines),
            vec!["cost.reclaim_scan_cycles=1523".to_string()]
        );
        // Demotions without a migration probe cannot be taken out; none need not be.
        assert!(reclaim_scan_sets(&lines[1..]).is_empty());
        let rotated_only =
            [r#"{"reclaim_probe":{"scanned":1000,"demoted":0,"ns":1500000}}"#.to_string()];
        assert_eq!(
            reclaim_scan_sets(&rotated_only),
            vec!["cost.reclaim_scan_cycles=1500".to_string()]
        );
        let nothing = [r#"{"reclaim_probe":{"scanned":0,"demoted":0,"ns":5}}"#.to_string()];
        assert!(reclaim_scan_sets(&nothing).is_empty());
        let failed = [r#"{"reclaim_probe":{"error":"mount cgroup2: EPERM"}}"#.to_string()];
        assert!(reclaim_scan_sets(&failed).is_empty());
        assert_eq!(
            probe_error(&failed, "reclaim_probe").as_deref(),
            Some("mount cgroup2: EPERM")
        );
        assert_eq!(probe_error(&lines, "reclaim_probe"), None);
    }

    #[test]
    fn the_samplers_line_lies_under_every_sample_through_the_ones_no_turn_stretched() {
        // 1 ms fixed and 100 ns a page, with two samples stretched by other vCPUs' turns.
        let pts = [
            (10_000.0, 2.0),
            (20_000.0, 9.0),
            (40_000.0, 5.0),
            (60_000.0, 20.0),
            (80_000.0, 9.0),
            (80_000.0, 9.2),
        ];
        let (b, k) = sampler_line(&pts).unwrap();
        assert!(
            (b - 1.0).abs() < 1e-9 && (k - 1e-4).abs() < 1e-12,
            "{b} {k}"
        );
        // One page count: flat at the least run time.
        assert_eq!(sampler_line(&[(5.0, 3.0), (5.0, 2.5)]), Some((2.5, 0.0)));
        // A falling line would be a negative cost per page: flat instead.
        assert_eq!(sampler_line(&[(0.0, 4.0), (10.0, 3.0)]), Some((3.0, 0.0)));
        assert_eq!(sampler_line(&[]), None);
    }

    #[test]
    fn the_samplers_line_is_the_best_of_every_line_through_two_samples_under_all() {
        // The hull's edges against every pair, on point sets from a small LCG: fills (pages
        // rising), quiet runs (pages repeated), stretched samples far above.
        let brute = |pts: &[(f64, f64)]| {
            let least = pts.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
            let fitted = |(b, k): (f64, f64)| pts.iter().map(|p| b + k * p.0).sum::<f64>();
            let under = |(b, k): (f64, f64)| pts.iter().all(|p| b + k * p.0 <= p.1 + 1e-9);
            let mut best = (least.max(0.0), 0.0);
            for (i, a) in pts.iter().enumerate() {
                for c in &pts[i + 1..] {
                    if a.0 == c.0 {
                        continue;
                    }
                    let k = (c.1 - a.1) / (c.0 - a.0);
                    let line = (a.1 - k * a.0, k);
                    if k >= 0.0
                        && line.0 >= 0.0
                        && under(line)
                        && fitted(line) > fitted(best) + 1e-9
                    {
                        best = line;
                    }
                }
            }
            best
        };
        let mut state = 42u64;
        let mut next = |m: u64| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % m
        };
        for _ in 0..200 {
            let n = 2 + next(40) as usize;
            let pts: Vec<(f64, f64)> = (0..n)
                .map(|_| {
                    let pages = (next(8) * 10_000) as f64;
                    let stretch = if next(4) == 0 { next(50) as f64 } else { 0.0 };
                    (pages, 1.0 + pages * 1.2e-4 + next(3) as f64 * 0.1 + stretch)
                })
                .collect();
            let (b, k) = sampler_line(&pts).unwrap();
            let (rb, rk) = brute(&pts);
            assert!(
                (b - rb).abs() < 1e-6 && (k - rk).abs() < 1e-12,
                "{pts:?}: {b} {k} vs {rb} {rk}"
            );
        }
    }

    #[test]
    fn the_sampler_is_repeated_at_its_fixed_work_and_its_work_per_page_mapped() {
        let lines: Vec<String> = [
            (0.0, 1000, 30.0),
            (100.0, 10_000, 2.0),
            (200.0, 20_000, 7.0),
            (300.0, 30_000, 4.0),
            (400.0, 30_000, 40.0),
        ]
        .iter()
        .map(|(t, p, c)| format!(r#"{{"t_ms":{t},"regions":{{"r":[{p},0]}},"cpu_ms":{c}}}"#))
        .collect();
        let samples = super::super::report::parse_samples(&lines).unwrap();
        // Samples 100, 200 and 300 ms: 1 ms and 100 ns a page under them (the 200 ms one
        // waited for other vCPUs); 4.05 s of run is 41 intervals.
        assert_eq!(
            sampler_sets(&samples, 100.0, 4050.0),
            vec![
                "workload.sampler.interval_ms=100".to_string(),
                "workload.sampler.cpu_us=1000".to_string(),
                "workload.sampler.page_ns=100".to_string(),
                "workload.sampler.samples=42".to_string()
            ]
        );
        assert!(sampler_sets(&samples[..2], 100.0, 4050.0).is_empty());
    }

    #[test]
    fn kernel_costs_scale_and_hardware_costs_do_not() {
        let base = CostTable::default();
        let sets = kernel_cost_sets(&base, 2.0);
        let get = |k: &str| {
            sets.iter()
                .find_map(|s| s.strip_prefix(&format!("cost.{k}=")))
                .map(|v| v.to_string())
        };
        assert_eq!(
            get("anon_fault_cycles"),
            Some((base.anon_fault_cycles * 2).to_string())
        );
        assert_eq!(
            get("numa_scan_pte_cycles"),
            Some((base.numa_scan_pte_cycles * 2).to_string())
        );
        assert_eq!(
            get("migrate_copy_gbps"),
            Some((base.migrate_copy_gbps / 2.0).to_string())
        );
        assert_eq!(get("page_walk_cycles"), None);
        assert_eq!(get("accessed_bit_cycles"), None);
        // Every set names a real key of the cost table.
        let mut t = toml::Table::new();
        for s in &sets {
            let (k, v) = s.strip_prefix("cost.").unwrap().split_once('=').unwrap();
            t.insert(k.into(), toml::Value::Float(v.parse().unwrap()));
        }
        assert!(t.len() == sets.len());
    }
}
