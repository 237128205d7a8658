//! `tierlab reproduce`: run a seed's experiment from the library's table
//! (`tierlab::reproductions`) and print the published figures beside the simulated ones.

use crate::compare::{self, change, fmt_value};
use tierlab::reproductions::{self, Figure, Measure, Published, Reproduction, REPRODUCTIONS};
use tierlab::Config;

/// One line per reproduction: name, seed, what it runs (`reproduce --list` and `--help`).
pub fn listing() -> String {
    let w = REPRODUCTIONS
        .iter()
        .map(|r| r.name.len())
        .max()
        .unwrap_or(0);
    let mut out: String = REPRODUCTIONS
        .iter()
        .map(|r| format!("  {:<w$}  seed {}  {}\n", r.name, r.seed, r.what_it_runs))
        .collect();
    for (name, members) in reproductions::GROUPS {
        out += &format!("  {name:<w$}  runs {}\n", members.join(", "));
    }
    out
}

/// Run reproduction `name` with the user's `--set`s applied to every variant, and print the
/// comparison table and the published figures beside the simulated ones.
pub fn run(name: &str, sets: &[String]) -> Result<(), String> {
    if let Some((_, members)) = reproductions::GROUPS.iter().find(|g| g.0 == name) {
        for m in members.iter() {
            run(m, sets)?;
            println!();
        }
        return Ok(());
    }
    let r = reproductions::lookup(name)?;
    let origin = format!("built-in {} scenario", r.scenario.trim_end_matches(".toml"));
    let mut variants = Vec::new();
    for v in r.variants {
        let all: Vec<String> = sets
            .iter()
            .cloned()
            .chain(v.sets.iter().map(|s| s.to_string()))
            .collect();
        let cfg = Config::from_str_with(r.scenario_toml, &origin, None, &all)
            .map_err(|e| e.to_string())?;
        variants.push(compare::Variant {
            label: v.label.into(),
            cfg,
            origin: origin.clone(),
        });
    }
    // A seed that publishes only changes compared one run before and one after.
    let before_after = r
        .figures
        .iter()
        .all(|f| matches!(f.published, Published::Change { .. }));
    println!("Reproducing {}", r.title);
    if before_after {
        let said: Vec<String> = r
            .variants
            .iter()
            .map(|v| match v.sets {
                [] => format!("{}: the scenario as shipped", v.label),
                sets => format!("{}: with {}", v.label, sets.join(" ")),
            })
            .collect();
        println!("{}\n", said.join("; "));
    } else {
        for v in r.variants {
            println!("  {}: {}", v.label, v.sets.join(" "));
        }
    }
    let results = compare::run_all(variants, false)?;
    print!("{}", compare::table(&results));

    let cols: Vec<Vec<f64>> = results.iter().map(|(_, r)| compare::metrics(r)).collect();
    let runs = Runs {
        cols: &cols,
        results: &results,
    };
    let sources = sources(r);
    let mut marks = 0;
    let changes: Vec<&Figure> = r.figures.iter().filter(|f| is_change(f)).collect();
    if !changes.is_empty() {
        println!("\nPublished change beside simulated change (DIRECTION: opposite sign; SIZE ×2: off by more than a factor of 2):\n");
        let (table, m) = changes_table(&changes, &runs, &sources);
        print!("{table}");
        marks += m;
    }
    let values: Vec<&Figure> = r.figures.iter().filter(|f| !is_change(f)).collect();
    let columns = value_columns(r, &values);
    if !values.is_empty() {
        let levels = values
            .iter()
            .any(|f| matches!(f.published, Published::Levels { .. }));
        if levels {
            println!(
                "\nPublished beside simulated (DIRECTION: a column whose change from the first has the other sign than the published one, changes under 2 % counting as none; SIZE ×2: a value off by more than a factor of 2):\n"
            );
        } else {
            println!(
                "\nPublished beside simulated (DIRECTION: a variant not better than the one published before it; SIZE ×2: a value off by more than a factor of 2):\n"
            );
        }
        let (table, m) = values_table(r, &values, &columns, &runs, &sources);
        print!("{table}");
        marks += m;
    }
    println!("\nSources:");
    for (i, s) in sources.iter().enumerate() {
        println!("  [{}] {s}", i + 1);
    }
    // Variants without a published value (other than the baseline) get one line each.
    let mut said = false;
    for (i, v) in r.variants.iter().enumerate().skip(1) {
        if values.is_empty() || columns.contains(&i) {
            continue;
        }
        let parts: Vec<String> = values
            .iter()
            .map(|f| {
                let unit = if f.metric.ends_with("(%)") { " %" } else { "" };
                let sim = simulated(f.measure, &runs)[i];
                let sim = sim.map_or("-".to_string(), |x| format!("{x:.1}"));
                format!("{} {sim}{unit}", f.prose)
            })
            .collect();
        println!("\n{}: {}.", v.title, parts.join(", "));
        said = true;
    }
    if !said {
        println!();
    }
    let what = if before_after { "metric(s)" } else { "row(s)" };
    println!("{marks} {what} marked.");
    let violations: u64 = results.iter().map(|r| r.1.check.violations).sum();
    if violations > 0 {
        return Err(format!(
            "{violations} invariant violation(s) during the runs"
        ));
    }
    Ok(())
}

