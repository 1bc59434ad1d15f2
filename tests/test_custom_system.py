"""A system defined in a few lines of user code is swept like a built-in one."""

from __future__ import annotations

import numpy as np
import xarray as xr
from distributed import Client, LocalCluster

from kernels.s2 import integrate
from kernels.s2.model import gradient_fd_error
from sweeps.engine import run_sweep
from tests.custom_rotors import rotor_ring

SPEC = {
    "name": "rotors",
    "system": "rotor_ring",
    "integrators": ["explicit_vi", "rk4"],
    "h": [0.02, 0.01],
    "T": 20.0,
    "dt_out": 0.1,
    "params": {"k": [0.5, 2.0]},
}


def test_user_potential_gradient_and_invariants():
    s = rotor_ring()
    q, w = s.initial_state()
    assert gradient_fd_error(s, q + 0.01) < 1e-7
    _, g = s.potential_and_gradient(q)
    assert np.abs(np.cross(q, g).sum(axis=0)).max() < 1e-14  # rotation invariance
    tr = integrate(s, "explicit_vi", 0.01, 2000, 10)
    assert tr.summary["max_momentum_error"] < 1e-13 * (1 + np.linalg.norm(tr.momentum[0]))
    assert tr.summary["max_unit_error"] < 1e-14 * (1 + np.sqrt(2000))
    coarse = integrate(s, "explicit_vi", 0.02, 1000, 10).summary["max_abs_dE"]
    assert 3.5 < coarse / tr.summary["max_abs_dE"] < 4.5  # second order


def test_user_system_sweeps_on_a_local_cluster(tmp_path):
    with LocalCluster(n_workers=2, threads_per_worker=1, dashboard_address=None) as lc, Client(lc) as client:
        result = run_sweep(SPEC, tmp_path / "rotors.zarr", client=client, slice_seconds=0.05)
    assert result.complete and result.ran == 8
    ds = xr.open_zarr(tmp_path / "rotors.zarr")
    assert ds.attrs["system"] == "rotor_ring" and list(ds.k.values) == [0.5, 2.0]
    vi = ds.max_momentum_error.sel(integrator="explicit_vi")
    assert float(vi.max()) < 1e-12
    # the VI keeps |q| = 1 at round-off; RK4 does not
    assert float(ds.max_unit_error.sel(integrator="explicit_vi").max()) < 1e-13
    assert float(ds.max_unit_error.sel(integrator="rk4", h=0.02).min()) > 1e-10
