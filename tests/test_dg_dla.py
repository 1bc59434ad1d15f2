"""The discrete Lagrange–d'Alembert comparison methods of paper 004 (SI-DLA, I-DLA; geosweep.kernels.dg.dla)
on the quartic system (§4.1) and the gearbox (§4.4): order 2, constraint at round-off, energy not kept."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.dg import dla
from geosweep.kernels.dg import family as F
from geosweep.kernels.dg.steppers import make_stepper
from geosweep.kernels.dg.systems import gearbox, quartic
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status
from geosweep.sweeps.engine import run_sweep
from geosweep.sweeps.spec import SpecError, load_spec

DLA = ("si_dla", "i_dla")
SYSTEMS = {"quartic": lambda: quartic(), "gearbox": lambda: gearbox("reduced")}


def _final(system, method: str, h: float, T: float) -> np.ndarray:
    """x(T) in the system's own coordinates."""
    tr = Trajectory(dla.make_stepper(system, method), dla.initial_state(system), T=T, dt_out=T, h=h)
    assert tr.advance() == Status.OK
    return system.info["lagrangian"].from_canonical(tr.S)


@pytest.mark.parametrize("name", sorted(SYSTEMS))
def test_second_order_towards_the_discrete_gradient_solution(name):
    """Same ODE as the reduced form: x(2) of SI-DLA and I-DLA converge at order 2 to Gonzalez at h = 5e-4."""
    system = SYSTEMS[name]()
    ref = Trajectory(make_stepper(system, "dg_gonzalez"), system.x0, T=2.0, dt_out=2.0, h=5e-4)
    ref.advance()
    for method in DLA:
        err = [np.abs(_final(system, method, h, 2.0) - ref.S).max() for h in (0.02, 0.01)]
        assert err[0] < 1e-3, (method, err)
        assert 3.6 < err[0] / err[1] < 4.4, (method, err)  # measured 3.99–4.01


@pytest.mark.parametrize("method", DLA)
def test_constraints_at_round_off(method):
    """Node constraint |A(q_k)p_k| (stored) and the discrete one |A(q̄)(q_{k+1} − q_k)/h| at round-off."""
    system = gearbox("canonical")
    h = 0.05
    tr = Trajectory(dla.make_stepper(system, method), dla.initial_state(system), T=20.0, dt_out=h, h=h, snap_every=1)
    tr.advance()
    assert tr.reduced("constraint") < 1e-14
    z = tr.snaps.copy()  # (q, p) after every step
    z[:, 2] = np.unwrap(z[:, 2])  # q3 is kept in (−π, π]: the step's q̄ is on the unwrapped angle
    q0, q1 = z[:-1, :3], z[1:, :3]
    v = (q1 - q0) / h
    disc = v[:, 0] + np.sin(0.5 * (q0[:, 2] + q1[:, 2])) * v[:, 1]
    assert np.abs(disc).max() < 1e-13
    assert np.abs(v).max() > 0.1  # the motion is not trivial


@pytest.mark.parametrize("method", DLA)
def test_reversible(method):
    """Φ(q1, −p1) = (q0, −p0): the projected momentum makes the one-step map reversible."""
    system = quartic()
    st = dla.make_stepper(system, method)
    z0 = dla.initial_state(system)
    n = system.info["lagrangian"].n
    one = Trajectory(st, z0, T=0.1, dt_out=0.1, h=0.1)
    one.advance()
    back = Trajectory(st, np.concatenate([one.S[:n], -one.S[n:]]), T=0.1, dt_out=0.1, h=0.1)
    back.advance()
    assert np.abs(back.S - np.concatenate([z0[:n], -z0[n:]])).max() < 1e-13
    assert np.abs(one.S - z0).max() > 1e-2


def test_quartic_energy_error_is_order_two_not_round_off():
    """004 Fig. 2: only the discrete gradients keep H; the DLA energy error is O(h²) (T = 100)."""
    system = quartic()
    req = {h: RunRequest(T=100.0, dt_out=1.0, h=h) for h in (0.02, 0.01)}
    for method in DLA:
        e = {h: float(F.run(system, method, r, {}).values["max_rel_energy_error"]) for h, r in req.items()}
        assert 1e-6 < e[0.01] < 1e-3, (method, e)  # measured 3.0e-5 (SI), 2.1e-5 (I)
        assert 3.0 < e[0.02] / e[0.01] < 5.5, (method, e)  # measured 4.0, 4.2
    v = F.run(system, "dg_gonzalez", req[0.01], {}).values
    assert float(v["max_rel_energy_error"]) < 1e-13


def test_gearbox_energy_grows_exponentially_constraint_stays():
    """004 Fig. 4 (h = 0.1): on a non-periodic gearbox start (seed 2) the SI-DLA energy error grows
    like exp(λt) — the ratio over successive 5000-time intervals stays above 2 (linear growth gives
    1.33–1.5, quadratic 1.8) — while the constraint stays at round-off."""
    v = F.run(gearbox("canonical", seed=2), "si_dla", RunRequest(T=20000.0, dt_out=5000.0, h=0.1), {"blowup": 0.0})
    assert v.status == Status.OK
    dE = np.abs(v.values["rel_energy_error"])  # t = 0, 5000, …, 20000; measured 0.13, 0.38, 0.87, 1.93
    assert dE[-1] > 1.0
    assert dE[3] / dE[2] > 2.0 and dE[4] / dE[3] > 2.0, dE
    assert float(v.values["max_constraint_error"]) < 1e-13


@pytest.mark.slow
def test_gearbox_seed0_energy_stays_bounded():
    """Seed 0 (quasi-periodic): both DLA energy errors stay ~1e-3 over t = 50 000 (measured ≤ 3e-3)."""
    for method in DLA:
        v = F.run(gearbox("canonical"), method, RunRequest(T=50000.0, dt_out=1000.0, h=0.1), {}).values
        assert 1e-5 < float(v["max_rel_energy_error"]) < 1e-2
        assert float(v["max_constraint_error"]) < 1e-14


def test_dla_in_a_gearbox_sweep(tmp_path):
    spec = {
        "name": "gear-dla",
        "system": "gearbox",
        "integrators": ["si_dla", "i_dla", "dg_gonzalez"],
        "h": [0.1],
        "T": 50.0,
        "dt_out": 1.0,
        "params": {"form": ["reduced", "canonical"]},
    }
    result = run_sweep(spec, tmp_path / "dla.zarr", serial=True)
    assert result.complete and result.failed_cells == 0
    ds = xr.open_zarr(tmp_path / "dla.zarr").isel(h=0)
    dla_ = ds.sel(integrator=list(DLA))
    assert float(dla_.max_constraint_error.max()) < 1e-14
    assert float(dla_.max_rel_energy_error.min()) > 1e-6
    assert float(ds.max_rel_energy_error.sel(integrator="dg_gonzalez").max()) < 1e-13
    # one trajectory, stored in each form's coordinates: the configurations agree
    q = dla_.final_state.isel(body=0, state=slice(0, 3))
    assert float(abs(q.sel(form="reduced") - q.sel(form="canonical")).max()) < 1e-12
    assert float(dla_.newton_iterations_mean.max()) <= 4.0
    with pytest.raises(SpecError, match="Lagrangian form"):
        load_spec(dict(spec, system="chaplygin_sleigh", params={}))
