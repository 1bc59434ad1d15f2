"""Variable-step RKMK(5,4) (001 §4, E3 of spec pendulum_chain §6) and the dense output."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain.family import reference_solution
from geosweep.kernels.chain.integrate import _integrate
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.status import Status

T = 3.0
# N, length mode, accepted steps, rejected, h_min, h_max, error adaptive, error constant RKMK5
E3 = [
    (2, "unit", 117, 17, 4.8e-3, 6.3e-2, 1.05e-5, 3.74e-3),
    (10, "unit", 234, 5, 6.7e-3, 5.1e-2, 5.2e-6, 2.6e-5),
    (20, "unit", 362, 5, 5.6e-3, 2.1e-2, 1.5e-5, 3.0e-5),
    (2, "scaled", 60, 7, 1.1e-2, 1.1e-1, 4.6e-6, 3.7e-6),
    (10, "scaled", 348, 11, 3.2e-3, 3.2e-2, 1.9e-5, 4.1e-4),
    (20, "scaled", 795, 2, 2.0e-4, 1.8e-2, 6.8e-5, 1.35e-1),
]


def _check_e3(n, mode, steps, rej, hmin, hmax, err_a, err_c) -> None:
    model = build_chain(n, length_mode=mode)  # paper IC, m_i = 1, g = 9.81
    ref = reference_solution(model, T, 1e-13)
    r = _integrate(model, "rkmk45", T, 1, adaptive=True, tol=1e-6, theta=0.85, exponent=0.25, h0=T / 100)
    assert r.status == Status.OK and r.summary["t_end"] == T
    k = r.info["steps"]
    assert abs(k - steps) <= 0.15 * steps, (k, steps)
    assert abs(r.info["rejected"] - rej) <= max(3, 0.3 * rej)
    assert hmin / 1.5 <= r.summary["h_min_used"] <= hmin * 1.5
    assert hmax / 1.5 <= r.summary["h_max_used"] <= hmax * 1.5
    ea = np.linalg.norm(r.y - ref)
    assert err_a / 2 <= ea <= err_a * 2, ea
    c = _integrate(model, "rkmk5", T / k, k, k)  # constant step, same number of steps
    ec = np.linalg.norm(c.y - ref)
    assert err_c / 2 <= ec <= err_c * 2, ec


@pytest.mark.parametrize("case", E3, ids=lambda c: f"N{c[0]}-{c[1]}")
def test_e3_table(case) -> None:
    """All six rows run in about 1 s each (DOP853 reference on the compiled dense RHS)."""
    _check_e3(*case)


def test_step_sequence_independent_of_output_grid() -> None:
    """Dense output: Δt_out = 0.005 and Δt_out = T give the same steps and the same y(T)."""
    model = build_chain(2)
    dt = 0.005
    r = _integrate(model, "rkmk45", dt, int(round(T / dt)), adaptive=True, tol=1e-6)
    assert r.status == Status.OK
    r1 = _integrate(model, "rkmk45", T, 1, adaptive=True, tol=1e-6)
    assert r.info["steps"] == r1.info["steps"] and r.info["rejected"] == r1.info["rejected"]
    assert np.array_equal(r.y, r1.y)


def test_dense_output_accuracy_and_grid() -> None:
    """Samples at t_k = k Δt_out agree with a tight reference to about the global error."""
    model = build_chain(2, ic="twisted", kappa=0.5)
    dt, n = 0.25, 8
    r = _integrate(model, "rkmk45", dt, n, adaptive=True, tol=1e-8)
    assert r.info["samples"] == n + 1 and np.all(np.isfinite(r.diag))
    for k in (3, 5, 8):
        yk = reference_solution(model, k * dt, 1e-13)
        dk = model.diagnostics(yk)
        assert abs(r.diag[k, 0] - dk[0]) <= 1e-5 * dk[0]
        assert abs(r.diag[k, 3] - dk[3]) <= 1e-5 * abs(dk[3])
    # interpolated samples stay on (TS²)^N
    assert r.diag[:, 4].max() <= 1e-13 and r.diag[:, 5].max() <= 1e-13


def test_tolerance_proportionality() -> None:
    model = build_chain(3, ic="twisted")
    ref = reference_solution(model, 1.0, 1e-13)
    errs, steps = [], []
    for tol in (1e-5, 1e-7, 1e-9):
        r = _integrate(model, "rkmk45", 1.0, 1, adaptive=True, tol=tol)
        errs.append(np.linalg.norm(r.y - ref))
        steps.append(r.info["steps"])
    assert errs[0] > errs[1] > errs[2]
    assert steps[0] < steps[1] < steps[2]
    # ~tol^{1/5} growth of the step count (α = 1/4 controller, order-5 propagation)
    assert 1.8 < steps[2] / steps[1] < 4.0


@pytest.mark.parametrize("method", ["cf3", "cf43", "dopri5_ambient"])
def test_other_embedded_pairs_run_adaptively(method: str) -> None:
    """CF pairs (no dense output) clip steps to hit every sample time; DOPRI5 interpolates."""
    model = build_chain(2, ic="twisted")
    ref = reference_solution(model, 1.0, 1e-13)
    alpha = 1 / 3 if method == "cf3" else 0.25
    r = _integrate(model, method, 0.1, 10, adaptive=True, tol=1e-7, exponent=alpha)
    assert r.status == Status.OK and r.info["samples"] == 11
    assert np.all(np.isfinite(r.diag))
    assert np.linalg.norm(r.y - ref) <= 1e-4
    if method != "dopri5_ambient":
        assert r.diag[:, 4].max() <= 1e-13
