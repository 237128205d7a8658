//! A run's size before it starts: how many memory accesses the workload will make and how
//! many simulated seconds that takes, from its `[workload]` table alone (no stream is
//! generated). The figures are rough (within a small factor for the shipped scenarios) and
//! computed in f64, so no count can overflow; they exist to catch a run of hours, not to
//! predict one.

use tierlab::Config;

/// The estimate of one run.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    /// Memory accesses (loads and stores) the workload makes.
    pub accesses: f64,
    /// Simulated seconds the run lasts (capped at `sim.max_seconds` when set).
    pub sim_seconds: f64,
    /// The run is cut short by `sim.max_seconds`.
    pub capped: bool,
}

/// A number from a TOML table (integer or float); None when absent or of another type.
fn num(t: &toml::Table, k: &str) -> Option<f64> {
    match t.get(k)? {
        toml::Value::Integer(i) => Some(*i as f64),
        toml::Value::Float(f) => Some(*f),
        _ => None,
    }
}

/// An XSBench table's nuclides and gridpoints per nuclide (`XsbenchConfig::n_gridpoints`).
fn xsbench_grid(w: &toml::Table) -> (f64, f64) {
    let large = w.get("size").and_then(|v| v.as_str()) != Some("small");
    let isotopes = if large { 355.0 } else { 68.0 };
    let grid = num(w, "gridpoints").unwrap_or(11_303.0) * num(w, "scale").unwrap_or(1.0);
    (isotopes, grid.round().max(2.0))
}

/// Pages of XSBench's three arrays, each written once at initialisation: the nuclide grids
/// (48 B a point), the unionized energy grid and its index grid (one energy and one u32 per
/// isotope per union point).
fn xsbench_array_pages(isotopes: f64, grid: f64) -> f64 {
    let points = grid * isotopes;
    (points * 48.0 + points * 8.0 + points * isotopes * 4.0) / 4096.0
}

/// Accesses of the `[workload]` table, and the simulated seconds its explicit durations
/// (sleeps, timed phases, compiles) add on top of the accesses' own time.
fn accesses_and_seconds(cfg: &Config) -> (f64, f64) {
    let w = &cfg.workload;
    // Cycles per simulated second.
    let ghz = cfg.machine.cpu_ghz.max(0.1) * 1e9;
    let kind = w.get("type").and_then(|v| v.as_str()).unwrap_or("");
    match kind {
        "xsbench" => {
            let (isotopes, grid) = xsbench_grid(w);
            let particles = num(w, "particles").unwrap_or(50_000.0);
            let lookups = particles * num(w, "lookups_per_particle").unwrap_or(34.0);
            // Initialisation writes every array page once; a lookup makes the workload's own
            // mean count (its binary search, then five loads per nuclide of the material).
            let init = xsbench_array_pages(isotopes, grid);
            let (iso, points) = (isotopes as u64, grid as u64);
            let reads = lookups * crate::xsbench::accesses_per_lookup(iso, points);
            // Compute charged per nuclide read and per page initialised, spread over threads.
            let nuclides = lookups * crate::xsbench::nuclides_per_lookup(iso);
            let cycles = nuclides * num(w, "compute_cycles_per_nuclide").unwrap_or(20.0)
                + init * num(w, "init_cycles_per_page").unwrap_or(3_000.0);
            let threads = num(w, "threads").unwrap_or(16.0).max(1.0);
            (init + reads, cycles / ghz / threads)
        }
        "cache" => {
            let requests = num(w, "requests").unwrap_or(1e6);
            let threads = num(w, "threads").unwrap_or(1.0);
            let per = num(w, "anon_reads_per_request").unwrap_or(8.0)
                + num(w, "file_reads_per_request").unwrap_or(8.0);
            let compute = num(w, "compute_cycles_per_request").unwrap_or(0.0);
            (requests * threads * per, requests * compute / ghz)
        }
        "socket_pairs" => {
            let msgs = num(w, "messages").unwrap_or(0.0) * num(w, "pairs").unwrap_or(1.0);
            let bytes = num(w, "message_bytes").unwrap_or(4096.0);
            // Each message is copied in and out, a cache line at a time.
            (msgs * 2.0 * (bytes / 64.0).max(1.0), 0.0)
        }
        "kbuild" => {
            let compiles = num(w, "compiles").unwrap_or(0.0) * num(w, "instances").unwrap_or(1.0);
            let ms = num(w, "compile_ms").unwrap_or(790.0);
            let faults = num(w, "faults_per_s").unwrap_or(31_800.0) * ms / 1e3;
            let par = num(w, "jobs").unwrap_or(1.0).max(1.0);
            (compiles * faults, compiles * ms / 1e3 / par)
        }
        "scripted" => scripted(cfg, ghz),
        _ => (0.0, 0.0),
    }
}

