//! Before a run: its estimated size (accesses, simulated seconds, timeline samples, host memory
//! for the frame table and page tables). A machine that cannot fit in the host's memory is
//! refused outright; a run above the thresholds below is refused unless `--yes` is given or
//! `sim.max_seconds` bounds it, so a mistyped count fails in a second instead of running for
//! hours. Every shipped scenario, and `tierlab run` with no arguments, is far below them.

use tierlab::config::ConfigError;
use tierlab::Config;

/// Accesses a run may make unprompted: the largest shipped scenario (xsbench-tiered) is
/// estimated at 3e9, and the simulator does ~3e7 a second, so 5e10 is about half an hour.
pub const MAX_ACCESSES: f64 = 5e10;
/// Simulated seconds a run may last unprompted (the shipped ones last under a minute).
pub const MAX_SIM_SECONDS: f64 = 3600.0;
/// Timeline samples a run may keep unprompted: each holds every node and region, so a
/// million is about a gigabyte.
pub const MAX_SAMPLES: f64 = 1e6;
/// Host memory a run may need unprompted: twice the estimate for the largest shipped machine
/// (pcp_kbuild, 256 GiB simulated: 4 GiB estimated, 2.2 GB measured).
pub const MAX_HOST_BYTES: f64 = 8.0 * GIB;
/// Host bytes per simulated 4 KiB frame: the 32-byte struct page, an 8-byte PTE and the
/// LRU, reverse-map and per-node bookkeeping a mapped page carries (measured: pcp_kbuild's
/// max RSS is 2.2 GB for 67M frames, 33 bytes each; 64 leaves room for mapped pages).
pub const HOST_BYTES_PER_FRAME: f64 = 64.0;
/// When /proc/meminfo cannot be read: assume 8 GiB free, a small build machine.
pub const FALLBACK_HOST_BYTES: f64 = 8.0 * GIB;

const GIB: f64 = (1u64 << 30) as f64;

/// The host's MemAvailable, bytes, if /proc/meminfo says.
fn host_available() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024.0)
}

/// Host bytes the simulated machine's frames and page tables need.
pub fn host_bytes(cfg: &Config) -> f64 {
    let mib: f64 = cfg
        .machine
        .nodes
        .iter()
        .map(|n| n.capacity_mib as f64)
        .sum();
    mib * 256.0 * HOST_BYTES_PER_FRAME
}

fn gib(b: f64) -> String {
    format!("{:.1} GiB", b / GIB)
}

/// Refuse a run the host cannot hold, or (without `yes`) one above the thresholds.
pub fn check(cfg: &Config, origin: &str, sets: &[String], yes: bool) -> Result<(), String> {
    let need = host_bytes(cfg);
    let (avail, source) = match host_available() {
        Some(a) => (a, "MemAvailable in /proc/meminfo"),
        None => (FALLBACK_HOST_BYTES, "assumed: /proc/meminfo unreadable"),
    };
    if need > avail {
        let msg = format!(
            "the frame table and page tables of {} MiB of simulated memory need about {} of \
             host memory ({} bytes per 4 KiB frame), more than the {} this host has free \
             ({source}); shrink capacity_mib",
            cfg.machine
                .nodes
                .iter()
                .map(|n| n.capacity_mib)
                .fold(0u64, u64::saturating_add),
            gib(need),
            HOST_BYTES_PER_FRAME,
            gib(avail)
        );
        let e = ConfigError::key(origin, "machine.nodes", msg);
        return Err(tierlab::config::blame_set(e, sets).to_string());
    }
    let over = over_thresholds(cfg);
    if over.is_empty() || yes {
        return Ok(());
    }
    Err(format!(
        "{origin}: this run is large: {}. Rerun with --yes to run it anyway, or bound it with \
         sim.max_seconds (e.g. --set sim.max_seconds=10).",
        over.join(", ")
    ))
}

/// What in the run's estimate is above the thresholds, one phrase each.
fn over_thresholds(cfg: &Config) -> Vec<String> {
    let need = host_bytes(cfg);
    let est = workloads::estimate::estimate(cfg);
    let samples = est.sim_seconds * 1e3 / cfg.sim.timeline_interval_ms;
    let mut over = Vec::new();
    if est.accesses > MAX_ACCESSES {
        over.push(format!(
            "~{:.2e} accesses (limit {MAX_ACCESSES:.0e})",
            est.accesses
        ));
    }
    if est.sim_seconds > MAX_SIM_SECONDS {
        over.push(format!(
            "~{:.3e} simulated seconds (limit {MAX_SIM_SECONDS})",
            est.sim_seconds
        ));
    }
    if samples > MAX_SAMPLES {
        over.push(format!(
            "~{samples:.2e} timeline samples at sim.timeline_interval_ms = {} (limit {MAX_SAMPLES:.0e})",
            cfg.sim.timeline_interval_ms
        ));
    }
    if need > MAX_HOST_BYTES {
        over.push(format!(
            "~{} of host memory for the frames and page tables of `machine.nodes` (limit {})",
            gib(need),
            gib(MAX_HOST_BYTES)
        ));
    }
    over
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Every shipped scenario, and so the built-in default (scenarios/xsbench.toml), runs
    /// unprompted.
    #[test]
    fn shipped_scenarios_are_below_every_threshold() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios");
        let mut files: Vec<_> = ["", "validate"]
            .iter()
            .flat_map(|d| std::fs::read_dir(root.join(d)).unwrap())
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        assert!(files.len() >= 20, "{files:?}");
        for f in files {
            let cfg = Config::load(&f, &[]).unwrap();
            let over = over_thresholds(&cfg);
            assert!(over.is_empty(), "{}: {over:?}", f.display());
        }
    }

    #[test]
    fn a_huge_count_is_over_and_max_seconds_bounds_it() {
        let xs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/xsbench-small.toml");
        let huge = ["workload.particles=1000000000000".to_string()];
        let cfg = Config::load(&xs, &huge).unwrap();
        assert!(!over_thresholds(&cfg).is_empty());
        assert!(check(&cfg, "x", &[], false).unwrap_err().contains("--yes"));
        assert!(check(&cfg, "x", &[], true).is_ok());
        let bounded = [huge[0].clone(), "sim.max_seconds=1".to_string()];
        let cfg = Config::load(&xs, &bounded).unwrap();
        assert!(over_thresholds(&cfg).is_empty());
    }
}
