"""The Python API: scenarios from a path, a string and a dict; errors; the GIL; determinism;
the same JSON as the CLI."""

import json
import subprocess
import threading
import time
import tomllib

import pytest

import tierlab

from helpers import FAST, SMALL, strip_wall, tierlab_cli


def test_path_string_and_dict_give_the_same_result():
    text = SMALL.read_text()
    as_dict = tomllib.loads(text)
    results = [
        tierlab.run(SMALL, set=FAST),
        tierlab.run(str(SMALL), set=FAST),
        tierlab.run(text, set=FAST),
        tierlab.run(as_dict, set=FAST),
    ]
    first = strip_wall(results[0].json)
    for r in results[1:]:
        assert strip_wall(r.json) == first
    assert first["accesses"] > 0


def test_tables_are_dataframes():
    r = tierlab.run(SMALL, set=FAST)
    assert len(r.timeline) == len(r.json["timeline"]) > 0
    assert {"t_ms", "work", "nodes.0.anon"} <= set(r.timeline.columns)
    assert r.timeline["t_ms"].is_monotonic_increasing
    assert r.vmstat.set_index("counter")["value"]["numa_hint_faults"] == r.json["vmstat"]["numa_hint_faults"]
    assert r.perf.loc["dTLB-load-misses", "total"] == r.json["perf"]["dTLB-load-misses"]
    assert list(r.interrupts.index) == ["TLB", "CAL"]
    assert len(r.nodes) == len(r.json["nodes"])
    assert len(r.phases) == len(r.json["phases"])
    assert r.headline["accesses"] == r.json["accesses"]
    assert r.to_arrow("timeline").num_rows == len(r.timeline)


def test_bad_key_raises_with_the_key():
    with pytest.raises(ValueError, match="no_such_knob"):
        tierlab.run(SMALL, set={"vm.no_such_knob": 1})
    with pytest.raises(ValueError, match="bogus"):
        tierlab.run({**tomllib.loads(SMALL.read_text()), "bogus": {"x": 1}})
    with pytest.raises(ValueError, match="expected"):
        tierlab.run("[scenario\nname = 1")


def test_gil_is_released_while_simulating():
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0.005)

    t = threading.Thread(target=tick)
    t.start()
    try:
        time.sleep(0.05)
        before = len(ticks)
        start = time.perf_counter()
        r = tierlab.run(SMALL, set={"workload.particles": 8000})
        took = time.perf_counter() - start
        during = len(ticks) - before
    finally:
        stop.set()
        t.join()
    assert r.json["accesses"] > 0
    # Holding the GIL for the whole run would stop the ticker at about one tick.
    assert took > 0.2, f"run too short to tell ({took:.3f} s)"
    assert during >= max(5, 0.1 * took / 0.005), f"{during} ticks in {took:.2f} s"


def test_runs_are_deterministic_and_seeds_matter():
    a = tierlab.run(SMALL, set=FAST, seed=5)
    b = tierlab.run(SMALL, set=FAST, seed=5)
    c = tierlab.run(SMALL, set=FAST, seed=6)
    assert strip_wall(a.json) == strip_wall(b.json)
    assert a.json["seed"] == 5 and c.json["seed"] == 6
    assert strip_wall(a.json) != strip_wall(c.json)


def test_same_json_as_the_cli(tmp_path):
    cli = tierlab_cli()
    if cli is None:
        pytest.skip("no tierlab binary (cargo build --release -p tierlab-cli, or $TIERLAB_BIN)")
    out = tmp_path / "cli.json"
    subprocess.run(
        [cli, "run", str(SMALL), "--quiet", "--json", str(out), "--set", "workload.particles=300"],
        check=True,
    )
    cli_doc = json.loads(out.read_text())
    py_doc = tierlab.run(SMALL, set=FAST).json
    assert strip_wall(py_doc) == strip_wall(cli_doc)
    # Key order too: the Python text is what `run --json` writes.
    assert list(py_doc) == list(cli_doc)


def test_compare_reports_percent_change():
    df = tierlab.compare(SMALL, set={"workload.particles": 600}, both=FAST)
    assert list(df.columns) == ["before", "after", "change_percent"]
    row = df.loc["accesses"]
    assert row["after"] > row["before"]
    assert row["change_percent"] == pytest.approx((row["after"] / row["before"] - 1) * 100)


def test_set_values_become_toml_literals():
    from tierlab._api import set_strings

    assert set_strings({"a": True, "b": 2, "c": "tpp", "d": 0.5}, seed=3) == [
        "a=true",
        "b=2",
        'c="tpp"',
        "d=0.5",
        "scenario.seed=3",
    ]
