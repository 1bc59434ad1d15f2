"""SE(3) primitives: exponential, action on TS², bracket, exact and truncated dexp⁻¹."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.linalg import expm

from geosweep.kernels.lie.se3 import DEXPINV_EXACT, bracket, dexpinv, exp_act, exp_matrix, generator

RNG = np.random.default_rng(42)


def _mat(x: np.ndarray) -> np.ndarray:
    """4×4 matrix of an se(3) element (A, a)."""
    A, a = x[:3], x[3:]
    m = np.zeros((4, 4))
    m[:3, :3] = [[0, -A[2], A[1]], [A[2], 0, -A[0]], [-A[1], A[0], 0]]
    m[:3, 3] = a
    return m


def _vec(m: np.ndarray) -> np.ndarray:
    return np.array([m[2, 1], m[0, 2], m[1, 0], m[0, 3], m[1, 3], m[2, 3]])


def _ad(u: np.ndarray) -> np.ndarray:
    """6×6 matrix of ad_u (columns: brackets with the unit vectors)."""
    out = np.empty((1, 6))
    cols = []
    for k in range(6):
        e = np.zeros(6)
        e[k] = 1.0
        bracket(u[None, :], e[None, :], out)
        cols.append(out[0].copy())
    return np.array(cols).T


def _tangent_state(n: int) -> np.ndarray:
    q = RNG.normal(size=(n, 3))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w = np.cross(q, RNG.normal(size=(n, 3)))
    return np.ascontiguousarray(np.hstack([q, w]))


@pytest.mark.parametrize("scale", [1e-9, 1e-4, 0.05, 0.099, 0.101, 0.3, 2.0, 6.0])
def test_exp_matches_expm(scale: float) -> None:
    for _ in range(20):
        x = RNG.normal(size=6) * scale
        R = np.empty((3, 3))
        r = np.empty(3)
        exp_matrix(x, R, r)
        E = expm(_mat(x))
        tol = 1e-13 * max(1.0, scale)  # expm's own scaling-and-squaring error grows with |x|
        assert np.abs(R - E[:3, :3]).max() <= tol
        assert np.abs(r - E[:3, 3]).max() <= tol * max(1.0, np.abs(r).max())


def test_action_is_left_action_and_preserves_ts2() -> None:
    n = 50
    y = _tangent_state(n)
    X1 = RNG.normal(size=(n, 6))
    X2 = RNG.normal(size=(n, 6))
    y2 = np.empty_like(y)
    y12 = np.empty_like(y)
    exp_act(X2, y, y2)
    exp_act(X1, y2, y12)
    for i in range(n):
        G = expm(_mat(X1[i])) @ expm(_mat(X2[i]))
        R, r = G[:3, :3], G[:3, 3]
        q, w = y[i, :3], y[i, 3:]
        expect = np.concatenate([R @ q, R @ w + np.cross(r, R @ q)])
        assert np.abs(y12[i] - expect).max() <= 1e-12
    assert np.abs(1 - (y12[:, :3] ** 2).sum(1)).max() <= 1e-14
    assert np.abs((y12[:, :3] * y12[:, 3:]).sum(1)).max() <= 1e-13
    # aliasing out = y is allowed
    z = y.copy()
    exp_act(X2, z, z)
    assert np.array_equal(z, y2)


def test_generator_is_derivative_of_action() -> None:
    n = 10
    y = _tangent_state(n)
    X = RNG.normal(size=(n, 6))
    g = np.empty_like(y)
    generator(X, y, g)
    eps = 1e-6
    yp = np.empty_like(y)
    ym = np.empty_like(y)
    exp_act(eps * X, y, yp)
    exp_act(-eps * X, y, ym)
    assert np.abs((yp - ym) / (2 * eps) - g).max() <= 1e-8


def test_bracket_is_matrix_commutator() -> None:
    u = RNG.normal(size=(5, 6))
    v = RNG.normal(size=(5, 6))
    out = np.empty_like(u)
    bracket(u, v, out)
    for i in range(5):
        Mu, Mv = _mat(u[i]), _mat(v[i])
        assert np.allclose(out[i], _vec(Mu @ Mv - Mv @ Mu), atol=1e-14)


@pytest.mark.parametrize("scale", [1e-8, 0.05, 0.2, 0.45, 0.55, 1.5, 3.0, 5.5])
def test_dexpinv_exact_inverts_dexp(scale: float) -> None:
    """dexp_u(dexp⁻¹_u v) = v with dexp_u = Σ ad_u^k/(k+1)! (series summed to convergence);
    the scales straddle the series/closed-form thresholds of g₂ (0.1) and g̃₂ (0.5)."""
    for _ in range(20):
        u = RNG.normal(size=6)
        u[:3] *= scale / np.linalg.norm(u[:3])
        v = RNG.normal(size=6)
        c = np.empty((1, 6))
        dexpinv(u[None, :], v[None, :], c, DEXPINV_EXACT)
        ad = _ad(u)
        dexp = np.zeros((6, 6))
        term = np.eye(6)
        fact = 1.0
        for k in range(80):
            fact *= k + 1
            dexp += term / fact
            term = term @ ad
        back = dexp @ c[0]
        assert np.abs(back - v).max() <= 1e-12 * max(1.0, np.abs(v).max()) * max(1.0, scale)


def test_dexpinv_right_trivialised() -> None:
    """σ̇ = dexp⁻¹_σ(v) ⇒ d/dt e^σ = v̂ e^σ (finite difference on 4×4 matrices)."""
    s0 = RNG.normal(size=6)
    v = RNG.normal(size=6)
    sd = np.empty((1, 6))
    dexpinv(s0[None, :], v[None, :], sd, DEXPINV_EXACT)
    eps = 1e-5
    d = (expm(_mat(s0 + eps * sd[0])) - expm(_mat(s0 - eps * sd[0]))) / (2 * eps)
    assert np.abs(d - _mat(v) @ expm(_mat(s0))).max() <= 1e-8


def test_dexpinv_truncations() -> None:
    """mode q keeps ad^0..ad^q; the error of mode q against exact is O(|u|^{q+1})
    (O(|u|^{q+2}) when B_{q+1} = 0); mode 6 agrees with exact to the first omitted term,
    |B₈/8! ad_u⁸ v| ≤ (2|u|)⁸/(30·8!)·|v| (|ad_u| ≤ 2|u|), which mode 4 exceeds 30-fold for this draw."""
    rng = np.random.default_rng(0)  # its own draw: the module's RNG depends on which tests ran before it (xdist)
    u = rng.normal(size=6)
    v = rng.normal(size=6)
    ex = np.empty((1, 6))
    tr = np.empty((1, 6))
    for q, expected_rate in ((0, 1), (1, 2), (2, 4), (4, 6)):
        errs = []
        for eps in (1e-1, 5e-2):
            dexpinv(eps * u[None, :], v[None, :], ex, DEXPINV_EXACT)
            dexpinv(eps * u[None, :], v[None, :], tr, q)
            errs.append(np.abs(ex - tr).max())
        rate = np.log2(errs[0] / errs[1])
        assert abs(rate - expected_rate) < 0.3, (q, rate)
    dexpinv(0.05 * u[None, :], v[None, :], ex, DEXPINV_EXACT)
    first_omitted = (2 * 0.05 * np.linalg.norm(u)) ** 8 / (30 * 40320) * np.abs(v).max() + 1e-15
    for q, within in ((6, True), (4, False)):
        dexpinv(0.05 * u[None, :], v[None, :], tr, q)
        assert (np.abs(ex - tr).max() <= first_omitted) == within, (q, np.abs(ex - tr).max(), first_omitted)
