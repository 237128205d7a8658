"""Sweeps: the local path (Python and `tierlab sweep`), resuming, and Ray giving the same
table as the local path apart from the wall_* columns."""

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import tierlab
from helpers import ROOT, tierlab_cli

GRID = """
scenarios = ["{scenario}"]
seeds = [1, 2]
set = ["workload.particles=200"]
[knobs]
"workload.threads" = [2, 4]
"""


@pytest.fixture
def grid(tmp_path: Path) -> Path:
    g = tmp_path / "grid.toml"
    g.write_text(GRID.format(scenario=ROOT / "scenarios" / "xsbench-small.toml"))
    return g


def no_wall(path: Path) -> str:
    """A results.csv without its wall_* columns."""
    df = pd.read_csv(path)
    return df[[c for c in df.columns if not c.startswith("wall_")]].to_csv(index=False)


def test_local_sweep_table_and_resume(grid: Path, tmp_path: Path):
    out = tmp_path / "local"
    df = tierlab.sweep(grid, out=out, jobs=2)
    assert len(df) == 4
    assert list(df["workload.threads"]) == [2, 2, 4, 4]
    assert list(df["seed"]) == [1, 2, 1, 2]
    assert {"id", "scenario", "accesses", "pgpromote_success", "wall_seconds"} <= set(df.columns)
    assert (df["accesses"] > 0).all()
    back = pd.read_parquet(out / "results.parquet")
    pd.testing.assert_frame_equal(back, df)
    csv = pd.read_csv(out / "results.csv")
    assert list(csv.columns) == list(df.columns)
    runs = sorted((out / "runs").glob("*.json"))
    assert len(runs) == 4
    mtimes = [p.stat().st_mtime_ns for p in runs]
    # A re-run finds every point done and runs nothing.
    again = tierlab.sweep(grid, out=out, jobs=2)
    assert [p.stat().st_mtime_ns for p in runs] == mtimes
    pd.testing.assert_frame_equal(again, df)
    # A lost point is run again, alone.
    runs[0].unlink()
    tierlab.sweep(grid, out=out, jobs=2)
    assert runs[0].exists()
    assert [p.stat().st_mtime_ns for p in runs[1:]] == mtimes[1:]


def test_cli_sweep_matches_python(grid: Path, tmp_path: Path):
    cli = tierlab_cli()
    if cli is None:
        pytest.skip("no tierlab binary (cargo build --release -p tierlab-cli, or $TIERLAB_BIN)")
    subprocess.run([cli, "sweep", str(grid), "--out", str(tmp_path / "cli"), "-j", "2"], check=True)
    tierlab.sweep(grid, out=tmp_path / "py", jobs=1)
    assert no_wall(tmp_path / "cli" / "results.csv") == no_wall(tmp_path / "py" / "results.csv")
    assert pd.read_parquet(tmp_path / "cli" / "results.parquet").shape == (4, 19)


def test_ray_gives_the_local_table(grid: Path, tmp_path: Path):
    try:
        import ray
    except ImportError as e:
        pytest.skip(f"ray cannot be imported: {e}")
    local = tmp_path / "local"
    tierlab.sweep(grid, out=local, jobs=2)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        on_ray = tierlab.sweep(grid, out=tmp_path / "ray", ray="auto")
    finally:
        ray.shutdown()
    assert len(on_ray) == 4
    # Byte for byte apart from the wall-clock columns: the CSV and the Parquet table.
    a = (local / "results.csv").read_text().splitlines()
    b = (tmp_path / "ray" / "results.csv").read_text().splitlines()
    n_wall = sum(c.startswith("wall_") for c in a[0].split(","))
    assert [line.rsplit(",", n_wall)[0] for line in a] == [line.rsplit(",", n_wall)[0] for line in b]
    cols = [c for c in on_ray.columns if not c.startswith("wall_")]
    pd.testing.assert_frame_equal(pd.read_parquet(local / "results.parquet")[cols], on_ray[cols])
    # And the per-run JSON, apart from the wall fields.
    for p in sorted((local / "runs").glob("*.json")):
        q = tmp_path / "ray" / "runs" / p.name
        strip = lambda s: [l for l in s.splitlines() if "wall_second" not in l]  # noqa: E731
        assert strip(p.read_text()) == strip(q.read_text())


def test_cli_ray_path_runs_python_on_ray(grid: Path, tmp_path: Path):
    cli = tierlab_cli()
    if cli is None:
        pytest.skip("no tierlab binary (cargo build --release -p tierlab-cli, or $TIERLAB_BIN)")
    try:
        import ray  # noqa: F401
    except ImportError as e:
        pytest.skip(f"ray cannot be imported: {e}")
    # `tierlab sweep --ray local` starts its own 2-CPU Ray through `python3 -m tierlab sweep`.
    env = {**os.environ, "TIERLAB_PYTHON": sys.executable}
    out = tmp_path / "cli-ray"
    subprocess.run([cli, "sweep", str(grid), "--out", str(out), "--ray", "local", "-j", "2"],
                   check=True, env=env)
    tierlab.sweep(grid, out=tmp_path / "local", jobs=2)
    assert no_wall(out / "results.csv") == no_wall(tmp_path / "local" / "results.csv")


def test_grid_errors_name_the_key(tmp_path: Path):
    g = tmp_path / "bad.toml"
    g.write_text('scenarios = ["x.toml"]\nseed = [1]\n')
    with pytest.raises(ValueError, match="seed: unknown key"):
        tierlab.sweep(g, out=tmp_path / "o")


def test_dict_grid(tmp_path: Path, monkeypatch):
    monkeypatch.chdir(ROOT)
    df = tierlab.sweep(
        {"scenarios": ["scenarios/xsbench-small.toml"], "set": ["workload.particles=200"],
         "knobs": {"sim.check": ["off", "periodic"]}},
        out=tmp_path / "d",
    )
    assert list(df["sim.check"]) == ["off", "periodic"]
    assert df["accesses"].nunique() == 1
