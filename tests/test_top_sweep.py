"""The heavy top through the sweep engine on a real LocalCluster and a real zarr store."""

from __future__ import annotations

import numpy as np
import xarray as xr
from distributed import Client, LocalCluster

from geosweep.kernels.registry import RunRequest
from geosweep.kernels.top.family import STATE_LABELS, run
from geosweep.kernels.top.model import heavy_top
from geosweep.sweeps.engine import run_sweep

SPEC = {
    "name": "top-sweep",
    "system": "heavy_top",
    "integrators": ["slgi_half", "slgi0", "lp_rkmk4", "lp_cf4", "lp_rkmk45"],
    "h": [2.5e-4, 1.25e-4],
    "tol": [1e-8],
    "T": 0.2,
    "dt_out": 0.01,
    "params": {"Omega2": [150.0, 100.0]},
    "integrator_options": {
        name: {"global_error": True, "ref_tol": 1e-12} for name in ("slgi_half", "slgi0", "lp_rkmk4", "lp_cf4")
    },
}


def test_heavy_top_sweep_on_a_local_cluster(tmp_path):
    path = tmp_path / "top.zarr"
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as lc, Client(lc) as client:
        result = run_sweep(SPEC, path, client=client, slice_seconds=0.05)
    assert result.complete and result.ran == 4 * 2 * 2 + 1 * 2  # fixed at each h, rkmk45 at its tol
    ds = xr.open_zarr(path)
    assert ds.energy.dims == ("integrator", "h", "tol", "Omega2", "time")
    assert list(ds.state.values) == list(STATE_LABELS)
    assert list(ds.integrator_order.values) == [2, 1, 4, 4, 5]
    ran = ds.status.where(ds.status >= 0)
    assert float(ran.max()) == 0.0
    fixed = ds.sel(tol=1e-8)
    # global-error orders at N = 800 → 1600 on [0, 0.2] (asymptotic there, spec D4)
    g = fixed.global_error
    order = np.log2(g.sel(h=2.5e-4) / g.sel(h=1.25e-4))
    assert (abs(order.sel(integrator="slgi_half") - 2) < 0.3).all()
    assert (abs(order.sel(integrator="slgi0") - 1) < 0.3).all()
    assert (abs(order.sel(integrator="lp_rkmk4") - 4) < 0.3).all()
    # invariants: SLGI keeps J3, S and QᵀQ = I; the Lie–Poisson methods keep the Casimirs
    slgi = fixed.sel(integrator=["slgi_half", "slgi0"])
    assert float(slgi.max_dJ3.max()) < 1e-11 and float(slgi.max_dS.max()) < 1e-11
    assert float(slgi.max_orth.max()) < 1e-13
    lpm = fixed.sel(integrator=["lp_rkmk4", "lp_cf4"])
    assert float(lpm.max_cas_gamma.max()) < 5e-13 and float(lpm.max_dJ3.max()) < 5e-13
    assert bool(lpm.final_state.sel(state="Q_11").isnull().all())
    adaptive = ds.sel(integrator="lp_rkmk45", h=2.5e-4)
    assert float(adaptive.max_cas_gamma.max()) < 5e-13
    # one stored cell equals a direct kernel run, bitwise
    direct = run(
        heavy_top(Omega2=100.0), "slgi_half", RunRequest(T=0.2, dt_out=0.01, h=1.25e-4), {"global_error": True}
    )
    cell = fixed.sel(integrator="slgi_half", h=1.25e-4, Omega2=100.0)
    assert np.array_equal(cell.energy.values, direct.values["energy"])
    assert np.array_equal(cell.final_state.values, direct.values["final_state"], equal_nan=True)
    e0 = ds.E0.sel(Omega2=150.0).where(ds.status.sel(Omega2=150.0) == 0).values  # not_applicable cells: NaN
    np.testing.assert_allclose(e0[np.isfinite(e0)], 5275.933796782547, rtol=1e-12)


QUAD = {
    "name": "quad-sweep",
    "system": "two_quadrotors",
    "integrators": ["quad_rkmk4", "quad_rk4_ambient", "quad_rkmk45"],
    "h": [0.005],
    "tol": [1e-8],
    "T": 1.0,
    "dt_out": 0.05,
    "params": {"attitude_mode": ["free_tumble", "code_const"]},
}


def test_quadrotor_sweep_stores_link_and_block_dims(tmp_path):
    path = tmp_path / "quad.zarr"
    result = run_sweep(QUAD, path, serial=True)
    assert result.complete and result.ran == 6
    ds = xr.open_zarr(path)
    assert ds.psi.dims == ("integrator", "h", "tol", "attitude_mode", "time", "link")
    assert ds.rot_mom.dims[-2:] == ("link", "component") and ds.global_error.dims[-1] == "block"
    assert list(ds.state.values[:3]) == ["y_x", "y_y", "y_z"] and ds.sizes["state"] == 42
    ok = ds.status.where(ds.status >= 0)
    assert float(ok.max()) == 0.0
    lie = ds.sel(integrator=["quad_rkmk4", "quad_rkmk45"])
    assert float(lie.max_unit_err.max()) < 1e-13 and float(lie.max_orth_err.max()) < 1e-13
    assert float(ds.max_tang_err.sel(integrator="quad_rk4_ambient").min()) > 1e-10
    # the closed loop does not depend on the attitude mode (D9): same load trajectory
    e = ds.e_y.sel(integrator="quad_rkmk4", h=0.005, tol=1e-8)
    np.testing.assert_array_equal(e.sel(attitude_mode="free_tumble").values, e.sel(attitude_mode="code_const").values)
    assert bool(ds.energy_error.isnull().all())  # no energy error for a controlled system
