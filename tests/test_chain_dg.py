"""Discrete gradients (paper 004) side by side with the Lie group methods on pendulum_chain (ts2):
one store, the chain's names and shapes (geosweep.kernels.chain.dg_bridge)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from geosweep.kernels.chain import family as F
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.spec import SpecError, load_spec

SPEC = {
    "name": "chain-dg",
    "system": "pendulum_chain",
    "integrators": ["rkmk4", "dg_gonzalez", "rkmk45"],
    "h": [0.01, 0.005],
    "tol": [1e-8],
    "T": 0.5,
    "dt_out": 0.1,
    "params": {"N": [3, 20], "ic": "twisted"},
}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    path = tmp_path_factory.mktemp("chain_dg") / "chain_dg.zarr"
    result = run_sweep(SPEC, path, serial=True)
    assert result.complete and result.failed_cells == 0
    return xr.open_zarr(path)


def test_dg_cells_fill_the_ts2_store(store):
    dg = store.sel(integrator="dg_gonzalez", tol=1e-8)
    assert int(dg.status.max()) == int(Status.OK) == int(dg.status.min())
    assert (dg.steps.values == np.array([[50, 50], [100, 100]])).all()  # (h, N): T/h steps
    assert np.isfinite(dg.energy).all() and np.isfinite(dg.J).all() and np.isfinite(dg.unit_error).all()
    assert list(store.state.values) == list(F.STATE_LABELS)
    for N in (3, 20):  # (q, ω) per link, NaN padding past N
        fs = dg.final_state.sel(N=N).values  # (h, body, state)
        assert np.isfinite(fs[:, :N]).all() and np.isnan(fs[:, N:]).all()
        assert np.abs(np.linalg.norm(fs[:, :N, :3], axis=-1) - 1.0).max() < 1e-13
        assert np.abs(np.einsum("hbi,hbi->hb", fs[:, :N, :3], fs[:, :N, 3:])).max() < 1e-12
    # the dg diagnostics: Newton iterations, Casimirs; NaN / 0 for the Lie group methods
    assert 2.0 <= float(dg.newton_iterations_mean.min()) and float(dg.newton_iterations_mean.max()) <= 12.0
    assert int(dg.solver_iterations_max.max()) <= 15
    assert float(dg.max_casimir_error.max()) < 1e-12
    lie = store.sel(integrator="rkmk4", tol=1e-8)
    assert bool(np.isnan(lie.max_casimir_error).all()) and float(lie.newton_iterations_mean.max()) == 0.0
    assert float(store.newton_iterations_mean.sel(integrator="rkmk45", h=0.01).max()) == 0.0


def test_dg_gonzalez_energy_constraints_and_agreement_with_rkmk4(store):
    dg = store.sel(integrator="dg_gonzalez", tol=1e-8)
    lie = store.sel(integrator="rkmk4", tol=1e-8)
    # same chain, same energy: E0 of the (q, π) form equals the chain's E0
    assert float(abs(dg.E0 - lie.E0).max() / abs(lie.E0).max()) < 1e-13
    assert float(dg.max_rel_energy_error.max()) <= 1e-12  # 004: energy to round-off
    assert float(lie.max_rel_energy_error.min()) > 20 * float(dg.max_rel_energy_error.max())  # RKMK4 does not
    assert float(dg.max_unit_error.max()) < 1e-13 and float(dg.max_tangency_error.max()) < 1e-12
    # trajectories agree to the methods' accuracy: dg second order against RKMK4 at h = 0.005
    ref = lie.final_state.sel(h=0.005)
    for N in (3, 20):
        err = [float(np.abs(dg.final_state.sel(h=h, N=N) - ref.sel(N=N)).max()) for h in (0.01, 0.005)]
        assert err[0] < 0.05, (N, err)
        assert 3.5 < err[0] / err[1] < 4.5, (N, err)  # order 2 (RKMK4's own error ~1e-8 is far below)
    # the adaptive RKMK(5,4) at tol 1e-8 sits on the same trajectory
    ad = store.final_state.sel(integrator="rkmk45", h=0.01, tol=1e-8)
    assert float(np.abs(ad - ref).max()) < 1e-5


def test_chain_dg_cell_resumes_bitwise():
    model = build_chain(4, ic="twisted")
    req = RunRequest(T=0.4, dt_out=0.1, h=0.01)
    whole = F.start(model, "dg_avf", req, {"quad_points": 4})
    whole.advance()
    part = F.start(model, "dg_avf", req, {"quad_points": 4})
    part.advance(steps=17)
    part = Trajectory.restore(part.stepper, part.checkpoint())
    part.advance()
    for name in ("S", "out", "env", "acc", "info", "snaps"):
        assert np.array_equal(getattr(whole, name), getattr(part, name), equal_nan=True), name
    a = F.collect(model, "dg_avf", whole).values
    assert a["final_state"].shape == (4, 6) and a["snapshot_state"].shape == (2, 4, 6)


@pytest.mark.parametrize("name", ["dg_itoh_abe", "implicit_midpoint"])
def test_other_dg_methods_run_on_the_chain(name):
    model = build_chain(3, ic="twisted")
    v = F.run(model, name, RunRequest(T=0.2, dt_out=0.1, h=0.01), {}).values
    assert np.isfinite(v["final_state"]).all() and float(v["max_unit_error"]) < 1e-13
    if name == "dg_itoh_abe":
        assert float(v["max_rel_energy_error"]) < 1e-12
    else:  # implicit midpoint: H is not quadratic, the energy is not kept
        assert float(v["max_rel_energy_error"]) > 1e-9


def test_dg_on_a_long_chain_is_refused_with_a_reason():
    with pytest.raises(SpecError, match="N ≤ 60"):
        spec = {k: v for k, v in SPEC.items() if k != "tol"}
        load_spec({**spec, "integrators": ["dg_gonzalez"], "params": {"N": 61}})


def test_the_bridged_names_are_the_dg_integrators_that_serve_ts2():
    from geosweep.kernels.dg import family as DG

    assert {i.name for i in DG.INTEGRATORS if i.serves("ts2")} == set(F.DG_ON_CHAIN)
