"""Growing a finished store along its sweep axes (issue 25 item 2): ``run --grow`` with a spec that
appends values (a new h, more seeds, another integrator) computes only the new cells, leaves the
stored objects alone and gives the store a run with the larger grid from the start gives — bitwise
for every cell, coordinates in spec order; removals, changes and insertions are refused (exit 3)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from geosweep.flows.cli import main
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.execution import Execution
from geosweep.sweeps.store import StoreMismatchError, StoreRef, verify
from tests.proc_util import geosweep, store_files
from tests.sweep_util import assert_stores_bitwise_equal

PENDULA = {"name": "grow", "system": "spring_pendula", "integrators": ["explicit_vi", "rk4"], "h": [0.01, 0.005],
           "T": 0.2, "dt_out": 0.1, "params": {"kappa12": [0.0, 3.25, 10.0]}}  # fmt: skip
CHAIN = {"name": "grow-chain", "system": "pendulum_chain", "integrators": ["lie_euler"], "h": [0.01], "T": 0.02,
         "dt_out": 0.01, "params": {"ic": "random", "seed": [0, 1, 2, 3, 4]}}  # fmt: skip
MIXED = {"name": "grow-mixed", "system": "pendulum_chain", "integrators": ["lie_euler", "rkmk45"], "h": [0.01, 0.005],
         "tol": [1e-6], "T": 0.02, "dt_out": 0.01, "params": {"ic": "random", "seed": [3]}}  # fmt: skip
#: store attributes that identify the sweep (equal to a store computed with the grown spec from the start)
SPEC_ATTRS = ("spec", "spec_hash", "integrator_options", "T", "dt_out", "sweep_name", "geosweep_format")


def _with(spec: dict, **changes) -> dict:
    out = json.loads(json.dumps(spec))
    for key, value in changes.items():
        if key.startswith("params_"):
            out["params"][key[len("params_") :]] = value
        else:
            out[key] = value
    return out


def _chunks(store: Path, names: set[str]) -> dict[str, tuple[int, int]]:
    """(mtime_ns, size) of every chunk object of the arrays ``names`` (paths ``NAME/c/i/j/…``)."""
    return {k: v for k, v in store_files(store).items() if k.split(os.sep)[0] in names and f"{os.sep}c{os.sep}" in k}


def _cell_vars(store: Path) -> set[str]:
    return set(xr.open_zarr(store).data_vars)


def _assert_same_as_from_scratch(grown: Path, spec: dict, tmp_path: Path) -> None:
    """``grown`` equals a store of ``spec`` computed from the start: every cell bitwise, every
    coordinate (values and dtype, spec order), the spec attributes; and it verifies."""
    fresh = tmp_path / "fresh.zarr"
    run_sweep(spec, fresh, serial=True)
    assert_stores_bitwise_equal(str(grown), str(fresh))
    a, b = xr.open_zarr(grown), xr.open_zarr(fresh)
    assert list(a.status.dims) == list(b.status.dims)
    for name in a.coords:
        assert a[name].dtype == b[name].dtype, name
    for key in SPEC_ATTRS:
        assert a.attrs[key] == b.attrs[key], key
    assert (a.done == 1).all() and verify(StoreRef.of(grown)) == {"damaged": [], "flags": []}


def _grow(spec: dict, store: Path) -> dict:
    """``run_sweep(spec, store, grow=True)``; returns the store's last two run records (grow, run)."""
    result = run_sweep(spec, store, serial=True, grow=True)
    assert not result.errors
    runs = zarr.open_group(str(store), mode="r").attrs["runs"]
    return {"grow": runs[-2], "run": runs[-1], "result": result}


