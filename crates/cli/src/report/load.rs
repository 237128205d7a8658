//! Read the JSON that `tierlab run --json` writes into the series the report plots. Read as a
//! `serde_json::Value`, not a typed struct, so a JSON from an older tierlab (say, without
//! `tlb_per_cpu`) still gives every plot it has the data for.

use serde_json::Value;
use std::path::Path;

/// Counters the timeline samples carry cumulatively, plotted as rates (per second).
pub const RATES: [(&str, &str); 4] = [
    ("pgpromote_success", "promotions"),
    ("pgdemote_kswapd", "demotions (kswapd)"),
    ("numa_hint_faults", "NUMA hint faults"),
    ("pgmigrate_success", "migrations"),
];

/// A scripted workload's phase (or, for a workload without phases, its timed region).
pub struct Phase {
    pub name: String,
    pub duration_ms: f64,
}

/// One run's series, ready to plot.
pub struct Run {
    /// How the run is named in legends: the file's stem, numbered if two stems clash.
    pub label: String,
    pub scenario: String,
    pub doc: Value,
    /// Sample times, seconds of simulated time.
    pub t_s: Vec<f64>,
    /// Per node: its name and whether it is top tier (DRAM).
    pub nodes: Vec<(String, bool)>,
    /// Per node, per sample: anon + file pages resident.
    pub node_pages: Vec<Vec<f64>>,
    /// Per watched region: its name and, per node, per sample, resident pages.
    pub regions: Vec<(String, Vec<Vec<f64>>)>,
    /// Per RATES counter, per sample: its cumulative value.
    pub counters: Vec<Vec<f64>>,
    /// Per sample, per CPU: TLB shootdown interrupts so far (None in JSON without them).
    pub tlb_per_cpu: Option<Vec<Vec<f64>>>,
    pub phases: Vec<Phase>,
}

/// Read and check one run JSON, or the runs of a `tierlab compare --json` file (an object
/// of runs, such as `before` and `after`); errors name the file and what is wrong.
pub fn load(path: &Path) -> Result<Vec<Run>, String> {
    let name = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: cannot read: {e}"))?;
    let doc: Value =
        serde_json::from_str(&text).map_err(|e| format!("{name}: not valid JSON: {e}"))?;
    let not_run = |e: String| format!("{name}: not a `tierlab run --json` result: {e}");
    let Some(runs) = compared_runs(&doc) else {
        return parse(doc, path).map(|r| vec![r]).map_err(not_run);
    };
    let stem = path.file_stem().map_or("".into(), |s| s.to_string_lossy());
    runs.into_iter()
        .map(|(label, run)| {
            let mut r = parse(run, path).map_err(|e| not_run(format!("`{label}`: {e}")))?;
            r.label = format!("{stem}:{label}");
            Ok(r)
        })
        .collect()
}

/// A compare file's runs: every top-level object that has a `timeline`, in order.
fn compared_runs(doc: &Value) -> Option<Vec<(String, Value)>> {
    let obj = doc.as_object().filter(|o| !o.contains_key("timeline"))?;
    let runs: Vec<(String, Value)> = obj
        .iter()
        .filter(|(_, v)| v.get("timeline").is_some())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    (!runs.is_empty()).then_some(runs)
}

fn parse(doc: Value, path: &Path) -> Result<Run, String> {
    if !doc.is_object() {
        return Err("the top level is not an object".into());
    }
    let timeline = field(&doc, "timeline")?
        .as_array()
        .ok_or("`timeline` is not an array")?;
    let nodes: Vec<(String, bool)> = field(&doc, "nodes")?
        .as_array()
        .ok_or("`nodes` is not an array")?
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let name = n["name"]
                .as_str()
                .map_or(format!("node{i}"), str::to_string);
            (name, n["toptier"].as_bool().unwrap_or(i == 0))
        })
        .collect();
    let mut run = Run {
        label: path
            .file_stem()
            .map_or("run".into(), |s| s.to_string_lossy().into_owned()),
        scenario: doc["scenario"].as_str().unwrap_or("?").to_string(),
        t_s: Vec::new(),
        node_pages: vec![Vec::new(); nodes.len()],
        regions: Vec::new(),
        counters: vec![Vec::new(); RATES.len()],
        tlb_per_cpu: Some(Vec::new()),
        phases: phases(&doc),
        nodes,
        doc: Value::Null,
    };
    for (i, s) in timeline.iter().enumerate() {
        sample(&mut run, s).map_err(|e| format!("timeline[{i}]: {e}"))?;
    }
    run.doc = doc;
    Ok(run)
}

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| format!("no `{key}`"))
}

fn num(v: &Value, key: &str) -> Result<f64, String> {
    field(v, key)?
        .as_f64()
        .ok_or_else(|| format!("`{key}` is not a number"))
}

