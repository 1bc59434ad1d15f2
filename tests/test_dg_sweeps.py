"""The dg family through the sweep engine (real LocalCluster, real zarr) and bitwise resumable."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr
from distributed import Client, LocalCluster

from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.dg import family as F
from geosweep.kernels.dg import systems as S
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status
from geosweep.sweeps.engine import run_sweep

GEARBOX = {
    "name": "gearbox-sweep",
    "system": "gearbox",
    "integrators": ["dg_gonzalez", "dg_itoh_abe", "implicit_midpoint", "rk4_skew", "dopri5_skew"],
    "h": [0.1, 0.05],
    "tol": [1e-7],
    "T": 100.0,
    "dt_out": 1.0,
    "checkpoint_every": 40.0,
    "params": {"form": ["reduced", "canonical"]},
}


def test_gearbox_sweep_forms_and_methods_on_a_local_cluster(tmp_path):
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as lc, Client(lc) as client:
        result = run_sweep(GEARBOX, tmp_path / "gear.zarr", client=client, slice_seconds=0.05)
    assert result.complete and result.ran == (4 * 2 + 1) * 2
    ds = xr.open_zarr(tmp_path / "gear.zarr")
    assert ds.energy.dims == ("integrator", "h", "tol", "form", "time")
    # one labelled layout for both forms: (q, ρ) of the reduced form and (q, p) of the canonical one
    assert list(ds.state.values) == ["q1", "q2", "q3", "rho1", "rho2", "p1", "p2", "p3"]
    ok = ds.status.where(ds.status >= 0)
    assert float(ok.max()) == 0.0
    dg = ds.sel(integrator=["dg_gonzalez", "dg_itoh_abe"])
    assert float(dg.max_rel_energy_error.max()) < 1e-13  # 004 Fig. 4: both forms at round-off
    red, can = dg.sel(form="reduced"), dg.sel(form="canonical")
    assert float(red.max_constraint_error.max()) < 1e-15  # GONZALEZ-R: exact constraint
    assert float(can.max_constraint_error.min()) > 1e-5  # GONZALEZ-F: approximate
    # the baselines drift in energy
    assert float(ds.max_rel_energy_error.sel(integrator="implicit_midpoint").min()) > 1e-6
    rk4 = ds.max_rel_energy_error.sel(integrator="rk4_skew")
    assert float(rk4.min()) > 1e-9 and float((rk4.sel(h=0.1) / rk4.sel(h=0.05)).min()) > 10  # order 4
    # solver statistics per cell
    its = ds.newton_iterations_mean.sel(integrator="dg_gonzalez")
    assert float(its.min()) >= 2 and float(its.max()) <= 12
    assert int(ds.nonconverged_steps.where(ds.status >= 0).max()) == 0
    assert float(ds.newton_iterations_mean.sel(integrator="rk4_skew").max()) == 0.0
    assert bool(np.isnan(ds.max_casimir_error.sel(integrator="dg_gonzalez")).all())


_ARRAYS = ("S", "acc", "info", "out", "env", "snaps")


@pytest.mark.parametrize(
    "name, request_",
    [
        ("dg_gonzalez", RunRequest(T=3.0, dt_out=0.25, h=0.01, snapshot_every=2)),
        ("dg_avf", RunRequest(T=3.0, dt_out=0.25, h=0.01)),
        ("dopri5_skew", RunRequest(T=3.0, dt_out=0.25, tol=1e-8, snapshot_every=3)),
    ],
    ids=["gonzalez", "avf", "dopri5"],
)
def test_bitwise_resumable_across_checkpoints(name, request_):
    model = S.quartic()
    whole = F.start(model, name, request_, {})
    whole.advance()
    traj = F.start(model, name, request_, {})
    segments = 0
    while not traj.finished:
        traj.advance(37 if request_.h else 11)
        traj = Trajectory.restore(traj.stepper, traj.checkpoint())
        segments += 1
    assert segments >= 3 and traj.status == Status.OK
    for arr in _ARRAYS:
        a, b = getattr(whole, arr), getattr(traj, arr)
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), arr
    a = F.collect(model, name, whole).values
    b = F.collect(model, name, traj).values
    for key, v in a.items():
        assert np.array_equal(np.asarray(v), np.asarray(b[key]), equal_nan=True), key


def test_a_nonconverged_run_resumes_to_the_same_failure():
    model = S.quartic()
    req = RunRequest(T=1.0, dt_out=0.25, h=0.01)
    whole = F.start(model, "dg_gonzalez", req, {"maxit": 2})
    whole.advance()
    assert whole.status == Status.NONCONVERGED
    traj = F.start(model, "dg_gonzalez", req, {"maxit": 2})
    traj.advance(0)
    traj = Trajectory.restore(traj.stepper, traj.checkpoint())
    traj.advance()
    assert np.array_equal(whole.acc, traj.acc, equal_nan=True) and np.array_equal(whole.info, traj.info)
