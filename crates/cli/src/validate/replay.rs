//! `tierlab validate --replay FILE.json`: the simulated side again, against the guest runs a
//! `validate --json` recorded. Each seed's stand-in reruns with the `--set`s it ran with
//! (plus the command line's), so a model change or a knob can be judged against the same real
//! samples in seconds instead of a guest boot per seed. With `--refit` the readers' gaps are
//! searched again first, as `validate` searches them after its compared run.

use super::command::{
    calibration_knobs, counters, run_scenario, search_quiet_gaps, suite_name, without_gaps,
    write_json,
};
use super::report::{self, RealSample};
use super::{seeds, suite};
use serde_json::Value;
use std::path::Path;

/// One recorded seed: its real samples, the program's phase lines and the stand-in's keys.
struct Recorded {
    seed: u64,
    real: Vec<RealSample>,
    phases: Vec<Value>,
    sets: Vec<String>,
    /// The run as recorded, which `--json` writes again with the new simulated side.
    doc: Value,
}

/// The seeds a `validate --json` file holds: a `seeds` array, or the one run itself.
fn recorded(path: &Path, doc: &Value) -> Result<Vec<Recorded>, String> {
    let file = path.display();
    let runs: Vec<&Value> = match doc.get("seeds") {
        Some(Value::Array(runs)) => runs.iter().collect(),
        Some(_) => return Err(format!("{file}: `seeds` is not an array")),
        None => vec![doc],
    };
    if runs.is_empty() {
        return Err(format!("{file}: no seed recorded"));
    }
    runs.iter()
        .enumerate()
        .map(|(i, r)| {
            let field = |k: &str| {
                r.get(k)
                    .cloned()
                    .ok_or_else(|| format!("{file}: run {i} has no `{k}` (not a validate --json?)"))
            };
            let real: Vec<RealSample> = serde_json::from_value(field("real")?)
                .map_err(|e| format!("{file}: run {i}: `real`: {e}"))?;
            let sets: Vec<String> = serde_json::from_value(field("stand_in_sets")?)
                .map_err(|e| format!("{file}: run {i}: `stand_in_sets`: {e}"))?;
            let phases = match r.get("real_phases") {
                Some(Value::Array(lines)) => lines.clone(),
                _ => Vec::new(),
            };
            let seed = r
                .get("seed")
                .and_then(Value::as_u64)
                .or_else(|| r.pointer("/simulated/seed").and_then(Value::as_u64))
                .unwrap_or(0);
            Ok(Recorded {
                seed,
                real,
                phases,
                sets,
                doc: (*r).clone(),
            })
        })
        .collect()
}

/// The keys of the compared run that the quiet-window search does not take (`validate` runs
/// it with the scenario's seed, at tick offset 0 and untraced).
fn searched_without(set: &str) -> bool {
    [
        "scenario.seed=",
        "machine.tick_offset_ns=",
        "sim.trace_numa_scan=",
    ]
    .iter()
    .any(|k| set.starts_with(k))
}

/// `--refit`: the recorded stand-in's gaps searched again against the seed's quiet window on
/// the stand-in as it is now; returns its keys with the new gaps in place of the old.
fn refit(origin: &Path, r: &Recorded) -> Result<Vec<String>, String> {
    if r.phases.is_empty() {
        return Err(format!(
            "seed {}: --refit needs the program's phase lines (`real_phases`), and this file has none",
            r.seed
        ));
    }
    let kept = without_gaps(&r.sets);
    let cfg = tierlab::Config::load(origin, &kept).map_err(|e| e.to_string())?;
    let searched: Vec<String> = kept
        .iter()
        .filter(|s| !searched_without(s))
        .cloned()
        .collect();
    let gaps = search_quiet_gaps(&cfg, &r.phases, &r.real, |gap_sets| {
        let mut sets = searched.clone();
        sets.extend(gap_sets.iter().cloned());
        sets.extend(calibration_knobs());
        run_scenario(origin, &sets).map(|(_, result)| result)
    })?;
    if gaps.is_empty() {
        // No quiet window (readers that never sleep): validate keeps its calibration gaps.
        return Ok(r.sets.clone());
    }
    eprintln!("tierlab: seed {}: refitted {}", r.seed, gaps.join(" "));
    let mut sets = kept;
    sets.extend(gaps);
    Ok(sets)
}