fn is_change(f: &Figure) -> bool {
    matches!(f.published, Published::Change { .. })
}

/// The distinct sources, in the order the figures cite them; a figure's footnote is its index + 1.
fn sources(r: &Reproduction) -> Vec<&'static str> {
    let mut seen = Vec::new();
    for f in r.figures {
        if !seen.contains(&f.source) {
            seen.push(f.source);
        }
    }
    seen
}

fn footnote(sources: &[&str], f: &Figure) -> String {
    let n = sources.iter().position(|&s| s == f.source).unwrap_or(0) + 1;
    format!("[{n}]")
}

/// The variants' results and their comparison-table metrics.
struct Runs<'a> {
    cols: &'a [Vec<f64>],
    results: &'a [compare::Finished],
}

/// A figure's simulated value for each variant (None: the metric or phase is not there).
fn simulated(m: Measure, runs: &Runs) -> Vec<Option<f64>> {
    let cols = runs.cols;
    let at = |name: &str| compare::METRICS.iter().position(|&n| n == name);
    match m {
        Measure::Metric(name) => cols.iter().map(|c| at(name).map(|i| c[i])).collect(),
        Measure::PercentOfBaseline(name) => cols
            .iter()
            .map(|c| at(name).map(|i| 100.0 * c[i] / cols[0][i].max(f64::MIN_POSITIVE)))
            .collect(),
        Measure::LossVsBaseline(name) => cols
            .iter()
            .map(|c| at(name).map(|i| 100.0 * (1.0 - c[i] / cols[0][i])))
            .collect(),
        Measure::TlbFlushSharePct => runs
            .results
            .iter()
            .map(|(_, r)| {
                let flush = r.perf.get("arm64.tlbi_cycles") + r.perf.get("arm64.dsb_ish_cycles");
                (r.cpu_time.cycles > 0).then(|| 100.0 * flush as f64 / r.cpu_time.cycles as f64)
            })
            .collect(),
        Measure::PhaseMs(phase) => runs
            .results
            .iter()
            .map(|(_, r)| {
                let p = r.phases.iter().find(|p| p.name == phase)?;
                Some(p.duration_us_per_instance / 1000.0)
            })
            .collect(),
    }
}

/// Simulated change beside the published one, marked where the direction differs or the size
/// is off by more than a factor of 2. Published changes under 2 % count as "no change".
fn changes_table(figures: &[&Figure], runs: &Runs, sources: &[&str]) -> (String, usize) {
    let mut s = format!(
        "{:<24}{:>14}{:>14}{:>5}{:>10}   {}\n",
        "metric", "published", "simulated", "src", "", "simulated before → after"
    );
    let mut marks = 0;
    for f in figures {
        let Published::Change { before, after } = f.published else {
            continue;
        };
        let sim = simulated(f.measure, runs);
        let (b, a) = (sim[0], sim.get(1).copied().flatten());
        let pub_pct = change(before, after).unwrap_or(0.0);
        let sim_pct = b.zip(a).and_then(|(b, a)| change(b, a));
        let mark = match sim_pct {
            None => "NO DATA",
            Some(sp) => {
                if pub_pct.abs() < 2.0 {
                    if sp.abs() < 4.0 {
                        ""
                    } else {
                        "SIZE"
                    }
                } else if sp.signum() != pub_pct.signum() || sp.abs() < 0.5 {
                    "DIRECTION"
                } else if !(0.5..=2.0).contains(&(sp.abs() / pub_pct.abs())) {
                    "SIZE ×2"
                } else {
                    ""
                }
            }
        };
        if !mark.is_empty() {
            marks += 1;
        }
        let show = |v: Option<f64>| v.map_or("-".to_string(), fmt_value);
        s.push_str(&format!(
            "{:<24}{:>14}{:>14}{:>5}{:>10}   {} → {}\n",
            f.metric,
            format!("{pub_pct:+.1}%"),
            sim_pct
                .map(|x| format!("{x:+.1}%"))
                .unwrap_or_else(|| "-".into()),
            footnote(sources, f),
            mark,
            show(b),
            show(a),
        ));
    }
    (s, marks)
}

/// The variants (by index) that some figure publishes a value for, in variant order.
fn value_columns(r: &Reproduction, figures: &[&Figure]) -> Vec<usize> {
    (0..r.variants.len())
        .filter(|&i| {
            figures.iter().any(|f| match f.published {
                Published::Values { values, .. } | Published::Levels { values, .. } => {
                    values.iter().any(|(l, _)| *l == r.variants[i].label)
                }
                Published::Change { .. } => false,
            })
        })
        .collect()
}