def test_a_new_step_size_computes_only_its_cells_in_new_objects(tmp_path):
    store = tmp_path / "s.zarr"
    run_sweep(PENDULA, store, serial=True)
    cells = _cell_vars(store)
    before = _chunks(store, cells)
    stamps = xr.open_zarr(store).completed_at.values.copy()
    bigger = _with(PENDULA, h=[0.01, 0.005, 0.0025])

    with pytest.raises(StoreMismatchError, match="--grow"):  # without --grow: refused, naming --grow
        run_sweep(bigger, store, serial=True)
    records = _grow(bigger, store)

    assert records["grow"]["axes"] == {"h": [2, 3]} and records["grow"]["cells_added"] == 6
    assert records["run"]["cells_run"] == 6 and records["result"].skipped == 12
    after = _chunks(store, cells)
    # every object of the stored cells is untouched (the new h's cells are in new shards)
    assert {k: after[k] for k in before} == before and len(after) > len(before)
    np.testing.assert_array_equal(xr.open_zarr(store).completed_at.values[:, :2], stamps)
    _assert_same_as_from_scratch(store, bigger, tmp_path)

    # the CLI's status, verify and report, and the accessor, read the grown store
    assert main(["status", str(store)]) == 0
    assert main(["verify", str(store)]) == 0
    ds = xr.open_zarr(store)
    order = ds.geosweep.order(dim="h")
    assert set(order.integrator.values) == {"explicit_vi", "rk4"}
    from geosweep.analysis.report import make_report

    rep = make_report(store, tmp_path / "report")
    assert (tmp_path / "report" / "index.md").exists() and rep is not None


def test_more_seeds_rewrite_only_the_partly_filled_last_shard_and_keep_its_stored_cells(tmp_path):
    store = tmp_path / "s.zarr"
    run_sweep(CHAIN, store, serial=True)
    group = zarr.open_group(str(store), mode="r")
    assert tuple(group["done"].chunks) == (1, 1, 2)  # seeds {0, 1}, {2, 3}, {4}: the last shard is partly filled
    cells = _cell_vars(store)
    before = _chunks(store, cells)
    old = xr.open_zarr(store).load()
    bigger = _with(CHAIN, params_seed=[0, 1, 2, 3, 4, 5, 6])

    records = _grow(bigger, store)

    assert records["grow"]["axes"] == {"seed": [5, 7]} and records["run"]["cells_run"] == 2
    after = _chunks(store, cells)

    def seed_chunk(path: str) -> int:
        return int(path.split(os.sep)[4])  # NAME/c/integrator/h/seed/…

    untouched = {k: v for k, v in before.items() if seed_chunk(k) < 2}
    assert untouched and {k: after[k] for k in untouched} == untouched
    assert any(after[k] != v for k, v in before.items() if seed_chunk(k) == 2)  # the shard of seeds {4, 5}
    new = xr.open_zarr(store).load().isel(seed=slice(0, 5))
    for name in old.data_vars:  # the stored cells as they were, bit for bit (stamps included)
        xr.testing.assert_identical(new[name].drop_vars("seed"), old[name].drop_vars("seed"))
    _assert_same_as_from_scratch(store, bigger, tmp_path)


def test_another_integrator_step_size_and_tolerance_on_a_mixed_grid(tmp_path):
    """An adaptive integrator with a longer name, another h and another tol at once: the integrator coordinates
    grow (wider text), the new not-applicable fillers are marked as a new store marks them."""
    store = tmp_path / "s.zarr"
    run_sweep(MIXED, store, serial=True)
    cells = _cell_vars(store)
    before = _chunks(store, cells)
    added = {"integrators": ["lie_euler", "rkmk45", "dopri5_ambient"], "h": [0.01, 0.005, 0.0025], "tol": [1e-6, 1e-8]}
    bigger = _with(MIXED, **added)
    bigger["integrator_options"] = {"dopri5_ambient": {"theta": 0.8}}

    records = _grow(bigger, store)

    assert records["grow"]["axes"] == {"integrator": [2, 3], "h": [2, 3], "tol": [1, 2]}
    # lie_euler at the new h (first tol), rkmk45 at the new tol, dopri5_ambient at both tols (first h)
    assert records["run"]["cells_run"] == 4
    assert {k: _chunks(store, cells)[k] for k in before} == before
    ds = xr.open_zarr(store)
    assert list(ds.integrator.values) == bigger["integrators"] and ds.integrator_adaptive.values.tolist() == [
        False,
        True,
        True,
    ]
    assert int((ds.status == -2).sum()) == 18 - 7
    _assert_same_as_from_scratch(store, bigger, tmp_path)


