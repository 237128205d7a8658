"""Shared by the tests: where the repository is, the tierlab binary, wall-clock fields."""

import os
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SMALL = ROOT / "scenarios" / "xsbench-small.toml"
# A shorter run than the scenario's own, for tests that only need a result.
FAST = {"workload.particles": 300}

# Wall-clock fields: the only ones two runs of one config and seed may differ in.
WALL = ("wall_seconds", "accesses_per_wall_second")


def strip_wall(doc: dict) -> dict:
    return {k: v for k, v in doc.items() if k not in WALL}


def tierlab_cli() -> str | None:
    """$TIERLAB_BIN, else this checkout's build, else `tierlab` on the PATH."""
    built = [str(ROOT / "target" / p / "tierlab") for p in ("release", "debug")]
    for c in [os.environ.get("TIERLAB_BIN"), *built, shutil.which("tierlab")]:
        if c and os.path.exists(c):
            return c
    return None
