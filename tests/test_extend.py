"""Growing a finished store to a longer T (``geosweep extend``, :mod:`geosweep.sweeps.extension`): bitwise the
store computed to the new T from the start, for every family, fixed step and adaptive (dense
output), with the stored samples up to the old T left as written."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from geosweep import sweeps
from geosweep.flows.cli import main
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.extension import ExtendError, typed
from tests.proc_util import geosweep, wait_until
from tests.sweep_util import assert_stores_bitwise_equal

#: one tiny spec per family: a fixed-step and (where the family has one) an adaptive integrator
FAMILIES = {
    "s2": {
        "system": "double_pendulum",
        "integrators": ["implicit_vi", "rk4"],
        "h": [0.01],
        "T": 0.5,
        "dt_out": 0.05,
        "snapshot_dt": 0.25,
    },
    "se3": {
        "system": "torus",
        "integrators": ["v2_exact", "v1"],
        "h": [2e-3],
        "T": 0.2,
        "dt_out": 0.02,
    },
    "ts2": {
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "rkmk45", "dopri5_ambient"],
        "h": [0.01],
        "tol": [1e-6],
        "T": 0.5,
        "dt_out": 0.05,
        "snapshot_dt": 0.1,
        "params": {"N": [2, 3]},
    },
    "top": {
        "system": "heavy_top",
        "integrators": ["slgi_half", "lp_rkmk45"],
        "h": [2.5e-4],
        "tol": [1e-8],
        "T": 0.02,
        "dt_out": 0.005,
    },
    "quad": {
        "system": "two_quadrotors",
        "integrators": ["quad_rkmk4", "quad_rkmk45"],
        "h": [0.005],
        "tol": [1e-8],
        "T": 0.1,
        "dt_out": 0.02,
    },
    "dg": {
        "system": "gearbox",
        "integrators": ["dg_gonzalez", "dopri5_skew"],
        "h": [0.1],
        "tol": [1e-7],
        "T": 2.0,
        "dt_out": 0.5,
    },
}


def _spec(family: str, **extra) -> dict:
    return {"name": f"ext-{family}", **FAMILIES[family], **extra}


def _direct(store: Path, out: Path) -> None:
    """A store computed from t = 0 with the (grown) spec ``store`` records."""
    spec = typed(json.loads(zarr.open_group(str(store), mode="r").attrs["spec"]))
    run_sweep(spec, out, serial=True)


def _time_chunks(store: Path) -> dict[str, tuple[int, bytes]]:
    """(mtime, bytes) of every stored object of an array with a ``time`` axis (the samples)."""
    g = zarr.open_group(str(store), mode="r")
    out = {}
    for name, arr in g.arrays():
        if "time" not in (arr.metadata.dimension_names or ()):
            continue
        for f in (store / name / "c").rglob("*"):
            if f.is_file():
                out[str(f.relative_to(store))] = (f.stat().st_mtime_ns, f.read_bytes())
    return out


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_extend_is_bitwise_a_run_to_the_new_T(tmp_path, family):
    spec = _spec(family)
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True)
    res = sweeps.extend(a, T=3 * spec["T"], serial=True)
    assert res.complete and res.resumed == res.ran > 0  # every cell continued from its carry
    _direct(a, b)
    assert_stores_bitwise_equal(str(a), str(b))
    ds = xr.open_zarr(a)
    assert float(ds.time[-1]) == pytest.approx(3 * spec["T"]) and float(ds.attrs["T"]) == 3 * spec["T"]
    assert bool(np.isfinite(ds.energy.where(ds.status == 0)).all() | (ds.status != 0).values[..., None].all())


def test_extend_twice_and_old_samples_not_rewritten(tmp_path):
    """Fixed step: no stored object of the samples up to the old T is rewritten (same bytes, same
    mtime); a second extension continues the first; the records say from, to and when."""
    spec = _spec("s2")
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True)
    before = _time_chunks(a)
    time.sleep(0.05)
    sweeps.extend(a, T=1.0, serial=True)
    after = _time_chunks(a)
    assert before and all(after[k] == v for k, v in before.items())  # untouched
    assert len(after) > len(before)  # the new samples are new objects
    sweeps.extend(a, T=1.5, serial=True)
    _direct(a, b)
    assert_stores_bitwise_equal(str(a), str(b))
    runs = zarr.open_group(str(a), mode="r").attrs["runs"]
    ext = [r["extension"] for r in runs if "extension" in r]
    assert [(e["from"], e["to"]) for e in ext] == [(0.5, 1.0), (1.0, 1.5)] and all(e["when"] for e in ext)


def _objects_of_old_rows(store: Path, n_old: dict[str, int]) -> dict[str, tuple[int, bytes]]:
    """(mtime, bytes) of every stored object of an array with a ``time``/``snapshot`` axis that holds
    only rows before ``n_old[axis]`` along it (samples up to the old T: an extension leaves them as written)."""
    g = zarr.open_group(str(store), mode="r")
    out = {}
    for name, arr in g.arrays():
        dims = tuple(arr.metadata.dimension_names or ())
        axes = [(k, d) for k, d in enumerate(dims) if d in n_old and arr.ndim > 1]
        for f in (store / name / "c").rglob("*") if axes else ():
            coords = [int(x) for x in f.relative_to(store / name / "c").parts]
            if f.is_file() and all((coords[k] + 1) * arr.chunks[k] <= n_old[d] for k, d in axes):
                out[str(f.relative_to(store))] = (f.stat().st_mtime_ns, f.read_bytes())
    return out


def test_adaptive_dense_extension_leaves_the_old_rows_objects(tmp_path):
    """Adaptive cells with dense output (rkmk45, dopri5_ambient) beside fixed-step ones (rkmk4): a
    run to T₁ clips its last step to land on T₁, a run to T₂ interpolates inside it, so the rows in
    that step change when the store grows (here, steps shorter than dt_out: the row at T₁ only). No
    object holding only samples or snapshots up to the old T is rewritten (same bytes, same mtime;
    the row at T₁ is an object of its own), twice over, and the store is bitwise a direct run."""
    spec = _spec("ts2")
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True)
    for T in (1.5, 2.0):
        ds = xr.open_zarr(a)
        n_old = {"time": ds.sizes["time"], "snapshot": ds.sizes["snapshot"]}
        at_T1 = ds.energy.isel(time=-1).values.copy()
        before = _objects_of_old_rows(a, n_old)
        assert {k.split("/")[0] for k in before} >= {"energy", "step_size", "snapshot_state"}
        time.sleep(0.05)
        sweeps.extend(a, T=T, serial=True)
        assert _objects_of_old_rows(a, n_old) == before
        grown = xr.open_zarr(a).energy.isel(time=n_old["time"] - 1).values
        assert not np.array_equal(grown, at_T1, equal_nan=True)  # the dense cells' sample at T₁ did change
    _direct(a, b)
    assert_stores_bitwise_equal(str(a), str(b))


def _old_rows(store: Path, n_old: dict[str, int]) -> dict[str, np.ndarray]:
    """Every variable with a ``time``/``snapshot`` axis, cut to its rows before ``n_old[axis]``."""
    ds = xr.open_zarr(store)
    return {
        name: ds[name].isel({d: slice(0, n_old[d]) for d in ds[name].dims if d in n_old}).values
        for name in ds.data_vars
        if set(ds[name].dims) & set(n_old) and name not in ("wall_time", "completed_at")
    }


def test_fixed_step_extensions_change_no_stored_sample(tmp_path):
    """Fixed step, with ``snapshot_dt`` (README "Growing a study"): extending twice rewrites no object
    of the first run's samples or snapshots (same bytes, same mtime); the second extension writes
    again only the last, partly filled object along ``time`` of each per-cell array and shard (the
    first extension's 21 rows in chunks of 11), with every stored row bitwise as it was."""
    spec = _spec("s2")
    a = tmp_path / "a.zarr"
    run_sweep(spec, a, serial=True)
    ds = xr.open_zarr(a)
    first = {"time": ds.sizes["time"], "snapshot": ds.sizes["snapshot"]}
    objects, rows = _objects_of_old_rows(a, first), _old_rows(a, first)
    assert {k.split("/")[0] for k in objects} >= {"energy", "snapshot_state"}
    time.sleep(0.05)
    sweeps.extend(a, T=1.0, serial=True)
    assert _objects_of_old_rows(a, first) == objects
    ds = xr.open_zarr(a)
    grown = {"time": ds.sizes["time"], "snapshot": ds.sizes["snapshot"]}
    before, stored = _time_chunks(a), _old_rows(a, grown)
    time.sleep(0.05)
    sweeps.extend(a, T=1.5, serial=True)
    assert _objects_of_old_rows(a, first) == objects
    after, chunk = _time_chunks(a), first["time"]
    g = zarr.open_group(str(a), mode="r")
    dims = {n: list(arr.metadata.dimension_names or ()) for n, arr in g.arrays() if arr.ndim > 1}
    axis = {n: 2 + d.index("time") for n, d in dims.items() if "time" in d}  # NAME/c/i/j/…: the time chunk's part
    rewritten = {k for k, v in before.items() if after[k] != v and k.split("/")[0] in axis}
    partly = {k for k in before if k.split("/")[0] in axis and int(k.split("/")[axis[k.split("/")[0]]]) == 1}
    assert grown["time"] == 2 * chunk - 1 and partly and rewritten == partly  # only the partly filled last object
    for name, values in _old_rows(a, grown).items():
        assert np.array_equal(values, stored[name], equal_nan=True), name  # its stored rows as they were
    for name, values in _old_rows(a, first).items():
        assert np.array_equal(values, rows[name], equal_nan=True), name


def test_failed_and_not_applicable_cells_stay(tmp_path):
    # rk4 with a tiny energy guard fails at its first steps; the h/tol grid has filler cells
    spec = _spec("ts2", h=[0.01, 0.005], integrator_options={"rkmk4": {"blowup": 1e-14}})
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True)
    st0 = xr.open_zarr(a).status.values.copy()
    failed = st0 > 0
    assert failed.any() and (st0 == -2).any()
    old = xr.open_zarr(a).load()
    sweeps.extend(a, T=1.0, serial=True)
    ds = xr.open_zarr(a)
    assert np.array_equal(ds.status.values, st0)  # failed stays failed, not_applicable stays
    for name in ("fail_step", "fail_time", "steps", "energy"):  # a failed cell's values are kept
        now = ds[name].isel(time=slice(0, old.sizes["time"])) if "time" in ds[name].dims else ds[name]
        x, y = old[name].values[failed], now.values[failed]
        assert np.array_equal(x, y, equal_nan=True), name
    _direct(a, b)
    assert_stores_bitwise_equal(str(a), str(b))


