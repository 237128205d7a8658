# %% [markdown]
# # tierlab from Python: a quickstart
#
# Install once from the repository root: `pip install ./crates/py`. The package runs the
# simulator in-process (Rust, through PyO3); results come back as pandas DataFrames.
# Run this file from anywhere: paths below are relative to the repository.

# %%
from pathlib import Path

import tierlab

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "xsbench-small.toml"

# %% [markdown]
# ## One run
# `tierlab.run` takes a scenario file, TOML text or a dict, plus `set` overrides (any config
# key, as `tierlab run --set` takes them) and an optional seed. The result's tables are
# DataFrames: the timeline samples cumulative counters every `sim.timeline_interval_ms`.

# %%
result = tierlab.run(SCENARIO)
print(result)
print(result.timeline[["t_ms", "work", "pgfault", "dTLB-load-misses", "nodes.0.anon"]].head())

# %% [markdown]
# The end-of-run views mirror what Linux reports: `/proc/vmstat`, `perf stat`,
# `/proc/interrupts` and per-node memory. `result.json` is the same document that
# `tierlab run --json` writes.

# %%
print(result.perf.head())
print(result.nodes[["name", "capacity_pages", "free", "anon", "toptier"]])

# %% [markdown]
# ## Compare
# Before/after with an override: the headline metrics with the change in percent. Both
# runs simulate at once (the GIL is released while they run).

# %%
print(tierlab.compare(SCENARIO, set={"workload.threads": 2}).round(3))

# %% [markdown]
# ## A tiny sweep
# The cartesian product of knob values and seeds, run on all local cores; one row per run,
# also written as `quickstart-sweep/results.parquet` and `.csv` (re-running skips finished
# points). Pass `ray="auto"` to run each point as a task on a Ray cluster instead.

# %%
grid = {
    "scenarios": [str(SCENARIO)],
    "seeds": [1, 2],
    "set": ["workload.particles=500"],
    "knobs": {"workload.threads": [2, 4]},
}
table = tierlab.sweep(grid, out=ROOT / "target" / "quickstart-sweep")
print(table[["workload.threads", "seed", "sim_seconds", "accesses", "wall_seconds"]])
print(table.groupby("workload.threads")["sim_seconds"].agg(["mean", "std"]))
