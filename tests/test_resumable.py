"""The shared driver is resumable: a trajectory run in k segments — each restored from a
checkpoint into fresh buffers — is bitwise the same as one uninterrupted run, for every family,
fixed step and adaptive, with segment boundaries inside output intervals and on failing steps."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain import family as chain_family
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.s2 import family as s2_family
from geosweep.kernels.status import Status
from geosweep.kernels.systems.catalogue import double_spherical_pendulum, spring_pendula
from geosweep.kernels.systems.lj_sphere import lj_sphere
from geosweep.kernels.torus import family as torus_family
from geosweep.kernels.torus.model import torus

_ARRAYS = ("S", "acc", "info", "out", "env", "snaps")


def _segmented(traj: Trajectory, segment: int) -> tuple[Trajectory, int]:
    """Advance ``segment`` accepted steps at a time, restoring from a checkpoint each time."""
    stepper = traj.stepper
    n = 0
    while not traj.finished:
        traj.advance(segment)
        traj = Trajectory.restore(stepper, traj.checkpoint())
        n += 1
    return traj, n


def _assert_same(a: Trajectory, b: Trajectory) -> None:
    for name in _ARRAYS:
        x, y = getattr(a, name), getattr(b, name)
        assert x.dtype == y.dtype and x.shape == y.shape, name
        assert np.array_equal(x.view(np.uint8), y.view(np.uint8)), f"{name} differs bitwise"


def _check(family, model, integrator, request, options, segment, min_segments=3):
    whole = family.start(model, integrator, request, options)
    whole.advance()
    parts, n = _segmented(family.start(model, integrator, request, options), segment)
    assert n >= min_segments
    _assert_same(whole, parts)
    a = family.run(model, integrator, request, options).values
    b = family.collect(model, integrator, parts, options).values
    for name, v in a.items():
        if name == "steps_per_second":
            continue
        assert np.array_equal(np.asarray(v), np.asarray(b[name]), equal_nan=True), name
    return whole


# ---- (S²)ⁿ -------------------------------------------------------------------------------
@pytest.mark.parametrize("integrator", ["explicit_vi", "rk4_proj"])
def test_s2_fixed_step_segments(integrator):
    model = spring_pendula()
    req = RunRequest(T=2.0, dt_out=0.05, h=0.005, snapshot_every=4)  # stride 10; segments of 7 steps
    t = _check(s2_family, model, integrator, req, {}, 7)
    assert t.status == Status.OK and t.steps == 400


def test_s2_implicit_vi_segments():
    model = double_spherical_pendulum()
    req = RunRequest(T=1.0, dt_out=0.1, h=0.01)
    t = _check(s2_family, model, "implicit_vi", req, {"tol": 1e-14, "maxit": 50}, 13)
    assert t.status == Status.OK and t.info[8] > 0  # solver iterations counted across segments


def test_s2_segment_boundary_on_the_failing_step():
    """h = 0.1: steps 1, 2 succeed and step 3 fails (A9); segments of one step put a boundary
    right before the failing step."""
    model = lj_sphere(level=2)
    req = RunRequest(T=5.0, dt_out=0.1, h=0.1)
    t = _check(s2_family, model, "explicit_vi", req, {"blowup": 0.0}, 1, min_segments=2)
    assert t.status == Status.DOMAIN and t.steps == int(t.info[3]) - 1


def test_s2_energy_guard_keeps_summaries_finite():
    """lj_sphere with rk2 at h = 0.01 used to run to inf (stored mean|ΔE| ≈ 2e280); the
    driver's guard stops it with energy_blowup and every stored summary stays finite."""
    model = lj_sphere(level=3)
    req = RunRequest(T=50.0, dt_out=0.5, h=0.01)
    res = s2_family.run(model, "rk2", req, {"blowup": 0.5})
    v = res.values
    assert res.status == int(Status.ENERGY_BLOWUP)
    assert 0 < v["fail_step"] < 1860 and v["fail_step"] == v["steps"]
    for name in (
        "max_abs_energy_error",
        "mean_abs_energy_error",
        "max_rel_energy_error",
        "max_momentum_error",
        "max_unit_error",
        "energy_drift_slope",
    ):
        assert np.isfinite(v[name]), name
    assert v["max_rel_energy_error"] <= 10.0  # stopped at the first step past 0.5·|E0|, not at 1e280
    assert np.isfinite(v["final_state"]).all()


