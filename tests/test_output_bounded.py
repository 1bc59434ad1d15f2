"""Output bounded at any size (issue 21 item 4): ``validate``, ``run``, ``status``, ``report`` and
``verify`` print a few lines per axis however many values it has, and a short axis in full."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import zarr

from geosweep.sweeps.compact import MAX_ITEMS, MAX_LISTED, axis_values_text, capped, per_value_text, spread

#: lines a command may print, and characters in a line (a store path and a few words)
MAX_LINES, MAX_CHARS = 60, 200
#: 2 integrators x 2 h x 2 g x SEEDS cells of a 3-link chain over two steps (the 10 000-cell spec of
#: the issue, cut to what a test runs in seconds: the seed axis is far longer than a listing)
SEEDS = 40
SPEC = """
name = "bounded"
system = "pendulum_chain"
integrators = ["rkmk4", "cf4"]
h = [0.01, 0.005]
T = 0.02
dt_out = 0.01
[params]
N = 3
g = [9.81, 1.0]
ic = "random"
seed = [{seeds}]
"""


def _cmd() -> list[str]:
    exe = shutil.which("geosweep")
    return [exe] if exe else [sys.executable, "-m", "geosweep.flows.cli"]


def _geosweep(*args: str, cwd: Path, code: int = 0) -> list[str]:
    """Run the CLI; its stdout and stderr lines (the command must exit with ``code``)."""
    p = subprocess.run([*_cmd(), *args], capture_output=True, text=True, cwd=cwd, timeout=600)
    assert p.returncode == code, (args, p.stdout[-3000:], p.stderr[-3000:])
    return (p.stdout + p.stderr).splitlines()


def _bounded(lines: list[str], what: str) -> None:
    assert len(lines) <= MAX_LINES, f"{what}: {len(lines)} lines"
    long = [line for line in lines if len(line) > MAX_CHARS and not line.startswith(" ")]  # warnings' source
    assert not long, f"{what}: line of {len(long[0])} characters: {long[0][:300]}"


def _sweep(tmp_path: Path) -> tuple[Path, dict[str, list[str]]]:
    """The store and every command's output lines."""
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC.format(seeds=", ".join(map(str, range(SEEDS)))))
    store = tmp_path / "s.zarr"
    out = {"validate": _geosweep("validate", str(spec), "--no-prefect", cwd=tmp_path)}
    out["run"] = _geosweep("run", str(spec), "--store", str(store), "--no-prefect", "--workers", "2", cwd=tmp_path)
    out["status"] = _geosweep("status", str(store), cwd=tmp_path)
    out["report"] = _geosweep("report", str(store), "-q", cwd=tmp_path)
    return store, out


def _damage(store: Path, cells: int) -> None:
    """Change a stored value of the first ``cells`` seeds of one integrator, h and g (their checksums fail)."""
    group = zarr.open_group(str(store), mode="r+")
    group["max_rel_energy_error"][0, 0, 0, :cells] = 0.5


def test_compact_axis_text():
    assert axis_values_text([0.01, 0.005]) == "0.01, 0.005"
    assert axis_values_text(range(MAX_LISTED)) == ", ".join(map(str, range(MAX_LISTED)))
    assert axis_values_text(range(2500)) == "2500 values, 0 … 2499"
    assert axis_values_text([5, 0, 9, *range(20)]) == "23 values, 5 … 19, range [0, 19]"
    assert axis_values_text([f"m{i}" for i in range(30)]) == "30 values, m0 … m29"
    assert capped(map(str, range(3))) == ["0", "1", "2"]
    assert capped(map(str, range(25)))[-1] == "… and 5 more" and len(capped(map(str, range(25)))) == MAX_ITEMS + 1
    assert capped(["a", "b"], total=30, indent="  ") == ["  a", "  b", "  … and 28 more"]
    line = per_value_text("by seed", {s: float(s) for s in range(2500)})
    assert line.startswith("by seed (2500 values, 0 … 2499): total ") and "max 2.5e+03 (at 2499)" in line
    assert per_value_text("by h", {0.01: 1.0, 0.005: 2.0}) == "by h: 0.01: 1, 0.005: 2"
    assert spread(range(100), 5) == [0, 25, 50, 74, 99] and spread(range(3), 5) == [0, 1, 2]


