//! The run's parameters (H-M size, gridpoints, threads, particles, and the compute costs the
//! simulator charges besides the emitted memory ops) and how a scenario's `[workload]` sets them.

use serde::Deserialize;
use tierlab::config::{typed, ConfigError};
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
        // Saturating: particles is any TOML integer, and --yes lets a huge run start.
        self.particles
            .saturating_mul(self.lookups_per_particle as u64)
    }
}

/// `[workload]` with `type = "xsbench"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct XsbenchToml {
    #[serde(rename = "type")]
    _type: String,
    #[serde(default = "large")]
    size: String,
    gridpoints: Option<u64>,
    #[serde(default = "one")]
    scale: f64,
    #[serde(default = "sixteen")]
    threads: u32,
    particles: Option<u64>,
    #[serde(default = "thirty_four")]
    lookups_per_particle: u32,
    /// "spread" (default) or "pinned" (thread i on CPU i mod CPUs).
    #[serde(default = "spread")]
    placement: String,
    compute_cycles_per_nuclide: Option<u32>,
    init_cycles_per_page: Option<u32>,
}

fn large() -> String {
    "large".into()
}
fn one() -> f64 {
    1.0
}
fn sixteen() -> u32 {
    16
}
fn thirty_four() -> u32 {
    34
}
fn spread() -> String {
    "spread".into()
}

impl XsbenchConfig {
    /// The run a scenario's `type = "xsbench"` table describes; `seed` is the scenario's. With
    /// `placement = "pinned"` every thread comes back `Pinned(0)`, to be spread over the CPUs.
    pub fn from_table(table: &toml::Table, origin: &str, seed: u64) -> Result<Self, ConfigError> {
        let bad = |key: &str, msg: String| ConfigError::key(origin, format!("workload.{key}"), msg);
        let t: XsbenchToml = typed(toml::Value::Table(table.clone()), origin, "workload")?;
        let mut x = XsbenchConfig {
            seed,
            ..Default::default()
        };
        x.size = match t.size.as_str() {
            "small" => Size::Small,
            "large" => Size::Large,
            s => {
                return Err(bad(
                    "size",
                    format!("'{s}': expected \"small\" or \"large\""),
                ))
            }
        };
        if !(t.scale > 0.0 && t.scale <= 100.0) {
            return Err(bad("scale", format!("{} must be in (0, 100]", t.scale)));
        }
        crate::limits::check_threads(t.threads).map_err(|m| bad("threads", m))?;
        if t.lookups_per_particle == 0 {
            return Err(bad("lookups_per_particle", "must be ≥ 1".into()));
        }
        if let Some(g) = t.gridpoints {
            if g < 2 {
                return Err(bad("gridpoints", "must be ≥ 2".into()));
            }
        }
        x.gridpoints = t.gridpoints;
        x.scale = t.scale;
        x.threads = t.threads;
        if let Some(p) = t.particles {
            x.particles = p;
        }
        x.lookups_per_particle = t.lookups_per_particle;
        x.placement = match t.placement.as_str() {
            "spread" => Placement::Spread,
            "pinned" => Placement::Pinned(0),
            s => {
                return Err(bad(
                    "placement",
                    format!("'{s}': expected \"spread\" or \"pinned\""),
                ))
            }
        };
        if let Some(v) = t.compute_cycles_per_nuclide {
            x.compute_cycles_per_nuclide = v;
        }
        if let Some(v) = t.init_cycles_per_page {
            x.init_cycles_per_page = v;
        }
        Ok(x)
    }
}