/// Published and simulated values side by side, marked where the published order (each
/// listed variant better than the one before) does not hold, or a value is off by more than
/// a factor of 2.
fn values_table(
    r: &Reproduction,
    figures: &[&Figure],
    columns: &[usize],
    runs: &Runs,
    sources: &[&str],
) -> (String, usize) {
    let w = columns
        .iter()
        .map(|&c| r.variants[c].title.len() + 5)
        .max()
        .unwrap_or(0)
        .max(12);
    let mut s = format!("{:<34}", "metric");
    for &c in columns {
        let t = r.variants[c].title;
        s.push_str(&format!(
            "{:>w$}{:>w$}",
            format!("{t} pub"),
            format!("{t} sim")
        ));
    }
    s.push_str(&format!("{:>5}\n", "src"));
    let mut marks = 0;
    for f in figures {
        let (values, higher_is_better, levels) = match f.published {
            Published::Values {
                values,
                higher_is_better,
            } => (values, higher_is_better, false),
            Published::Levels {
                values,
                higher_is_better,
            } => (values, higher_is_better, true),
            Published::Change { .. } => continue,
        };
        let sim = simulated(f.measure, runs);
        let label_sim = |label: &str| {
            let i = r.variants.iter().position(|v| v.label == label)?;
            sim[i]
        };
        let listed: Option<Vec<(f64, f64)>> = values
            .iter()
            .map(|&(l, p)| label_sim(l).map(|x| (p, x)))
            .collect();
        let off = |p: f64, s: f64| !(0.5..=2.0).contains(&(s.max(0.1) / p.max(0.1)));
        let mark = match listed {
            None => "NO DATA",
            Some(listed) if levels => {
                // Each level's change from the baseline, as a sign (under 2 % of it: none).
                let sign = |x: f64, base: f64| {
                    if x.abs() <= 0.02 * base.abs() {
                        0
                    } else if x > 0.0 {
                        1
                    } else {
                        -1
                    }
                };
                let (p0, s0) = listed[0];
                let turned = listed[1..].iter().any(|&(p, s)| {
                    let want = sign(p - p0, p0);
                    want != 0 && sign(s - s0, s0) != want
                });
                if turned {
                    "DIRECTION"
                } else if listed.iter().any(|&(p, s)| off(p, s)) {
                    "SIZE ×2"
                } else {
                    ""
                }
            }
            Some(listed) => {
                let better = listed.windows(2).all(|w| {
                    let (was, now) = (w[0].1, w[1].1);
                    if higher_is_better {
                        now > was
                    } else {
                        now < was
                    }
                });
                if !better {
                    "DIRECTION"
                } else if listed.iter().any(|&(p, s)| off(p, s)) {
                    "SIZE ×2"
                } else {
                    ""
                }
            }
        };
        if !mark.is_empty() {
            marks += 1;
        }
        s.push_str(&format!("{:<34}", f.metric));
        for &c in columns {
            let v = r.variants[c].label;
            let p = values.iter().find(|(l, _)| *l == v).map(|&(_, p)| p);
            for x in [p, sim[c]] {
                match x {
                    Some(x) => s.push_str(&format!("{x:>w$.1}")),
                    None => s.push_str(&format!("{:>w$}", "-")),
                }
            }
        }
        s.push_str(&format!("{:>5}   {mark}\n", footnote(sources, f)));
    }
    (s, marks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_figure_measures_a_metric_of_the_comparison_table_or_a_phase_of_the_scenario() {
        for r in REPRODUCTIONS {
            let cfg = Config::from_str_with(r.scenario_toml, r.scenario, None, &[]).unwrap();
            let phases = cfg.workload.get("phases").and_then(|p| p.as_array());
            let has_phase = |name: &str| {
                phases.is_some_and(|ps| {
                    ps.iter()
                        .any(|p| p.get("name").and_then(|n| n.as_str()) == Some(name))
                })
            };
            for f in r.figures {
                match f.measure {
                    Measure::Metric(m)
                    | Measure::LossVsBaseline(m)
                    | Measure::PercentOfBaseline(m) => assert!(
                        compare::METRICS.contains(&m),
                        "{} {}: '{m}' is not a comparison metric",
                        r.name,
                        f.metric
                    ),
                    Measure::TlbFlushSharePct => {}
                    Measure::PhaseMs(p) => assert!(
                        has_phase(p),
                        "{} {}: the scenario has no phase '{p}'",
                        r.name,
                        f.metric
                    ),
                }
            }
        }
    }

    #[test]
    fn listing_names_every_reproduction() {
        let l = listing();
        for r in REPRODUCTIONS {
            assert!(l.contains(r.name) && l.contains(r.seed), "{l}");
        }
    }
}
