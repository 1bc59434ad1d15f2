"""The store layout, failure statuses, spec/store mismatch and resume (serial engine)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from geosweep.kernels.s2.integrate import _integrate
from geosweep.kernels.systems.lj_sphere import lj_sphere
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.spec import load_spec
from geosweep.sweeps.store import FORMAT_VERSION, StoreFormatError, StoreMismatchError, open_results

Q, W = ["q_x", "q_y", "q_z"], ["w_x", "w_y", "w_z"]

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
    "integrator_options": {"explicit_vi": {"blowup": 0.0}},  # no energy guard: the VI fails on its domain
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
    assert ds["final_state"].dims == ("integrator", "h", "omega", "body", "state")
    assert ds["snapshot_state"].dims == ("integrator", "h", "omega", "snapshot", "body", "state")
    assert list(ds.integrator.values) == ["explicit_vi", "rk4"]
    np.testing.assert_allclose(ds.time.values, np.arange(11) * 0.1)
    assert ds.h.attrs["units"] == "1" and ds.omega.attrs["units"] == "rad"  # CF: nondimensional time
    assert float(ds.level) == 1 and float(ds.epsilon) == 0.01  # fixed parameters as scalar coords
    assert ds.energy.attrs["long_name"].startswith("total energy")
    assert ds.attrs["geosweep_format"] == FORMAT_VERSION == 3
    for key in ("spec", "spec_hash", "git_revision", "numba_version", "cpu", "geosweep_version"):
        assert ds.attrs[key], key
    assert json.loads(ds.attrs["spec"])["name"] == "store-test"
    assert int(ds.done.sum()) == 12
    assert ds.energy.encoding["chunks"] == ds.energy.data.chunksize == (2, 3, 1, 11)  # one chunk per shard


def test_values_equal_the_kernel_called_directly(store):
    ds = xr.open_zarr(store).sel(integrator="explicit_vi", h=0.005, omega=20.0)
    tr = _integrate(lj_sphere(level=1, omega=20.0), "explicit_vi", 0.005, 200, 20)
    np.testing.assert_array_equal(ds.energy.values, tr.energy)
    np.testing.assert_array_equal(ds.final_state.sel(state=Q).values, tr.q)
    np.testing.assert_array_equal(ds.final_state.sel(state=W).values, tr.w)
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
    assert np.all(np.isfinite(bad.final_state.values))
    ok = ds.where(ds.status == 0)
    assert int((ds.status == 0).sum()) == int(ds.done.sum()) - int((ds.status > 0).sum())
    assert np.isnan(float(ok.mean_abs_energy_error.sel(integrator="explicit_vi", h=0.1, omega=20.0)))


def test_the_energy_guard_stops_a_blow_up_by_default(tmp_path):
    spec = dict(SPEC, name="guard", integrators=["explicit_vi"], h=[0.1], params={"level": 1, "omega": 20.0})
    del spec["integrator_options"]
    run_sweep(spec, tmp_path / "g.zarr", serial=True)
    ds = xr.open_zarr(tmp_path / "g.zarr").isel(integrator=0, h=0)
    labels = dict(zip(ds.status.attrs["flag_values"], ds.status.attrs["flag_meanings"].split()))
    assert labels[int(ds.status)] == "energy_blowup" and int(ds.fail_step) >= 1
    assert np.isfinite(float(ds.max_abs_energy_error)) and np.all(np.isfinite(ds.final_state.values))


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
    np.testing.assert_array_equal(cell.snapshot_state.sel(state=Q).isel(snapshot=0).values, q0)
    np.testing.assert_array_equal(cell.snapshot_state.isel(snapshot=-1).values, cell.final_state.values)
    failed = ds.sel(integrator="explicit_vi", h=0.1, omega=20.0)  # failed at step ≤ 10: no later states
    assert np.isnan(failed.snapshot_state.isel(snapshot=-1).values).all()


def test_integrator_coords_state_labels_and_attrs(store):
    ds = xr.open_zarr(store)
    assert list(ds.integrator_family.values) == ["s2", "s2"]
    assert list(ds.integrator_order.values) == [2, 4]
    assert list(ds.integrator_adaptive.values) == [False, False]
    assert ds.integrator_family.dims == ds.integrator_order.dims == ds.integrator_adaptive.dims == ("integrator",)
    assert list(ds.state.values) == ["q_x", "q_y", "q_z", "w_x", "w_y", "w_z"]
    assert ds.max_abs_energy_error.attrs["computed_over"] == "every step"
    assert "computed_over" not in ds.energy.attrs
    from geosweep.kernels.status import STATUS_MEANINGS

    assert list(ds.status.attrs["flag_values"]) == list(STATUS_MEANINGS)
    assert ds.status.attrs["flag_meanings"].split() == list(STATUS_MEANINGS.values())


@pytest.mark.parametrize("old", [1, None])
def test_a_store_of_another_format_is_refused_with_a_clear_message(store, tmp_path, old, capsys):
    """A store written before format 2 (attr edited to 1, or removed) is never resumed or misread."""
    import shutil

    import zarr

    from geosweep.flows.cli import main

    path = tmp_path / "old.zarr"
    shutil.copytree(store, path)
    group = zarr.open_group(str(path), mode="r+")
    if old is None:
        del group.attrs["geosweep_format"]
    else:
        group.attrs["geosweep_format"] = old
    group["done"][0, 1, 1] = 0  # a cell a resume would recompute
    before = xr.open_zarr(path, consolidated=False).completed_at.values.copy()
    has = "store format 1" if old == 1 else "unversioned store format"
    with pytest.raises(StoreFormatError, match=has) as err:
        run_sweep(SPEC, path, serial=True)
    assert "store formats 2 and 3 only" in str(err.value) and "Write a new store" in str(err.value)
    assert isinstance(err.value, StoreMismatchError)  # the CLI's exit code 3
    np.testing.assert_array_equal(xr.open_zarr(path, consolidated=False).completed_at.values, before)
    with pytest.raises(StoreFormatError, match=has):
        open_results(path)
    assert main(["status", str(path)]) == 3
    err_text = capsys.readouterr().err
    assert has in err_text and "formats 2 and 3" in err_text


#: the unit symbols geosweep's systems use (all UDUNITS symbols)
_UNIT_SYMBOLS = {"J", "s", "m", "kg", "N", "rad", "degree"}


def test_store_units_and_global_attrs_follow_cf(tmp_path):
    """Every example's template: CF global attrs, units UDUNITS-parsable (known symbols with
    integer powers, one optional "/"), dimensionless as "1", no free-text quantity words."""
    import glob
    import re

    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.store import template

    factor = r"[A-Za-z]+(\^-?\d+)?"
    grammar = re.compile(rf"^(1|{factor}( {factor})*)( / {factor}( {factor})*)?$")
    for path in sorted(glob.glob(str(Path(__file__).parent.parent / "sweeps" / "examples" / "*.toml"))):
        plan = make_plan(path)
        ds, _ = template(plan)
        assert ds.attrs["Conventions"].startswith("CF-") and "created by geosweep" in ds.attrs["history"]
        for name, var in list(ds.data_vars.items()) + list(ds.coords.items()):
            units = var.attrs.get("units")
            if units is None or "since" in units:
                continue
            assert grammar.match(units), (path, name, units)
            symbols = set(re.findall(r"[A-Za-z]+", units))
            assert symbols <= _UNIT_SYMBOLS, (path, name, units)


def test_run_records_keep_the_consolidated_metadata_current(tmp_path):
    """A run's record is one write of the root's metadata that keeps its consolidated metadata (no run
    changes an array's metadata): it stays what ``zarr.consolidate_metadata`` writes and the store opens
    consolidated. A root written meanwhile without consolidated metadata is consolidated again."""
    import zarr

    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.store import StoreRef, ensure_store

    def consolidated_as_zarr_writes_it(path: Path) -> None:
        root = json.loads((path / "zarr.json").read_text())
        kept = root["consolidated_metadata"]
        zarr.consolidate_metadata(str(path))
        assert json.loads((path / "zarr.json").read_text())["consolidated_metadata"] == kept
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no fallback to each array's own metadata
            assert {"status", "done", "checksum"} <= set(xr.open_zarr(path, consolidated=True).data_vars)

    spec = dict(SPEC, name="records", h=[0.01], params={"level": 1, "omega": [0.0]})
    fresh = tmp_path / "fresh.zarr"
    assert run_sweep(spec, fresh, serial=True).ran == 2
    assert [r["cells_run"] for r in json.loads((fresh / "zarr.json").read_text())["attributes"]["runs"]] == [2]
    consolidated_as_zarr_writes_it(fresh)

    dropped = tmp_path / "dropped.zarr"
    ensure_store(make_plan(spec), StoreRef.of(dropped))
    zarr.open_group(dropped, mode="r+", use_consolidated=False).attrs["note"] = "no consolidated metadata"
    assert "consolidated_metadata" not in json.loads((dropped / "zarr.json").read_text())
    assert run_sweep(spec, dropped, serial=True).ran == 2
    consolidated_as_zarr_writes_it(dropped)
