//! The timed loop's lookup (`calculate_macro_xs` with the unionized grid: `grid_search`, then
//! `calculate_micro_xs` for each nuclide of the picked material) as loads and compute.

use rand_chacha::rand_core::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tierlab::workload::{Mark, Op, OpBuf};

use super::config::XsbenchConfig;
use super::layout::{XsbenchLayout, NGP_BYTES};
use super::materials::{material_nuclides, num_nucs, pick_mat_thresholds};
use super::PAGE;

/// Offset of the `nu_fission_xs` field (the last one) inside a `NuclideGridPoint`.
const NGP_LAST_FIELD: u64 = 40;

/// Text pages fetched in the timed loop: `run_history_based_simulation` + `pick_mat` + the LCG,
/// `calculate_macro_xs` + `grid_search`, and `calculate_micro_xs`. Page 0 holds `main`/startup.
const LOOKUP_CODE_PAGES: [u64; 3] = [1, 2, 3];

/// One nuclide of one material, with its addresses precomputed.
#[derive(Clone, Copy, Debug)]
struct NucEntry {
    /// `&mats[mat*max_num_nucs + j]`.
    mats: u64,
    /// `&concs[mat*max_num_nucs + j]`.
    concs: u64,
    /// `nuc * 4`: offset of this nuclide inside an index_grid row.
    ig_off: u64,
    /// `&nuclide_grid[nuc*n_gridpoints]`.
    ng_block: u64,
}

/// What every thread's lookups read (built once, cloned per thread).
#[derive(Clone)]
pub(super) struct Tables {
    entries: Vec<NucEntry>,
    /// `entries[mat_range[m].0 .. mat_range[m].1]` are material `m`'s nuclides.
    mat_range: [(u32, u32); 12],
    thresholds: [f64; 12],
    n_unionized: u64,
    n_gridpoints: u64,
    egrid: u64,
    ig: u64,
    ig_row_bytes: u64,
    num_nucs_addr: u64,
    code: [u64; LOOKUP_CODE_PAGES.len()],
    compute: u32,
}

impl Tables {
    pub fn new(cfg: &XsbenchConfig, l: &XsbenchLayout) -> Self {
        let nn = num_nucs(l.n_isotopes);
        let mats = material_nuclides(l.n_isotopes);
        let mut entries = Vec::new();
        let mut mat_range = [(0u32, 0u32); 12];
        for m in 0..12 {
            debug_assert_eq!(mats[m].len(), nn[m] as usize);
            let a = entries.len() as u32;
            for (j, &nuc) in mats[m].iter().enumerate() {
                let k = m as u64 * l.max_num_nucs + j as u64;
                entries.push(NucEntry {
                    mats: l.mats_addr + k * 4,
                    concs: l.concs_addr + k * 8,
                    ig_off: nuc as u64 * 4,
                    ng_block: l.nuclide_grid_addr + nuc as u64 * l.n_gridpoints * NGP_BYTES,
                });
            }
            mat_range[m] = (a, entries.len() as u32);
        }
        Tables {
            entries,
            mat_range,
            thresholds: pick_mat_thresholds(),
            n_unionized: l.n_unionized,
            n_gridpoints: l.n_gridpoints,
            egrid: l.energy_addr,
            ig: l.index_grid_addr,
            ig_row_bytes: l.n_isotopes * 4,
            num_nucs_addr: l.num_nucs_addr,
            code: LOOKUP_CODE_PAGES.map(|p| l.text.start + p * PAGE + 0x40),
            compute: cfg.compute_cycles_per_nuclide,
        }
    }
}

impl Tables {
    /// The mean number of loads and fetches of one lookup (`emit`): the code fetch, the
    /// binary search's probes (about log2 of the unionized grid), the `num_nucs` load, and
    /// five loads per nuclide of the material, weighted by `pick_mat`'s probabilities. An
    /// estimate (the probe count varies by one), for the progress bar only.
    pub fn mean_accesses_per_lookup(&self) -> f64 {
        let nucs = self.mat_range.map(|(a, b)| b - a);
        accesses_per_lookup(self.n_unionized, nucs)
    }
}

