//! GRID.toml: which scenarios, which knob values and which seeds a sweep runs, expanded into
//! points in a fixed order.
//!
//! ```toml
//! scenarios = ["../scenarios/xsbench-small.toml"]   # relative to the grid file
//! seeds = [1, 2, 3]                                 # optional: scenario.seed for each run
//! set = ["workload.particles=500"]                  # optional: --set for every run
//! [knobs]                                           # key = [values]: the cartesian product
//! "kernel.numa_balancing" = [0, 2]
//! "vm.demotion_enabled" = [false, true]
//! ```
//!
//! Points run scenario by scenario (in the order given), then over the knobs' product (knobs
//! sorted by key, the last varying fastest, values in the order given), then over the seeds.

use std::path::{Path, PathBuf};

/// A parsed grid.
#[derive(Clone, Debug)]
pub struct Grid {
    /// Each scenario as written in the grid, and resolved against the grid's folder.
    pub scenarios: Vec<(String, PathBuf)>,
    /// Knob key and its values, sorted by key (TOML tables have no order we could rely on).
    pub knobs: Vec<(String, Vec<toml::Value>)>,
    /// Seeds; empty means each scenario's own `scenario.seed`.
    pub seeds: Vec<u64>,
    /// Overrides applied to every run, before the knobs.
    pub sets: Vec<String>,
}

/// One run of a sweep.
#[derive(Clone, Debug)]
pub struct Point {
    /// File-name-safe and stable across re-runs: the resumable key (runs/<id>.json).
    pub id: String,
    /// The scenario as written in the grid.
    pub scenario: String,
    pub path: PathBuf,
    pub knobs: Vec<(String, toml::Value)>,
    pub seed: Option<u64>,
    /// Every `--set` of this run: the grid's, the knobs', then the seed.
    pub sets: Vec<String>,
}

impl Grid {
    /// Read a grid file; scenario paths are relative to its folder.
    pub fn load(path: &Path) -> Result<Grid, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        Grid::parse(&text, &path.display().to_string(), base)
    }

    /// Parse grid text; `origin` names it in errors, `base_dir` resolves scenario paths.
    pub fn parse(text: &str, origin: &str, base_dir: &Path) -> Result<Grid, String> {
        let mut table: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| format!("{origin}: {}", e.message()))?;
        let bad = |key: &str, msg: &str| format!("{origin}: {key}: {msg}");
        let scenarios = match table.remove("scenarios") {
            Some(toml::Value::Array(a)) if !a.is_empty() => a
                .into_iter()
                .map(|v| match v {
                    toml::Value::String(s) => Ok((s.clone(), base_dir.join(&s))),
                    _ => Err(bad("scenarios", "expected file names (strings)")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            _ => {
                return Err(bad(
                    "scenarios",
                    "expected a non-empty list of scenario files",
                ))
            }
        };
        let seeds = match table.remove("seeds") {
            None => Vec::new(),
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| match v {
                    toml::Value::Integer(i) if *i >= 0 => Ok(*i as u64),
                    _ => Err(bad("seeds", "expected non-negative integers")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(bad("seeds", "expected a list of integers")),
        };
        let sets = match table.remove("set") {
            None => Vec::new(),
            Some(toml::Value::Array(a)) => a
                .iter()
                .map(|v| match v {
                    toml::Value::String(s) if s.contains('=') => Ok(s.clone()),
                    _ => Err(bad("set", "expected KEY=VALUE strings")),
                })
                .collect::<Result<Vec<_>, _>>()?,
            Some(_) => return Err(bad("set", "expected a list of KEY=VALUE strings")),
        };
        let mut knobs = Vec::new();
        match table.remove("knobs") {
            None => {}
            Some(toml::Value::Table(t)) => {
                for (key, values) in t {
                    match values {
                        toml::Value::Array(a) if !a.is_empty() => knobs.push((key, a)),
                        _ => {
                            return Err(bad(
                                &format!("knobs.{key}"),
                                "expected a non-empty list of values",
                            ))
                        }
                    }
                }
            }
            Some(_) => return Err(bad("knobs", "expected a table of key = [values]")),
        }
        knobs.sort_by(|a, b| a.0.cmp(&b.0));
        if let Some(key) = table.keys().next() {
            return Err(bad(
                key,
                "unknown key (expected scenarios, seeds, set, [knobs])",
            ));
        }
        Ok(Grid {
            scenarios,
            knobs,
            seeds,
            sets,
        })
    }

    /// Every point, in row order; ids are checked to be unique.
    pub fn points(&self) -> Result<Vec<Point>, String> {
        let mut combos: Vec<Vec<(String, toml::Value)>> = vec![Vec::new()];
        for (key, values) in &self.knobs {
            combos = combos
                .into_iter()
                .flat_map(|c| {
                    values.iter().map(move |v| {
                        let mut c = c.clone();
                        c.push((key.clone(), v.clone()));
                        c
                    })
                })
                .collect();
        }
        let seeds: Vec<Option<u64>> = if self.seeds.is_empty() {
            vec![None]
        } else {
            self.seeds.iter().copied().map(Some).collect()
        };
        let mut out = Vec::new();
        for (written, path) in &self.scenarios {
            for combo in &combos {
                for seed in &seeds {
                    out.push(self.point(written, path, combo, *seed));
                }
            }
        }
        let mut ids: Vec<&str> = out.iter().map(|p| p.id.as_str()).collect();
        ids.sort_unstable();
        if let Some(w) = ids.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!(
                "two points share the id {} (two scenarios with one file name?)",
                w[0]
            ));
        }
        Ok(out)
    }

    fn point(
        &self,
        written: &str,
        path: &Path,
        combo: &[(String, toml::Value)],
        seed: Option<u64>,
    ) -> Point {
        let stem = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| written.to_string());
        let mut id = safe(&stem);
        let mut sets = self.sets.clone();
        for (key, value) in combo {
            id += &format!("__{}={}", safe(key), safe(&plain(value)));
            sets.push(format!("{key}={value}"));
        }
        if let Some(s) = seed {
            id += &format!("__seed={s}");
            sets.push(format!("scenario.seed={s}"));
        }
        Point {
            id,
            scenario: written.to_string(),
            path: path.to_path_buf(),
            knobs: combo.to_vec(),
            seed,
            sets,
        }
    }
}

