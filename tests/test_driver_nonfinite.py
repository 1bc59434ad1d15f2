"""The shared driver rejects a non-finite adaptive trial step instead of failing (issue 15, item 3),
and calls the compiled driver with its functions typed once per stepper (geosweep.kernels.core.fastcall).

A toy family on x' = −x: an explicit Euler / Heun pair whose step declares itself non-finite
above a step size ``h_bad`` (as a method leaving its domain does), or writes NaN into the new
state with a finite estimate. Plus the heavy top with a first trial step far beyond the domain
of the exact dexp⁻¹.
"""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels._jit import kjit
from geosweep.kernels.core import fastcall
from geosweep.kernels.core.driver import MAX_NONFINITE_REJECTS, compile_driver
from geosweep.kernels.core.layout import I_EVALS, S_ERR
from geosweep.kernels.core.signatures import F1, contract_types
from geosweep.kernels.core.trajectory import Reductions, StepperSpec, Trajectory
from geosweep.kernels.status import Status

_STEP, _OBS, _DENSE, _ = contract_types(F1)
_NONFIN = int(Status.NONFINITE)


@kjit(_STEP)
def _toy_step(cb, meth, h, S, Sn, p, work, iwork, info, sio):
    """Heun with an Euler estimate; meth = (h_bad, mode): above h_bad, mode 0 returns NONFINITE,
    mode 1 a NaN state with a zero estimate."""
    info[I_EVALS] += 2
    if h > meth[0]:
        if meth[1] == 0.0:
            sio[S_ERR] = np.nan
            return _NONFIN
        Sn[0] = np.nan
        sio[S_ERR] = 0.0
        return 0
    x = S[0]
    k1 = -x
    k2 = -(x + h * k1)
    Sn[0] = x + 0.5 * h * (k1 + k2)
    sio[S_ERR] = abs(0.5 * h * (k2 - k1))
    return 0


@kjit(_OBS)
def _toy_observe(cb, meth, S, p, work, full, obs):
    obs[0] = S[0]


@kjit(_DENSE)
def _toy_dense(cb, meth, theta, h, S, Sn, work, Sd):
    Sd[0] = S[0] + theta * (Sn[0] - S[0])


def _stepper(h_bad: float, mode: int = 0) -> StepperSpec:
    return StepperSpec(
        drive=compile_driver(F1), step=_toy_step, observe=_toy_observe, dense=_toy_dense, cb=np.zeros(1),
        meth=np.array([h_bad, float(mode)]), p=np.zeros(1), work_size=1, iwork_size=1, state_size=1, n_check=1,
        obs_names=("x",), red=np.array([Reductions.MAX]), has_energy=False, has_dense=True,
    )  # fmt: skip


def _run(sp: StepperSpec, segment: int | None = None, **kw) -> Trajectory:
    kw = {"T": 2.0, "dt_out": 0.5, "tol": 1e-6, "h0": 1.5, **kw}
    tr = Trajectory(sp, np.array([1.0]), **kw)
    while not tr.finished:
        tr.advance(segment)
    return tr


@pytest.mark.parametrize("mode", [0, 1])
def test_nonfinite_trial_is_rejected_and_the_run_is_accurate(mode):
    h_bad = 0.01  # the first trial step (1.5) is 150× too large: ⌈log(150)/log(5)⌉ = 4 cuts by fac_min
    tr = _run(_stepper(h_bad, mode))
    assert tr.status == Status.OK
    c = tr.costs()
    assert c["rejected_steps"] >= 4 and c["h_max_used"] <= h_bad
    # Heun at tol 1e-6 on x' = −x: the samples follow exp(−t) to the tolerance's order
    t = tr.sample_times
    assert np.max(np.abs(tr.samples("x") - np.exp(-t))) < 1e-4


def test_bounded_consecutive_rejections_then_fails_as_before():
    tr = _run(_stepper(0.0), h_min=1e-300)  # every trial is non-finite
    assert tr.status == Status.NONFINITE
    assert tr.failure()["fail_step"] == 1
    assert tr.costs()["rejected_steps"] == MAX_NONFINITE_REJECTS
    assert tr.costs()["f_evals"] == 2 * (MAX_NONFINITE_REJECTS + 1)
    # h_min bounds the cuts too: 1.5·0.2^k ≥ 1e-3 for k ≤ 4
    tr = _run(_stepper(0.0), h_min=1e-3)
    assert tr.status == Status.NONFINITE and tr.costs()["rejected_steps"] == 4


