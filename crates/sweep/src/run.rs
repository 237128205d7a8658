//! Running points: one run as `tierlab run --json` would, and a sweep's points on N worker
//! threads, each writing runs/<id>.json (skipped when it exists: resumable).

use crate::grid::Point;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use tierlab::{Config, RunResult, Simulation};

/// Build the workload and simulate a loaded config, as `tierlab run` does.
pub fn simulate(cfg: Config, origin: &str) -> Result<RunResult, String> {
    let workload = workloads::build(&cfg, origin).map_err(|e| e.to_string())?;
    let mut sim = Simulation::new(cfg, workload).map_err(|e| format!("{origin}: {e}"))?;
    sim.run(&mut |_| {})
        .map_err(|e| format!("{origin}: simulation stopped: {e}"))
}

/// A result as `tierlab run --json` writes it: pretty JSON and a newline.
pub fn json_text(result: &RunResult) -> String {
    let text = serde_json::to_string_pretty(&result.to_json()).expect("a result serializes");
    text + "\n"
}

/// Run one point; its result JSON text.
pub fn run_point(p: &Point) -> Result<String, String> {
    let origin = p.path.display().to_string();
    let cfg = Config::load(&p.path, &p.sets).map_err(|e| e.to_string())?;
    simulate(cfg, &origin).map(|r| json_text(&r))
}

/// Where a point's result lives under a sweep's output folder.
pub fn run_file(out_dir: &Path, id: &str) -> PathBuf {
    out_dir.join("runs").join(format!("{id}.json"))
}

/// Write a run's JSON through a temporary file, so an interrupted sweep leaves no half file
/// that a resume would take as finished.
pub fn write_run(out_dir: &Path, id: &str, text: &str) -> Result<(), String> {
    let path = run_file(out_dir, id);
    let dir = out_dir.join("runs");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, &path).map_err(|e| format!("{}: {e}", path.display()))
}

/// What became of one point.
pub enum Outcome {
    /// Its JSON was there already.
    Skipped,
    /// Ran now, taking this many wall seconds.
    Ran(f64),
    Failed(String),
}

/// Run every point whose JSON is missing on `jobs` threads; `done` hears of each point as it
/// finishes (from the worker thread). Outcomes come back in point order.
pub fn run_all(
    points: &[Point],
    out_dir: &Path,
    jobs: usize,
    done: &(dyn Fn(&Point, &Outcome) + Sync),
) -> Vec<Outcome> {
    let next = AtomicUsize::new(0);
    let outcomes: Mutex<Vec<Option<Outcome>>> = Mutex::new(points.iter().map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.clamp(1, points.len().max(1)) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(p) = points.get(i) else { break };
                let outcome = if run_file(out_dir, &p.id).exists() {
                    Outcome::Skipped
                } else {
                    let t = std::time::Instant::now();
                    match run_point(p).and_then(|text| write_run(out_dir, &p.id, &text)) {
                        Ok(()) => Outcome::Ran(t.elapsed().as_secs_f64()),
                        Err(e) => Outcome::Failed(e),
                    }
                };
                done(p, &outcome);
                outcomes.lock().expect("no worker panicked")[i] = Some(outcome);
            });
        }
    });
    outcomes
        .into_inner()
        .expect("no worker panicked")
        .into_iter()
        .map(|o| o.unwrap_or(Outcome::Failed("not run".into())))
        .collect()
}

/// Local cores, the default number of jobs.
pub fn cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
