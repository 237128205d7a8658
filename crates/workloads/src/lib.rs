//! Workload generators: each turns its `[workload]` table into threads of operations.

use tierlab::config::ConfigError;
use tierlab::workload::Workload;
use tierlab::Config;

pub mod cache;
pub mod estimate;
pub mod kbuild;
pub mod limits;
pub mod scripted;
pub mod socket_pairs;
pub mod xsbench;

/// Build the workload a scenario's `[workload]` table describes.
pub fn build(cfg: &Config, origin: &str) -> Result<Workload, ConfigError> {
    let kind = cfg
        .workload
        .get("type")
        .and_then(|v| v.as_str())
        .unwrap_or("")
        .to_string();
    let bad = |key: &str, msg: String| ConfigError::key(origin, format!("workload.{key}"), msg);
    match kind.as_str() {
        "xsbench" => {
            xsbench::from_table(&cfg.workload, origin, cfg.scenario.seed, cfg.machine.cpus)
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
        "socket_pairs" => socket_pairs::build(&cfg.workload, origin, cfg.machine.cpus),
        "kbuild" => kbuild::build(
            &cfg.workload,
            origin,
            cfg.machine.cpus,
            cfg.machine.cpu_ghz,
        ),
        other => Err(bad(
            "type",
            format!(
                "unknown workload '{other}' (available: xsbench, scripted, cache, socket_pairs, kbuild)"
            ),
        )),
    }
}