def test_cli_extend_status_and_refusals(tmp_path, capsys):
    spec = _spec("s2")
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True)
    assert main(["extend", str(a), "--T", "0.25", "--serial", "--quiet"]) == 2
    assert "cannot shrink" in capsys.readouterr().err
    assert main(["extend", str(a), "--T", "1.0", "--serial"]) == 0
    out = capsys.readouterr().out
    assert "T reached: 1 " in out and "0.5 → 1" in out
    assert main(["status", str(a)]) == 0 and "T reached: 1 " in capsys.readouterr().out
    # run SPEC --grow: a spec that differs by a larger T
    grown = tmp_path / "grown.yaml"  # JSON is YAML
    grown.write_text(json.dumps({**spec, "T": 1.5}))
    assert main(["run", str(grown), "--store", str(a), "--serial", "--grow", "--quiet"]) == 0
    _direct(a, b)
    assert_stores_bitwise_equal(str(a), str(b))
    # without --grow the larger T is another sweep (exit 3, the field named)
    grown.write_text(json.dumps({**spec, "T": 2.0}))
    assert main(["run", str(grown), "--store", str(a), "--serial", "--quiet"]) == 3
    assert "T: store has 1.5, spec has 2.0" in capsys.readouterr().err


@pytest.mark.parametrize("family", ["s2", "ts2"])
def test_a_larger_T_and_appended_axis_values_grow_in_one_run(tmp_path, family):
    """``run --grow`` with a spec that raises T *and* appends values (a step size; for ts2 also a
    tolerance and an adaptive integrator): bitwise a store computed with that spec from t = 0."""
    spec = _spec(family)
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True)
    more = {"T": 2 * spec["T"], "h": [*spec["h"], spec["h"][0] / 2]}
    if family == "ts2":
        more.update(tol=[*spec["tol"], 1e-7])
    res = run_sweep({**spec, **more}, a, serial=True, grow=True)
    assert res.complete and 0 < res.resumed < res.ran  # old cells continued, new ones from t = 0
    _direct(a, b)
    assert_stores_bitwise_equal(str(a), str(b))
    ds = xr.open_zarr(a)
    assert list(ds.h.values) == more["h"] and float(ds.time[-1]) == pytest.approx(more["T"])


