//! What `tierlab bench` reports besides the access rate: how long a run takes to start (load
//! the workload, boot the machine: everything before the first simulated access) and the
//! host memory it peaked at, so the figures for large machines in the README are the
//! benchmark's own.

use tierlab::{Config, RunResult, Simulation};

/// Run as `simulate_watched` does with a quiet watcher (Ctrl-C still ends the run cleanly),
/// also returning the wall seconds before the first simulated access (the workload built,
/// the machine booted, the run loop about to start).
pub fn simulate_timed(cfg: Config, origin: &str) -> Result<(RunResult, f64), String> {
    let started = std::time::Instant::now();
    let workload = workloads::build(&cfg, origin).map_err(|e| e.to_string())?;
    let mut sim = Simulation::new(cfg, workload).map_err(|e| format!("{origin}: {e}"))?;
    let startup = started.elapsed().as_secs_f64();
    let mut watcher = crate::watch::Watch::new(true, None);
    let result = sim.run_watched(&mut |s, now| watcher.look(s, now));
    watcher.finish();
    let result = result.map_err(|e| format!("{origin}: simulation stopped: {e}"))?;
    Ok((result, startup))
}

/// The process's peak resident set, bytes: VmHWM in /proc/self/status (getrusage's
/// ru_maxrss), if the host says.
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// One line: the start-up time and the peak RSS so far.
pub fn line(startup_seconds: f64) -> String {
    let rss = match peak_rss_bytes() {
        Some(b) => format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64),
        None => "unknown".into(),
    };
    format!("  startup {startup_seconds:.3} s before the first access, peak RSS {rss} (VmHWM)")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_peak_rss_is_read_on_linux() {
        if cfg!(target_os = "linux") {
            assert!(super::peak_rss_bytes().is_some_and(|b| b > 0));
        }
        assert!(super::line(0.5).contains("startup 0.500 s"));
    }
}
