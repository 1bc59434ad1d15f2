"""A system defined in a few lines of user code is swept like a built-in one; the plan is built once."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import xarray as xr
from distributed import Client, LocalCluster

from geosweep.kernels.registry import SYSTEMS, register_system
from geosweep.kernels.s2.integrate import _integrate
from geosweep.kernels.s2.model import gradient_fd_error
from geosweep.sweeps.engine import run_sweep
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

#: every call of the counted builder (in the process that makes it)
BUILDS: list[dict] = []


def counted_rotor_ring(**kwargs):
    BUILDS.append(kwargs)
    return rotor_ring(**kwargs)


register_system(dataclasses.replace(SYSTEMS["rotor_ring"], name="rotor_ring_counted", build=counted_rotor_ring))
COUNTED_SPEC = dict(SPEC, name="rotors-counted", system="rotor_ring_counted", T=2.0)


def _builds_here() -> int:
    from tests import test_custom_system

    return len(test_custom_system.BUILDS)


def test_user_potential_gradient_and_invariants():
    s = rotor_ring()
    q, w = s.initial_state()
    assert gradient_fd_error(s, q + 0.01) < 1e-7
    _, g = s.potential_and_gradient(q)
    assert np.abs(np.cross(q, g).sum(axis=0)).max() < 1e-14  # rotation invariance
    tr = _integrate(s, "explicit_vi", 0.01, 2000, 10)
    assert tr.summary["max_momentum_error"] < 1e-13 * (1 + np.linalg.norm(tr.momentum[0]))
    assert tr.summary["max_unit_error"] < 1e-14 * (1 + np.sqrt(2000))
    coarse = _integrate(s, "explicit_vi", 0.02, 1000, 10).summary["max_abs_dE"]
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


@pytest.mark.parametrize("processes", [False, True], ids=["threads", "processes"])
def test_plan_is_built_once_and_workers_build_nothing(tmp_path, processes):
    """One build per parameter combination, in the driver; workers get the models with the plan."""
    BUILDS.clear()
    with (
        LocalCluster(n_workers=2, threads_per_worker=1, processes=processes, dashboard_address=None) as lc,
        Client(lc) as client,
    ):
        result = run_sweep(COUNTED_SPEC, tmp_path / "counted.zarr", client=client, slice_seconds=0.01)
        on_workers = client.run(_builds_here)
    # several slices, each with its models (short cells on worker processes: a shard is cut only so far
    # that every worker has a slice, worklist.shard_slices)
    assert result.complete and result.ran == 8 and result.slices >= (2 if processes else 4)
    assert sorted(b["k"] for b in BUILDS) == [0.5, 2.0]  # k = 0.5 and 2.0, each built once
    if processes:
        assert set(on_workers.values()) == {0}
    # the CLI (serial) plans once too
    from geosweep.flows.cli import main

    spec = tmp_path / "counted.toml"
    spec.write_text(
        'name = "rotors-cli"\nsystem = "rotor_ring_counted"\nintegrators = ["explicit_vi"]\nh = [0.02]\n'
        "T = 0.2\ndt_out = 0.1\n[params]\nk = [0.5, 1.0, 2.0]\n"
    )
    BUILDS.clear()
    assert main(["run", str(spec), "--store", str(tmp_path / "cli.zarr"), "--serial"]) == 0
    assert len(BUILDS) == 3