# ---- SE(3)ⁿ ------------------------------------------------------------------------------
def test_torus_segments_with_contacts_and_verlet_list():
    """A small ring with the Verlet list on hits the wall; segments of 37 steps (inside output
    intervals of 20 steps) rebuild the list from the stored reference positions."""
    model = torus(N_p=24, g0=0.05, neighbour_list="on")
    assert model.use_nbl
    req = RunRequest(T=1.2, dt_out=0.02, h=1e-3, snapshot_every=10)
    t = _check(torus_family, model, "v2_newmark", req, {}, 37)
    assert t.status == Status.OK and t.info[10] > 0  # the list was rebuilt during the run
    assert np.isfinite(t.reduced("n_contact_wall", "first"))  # it did touch the wall


@pytest.mark.parametrize("segment", [1, 5])
def test_torus_segment_boundary_on_energy_blowup(segment):
    model = torus(N_p=80)
    req = RunRequest(T=3.0, dt_out=0.01, h=1e-2)
    t = _check(torus_family, model, "v2_newmark", req, {"blowup": 0.5}, segment, min_segments=2)
    assert t.status == Status.ENERGY_BLOWUP


# ---- (TS²)ᴺ, Lie group methods -------------------------------------------------------------
@pytest.mark.parametrize("integrator", ["rkmk4", "cf4", "rk4_ambient"])
def test_chain_fixed_step_segments(integrator):
    model = build_chain(5, ic="twisted")
    req = RunRequest(T=1.0, dt_out=0.05, h=0.01, snapshot_every=5)
    t = _check(chain_family, model, integrator, req, {}, 7)
    assert t.status == Status.OK


@pytest.mark.parametrize("integrator", ["rkmk45", "dopri5_ambient"])
def test_chain_adaptive_segments(integrator):
    """Adaptive RKMK(5,4) with dense output: the controller state and the first-same-as-last
    stage survive the checkpoint; rejected steps included."""
    model = build_chain(2)
    req = RunRequest(T=3.0, dt_out=0.1, tol=1e-6, snapshot_every=10)
    t = _check(chain_family, model, integrator, req, {}, 5)
    assert t.status == Status.OK and t.info[5] > 0  # some trial steps were rejected


def test_chain_failing_step_segments():
    model = build_chain(5, ic="twisted")
    req = RunRequest(T=50.0, dt_out=1.0, h=1.0)
    t = _check(chain_family, model, "rk4_ambient", req, {"blowup": 0.0}, 1, min_segments=2)
    assert t.status == Status.NONFINITE


# ---- envelopes and time-based segments -----------------------------------------------------
def test_envelope_is_the_min_max_over_every_step_of_the_interval():
    """With samples every 10 steps, the envelope of each interval equals the min/max of the
    every-step samples of a stride-1 run over (t_{s−1}, t_s] — bitwise."""
    model = spring_pendula()
    fine = s2_family.start(model, "rk2", RunRequest(T=2.0, dt_out=0.005, h=0.005), {})
    coarse = s2_family.start(model, "rk2", RunRequest(T=2.0, dt_out=0.05, h=0.005), {})
    fine.advance()
    coarse.advance()
    dE = fine.samples("energy") - fine.energy_summaries()["E0"]
    u = fine.samples("unit_error")
    lo, hi = coarse.envelope("energy")
    u_hi = coarse.envelope("unit_error")
    assert lo[0] == hi[0] == 0.0
    for s in range(1, coarse.n_out + 1):
        window = slice(10 * (s - 1) + 1, 10 * s + 1)
        assert lo[s] == dE[window].min() and hi[s] == dE[window].max()
        assert u_hi[s] == u[window].max()
    assert np.all(lo <= coarse.samples("energy") - coarse.energy_summaries()["E0"])
    assert (hi - lo)[1:].max() > 0.0  # the envelope is wider than the point samples


def test_adaptive_envelope_brackets_the_samples():
    model = build_chain(2)
    t = chain_family.start(model, "rkmk45", RunRequest(T=3.0, dt_out=0.1, tol=1e-6), {})
    t.advance()
    lo, hi = t.envelope("energy")
    dE = t.samples("energy") - t.energy_summaries()["E0"]
    assert np.all(lo <= dE) and np.all(dE <= hi) and np.all(np.isfinite(lo))


def test_segments_by_time_are_bitwise_identical():
    model = build_chain(3, ic="twisted")
    req = RunRequest(T=2.0, dt_out=0.1, tol=1e-7)
    whole = chain_family.start(model, "rkmk45", req, {})
    whole.advance()
    traj = chain_family.start(model, "rkmk45", req, {})
    for until in (0.35, 0.7, 1.2, 1.95):
        traj.advance(until=until)
        assert until <= traj.time < until + 0.5 and 0.0 < traj.progress < 1.0
        traj = Trajectory.restore(traj.stepper, traj.checkpoint())
    traj.advance()
    assert traj.progress == 1.0
    _assert_same(whole, traj)
