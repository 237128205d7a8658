//! XSBench (ANL-CESAR/XSBench, `openmp-threading/`, version 20) as a tierlab workload.
//!
//! Models the default run: history-based simulation, unionized energy grid, H-M small or large.
//! Everything that decides the memory behaviour is taken from the real source:
//!
//! * sizes (`XSbench_header.h`, `GridInit.c`, `io.c`): `NuclideGridPoint` is 6 doubles (48 B);
//!   `nuclide_grid` has `n_isotopes*n_gridpoints` of them, the unionized energy array as many
//!   doubles, `index_grid` `n_isotopes` ints per unionized energy point;
//! * initialization order (`GridInit.c`): nuclide grid filled sequentially, unionized energy array,
//!   then `index_grid` row by row, single threaded, then `num_nucs`, `mats`, `concs`
//!   (`Materials.c`);
//! * material table (`Materials.c` `load_num_nucs` / `load_mats`) and `pick_mat` (`Simulation.c`);
//! * the lookup kernel (`calculate_macro_xs`, `grid_search`, `calculate_micro_xs`).
//!
//! Simplifications (each stated where it is made): the sorted energy arrays are modelled as uniform
//! on [0,1), so searches are resolved arithmetically; init is emitted page-granular (one store per
//! 4 KiB page plus a compute cost); particles are split statically over threads (the real loop is
//! `schedule(dynamic, 100)`); the random numbers come from ChaCha8, not XSBench's LCG (same
//! distributions, different values).

mod config;
mod grid_init;
mod layout;
mod lookup;
mod materials;
mod stream;
#[cfg(test)]
mod tests;

use tierlab::config::ConfigError;
use tierlab::workload::{
    Expected, FileSpec, Mark, Op, Placement, RegionSpec, ThreadSpec, ThreadStream, Workload,
};

pub use config::{Size, XsbenchConfig, DEFAULT_GRIDPOINTS};
pub use grid_init::QSORT_CYCLES_PER_COMPARE;
pub use layout::{
    estimate_mem_bytes, Region, XsbenchLayout, HEAP_BASE, MMAP_BASE, TEXT_BASE, TEXT_PAGES,
};
pub use materials::{material_nuclides, num_nucs, pick_mat_probabilities, MATERIAL_NAMES};

use grid_init::init_segments;
use lookup::{Lookups, Tables};
use stream::{Seg, XsStream};

const PAGE: u64 = 4096;

/// XSBench's `fancy_int`: thousands separators.
fn fancy_int(a: u64) -> String {
    let s = a.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Build from a scenario's `[workload]` table; "pinned" puts thread i on CPU i mod `cpus`.
pub fn from_table(
    table: &toml::Table,
    origin: &str,
    seed: u64,
    cpus: u32,
) -> Result<Workload, ConfigError> {
    let cfg = XsbenchConfig::from_table(table, origin, seed)?;
    let mut w = build(&cfg);
    if let Placement::Pinned(_) = cfg.placement {
        for (i, th) in w.threads.iter_mut().enumerate() {
            th.placement = Placement::Pinned(i as u32 % cpus);
        }
    }
    Ok(w)
}

/// The mean loads and fetches of one lookup for `n_isotopes` nuclides of `n_gridpoints` points
/// each (`Tables::mean_accesses_per_lookup`), without building the tables.
pub fn accesses_per_lookup(n_isotopes: u64, n_gridpoints: u64) -> f64 {
    lookup::accesses_per_lookup(n_isotopes * n_gridpoints, materials::num_nucs(n_isotopes))
}

/// The mean nuclides one lookup reads (each costs `compute_cycles_per_nuclide`).
pub fn nuclides_per_lookup(n_isotopes: u64) -> f64 {
    lookup::nuclides_per_lookup(materials::num_nucs(n_isotopes))
}

/// The workload: thread 0 initializes the data, then every thread runs its share of the
/// particles' lookups between `RoiBegin` and `RoiEnd`.
pub fn build(cfg: &XsbenchConfig) -> Workload {
    assert!(cfg.threads >= 1, "XSBench needs at least one thread");
    let l = XsbenchLayout::new(cfg);
    let tables = Tables::new(cfg, &l);
    let n = cfg.threads as u64;
    let p = cfg.particles;
    let lpp = cfg.lookups_per_particle as u64;

    // The progress bar's denominator: the initialisation's stores and the lookups' loads.
    let per_lookup = tables.mean_accesses_per_lookup();
    let mut expected = 0.0f64;
    let threads: Vec<ThreadSpec> = (0..cfg.threads)
        .map(|t| {
            let t64 = t as u64;
            let mut segs = if t == 0 {
                init_segments(cfg, &l)
            } else {
                Vec::new()
            };
            segs.push(Seg::Op(Op::Barrier));
            segs.push(Seg::Op(Op::Mark(Mark::RoiBegin)));
            // Static block split of the particle loop: [t*P/N, (t+1)*P/N).
            let first = t64 * p / n;
            let last = (t64 + 1) * p / n;
            segs.push(Seg::Lookups {
                count: (last - first) * lpp,
            });
            segs.push(Seg::Op(Op::Mark(Mark::RoiEnd)));
            segs.push(Seg::Op(Op::Exit));
            expected += segs
                .iter()
                .map(|s| s.expected_accesses(per_lookup))
                .sum::<f64>();
            let lookups = Lookups::new(tables.clone(), cfg.seed, t64);
            ThreadSpec {
                process: 0,
                placement: cfg.placement,
                stream: Box::new(XsStream::new(segs, lookups)) as Box<dyn ThreadStream>,
            }
        })
        .collect();
    let mem_mb = estimate_mem_bytes(cfg).div_ceil(1024 * 1024);
    let kv = |k: &str, v: String| (k.to_string(), v);
    // Note: real XSBench (v20) prints `in.lookups` as "Total XS Lookups", i.e. the per-particle
    // count in history mode; the actual total (particles x lookups) is reported here.
    let info = vec![
        kv("Simulation Method", "History Based".into()),
        kv("Grid Type", "Unionized Grid".into()),
        kv("Materials", "12".into()),
        kv("H-M Benchmark Size", cfg.size.name().into()),
        kv("Total Nuclides", l.n_isotopes.to_string()),
        kv("Gridpoints (per Nuclide)", fancy_int(l.n_gridpoints)),
        kv("Unionized Energy Gridpoints", fancy_int(l.n_unionized)),
        kv("Particle Histories", fancy_int(p)),
        kv("XS Lookups per Particle", fancy_int(lpp)),
        kv("Total XS Lookups", fancy_int(cfg.total_lookups())),
        kv("Threads", cfg.threads.to_string()),
        kv("Est. Memory Usage (MB)", fancy_int(mem_mb)),
        kv("Binary File Mode", "Off".into()),
    ];

    Workload {
        expected: Some(Expected::Accesses(expected as u64)),
        name: "XSBench".into(),
        work_unit: "lookups".into(),
        processes: 1,
        files: vec![FileSpec {
            name: "XSBench".into(),
            pages: TEXT_PAGES,
            shmem: false,
        }],
        threads,
        info,
        phases: vec![],
        regions: [
            ("nuclide_grid", l.nuclide_grid),
            ("unionized_energy_array", l.energy),
            ("index_grid", l.index_grid),
            ("heap (num_nucs, mats, concs)", l.heap),
        ]
        .into_iter()
        .map(|(name, r)| RegionSpec {
            name: name.into(),
            process: 0,
            start: r.start,
            len: r.len,
        })
        .collect(),
    }
}
