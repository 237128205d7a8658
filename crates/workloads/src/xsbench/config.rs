//! The run's parameters: H-M size, gridpoints, threads, particles, and the compute costs the
//! simulator charges besides the emitted memory ops.

use tierlab::workload::Placement;

/// H-M benchmark size (`-s`). XL/XXL only change `n_gridpoints`; use `gridpoints` for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// 68 isotopes.
    Small,
    /// 355 isotopes (XSBench's default).
    Large,
}

impl Size {
    pub fn n_isotopes(self) -> u64 {
        match self {
            Size::Small => 68,
            Size::Large => 355,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Size::Small => "small",
            Size::Large => "large",
        }
    }
}

/// XSBench's default `n_gridpoints` (small and large).
pub const DEFAULT_GRIDPOINTS: u64 = 11_303;

#[derive(Clone, Debug)]
pub struct XsbenchConfig {
    pub size: Size,
    /// `-g`: overrides `n_gridpoints` (default 11,303).
    pub gridpoints: Option<u64>,
    /// Multiplies `n_gridpoints` (rounded, at least 2) to shrink or grow the footprint.
    pub scale: f64,
    /// `-t`.
    pub threads: u32,
    /// `-p`: particle histories.
    pub particles: u64,
    /// `-l`: lookups per particle.
    pub lookups_per_particle: u32,
    pub seed: u64,
    pub placement: Placement,
    /// Arithmetic of one nuclide in the lookup: `calculate_micro_xs` (one division for the
    /// interpolation factor, 5 x (sub, mul, sub)) plus the 5 multiply-adds into `macro_xs_vector`
    /// and the index arithmetic / loop control: ~35-40 instructions. At a typical IPC of ~2 that
    /// is ~20 cycles (default). Memory stalls are not included: the simulator charges them for the
    /// emitted loads.
    pub compute_cycles_per_nuclide: u32,
    /// Cost of filling one 4 KiB page during init, apart from the one emitted store. Nuclide grid:
    /// 512 doubles per page, each one step of a serially dependent 64-bit LCG (imul 3 + add 1 +
    /// mask 1 = ~5 cycles) = ~2,560 cycles; index grid: 1,024 ints per page at ~2 cycles (compare
    /// with `energy_high[i]`, branch, store) = ~2,050 cycles; plus ~500 cycles for the 63 further
    /// cache-line writes of the page that are not emitted as ops. Default 3,000.
    pub init_cycles_per_page: u32,
}

impl Default for XsbenchConfig {
    fn default() -> Self {
        XsbenchConfig {
            size: Size::Large,
            gridpoints: None,
            scale: 1.0,
            threads: 16,
            particles: 50_000,
            lookups_per_particle: 34,
            seed: 42,
            placement: Placement::Spread,
            compute_cycles_per_nuclide: 20,
            init_cycles_per_page: 3_000,
        }
    }
}

impl XsbenchConfig {
    /// Effective `n_gridpoints`.
    pub fn n_gridpoints(&self) -> u64 {
        let g = self.gridpoints.unwrap_or(DEFAULT_GRIDPOINTS) as f64 * self.scale;
        // At least 2: the kernel reads gridpoints `low` and `low+1`.
        (g.round() as u64).max(2)
    }
    pub fn total_lookups(&self) -> u64 {
        self.particles * self.lookups_per_particle as u64
    }
}
