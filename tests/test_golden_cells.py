"""Stored values pinned: a fixed set of cells of every shipped example, checksummed (issue 24 item 6).

For each spec in ``sweeps/examples/`` (shortened to ``T = 4·dt_out``, at most 400 steps of a
fixed-step cell, so CI stays fast), the first, middle and last runnable cells are integrated through
the path a worker takes (``plan.request`` → ``famdef.start`` → ``advance`` → ``famdef.collect``) and
their values hashed with :func:`geosweep.sweeps.store.cell_checksum` (every stored value, dtype and
shape; timings left out). ``tests/data/golden_cells.json`` was recorded on the code of 2026-11-28 (every
product of a stored value in index order, no BLAS: the same bits on every CPU, see
tests/test_cpu_independence.py; the recording of 2026-11-25 held an AVX-512 Intel node's BLAS
rounding); a redesign must keep it. One sweep is also
run into a real store and its stored checksums compared, so the write path is pinned too.

Re-record only for an intended change of stored values (say so in CHANGELOG.md):
``GEOSWEEP_RECORD_GOLDEN=1 python3 -m pytest tests/test_golden_cells.py``.
"""

from __future__ import annotations

import json
import os
import tomllib
from importlib import resources
from pathlib import Path

import numpy as np
import pytest
import zarr

from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.plan import make_plan
from geosweep.sweeps.store import cell_checksum

GOLDEN = Path(__file__).parent / "data" / "golden_cells.json"
EXAMPLES = resources.files("geosweep.sweeps").joinpath("examples")
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if p.name.endswith(".toml"))
RECORD = os.environ.get("GEOSWEEP_RECORD_GOLDEN") == "1"


def short_spec(name: str) -> dict:
    """The example's spec with ``T = 4·dt_out`` (snapshots every 2·dt_out, no checkpoint interval),
    ``dt_out`` cut to 100 steps of the smallest ``h`` where it is longer."""
    spec = tomllib.loads(EXAMPLES.joinpath(name).read_text())
    if spec.get("h") and float(spec["dt_out"]) > 100 * min(spec["h"]):
        spec["dt_out"] = 100 * min(spec["h"])
    spec["T"] = min(float(spec["T"]), 4 * float(spec["dt_out"]))
    if spec.get("snapshot_dt") is not None:
        spec["snapshot_dt"] = 2 * float(spec["dt_out"])
    spec.pop("checkpoint_every", None)
    return spec


def picked_cells(plan) -> list[tuple[int, ...]]:
    """First, middle and last runnable cells (C order)."""
    cells = [tuple(int(i) for i in c) for c in np.argwhere(plan.grid.applicable_mask())]
    return sorted({cells[0], cells[len(cells) // 2], cells[-1]})


def cell_values(plan, cell) -> tuple[int, dict[str, np.ndarray]]:
    request, options = plan.request(cell)
    integrator = plan.grid.coords(cell)["integrator"]
    model = plan.model(cell)
    traj = plan.famdef.start(model, integrator, request, options)
    while not traj.finished:
        traj.advance()
    # every family's cells take the driver's addressed entry (its functions as one address array)
    assert isinstance(traj._call[1][0], np.ndarray), f"{plan.famdef.name}: not the addressed driver call"
    res = plan.famdef.collect(model, integrator, traj, options)
    return int(res.status), res.values


def pinned(values: dict) -> dict:
    """The values pinned bitwise: all but ``global_error``, a distance to SciPy's DOP853 reference
    whose products go through the CPU's BLAS kernels (tests/test_cpu_independence.py bounds it)."""
    return {k: v for k, v in values.items() if k != "global_error"}


def _recorded() -> dict:
    return json.loads(GOLDEN.read_text()) if GOLDEN.exists() else {}


@pytest.mark.parametrize("name", NAMES)
def test_cells_of_every_shipped_example_keep_their_values(name):
    plan = make_plan(short_spec(name))
    got = {}
    for cell in picked_cells(plan):
        status, values = cell_values(plan, cell)
        got[",".join(map(str, cell))] = f"{status}:{cell_checksum(pinned(values), status):016x}"
    if RECORD:
        data = _recorded()
        data[name] = got
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        pytest.skip("recorded")
    assert got == _recorded()[name], f"stored values of {name} changed (see this module's docstring)"


def test_a_stored_sweep_keeps_its_values(tmp_path):
    """The demo, run into a real store serially: the stored checksum of every cell is pinned."""
    name = "sphere_demo.toml"
    store = tmp_path / "demo.zarr"
    run_sweep(make_plan(short_spec(name)), str(store), serial=True)
    group = zarr.open_group(str(store), mode="r")
    done, checksum = np.asarray(group["done"]), np.asarray(group["checksum"])
    got = {",".join(map(str, c)): f"{int(checksum[tuple(c)]):016x}" for c in np.argwhere(done == 1)}
    key = "store:" + name
    if RECORD:
        data = _recorded()
        data[key] = got
        GOLDEN.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        pytest.skip("recorded")
    assert got == _recorded()[key]
