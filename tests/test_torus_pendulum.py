"""SO(3) 3-D pendulum validation (spec §3, §9.4) and single-step map identities (§2.1, §9.3)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from geosweep.kernels.status import Status
from geosweep.kernels.torus.integrate import _integrate, evaluate
from geosweep.kernels.torus.model import so3_pendulum, torus
from geosweep.kernels.torus.rodrigues import alpha_to_quat, oplus, rot, theta_to_alpha

T_END = 10.0
HS = 0.1 * 2.0 ** -np.arange(6)
E_SLOPE = {"v2_exact": 2.0, "v2_newmark": 2.0, "v1": 1.0}
TRUE_SLOPE = {"v2_exact": 2.0, "v2_newmark": 2.0, "v1": 1.0}
# [M] values of spec §3 at h = 0.1 (E-error); a factor 1.05 band
E_ERR_H01 = {"v2_exact": 4.42e-3, "v2_newmark": 5.05e-4, "v1": 5.56e-2}


def _qmul(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    return np.concatenate([[p[0] * q[0] - p[1:] @ q[1:]], p[0] * q[1:] + q[0] * p[1:] + np.cross(p[1:], q[1:])])


def _qmat(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


@pytest.fixture(scope="module")
def reference():
    """Unit quaternion + Ω ODE (q̇ = ½ (0, Ω) ⊗ q, J Ω̇ = m g (R e3) × e3), DOP853, rtol 1e-13."""
    model = so3_pendulum()

    def rhs(t, y):
        q = y[:4]
        W = y[4:]
        rho = _qmat(q / np.linalg.norm(q))[:, 2]
        tau = np.array([rho[1], -rho[0], 0.0])  # m = g = J = 1
        return np.concatenate([0.5 * _qmul(np.concatenate([[0.0], W]), q), tau])

    y0 = np.concatenate([alpha_to_quat(model.alpha0[0]), model.Omega0[0]])
    sol = solve_ivp(rhs, (0.0, T_END), y0, method="DOP853", rtol=1e-13, atol=1e-15, dense_output=True)
    assert sol.success
    return sol


def _errors(method: str, h: float, sol) -> tuple[float, float, object]:
    """E-error (38) and q_err_true on the sample grid Δt_s = max(h, 0.01)."""
    model = so3_pendulum()
    n = int(round(T_END / h))
    stride = max(1, int(round(0.01 / h)))
    tr = _integrate(model, method, h, n, stride, snapshot_interval=stride * h)
    assert tr.status == Status.OK
    t = tr.time
    E = tr.field("E_total")
    E0 = E[0]
    e_err = np.sqrt(np.trapezoid((E - E0) ** 2, t)) / (abs(E0) * np.sqrt(t[-1] - t[0]))
    assert np.allclose(tr.snap_time, t)
    ys = sol.sol(t)
    num = np.empty(len(t))
    den = np.empty(len(t))
    for k in range(len(t)):
        qr = ys[:4, k] / np.linalg.norm(ys[:4, k])
        Wr = ys[4:, k]
        qh = alpha_to_quat(tr.snap[k, 0, 6:9])
        rel = _qmul(qh, qr * np.array([1.0, -1.0, -1.0, -1.0]))  # q_h ⊗ q_ref^* ↔ R_h R_refᵀ
        ang = 2.0 * np.arctan2(np.linalg.norm(rel[1:]), abs(rel[0]))
        th_ref = 2.0 * np.arctan2(np.linalg.norm(qr[1:]), abs(qr[0]))
        num[k] = ang**2 + np.sum((tr.snap[k, 0, 9:12] - Wr) ** 2)
        den[k] = th_ref**2 + Wr @ Wr
    q_true = np.sqrt(np.trapezoid(num, t) / np.trapezoid(den, t))
    return e_err, q_true, tr


@pytest.mark.parametrize("method", ["v2_exact", "v2_newmark", "v1"])
def test_pendulum_convergence_and_invariants(method, reference):
    e_errs = []
    q_errs = []
    for h in HS:
        e, q, tr = _errors(method, h, reference)
        e_errs.append(e)
        q_errs.append(q)
        # invariants: Rρ0·Ω = 0, e3·Ω = 0.2, |Rρ0| = 1 at every sample
        assert np.abs(tr.field("rho_dot_Omega")).max() <= 1e-12
        assert np.abs(tr.field("e3_dot_Omega") - 0.2).max() <= 1e-12
        assert np.abs(tr.field("rho_norm_error")).max() <= 1e-12
        assert tr.summary["max_abs_alpha"] > 100.0  # passes close to the chart singularity
    e_slopes = np.log2(np.array(e_errs[:-1]) / np.array(e_errs[1:]))
    q_slopes = np.log2(np.array(q_errs[:-1]) / np.array(q_errs[1:]))
    assert np.all(np.abs(e_slopes - E_SLOPE[method]) <= 0.1), e_slopes
    assert np.all(np.abs(q_slopes[-3:] - TRUE_SLOPE[method]) <= 0.1), q_slopes
    assert e_errs[0] == pytest.approx(E_ERR_H01[method], rel=0.05)


def test_pendulum_initial_energy():
    tr = _integrate(so3_pendulum(), "v2_newmark", 0.1, 1)
    assert tr.summary["E0"] == pytest.approx(0.04 + np.sqrt(2) / 2, abs=1e-15)


def _random_torus_state(seed: int):
    model = torus(N_p=16, tilt=0.4, wall=False)
    rng = np.random.default_rng(seed)
    x = model.x0 + 0.1 * model.extras["D_p"] * rng.normal(size=model.x0.shape)
    v = rng.normal(size=x.shape)
    a = theta_to_alpha(rng.normal(size=x.shape))
    W = 3.0 * rng.normal(size=x.shape)
    return model, x, v, a, W


@pytest.mark.parametrize("method", ["v2_exact", "v2_newmark"])
def test_increment_solves_discrete_equation_and_body_form(method):
    """(23): 4Δα/(4+|Δα|²) = h b (residual of (15)); both maps rotate about b, so the body
    form (21d) ω_{k+1} = ω_k + (h/2J)(M_k + M_{k+1}) reproduces the Ω update."""
    model, x, v, a, W = _random_torus_state(1)
    h = 0.05
    _, F0, T0, _ = evaluate(model, x, a)
    tr = _integrate(model, method, h, 1, x0=x, v0=v, alpha0=a, Omega0=W, blowup=0.0)
    assert tr.status == Status.OK
    _, F1, T1, _ = evaluate(model, tr.x, tr.alpha)
    b = W + h / (2 * model.J) * T0
    worst15 = 0.0
    worst21 = 0.0
    for i in range(model.n):
        da = oplus(-a[i], tr.alpha[i])  # R(Δα) = R_{k+1} R_kᵀ
        if method == "v2_exact":
            res = 4 * da / (4 + da @ da) - h * b[i]
            worst15 = max(worst15, np.abs(res).max() / np.abs(h * b[i]).max())
        R0 = rot(a[i])
        R1 = rot(tr.alpha[i])
        w_body = R0.T @ W[i] + h / (2 * model.J) * (R0.T @ T0[i] + R1.T @ T1[i])
        worst21 = max(worst21, np.abs(R1.T @ tr.Omega[i] - w_body).max() / np.abs(w_body).max())
    assert worst15 <= 1e-14
    assert worst21 <= 1e-14
    # translational half-kicks (13a), (13b)
    assert np.abs(tr.x - (x + h * v + h * h / (2 * model.m) * F0)).max() <= 1e-15 * 10
    assert np.abs(tr.v - (v + h / (2 * model.m) * (F0 + F1))).max() <= 1e-13


def test_exact_and_newmark_differ_only_in_increment_angle():
    """Per step: angle arcsin(h|b|) for (23) vs 2 arctan(h|b|/2) for (25), same axis b."""
    model, x, v, a, W = _random_torus_state(2)
    h = 0.05
    _, _, T0, _ = evaluate(model, x, a)
    b = W + h / (2 * model.J) * T0
    for method, angle in (("v2_exact", np.arcsin), ("v2_newmark", lambda s: 2 * np.arctan(s / 2))):
        tr = _integrate(model, method, h, 1, x0=x, v0=v, alpha0=a, Omega0=W, blowup=0.0)
        for i in range(model.n):
            da = oplus(-a[i], tr.alpha[i])
            hb = h * np.linalg.norm(b[i])
            assert 2 * np.arctan(np.linalg.norm(da) / 2) == pytest.approx(angle(hb), rel=1e-13)
            assert np.linalg.norm(np.cross(da, b[i])) <= 1e-13 * np.linalg.norm(da) * np.linalg.norm(b[i])


def test_v1_step_is_symplectic_euler():
    model, x, v, a, W = _random_torus_state(3)
    h = 0.02
    _, F0, T0, _ = evaluate(model, x, a)
    tr = _integrate(model, "v1", h, 1, x0=x, v0=v, alpha0=a, Omega0=W, blowup=0.0)
    v1 = v + h * F0
    W1 = W + h * T0
    assert np.abs(tr.v - v1).max() <= 1e-14 * np.abs(v1).max()
    assert np.abs(tr.Omega - W1).max() <= 1e-14 * np.abs(W1).max()
    assert np.abs(tr.x - (x + h * v1)).max() <= 1e-15 * 10
    for i in range(model.n):
        assert np.abs(rot(tr.alpha[i]) - rot(h * W1[i]) @ rot(a[i])).max() <= 1e-14
