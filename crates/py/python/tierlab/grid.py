"""Sweeps: a grid's points on local cores (the same Rust runner as ``tierlab sweep``) or as
Ray tasks, tabulated by the same Rust code either way, so both give the same table apart
from the ``wall_*`` columns. The grid format is ``tierlab sweep --help``'s."""

from __future__ import annotations

import os
import sys
from typing import Any, Mapping, Union

import pandas as pd

from . import _native
from ._api import scenario_toml

Grid = Union[str, os.PathLike, Mapping[str, Any]]


def _grid_source(grid: Grid) -> tuple[str, str, str]:
    """(text, origin, base_dir) of a grid file, TOML text or dict."""
    if isinstance(grid, Mapping):
        return scenario_toml(grid), "<dict>", os.getcwd()
    path = os.fspath(grid)
    if "\n" not in path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return f.read(), path, os.path.dirname(os.path.abspath(path))
    if isinstance(grid, str) and "scenarios" in grid:
        return grid, "<string>", os.getcwd()
    raise FileNotFoundError(path)


def _default_out(grid: Grid) -> str:
    if isinstance(grid, (str, os.PathLike)) and os.path.exists(os.fspath(grid)):
        stem = os.path.splitext(os.path.basename(os.fspath(grid)))[0]
        return f"{stem}-sweep"
    return "sweep"


def _ray_run(path: str, sets: list[str]) -> str:
    """One point, as a Ray task: the Python API's run, returning the result JSON text."""
    from tierlab import _native as native

    return native.run_path(path, sets)


def _on_ray(text: str, origin: str, base: str, out: str, address: str | None, jobs: int | None) -> None:
    import ray

    if not ray.is_initialized():
        if address in (None, "local"):
            ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, log_to_driver=False)
    task = ray.remote(num_cpus=1)(_ray_run)
    todo = {}
    for pid, _scenario, path, sets in _native.sweep_points(text, origin, base):
        if not os.path.exists(os.path.join(out, "runs", f"{pid}.json")):
            todo[task.remote(os.fspath(path), sets)] = pid
    failed = []
    pending = list(todo)
    while pending:
        ready, pending = ray.wait(pending, num_returns=1)
        pid = todo[ready[0]]
        try:
            _native.write_run(out, pid, ray.get(ready[0]))
            print(f"{pid}: done", file=sys.stderr)
        except Exception as e:  # a failed point is reported; the others go on
            failed.append(f"{pid}: {e}")
            print(f"{pid}: failed: {e}", file=sys.stderr)
    if failed:
        _native.sweep_table(text, origin, base, out)
        raise RuntimeError(f"{len(failed)} points failed: " + "; ".join(failed))


def sweep(
    grid: Grid,
    out: str | os.PathLike | None = None,
    jobs: int | None = None,
    ray: str | None = None,
) -> pd.DataFrame:
    """Run a grid (a GRID.toml path, its text, or a dict of the same shape) and return its
    table (also written as OUT/results.parquet and OUT/results.csv, with OUT/runs/<id>.json
    per point). Points whose JSON exists are skipped. ``jobs``: runs at once (default: the
    local cores). ``ray``: a Ray address ("local" starts one with ``jobs`` CPUs; an already
    initialised Ray is used as it is): each point is then a Ray task."""
    text, origin, base = _grid_source(grid)
    out = os.fspath(out) if out is not None else _default_out(grid)
    os.makedirs(os.path.join(out, "runs"), exist_ok=True)
    if ray is not None:
        _on_ray(text, origin, base, out, ray, jobs)
    else:
        outcomes = _native.sweep_local(text, origin, base, out, jobs or _native.cores())
        failed = [f"{pid}: {o}" for pid, o in outcomes if o not in ("ran", "skipped")]
        if failed:
            _native.sweep_table(text, origin, base, out)
            raise RuntimeError(f"{len(failed)} points failed: " + "; ".join(failed))
    rows, missing = _native.sweep_table(text, origin, base, out)
    print(f"{rows} rows in {os.path.join(out, 'results.parquet')}", file=sys.stderr)
    return pd.read_parquet(os.path.join(out, "results.parquet"))