def test_store_without_carries_refused_or_recomputed(tmp_path, capsys):
    spec = _spec("ts2")
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True, keep_carries=False)
    with pytest.raises(ExtendError, match="no final carry"):
        sweeps.extend(a, T=1.0, serial=True)
    assert main(["extend", str(a), "--T", "1.0", "--serial", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "no final carry" in err and "--recompute" in err and "Traceback" not in err
    assert main(["extend", str(a), "--T", "1.0", "--serial", "--quiet", "--recompute"]) == 0
    assert "computed again from t = 0" in capsys.readouterr().err
    _direct(a, b)
    assert_stores_bitwise_equal(str(a), str(b))


def test_carry_bytes_per_cell_are_recorded(tmp_path):
    """The carries of a store are one object per shard, about the size of the cell's samples."""
    from geosweep.sweeps.carries import carry_bytes
    from geosweep.sweeps.store import StoreRef

    a = tmp_path / "a.zarr"
    run_sweep(_spec("s2"), a, serial=True)
    n = int((xr.open_zarr(a).status == 0).sum())
    per_cell = carry_bytes(StoreRef.of(a)) / n
    assert 0 < per_cell < 50_000
    shards = [f for f in (a / "done" / "c").rglob("*") if f.is_file()]  # one object per store shard
    assert len(list((a / "_carries").iterdir())) == len(shards)


def test_killed_extension_resumes_bitwise(tmp_path):
    """kill -9 of ``geosweep extend`` (a real process) in the middle of a cell, then the same
    command again: bitwise the store computed to the new T from the start."""
    spec = {
        "name": "ext-kill",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "rkmk45"],
        "h": [0.0025],
        "tol": [1e-9],
        "T": 1.0,
        "dt_out": 0.05,
        "checkpoint_every": 0.5,
        "params": {"N": [30]},
    }
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True)
    env = {**os.environ}
    cmd = geosweep("extend", str(a), "--T", "12.0", "--serial")
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ckpt = a / "_checkpoints"
    try:
        wait_until(lambda: ckpt.is_dir() and any(p.suffix == ".npz" for p in ckpt.iterdir()), "a checkpoint", proc)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    ds = xr.open_zarr(a)
    assert not bool((ds.done == 1).all())  # killed in the middle
    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    _direct(a, b)
    assert_stores_bitwise_equal(str(a), str(b))
    assert math.isclose(float(xr.open_zarr(a).time[-1]), 12.0)


