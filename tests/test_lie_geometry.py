"""Geometric properties of the Lie group methods on the chain, and the driver's failure rules."""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.chain.integrate import _integrate
from geosweep.kernels.chain.model import build_chain
from geosweep.kernels.status import Status

LIE = ("lie_euler", "lie_euler_heun", "rkmk3", "rkmk4", "rkmk4_2comm", "cf4", "cf3", "cf43", "rkmk5")


@pytest.fixture(scope="module")
def e2_model():
    """E2 data: N = 2, random 3D point of (TS²)², m_i = 1 + 10 U(0,1), L_i = 1."""
    return build_chain(2, masses="e1", ic="random", seed=1)


@pytest.mark.parametrize("method", LIE)
def test_lie_methods_keep_constraints(e2_model, method: str) -> None:
    r = _integrate(e2_model, method, 5e-3, 1000, 1)  # T = 5
    assert r.status == Status.OK
    assert np.max(r.diag[:, 4]) <= 1e-13  # max_i |1 − q_i·q_i|
    assert np.max(r.diag[:, 5]) <= 1e-13  # max_i |q_i·ω_i|


def test_rkmk45_keeps_constraints_including_dense_output(e2_model) -> None:
    r = _integrate(e2_model, "rkmk45", 5e-3, 1000, adaptive=True, tol=1e-6)
    assert r.status == Status.OK and r.info["samples"] == 1001
    assert np.max(r.diag[:, 4]) <= 1e-13 and np.max(r.diag[:, 5]) <= 1e-13


@pytest.mark.parametrize("method", ["rk4_ambient", "dopri5_ambient"])
def test_ambient_methods_drift_off_the_manifold(e2_model, method: str) -> None:
    adaptive = method == "dopri5_ambient"
    r = _integrate(e2_model, method, 5e-3, 1000, 1, adaptive=adaptive, tol=1e-6)
    assert r.status == Status.OK
    assert np.max(r.diag[:, 4]) >= 1e-9
    assert np.max(r.diag[:, 5]) >= 1e-9


@pytest.mark.parametrize("method", LIE + ("rkmk45",))
def test_paper_ic_stays_planar(method: str) -> None:
    """q_i in the e1e3-plane and ω_i ∥ e2 is an invariant subalgebra: out-of-plane components
    (q_y, ω_x, ω_z) stay exactly 0."""
    model = build_chain(5)
    adaptive = method == "rkmk45"
    r = _integrate(model, method, 1e-2, 300, 1, adaptive=adaptive)
    assert r.status == Status.OK
    assert np.all(r.y[:, [1, 3, 5]] == 0.0)
    assert np.abs(r.y[:, [0, 2, 4]]).min() > 0.0 or np.abs(r.y[:, 4]).max() > 0.0
    assert np.all(r.momentum[:, [0, 2]] == 0.0)


def test_twisted_ic_is_genuinely_3d_and_conserves_J_approximately() -> None:
    model = build_chain(3, ic="twisted", kappa=0.5)
    r = _integrate(model, "rkmk4", 2e-3, 1000, 10)
    assert np.abs(r.y[:, [1, 3, 5]]).max() > 1e-2
    J = r.momentum[:, 2]
    assert abs(J[0]) > 0.1
    assert np.abs(J - J[0]).max() <= 1e-6 * abs(J[0])  # not exact (not symplectic), but tiny


def test_gravity_free_full_momentum_nearly_conserved() -> None:
    model = build_chain(3, ic="twisted", kappa=0.5, g=0.0)
    r = _integrate(model, "rkmk4", 2e-3, 1000, 10)
    L = r.momentum
    assert np.abs(L - L[0]).max() <= 1e-7 * np.abs(L[0]).max()
    assert np.abs(r.energy - r.energy[0]).max() <= 1e-7 * r.energy[0]


def test_fixed_step_samples_and_stride() -> None:
    model = build_chain(2)
    r = _integrate(model, "rkmk4", 0.01, 300, 7)
    assert r.diag.shape == (43, 6) and r.info["samples"] == 43
    assert np.all(np.isfinite(r.diag))
    assert np.allclose(r.time, np.arange(43) * 0.07)
    # the last full sample equals the state after step 294, not 300
    r294 = _integrate(model, "rkmk4", 0.01, 294, 294)
    assert np.array_equal(r.diag[-1], r294.diag[-1])
    assert r.info["f_evals"] == 4 * 300


def test_failure_keeps_last_valid_state_and_nan_after() -> None:
    """Ambient RK4 with an absurd step blows up: status NONFINITE, samples up to the last
    valid step finite, NaN afterwards, state = last valid state."""
    model = build_chain(5, ic="twisted")
    r = _integrate(model, "rk4_ambient", 1.0, 50, 1)
    assert r.status == Status.NONFINITE
    k = r.info["fail_step"]
    assert k == r.info["steps"] + 1 >= 1
    assert np.all(np.isfinite(r.diag[:k])) and np.all(np.isnan(r.diag[k:]))
    assert np.all(np.isfinite(r.y))
    ref = _integrate(model, "rk4_ambient", 1.0, k - 1, 1)
    assert np.array_equal(ref.y, r.y)


def test_adaptive_step_size_underflow_is_nonconverged() -> None:
    model = build_chain(2)
    r = _integrate(model, "rkmk45", 0.1, 10, adaptive=True, tol=1e-300, h_min=1e-10)
    assert r.status == Status.NONCONVERGED
    assert r.info["fail_step"] == r.info["steps"] + 1
    assert r.summary["t_end"] < 0.1  # never reached the first output time
    assert np.all(np.isfinite(r.diag[0])) and np.all(np.isnan(r.diag[1:]))
    assert np.all(np.isfinite(r.y))