fn sample(run: &mut Run, s: &Value) -> Result<(), String> {
    run.t_s.push(num(s, "t_ms")? / 1e3);
    let nodes = field(s, "nodes")?
        .as_array()
        .ok_or("`nodes` is not an array")?;
    if nodes.len() != run.nodes.len() {
        return Err(format!(
            "{} nodes where the run has {}",
            nodes.len(),
            run.nodes.len()
        ));
    }
    for (series, n) in run.node_pages.iter_mut().zip(nodes) {
        series.push(num(n, "anon")? + num(n, "file")?);
    }
    for (series, (key, _)) in run.counters.iter_mut().zip(RATES) {
        // A counter the JSON lacks reads 0, as /proc/vmstat would show it.
        series.push(s.get(key).and_then(Value::as_f64).unwrap_or(0.0));
    }
    let cpus = s.get("tlb_per_cpu").and_then(Value::as_array);
    run.tlb_per_cpu = match (run.tlb_per_cpu.take(), cpus) {
        (Some(mut rows), Some(cpus)) => {
            rows.push(cpus.iter().map(|c| c.as_f64().unwrap_or(0.0)).collect());
            Some(rows)
        }
        _ => None,
    };
    if let Some(regions) = s.get("regions").and_then(Value::as_object) {
        for (name, per_node) in regions {
            let per_node = per_node
                .as_array()
                .ok_or_else(|| format!("region `{name}` is not an array"))?;
            let idx = match run.regions.iter().position(|(n, _)| n == name) {
                Some(i) => i,
                None => {
                    let empty = vec![vec![0.0; run.t_s.len() - 1]; run.nodes.len()];
                    run.regions.push((name.clone(), empty));
                    run.regions.len() - 1
                }
            };
            for (node, series) in run.regions[idx].1.iter_mut().enumerate() {
                series.push(per_node.get(node).and_then(Value::as_f64).unwrap_or(0.0));
            }
        }
    }
    Ok(())
}

/// The phases the run reports; without any, its initialisation and timed region.
fn phases(doc: &Value) -> Vec<Phase> {
    let listed: Vec<Phase> = doc["phases"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|p| Phase {
                    name: p["name"].as_str().unwrap_or("?").to_string(),
                    duration_ms: p["duration_us"].as_f64().unwrap_or(0.0) / 1e3,
                })
                .collect()
        })
        .unwrap_or_default();
    if !listed.is_empty() {
        return listed;
    }
    let (sim, timed) = (
        doc["sim_seconds"].as_f64().unwrap_or(0.0),
        doc["runtime_s"].as_f64().unwrap_or(0.0),
    );
    vec![
        Phase {
            name: "before the timed region".into(),
            duration_ms: (sim - timed).max(0.0) * 1e3,
        },
        Phase {
            name: "timed region".into(),
            duration_ms: timed * 1e3,
        },
    ]
}

/// Give every run a distinct label (a.json and dir/a.json become a and a (2)).
pub fn distinct_labels(runs: &mut [Run]) {
    for i in 1..runs.len() {
        let base = runs[i].label.clone();
        let mut n = 2;
        while runs[..i].iter().any(|r| r.label == runs[i].label) {
            runs[i].label = format!("{base} ({n})");
            n += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_problem() {
        let p = Path::new("x.json");
        let e = |v: Value| parse(v, p).err().unwrap_or_default();
        assert!(e(serde_json::json!([1])).contains("not an object"));
        assert!(e(serde_json::json!({"nodes": []})).contains("no `timeline`"));
        let bad = serde_json::json!({"nodes": [{"name": "a"}], "timeline": [{"t_ms": "x"}]});
        assert!(e(bad).contains("timeline[0]: `t_ms` is not a number"));
    }

    #[test]
    fn a_compare_file_gives_its_runs_in_order() {
        let run = serde_json::json!({"nodes": [], "timeline": []});
        let doc = serde_json::json!({"before": run, "after": run, "table": []});
        let runs = compared_runs(&doc).expect("two runs");
        let labels: Vec<&str> = runs.iter().map(|(l, _)| l.as_str()).collect();
        assert_eq!(labels, ["before", "after"]);
        assert!(compared_runs(&run).is_none());
    }

    #[test]
    fn reads_a_minimal_run() {
        let doc = serde_json::json!({
            "scenario": "s", "sim_seconds": 2.0, "runtime_s": 1.5,
            "nodes": [{"name": "dram0", "toptier": true}, {"name": "cxl1", "toptier": false}],
            "timeline": [
                {"t_ms": 0.0, "pgpromote_success": 0, "tlb_per_cpu": [0, 0],
                 "nodes": [{"anon": 1, "file": 2}, {"anon": 0, "file": 0}],
                 "regions": {"heap": [1, 0]}},
                {"t_ms": 100.0, "pgpromote_success": 5, "tlb_per_cpu": [3, 4],
                 "nodes": [{"anon": 2, "file": 2}, {"anon": 1, "file": 0}],
                 "regions": {"heap": [1, 1]}}
            ]
        });
        let r = parse(doc, Path::new("dir/base.json")).expect("parses");
        assert_eq!(r.label, "base");
        assert_eq!(r.t_s, vec![0.0, 0.1]);
        assert_eq!(r.node_pages, vec![vec![3.0, 4.0], vec![0.0, 1.0]]);
        assert_eq!(r.counters[0], vec![0.0, 5.0]);
        assert_eq!(r.regions[0].1, vec![vec![1.0, 1.0], vec![0.0, 1.0]]);
        assert_eq!(r.tlb_per_cpu.as_ref().map(Vec::len), Some(2));
        assert_eq!(r.phases[1].name, "timed region");
        assert!((r.phases[0].duration_ms - 500.0).abs() < 1e-9);
    }
}