/// A value as a person writes it in a file name: strings without their quotes.
pub fn plain(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Keep letters, digits and `.-_=+`; anything else becomes `-` (ids are file names).
fn safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || ".-_=+".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRID: &str = r#"
scenarios = ["a.toml", "sub/b.toml"]
seeds = [7, 8]
set = ["workload.particles=100"]
[knobs]
"vm.demotion_enabled" = [false, true]
"kernel.numa_balancing" = [0, 2]
"kernel.tiering_policy" = ["tpp"]
"#;

    #[test]
    fn product_order_and_sets() {
        let g = Grid::parse(GRID, "g.toml", Path::new("/x")).unwrap();
        let p = g.points().unwrap();
        assert_eq!(p.len(), 2 * 2 * 2 * 2);
        assert_eq!(
            p[0].id,
            "a__kernel.numa_balancing=0__kernel.tiering_policy=tpp__vm.demotion_enabled=false__seed=7"
        );
        assert_eq!(p[1].seed, Some(8));
        assert_eq!(p[2].knobs[2].1, toml::Value::Boolean(true));
        assert_eq!(p[8].path, Path::new("/x/sub/b.toml"));
        assert_eq!(
            p[0].sets,
            [
                "workload.particles=100",
                "kernel.numa_balancing=0",
                "kernel.tiering_policy=\"tpp\"",
                "vm.demotion_enabled=false",
                "scenario.seed=7"
            ]
        );
    }

    #[test]
    fn errors_name_the_key() {
        let e = Grid::parse("scenarios = []", "g.toml", Path::new(".")).unwrap_err();
        assert!(e.contains("scenarios"), "{e}");
        let e =
            Grid::parse("scenarios = [\"a\"]\nseed = [1]", "g.toml", Path::new(".")).unwrap_err();
        assert!(e.contains("seed: unknown key"), "{e}");
        let e =
            Grid::parse("scenarios = [\"a\"]\n[knobs]\nx = 1", "g", Path::new(".")).unwrap_err();
        assert!(e.contains("knobs.x"), "{e}");
    }

    #[test]
    fn no_seeds_no_knobs_is_one_point_per_scenario() {
        let g = Grid::parse("scenarios = [\"a.toml\"]", "g", Path::new(".")).unwrap();
        let p = g.points().unwrap();
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].id, "a");
        assert!(p[0].sets.is_empty());
    }

    #[test]
    fn duplicate_ids_are_refused() {
        let g = Grid::parse(
            "scenarios = [\"a.toml\", \"b/a.toml\"]",
            "g",
            Path::new("."),
        );
        assert!(g.unwrap().points().unwrap_err().contains("share the id"));
    }
}
