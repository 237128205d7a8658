"""tierlab from Python: run scenarios, compare them and sweep knobs, with results as pandas
DataFrames (polars and Arrow through ``Result.to_arrow`` / ``Result.to_polars``).

The simulator is the Rust library itself (``tierlab._native``), not the CLI: a run gives the
same JSON as ``tierlab run --json`` for the same config and seed, and releases the GIL while
it simulates.
"""

from ._api import Result, compare, run, scenario_toml
from .grid import sweep

__all__ = ["Result", "compare", "run", "scenario_toml", "sweep"]