# ---- refusals ---------------------------------------------------------------------------------
def _write(tmp_path: Path, spec: dict, name: str = "spec.json") -> Path:
    path = tmp_path / name.replace(".json", ".yaml")
    import yaml

    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"h": [0.01]}, ["h:", "cannot be removed"]),
        ({"h": [0.01, 0.004, 0.005]}, ["h:", "append new values at the end"]),
        ({"params_kappa12": [0.0, 3.5, 20.0]}, ["params.kappa12", "not in the spec"]),
        ({"dt_out": 0.05, "h": [0.01, 0.005, 0.0025]}, ["dt_out: store has 0.1, spec has 0.05"]),
        ({"params_g": [9.81, 1.0]}, ["params.g", "cannot be added"]),
    ],
    ids=["removed", "inserted", "changed", "other-field", "new-axis"],
)
def test_a_spec_that_does_not_only_append_is_refused_with_the_field_named(tmp_path, capsys, change, words):
    store = tmp_path / "s.zarr"
    spec = _with(PENDULA, h=[0.01, 0.005], params_kappa12=[0.0, 10.0])
    run_sweep(spec, store, serial=True)
    before = store_files(store)
    path = _write(tmp_path, _with(spec, **change))
    capsys.readouterr()
    assert main(["run", str(path), "--store", str(store), "--serial", "--grow"]) == 3
    # the first CLI run on a cold cache also says it compiles (not part of the refusal)
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip() and "compiling kernels" not in line]
    assert len(err) == 1 and "Traceback" not in err[0], err
    for w in words:
        assert w in err[0], err[0]
    assert "--grow" not in err[0].split("cannot grow")[1]  # no advice to use what was just refused
    assert store_files(store) == before  # refused before any write


def test_values_that_change_the_size_of_a_cell_are_refused(tmp_path):
    store = tmp_path / "s.zarr"
    spec = _with(CHAIN, params_seed=1, params_N=[2])
    run_sweep(spec, store, serial=True)
    before = store_files(store)
    with pytest.raises(StoreMismatchError, match=r"params\.N: the added values change the size of a cell \(body 2 → 3"):
        run_sweep(_with(spec, params_N=[2, 3]), store, serial=True, grow=True)
    assert store_files(store) == before


def test_without_grow_an_appending_spec_is_refused_naming_grow(tmp_path, capsys):
    store = tmp_path / "s.zarr"
    spec = _with(PENDULA, h=[0.01], params_kappa12=[0.0])
    run_sweep(spec, store, serial=True)
    path = _write(tmp_path, _with(spec, params_kappa12=[0.0, 10.0]))
    capsys.readouterr()
    assert main(["run", str(path), "--store", str(store), "--serial"]) == 3
    err = capsys.readouterr().err
    assert "params.kappa12" in err and "--grow" in err and "kappa12 1 → 2" in err, err
    assert main(["run", str(path), "--store", str(store), "--serial", "--grow"]) == 0


# ---- interruptions ------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["before-spec-switch", "text-coordinate-missing"])
def test_a_grow_interrupted_in_its_metadata_phase_is_finished_by_the_next_run(tmp_path, monkeypatch, where):
    """The process dies after the arrays were resized and the coordinates rewritten (or while the
    wider integrator coordinate was being written anew: it is missing): the old spec is refused (the
    store is mid-grow), the grown spec finishes the grow, and the store is as from scratch."""
    from geosweep.sweeps import grow

    store = tmp_path / "s.zarr"
    if where == "before-spec-switch":
        spec = _with(PENDULA, h=[0.01], params_kappa12=[0.0, 10.0])
        bigger, shape = _with(spec, h=[0.01, 0.005]), (2, 2, 2)
    else:
        spec = _with(MIXED, h=[0.01])
        bigger, shape = _with(spec, integrators=["lie_euler", "rkmk45", "dopri5_ambient"]), (3, 1, 1, 1)
    run_sweep(spec, store, serial=True)
    real = grow._rewrite_coords

    def crash(group, *args):
        if where == "text-coordinate-missing":
            real(group, *args)
            del group["integrator"]
        raise KeyboardInterrupt

    monkeypatch.setattr(grow, "_rewrite_coords" if where == "text-coordinate-missing" else "_switch_spec", crash)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(bigger, store, serial=True, grow=True)
    monkeypatch.undo()
    assert zarr.open_group(str(store), mode="r", use_consolidated=False)["done"].shape == shape  # resized
    with pytest.raises(StoreMismatchError, match="interrupted grow"):
        run_sweep(spec, store, serial=True)
    run_sweep(bigger, store, serial=True)  # the same spec finishes it (--grow was given before)
    _assert_same_as_from_scratch(store, bigger, tmp_path)


