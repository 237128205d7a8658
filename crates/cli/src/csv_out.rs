//! `tierlab run --csv DIR`: the result's tables as CSV files a spreadsheet or pandas reads
//! directly: the timeline, the phases, the CPUs and the nodes, one row per item, nested
//! fields flattened to `a.b` and `a[i]` columns.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

/// Make sure `dir` exists and is writable before the run starts, so a bad path fails at once.
pub fn prepare(dir: &Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("--csv {}: {e}", dir.display()))?;
    let probe = dir.join(".tierlab-write-test");
    std::fs::write(&probe, b"").map_err(|e| format!("--csv {}: {e}", dir.display()))?;
    let _ = std::fs::remove_file(probe);
    Ok(())
}

/// Write timeline.csv, phases.csv, cpus.csv and nodes.csv from a run's JSON; returns the
/// files written.
pub fn write(dir: &Path, doc: &Value) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    for (file, rows) in [
        ("timeline.csv", rows_of(doc, "timeline")),
        ("phases.csv", rows_of(doc, "phases")),
        ("cpus.csv", cpu_rows(doc)),
        ("nodes.csv", rows_of(doc, "nodes")),
    ] {
        let path = dir.join(file);
        write_table(&path, &rows).map_err(|e| format!("{}: {e}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The objects of the array at `key`, flattened.
fn rows_of(doc: &Value, key: &str) -> Vec<Vec<(String, String)>> {
    doc.get(key)
        .and_then(Value::as_array)
        .map(|items| items.iter().map(flatten_row).collect())
        .unwrap_or_default()
}

/// One row per CPU: its perf counters and its `TLB` and `CAL` interrupts.
fn cpu_rows(doc: &Value) -> Vec<Vec<(String, String)>> {
    let perf = doc.get("perf_per_cpu").and_then(Value::as_array);
    let irq = doc.get("interrupts").and_then(Value::as_object);
    let n = perf.map_or(0, Vec::len);
    (0..n)
        .map(|c| {
            let mut row = vec![("cpu".to_string(), c.to_string())];
            if let Some(p) = perf.and_then(|p| p.get(c)) {
                row.extend(flatten_row(p));
            }
            for (name, per_cpu) in irq.into_iter().flatten() {
                if let Some(v) = per_cpu.as_array().and_then(|a| a.get(c)) {
                    row.push((format!("interrupts.{name}"), scalar(v)));
                }
            }
            row
        })
        .collect()
}

/// An object's fields as (column, value), nested objects and arrays flattened.
fn flatten_row(v: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match v {
        Value::Object(m) => flatten_into(m, "", &mut out),
        other => out.push(("value".to_string(), scalar(other))),
    }
    out
}

fn flatten_into(m: &Map<String, Value>, prefix: &str, out: &mut Vec<(String, String)>) {
    for (k, v) in m {
        let key = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        flatten_value(v, key, out);
    }
}

fn flatten_value(v: &Value, key: String, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => flatten_into(m, &key, out),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                flatten_value(item, format!("{key}[{i}]"), out);
            }
        }
        other => out.push((key, scalar(other))),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A CSV table whose columns are every key in first-seen order; a row without a key leaves
/// its cell empty.
fn write_table(path: &Path, rows: &[Vec<(String, String)>]) -> Result<(), String> {
    let mut columns: Vec<&str> = Vec::new();
    for row in rows {
        for (k, _) in row {
            if !columns.contains(&k.as_str()) {
                columns.push(k);
            }
        }
    }
    let mut w = csv::Writer::from_path(path).map_err(|e| e.to_string())?;
    w.write_record(&columns).map_err(|e| e.to_string())?;
    for row in rows {
        let cells = columns.iter().map(|c| {
            row.iter()
                .find(|(k, _)| k == c)
                .map_or("", |(_, v)| v.as_str())
        });
        w.write_record(cells).map_err(|e| e.to_string())?;
    }
    w.flush().map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_fields_become_columns_and_missing_cells_stay_empty() {
        let rows = vec![
            flatten_row(&json!({"t": 1, "nodes": [{"free": 5}], "regions": {"hot": [1, 2]}})),
            flatten_row(&json!({"t": 2, "extra": "x"})),
        ];
        let dir = std::env::temp_dir().join(format!("tierlab-csv-{}", std::process::id()));
        prepare(&dir).unwrap();
        let path = dir.join("t.csv");
        write_table(&path, &rows).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(
            text,
            "t,nodes[0].free,regions.hot[0],regions.hot[1],extra\n1,5,1,2,\n2,,,,x\n"
        );
    }
}
