//! `tierlab validate`'s comparison: the real kernel's samples (JSON lines from the generated
//! program) beside the simulated timeline, per interval and in total, with the sim/real
//! ratio and a verdict per row (counters within 2×, residency within 15 percentage points:
//! the targets of the fidelity work).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tierlab::RunResult;

/// A counter is within target when sim/real is in [1/2, 2] (or both are small).
const COUNTER_FACTOR: f64 = 2.0;
/// Residency is within target when the DRAM shares differ by at most this many points.
pub const RESIDENCY_POINTS: f64 = 15.0;
/// Counters below this in both runs are too small to judge.
const SMALL: u64 = 20;

/// One sample of the real run (read back from `--json` by `--replay`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct RealSample {
    pub t_ms: f64,
    /// Per region: pages per node.
    pub regions: Vec<(String, Vec<u64>)>,
    pub vmstat: Vec<(String, u64)>,
    /// TLB shootdowns summed over CPUs.
    pub tlb: u64,
    /// Per node and populated zone, from /proc/zoneinfo (empty when the program had none).
    pub zones: Vec<ZoneSample>,
    /// How long the sampler took for this sample (it runs alongside the workload).
    pub span_ms: Option<f64>,
    /// The sampler's own CPU time for this sample.
    pub cpu_ms: Option<f64>,
    /// The CPU the sampler ended this sample on.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub sampler_cpu: Option<u32>,
    /// Each worker's accesses so far (published at every pacing batch).
    pub accesses: Vec<u64>,
    /// Each worker's [run time, run-queue wait] so far, ns (its schedstat).
    pub schedstat: Vec<[u64; 2]>,
    /// Per /sys/devices/system/node/nodeN/meminfo field the program read (kB), its value on
    /// each node (None: not read); empty unless asked (THP on).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub node_meminfo: Vec<(String, Vec<Option<u64>>)>,
}

impl RealSample {
    /// A /proc/vmstat counter of this sample, if the program read it.
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.vmstat.iter().find(|v| v.0 == name).map(|v| v.1)
    }

    /// A node meminfo field of this sample per node (kB), if the program read it.
    pub fn node_meminfo(&self, field: &str) -> Option<&[Option<u64>]> {
        (self.node_meminfo.iter())
            .find(|v| v.0 == field)
            .map(|v| v.1.as_slice())
    }
}

/// One zone of the guest's /proc/zoneinfo at a sample (pages; None: the kernel printed no
/// such line).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ZoneSample {
    pub node: u32,
    pub zone: String,
    pub free: Option<u64>,
    pub min: Option<u64>,
    pub low: Option<u64>,
    pub high: Option<u64>,
    pub promo: Option<u64>,
    pub managed: Option<u64>,
    /// Pages on the per-CPU lists (not in `free`); only where zoneinfo was read.
    pub pcp: Option<u64>,
    /// The per-CPU lists' high limits summed over CPUs; only where zoneinfo was read.
    pub pcp_high: Option<u64>,
    /// lowmem_reserve: the pages this zone keeps back from allocations aimed at zone i.
    pub protection: Vec<u64>,
}

/// The `zones` array of a sample line; entries that are not objects with a node are skipped.
fn parse_zones(v: &Value) -> Vec<ZoneSample> {
    let Some(zones) = v.get("zones").and_then(Value::as_array) else {
        return Vec::new();
    };
    zones
        .iter()
        .filter_map(|z| {
            let node = z.get("node")?.as_u64()?;
            let num = |k: &str| z.get(k).and_then(Value::as_u64);
            Some(ZoneSample {
                node: u32::try_from(node).ok()?,
                zone: z
                    .get("zone")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                free: num("free"),
                min: num("min"),
                low: num("low"),
                high: num("high"),
                promo: num("promo"),
                managed: num("managed"),
                pcp: num("pcp"),
                pcp_high: num("pcp_high"),
                protection: z
                    .get("protection")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_u64).collect())
                    .unwrap_or_default(),
            })
        })
        .collect()
}