def test_fixed_step_still_fails_at_once():
    tr = Trajectory(_stepper(0.01), np.array([1.0]), T=1.0, dt_out=0.5, h=0.5)
    tr.advance()
    assert tr.status == Status.NONFINITE and tr.failure()["fail_step"] == 1 and tr.steps == 0


def test_segments_through_rejections_are_bitwise_identical():
    sp = _stepper(0.01, 0)
    whole = _run(sp)
    parts = _run(sp, segment=1)
    for a, b in zip(whole.checkpoint().values(), parts.checkpoint().values()):
        if isinstance(a, np.ndarray) and a.ndim:
            assert np.array_equal(a, b, equal_nan=True)


def test_fast_call_matches_the_dispatcher_bitwise(monkeypatch):
    sp = _stepper(0.01, 0)
    fast = _run(sp, segment=3)
    assert fast._call[0] is not sp.drive  # the addressed entry: the functions as one array of addresses
    addrs = fast._call[1][0]
    assert addrs.dtype == np.int64 and addrs.size == 2 * 4 and np.all(addrs != 0)  # driver, step, observe, dense
    monkeypatch.setenv(fastcall.CHECKED_ENV, "1")
    slow = _run(sp, segment=3)
    assert slow._call[0] is sp.drive
    for name in ("S", "out", "env", "acc", "info", "snaps"):
        assert np.array_equal(getattr(fast, name), getattr(slow, name), equal_nan=True)
    # arrays that do not fit the compiled signature fall back to the dispatcher (which raises)
    monkeypatch.delenv(fastcall.CHECKED_ENV)
    tr = Trajectory(sp, np.array([1.0]), T=1.0, dt_out=0.5, tol=1e-6)
    tr.info = tr.info.astype(np.float64)
    with pytest.raises(TypeError):
        tr.advance()


def test_steppers_of_other_models_reuse_the_typed_functions_and_match_the_dispatcher(monkeypatch):
    """A cell's stepper is built anew for every cell: one of another model with the same compiled
    functions gets the same callback tuple and the typed functions bound last time (no walk of its
    callbacks), and the runs still equal the dispatcher's bitwise."""
    from geosweep.kernels.chain.integrate import chain_stepper
    from geosweep.kernels.chain.model import build_chain
    from geosweep.kernels.core.cells import start_trajectory
    from geosweep.kernels.lie.stepper import initial_state as lie_initial_state
    from geosweep.kernels.registry import RunRequest

    models = [build_chain(3, ic="random", seed=s) for s in (0, 1)]
    steppers = [chain_stepper(m, "rkmk4") for m in models]
    assert steppers[0].cb is steppers[1].cb and steppers[0].p is not steppers[1].p

    def run(i: int):
        tr = start_trajectory(steppers[i], lie_initial_state(models[i].y0), RunRequest(0.2, 0.05, h=0.01), {})
        tr.advance()
        return tr

    fast = [run(0), run(1)]
    assert fast[0]._call[0] is fast[1]._call[0]  # the addressed entry
    # the same addresses (driver, step, observe, dense and the six callbacks), looked up once
    assert fast[0]._call[1][0] is fast[1]._call[1][0] and fast[0]._call[1][0].size == 2 * 10
    monkeypatch.setenv(fastcall.CHECKED_ENV, "1")
    for i in (0, 1):
        slow = run(i)
        assert slow._call[0] is steppers[i].drive
        for name in ("S", "out", "env", "acc", "info", "snaps"):
            assert np.array_equal(getattr(fast[i], name), getattr(slow, name), equal_nan=True)
    assert not np.array_equal(fast[0].S, fast[1].S)  # two different cells


def test_heavy_top_survives_a_first_step_outside_the_dexpinv_domain():
    from geosweep.kernels.registry import SYSTEMS, RunRequest, load_for

    load_for("heavy_top", ["lp_rkmk45"])
    from geosweep.kernels.top import family as top

    sd = SYSTEMS["heavy_top"]
    model = sd.build(**{p.name: p.default for p in sd.params})
    req = RunRequest(T=1.0, dt_out=0.25, tol=1e-9)
    ref = top.start(model, "lp_rkmk45", req, {})  # the family's safe first step (0.5 rad)
    ref.advance()
    big = top.start(model, "lp_rkmk45", req, {"h0": 1.0})  # |Ω0| = 150: 150 rad in the first trial
    big.advance()
    assert ref.status == Status.OK and big.status == Status.OK
    assert big.costs()["rejected_steps"] > ref.costs()["rejected_steps"]
    # both are converged solutions: they agree to the tolerance's order
    assert np.max(np.abs(big.S[:6] - ref.S[:6])) < 1e-5 * max(1.0, np.max(np.abs(ref.S[:6])))