def test_validate_line_bounded_on_the_issue_spec(tmp_path):
    """The issue's spec (2 500 seeds, 10 000 cells): ``validate`` printed a 2 500-entry line."""
    from geosweep.sweeps.estimate import Estimate

    est = Estimate(
        cells=10_000, runnable=10_000, not_applicable=0, core_seconds=2.6, compile_seconds=25, overhead_seconds=257,
        cells_seconds=1.4, wall_seconds=258, workers=2, store_bytes=2.3e7, store_objects=7297, probes=2,
        by_axis={"seed": {s: 0.001 for s in range(2500)}},
    )  # fmt: skip
    lines = est.lines()
    _bounded(lines, "validate")
    assert "core-seconds by seed (2500 values, 0 … 2499): total 2.5" in lines[-1]


def test_many_valued_axis_bounded_and_short_axis_in_full(tmp_path):
    """The seed axis (SEEDS values) by count and range in every command's output; the g axis (two
    values) in full; the report's order table one row per integrator x g (aggregated over the seeds)."""
    store, out = _sweep(tmp_path)
    for command, lines in out.items():
        _bounded(lines, command)
    seeds = f"seed: {SEEDS} values, 0 … {SEEDS - 1}"
    assert any(f"core-seconds by seed ({SEEDS} values, 0 … {SEEDS - 1})" in line for line in out["validate"])
    assert any(re.search(r"core-seconds by g: 9.81: \S+, 1: \S+$", line) for line in out["validate"])
    for command in ("validate", "run", "status"):
        assert any(f"g: 9.81, 1; {seeds}" in line for line in out[command]), out[command]
    index = (Path(f"{store}.report") / "index.md").read_text()
    rows = [line for line in index.splitlines() if re.match(r"\| (rkmk4|cf4) \|", line)]
    assert len(rows) == 4 and f"seed ({SEEDS} values, 0 … {SEEDS - 1})" in index, index
    assert {row.split("|")[2].strip() for row in rows} == {"9.81", "1"}  # g kept, one row per value

    _damage(store, 3)  # a few damaged cells: each listed
    lines = _geosweep("verify", str(store), cwd=tmp_path, code=1)
    assert sum(1 for line in lines if line.startswith("  integrator=")) == 3 and not any("more" in x for x in lines)
    _damage(store, MAX_ITEMS + 5)  # many: the first MAX_ITEMS and a count
    lines = _geosweep("verify", str(store), cwd=tmp_path, code=1)
    _bounded(lines, "verify")
    assert sum(1 for line in lines if line.startswith("  integrator=")) == MAX_ITEMS
    assert "  … and 5 more" in lines


def test_a_store_of_another_spec_is_named_compactly_per_axis():
    """The refusal of a store made by another spec names each differing field, a long axis by its
    count, first and last values and how many values differ — one line however long the axes."""
    from geosweep.sweeps.spec import parse_spec
    from geosweep.sweeps.store import mismatch_message

    base = {
        "name": "ens",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": 0.1,
        "dt_out": 0.01,
        "params": {"N": 3, "ic": "random", "seed": list(range(100_000))},
    }
    old = parse_spec(base)
    new = parse_spec(dict(base, T=0.2, params=dict(base["params"], seed=list(range(1, 100_101)))))
    message = mismatch_message("s.zarr", {"spec": old.canonical_json(), "spec_hash": old.spec_hash}, new)
    assert "\n" not in message and len(message) <= 2 * MAX_CHARS, message
    assert "T: store has 0.1, spec has 0.2" in message
    assert "params.seed: store has 100000 values, 0.0 … 99999.0, spec has 100100 values, 1.0 … 100100.0" in message
    assert "(1 only in the store, 101 only in the spec)" in message
