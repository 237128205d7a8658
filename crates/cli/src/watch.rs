//! What `tierlab run` shows while it simulates: a progress bar in simulated time, the
//! `--interval` lines (`vmstat 1` or `perf stat -I` style), and Ctrl-C, which stops the run
//! where it is and keeps what was simulated.

use indicatif::{ProgressBar, ProgressStyle};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Instant;
use tierlab::sim::{Sample, TIMELINE_VM};
use tierlab::stats::Vm;
use tierlab::Sim;

/// How `--interval` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum IntervalStyle {
    /// One row per interval, rates per second, a header every 20 rows (`vmstat 1`).
    Vmstat,
    /// One line per event per interval: time, count in the interval, event (`perf stat -I`).
    Perf,
}

/// Set by the Ctrl-C handler; the run stops at its next look.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Install the Ctrl-C handler once: the first Ctrl-C stops the run cleanly (its result is
/// written, marked interrupted), a second one exits at once.
pub fn catch_ctrl_c() {
    static INSTALLED: OnceLock<()> = OnceLock::new();
    INSTALLED.get_or_init(|| {
        let _ = ctrlc::set_handler(|| {
            if INTERRUPTED.swap(true, Ordering::SeqCst) {
                eprintln!("\ntierlab: interrupted twice, exiting without writing results");
                std::process::exit(130);
            }
        });
    });
}

/// Whether Ctrl-C stopped the run.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::SeqCst)
}

/// The watcher of one run.
pub struct Watch {
    bar: ProgressBar,
    /// Whether the bar shows a fraction (the run's size is known) or only a spinner.
    sized: Option<bool>,
    interval: Option<IntervalStyle>,
    /// Timeline samples printed so far.
    printed: usize,
    rows: usize,
    started: Instant,
    /// The last rate measurement: when, at how many accesses, and the rate then (M/s).
    last: (Instant, u64, f64),
}

/// The vmstat counters an interval line shows, with their column names.
const RATES: [(Vm, &str); 6] = [
    (Vm::PgFault, "pgfault"),
    (Vm::NumaHintFaults, "hintflt"),
    (Vm::PgPromoteSuccess, "promote"),
    (Vm::PgDemoteKswapd, "demote"),
    (Vm::PgMigrateSuccess, "migrate"),
    (Vm::PgScanKswapd, "scan_ksw"),
];

impl Watch {
    /// A watcher with a progress bar (unless `quiet`) and `--interval` output (if given).
    pub fn new(quiet: bool, interval: Option<IntervalStyle>) -> Watch {
        let bar = if quiet {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(1000)
        };
        Watch {
            bar,
            sized: None,
            interval,
            printed: 0,
            rows: 0,
            started: Instant::now(),
            last: (Instant::now(), 0, 0.0),
        }
    }

    /// Called by the run now and then: update the bar, print new interval lines; false
    /// stops the run (Ctrl-C).
    pub fn look(&mut self, sim: &Sim, now: u64) -> bool {
        let now_s = sim.hw.cycles_to_s(now);
        let fraction = sim.progress(now);
        self.style(fraction.is_some());
        // The rate over the last half second or more of wall time, not since the start.
        let (at, accesses, _) = self.last;
        let since = at.elapsed().as_secs_f64();
        if since >= 0.5 {
            let done = sim.accesses();
            let rate = done.saturating_sub(accesses) as f64 / since / 1e6;
            self.last = (Instant::now(), done, rate);
        }
        let rate = self.last.2;
        let wall = self.started.elapsed().as_secs_f64();
        let msg = match fraction {
            // The end and the time left, from the fraction done so far.
            Some(f) if f >= 0.001 => format!(
                "ETA {} | sim {now_s:.3} s of ~{:.3} s | {rate:.1} M accesses/s",
                hms(wall * (1.0 - f) / f),
                now_s / f
            ),
            _ => format!("sim {now_s:.3} s | {rate:.1} M accesses/s"),
        };
        self.bar.set_message(msg);
        if let Some(f) = fraction {
            self.bar.set_position((f * 1000.0) as u64);
        } else {
            self.bar.tick();
        }
        self.print_samples(sim);
        !interrupted()
    }

