//! `tierlab validate --replay FILE.json`: the simulated side again, against the guest runs a
//! `validate --json` recorded. Each seed's stand-in reruns with the `--set`s it ran with
//! (plus the command line's), so a model change or a knob can be judged against the same real
//! samples in seconds instead of a guest boot per seed.

use super::command::{counters, run_scenario, suite_name};
use super::report::{self, RealSample};
use super::{seeds, suite};
use serde_json::Value;
use std::path::Path;

/// One recorded seed: its real samples and the stand-in's keys.
struct Recorded {
    seed: u64,
    real: Vec<RealSample>,
    sets: Vec<String>,
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
            let seed = r
                .get("seed")
                .and_then(Value::as_u64)
                .or_else(|| r.pointer("/simulated/seed").and_then(Value::as_u64))
                .unwrap_or(0);
            Ok(Recorded { seed, real, sets })
        })
        .collect()
}

/// Rerun the stand-in of every seed `path` recorded, with `extra` keys after its own, and
/// print the comparison as `validate` does.
pub fn run(path: &Path, extra: &[String]) -> Result<suite::Column, String> {
    let file = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("{file}: {e}"))?;
    let doc: Value = serde_json::from_str(&text).map_err(|e| format!("{file}: {e}"))?;
    let origin = (doc.get("scenario").and_then(Value::as_str))
        .ok_or_else(|| format!("{file}: no `scenario` (not a validate --json?)"))?
        .to_string();
    let runs = recorded(path, &doc)?;
    let kernel = doc.get("kernel").and_then(Value::as_str).unwrap_or("?");
    let mut cmps = Vec::new();
    for (i, r) in runs.iter().enumerate() {
        eprintln!(
            "tierlab: replaying seed {} ({} of {}) on the stand-in",
            r.seed,
            i + 1,
            runs.len()
        );
        let mut sets = r.sets.clone();
        sets.extend(extra.iter().cloned());
        let (cfg, result) = run_scenario(Path::new(&origin), &sets)?;
        cmps.push(report::compare(&r.real, &result, &counters(&cfg)));
    }
    println!(
        "{origin}: the guest runs recorded in {file} (Linux {kernel}) beside tierlab now{}\n",
        if extra.is_empty() {
            String::new()
        } else {
            format!(" with {}", extra.join(" "))
        }
    );
    if let [one] = cmps.as_slice() {
        print!("{}", one.text());
        return Ok(suite::Column::from_comparison(&suite_name(&origin), one));
    }
    let seeds: Vec<u64> = runs.iter().map(|r| r.seed).collect();
    let refs: Vec<&report::Comparison> = cmps.iter().collect();
    let summary = seeds::summarize(&seeds, &refs);
    print!("{}", summary.text());
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
}