def test_report_and_accessor_on_an_extended_store(tmp_path):
    """``geosweep report`` and the accessor read a grown store as the store computed to the new T
    from the start: the same figures, the same ok() selection and drift classes."""
    import geosweep  # noqa: F401 - registers ds.geosweep
    from geosweep.analysis.report import make_report

    spec = _spec("ts2", T=1.0, dt_out=0.1, snapshot_dt=None)
    a, b = tmp_path / "a.zarr", tmp_path / "b.zarr"
    run_sweep(spec, a, serial=True)
    assert main(["extend", str(a), "--T", "10.0", "--serial", "--quiet"]) == 0
    _direct(a, b)
    ra, rb = make_report(a, tmp_path / "a.report"), make_report(b, tmp_path / "b.report")
    names = sorted(Path(f).name for f in ra.figures)
    assert names == sorted(Path(f).name for f in rb.figures) and "energy_envelope" in names
    assert main(["report", str(a), "--out", str(tmp_path / "cli.report"), "--quiet"]) == 0
    da, db = xr.open_zarr(a), xr.open_zarr(b)
    oa, ob = da.geosweep.ok(), db.geosweep.ok()
    assert float(oa.time[-1]) == 10.0 and oa.sizes == ob.sizes
    assert np.array_equal(oa.energy_error.values, ob.energy_error.values, equal_nan=True)
    ca, cb = da.geosweep.classify(window=(1.0, 10.0)), db.geosweep.classify(window=(1.0, 10.0))
    for name in cb.data_vars:
        assert np.array_equal(ca[name].values, cb[name].values), name