/// Parse the program's stdout: sample lines, skipping phase, warning and done lines; an
/// `error` line is the run's failure.
pub fn parse_samples(lines: &[String]) -> Result<Vec<RealSample>, String> {
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Ok(v) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        if let Some(e) = v.get("error") {
            return Err(format!("the guest program failed: {e}"));
        }
        let Some(t) = v.get("t_ms").and_then(Value::as_f64) else {
            continue;
        };
        if v.get("regions").is_none() {
            continue;
        }
        let map_u64 = |key: &str| -> Vec<(String, u64)> {
            v.get(key)
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, x)| (k.clone(), x.as_u64().unwrap_or(0)))
                        .collect()
                })
                .unwrap_or_default()
        };
        let regions = v["regions"]
            .as_object()
            .ok_or_else(|| format!("line {}: `regions` is not an object", i + 1))?
            .iter()
            .map(|(k, x)| {
                let pages = x
                    .as_array()
                    .map(|a| a.iter().map(|n| n.as_u64().unwrap_or(0)).collect())
                    .unwrap_or_default();
                (k.clone(), pages)
            })
            .collect();
        let tlb = v
            .get("tlb")
            .and_then(Value::as_array)
            // Saturating: the counts come from the guest's text, which may be anything.
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_u64)
                    .fold(0, u64::saturating_add)
            })
            .unwrap_or(0);
        out.push(RealSample {
            t_ms: t,
            regions,
            vmstat: map_u64("vmstat"),
            tlb,
            zones: parse_zones(&v),
            span_ms: v.get("span_ms").and_then(Value::as_f64),
            cpu_ms: v.get("cpu_ms").and_then(Value::as_f64),
            sampler_cpu: (v.get("sampler_cpu").and_then(Value::as_u64))
                .and_then(|c| u32::try_from(c).ok()),
            accesses: v
                .get("accesses")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_u64).collect())
                .unwrap_or_default(),
            schedstat: v
                .get("schedstat")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|x| Some([x.get(0)?.as_u64()?, x.get(1)?.as_u64()?]))
                        .collect()
                })
                .unwrap_or_default(),
            node_meminfo: v
                .get("node_meminfo")
                .and_then(Value::as_object)
                .map(|m| {
                    m.iter()
                        .map(|(k, x)| {
                            let per_node = (x.as_array().into_iter().flatten())
                                .map(Value::as_u64)
                                .collect();
                            (k.clone(), per_node)
                        })
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    if out.is_empty() {
        return Err("the guest program printed no samples".into());
    }
    Ok(out)
}

/// One compared counter.
#[derive(Clone, Debug, Serialize)]
pub struct CounterRow {
    pub name: String,
    pub real: u64,
    pub sim: u64,
    pub ratio: Option<f64>,
    pub ok: bool,
}

/// One compared region.
#[derive(Clone, Debug, Serialize)]
pub struct RegionRow {
    pub name: String,
    /// Largest difference in DRAM share (percentage points) over the aligned samples.
    pub max_diff_points: f64,
    /// Time to reach half of the final DRAM share, real and simulated (ms).
    pub half_time_real_ms: Option<f64>,
    pub half_time_sim_ms: Option<f64>,
    pub ok: bool,
}

/// Per interval: time, and per region the DRAM share real and simulated (%; None while
/// nothing of the region is resident).
#[derive(Clone, Debug, Serialize)]
pub struct IntervalRow {
    pub t_ms: f64,
    pub dram_share: Vec<(String, Option<f64>, Option<f64>)>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub intervals: Vec<IntervalRow>,
    pub regions: Vec<RegionRow>,
    pub counters: Vec<CounterRow>,
}

/// A DRAM-share series: (t_ms, percent).
type Series = Vec<(f64, f64)>;

/// Percent of a region's resident pages on the top-tier nodes; None while nothing of it is
/// resident (no share to compare).
pub fn dram_share(pages: &[u64], toptier: &[bool]) -> Option<f64> {
    // Summed as reals: page counts read from the guest can be any u64.
    let all: f64 = pages.iter().map(|&p| p as f64).sum();
    let top: f64 = pages
        .iter()
        .zip(toptier)
        .filter(|(_, &t)| t)
        .map(|(&p, _)| p as f64)
        .sum();
    (all > 0.0).then(|| 100.0 * top / all)
}

/// The first time a share series reaches half of its final value.
fn half_time(series: &[(f64, f64)]) -> Option<f64> {
    let last = series.last()?.1;
    if last <= 0.0 {
        return None;
    }
    series
        .iter()
        .find(|(_, s)| *s >= last / 2.0)
        .map(|(t, _)| *t)
}

/// The simulated sample (index into `times`, ascending) a real sample at `t` is compared with:
/// the nearest, if within half the simulated interval (the largest spacing: the last sample
/// may come early, at the run's end). The guest's first sample, at the program's start, has
/// none with an interval of 500 ms (the timeline's first sample is an interval in), where the
/// nearest was 491 ms on, after the fill.
fn matching_sample(times: &[f64], t: f64) -> Option<usize> {
    let interval = times.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    let (i, d) = (times.iter().enumerate())
        .map(|(i, &x)| (i, (x - t).abs()))
        .min_by(|a, b| a.1.total_cmp(&b.1))?;
    (interval == 0.0 || d <= interval / 2.0).then_some(i)
}

/// Compare the real samples with the simulated run, sample by sample (`matching_sample`),
/// and in total.
pub fn compare(real: &[RealSample], sim: &RunResult, counters: &[&str]) -> Comparison {
    let toptier: Vec<bool> = sim.nodes.iter().map(|n| n.toptier).collect();
    let sim_times: Vec<f64> = sim.timeline.iter().map(|p| p.t_ms).collect();
    let nearest = |t: f64| matching_sample(&sim_times, t).map(|i| &sim.timeline[i]);
    let names: Vec<String> = real
        .first()
        .map(|s| s.regions.iter().map(|r| r.0.clone()).collect())
        .unwrap_or_default();
    let mut intervals = Vec::new();
    let mut series: Vec<(Series, Series)> = vec![Default::default(); names.len()];
    for s in real {
        let p = nearest(s.t_ms);
        let mut row = IntervalRow {
            t_ms: s.t_ms,
            dram_share: Vec::new(),
        };
        for (i, name) in names.iter().enumerate() {
            let r = s
                .regions
                .iter()
                .find(|x| &x.0 == name)
                .and_then(|x| dram_share(&x.1, &toptier));
            let m = p
                .and_then(|p| p.regions.as_ref())
                .and_then(|rs| rs.iter().find(|x| &x.0 == name))
                .and_then(|x| dram_share(&x.1, &toptier));
            row.dram_share.push((name.clone(), r, m));
            series[i].0.push((s.t_ms, r.unwrap_or(0.0)));
            if let Some(p) = p {
                series[i].1.push((p.t_ms, m.unwrap_or(0.0)));
            }
        }
        intervals.push(row);
    }
    let regions = names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            // Only samples where both sides have the region resident are comparable.
            let max_diff = intervals
                .iter()
                .filter_map(|row| match (row.dram_share[i].1, row.dram_share[i].2) {
                    (Some(r), Some(m)) => Some((r - m).abs()),
                    _ => None,
                })
                .fold(0.0, f64::max);
            RegionRow {
                name: name.clone(),
                max_diff_points: max_diff,
                half_time_real_ms: half_time(&series[i].0),
                half_time_sim_ms: half_time(&series[i].1),
                ok: max_diff <= RESIDENCY_POINTS,
            }
        })
        .collect();
    let (first, last) = (real.first(), real.last());
    let real_delta = |name: &str| -> u64 {
        let get = |s: Option<&RealSample>| s.and_then(|s| s.counter(name)).unwrap_or(0);
        get(last).saturating_sub(get(first))
    };
    let mut rows: Vec<CounterRow> = counters
        .iter()
        .map(|&name| counter_row(name, real_delta(name), sim.vmstat.get(name)))
        .collect();
    let real_tlb = last.map_or(0, |s| s.tlb) - first.map_or(0, |s| s.tlb);
    let sim_tlb: u64 = sim.interrupts.tlb.iter().sum();
    rows.push(counter_row("TLB shootdowns", real_tlb, sim_tlb));
    Comparison {
        intervals,
        regions,
        counters: rows,
    }
}

