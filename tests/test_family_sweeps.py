"""Torus (se3) and pendulum chain (ts2) sweeps through the engine and the store, with resume."""

from __future__ import annotations

import math

import numpy as np
import pytest
import xarray as xr
import zarr

from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.spec import SpecError, load_spec
from geosweep.sweeps.store import StoreRef, mark_for_rerun

TORUS = {
    "name": "torus-sweep",
    "system": "torus",
    "integrators": ["v2_exact", "v2_newmark", "v1"],
    "h": [2e-3, 1e-3],
    "T": 1.0,
    "dt_out": 0.01,
    "params": {"v0": [0.5, 1.0], "tilt": [0.0, math.pi / 6]},
}
CHAIN = {
    "name": "chain-sweep",
    "system": "pendulum_chain",
    "integrators": ["lie_euler_heun", "rkmk4", "cf4", "rk4_ambient", "rkmk45"],
    "h": [0.01, 0.005, 0.0025],
    "tol": [1e-6, 1e-8],
    "T": 1.0,
    "dt_out": 0.05,
    "params": {"N": [2, 10, 20]},
}


def _resume_check(spec, path, n_cells):
    first = run_sweep(spec, path, serial=True)
    assert first.complete and first.ran == n_cells, first
    g = zarr.open_group(str(path), mode="r+")
    done = np.asarray(g["done"][...])
    status = np.asarray(g["status"][...])
    runnable = np.argwhere(status >= 0)
    redo = [tuple(runnable[i]) for i in (0, len(runnable) // 2, len(runnable) - 1)]
    mark_for_rerun(StoreRef.of(path), redo)  # clears done and checksum: exactly these are recomputed
    stamps = xr.open_zarr(path).completed_at.values.copy()
    again = run_sweep(spec, path, serial=True)
    assert again.ran == 3 and again.skipped == n_cells - 3
    after = xr.open_zarr(path)
    now = after.completed_at.values
    changed = ~((now == stamps) | (np.isnat(now) & np.isnat(stamps)))
    assert changed.sum() == 3 and all(changed[c] for c in redo)
    assert (np.asarray(zarr.open_group(str(path))["done"][...]) == 1).all() and done.all()
    return after


def test_torus_sweep_map_h_v0_tilt(tmp_path):
    ds = _resume_check(TORUS, tmp_path / "torus.zarr", 24)
    assert ds.energy.dims == ("integrator", "h", "v0", "tilt", "time")
    assert list(ds.state.values) == [f"{v}_{c}" for v in ("x", "v", "alpha", "Omega") for c in "xyz"]
    assert list(ds.integrator_order.values) == [2, 2, 1] and not ds.integrator_adaptive.values.any()
    assert (ds.status == 0).all()
    # planar impacts stay planar; momenta P_y, P_z and L_x are conserved through the wall contact
    assert float(abs(ds.P.sel(component="y")).max()) < 1e-12
    assert float(abs(ds.P.sel(component="z")).max()) < 1e-12
    assert float(abs(ds.L.sel(component="x")).max()) < 1e-12
    # observed order of max|ΔE|/E0 through the impact (v0 = 1): 2 for (23)/(25), 1 for (27);
    # ±0.5 because a max-type metric at h = 2e-3 is pre-asymptotic (spec torus §5: 2.10)
    e = ds.max_rel_energy_error.sel(v0=1.0, tilt=0.0)
    order = np.log2(e.sel(h=2e-3) / e.sel(h=1e-3))
    assert abs(float(order.sel(integrator="v2_newmark")) - 2) < 0.5
    assert abs(float(order.sel(integrator="v2_exact")) - 2) < 0.5
    assert abs(float(order.sel(integrator="v1")) - 1) < 0.5
    # E0 = N_p m v0² / 2
    np.testing.assert_allclose(ds.E0.sel(v0=1.0).values, 40.0, rtol=1e-14)


def test_chain_sweep_n_methods_h_and_adaptive_tol(tmp_path):
    grid_cells = 5 * 3 * 2 * 3  # integrator × h × tol × N
    runnable = (4 * 3 + 1 * 2) * 3  # fixed methods at every h, rkmk45 at every tol
    ds = _resume_check(CHAIN, tmp_path / "chain.zarr", runnable)
    assert ds.status.size == grid_cells
    assert int((ds.status == -2).sum()) == grid_cells - runnable
    assert list(ds.integrator_adaptive.values) == [False, False, False, False, True]
    assert set(ds.integrator_family.values) == {"ts2"}
    assert list(ds.state.values) == ["q_x", "q_y", "q_z", "w_x", "w_y", "w_z"]
    ok = ds.where(ds.status == 0)
    lie = ok.max_unit_error.sel(integrator=["lie_euler_heun", "rkmk4", "cf4"]).isel(tol=0)
    assert float(lie.max()) < 1e-13
    assert float(ok.max_unit_error.sel(integrator="rk4_ambient").isel(tol=0).max()) > 1e-12
    ad = ok.max_rel_energy_error.sel(integrator="rkmk45").isel(h=0)
    assert float(ad.sel(tol=1e-8).max()) < float(ad.sel(tol=1e-6).max())
    # N = 2 cells are padded with NaN beyond their two links
    y = ds.final_state.sel(N=2, integrator="rkmk4").isel(h=0, tol=0)
    assert np.all(np.isfinite(y.isel(body=slice(0, 2)).values)) and np.all(np.isnan(y.isel(body=slice(2, None)).values))
    # RKMK4 is fourth order: h 0.01 → 0.005 shrinks its energy error by ~16
    r = ok.max_rel_energy_error.sel(integrator="rkmk4", N=2).isel(tol=0)
    assert 10 < float(r.sel(h=0.01) / r.sel(h=0.005)) < 24


def test_adaptive_and_fixed_axes_are_validated():
    with pytest.raises(SpecError, match="tol: needs at least one tolerance"):
        load_spec({k: v for k, v in CHAIN.items() if k != "tol"})
    with pytest.raises(SpecError, match="h: no fixed-step integrator"):
        load_spec(dict(CHAIN, integrators=["rkmk45"]))
    with pytest.raises(SpecError, match=r"tol\[0\]: must be > 0"):
        load_spec(dict(CHAIN, tol=[-1.0]))
    with pytest.raises(SpecError, match="integrators"):
        load_spec(dict(CHAIN, integrators=["rkmk4", "explicit_vi"]))


def test_variational_integrator_sweeps_on_the_chain(tmp_path):
    """The (S²)ⁿ implicit VI applies to the chain (coupled inertia) inside a ts2 sweep."""
    spec = {
        "name": "chain-vi",
        "system": "pendulum_chain",
        "integrators": ["implicit_vi", "rkmk4"],
        "h": [0.01, 0.005],
        "T": 10.0,
        "dt_out": 0.1,
        "params": {"N": [2, 5], "ic": "twisted"},
    }
    result = run_sweep(spec, tmp_path / "vi.zarr", serial=True)
    assert result.complete and result.failed_cells == 0
    ds = xr.open_zarr(tmp_path / "vi.zarr")
    vi, lie = ds.sel(integrator="implicit_vi"), ds.sel(integrator="rkmk4")
    J0 = abs(ds.J.isel(time=0)).max()
    assert float((vi.max_J_error / J0).max()) < 1e-9  # discrete momentum map conserved
    assert float((lie.max_J_error / J0).min()) > 1e-8  # RKMK does not conserve it
    assert float(vi.max_unit_error.max()) < 1e-13
    assert int(vi.rejected_steps.max()) == 0 and int(vi.steps.min()) == 1000
    assert 2 <= int(vi.solver_iterations_max.max()) <= 15  # spec: 6–8 mean, ≤ 13 max on chains
    assert int(lie.solver_iterations.max()) == 0


def test_adaptive_step_size_record_locates_the_sharp_peak(tmp_path):
    """E3 (spec pendulum_chain §6, N = 2, L = 1, tol = 1e-6): the step is smallest near t = 2.28."""
    spec = {
        "name": "chain-e3",
        "system": "pendulum_chain",
        "integrators": ["rkmk45"],
        "tol": [1e-6],
        "T": 3.0,
        "dt_out": 0.01,
        "params": {"N": 2},
    }
    run_sweep(spec, tmp_path / "e3.zarr", serial=True)
    cell = xr.open_zarr(tmp_path / "e3.zarr").isel(integrator=0, tol=0)
    h = cell.step_size.values
    assert int(cell.steps) == 117 and int(cell.rejected_steps) == 17  # spec table: 117 (17)
    assert np.all(np.isfinite(h)) and h.min() >= float(cell.h_min_used) * (1 - 1e-12)
    assert abs(float(cell.time[np.argmin(h)]) - 2.28) < 0.02
