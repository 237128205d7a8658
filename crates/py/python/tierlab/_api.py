"""run, compare and the Result object."""

from __future__ import annotations

import json
import math
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import cached_property
from typing import Any, Mapping, Sequence, Union

import pandas as pd

from . import _native

Scenario = Union[str, os.PathLike, Mapping[str, Any]]
Sets = Union[Mapping[str, Any], Sequence[str], None]


def toml_literal(value: Any) -> str:
    """A Python value as a TOML literal, as ``--set KEY=VALUE`` takes it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"TOML has no {value!r} here")
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON's escapes are TOML basic-string escapes
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_literal(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {toml_literal(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"cannot write {type(value).__name__} as TOML: {value!r}")


def set_strings(set: Sets = None, seed: int | None = None) -> list[str]:
    """``--set`` strings from a dict (values as TOML literals) or a list of KEY=VALUE."""
    if set is None:
        out: list[str] = []
    elif isinstance(set, Mapping):
        out = [f"{k}={toml_literal(v)}" for k, v in set.items()]
    else:
        out = [str(s) for s in set]
    if seed is not None:
        out.append(f"scenario.seed={int(seed)}")
    return out


def scenario_toml(scenario: Mapping[str, Any]) -> str:
    """TOML text of a scenario (or grid) given as a dict."""
    return _native.toml_from_json(json.dumps(scenario))


def _looks_like_path(s: str) -> bool:
    return "\n" not in s and (os.path.exists(s) or s.endswith(".toml"))


def _run_json(scenario: Scenario, sets: list[str]) -> str:
    """Simulate; the result JSON text exactly as ``tierlab run --json`` writes it."""
    if isinstance(scenario, Mapping):
        return _native.run_text(scenario_toml(scenario), "<dict>", os.getcwd(), sets)
    if isinstance(scenario, os.PathLike) or (isinstance(scenario, str) and _looks_like_path(scenario)):
        return _native.run_path(os.fspath(scenario), sets)
    if isinstance(scenario, str):
        return _native.run_text(scenario, "<string>", os.getcwd(), sets)
    raise TypeError(f"a scenario is a path, TOML text or a dict, not {type(scenario).__name__}")


def run(scenario: Scenario, set: Sets = None, seed: int | None = None) -> "Result":
    """Run a scenario (a file path, TOML text or a dict) with ``set`` overrides
    (``{"kernel.numa_balancing": 2}``) and optionally another ``scenario.seed``.

    Raises ValueError naming the key on bad input, RuntimeError if the simulation stops.
    """
    return Result(_run_json(scenario, set_strings(set, seed)))


def _flatten(obj: Any, prefix: str = "", out: dict | None = None, lists: bool = True) -> dict:
    """Nested dicts (and, with ``lists``, lists) as one flat dict with dotted keys."""
    out = {} if out is None else out
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{prefix}{k}.", out, lists)
    elif isinstance(obj, list) and (lists or any(isinstance(v, dict) for v in obj)):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}{i}.", out, lists)
    else:
        out[prefix[:-1]] = obj
    return out


# A phase's fields, for the empty table of a workload without phases.
PHASE_COLUMNS = ["name", "instances", "duration_us", "duration_us_per_instance", "start_ms",
                 "accesses", "run_time_us"]


class Result:
    """One run's result. ``json`` is the raw dict (as ``tierlab run --json``); the tables are
    pandas DataFrames built from it on first use."""

    def __init__(self, text: str):
        self.text = text
        self.json: dict = json.loads(text)

    def __repr__(self) -> str:
        j = self.json
        return (
            f"<tierlab.Result {j['scenario']} seed={j['seed']}: {j['sim_seconds']:.3f} s simulated, "
            f"{j['accesses']} accesses>"
        )

    @cached_property
    def timeline(self) -> pd.DataFrame:
        """One row per sample: cumulative counters at ``t_ms``; per node ``nodes.N.*``, per
        watched region ``regions.NAME.N`` (pages on node N), per thread ``run_time_ms.T``."""
        return pd.DataFrame([_flatten(p) for p in self.json["timeline"]])

    @cached_property
    def phases(self) -> pd.DataFrame:
        """One row per phase; ``vmstat.*`` are the phase's counter deltas (0 when absent)."""
        rows = [_flatten(p) for p in self.json.get("phases", [])]
        df = pd.DataFrame(rows) if rows else pd.DataFrame(columns=PHASE_COLUMNS)
        vm = [c for c in df.columns if c.startswith("vmstat.")]
        if vm:
            df[vm] = df[vm].fillna(0).astype("int64")
        return df

    @cached_property
    def vmstat(self) -> pd.DataFrame:
        """/proc/vmstat at the end: columns ``counter`` and ``value``."""
        v = self.json["vmstat"]
        return pd.DataFrame({"counter": list(v), "value": list(v.values())})

    @cached_property
    def perf(self) -> pd.DataFrame:
        """perf events, index ``event``: the total and one column per CPU."""
        df = pd.DataFrame({"total": pd.Series(self.json["perf"])})
        for i, cpu in enumerate(self.json.get("perf_per_cpu", [])):
            df[f"cpu{i}"] = pd.Series(cpu)
        df.index.name = "event"
        return df

    @cached_property
    def interrupts(self) -> pd.DataFrame:
        """/proc/interrupts: index ``interrupt`` (TLB, CAL), one column per CPU."""
        rows = self.json["interrupts"]
        df = pd.DataFrame({k: v for k, v in rows.items()}).T
        df.columns = [f"cpu{i}" for i in range(df.shape[1])]
        df.index.name = "interrupt"
        return df

    @cached_property
    def nodes(self) -> pd.DataFrame:
        """One row per memory node at the end (nested fields as ``lru.*``, ``zone_lock.*``…)."""
        rows = []
        for n in self.json["nodes"]:
            n = dict(n)
            pageset = dict(n.pop("pageset", {}))
            pageset.pop("per_cpu", None)  # per-CPU lists: in .json
            n["pageset"] = pageset
            rows.append(_flatten(n, lists=False))
        return pd.DataFrame(rows)

    @cached_property
    def headline(self) -> pd.Series:
        """The headline metrics (the columns of a sweep's table)."""
        return pd.Series(dict(_native.headline(self.text)), name="value")

    def to_arrow(self, table: str = "timeline"):
        """One of the tables as a pyarrow.Table."""
        import pyarrow

        df = getattr(self, table)
        return pyarrow.Table.from_pandas(df, preserve_index=df.index.name is not None)

    def to_polars(self, table: str = "timeline"):
        """One of the tables as a polars DataFrame (through Arrow; needs polars)."""
        import polars

        return polars.from_arrow(self.to_arrow(table))


def compare(
    a: Scenario,
    b: Scenario | None = None,
    set: Sets = None,
    both: Sets = None,
    seed: int | None = None,
) -> pd.DataFrame:
    """Run ``a`` and ``b`` (or ``a`` again with ``set``), both with ``both``, at once; the
    headline metrics side by side with the change in percent."""
    if b is None and not set:
        warnings.warn("compare: no `b` and no `set`: both runs are the same configuration", stacklevel=2)
    base = set_strings(both, seed)
    after_sets = base + set_strings(set)
    with ThreadPoolExecutor(2) as pool:
        before = pool.submit(run, a, base)
        after = pool.submit(run, b if b is not None else a, after_sets)
        r0, r1 = before.result(), after.result()
    df = pd.DataFrame({"before": r0.headline, "after": r1.headline})
    was = df["before"]
    df["change_percent"] = ((df["after"] - was) / was.abs() * 100.0).where(was != 0)
    df.loc[(was == 0) & (df["after"] == 0), "change_percent"] = 0.0
    df.index.name = "metric"
    return df
