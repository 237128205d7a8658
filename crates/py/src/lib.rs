//! `tierlab._native`: the Rust side of the Python package. Runs return the result JSON text
//! exactly as `tierlab run --json` writes it; the GIL is released while they simulate.

use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use std::path::{Path, PathBuf};
use tierlab::{Config, Simulation};
use tierlab_sweep::run::{self, Outcome};
use tierlab_sweep::{metrics, table, Grid};

/// Why a run did not finish: bad input (ValueError) or the simulation stopping (RuntimeError).
enum Failure {
    Input(String),
    Stopped(String),
}

impl From<Failure> for PyErr {
    fn from(f: Failure) -> PyErr {
        match f {
            Failure::Input(m) => PyValueError::new_err(m),
            Failure::Stopped(m) => PyRuntimeError::new_err(m),
        }
    }
}

/// Load (by `load`), build the workload and simulate with the GIL released.
fn simulate(
    py: Python<'_>,
    origin: String,
    load: impl FnOnce() -> Result<Config, String> + Send,
) -> PyResult<String> {
    let r: Result<String, Failure> = py.detach(move || {
        let cfg = load().map_err(Failure::Input)?;
        let workload =
            workloads::build(&cfg, &origin).map_err(|e| Failure::Input(e.to_string()))?;
        let mut sim =
            Simulation::new(cfg, workload).map_err(|e| Failure::Input(format!("{origin}: {e}")))?;
        let result = sim
            .run(&mut |_| {})
            .map_err(|e| Failure::Stopped(format!("{origin}: simulation stopped: {e}")))?;
        Ok(run::json_text(&result))
    });
    r.map_err(PyErr::from)
}

/// A point as Python gets it: (id, scenario as written, resolved path, sets).
type PointRow = (String, String, PathBuf, Vec<String>);

fn grid(text: &str, origin: &str, base_dir: &Path) -> PyResult<Grid> {
    Grid::parse(text, origin, base_dir).map_err(PyValueError::new_err)
}

#[pymodule]
mod _native {
    use super::*;

    /// Run a scenario file with `--set` overrides; the result JSON text.
    #[pyfunction]
    fn run_path(py: Python<'_>, path: PathBuf, sets: Vec<String>) -> PyResult<String> {
        let origin = path.display().to_string();
        simulate(py, origin, move || {
            Config::load(&path, &sets).map_err(|e| e.to_string())
        })
    }

    /// Run scenario TOML text; `base_dir` resolves its machine preset.
    #[pyfunction]
    #[pyo3(signature = (text, origin, base_dir, sets))]
    fn run_text(
        py: Python<'_>,
        text: String,
        origin: String,
        base_dir: Option<PathBuf>,
        sets: Vec<String>,
    ) -> PyResult<String> {
        let o = origin.clone();
        simulate(py, origin, move || {
            Config::from_str_with(&text, &o, base_dir.as_deref(), &sets).map_err(|e| e.to_string())
        })
    }

    /// TOML text of a JSON document (a scenario or grid given as a Python dict).
    #[pyfunction]
    fn toml_from_json(json: &str) -> PyResult<String> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| PyValueError::new_err(e.to_string()))?;
        let t: toml::Table = serde_json::from_value(v)
            .map_err(|e| PyValueError::new_err(format!("not a TOML document: {e}")))?;
        toml::to_string(&t).map_err(|e| PyValueError::new_err(e.to_string()))
    }

    /// The headline metrics of a result JSON text: (name, value) in column order.
    #[pyfunction]
    fn headline(json: &str) -> PyResult<Vec<(&'static str, f64)>> {
        let v: serde_json::Value =
            serde_json::from_str(json).map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(metrics::HEADLINE
            .iter()
            .zip(metrics::headline(&v))
            .map(|(n, x)| {
                let f = match x {
                    metrics::Num::Int(i) => i as f64,
                    metrics::Num::Float(f) => f,
                };
                (*n, f)
            })
            .collect())
    }

    /// A grid's points in row order: (id, scenario as written, resolved path, sets).
    #[pyfunction]
    fn sweep_points(text: &str, origin: &str, base_dir: PathBuf) -> PyResult<Vec<PointRow>> {
        let points = grid(text, origin, &base_dir)?
            .points()
            .map_err(PyValueError::new_err)?;
        Ok(points
            .into_iter()
            .map(|p| (p.id, p.scenario, p.path, p.sets))
            .collect())
    }

    /// Run a grid's missing points on `jobs` threads (GIL released): (id, outcome) per point,
    /// outcome "ran", "skipped" or the error.
    #[pyfunction]
    fn sweep_local(
        py: Python<'_>,
        text: &str,
        origin: &str,
        base_dir: PathBuf,
        out_dir: PathBuf,
        jobs: usize,
    ) -> PyResult<Vec<(String, String)>> {
        let points = grid(text, origin, &base_dir)?
            .points()
            .map_err(PyValueError::new_err)?;
        let outcomes = py.detach(|| run::run_all(&points, &out_dir, jobs, &|_, _| {}));
        Ok(points
            .into_iter()
            .zip(outcomes)
            .map(|(p, o)| {
                let o = match o {
                    Outcome::Skipped => "skipped".to_string(),
                    Outcome::Ran(_) => "ran".to_string(),
                    Outcome::Failed(e) => e,
                };
                (p.id, o)
            })
            .collect())
    }

    /// Write a point's result JSON text as OUT_DIR/runs/<id>.json.
    #[pyfunction]
    fn write_run(out_dir: PathBuf, id: &str, text: &str) -> PyResult<()> {
        run::write_run(&out_dir, id, text).map_err(PyValueError::new_err)
    }

    /// Build the table from OUT_DIR/runs and write results.csv and results.parquet; the
    /// number of rows and the ids without a result.
    #[pyfunction]
    fn sweep_table(
        text: &str,
        origin: &str,
        base_dir: PathBuf,
        out_dir: PathBuf,
    ) -> PyResult<(usize, Vec<String>)> {
        let g = grid(text, origin, &base_dir)?;
        let points = g.points().map_err(PyValueError::new_err)?;
        let t = table::build(&g, &points, &out_dir).map_err(PyValueError::new_err)?;
        t.write(&out_dir).map_err(PyValueError::new_err)?;
        Ok((t.rows(), t.missing))
    }

    /// Local cores, the default number of jobs.
    #[pyfunction]
    fn cores() -> usize {
        run::cores()
    }
}
