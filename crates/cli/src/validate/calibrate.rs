//! The stand-in's run time per touched page, measured on the guest.
//!
//! A `touch` phase's run time is mostly page faults. Under TCG a fault costs the guest more
//! instructions than the cost table's hardware figures (hot_4t's fill: 10.5 µs per page on
//! the guest, 4.3 µs in the stand-in), and NUMA balancing paces its scanner by run time, so a
//! fill that is too fast moves every later scan. The calibration run (NUMA balancing and
//! demotion off) reports each phase's CPU time; the same configuration simulated on the
//! stand-in gives tierlab's own time per page; the difference is charged as the phase's
//! `gap_cycles` (1 ns = 1 cycle at 1 GHz). Both sides are measurements, not a fit.

use serde_json::Value;
use tierlab::Config;
use toml::Value as TomlValue;

/// Guest CPU ns per access of each named phase: (name, cpu_ms summed, accesses summed).
pub fn guest_cost_per_access(lines: &[String]) -> Vec<(String, f64, u64)> {
    let mut per_name: Vec<(String, f64, u64)> = Vec::new();
    for line in lines {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let (Some(name), Some(cpu), Some(n)) = (
            v.get("phase").and_then(|x| x.as_str()),
            v.get("cpu_ms").and_then(|x| x.as_f64()),
            v.get("accesses").and_then(|x| x.as_u64()),
        ) else {
            continue;
        };
        match per_name.iter_mut().find(|p| p.0 == name) {
            Some(p) => {
                p.1 += cpu;
                p.2 += n;
            }
            None => per_name.push((name.to_string(), cpu, n)),
        }
    }
    per_name
}

/// The participants of phase `p` (its `threads` list, else every worker).
fn participants(cfg: &Config, p: &TomlValue) -> u64 {
    match p.get("threads").and_then(|t| t.as_array()) {
        Some(list) => list.len() as u64,
        None => cfg
            .workload
            .get("threads")
            .and_then(|t| t.as_integer())
            .unwrap_or(1)
            .max(1) as u64,
    }
}

/// `--set workload.phases.N.gap_cycles=G` for each named `touch` phase: G is the guest's run
/// time per page minus the stand-in's (`sim_phases`: the stand-in's run of the calibration
/// configuration, as (name, duration_us, accesses)); nothing when the stand-in is not faster.
pub fn touch_gaps(
    cfg: &Config,
    guest_lines: &[String],
    sim_phases: &[(String, f64, u64)],
) -> Vec<String> {
    let guest = guest_cost_per_access(guest_lines);
    let phases = cfg
        .workload
        .get("phases")
        .and_then(|p| p.as_array())
        .cloned()
        .unwrap_or_default();
    let mut sets = Vec::new();
    for (i, p) in phases.iter().enumerate() {
        let kind = p.get("kind").and_then(|k| k.as_str());
        let name = p.get("name").and_then(|k| k.as_str());
        let (Some("touch"), Some(name)) = (kind, name) else {
            continue;
        };
        let Some((_, cpu_ms, n)) = guest.iter().find(|x| x.0 == name) else {
            continue;
        };
        let Some((_, dur_us, sim_n)) = sim_phases.iter().find(|x| x.0 == name) else {
            continue;
        };
        if *n == 0 || *sim_n == 0 {
            continue;
        }
        let guest_ns = cpu_ms * 1e6 / *n as f64;
        // An unpaced touch phase runs all the time: its run time is duration × threads.
        let sim_ns = dur_us * 1e3 * participants(cfg, p) as f64 / *sim_n as f64;
        let gap = (guest_ns - sim_ns).round();
        if gap >= 1.0 {
            sets.push(format!("workload.phases.{i}.gap_cycles={gap}"));
        }
    }
    sets
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> Config {
        let text = r#"
[machine]
cpus = 2
[[machine.nodes]]
capacity_mib = 64
read_latency_ns = 100
write_latency_ns = 100
cpus = "0-1"
[workload]
type = "scripted"
threads = 2
[[workload.regions]]
name = "buf"
pages = 16
[[workload.phases]]
name = "fill"
kind = "touch"
region = "buf"
threads = [0]
[[workload.phases]]
name = "both"
kind = "touch"
region = "buf"
[[workload.phases]]
name = "reads"
kind = "random"
region = "buf"
count = 10
"#;
        Config::from_str_with(text, "t.toml", None, &[]).unwrap()
    }

    #[test]
    fn touch_phases_get_the_guests_extra_run_time_per_page() {
        let guest = vec![
            r#"{"phase":"fill","accesses":1000,"cpu_ms":10.0}"#.to_string(),
            r#"{"phase":"both","accesses":2000,"cpu_ms":8.0}"#.to_string(),
            r#"{"phase":"reads","accesses":10,"cpu_ms":1.0}"#.to_string(),
        ];
        // fill: guest 10 µs/page, stand-in 4 µs → 6,000. both: two threads for 2 ms over
        // 2,000 pages is 2 µs/page in the stand-in, 4 µs on the guest → 2,000.
        let sim = vec![
            ("fill".to_string(), 4000.0, 1000),
            ("both".to_string(), 2000.0, 2000),
            ("reads".to_string(), 5.0, 10),
        ];
        assert_eq!(
            touch_gaps(&cfg(), &guest, &sim),
            vec![
                "workload.phases.0.gap_cycles=6000".to_string(),
                "workload.phases.1.gap_cycles=2000".to_string(),
            ]
        );
    }

    #[test]
    fn a_stand_in_slower_than_the_guest_gets_nothing() {
        let guest = vec![r#"{"phase":"fill","accesses":1000,"cpu_ms":1.0}"#.to_string()];
        let sim = vec![("fill".to_string(), 4000.0, 1000)];
        assert!(touch_gaps(&cfg(), &guest, &sim).is_empty());
    }
}
