//! Before a run: its estimated size (accesses, simulated seconds, timeline samples, host memory
//! for the frame table and page tables, which grow with the memory the workload uses: the
//! section pointer table for the whole machine, frames only where used). A machine that cannot fit in the host's memory is
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
/// whose workload gives no footprint (pcp_kbuild, 256 GiB simulated: 4 GiB estimated; 2.2 GB
/// measured with every frame initialised at boot, 288 MiB with sections made as used).
pub const MAX_HOST_BYTES: f64 = 8.0 * GIB;
/// Host bytes per simulated 4 KiB frame the run initialises: the 32-byte struct page, an
/// 8-byte PTE and the LRU, reverse-map and per-node bookkeeping a mapped page carries
/// (measured: pcp_kbuild's max RSS was 2.2 GB for 67M frames, 33 bytes each, when every frame
/// was initialised at boot; 64 leaves room for mapped pages).
pub const HOST_BYTES_PER_FRAME: f64 = 64.0;
/// Host bytes of one entry of the section pointer table (a boxed slice), present or not.
pub const HOST_BYTES_PER_SECTION: f64 = 16.0;
/// Frames per section (PAGES_PER_SECTION): a touched frame initialises its whole section.
const FRAMES_PER_SECTION: f64 = tierlab::mm::sparse::PAGES_PER_SECTION as f64;
/// Frames boot may take besides reserved_mib and the pagesets: the x86 lower zones' free
/// pages set aside (ZONE_DMA32 ends at 4 GiB).
const BOOT_FRAMES: f64 = (1u64 << 20) as f64;
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

/// Frames the run may initialise: those boot takes, and twice the workload's footprint (a
/// page may live on two nodes in turn, and freed frames are not always reused), each rounded
/// up to whole sections per node; the whole machine when the workload does not say.
pub fn touched_frames(cfg: &Config) -> f64 {
    let nodes = &cfg.machine.nodes;
    let capacity: f64 = nodes.iter().map(|n| n.capacity_mib as f64 * 256.0).sum();
    let Some(footprint) = workloads::estimate::footprint_pages(cfg) else {
        return capacity;
    };
    let boot: f64 = nodes
        .iter()
        .map(|n| {
            n.reserved_mib as f64 * 256.0 + n.boot_pcp_count.iter().map(|&c| c as f64).sum::<f64>()
        })
        .sum::<f64>()
        + BOOT_FRAMES;
    let rounding = 2.0 * nodes.len() as f64 * FRAMES_PER_SECTION;
    (2.0 * footprint + boot + rounding).min(capacity)
}

/// Host bytes the simulated machine's frame table and page tables need: the section pointer
/// table for the whole machine, and the frames the run may initialise.
pub fn host_bytes(cfg: &Config) -> f64 {
    let capacity: f64 = (cfg.machine.nodes.iter())
        .map(|n| n.capacity_mib as f64 * 256.0)
        .sum();
    (capacity / FRAMES_PER_SECTION).ceil() * HOST_BYTES_PER_SECTION
        + touched_frames(cfg) * HOST_BYTES_PER_FRAME
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
            "the frame table and page tables of the {:.0} MiB this run may touch, of {} MiB \
             of simulated memory, need about {} of host memory ({} bytes per 4 KiB frame \
             used), more than the {} this host has free ({source}); shrink the workload or \
             capacity_mib",
            touched_frames(cfg) / 256.0,
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

    /// The lazy frame table: a 1 TiB or 4 TiB machine whose workload touches 4 GiB needs the
    /// section pointers and the touched frames, not 64 bytes for each of 2^28 or 2^30 frames.
    #[test]
    fn a_big_machine_needs_what_its_workload_touches() {
        let big = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/big_machine.toml");
        for cxl_mib in [786_432u64, 3_932_160] {
            let sets = [format!("machine.nodes.1.capacity_mib={cxl_mib}")];
            let cfg = Config::load(&big, &sets).unwrap();
            let need = host_bytes(&cfg);
            assert!(need < 0.5 * GIB, "{} GiB", need / GIB);
            // 4 GiB written: the frames of twice that and boot's, within whole sections
            let touched = touched_frames(&cfg);
            assert!((2.0 * 4.0 * 262_144.0..4.0 * 1_048_576.0).contains(&touched));
            assert!(over_thresholds(&cfg).is_empty());
        }
        // A workload type without a footprint: the whole machine, as before.
        let xs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scenarios/pcp_kbuild.toml");
        let cfg = Config::load(&xs, &[]).unwrap();
        let mib: u64 = cfg.machine.nodes.iter().map(|n| n.capacity_mib).sum();
        assert_eq!(touched_frames(&cfg), mib as f64 * 256.0);
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
