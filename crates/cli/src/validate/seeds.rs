//! `tierlab validate --seeds N`: one comparison per workload seed, summed up. The real kernel
//! varies by tens of percent between seeds (the seed changes the access stream), so a verdict
//! is judged on the means over seeds, with each side's range beside it.

use super::report::{counter_verdict, Comparison, RESIDENCY_POINTS};
use serde::Serialize;

/// One counter over the seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CounterSummary {
    pub name: String,
    pub real_mean: f64,
    pub real_min: u64,
    pub real_max: u64,
    pub sim_mean: f64,
    pub sim_min: u64,
    pub sim_max: u64,
    /// sim mean / real mean.
    pub ratio: Option<f64>,
    /// Within 2× (or both means too small to judge), on the means.
    pub ok: bool,
}

/// One region at one sample time, over the seeds (DRAM share, %).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionGap {
    pub name: String,
    /// Means over the seeds whose sample has the region resident on both sides (where no
    /// seed has both, each side's own, for the reader, with no gap).
    pub real_mean: Option<f64>,
    pub sim_mean: Option<f64>,
    /// |real mean − sim mean|, over the seeds with both sides.
    pub mean_gap: Option<f64>,
    /// The largest |real − sim| of one seed (real and simulated of the same seed).
    pub worst_gap: Option<f64>,
}

/// One sample time (the first seed's), with each seed's nearest sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SampleGap {
    pub t_ms: f64,
    pub regions: Vec<RegionGap>,
}

/// One region over the run and the seeds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegionSummary {
    pub name: String,
    /// The largest gap of the means over the samples (pp).
    pub mean_gap_points: f64,
    /// The largest gap of one seed over its samples (pp).
    pub worst_gap_points: f64,
    /// Within 15 pp, on the means.
    pub ok: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SeedSummary {
    pub seeds: Vec<u64>,
    pub samples: Vec<SampleGap>,
    pub regions: Vec<RegionSummary>,
    pub counters: Vec<CounterSummary>,
}

fn mean(xs: &[f64]) -> Option<f64> {
    (!xs.is_empty()).then(|| xs.iter().sum::<f64>() / xs.len() as f64)
}

/// Sum up one comparison per seed (`cmps[i]` is seed `seeds[i]`'s). Counters and regions are
/// the first comparison's; a seed missing one is left out of that row.
pub fn summarize(seeds: &[u64], cmps: &[&Comparison]) -> SeedSummary {
    let Some(first) = cmps.first() else {
        return SeedSummary {
            seeds: seeds.to_vec(),
            samples: Vec::new(),
            regions: Vec::new(),
            counters: Vec::new(),
        };
    };
    let counters = first
        .counters
        .iter()
        .map(|c| {
            let rows: Vec<(u64, u64)> = cmps
                .iter()
                .filter_map(|x| x.counters.iter().find(|r| r.name == c.name))
                .map(|r| (r.real, r.sim))
                .collect();
            let real: Vec<f64> = rows.iter().map(|r| r.0 as f64).collect();
            let sim: Vec<f64> = rows.iter().map(|r| r.1 as f64).collect();
            let (real_mean, sim_mean) = (mean(&real).unwrap_or(0.0), mean(&sim).unwrap_or(0.0));
            let (ratio, ok) = counter_verdict(real_mean, sim_mean);
            CounterSummary {
                name: c.name.clone(),
                real_mean,
                real_min: rows.iter().map(|r| r.0).min().unwrap_or(0),
                real_max: rows.iter().map(|r| r.0).max().unwrap_or(0),
                sim_mean,
                sim_min: rows.iter().map(|r| r.1).min().unwrap_or(0),
                sim_max: rows.iter().map(|r| r.1).max().unwrap_or(0),
                ratio,
                ok,
            }
        })
        .collect();
    let names: Vec<&str> = first.regions.iter().map(|r| r.name.as_str()).collect();
    // Seeds' samples are at slightly different times: each seed's nearest to the first's.
    let samples: Vec<SampleGap> = first
        .intervals
        .iter()
        .map(|row| {
            let matched: Vec<_> = cmps
                .iter()
                .filter_map(|c| {
                    c.intervals.iter().min_by(|a, b| {
                        (a.t_ms - row.t_ms)
                            .abs()
                            .total_cmp(&(b.t_ms - row.t_ms).abs())
                    })
                })
                .collect();
            let regions = names
                .iter()
                .map(|&name| {
                    let pairs: Vec<(Option<f64>, Option<f64>)> = matched
                        .iter()
                        .filter_map(|m| m.dram_share.iter().find(|d| d.0 == name))
                        .map(|d| (d.1, d.2))
                        .collect();
                    let both: Vec<(f64, f64)> =
                        pairs.iter().filter_map(|p| Some((p.0?, p.1?))).collect();
                    let worst_gap = both.iter().map(|(r, m)| (r - m).abs()).reduce(f64::max);
                    // The means compare the seeds that have both sides: a seed whose stand-in
                    // ended before its guest's last sample would weigh one side only.
                    let (real_mean, sim_mean, mean_gap) = if both.is_empty() {
                        let real: Vec<f64> = pairs.iter().filter_map(|p| p.0).collect();
                        let sim: Vec<f64> = pairs.iter().filter_map(|p| p.1).collect();
                        (mean(&real), mean(&sim), None)
                    } else {
                        let real = mean(&both.iter().map(|b| b.0).collect::<Vec<_>>());
                        let sim = mean(&both.iter().map(|b| b.1).collect::<Vec<_>>());
                        (real, sim, real.zip(sim).map(|(r, m)| (r - m).abs()))
                    };
                    RegionGap {
                        name: name.to_string(),
                        real_mean,
                        sim_mean,
                        mean_gap,
                        worst_gap,
                    }
                })
                .collect();
            SampleGap {
                t_ms: row.t_ms,
                regions,
            }
        })
        .collect();
    let regions = names
        .iter()
        .enumerate()
        .map(|(i, &name)| {
            let mean_gap = samples
                .iter()
                .filter_map(|s| s.regions[i].mean_gap)
                .fold(0.0, f64::max);
            // Every sample of every seed, not only those matched to the first seed's times.
            let worst = cmps
                .iter()
                .filter_map(|c| c.regions.iter().find(|r| r.name == name))
                .map(|r| r.max_diff_points)
                .fold(0.0, f64::max);
            RegionSummary {
                name: name.to_string(),
                mean_gap_points: mean_gap,
                worst_gap_points: worst,
                ok: mean_gap <= RESIDENCY_POINTS,
            }
        })
        .collect();
    SeedSummary {
        seeds: seeds.to_vec(),
        samples,
        regions,
        counters,
    }
}