    /// Pick the bar's style the first time: a bar with ETA when the end is known.
    fn style(&mut self, sized: bool) {
        if self.sized == Some(sized) {
            return;
        }
        self.sized = Some(sized);
        let template = if sized {
            "{spinner} [{elapsed_precise}] {bar:30} {percent:>3}% {msg}"
        } else {
            "{spinner} [{elapsed_precise}] {msg}"
        };
        self.bar.set_style(
            ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
    }

    /// Print the interval lines of the samples taken since the last look.
    pub fn print_samples(&mut self, sim: &Sim) {
        let Some(style) = self.interval else {
            return;
        };
        while self.printed < sim.timeline.len() {
            let cur = &sim.timeline[self.printed];
            let prev = self.printed.checked_sub(1).map(|i| &sim.timeline[i]);
            let lines = match style {
                IntervalStyle::Vmstat => self.vmstat_row(sim, prev, cur),
                IntervalStyle::Perf => perf_lines(prev, cur),
            };
            for line in lines {
                self.bar.suspend(|| println!("{line}"));
            }
            self.printed += 1;
        }
    }

    /// A `vmstat 1` row: free and anon MiB per node, then per-second rates over the interval.
    fn vmstat_row(&mut self, sim: &Sim, prev: Option<&Sample>, cur: &Sample) -> Vec<String> {
        let mut out = Vec::new();
        let names: Vec<&str> = sim
            .cfg()
            .machine
            .nodes
            .iter()
            .map(|n| n.name.as_str())
            .collect();
        if self.rows.is_multiple_of(20) {
            let mut h = format!("{:>9}", "sim_s");
            for kind in ["free", "anon"] {
                for n in &names {
                    h.push_str(&format!(" {:>9}", format!("{kind}:{n}")));
                }
            }
            for (_, name) in RATES {
                h.push_str(&format!(" {name:>9}"));
            }
            h.push_str(&format!(" {:>9} {:>10}", "tlb_ipi", "dtlb_miss"));
            out.push(format!(
                "{:>9} free and anon in MiB per node; the rest per second of simulated time",
                ""
            ));
            out.push(h);
        }
        self.rows += 1;
        let dt = (cur.t_ms - prev.map_or(0.0, |p| p.t_ms)) / 1e3;
        let per_s = |a: u64, b: u64| {
            if dt > 0.0 {
                (b.saturating_sub(a)) as f64 / dt
            } else {
                0.0
            }
        };
        let mib = |pages: u64| pages as f64 * 4096.0 / (1 << 20) as f64;
        let mut row = format!("{:>9.3}", cur.t_ms / 1e3);
        for n in &cur.nodes {
            row.push_str(&format!(" {:>9.1}", mib(n.0)));
        }
        for n in &cur.nodes {
            row.push_str(&format!(" {:>9.1}", mib(n.1)));
        }
        for (vm, _) in RATES {
            let i = vm_index(vm);
            let before = prev.map_or(0, |p| p.vm[i]);
            row.push_str(&format!(" {:>9.0}", per_s(before, cur.vm[i])));
        }
        let tlb = per_s(prev.map_or(0, |p| p.tlb_shootdowns), cur.tlb_shootdowns);
        let dtlb = per_s(prev.map_or(0, |p| p.dtlb_load_misses), cur.dtlb_load_misses);
        row.push_str(&format!(" {tlb:>9.0} {dtlb:>10.0}"));
        out.push(row);
        out
    }

    /// Clear the bar once the run is over.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// `perf stat -I` lines: per event, the time, the count in the interval and the event.
fn perf_lines(prev: Option<&Sample>, cur: &Sample) -> Vec<String> {
    let mut out = Vec::new();
    if prev.is_none() {
        out.push(format!("#{:>14} {:>18}   events", "time", "counts"));
    }
    let t = cur.t_ms / 1e3;
    let mut line = |count: u64, name: &str| {
        out.push(format!("{t:>15.9} {:>18}   {name}", group(count)));
    };
    line(
        cur.dtlb_load_misses
            .saturating_sub(prev.map_or(0, |p| p.dtlb_load_misses)),
        "dTLB-load-misses",
    );
    line(
        cur.tlb_shootdowns
            .saturating_sub(prev.map_or(0, |p| p.tlb_shootdowns)),
        "TLB-shootdowns",
    );
    for (vm, _) in RATES {
        let i = vm_index(vm);
        line(
            cur.vm[i].saturating_sub(prev.map_or(0, |p| p.vm[i])),
            vm.name(),
        );
    }
    out
}

/// The position of a counter in each sample's `vm` (TIMELINE_VM's order).
fn vm_index(vm: Vm) -> usize {
    TIMELINE_VM
        .iter()
        .position(|&v| v == vm)
        .expect("interval counters are timeline counters")
}

/// Seconds as h:mm:ss.
fn hms(s: f64) -> String {
    let s = s.max(0.0).round() as u64;
    format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// 1234567 → "1,234,567", as perf prints counts.
fn group(n: u64) -> String {
    tierlab::report::group(n)
}