RESUME = {"name": "grow-kill", "system": "lj_sphere", "integrators": ["explicit_vi", "rk4"], "h": [0.01, 0.005],
          "T": 2.0, "dt_out": 0.1, "params": {"omega": [0.0, 1.0]}}  # fmt: skip


def test_kill_9_while_growing_then_resume(tmp_path):
    """A real ``geosweep run --grow`` process killed (SIGKILL to its group) while it computes the new
    cells; the rerun computes only what is missing: no stored cell, old or new, is recomputed."""
    store = tmp_path / "s.zarr"
    run_sweep(RESUME, store, serial=True)
    stored = xr.open_zarr(store).completed_at.values.copy()
    bigger = _with(RESUME, params_omega=[0.0, 1.0, 2.0, 3.0, 3.25, 4.0])
    path = _write(tmp_path, bigger)
    cmd = geosweep("run", str(path), "--store", str(store), "--grow", "--no-prefect", "--workers", "2")
    cmd += ["--slice-seconds", "0.5"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}

    def done() -> np.ndarray:
        try:
            return np.asarray(zarr.open_group(str(store), mode="r")["done"][...]) == 1
        except Exception:  # noqa: BLE001 - mid-write
            return np.zeros(0, bool)

    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 240
    try:
        while time.time() < deadline:
            d = done()
            if d.size == 24 and 8 + 2 <= d.sum() <= 24 - 4:
                break
            assert proc.poll() is None, "the grow finished before it could be killed"
            time.sleep(0.05)
        else:
            raise AssertionError("the grow made no progress")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    killed = xr.open_zarr(store)
    finished = killed.done.values == 1
    stamps = killed.completed_at.values.copy()
    np.testing.assert_array_equal(stamps[..., :2], stored)  # the stored cells were not touched by the grow

    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    kept = re.search(r"(\d+)/(\d+) cells already complete", rerun.stderr)
    assert kept and int(kept[1]) >= finished.sum() and int(kept[2]) == 24
    after = xr.open_zarr(store)
    np.testing.assert_array_equal(after.completed_at.values[finished], stamps[finished])  # none recomputed
    _assert_same_as_from_scratch(store, bigger, tmp_path)


def test_the_prefect_flow_grows_on_a_local_cluster(tmp_path):
    """The CLI's default path: ``sweep_flow(…, grow=True)`` (Prefect's test harness, a real 2-worker
    LocalCluster) computes the new cells only; a refused grow raises StoreMismatchError (exit 3 in the CLI)."""
    from prefect.testing.utilities import prefect_test_harness

    from geosweep.flows.sweep_flow import sweep_flow

    store = tmp_path / "s.zarr"
    spec = _with(PENDULA, h=[0.01], params_kappa12=[0.0, 10.0])
    run_sweep(spec, store, serial=True)
    bigger = _with(spec, params_kappa12=[0.0, 10.0, 20.0])
    with prefect_test_harness(server_startup_timeout=120):
        out = sweep_flow(bigger, store=str(store), execution=Execution(n_workers=2, slice_seconds=0.01), grow=True)
        assert out["ran"] == 2 and out["skipped"] == 4 and not out["errors"]
        with pytest.raises(StoreMismatchError, match="cannot be removed"):
            sweep_flow(_with(spec, params_kappa12=[0.0]), store=str(store), execution=Execution(n_workers=2), grow=True)
    _assert_same_as_from_scratch(store, bigger, tmp_path)
