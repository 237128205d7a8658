//! `tierlab validate A.toml B.toml ...`: one column per scenario, as a Markdown table (the
//! README's validation table comes from it).

use super::report::Comparison;
use super::seeds::SeedSummary;

/// What one scenario's validation concluded (one seed, or the means over seeds).
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    /// (counter, real, simulated, within 2×).
    pub counters: Vec<(String, f64, f64, bool)>,
    /// (region, worst residency gap in points, half-share time real and simulated in ms).
    pub regions: Vec<(String, f64, Option<f64>, Option<f64>)>,
}

impl Column {
    pub fn from_comparison(name: &str, c: &Comparison) -> Column {
        Column {
            name: name.to_string(),
            counters: c
                .counters
                .iter()
                .map(|r| (r.name.clone(), r.real as f64, r.sim as f64, r.ok))
                .collect(),
            regions: c
                .regions
                .iter()
                .map(|r| {
                    (
                        r.name.clone(),
                        r.max_diff_points,
                        r.half_time_real_ms,
                        r.half_time_sim_ms,
                    )
                })
                .collect(),
        }
    }

    /// Over seeds: the means, and each region's gap of the means (the verdict's basis).
    pub fn from_seeds(name: &str, s: &SeedSummary) -> Column {
        Column {
            name: name.to_string(),
            counters: s
                .counters
                .iter()
                .map(|c| (c.name.clone(), c.real_mean, c.sim_mean, c.ok))
                .collect(),
            regions: s
                .regions
                .iter()
                .map(|r| (r.name.clone(), r.mean_gap_points, None, None))
                .collect(),
        }
    }
}

/// 12345.4 → "12,345".
fn thousands(x: f64) -> String {
    let n = x.round() as i64;
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, ch) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    if n < 0 {
        format!("-{out}")
    } else {
        out
    }
}

/// The Markdown table: counters as "real / simulated", then how many are within 2×, each
/// region's half-share times and the worst residency gap.
pub fn markdown(cols: &[Column]) -> String {
    let mut s = String::from("| counter |");
    for c in cols {
        s += &format!(" {} |", c.name);
    }
    s += "\n|---|";
    s += &"---|".repeat(cols.len());
    s += "\n";
    let mut names: Vec<&str> = Vec::new();
    for c in cols {
        for (n, ..) in &c.counters {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let cell = |c: &Column, f: &dyn Fn(&Column) -> Option<String>| f(c).unwrap_or("—".into());
    for n in &names {
        s += &format!("| {n} |");
        for c in cols {
            let v = cell(c, &|c| {
                c.counters
                    .iter()
                    .find(|x| x.0 == *n)
                    .map(|x| format!("{} / {}", thousands(x.1), thousands(x.2)))
            });
            s += &format!(" {v} |");
        }
        s += "\n";
    }
    s += "| counters within 2× |";
    for c in cols {
        let ok = c.counters.iter().filter(|x| x.3).count();
        let all = c.counters.len();
        let v = if ok == all {
            format!("**all {all}**")
        } else {
            format!("{ok} of {all}")
        };
        s += &format!(" {v} |");
    }
    s += "\n";
    let mut regions: Vec<&str> = Vec::new();
    for c in cols {
        for (n, ..) in &c.regions {
            if !regions.contains(&n.as_str()) {
                regions.push(n);
            }
        }
    }
    let secs = |ms: Option<f64>| ms.map_or("—".to_string(), |m| format!("{:.2} s", m / 1e3));
    for r in &regions {
        if cols
            .iter()
            .any(|c| c.regions.iter().any(|x| x.0 == *r && x.2.is_some()))
        {
            s += &format!("| \"{r}\" half-share time, real / sim |");
            for c in cols {
                let v = cell(c, &|c| {
                    c.regions
                        .iter()
                        .find(|x| x.0 == *r)
                        .map(|x| format!("{} / {}", secs(x.2), secs(x.3)))
                });
                s += &format!(" {v} |");
            }
            s += "\n";
        }
    }
    s += "| worst residency gap (target 15 pp) |";
    for c in cols {
        let worst = c
            .regions
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|x| format!("{} pp ({})", x.1.round(), x.0));
        s += &format!(" {} |", worst.unwrap_or("—".into()));
    }
    s += "\n";
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_column_per_scenario_with_verdicts_and_the_worst_region() {
        let a = Column {
            name: "a".into(),
            counters: vec![
                ("pgfault".into(), 91960.0, 95893.4, true),
                ("numa_hint_faults".into(), 100.0, 300.0, false),
            ],
            regions: vec![
                ("cold".into(), 10.04, Some(109.0), Some(100.0)),
                ("hot".into(), 26.5, Some(2707.0), Some(2500.0)),
            ],
        };
        let b = Column {
            name: "b".into(),
            counters: vec![("pgfault".into(), 1.0, 1.0, true)],
            regions: vec![("hot".into(), 3.0, None, None)],
        };
        let want = "\
| counter | a | b |
|---|---|---|
| pgfault | 91,960 / 95,893 | 1 / 1 |
| numa_hint_faults | 100 / 300 | — |
| counters within 2× | 1 of 2 | **all 1** |
| \"cold\" half-share time, real / sim | 0.11 s / 0.10 s | — |
| \"hot\" half-share time, real / sim | 2.71 s / 2.50 s | — / — |
| worst residency gap (target 15 pp) | 27 pp (hot) | 3 pp (hot) |
";
        assert_eq!(markdown(&[a, b]), want);
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.6), "1,000");
        assert_eq!(thousands(1234567.0), "1,234,567");
    }
}