/// sim/real and whether it is within target (within 2×, or both too small to judge).
pub fn counter_verdict(real: f64, sim: f64) -> (Option<f64>, bool) {
    let ratio = (real > 0.0).then(|| sim / real);
    let small = real < SMALL as f64 && sim < SMALL as f64;
    let ok = small || ratio.is_some_and(|r| (1.0 / COUNTER_FACTOR..=COUNTER_FACTOR).contains(&r));
    (ratio, ok)
}

fn counter_row(name: &str, real: u64, sim: u64) -> CounterRow {
    let (ratio, ok) = counter_verdict(real as f64, sim as f64);
    CounterRow {
        name: name.to_string(),
        real,
        sim,
        ratio,
        ok,
    }
}

impl Comparison {
    /// The side-by-side tables as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        s.push_str("DRAM share of each region (%), real | simulated, per sample:\n");
        s.push_str(&format!("{:>10}", "t (ms)"));
        for r in &self.regions {
            s.push_str(&format!("{:>24}", r.name));
        }
        s.push('\n');
        for row in &self.intervals {
            s.push_str(&format!("{:>10.0}", row.t_ms));
            let pct = |x: &Option<f64>| x.map_or("    -".to_string(), |v| format!("{v:5.1}"));
            for (_, real, sim) in &row.dram_share {
                s.push_str(&format!("{:>24}", format!("{} | {}", pct(real), pct(sim))));
            }
            s.push('\n');
        }
        s.push_str("\nregion                    max diff (pp)   half-share time real / sim (ms)   verdict\n");
        for r in &self.regions {
            let t = |x: Option<f64>| x.map_or("-".to_string(), |v| format!("{v:.0}"));
            s.push_str(&format!(
                "{:<26}{:>13.1}   {:>31}   {}\n",
                r.name,
                r.max_diff_points,
                format!("{} / {}", t(r.half_time_real_ms), t(r.half_time_sim_ms)),
                if r.ok { "ok" } else { "OFF (> 15 pp)" }
            ));
        }
        s.push_str("\ncounter (over the run)            real          sim    sim/real   verdict\n");
        for c in &self.counters {
            s.push_str(&format!(
                "{:<28}{:>10}{:>13}{:>12}   {}\n",
                c.name,
                c.real,
                c.sim,
                c.ratio.map_or("-".into(), |r| format!("{r:.2}")),
                if c.ok { "ok" } else { "OFF (> 2x)" }
            ));
        }
        s
    }
}