/// A scripted workload: every phase's accesses times the threads running it, over its loops.
fn scripted(cfg: &Config, ghz: f64) -> (f64, f64) {
    let w = &cfg.workload;
    let threads = num(w, "threads").unwrap_or(1.0);
    let loops = num(w, "loops").unwrap_or(1.0).max(1.0);
    let region_pages = |name: Option<&str>| -> f64 {
        let regions = w.get("regions").and_then(|v| v.as_array());
        regions
            .into_iter()
            .flatten()
            .filter_map(|r| r.as_table())
            .filter(|r| name.is_none() || r.get("name").and_then(|v| v.as_str()) == name)
            .map(|r| num(r, "size_mib").unwrap_or(0.0) * 256.0)
            .fold(0.0, f64::max)
    };
    let (mut acc, mut secs) = (0.0, 0.0);
    let phases = w.get("phases").and_then(|v| v.as_array());
    for p in phases.into_iter().flatten().filter_map(|p| p.as_table()) {
        let n = p
            .get("threads")
            .and_then(|v| v.as_array())
            .map_or(threads, |a| a.len() as f64);
        let pages = num(p, "pages")
            .unwrap_or_else(|| region_pages(p.get("region").and_then(|v| v.as_str())));
        let kind = p.get("kind").and_then(|v| v.as_str()).unwrap_or("");
        match kind {
            "random" => {
                let count = num(p, "count").unwrap_or_else(|| {
                    num(p, "duration_ms").unwrap_or(0.0) / 1e3 * num(p, "rate_per_s").unwrap_or(0.0)
                });
                acc += count * n;
                secs += num(p, "duration_ms").unwrap_or(0.0) / 1e3;
                // A thread's accesses run one after another, each after its gap.
                secs += count * num(p, "gap_cycles").unwrap_or(0.0) / ghz;
            }
            "stream" => {
                let stride = num(p, "stride_bytes").unwrap_or(64.0).max(1.0);
                acc += pages * 4096.0 / stride * n;
            }
            "sleep" => secs += num(p, "ms").unwrap_or(0.0) / 1e3,
            _ => acc += pages * n,
        }
    }
    // A `[[workload.loop]]` repeats some phases: bound it by repeating them all.
    let times = w
        .get("loop")
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|l| l.as_table())
        .filter_map(|l| num(l, "times"))
        .fold(1.0, f64::max);
    (acc * loops * times, secs * loops * times)
}

/// The run's estimate: accesses, and simulated seconds from the accesses' memory latency
/// (spread over the CPUs that run them) plus the workload's explicit durations.
pub fn estimate(cfg: &Config) -> Estimate {
    let (accesses, explicit) = accesses_and_seconds(cfg);
    let m = &cfg.machine;
    let latency = m
        .nodes
        .iter()
        .map(|n| n.read_latency_ns.max(n.write_latency_ns))
        .fold(0.0, f64::max);
    let parallel = (m.cpus as f64).max(1.0);
    let mut sim_seconds = explicit + accesses * latency / m.mlp.max(1.0) / parallel / 1e9;
    let mut accesses = accesses;
    let max = cfg.sim.max_seconds;
    let capped = max > 0.0 && sim_seconds > max;
    if capped {
        accesses *= max / sim_seconds;
        sim_seconds = max;
    }
    Estimate {
        accesses,
        sim_seconds,
        capped,
    }
}

/// Pages the workload's data occupies when every byte is touched: the scripted regions, the
/// cache's file and heap, the XSBench grids; None when the workload type does not say (the
/// caller then assumes the whole machine). It bounds the frames a run initialises, since the
/// frame table grows with what is used (tierlab's mm/sparse.rs).
pub fn footprint_pages(cfg: &Config) -> Option<f64> {
    let w = &cfg.workload;
    match w.get("type").and_then(|v| v.as_str()).unwrap_or("") {
        "scripted" => {
            let regions = w.get("regions").and_then(|v| v.as_array());
            let pages = (regions.into_iter().flatten().filter_map(|r| r.as_table()))
                .map(|r| {
                    num(r, "size_mib").map(|m| m * 256.0).unwrap_or_else(|| {
                        num(r, "size_kib").map_or(num(r, "pages").unwrap_or(0.0), |k| k / 4.0)
                    })
                })
                .sum::<f64>();
            Some(pages)
        }
        "cache" => {
            let threads = num(w, "threads").unwrap_or(1.0).max(1.0);
            let file = num(w, "file_mib").unwrap_or(1024.0);
            let anon = num(w, "anon_mib").unwrap_or(1024.0);
            Some((file + anon * threads) * 256.0)
        }
        "xsbench" => {
            let (isotopes, grid) = xsbench_grid(w);
            Some(xsbench_array_pages(isotopes, grid))
        }
        _ => None,
    }
}