/// Rerun the stand-in of every seed `path` recorded, with `extra` keys after its own (and,
/// with `refit`, its readers' gaps searched again), and print the comparison as `validate`
/// does; `json`: write the file again with the new stand-ins, simulated runs and
/// comparisons (the guest's side as recorded), itself a file `--replay` takes.
pub fn run(
    path: &Path,
    extra: &[String],
    refit_gaps: bool,
    json: Option<&Path>,
) -> Result<suite::Column, String> {
    let file = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{file}: {e}"))?;
    let origin = (doc.get("scenario").and_then(Value::as_str))
        .ok_or_else(|| format!("{file}: no `scenario` (not a validate --json?)"))?
        .to_string();
    let runs = recorded(path, &doc)?;
    let kernel = doc.get("kernel").and_then(Value::as_str).unwrap_or("?");
    let mut cmps = Vec::new();
    let mut docs = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        eprintln!(
            "tierlab: replaying seed {} ({} of {}) on the stand-in",
            r.seed,
            i + 1,
            runs.len()
        );
        let mut sets = if refit_gaps {
            refit(Path::new(&origin), r)?
        } else {
            r.sets.clone()
        };
        sets.extend(extra.iter().cloned());
        let (cfg, result) = run_scenario(Path::new(&origin), &sets)?;
        let cmp = report::compare(&r.real, &result, &counters(&cfg));
        if json.is_some() {
            let mut doc = r.doc.clone();
            doc["stand_in_sets"] = serde_json::json!(sets);
            doc["simulated"] = result.to_json();
            doc["comparison"] = serde_json::to_value(&cmp).map_err(|e| e.to_string())?;
            docs.push(doc);
        }
        cmps.push(cmp);
    }
    println!(
        "{origin}: the guest runs recorded in {file} (Linux {kernel}) beside tierlab now{}{}\n",
        if refit_gaps {
            ", the readers' gaps searched again"
        } else {
            ""
        },
        if extra.is_empty() {
            String::new()
        } else {
            format!(" with {}", extra.join(" "))
        }
    );
    if let [one] = cmps.as_slice() {
        print!("{}", one.text());
        if let (Some(out), [doc]) = (json, docs.as_slice()) {
            write_json(out, doc)?;
        }
        return Ok(suite::Column::from_comparison(&suite_name(&origin), one));
    }
    let seeds: Vec<u64> = runs.iter().map(|r| r.seed).collect();
    let refs: Vec<&report::Comparison> = cmps.iter().collect();
    let summary = seeds::summarize(&seeds, &refs);
    print!("{}", summary.text());
    if let Some(out) = json {
        let mut whole = doc.clone();
        whole["seeds"] = Value::Array(docs);
        whole["summary"] = serde_json::to_value(&summary).map_err(|e| e.to_string())?;
        write_json(out, &whole)?;
    }
    Ok(suite::Column::from_seeds(&suite_name(&origin), &summary))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_that_validate_did_not_write_is_refused_with_what_is_missing() {
        let path = Path::new("x.json");
        let err = |doc: &str| match recorded(path, &serde_json::from_str(doc).unwrap()) {
            Err(e) => e,
            Ok(_) => panic!("{doc} was taken"),
        };
        assert!(err(r#"{"scenario":"s.toml"}"#).contains("no `real`"));
        assert!(err(r#"{"real":[]}"#).contains("no `stand_in_sets`"));
        assert!(err(r#"{"seeds":[]}"#).contains("no seed"));
        assert!(err(r#"{"seeds":{}}"#).contains("not an array"));
        assert!(err(r#"{"real":[{"t_ms":"x"}],"stand_in_sets":[]}"#).contains("`real`"));
        // One run, or one per seed with its seed number.
        let one = recorded(
            path,
            &serde_json::json!({"real": [], "stand_in_sets": ["a=1"]}),
        );
        assert_eq!(one.unwrap()[0].sets, vec!["a=1".to_string()]);
        let two = serde_json::json!({"seeds": [
            {"seed": 42, "real": [], "stand_in_sets": []},
            {"seed": 43, "real": [], "stand_in_sets": []}]});
        let seeds: Vec<u64> = recorded(path, &two)
            .unwrap()
            .iter()
            .map(|r| r.seed)
            .collect();
        assert_eq!(seeds, vec![42, 43]);
    }

    #[test]
    fn refit_searches_without_the_seed_offset_and_trace_and_needs_the_phase_lines() {
        // validate's own search runs the scenario's seed, untraced, at tick offset 0.
        assert!(searched_without("scenario.seed=43"));
        assert!(searched_without("machine.tick_offset_ns=1333000"));
        assert!(searched_without("sim.trace_numa_scan=true"));
        assert!(!searched_without("machine.cpu_ghz=1.0"));
        assert!(!searched_without("workload.phases.2.gap_cycles=[600, 200]"));
        let r = Recorded {
            seed: 42,
            real: Vec::new(),
            phases: Vec::new(),
            sets: Vec::new(),
            doc: Value::Null,
        };
        let e = refit(Path::new("x.toml"), &r).unwrap_err();
        assert!(e.contains("real_phases"), "{e}");
    }
}