/// The samples the zone summary shows: start, middle and end (fewer when there are fewer).
fn summary_indices(n: usize) -> Vec<usize> {
    let mut v: Vec<usize> = [0, n / 2, n.saturating_sub(1)]
        .into_iter()
        .filter(|&i| i < n)
        .collect();
    v.dedup();
    v
}

/// The real kernel's zones (free pages, per-CPU pages where zoneinfo was read, watermarks, the
/// largest lowmem_reserve) at the start, middle and end samples, each followed by tierlab's
/// single zone per node at the nearest simulated time; empty when the samples carry no zones.
pub fn zone_text(real: &[RealSample], sim: &RunResult) -> String {
    if real.iter().all(|s| s.zones.is_empty()) {
        return String::new();
    }
    let opt = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
    let row = |t: String, name: String, cells: [String; 7]| {
        let [free, pcp, min, high, promo, managed, prot] = cells;
        format!(
            "{t:>10}  {name:<16}{free:>9}{pcp:>12}{min:>7}{high:>7}{promo:>7}{managed:>9}{prot:>12}\n"
        )
    };
    let mut s = String::from(
        "\nzones (pages): the real kernel's /proc/zoneinfo, then tierlab's one zone per node\n",
    );
    s.push_str(&row(
        "t (ms)".into(),
        "node zone".into(),
        [
            "free",
            "pcp",
            "min",
            "high",
            "promo",
            "managed",
            "protection",
        ]
        .map(String::from),
    ));
    for i in summary_indices(real.len()) {
        let r = &real[i];
        for z in &r.zones {
            s.push_str(&row(
                format!("{:.0}", r.t_ms),
                format!("{} {}", z.node, z.zone),
                [
                    opt(z.free),
                    match (z.pcp, z.pcp_high) {
                        (None, None) => "-".into(),
                        (c, h) => format!("{}/{}", opt(c), opt(h)),
                    },
                    opt(z.min),
                    opt(z.high),
                    opt(z.promo),
                    opt(z.managed),
                    z.protection.iter().max().copied().unwrap_or(0).to_string(),
                ],
            ));
        }
        let nearest = sim
            .timeline
            .iter()
            .min_by(|a, b| (a.t_ms - r.t_ms).abs().total_cmp(&(b.t_ms - r.t_ms).abs()));
        if let Some(p) = nearest {
            for (n, node) in sim.nodes.iter().enumerate() {
                let w = &node.watermarks;
                s.push_str(&row(
                    format!("{:.0}", p.t_ms),
                    format!("{n} tierlab"),
                    [
                        // The timeline keeps free and per-CPU pages together.
                        format!("{}*", opt(p.nodes.get(n).map(|x| x.free))),
                        "*".into(),
                        w.min.to_string(),
                        w.high.to_string(),
                        w.promo.to_string(),
                        node.capacity_pages.to_string(),
                        "-".into(),
                    ],
                ));
            }
        }
    }
    s.push_str("* tierlab's timeline counts per-CPU pages as free; at the end of the run:");
    for n in &sim.nodes {
        let high: u64 = n.pageset.per_cpu.iter().map(|p| u64::from(p.high)).sum();
        s.push_str(&format!(
            " node {} {} free + {} pcp (high {high});",
            n.node, n.nr_free_pages, n.pcp_pages
        ));
    }
    s.pop();
    s.push('\n');
    s
}

