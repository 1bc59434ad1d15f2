"""Order-8 RKMK on the Dormand–Prince 8(5,3) tableau (issue 15): ``rkmk8`` (fixed step),
``rkmk853`` (adaptive, 7th-order dense output) and the ambient ``dop853_ambient``.

The tableau is checked against every Runge–Kutta order condition up to order 8 (200 rooted
trees) in exact rational arithmetic on the published decimals, the two embedded estimators
against theirs (and shown to stop at their orders), the continuous extension against the
conditions of order 7 at several θ; then on the chain: observed order 8, tolerance
proportionality, 8th-power decay of the dense-output error, constraints at round-off,
resumability across checkpoints.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction as Fr
from functools import cache

import numpy as np
import pytest

from geosweep.kernels.chain import family as chain_family
from geosweep.kernels.chain.family import INTEGRATORS, reference_solution
from geosweep.kernels.chain.integrate import _integrate, chain_stepper
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.lie import tableaux
from geosweep.kernels.lie.stepper import dense_evals, initial_state
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status

ALPHA = 0.125  # the controller exponent for DOP853's O(h⁸) estimate


# ---- the tableau: order conditions on rooted trees, exact arithmetic -----------------------
@cache
def _trees(order: int) -> tuple:
    """Rooted trees with ``order`` vertices, each a sorted tuple of its subtrees."""
    if order == 1:
        return ((),)
    out = set()
    for t in _trees(order - 1):  # graft a leaf onto every vertex of every smaller tree
        out.update(_graft(t))
    return tuple(sorted(out))


def _graft(t: tuple) -> set:
    res = {tuple(sorted((*t, ())))}
    for i, c in enumerate(t):
        for g in _graft(c):
            res.add(tuple(sorted((*t[:i], g, *t[i + 1 :]))))
    return res


def _size(t: tuple) -> int:
    return 1 + sum(_size(c) for c in t)


def _gamma(t: tuple) -> int:
    g = _size(t)
    for c in t:
        g *= _gamma(c)
    return g


def _phi(A: list, t: tuple, memo: dict) -> list:
    """Stage vector of the elementary weight: Φ_i(t) = Π_children (A Φ(child))_i."""
    if t not in memo:
        s = len(A)
        v = [Fr(1)] * s
        for c in t:
            pc = _phi(A, c, memo)
            Ac = [sum((A[i][j] * pc[j] for j in range(s) if A[i][j]), Fr(0)) for i in range(s)]
            v = [x * y for x, y in zip(v, Ac)]
        memo[t] = v
    return memo[t]


@pytest.fixture(scope="module")
def d8():
    return tableaux.dop853_exact()


def _residuals(A, w, max_order, theta=Fr(1)):
    """max |Σ_j w_j Φ_j(t) − θ^|t| / γ(t)| per order 1..max_order."""
    memo: dict = {}
    res = []
    for p in range(1, max_order + 1):
        r = 0.0
        for t in _trees(p):
            lhs = sum((wj * f for wj, f in zip(w, _phi(A, t, memo))), Fr(0))
            r = max(r, abs(float(lhs - theta**p / _gamma(t))))
        res.append(r)
    return res


def test_tree_count() -> None:
    assert [len(_trees(p)) for p in range(1, 9)] == [1, 1, 2, 4, 9, 20, 48, 115]


def test_main_formula_has_order_8(d8) -> None:
    """All 200 conditions to the precision of the 30-digit data; order 9 fails (it is not 9)."""
    A12 = [r[:12] for r in d8["A"][:12]]
    res = _residuals(A12, d8["b"][:12], 9)
    assert max(res[:8]) < 1e-24, res
    assert res[8] > 1e-6, res
    c = [sum(r) for r in d8["A"]]  # nodes of the published tableau: (6 ∓ √6)/30 …, 1, 1/10, 1/5, 7/9
    s6 = np.sqrt(6.0)
    assert np.allclose([float(x) for x in c[3:5]], [(6 - s6) / 30, (6 + s6) / 30], rtol=1e-15)
    exact = [Fr(1, 3), Fr(1, 4), Fr(3, 5), Fr(1), Fr(1), Fr(1, 10), Fr(1, 5), Fr(7, 9)]
    assert max(abs(float(c[i] - x)) for i, x in zip((5, 6, 9, 11, 12, 13, 14, 15), exact)) < 1e-28


@pytest.mark.parametrize(("key", "order"), [("bhat5", 5), ("bhat3", 3)])
def test_embedded_estimators(d8, key, order) -> None:
    A12 = [r[:12] for r in d8["A"][:12]]
    res = _residuals(A12, d8[key][:12], order + 1)
    assert max(res[:order]) < 1e-24, res
    assert res[order] > 1e-5, res  # exactly that order: the estimate is O(h^{order+1})


@pytest.mark.parametrize("theta", [Fr(1, 5), Fr(1, 2), Fr(9, 10), Fr(1)])
def test_dense_output_has_order_7(d8, theta) -> None:
    """y(t + θh) ≈ y + h Σ_j w_j(θ) k_j over the 16 stages satisfies the conditions of order ≤ 7."""
    w = [sum((pm * theta ** (m + 1) for m, pm in enumerate(row)), Fr(0)) for row in d8["P"]]
    res = _residuals(d8["A"], w, 8, theta)
    assert max(res[:7]) < 1e-22, res
    if theta != 1:
        assert res[7] > 1e-8, res  # order 7, not 8, inside the step
    # the float64 tables used by the driver are these numbers
    m = tableaux.get("rkmk853")
    assert np.array_equal(m.P, np.array([[float(x) for x in r] for r in d8["P"]]))
    assert m.stages == 16 and m.s_main == 13 and m.fsal and m.order == 8


# ---- the chain -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def chain2():
    """N = 2, unit masses and links, a random point of (TS²)² (seed 2), T = 0.5; reference:
    rkmk8 itself at 512 steps (its truncation error is far below round-off there)."""
    model = build_chain(2, ic="random", seed=2)
    T = 0.5
    return model, T, _integrate(model, "rkmk8", T / 512, 512, 512).y


def _slope(model, T, ref, method) -> tuple[float, np.ndarray]:
    ns = np.array([3, 4, 6, 8, 12, 16])
    errs = np.array([np.linalg.norm(_integrate(model, method, T / n, n, n).y - ref) for n in ns])
    return float(np.polyfit(np.log(T / ns), np.log(errs), 1)[0]), errs


def test_rkmk8_observed_order(chain2) -> None:
    """h = T/3 … T/16: errors 4e-6 … 3e-13, above round-off; least-squares slope ≈ 7.9."""
    model, T, ref = chain2
    p, errs = _slope(model, T, ref, "rkmk8")
    assert abs(p - 8) <= 0.3, (p, errs)
    assert errs[-1] > 1e-14
    # the same tableau with a truncated dexp⁻¹ (two ad-terms) loses the order: it is the
    # exact se(3) dexp⁻¹ that makes RKMK inherit order 8
    m2 = tableaux.get("rkmk8").with_dexp_mode(2)
    p2, _ = _slope(model, T, ref, m2)
    assert p2 < 6.5, p2


def test_rkmk853_tolerance_proportionality() -> None:
    model = build_chain(3, ic="twisted")
    ref = reference_solution(model, 1.0, 1e-13)
    errs, steps = [], []
    tols = (1e-6, 1e-8, 1e-10)
    for tol in tols:
        # one first trial step for every tol (the default rule's grows with tol): the controller's
        # tolerance proportionality alone
        r = _integrate(model, "rkmk853", 1.0, 1, adaptive=True, tol=tol, exponent=ALPHA, h0=0.01)
        assert r.status == Status.OK
        errs.append(np.linalg.norm(r.y - ref))
        steps.append(r.info["steps"])
        # 12 evaluations per trial step (first-same-as-last) plus the first one
        assert r.info["f_evals"] == 1 + 12 * (r.info["steps"] + r.info["rejected"])
    ratio = np.array(errs) / np.array(tols)
    assert np.all((0.01 < ratio) & (ratio < 10)), ratio  # error ∝ tol over four decades
    assert ratio.max() / ratio.min() < 5, ratio
    # steps grow like tol^{-1/8}: ×100 in tol → ×1.78 in steps
    for a, b in zip(steps, steps[1:]):
        assert 1.3 < b / a < 2.5, steps


@pytest.mark.parametrize("method", ["rkmk853", "dop853_ambient"])
def test_dense_output_error_decays_like_h8(chain2, method) -> None:
    """One step of size H (tol = ∞) with samples at H/4, H/2, 3H/4 from the dense output:
    the sample error falls like H⁸ (7th-order continuous extension); the 3 dense-only stages
    are evaluated once per step and counted."""
    model, _, _ = chain2
    stepper = chain_stepper(model, method, True)
    Hs = np.array([0.1, 0.05, 0.025])
    errs = []
    for H in Hs:
        tr = Trajectory(stepper, initial_state(model.y0), T=H, dt_out=H / 4, tol=1e30, h0=H, snap_every=1)
        tr.advance()
        assert tr.steps == 1 and tr.status == Status.OK
        assert tr.costs()["f_evals"] == 13 and dense_evals(tr.S) == 3
        exact = [_integrate(model, "rkmk8", k * H / 160, 40, 40).y.ravel() for k in (1, 2, 3)]
        errs.append(max(np.linalg.norm(tr.snaps[k] - exact[k - 1]) for k in (1, 2, 3)))
    slopes = np.diff(np.log(errs)) / np.diff(np.log(Hs))
    assert np.all(np.abs(slopes - 8) < 0.5) and errs[-1] > 1e-14, (slopes, errs)


@pytest.mark.parametrize("n", [2, 10, 20])
def test_constraints_at_round_off(n) -> None:
    """tol = 1e-6, twisted IC (a 3-D motion, so q_i·ω_i is not trivially zero), T = 3,
    samples every 0.05 from the dense output: |q_i| − 1 and q_i·ω_i stay at round-off at every
    step and every sample; the ambient DOP853 on the same driver lets them drift (to about the
    local error, far above round-off)."""
    model = build_chain(n, ic="twisted")
    r = _integrate(model, "rkmk853", 0.05, 60, adaptive=True, tol=1e-6, exponent=ALPHA)
    assert r.status == Status.OK and r.info["samples"] == 61
    assert r.diag[:, 4].max() <= 2e-15 * n and r.diag[:, 5].max() <= 2e-14
    assert r.core.reduced("unit_error") <= 2e-15 * n and r.core.reduced("tangency_error") <= 2e-14
    a = _integrate(model, "dop853_ambient", 0.05, 60, adaptive=True, tol=1e-6, exponent=ALPHA)
    assert a.status == Status.OK
    assert a.core.reduced("unit_error") > 30 * max(r.core.reduced("unit_error"), 1e-16)
    assert a.core.reduced("tangency_error") > 30 * max(r.core.reduced("tangency_error"), 1e-16)


def test_family_cells_and_f_evals() -> None:
    """Through the family contract: dense samples cost 3 extra evaluations per sampled step,
    counted in f_evals; the default exponent is 1/8; it beats RKMK(5,4) on work."""
    model = build_chain(2)
    req = RunRequest(T=3.0, dt_out=0.1, tol=1e-8)
    idef = {i.name: i for i in INTEGRATORS}
    opts = {"global_error": True}
    v = chain_family.run(model, "rkmk853", req, opts).values
    assert next(p for p in idef["rkmk853"].params if p.name == "exponent").default == ALPHA
    main = 1 + 12 * (int(v["steps"]) + int(v["rejected_steps"]))
    extra = int(v["f_evals"]) - main
    assert extra % 3 == 0 and 0 < extra <= 3 * int(v["steps"])
    assert v["global_error"] < 1e-7 and v["max_unit_error"] <= 1e-14
    v45 = chain_family.run(model, "rkmk45", req, opts).values
    # at the same tol (1e-8): fewer evaluations and a 30× smaller error (1.6e-9 against 5.3e-8)
    assert v["f_evals"] < v45["f_evals"] and v["global_error"] < v45["global_error"] / 5


def test_work_without_the_dense_tail_is_refused() -> None:
    """A caller that sizes ``work`` without the dense-only stages' tail (as for the other
    methods) gets a failed first step, not a silent overwrite of its scratch."""
    model = build_chain(2)
    sp = chain_stepper(model, "rkmk853", True)
    short = dataclasses.replace(sp, work_size=sp.work_size - sp.p.shape[0] - 2)
    tr = Trajectory(short, initial_state(model.y0), T=0.5, dt_out=0.1, tol=1e-8)
    assert tr.advance() == Status.NONFINITE and tr.failure()["fail_step"] == 1
    ok = Trajectory(sp, initial_state(model.y0), T=0.5, dt_out=0.1, tol=1e-8)
    assert ok.advance() == Status.OK


def test_rkmk853_resumable_bitwise() -> None:
    """Segments of 3 accepted steps, each restored from a checkpoint into fresh buffers (the
    dense-only stages are rebuilt inside a step, their count travels in the state): bitwise
    the same trajectory as one uninterrupted run."""
    model = build_chain(3, ic="twisted")
    req = RunRequest(T=2.0, dt_out=0.02, tol=1e-9, snapshot_every=5)
    whole = chain_family.start(model, "rkmk853", req, {})
    whole.advance()
    traj = chain_family.start(model, "rkmk853", req, {})
    segments = 0
    while not traj.finished:
        traj.advance(3)
        traj = Trajectory.restore(traj.stepper, traj.checkpoint())
        segments += 1
    assert whole.status == Status.OK and segments >= 5 and dense_evals(whole.S) > 0
    for name in ("S", "acc", "info", "out", "env", "snaps"):
        a, b = getattr(whole, name), getattr(traj, name)
        assert np.array_equal(a.view(np.uint8), b.view(np.uint8)), name
