"""Two quadrotors carrying a point mass (001 §6; spec heavy_top_quadrotors §3–6, §10 items 2, 8–11).

Reference values are the spec's (§9.2, DOP853 prototype); measured values are quoted next to
each tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.quad import model as qm
from geosweep.kernels.quad.family import _integrate, collect, run, start, two_quadrotors
from geosweep.kernels.quad.group import quad_act, quad_generator
from geosweep.kernels.quad.stepper import NWC, quad_F, quad_f
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status

QUAD = two_quadrotors()


def _random_state(rng) -> np.ndarray:
    """A random point of the state manifold (unit q_i, tangent ω_i, R_i ∈ SO(3)) at t = 1.3."""
    y = np.zeros((8, 6))
    y[0] = rng.standard_normal(6)
    for r in (1, 3):
        R, _ = np.linalg.qr(rng.standard_normal((3, 3)))
        R *= np.sign(np.linalg.det(R))
        flat = R.ravel()
        y[r] = flat[:6]
        y[r + 1, :3] = flat[6:]
        y[r + 1, 3:] = rng.standard_normal(3)
    for r in (5, 6):
        q = rng.standard_normal(3)
        q /= np.linalg.norm(q)
        q[2] = abs(q[2]) + 0.5  # below the load-free horizon: F_d regular
        q /= np.linalg.norm(q)
        w = rng.standard_normal(3)
        y[r, :3], y[r, 3:] = q, w - (w @ q) * q
    y[7, 0] = 1.3
    return y


def test_generator_of_f_is_the_ambient_field_and_the_action_differentiates_to_it():
    """ψ_*(f(P))|_P = F(P) (measured 9e-17 relative), and the action's central difference in ε
    equals the generator (measured 8.6e-11; spec ≤ 1e-9)."""
    rng = np.random.default_rng(7)
    for _ in range(3):
        y = _random_state(rng)
        f, F, gen = np.empty((8, 6)), np.empty((8, 6)), np.empty((8, 6))
        assert quad_f(y, QUAD.params, np.zeros(NWC), f) == 0
        assert quad_F(y, QUAD.params, np.zeros(NWC), F) == 0
        quad_generator(f, y, gen)
        assert np.abs(gen - F).max() <= 1e-13 * np.abs(F).max()
        X = rng.standard_normal((8, 6))
        X[2] = X[4] = 0.0
        X[7, 1:] = 0.0
        eps = 1e-5
        yp, ym = np.empty((8, 6)), np.empty((8, 6))
        quad_act(eps * X, y, yp)
        quad_act(-eps * X, y, ym)
        quad_generator(X, y, gen)
        assert np.abs((yp - ym) / (2 * eps) - gen).max() <= 1e-9 * max(1.0, np.abs(gen).max())


def test_load_closed_loop_identity():
    """m_y ÿ = m_y g e3 + μ1 + μ2 whatever the direction errors (§4.2; measured 2.2e-16 relative)."""
    rng = np.random.default_rng(8)
    p = QUAD.params
    for _ in range(3):
        y = _random_state(rng)
        cl = np.empty(qm.N_CL)
        assert qm.closed_loop(y, p, cl) == -1
        yd, yd1, yd2 = np.empty(3), np.empty(3), np.empty(3)
        qm.desired(y[7, 0], yd, yd1, yd2)
        Fd = p[qm.P_MY] * (-p[qm.P_KY] * (y[0, :3] - yd) - p[qm.P_KV] * (y[0, 3:] - yd1) + yd2 - [0, 0, p[qm.P_G]])
        mu = sum(p[qm.P_C1 + i] * (Fd @ y[5 + i, :3]) * y[5 + i, :3] for i in range(2))
        lhs = p[qm.P_MY] * cl[qm.C_VDOT : qm.C_VDOT + 3]
        rhs = p[qm.P_MY] * p[qm.P_G] * np.array([0, 0, 1.0]) + mu
        assert np.abs(lhs - rhs).max() <= 1e-13 * np.abs(rhs).max()
        for i in range(2):  # q_i · ω̇_i = 0
            wd = cl[qm.C_W1DOT + 3 * i : qm.C_W1DOT + 3 * i + 3]
            assert abs(wd @ y[5 + i, :3]) <= 1e-13 * np.abs(wd).max()


@pytest.fixture(scope="module")
def paper_run():
    """RKMK4, N = 2000 on [0, 5] (h = 2.5e-3), every step sampled."""
    traj = _integrate(QUAD, "quad_rkmk4", 5.0, 2000)
    return traj, collect(QUAD, "quad_rkmk4", traj).values


def test_closed_loop_reference_values(paper_run):
    """Measured |y − y_d| = 5.11841e-5 (t = 5), 2.93081 (t = 0.5), 9.5509e-2 (t = 2); Ψ(5) =
    3.1e-12, 5.1e-12; max thrust 31.648, 32.040 N at t = 0.4650, 0.4675; min tension 0.1899,
    0.1858 N at t ≈ 1.17 (spec §9.2, §10 item 8)."""
    traj, v = paper_run
    assert traj.status == 0
    t = traj.sample_times
    e = v["e_y"]
    assert v["e_y_final"] == pytest.approx(5.118e-5, rel=1e-3)
    assert e[np.argmin(abs(t - 0.5))] == pytest.approx(2.9308, abs=2e-4)
    assert e[np.argmin(abs(t - 2.0))] == pytest.approx(9.551e-2, rel=1e-3)
    assert (v["psi_final"] <= 1e-11).all()
    np.testing.assert_allclose(v["max_thrust"], [31.65, 32.04], atol=0.01)
    assert (abs(v["max_thrust_time"] - 0.465) <= 0.005).all()
    np.testing.assert_allclose(v["min_tension"], [0.190, 0.186], atol=1e-3)
    assert (v["min_tension"] > 0).all() and (abs(v["min_tension_time"] - 1.17) <= 0.01).all()
    y = v["final_state"][0]
    np.testing.assert_allclose(y[0:3], [2.5000041929, 2.8429807e-6, -0.7500509328], atol=1e-9)
    np.testing.assert_allclose(y[3:6], [0.9999887365, -6.98369e-6, 5.0001924469], atol=1e-9)
    np.testing.assert_allclose(y[30:33], [-3.1353e-6, -0.5000000092, 0.8660253985], atol=1e-9)
    np.testing.assert_allclose(y[15:18], [-0.5331232, 0.2350139, 1.0004787], atol=1e-7)  # Ω1, free_tumble
    np.testing.assert_allclose(y[6:9], [0.5590928, 0.7430027, 0.3679162], atol=1e-7)  # first row of R1


def test_attitude_invariants_of_the_free_modes(paper_run):
    """½ΩᵀJΩ = 0.0829025 and 0.065834 (spec §4.5) kept to 6e-16, RJΩ to 1.3e-14 (measured)."""
    _, v = paper_run
    np.testing.assert_allclose(v["rot_ke"][0], [0.0829025, 0.065834], rtol=1e-5)
    assert (v["max_rot_ke_drift"] <= 1e-13).all() and (v["max_rot_mom_drift"] <= 1e-13).all()


@pytest.fixture(scope="module")
def reference():
    return {mode: two_quadrotors(mode).reference(5.0) for mode in ("free_tumble", "code_const")}


@pytest.mark.parametrize(
    "name, e1000",
    [
        ("quad_lie_euler", 9.530e-3),
        ("quad_lie_euler_heun", 1.541e-5),
        ("quad_rkmk3", 1.256e-7),
        ("quad_rkmk4", 7.990e-10),
        ("quad_cf4", 7.917e-10),
        ("quad_rk4_ambient", 2.562e-7),
    ],
)
def test_orders(reference, name, e1000):
    """free_tumble, N = 500 → 1000 → 2000: measured 9.5299e-3, 1.5405e-5, 1.2555e-7, 7.9902e-10,
    7.9268e-10, 2.5738e-7 at N = 1000; slopes 1.00, 2.00, 3.01, 3.97, 4.02, 3.91."""
    from geosweep.kernels.quad.family import INTEGRATORS

    order = next(i.order for i in INTEGRATORS if i.name == name)
    err = [np.linalg.norm(_integrate(QUAD, name, 5.0, N).S[:42] - reference["free_tumble"]) for N in (500, 1000, 2000)]
    assert err[1] == pytest.approx(e1000, rel=0.03)
    slope = np.log2(err[1] / err[2])
    assert abs(slope - order) <= 0.1


def test_order_code_const(reference):
    """code_const (the attitude dominates): RKMK4 4.8496e-4 at N = 1000 (spec 4.850e-4)."""
    m = two_quadrotors("code_const")
    err = [np.linalg.norm(_integrate(m, "quad_rkmk4", 5.0, N).S[:42] - reference["code_const"]) for N in (1000, 2000)]
    assert err[0] == pytest.approx(4.850e-4, rel=0.03)
    assert abs(np.log2(err[0] / err[1]) - 4) <= 0.1


@pytest.mark.parametrize("name", ["quad_rkmk4", "quad_cf4", "quad_rkmk4_2comm"])
@pytest.mark.parametrize("mode", ["free_tumble", "code_const"])
def test_lie_methods_keep_the_constraints(name, mode):
    """N = 1999 (the paper run): every residual ≤ 1e-13 (measured ≤ 2.3e-14)."""
    m = two_quadrotors(mode)
    v = collect(m, name, _integrate(m, name, 5.0, 1999)).values
    for key in ("max_unit_err", "max_tang_err", "max_orth_err", "max_det_err"):
        assert (v[key] <= 1e-13).all(), (key, v[key])


def test_rk4_ambient_drifts_off_the_constraints():
    """N = 1999: |q_i·ω_i| reaches 1.3e-8 and |1 − q_i·q_i| 2e-9 (spec §9.2), R_iᵀR_i − I 3.3e-6
    with code_const (001 Fig. 18 contrast)."""
    v = collect(QUAD, "quad_rk4_ambient", _integrate(QUAD, "quad_rk4_ambient", 5.0, 1999)).values
    assert 1e-9 <= v["max_tang_err"].max() <= 1e-7
    assert 1e-10 <= v["max_unit_err"].max() <= 1e-8
    m = two_quadrotors("code_const")
    w = collect(m, "quad_rk4_ambient", _integrate(m, "quad_rk4_ambient", 5.0, 1999)).values
    assert w["max_orth_err"].max() >= 1e-7


def test_controller_singular_start_is_a_failure_without_nan():
    """F_d(0) = 0 exactly: the first step fails with status controller_singular (condition 0,
    |F_d| < 1e-6) before any normalisation; the t = 0 sample is finite."""
    m = two_quadrotors(initial="controller_singular")
    traj = start(m, "quad_rkmk4", RunRequest(T=0.1, dt_out=0.01, h=0.01), {})
    traj.advance()
    res = collect(m, "quad_rkmk4", traj)
    v = res.values
    assert res.status == int(Status.CONTROLLER_SINGULAR)
    assert v["fail_step"] == 1 and v["fail_index"] == 0 and v["fail_time"] == 0.0 and v["steps"] == 0
    assert np.isfinite(v["final_state"]).all() and np.isfinite(v["snapshot_state"][0]).all()
    for key in ("e_y", "psi", "thrust", "tension", "unit_err", "energy"):
        assert np.isfinite(v[key][0]).all(), key
    assert v["thrust"][0].tolist() == [0.0, 0.0]  # controls undefined: stored as 0, flagged singular


def test_adaptive_pair_and_every_integrator_runs():
    for name in ("quad_rkmk45", "quad_dopri5_ambient"):
        r = run(QUAD, name, RunRequest(T=5.0, dt_out=0.05, tol=1e-8), {})
        assert r.status == 0 and r.values["e_y_final"] == pytest.approx(5.118e-5, rel=0.01)
    lie = run(QUAD, "quad_rkmk45", RunRequest(T=5.0, dt_out=0.05, tol=1e-8), {}).values
    assert lie["max_unit_err"].max() <= 1e-13 and lie["max_tang_err"].max() <= 1e-13
    for name in ("quad_cf43", "quad_rkmk4_2comm"):
        assert run(QUAD, name, RunRequest(T=0.1, dt_out=0.01, h=0.01), {}).status == 0


def test_feed_forward_derivatives_and_direction_loop_identity():
    """Along the flow (DOP853 from P to P(t ± δ)): central differences of q_id and ω_id,
    Richardson-extrapolated over δ = 1e-4, 5e-5 (the plain ones converge like δ²), equal the
    feed-forward q̇_id and ω̇_id (§4.3; measured ≤ 1.9e-11); the link dynamics give
    ω̇_i = (I − q_i q_iᵀ)[bracket] (§4.4; measured 2.9e-14)."""
    from scipy.integrate import solve_ivp

    traj = _integrate(QUAD, "quad_rkmk4", 0.7, 700)  # a state inside the transient
    x = traj.S[:42].copy()
    t0 = traj.time
    p = QUAD.params

    def cl_at(xx, t):
        y = np.zeros((8, 6))
        y[:7] = xx.reshape(7, 6)
        y[7, 0] = t
        out = np.empty(qm.N_CL)
        assert qm.closed_loop(y, p, out) == -1
        return y, out

    def flow(dt):
        return solve_ivp(QUAD.rhs, (t0, t0 + dt), x, method="DOP853", rtol=1e-13, atol=1e-13).y[:, -1]

    def central(sl, delta):
        return (cl_at(flow(delta), t0 + delta)[1][sl] - cl_at(flow(-delta), t0 - delta)[1][sl]) / (2 * delta)

    y, c = cl_at(x, t0)
    for i in range(2):
        for val, der in ((qm.C_Q1D, qm.C_QDOT_D), (qm.C_W_D, qm.C_WDOT_D)):
            sl = slice(val + 3 * i, val + 3 * i + 3)
            d = (4 * central(sl, 5e-5) - central(sl, 1e-4)) / 3
            ref = c[der + 3 * i : der + 3 * i + 3]
            assert np.abs(d - ref).max() <= 1e-8 * max(1.0, np.abs(ref).max()), (i, val)
        q = y[5 + i, :3]
        brk = c[qm.C_BRK + 3 * i : qm.C_BRK + 3 * i + 3]
        w_dot = c[qm.C_W1DOT + 3 * i : qm.C_W1DOT + 3 * i + 3]
        assert np.abs(w_dot - (brk - (q @ brk) * q)).max() <= 1e-10 * np.abs(brk).max()


def test_free_rest_keeps_the_attitude_and_segments_are_bitwise():
    """free_rest: Ω_i = 0 and M_i = 0 keep R_i = I exactly; a run split at a checkpoint equals one run."""
    from geosweep.kernels.core.trajectory import Trajectory

    m = two_quadrotors("free_rest")
    v = collect(m, "quad_cf4", _integrate(m, "quad_cf4", 1.0, 200)).values
    np.testing.assert_array_equal(v["final_state"][0, 6:15], np.eye(3).ravel())
    req = RunRequest(T=1.0, dt_out=0.05, h=0.005)
    whole = start(QUAD, "quad_rkmk4", req, {})
    whole.advance()
    part = start(QUAD, "quad_rkmk4", req, {})
    part.advance(41)
    part = Trajectory.restore(part.stepper, part.checkpoint())
    part.advance()
    assert np.array_equal(whole.S, part.S) and np.array_equal(whole.out, part.out, equal_nan=True)
