//! `tierlab sweep GRID.toml`: run a grid's points on local cores (or on Ray through the
//! Python package) and tabulate them.

use clap::Args;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use tierlab_sweep::run::{self, Outcome};
use tierlab_sweep::{table, Grid};

/// The grid format, shown by `tierlab sweep --help`.
const GRID_HELP: &str = "\
GRID.toml:
  scenarios = [\"../scenarios/xsbench-small.toml\"]  # one or more, relative to the grid file
  seeds = [1, 2, 3]                 # optional: each point once per seed (scenario.seed)
  set = [\"workload.particles=500\"]  # optional: --set overrides for every run
  [knobs]                           # key = [values]; the sweep runs their cartesian product
  \"kernel.numa_balancing\" = [0, 2]
  \"vm.demotion_enabled\" = [false, true]

Points run scenario by scenario, then over the knobs (sorted by key, the last varying
fastest), then over the seeds; rows keep that order. Each point's id names its files:
OUT/runs/<id>.json (the result, as `run --json` writes it). A re-run skips points whose JSON
exists. OUT/results.csv and OUT/results.parquet hold one row per finished point: id,
scenario, the knobs, seed, headline metrics (sim_seconds, runtime_s, accesses,
work_per_second, sys_seconds, dtlb_load_misses, tlb_shootdowns, numa_hint_faults,
pgpromote_success, pgdemote_kswapd, pgmigrate_success, toptier_anon_percent,
invariant_violations) and the wall-clock columns wall_seconds and wall_accesses_per_second.";

/// Arguments of `tierlab sweep`.
#[derive(Args)]
#[command(after_long_help = GRID_HELP)]
pub struct SweepArgs {
    /// The grid: scenarios, knob values and seeds (format below, with --help).
    grid: PathBuf,
    /// Output folder (default: ./<grid file name>-sweep).
    #[arg(long, short, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Runs at once (default: the local cores).
    #[arg(long, short, value_name = "N")]
    jobs: Option<usize>,
    /// Run each point as a task on Ray through the Python package (`python3 -m tierlab sweep`;
    /// $TIERLAB_PYTHON overrides python3): `local` starts a Ray here with --jobs CPUs, `auto`
    /// joins the running one, or `ray://HOST:10001`. Workers read the scenario files at the
    /// paths the grid gives, so other nodes need the same checkout there.
    #[arg(long, value_name = "ADDRESS")]
    ray: Option<String>,
}

/// Run `tierlab sweep`.
pub fn run(args: SweepArgs) -> Result<(), String> {
    let out = args.out.clone().unwrap_or_else(|| default_out(&args.grid));
    if let Some(address) = &args.ray {
        return on_ray(&args, &out, address);
    }
    let grid = Grid::load(&args.grid)?;
    let points = grid.points()?;
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    let jobs = args.jobs.unwrap_or_else(run::cores).max(1);
    eprintln!(
        "tierlab: sweep of {} points on {jobs} jobs into {}",
        points.len(),
        out.display()
    );
    let finished = AtomicUsize::new(0);
    let n = points.len();
    let outcomes = run::run_all(&points, &out, jobs, &|p, o| {
        let k = finished.fetch_add(1, Ordering::Relaxed) + 1;
        match o {
            Outcome::Skipped => eprintln!("[{k}/{n}] {}: done before, skipped", p.id),
            Outcome::Ran(s) => eprintln!("[{k}/{n}] {}: {s:.1} s", p.id),
            Outcome::Failed(e) => eprintln!("[{k}/{n}] {}: failed: {e}", p.id),
        }
    });
    let t = table::build(&grid, &points, &out)?;
    t.write(&out)?;
    println!(
        "{} rows in {} and {}",
        t.rows(),
        out.join("results.parquet").display(),
        out.join("results.csv").display()
    );
    let failed: Vec<&str> = points
        .iter()
        .zip(&outcomes)
        .filter(|(_, o)| matches!(o, Outcome::Failed(_)))
        .map(|(p, _)| p.id.as_str())
        .collect();
    if failed.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {n} points failed: {}",
            failed.len(),
            failed.join(", ")
        ))
    }
}

fn default_out(grid: &Path) -> PathBuf {
    let stem = grid
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "grid".into());
    PathBuf::from(format!("{stem}-sweep"))
}

/// Hand the sweep to the Python package, which runs each point as a Ray task.
fn on_ray(args: &SweepArgs, out: &Path, address: &str) -> Result<(), String> {
    let python = std::env::var("TIERLAB_PYTHON").unwrap_or_else(|_| "python3".into());
    let mut cmd = std::process::Command::new(&python);
    cmd.args(["-m", "tierlab", "sweep", "--ray", address, "--out"])
        .arg(out)
        .arg(&args.grid);
    if let Some(j) = args.jobs {
        cmd.args(["--jobs", &j.to_string()]);
    }
    let status = cmd
        .status()
        .map_err(|e| format!("{python}: {e} (the Ray path needs `pip install ./crates/py`)"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{python} -m tierlab sweep --ray: {status}"))
    }
}
