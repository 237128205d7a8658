//! Workload generators: each turns its `[workload]` table into threads of operations.

use serde::Deserialize;
use tierlab::config::{typed, ConfigError};
use tierlab::workload::{Placement, Workload};
use tierlab::Config;

pub mod cache;
pub mod scripted;
pub mod xsbench;

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

/// Build the workload a scenario's `[workload]` table describes.
pub fn build(cfg: &Config, origin: &str) -> Result<Workload, ConfigError> {
    let table = toml::Value::Table(cfg.workload.clone());
    let kind = cfg
        .workload
        .get("type")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string();
    let bad = |key: &str, msg: String| ConfigError::key(origin, format!("workload.{key}"), msg);
    match kind.as_str() {
        "xsbench" => {
            let t: XsbenchToml = typed(table, origin, "workload")?;
            let mut x = xsbench::XsbenchConfig {
                seed: cfg.scenario.seed,
                ..Default::default()
            };
            x.size = match t.size.as_str() {
                "small" => xsbench::Size::Small,
                "large" => xsbench::Size::Large,
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
            if t.threads == 0 {
                return Err(bad("threads", "must be ≥ 1".into()));
            }
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
            let mut w = xsbench::build(&x);
            if t.placement == "pinned" {
                let ncpu = cfg.machine.cpus;
                for (i, th) in w.threads.iter_mut().enumerate() {
                    th.placement = Placement::Pinned(i as u32 % ncpu);
                }
            }
            Ok(w)
        }
        "cache" => cache::build(&cfg.workload, origin, cfg.scenario.seed, cfg.machine.cpus),
        "scripted" => scripted::build(
            &cfg.workload,
            origin,
            cfg.scenario.seed,
            cfg.machine.nodes.len() as u32,
            cfg.machine.cpus,
            cfg.machine.cpu_ghz,
        ),
        other => Err(bad(
            "type",
            format!("unknown workload '{other}' (available: xsbench, scripted, cache)"),
        )),
    }
}
