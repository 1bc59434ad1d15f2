"""The store layout, failure statuses, spec/store mismatch and resume (serial engine)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import xarray as xr

from kernels.s2 import integrate
from kernels.systems.lj_sphere import lj_sphere
from sweeps.engine import run_sweep
from sweeps.spec import load_spec
from sweeps.store import StoreMismatchError

# lj_sphere at icosphere level 1 (42 molecules) is cheap; h = 0.1 blows the explicit VI up.
SPEC = {
    "name": "store-test",
    "system": "lj_sphere",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.1, 0.01, 0.005],
    "T": 1.0,
    "dt_out": 0.1,
    "snapshot_dt": 0.5,
    "params": {"level": 1, "omega": [0.0, 20.0]},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("stores") / "s.zarr"
    result = run_sweep(SPEC, path, serial=True)
    assert result.complete and result.ran == 12 and result.skipped == 0
    return path


def test_layout_is_labelled(store):
    ds = xr.open_zarr(store)
    assert ds["energy_error"].dims == ("integrator", "h", "omega", "time")
    assert ds["momentum"].dims == ("integrator", "h", "omega", "time", "component")
    assert ds["q_final"].dims == ("integrator", "h", "omega", "body", "component")
    assert list(ds.integrator.values) == ["explicit_vi", "rk4"]
    np.testing.assert_allclose(ds.time.values, np.arange(11) * 0.1)
    assert ds.h.attrs["units"] == "1" and ds.omega.attrs["units"] == "rad / time"
    assert float(ds.level) == 1 and float(ds.epsilon) == 0.01  # fixed parameters as scalar coords
    assert ds.energy.attrs["long_name"].startswith("total energy")
    for key in ("spec", "spec_hash", "git_revision", "numba_version", "cpu", "geosweep_version"):
        assert ds.attrs[key], key
    assert json.loads(ds.attrs["spec"])["name"] == "store-test"
    assert int(ds.done.sum()) == 12
    assert ds.energy.encoding["chunks"] == (1, 1, 1, 11)


def test_values_equal_the_kernel_called_directly(store):
    ds = xr.open_zarr(store).sel(integrator="explicit_vi", h=0.005, omega=20.0)
    tr = integrate(lj_sphere(level=1, omega=20.0), "explicit_vi", 0.005, 200, 20)
    np.testing.assert_array_equal(ds.energy.values, tr.energy)
    np.testing.assert_array_equal(ds.q_final.values, tr.q)
    assert float(ds.mean_abs_energy_error) == tr.summary["mean_abs_dE"]
    assert int(ds.steps) == 200 and int(ds.status) == 0


def test_blow_up_is_a_status_not_a_crash_and_no_nan_in_summaries(store):
    ds = xr.open_zarr(store)
    bad = ds.sel(integrator="explicit_vi", h=0.1, omega=20.0)
    assert int(bad.status) == 1  # DOMAIN: 1 − |a|² ≤ 0
    k = int(bad.fail_step)
    assert 1 <= k <= 10 and float(bad.fail_value) >= 1.0
    e = bad.energy_error.values
    assert np.all(np.isfinite(e[:k])) and np.all(np.isnan(e[k:]))  # dt_out = h here
    for name in ("mean_abs_energy_error", "max_abs_energy_error", "max_unit_error", "max_momentum_error"):
        assert np.isfinite(float(bad[name])), name
    assert np.all(np.isfinite(bad.q_final.values))
    ok = ds.where(ds.status == 0)
    assert int((ds.status == 0).sum()) == int(ds.done.sum()) - int((ds.status > 0).sum())
    assert np.isnan(float(ok.mean_abs_energy_error.sel(integrator="explicit_vi", h=0.1, omega=20.0)))


def test_second_run_computes_nothing_and_rewrites_nothing(store):
    before = xr.open_zarr(store).completed_at.values.copy()
    result = run_sweep(SPEC, store, serial=True)
    assert result.ran == 0 and result.skipped == 12
    np.testing.assert_array_equal(xr.open_zarr(store).completed_at.values, before)


def test_a_different_spec_is_refused_and_the_store_untouched(store):
    before = xr.open_zarr(store).completed_at.values.copy()
    other = dict(SPEC, T=2.0)
    with pytest.raises(StoreMismatchError, match=r"T: store has 1.0, spec has 2.0"):
        run_sweep(other, store, serial=True)
    np.testing.assert_array_equal(xr.open_zarr(store).completed_at.values, before)
    assert xr.open_zarr(store).attrs["spec_hash"] == load_spec(SPEC).spec_hash


def test_partially_written_cell_is_recomputed(tmp_path):
    """A cell whose values were written but not its done flag counts as not complete."""
    import zarr

    path = tmp_path / "p.zarr"
    run_sweep(SPEC, path, serial=True)
    g = zarr.open_group(str(path), mode="r+")
    g["done"][0, 1, 1] = 0
    g["energy"][0, 1, 1, :] = 123.0  # a torn write
    stamps = xr.open_zarr(path).completed_at.values.copy()
    result = run_sweep(SPEC, path, serial=True)
    assert result.ran == 1
    ds = xr.open_zarr(path)
    assert not np.any(ds.energy.values == 123.0)
    changed = ds.completed_at.values != stamps
    assert changed.sum() == 1 and changed[0, 1, 1]


def test_state_snapshots(store):
    ds = xr.open_zarr(store)
    np.testing.assert_allclose(ds.snapshot_time.values, [0.0, 0.5, 1.0])
    cell = ds.sel(integrator="explicit_vi", h=0.005, omega=20.0)
    q0, _ = lj_sphere(level=1, omega=20.0).initial_state()
    np.testing.assert_array_equal(cell.q_snap.isel(snapshot=0).values, q0)
    np.testing.assert_array_equal(cell.q_snap.isel(snapshot=-1).values, cell.q_final.values)
    np.testing.assert_array_equal(cell.w_snap.isel(snapshot=-1).values, cell.w_final.values)
    failed = ds.sel(integrator="explicit_vi", h=0.1, omega=20.0)  # failed at step ≤ 10: no later states
    assert np.isnan(failed.q_snap.isel(snapshot=-1).values).all()
