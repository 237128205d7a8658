//! The `[workload]` table of a scripted scenario as serde types it, and the checks of its
//! top-level keys (type, threads, processes, loops, placement).

use serde::Deserialize;
use tierlab::config::{typed, ConfigError};
use tierlab::workload::{prot, Placement};

use super::phase_keys::PhaseCfg;
use super::Keyed;

/// `[workload]` with `type = "scripted"`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Cfg {
    #[serde(rename = "type")]
    pub kind: String,
    pub name: Option<String>,
    #[serde(default = "one")]
    pub threads: u32,
    pub placement: Option<PlacementCfg>,
    #[serde(default = "one")]
    pub processes: u32,
    #[serde(default = "one64")]
    pub loops: u64,
    #[serde(default)]
    pub regions: Vec<RegionCfg>,
    /// Typed one by one by `PhaseCfg::parse`: an error inside a serde-tagged enum would lose
    /// its key path.
    #[serde(default)]
    pub phases: Vec<toml::Table>,
    #[serde(default, rename = "loop")]
    pub groups: Vec<LoopCfg>,
    /// Sub-ranges of regions whose per-node residency the timeline also reports.
    #[serde(default)]
    pub watch: Vec<WatchCfg>,
    /// A background process beside the workload, as `tierlab validate`'s sampler.
    pub sampler: Option<SamplerCfg>,
}

/// `[workload.sampler]`: a process of its own that wakes every `interval_ms` and runs for
/// `cpu_us`, then reads the workload's /proc/PID/numa_maps at `page_ns` per page it maps (a
/// THP mapped by a PMD counting as one), `samples` times (`tierlab validate` sets them from
/// its sampler's measured CPU time per sample, the load the harness puts on the guest).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct SamplerCfg {
    pub interval_ms: f64,
    pub cpu_us: f64,
    #[serde(default)]
    pub page_ns: f64,
    pub samples: u64,
}

impl SamplerCfg {
    /// Checked against what `Op::Pace` can express and what a sampler can be.
    pub fn check(&self, origin: &str) -> Result<(), ConfigError> {
        let bad = |key: &str, why: String| {
            Err(ConfigError::key(
                origin,
                format!("workload.sampler.{key}"),
                why,
            ))
        };
        if !(self.interval_ms > 0.0 && self.interval_ms <= 4000.0) {
            return bad(
                "interval_ms",
                format!("{} is not in (0, 4000]", self.interval_ms),
            );
        }
        if !(self.cpu_us >= 0.0 && self.cpu_us < self.interval_ms * 1e3) {
            return bad(
                "cpu_us",
                format!("{} is not in [0, interval_ms × 1000)", self.cpu_us),
            );
        }
        if !(self.page_ns >= 0.0 && self.page_ns <= 1e6) {
            return bad(
                "page_ns",
                format!("{} is not in [0, 1000000]", self.page_ns),
            );
        }
        // Two ops a sample, held in memory: a million is a day of 100 ms samples.
        if self.samples > 1_000_000 {
            return bad("samples", format!("{} is above 1,000,000", self.samples));
        }
        Ok(())
    }
}

/// `[[workload.watch]]`: a sub-range of a region the timeline reports on its own.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct WatchCfg {
    pub name: String,
    pub region: String,
    #[serde(default)]
    pub offset_pages: u64,
    pub pages: Option<u64>,
}

fn one() -> u32 {
    1
}
fn one64() -> u64 {
    1
}

/// `placement`: "spread", "pinned" or one CPU id per thread.
#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum PlacementCfg {
    Named(String),
    Cpus(Vec<u32>),
}

/// `[[workload.regions]]`: one mapping, sized by exactly one of size_mib / size_kib / pages.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RegionCfg {
    pub name: String,
    pub size_mib: Option<u64>,
    pub size_kib: Option<u64>,
    pub pages: Option<u64>,
    pub kind: Option<String>,
    pub prot: Option<String>,
    pub node: Option<u32>,
}

/// `[[workload.loop]]`: phases (by name) repeated `times` times.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LoopCfg {
    pub times: u64,
    pub phases: Vec<String>,
}

/// A `prot` value ("none", "r", "rw", "rx", "rwx") as `prot` bits.
pub(super) fn parse_prot(s: &str) -> Option<u8> {
    Some(match s {
        "none" => 0,
        "r" => prot::READ,
        "rw" => prot::READ | prot::WRITE,
        "rx" => prot::READ | prot::EXEC,
        "rwx" => prot::READ | prot::WRITE | prot::EXEC,
        _ => return None,
    })
}

/// Type the `[workload]` table, its phases by kind, and check its top-level numbers.
pub(super) fn parse(
    table: &toml::Table,
    origin: &str,
) -> Result<(Cfg, Vec<PhaseCfg>), ConfigError> {
    let e = Keyed(origin);
    let mut cfg: Cfg = typed(toml::Value::Table(table.clone()), origin, "workload")?;
    let phases = std::mem::take(&mut cfg.phases)
        .into_iter()
        .enumerate()
        .map(|(i, t)| PhaseCfg::parse(t, i, origin))
        .collect::<Result<Vec<_>, _>>()?;
    if cfg.kind != "scripted" {
        return Err(e.at(
            "workload.type",
            format!("expected \"scripted\", got {:?}", cfg.kind),
        ));
    }
    if let Err(m) = crate::limits::check_threads(cfg.threads) {
        return Err(e.at("workload.threads", &m));
    }
    if let Some(sampler) = &cfg.sampler {
        sampler.check(origin)?;
    }
    if cfg.processes != 1 {
        return Err(e.at(
            "workload.processes",
            "scripted workloads support exactly 1 process",
        ));
    }
    if cfg.loops == 0 {
        return Err(e.at("workload.loops", "must be at least 1"));
    }
    Ok((cfg, phases))
}

/// Where each thread runs.
pub(super) fn placements(
    cfg: &Cfg,
    cpus: u32,
    origin: &str,
) -> Result<Vec<Placement>, ConfigError> {
    let e = Keyed(origin);
    let nthreads = cfg.threads;
    Ok(match &cfg.placement {
        None => vec![Placement::Spread; nthreads as usize],
        Some(PlacementCfg::Named(s)) if s == "spread" => vec![Placement::Spread; nthreads as usize],
        Some(PlacementCfg::Named(s)) if s == "pinned" => {
            if nthreads > cpus {
                return Err(e.at(
                    "workload.placement",
                    format!(
                        "\"pinned\" puts thread i on CPU i, but {nthreads} threads > {cpus} CPUs"
                    ),
                ));
            }
            (0..nthreads).map(Placement::Pinned).collect()
        }
        Some(PlacementCfg::Named(s)) => {
            return Err(e.at(
                "workload.placement",
                format!(
                "unknown placement {s:?} (expected \"spread\", \"pinned\" or a list of CPU ids)"
            ),
            ))
        }
        Some(PlacementCfg::Cpus(list)) => {
            if list.len() != nthreads as usize {
                return Err(e.at(
                    "workload.placement",
                    format!("{} CPU ids for {nthreads} threads", list.len()),
                ));
            }
            for (i, &c) in list.iter().enumerate() {
                if c >= cpus {
                    return Err(e.at(
                        format!("workload.placement[{i}]"),
                        format!("CPU {c} does not exist (the machine has {cpus} CPUs)"),
                    ));
                }
            }
            list.iter().map(|&c| Placement::Pinned(c)).collect()
        }
    })
}