/// The guest's THPs per node (its AnonHugePages, kB) at every sample, beside tierlab's
/// per-node THPs × 2 MiB (the timeline's `anon_thps`) at the nearest simulated time; empty
/// when the samples carry no AnonHugePages (THP off).
pub fn anon_huge_text(real: &[RealSample], sim: &RunResult) -> String {
    const FIELD: &str = "AnonHugePages";
    const THPS: &str = "nr_anon_transparent_hugepages";
    const THP_KIB: u64 = 2048;
    if real.iter().all(|s| s.node_meminfo(FIELD).is_none()) {
        return String::new();
    }
    let nodes = (real.iter())
        .filter_map(|s| s.node_meminfo(FIELD).map(<[_]>::len))
        .max()
        .unwrap_or(0);
    let sim_kib = |p: &tierlab::result::TimelinePoint, n: usize| {
        p.nodes.get(n).map(|s| s.anon_thps * THP_KIB)
    };
    let opt = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
    let mut s = format!(
        "\n{FIELD} (kB) per node: the real kernel's (/sys/devices/system/node/nodeN/meminfo) | \
         tierlab's THPs x {THP_KIB}\n{:>10}",
        "t (ms)"
    );
    for n in 0..nodes {
        s += &format!("{:>23}", format!("node {n}"));
    }
    s.push('\n');
    for r in real {
        let per_node = r.node_meminfo(FIELD).unwrap_or(&[]);
        let nearest = (sim.timeline.iter())
            .min_by(|a, b| (a.t_ms - r.t_ms).abs().total_cmp(&(b.t_ms - r.t_ms).abs()));
        s += &format!("{:>10.0}", r.t_ms);
        for n in 0..nodes {
            let real = opt(per_node.get(n).copied().flatten());
            let simulated = opt(nearest.and_then(|p| sim_kib(p, n)));
            s += &format!("{:>23}", format!("{real} | {simulated}"));
        }
        s.push('\n');
    }
    let end: u64 = sim.nodes.iter().map(|n| n.anon_thps).sum();
    s += &format!("tierlab at the end of the run: {THPS} {end}\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guest_counts_near_u64_max_do_not_overflow() {
        let line = format!(
            r#"{{"t_ms":1.0,"regions":{{"hot":[{m},{m}]}},"tlb":[{m},{m}]}}"#,
            m = u64::MAX
        );
        let s = parse_samples(&[line]).unwrap();
        assert_eq!(s[0].tlb, u64::MAX);
        assert_eq!(dram_share(&s[0].regions[0].1, &[true, false]), Some(50.0));
    }

    #[test]
    fn counters_within_two_times_or_small_pass() {
        assert!(counter_row("x", 100, 190).ok);
        assert!(!counter_row("x", 100, 210).ok);
        assert!(!counter_row("x", 100, 40).ok);
        assert!(counter_row("x", 3, 15).ok, "both too small to judge");
        assert!(!counter_row("x", 0, 500).ok);
    }

    #[test]
    fn samples_parse_and_other_lines_are_skipped() {
        let lines: Vec<String> = [
            r#"{"warning":"no NUMA"}"#,
            r#"{"t_ms":10.0,"regions":{"hot":[1,3]},"vmstat":{"pgpromote_success":5},"tlb":[1,2]}"#,
            r#"{"phase":"fill","begin_ms":0,"end_ms":9}"#,
            "kernel noise",
            r#"{"t_ms":20.0,"regions":{"hot":[4,0]},"vmstat":{"pgpromote_success":9},"tlb":[2,2],"sampler_cpu":2}"#,
            r#"{"done":true,"t_ms":21}"#,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = parse_samples(&lines).unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].regions[0], ("hot".to_string(), vec![1, 3]));
        assert_eq!(s[1].tlb, 4);
        assert_eq!((s[0].sampler_cpu, s[1].sampler_cpu), (None, Some(2)));
        let err = parse_samples(&[r#"{"error":"mmap failed"}"#.to_string()]).unwrap_err();
        assert!(err.contains("mmap failed"));
    }

    #[test]
    fn samples_read_back_from_json_as_they_were_written() {
        // `--replay` compares against the samples `--json` wrote.
        let line = r#"{"t_ms":10.5,"regions":{"hot":[1,3]},"vmstat":{"pgfault":7},"tlb":[1,2],
            "sampler_cpu":1,"zones":[{"node":0,"zone":"DMA","free":3584,"min":29,"low":36,"high":43,
            "promo":null,"managed":3840,"protection":[0,181]}]}"#
            .replace('\n', "");
        let s = parse_samples(&[line]).unwrap();
        let text = serde_json::to_string(&s).unwrap();
        let back: Vec<RealSample> = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(back[0].regions[0], ("hot".to_string(), vec![1, 3]));
        assert_eq!(back[0].counter("pgfault"), Some(7));
        assert_eq!(back[0].zones, s[0].zones);
        assert_eq!(back[0].sampler_cpu, Some(1));
    }

    #[test]
    fn zones_parse_with_missing_lines_as_none() {
        let line = r#"{"t_ms":1.0,"regions":{},"vmstat":{},"tlb":[],"zones":[
            {"node":0,"zone":"DMA","free":3584,"min":29,"low":36,"high":43,"promo":null,
             "managed":3840,"protection":[0,181,181]},
            {"zone":"no node"},
            {"node":1,"zone":"DMA32","free":9,"min":1,"low":2,"high":3,"promo":4,
             "managed":10,"protection":[]}]}"#
            .replace('\n', "");
        let s = parse_samples(&[line]).unwrap();
        assert_eq!(s[0].zones.len(), 2);
        let z = &s[0].zones[0];
        assert_eq!((z.node, z.zone.as_str()), (0, "DMA"));
        assert_eq!((z.free, z.high, z.promo), (Some(3584), Some(43), None));
        assert_eq!(z.protection, vec![0, 181, 181]);
        assert_eq!(s[0].zones[1].promo, Some(4));
        // A sample without zones (an older program) has none.
        let s = parse_samples(&[r#"{"t_ms":1.0,"regions":{}}"#.to_string()]).unwrap();
        assert!(s[0].zones.is_empty());
        assert_eq!(summary_indices(5), vec![0, 2, 4]);
        assert_eq!(summary_indices(2), vec![0, 1]);
        assert_eq!(summary_indices(1), vec![0]);
    }

    #[test]
    fn anon_huge_pages_parse_per_node_and_show_only_when_read() {
        let lines: Vec<String> = [
            r#"{"t_ms":10.0,"regions":{},"node_meminfo":{"AnonHugePages":[2048,null]}}"#,
            r#"{"t_ms":20.0,"regions":{},"node_meminfo":{"AnonHugePages":[4096,2048]}}"#,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let s = parse_samples(&lines).unwrap();
        assert_eq!(
            s[0].node_meminfo("AnonHugePages"),
            Some(&[Some(2048), None][..])
        );
        assert_eq!(
            s[1].node_meminfo("AnonHugePages"),
            Some(&[Some(4096), Some(2048)][..])
        );
        assert_eq!(s[1].node_meminfo("Other"), None);
        // Without the field (THP off) there is no table and nothing in the JSON.
        let off = parse_samples(&[r#"{"t_ms":1.0,"regions":{}}"#.to_string()]).unwrap();
        assert!(off[0].node_meminfo.is_empty());
        assert!(serde_json::to_value(&off[0])
            .unwrap()
            .get("node_meminfo")
            .is_none());
    }

    #[test]
    fn a_region_with_nothing_resident_has_no_share() {
        assert_eq!(dram_share(&[0, 0], &[true, false]), None);
        assert_eq!(dram_share(&[3, 1], &[true, false]), Some(75.0));
    }

    #[test]
    fn a_real_sample_is_compared_only_with_a_simulated_one_within_half_an_interval() {
        let sim = [500.0, 1000.0, 1500.0, 1511.9];
        // The guest's first sample, at the start: the nearest simulated one is 491 ms on.
        assert_eq!(matching_sample(&sim, 9.0), None);
        assert_eq!(matching_sample(&sim, 509.6), Some(0));
        assert_eq!(matching_sample(&sim, 1010.1), Some(1));
        // Past the last regular sample, the run's end sample is the nearest.
        assert_eq!(matching_sample(&sim, 1612.9), Some(3));
        assert_eq!(matching_sample(&sim, 2100.0), None);
        assert_eq!(matching_sample(&[], 9.0), None);
        // One simulated sample: no interval to judge by, so it is the match.
        assert_eq!(matching_sample(&[100.0], 9.0), Some(0));
    }

    #[test]
    fn half_time_is_the_first_sample_at_half_the_final_share() {
        assert_eq!(
            half_time(&[(0.0, 0.0), (10.0, 30.0), (20.0, 80.0)]),
            Some(20.0)
        );
        assert_eq!(
            half_time(&[(0.0, 0.0), (10.0, 50.0), (20.0, 80.0)]),
            Some(10.0)
        );
        assert_eq!(half_time(&[(0.0, 0.0)]), None);
    }
}