impl SeedSummary {
    /// The summary tables as text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        s.push_str(
            "DRAM share of each region (%), mean over seeds real | simulated [worst gap of one seed, pp], per sample:\n",
        );
        s.push_str(&format!("{:>10}", "t (ms)"));
        for r in &self.regions {
            s.push_str(&format!("{:>28}", r.name));
        }
        s.push('\n');
        let pct = |x: Option<f64>| x.map_or("    -".to_string(), |v| format!("{v:5.1}"));
        for row in &self.samples {
            s.push_str(&format!("{:>10.0}", row.t_ms));
            for g in &row.regions {
                s.push_str(&format!(
                    "{:>28}",
                    format!(
                        "{} | {} [{}]",
                        pct(g.real_mean),
                        pct(g.sim_mean),
                        pct(g.worst_gap)
                    )
                ));
            }
            s.push('\n');
        }
        s.push_str(
            "\nregion                  gap of the means (pp)   worst seed (pp)   verdict (means)\n",
        );
        for r in &self.regions {
            s.push_str(&format!(
                "{:<26}{:>19.1}{:>18.1}   {}\n",
                r.name,
                r.mean_gap_points,
                r.worst_gap_points,
                if r.ok { "ok" } else { "OFF (> 15 pp)" }
            ));
        }
        s.push_str(
            "\ncounter (over the run)      real mean     real min-max     sim mean      sim min-max   sim/real   verdict (means)\n",
        );
        for c in &self.counters {
            s.push_str(&format!(
                "{:<24}{:>13.0}{:>17}{:>13.0}{:>17}{:>11}   {}\n",
                c.name,
                c.real_mean,
                format!("{}-{}", c.real_min, c.real_max),
                c.sim_mean,
                format!("{}-{}", c.sim_min, c.sim_max),
                c.ratio.map_or("-".into(), |r| format!("{r:.2}")),
                if c.ok { "ok" } else { "OFF (> 2x)" }
            ));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::validate::report::{CounterRow, IntervalRow, RegionRow};

    fn counter(name: &str, real: u64, sim: u64) -> CounterRow {
        CounterRow {
            name: name.into(),
            real,
            sim,
            ratio: None,
            ok: false,
        }
    }

    fn region(name: &str, max_diff_points: f64) -> RegionRow {
        RegionRow {
            name: name.into(),
            max_diff_points,
            half_time_real_ms: None,
            half_time_sim_ms: None,
            ok: false,
        }
    }

    fn at(t_ms: f64, hot: (Option<f64>, Option<f64>)) -> IntervalRow {
        IntervalRow {
            t_ms,
            dram_share: vec![("hot".into(), hot.0, hot.1)],
        }
    }

    /// Two seeds: the first with samples at 0 and 100 ms, the second at 5 and 98 ms.
    fn two_seeds() -> (Comparison, Comparison) {
        let a = Comparison {
            intervals: vec![
                at(0.0, (Some(10.0), Some(20.0))),
                at(100.0, (Some(50.0), Some(40.0))),
            ],
            regions: vec![region("hot", 16.0)],
            counters: vec![
                counter("a", 100, 150),
                counter("b", 100, 150),
                counter("c", 5, 30),
                counter("d", 0, 100),
            ],
        };
        let b = Comparison {
            intervals: vec![
                at(5.0, (Some(30.0), Some(60.0))),
                at(98.0, (None, Some(70.0))),
            ],
            regions: vec![region("hot", 33.0)],
            counters: vec![
                counter("a", 300, 450),
                counter("b", 100, 350),
                counter("c", 10, 0),
                counter("d", 0, 0),
            ],
        };
        (a, b)
    }

    #[test]
    fn counters_are_judged_on_the_means_with_ranges() {
        let (a, b) = two_seeds();
        let s = summarize(&[42, 43], &[&a, &b]);
        let get = |n: &str| s.counters.iter().find(|c| c.name == n).unwrap().clone();
        // a: real 100, 300 → 200; sim 150, 450 → 300; 300 / 200 = 1.5.
        let c = get("a");
        assert_eq!((c.real_mean, c.real_min, c.real_max), (200.0, 100, 300));
        assert_eq!((c.sim_mean, c.sim_min, c.sim_max), (300.0, 150, 450));
        assert_eq!(c.ratio, Some(1.5));
        assert!(c.ok);
        // b: seed 42 alone is within 2× (1.5), but the means are 100 and 250: 2.5.
        let c = get("b");
        assert_eq!(c.ratio, Some(2.5));
        assert!(!c.ok);
        // c: means 7.5 and 15, both below 20: too small to judge.
        let c = get("c");
        assert_eq!((c.real_mean, c.sim_mean), (7.5, 15.0));
        assert_eq!(c.ratio, Some(2.0));
        assert!(c.ok);
        // d: the real kernel never counted, tierlab did (mean 50): no ratio, off.
        let c = get("d");
        assert_eq!((c.real_mean, c.sim_mean, c.ratio), (0.0, 50.0, None));
        assert!(!c.ok);
        assert_eq!(s.seeds, vec![42, 43]);
    }

    #[test]
    fn residency_gaps_are_the_worst_seed_and_the_gap_of_the_means() {
        let (a, b) = two_seeds();
        let s = summarize(&[42, 43], &[&a, &b]);
        assert_eq!(s.samples.len(), 2);
        // At 0 ms (seed 43's sample at 5 ms): real 10, 30 → 20; sim 20, 60 → 40.
        let g = &s.samples[0].regions[0];
        assert_eq!((g.real_mean, g.sim_mean), (Some(20.0), Some(40.0)));
        assert_eq!(g.mean_gap, Some(20.0));
        assert_eq!(g.worst_gap, Some(30.0));
        // At 100 ms (seed 43's at 98 ms has nothing resident on the real side): only seed
        // 42 has both sides, so the means are its own, real 50 and sim 40 (not 40 and 70's
        // 55 against seed 42's 50 alone).
        let g = &s.samples[1].regions[0];
        assert_eq!((g.real_mean, g.sim_mean), (Some(50.0), Some(40.0)));
        assert_eq!(g.mean_gap, Some(10.0));
        assert_eq!(g.worst_gap, Some(10.0));
        // Over the run: the means are 20 pp apart at worst (off); one seed was 33 pp off.
        let r = &s.regions[0];
        assert_eq!((r.mean_gap_points, r.worst_gap_points), (20.0, 33.0));
        assert!(!r.ok);
        // One seed: the summary is that seed's own comparison; judged on its sampled gaps
        // (10 pp), not on the 16 pp its own comparison found between samples.
        let one = summarize(&[42], &[&a]);
        assert_eq!(one.regions[0].mean_gap_points, 10.0);
        assert_eq!(one.regions[0].worst_gap_points, 16.0);
        assert!(one.regions[0].ok);
        assert_eq!(one.counters[0].ratio, Some(1.5));
        assert!(s.text().contains("OFF (> 2x)"));
    }

    #[test]
    fn a_sample_no_seed_has_on_both_sides_shows_each_sides_mean_and_no_gap() {
        let (mut a, mut b) = two_seeds();
        a.intervals[1] = at(100.0, (Some(50.0), None));
        b.intervals[1] = at(98.0, (None, Some(70.0)));
        let s = summarize(&[42, 43], &[&a, &b]);
        let g = &s.samples[1].regions[0];
        assert_eq!((g.real_mean, g.sim_mean), (Some(50.0), Some(70.0)));
        assert_eq!((g.mean_gap, g.worst_gap), (None, None));
        // The run's gap of the means is the 0 ms sample's, 20 pp, not 50 against 70.
        assert_eq!(s.regions[0].mean_gap_points, 20.0);
    }
}
