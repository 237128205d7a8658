//! `tierlab sweep`: the table, resuming, and runs identical to `tierlab run`.

use std::path::Path;

mod common;
use common::{repo, tierlab};

fn without_wall(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| !l.contains("wall_second"))
        .collect()
}

fn sweep(grid: &Path, out: &Path) -> String {
    let o = tierlab(&[
        "sweep",
        grid.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "-j",
        "2",
    ]);
    let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{stderr}");
    stderr
}

#[test]
fn sweep_writes_a_table_resumes_and_matches_run() {
    let dir = std::env::temp_dir().join(format!("tierlab-sweep-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let scenario = repo().join("scenarios/xsbench-small.toml");
    let grid = dir.join("grid.toml");
    std::fs::write(
        &grid,
        format!(
            "scenarios = [{:?}]\nseeds = [3, 4]\nset = [\"workload.particles=150\"]\n\
             [knobs]\n\"workload.threads\" = [2, 4]\n",
            scenario.display().to_string()
        ),
    )
    .unwrap();
    let out = dir.join("out");
    sweep(&grid, &out);
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 5, "{csv}");
    assert!(lines[0].starts_with("id,scenario,workload.threads,seed,sim_seconds,"));
    assert!(lines[0].ends_with(",wall_seconds,wall_accesses_per_second"));
    assert!(lines[1].starts_with("xsbench-small__workload.threads=2__seed=3,"));
    let pq = std::fs::read(out.join("results.parquet")).unwrap();
    assert!(pq.starts_with(b"PAR1") && pq.ends_with(b"PAR1"));

    // Resuming runs nothing; a lost run is run again.
    let again = sweep(&grid, &out);
    assert_eq!(again.matches("skipped").count(), 4, "{again}");
    let one = out.join("runs/xsbench-small__workload.threads=4__seed=4.json");
    let first = std::fs::read_to_string(&one).unwrap();
    std::fs::remove_file(&one).unwrap();
    let third = sweep(&grid, &out);
    assert_eq!(third.matches("skipped").count(), 3, "{third}");
    let csv2 = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let cut = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| l.rsplitn(3, ',').nth(2).unwrap_or(l).to_string())
            .collect()
    };
    assert_eq!(cut(&csv), cut(&csv2));

    // A point's JSON is what `tierlab run --json` writes for the same sets.
    let json = dir.join("run.json");
    let o = tierlab(&[
        "run",
        scenario.to_str().unwrap(),
        "--quiet",
        "--set",
        "workload.particles=150",
        "--set",
        "workload.threads=4",
        "--set",
        "scenario.seed=4",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = std::fs::read_to_string(&json).unwrap();
    assert_eq!(without_wall(&run), without_wall(&first));
    assert_eq!(
        without_wall(&std::fs::read_to_string(&one).unwrap()),
        without_wall(&first)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sweep_errors_name_the_grid_key() {
    let dir = std::env::temp_dir().join(format!("tierlab-sweep-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let grid = dir.join("grid.toml");
    std::fs::write(&grid, "scenarios = [\"x.toml\"]\n[knobs]\n\"vm.x\" = 3\n").unwrap();
    let o = tierlab(&[
        "sweep",
        grid.to_str().unwrap(),
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(stderr.contains("knobs.vm.x"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
