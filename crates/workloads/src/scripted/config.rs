//! The `[workload]` table of a scripted scenario as serde types it, and the checks of its
//! top-level keys (type, threads, processes, loops, placement).

use serde::Deserialize;
use tierlab::config::{typed, ConfigError};
use tierlab::workload::{prot, Placement};

use super::Keyed;

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
    #[serde(default)]
    pub phases: Vec<PhaseCfg>,
    #[serde(default, rename = "loop")]
    pub groups: Vec<LoopCfg>,
    /// Sub-ranges of regions whose per-node residency the timeline also reports.
    #[serde(default)]
    pub watch: Vec<WatchCfg>,
}

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

#[derive(Deserialize)]
#[serde(untagged)]
pub(super) enum PlacementCfg {
    Named(String),
    Cpus(Vec<u32>),
}

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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PhaseCfg {
    pub name: Option<String>,
    pub kind: String,
    pub region: Option<String>,
    pub threads: Option<Vec<u32>>,
    pub offset_pages: Option<u64>,
    pub pages: Option<u64>,
    pub write: Option<bool>,
    pub write_fraction: Option<f64>,
    pub order: Option<String>,
    pub distribution: Option<String>,
    pub zipf_s: Option<f64>,
    pub hot: Option<String>,
    pub count: Option<u64>,
    pub duration_ms: Option<f64>,
    pub rate_per_s: Option<f64>,
    pub gap_cycles: Option<u32>,
    pub stride_bytes: Option<u64>,
    pub advice: Option<String>,
    pub node: Option<u32>,
    pub prot: Option<String>,
    pub ms: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LoopCfg {
    pub times: u64,
    pub phases: Vec<String>,
}

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

pub(super) const REGION_KINDS: &[&str] = &[
    "touch",
    "random",
    "stride",
    "madvise",
    "move_pages",
    "mprotect",
    "mmap",
    "munmap",
];

/// Which optional phase keys each kind accepts (name, kind and threads are always accepted).
pub(super) fn allowed(kind: &str) -> &'static [&'static str] {
    const RANGE: [&str; 3] = ["region", "offset_pages", "pages"];
    match kind {
        "touch" => &[
            "region",
            "offset_pages",
            "pages",
            "write",
            "order",
            "rate_per_s",
            "gap_cycles",
        ],
        "random" => &[
            "region",
            "offset_pages",
            "pages",
            "write",
            "write_fraction",
            "distribution",
            "zipf_s",
            "hot",
            "count",
            "duration_ms",
            "rate_per_s",
            "gap_cycles",
        ],
        "stride" => &[
            "region",
            "offset_pages",
            "pages",
            "write",
            "stride_bytes",
            "rate_per_s",
            "gap_cycles",
        ],
        "madvise" => &["region", "offset_pages", "pages", "advice"],
        "move_pages" => &["region", "offset_pages", "pages", "node"],
        "mprotect" => &["region", "offset_pages", "pages", "prot"],
        "mmap" | "munmap" => &RANGE,
        "sleep" => &["ms"],
        _ => &[],
    }
}

pub(super) fn present(p: &PhaseCfg) -> [(&'static str, bool); 18] {
    [
        ("region", p.region.is_some()),
        ("offset_pages", p.offset_pages.is_some()),
        ("pages", p.pages.is_some()),
        ("write", p.write.is_some()),
        ("write_fraction", p.write_fraction.is_some()),
        ("order", p.order.is_some()),
        ("distribution", p.distribution.is_some()),
        ("zipf_s", p.zipf_s.is_some()),
        ("hot", p.hot.is_some()),
        ("count", p.count.is_some()),
        ("duration_ms", p.duration_ms.is_some()),
        ("rate_per_s", p.rate_per_s.is_some()),
        ("gap_cycles", p.gap_cycles.is_some()),
        ("stride_bytes", p.stride_bytes.is_some()),
        ("advice", p.advice.is_some()),
        ("node", p.node.is_some()),
        ("prot", p.prot.is_some()),
        ("ms", p.ms.is_some()),
    ]
}

/// Type the `[workload]` table and check its top-level numbers.
pub(super) fn parse(table: &toml::Table, origin: &str) -> Result<Cfg, ConfigError> {
    let e = Keyed(origin);
    let cfg: Cfg = typed(toml::Value::Table(table.clone()), origin, "workload")?;
    if cfg.kind != "scripted" {
        return Err(e.at(
            "workload.type",
            format!("expected \"scripted\", got {:?}", cfg.kind),
        ));
    }
    if cfg.threads == 0 {
        return Err(e.at("workload.threads", "must be at least 1"));
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
    Ok(cfg)
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
