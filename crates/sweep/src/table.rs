//! The sweep's table: one row per finished point, in point order: id, scenario, the knobs,
//! seed, the headline metrics, then the wall-clock columns; written as CSV and Parquet.

use crate::grid::{plain, Grid, Point};
use crate::metrics::{self, Num};
use crate::run::run_file;
use std::path::Path;

/// One column's values, typed for Parquet.
#[derive(Clone, Debug, PartialEq)]
pub enum Values {
    Int(Vec<i64>),
    Float(Vec<f64>),
    Bool(Vec<bool>),
    Str(Vec<String>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::Int(v) => v.len(),
            Values::Float(v) => v.len(),
            Values::Bool(v) => v.len(),
            Values::Str(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `i` as CSV writes it (floats always with a point or exponent, so they read back
    /// as floats).
    fn text(&self, i: usize) -> String {
        match self {
            Values::Int(v) => v[i].to_string(),
            Values::Float(v) => format!("{:?}", v[i]),
            Values::Bool(v) => v[i].to_string(),
            Values::Str(v) => csv_quote(&v[i]),
        }
    }
}

/// A named column.
#[derive(Clone, Debug, PartialEq)]
pub struct Column {
    pub name: String,
    pub values: Values,
}

/// The table, and the points that have no result yet.
#[derive(Clone, Debug)]
pub struct Table {
    pub columns: Vec<Column>,
    pub missing: Vec<String>,
}

/// Read every point's runs/<id>.json under `out_dir` and build the table.
pub fn build(grid: &Grid, points: &[Point], out_dir: &Path) -> Result<Table, String> {
    let mut rows: Vec<(&Point, serde_json::Value)> = Vec::new();
    let mut missing = Vec::new();
    for p in points {
        let path = run_file(out_dir, &p.id);
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let v =
                    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
                rows.push((p, v));
            }
            Err(_) => missing.push(p.id.clone()),
        }
    }
    let mut columns = vec![
        str_column("id", rows.iter().map(|(p, _)| p.id.clone()).collect()),
        str_column(
            "scenario",
            rows.iter().map(|(p, _)| p.scenario.clone()).collect(),
        ),
    ];
    for (k, (key, _)) in grid.knobs.iter().enumerate() {
        let values: Vec<&toml::Value> = rows.iter().map(|(p, _)| &p.knobs[k].1).collect();
        columns.push(Column {
            name: key.clone(),
            values: knob_values(&values),
        });
    }
    columns.push(Column {
        name: "seed".into(),
        values: Values::Int(
            rows.iter()
                .map(|(_, r)| r.get("seed").and_then(|s| s.as_i64()).unwrap_or(0))
                .collect(),
        ),
    });
    let per_row: Vec<Vec<Num>> = rows
        .iter()
        .map(|(_, r)| {
            let mut v = metrics::headline(r);
            v.extend(metrics::wall(r));
            v
        })
        .collect();
    let names = metrics::HEADLINE.iter().chain(metrics::WALL.iter());
    for (m, name) in names.enumerate() {
        let cells: Vec<&Num> = per_row.iter().map(|r| &r[m]).collect();
        let values = if cells.iter().all(|c| matches!(c, Num::Int(_))) {
            Values::Int(cells.iter().map(|c| as_f64(c) as i64).collect())
        } else {
            Values::Float(cells.iter().map(|c| as_f64(c)).collect())
        };
        columns.push(Column {
            name: name.to_string(),
            values,
        });
    }
    Ok(Table { columns, missing })
}

fn as_f64(n: &Num) -> f64 {
    match n {
        Num::Int(i) => *i as f64,
        Num::Float(f) => *f,
    }
}

fn str_column(name: &str, v: Vec<String>) -> Column {
    Column {
        name: name.into(),
        values: Values::Str(v),
    }
}

/// A knob's column: integers, floats (integers among floats widen), booleans, else text.
fn knob_values(v: &[&toml::Value]) -> Values {
    use toml::Value as T;
    if v.iter().all(|x| matches!(x, T::Integer(_))) {
        Values::Int(v.iter().filter_map(|x| x.as_integer()).collect())
    } else if v.iter().all(|x| matches!(x, T::Integer(_) | T::Float(_))) {
        Values::Float(
            v.iter()
                .map(|x| x.as_float().or(x.as_integer().map(|i| i as f64)))
                .map(|x| x.unwrap_or(0.0))
                .collect(),
        )
    } else if v.iter().all(|x| matches!(x, T::Boolean(_))) {
        Values::Bool(v.iter().filter_map(|x| x.as_bool()).collect())
    } else {
        Values::Str(v.iter().map(|x| plain(x)).collect())
    }
}

fn csv_quote(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

impl Table {
    pub fn rows(&self) -> usize {
        self.columns.first().map_or(0, |c| c.values.len())
    }

    /// The table as CSV with a header line.
    pub fn csv(&self) -> String {
        let mut out: String = self
            .columns
            .iter()
            .map(|c| csv_quote(&c.name))
            .collect::<Vec<_>>()
            .join(",");
        out.push('\n');
        for i in 0..self.rows() {
            let line: Vec<String> = self.columns.iter().map(|c| c.values.text(i)).collect();
            out += &line.join(",");
            out.push('\n');
        }
        out
    }

    /// Write results.csv and results.parquet into `out_dir`.
    pub fn write(&self, out_dir: &Path) -> Result<(), String> {
        let csv = out_dir.join("results.csv");
        std::fs::write(&csv, self.csv()).map_err(|e| format!("{}: {e}", csv.display()))?;
        let pq = out_dir.join("results.parquet");
        crate::parquet_out::write(self, &pq).map_err(|e| format!("{}: {e}", pq.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knob_columns_are_typed() {
        use toml::Value as T;
        let (a, b, c) = (T::Integer(1), T::Float(2.5), T::String("x,y".into()));
        assert_eq!(knob_values(&[&a, &a]), Values::Int(vec![1, 1]));
        assert_eq!(knob_values(&[&a, &b]), Values::Float(vec![1.0, 2.5]));
        assert_eq!(
            knob_values(&[&a, &c]),
            Values::Str(vec!["1".into(), "x,y".into()])
        );
        assert_eq!(Values::Str(vec!["x,y".into()]).text(0), "\"x,y\"");
        assert_eq!(Values::Float(vec![2.0]).text(0), "2.0");
    }
}