/// `Tables::mean_accesses_per_lookup` for a unionized grid of `n_unionized` points and
/// materials of `nucs` nuclides each.
pub(super) fn accesses_per_lookup(n_unionized: u64, nucs: [u32; 12]) -> f64 {
    let probes = ((n_unionized.max(2) - 1) as f64).log2().ceil();
    1.0 + probes + 1.0 + 5.0 * nuclides_per_lookup(nucs)
}

/// The mean nuclides one lookup reads: `pick_mat`'s probabilities over the materials' sizes.
pub(super) fn nuclides_per_lookup(nucs: [u32; 12]) -> f64 {
    (nucs.iter())
        .zip(super::materials::pick_mat_probabilities())
        .map(|(&n, p)| p * n as f64)
        .sum()
}

/// One thread's lookups: the tables and the thread's own random numbers.
pub(super) struct Lookups {
    t: Tables,
    rng: ChaCha8Rng,
    /// Next entry of `t.code` to fetch.
    rot: usize,
}

#[inline]
fn unit_f64(rng: &mut ChaCha8Rng) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

impl Lookups {
    /// Thread `thread`'s lookups: stream `thread` of the run's seed.
    pub fn new(tables: Tables, seed: u64, thread: u64) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(thread);
        Lookups {
            t: tables,
            rng,
            rot: 0,
        }
    }

    #[inline]
    fn pick_mat(&mut self) -> usize {
        let roll = unit_f64(&mut self.rng);
        for i in 0..12 {
            if roll < self.t.thresholds[i] {
                return i;
            }
        }
        0
    }

    /// One history-mode lookup: `calculate_macro_xs` with the unionized grid.
    #[inline]
    pub fn emit(&mut self, out: &mut OpBuf) {
        out.push(Op::IFetch(self.t.code[self.rot]));
        self.rot += 1;
        if self.rot == self.t.code.len() {
            self.rot = 0;
        }

        let p_energy = unit_f64(&mut self.rng);
        let mat = self.pick_mat();

        // grid_search(n_isotopes*n_gridpoints, p_energy, egrid), loop exactly as XSBench's. The
        // sorted unionized energies are modelled as uniform on [0,1): A[k] ~ k/n, hence
        // A[k] > quarry <=> k > quarry*n. One 8-byte load per probe.
        let t = &self.t;
        let n = t.n_unionized;
        let qn = p_energy * n as f64;
        let mut lower: u64 = 0;
        let mut upper: u64 = n - 1;
        let mut length = upper - lower;
        while length > 1 {
            let exam = lower + length / 2;
            out.push(Op::Load(t.egrid + exam * 8));
            if exam as f64 > qn {
                upper = exam;
            } else {
                lower = exam;
            }
            length = upper - lower;
        }
        let idx = lower;

        // Loop bound num_nucs[mat].
        out.push(Op::Load(t.num_nucs_addr + mat as u64 * 4));

        // Position of p_energy in each nuclide's own sorted grid (also uniform), with
        // calculate_micro_xs's "if index == n_gridpoints-1 then index-1" rule.
        let ng = t.n_gridpoints;
        let mut low = ((p_energy * ng as f64) as u64).min(ng - 1);
        if low == ng - 1 {
            low -= 1;
        }
        let low_off = low * NGP_BYTES;
        let row = t.ig + idx * t.ig_row_bytes;

        let (a, b) = t.mat_range[mat];
        let compute = t.compute;
        for e in &t.entries[a as usize..b as usize] {
            out.push(Op::Load(e.mats));
            out.push(Op::Load(e.concs));
            out.push(Op::Load(row + e.ig_off));
            let lo = e.ng_block + low_off;
            // low->energy ... and high->nu_fission_xs: the 96 contiguous bytes of low and high
            // are covered from their first to their last field (so a span crossing a page is
            // seen on both pages).
            out.push(Op::Load(lo));
            out.push(Op::Load(lo + NGP_BYTES + NGP_LAST_FIELD));
            out.push(Op::Compute(compute));
        }
        out.push(Op::Mark(Mark::Work(1)));
    }
}
