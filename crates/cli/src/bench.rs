//! `tierlab bench`'s yardstick (issue 16): the scenario's page stream through a tuned loop that
//! does only what the hardware does per access — an L1 TLB lookup, an STLB lookup, a page
//! walk on a miss and the fills — so that the simulator's rate can be put beside what those
//! lookups alone cost on this machine.

mod reference_loop;

use std::time::Instant;

use tierlab::workload::{Op, OpBuf, Workload};
use tierlab::Config;

pub use reference_loop::Outcome;

/// The recorded page stream of every workload thread, and the TLB geometry it runs through.
pub struct Reference {
    recorded: reference_loop::Recorded,
    geometry: reference_loop::Geometry,
}

impl Reference {
    /// Regenerate the scenario's streams (the generators are deterministic: seeded by the
    /// scenario's seed, and XSBench's and scripted programs' accesses do not depend on what
    /// the simulated kernel does), at most `cap` accesses per thread.
    pub fn record(cfg: &Config, origin: &str, mut cap: u64) -> Result<Reference, String> {
        let workload: Workload = workloads::build(cfg, origin).map_err(|e| e.to_string())?;
        let mut rec = reference_loop::Recorded::default();
        let mut buf = OpBuf::new();
        for mut t in workload.threads {
            let (mut vpns, mut fetch) = (Vec::new(), Vec::new());
            'ops: loop {
                buf.clear();
                t.stream.refill(&mut buf);
                if buf.is_empty() {
                    break;
                }
                for op in buf.iter() {
                    let (addr, ifetch) = match op {
                        Op::Load(a) | Op::Store(a) => (a, false),
                        Op::IFetch(a) => (a, true),
                        Op::Exit => break 'ops,
                        _ => continue,
                    };
                    let vpn = addr >> tierlab::mm::pgtable::PAGE_SHIFT;
                    // (The last page's tag would be the empty tag; the simulator's user
                    // addresses end below 2^44.)
                    if vpn >= u32::MAX as u64 {
                        return Err(format!("bench: address {addr:#x} above 2^44 - 4 KiB"));
                    }
                    if cap == 0 {
                        break 'ops;
                    }
                    if ifetch {
                        fetch.push(vpns.len() as u32);
                    }
                    vpns.push(vpn as u32);
                    cap -= 1;
                }
            }
            rec.streams.push(vpns);
            rec.fetches.push(fetch);
            rec.process.push(t.process);
        }
        let tlb = &cfg.machine.tlb;
        let geometry = reference_loop::Geometry {
            dtlb: (tlb.dtlb_entries, tlb.dtlb_ways),
            itlb: (tlb.itlb_entries, tlb.itlb_ways),
            stlb: (tlb.stlb_entries, tlb.stlb_ways),
        };
        Ok(Reference {
            recorded: rec,
            geometry,
        })
    }

    pub fn accesses(&self) -> u64 {
        self.recorded.streams.iter().map(|s| s.len() as u64).sum()
    }

    pub fn threads(&self) -> usize {
        self.recorded
            .streams
            .iter()
            .filter(|s| !s.is_empty())
            .count()
    }

    /// One timed pass over every thread's stream (the page tables are built first, untimed).
    pub fn time(&self) -> (Outcome, f64) {
        let tables = reference_loop::PageTables::build(&self.recorded);
        let start = Instant::now();
        let out = reference_loop::run(&self.recorded, &tables, &self.geometry);
        (out, start.elapsed().as_secs_f64())
    }
}

/// Recorded accesses at most (4 bytes each): the default scenario's 207 M and the TLB-friendly
/// stream's 200 M fit; a longer stream is cut and the report says so.
const RECORD_CAP: u64 = 1 << 29;

/// The reference's passes beside the simulator's runs.
#[derive(Default)]
pub struct Timings {
    reference: Option<Reference>,
    rates: Vec<f64>,
    outcome: Outcome,
    /// The last run's page walks and STLB hits (perf counters).
    sim: (u64, u64),
}

impl Timings {
    /// Record the scenario's page stream, once.
    pub fn prepare(&mut self, cfg: &Config, origin: &str) -> Result<(), String> {
        if self.reference.is_none() {
            self.reference = Some(Reference::record(cfg, origin, RECORD_CAP)?);
        }
        Ok(())
    }

    /// Time one pass after run `i`, and print it.
    pub fn time(&mut self, i: u32, run: &tierlab::RunResult) {
        let Some(r) = &self.reference else { return };
        let (out, secs) = r.time();
        let rate = r.accesses() as f64 / secs;
        self.rates.push(rate);
        self.outcome = out;
        self.sim = (
            run.perf.get("page_walks"),
            run.perf.get("dtlb_load_misses.stlb_hit"),
        );
        println!(
            "reference {i}: {} accesses in {secs:.3} s wall = {:.1} M accesses/s",
            r.accesses(),
            rate / 1e6
        );
    }

    /// The reference's rates, what it did beside the run, and the ratio of the best rates.
    pub fn report(&self, sim_rates: &[f64]) {
        let Some(r) = &self.reference else { return };
        let best = |v: &[f64]| v.iter().cloned().fold(0.0, f64::max);
        let (sim, reference) = (best(sim_rates), best(&self.rates));
        let cut = if r.accesses() >= RECORD_CAP {
            " (cut at the recording cap)"
        } else {
            ""
        };
        println!(
            "reference loop (L1 TLB + STLB lookup, page walk and fill only; {} threads, {} \
             accesses{cut}): {} walks and {} STLB hits against the run's {} and {}",
            r.threads(),
            r.accesses(),
            self.outcome.walks,
            self.outcome.stlb_hits,
            self.sim.0,
            self.sim.1
        );
        println!(
            "rates: bench {} M/s, reference {} M/s; best/best = {:.1} / {:.1} = {:.2}x",
            range(sim_rates),
            range(&self.rates),
            sim / 1e6,
            reference / 1e6,
            sim / reference
        );
    }
}

/// Min–max of a list of rates, M/s.
pub fn range(rates: &[f64]) -> String {
    let lo = rates.iter().cloned().fold(f64::INFINITY, f64::min);
    let hi = rates.iter().cloned().fold(0.0, f64::max);
    format!("{:.1}–{:.1}", lo / 1e6, hi / 1e6)
}
