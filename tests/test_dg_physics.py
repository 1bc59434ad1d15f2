"""Physics of the discrete-gradient family (paper 004, spec lie_group_integrators §6–7).

Discrete gradients satisfy their defining identities; the schemes keep H to round-off over 10⁴
steps (the spec's §7 reference: ~2e-14 at h = 0.01 to T = 100 on the quartic system), have
order 2 (AVF, Gonzalez) and 1 (Itoh–Abe); reduced forms keep the constraint, the canonical
multiplier form (GONZALEZ-F) does not; S(x̄) keeps Lie–Poisson Casimirs; the sleigh leaves its
unstable equilibrium for the stable one (Prop. 4.1); RK4 drifts."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import solve_ivp

from geosweep.kernels.dg import family as F
from geosweep.kernels.dg import systems as S
from geosweep.kernels.dg.gradients import AVF, GONZALEZ, ITOH_ABE, MIDPOINT, discrete_gradient, gauss_legendre
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status


def _run(model, name, T, h=None, tol=None, dt_out=None, **options):
    req = RunRequest(T=T, dt_out=dt_out or T / 10, h=h, tol=tol)
    return F.run(model, name, req, options)


def _dg(model, kind, x, xn, s=6):
    c, w = gauss_legendre(s)
    g, y, t = np.zeros(model.N), np.zeros(model.N), np.zeros(model.N)
    discrete_gradient(model.cb, model.params, kind, c, w, s, x, xn, g, y, t)
    return g


@pytest.mark.parametrize("model", [S.quartic(), S.gearbox("reduced"), S.gearbox("canonical"), S.rigid_body()],
                         ids=lambda m: m.name)  # fmt: skip
def test_discrete_gradient_definition(model):
    """∇̄H(x, x')·(x' − x) = H(x') − H(x) and ∇̄H(x, x) = ∇H(x); S skew; ∇H matches H."""
    rng = np.random.default_rng(3)
    x = model.x0 + 0.1 * rng.standard_normal(model.N)
    assert model.gradient_fd_error(x) < 1e-8
    Sx = model.S(x)
    assert np.array_equal(Sx, -Sx.T)
    g0 = model.gradH(x)
    for scale in (0.3, 1e-3, 1e-9):
        xn = x + scale * rng.standard_normal(model.N)
        dH = model.H(xn) - model.H(x)
        for kind in (AVF, GONZALEZ, ITOH_ABE):
            g = _dg(model, kind, x, xn)
            # AVF (s = 6) is exact for the polynomial H of the rigid body; the quartic system's H is
            # rational (the kinetic term) and the gearbox's trigonometric: quadrature error there
            quad = 1e-12 * scale if kind == AVF and model.name != "rigid_body" else 0.0
            assert abs(g @ (xn - x) - dH) <= 1e-15 * (1 + abs(model.H(x))) + quad, (kind, scale)
    for kind in (AVF, GONZALEZ, ITOH_ABE, MIDPOINT):
        np.testing.assert_allclose(_dg(model, kind, x, x.copy()), g0, rtol=0, atol=1e-14)


def test_quartic_energy_round_off_over_1e4_steps_and_rk4_drift():
    """Spec §7.1: relative energy error ~2e-14 over T = 100 at h = 0.01 (10⁴ steps) for Gonzalez
    and AVF (s = 6, exact for this quartic H); Itoh–Abe too. Constraint at round-off. RK4 is not
    energy preserving and its error grows with time."""
    m = S.quartic()
    assert abs(m.H(m.x0) - 3.06) < 1e-14
    for name in ("dg_gonzalez", "dg_avf", "dg_itoh_abe"):
        v = _run(m, name, 100.0, h=0.01).values
        assert v["steps"] == 10_000 and v["fail_step"] == -1
        assert v["max_rel_energy_error"] <= 1e-13, name
        assert v["max_constraint_error"] <= 1e-15
        assert 2.0 <= v["newton_iterations_mean"] <= 8.0 and v["nonconverged_steps"] == 0
    rk4 = _run(m, "rk4_skew", 100.0, h=0.01).values
    assert rk4["max_rel_energy_error"] > 1e-10
    mid = _run(m, "implicit_midpoint", 100.0, h=0.01).values  # not a discrete gradient for quartic H
    assert mid["max_rel_energy_error"] > 1e-7


def test_observed_orders_on_the_quartic_system():
    """Global error at T = 1 against DOPRI5 at tol 1e-14: order 2 (AVF, Gonzalez), 1 (Itoh–Abe)."""
    m = S.quartic()
    ref = _run(m, "dopri5_skew", 1.0, tol=1e-14).values["final_state"][0]
    want = {"dg_avf": 2.0, "dg_gonzalez": 2.0, "dg_itoh_abe": 1.0, "implicit_midpoint": 2.0, "rk4_skew": 4.0}
    for name, p in want.items():
        e = [np.abs(_run(m, name, 1.0, h=h).values["final_state"][0] - ref).max() for h in (0.02, 0.01)]
        assert abs(np.log2(e[0] / e[1]) - p) < 0.1, (name, e)


def test_reduced_quartic_field_is_the_constrained_lagrangian_dynamics():
    """The adapted-coordinate field (Π of eq. (8), signs derived) reproduces q(t) of the
    Lagrange–d'Alembert equations q̈ = −∇V + λμ, μ·q̇ = 0 integrated in canonical coordinates."""
    n = 3
    m = S.quartic(n)
    nq = 2 * n + 1

    def dV(q):
        w, z = q[1 : 1 + n], q[1 + n :]
        g = np.concatenate([[q[0]], w + w * z**2, z + w**2 * z])
        g[1 + n] += z[0] * z[1] ** 2
        g[2 + n] += z[0] ** 2 * z[1]
        return g

    def canonical(t, y):
        q, v = y[:nq], y[nq:]
        mu = np.concatenate([[1.0], np.zeros(n), q[1 : 1 + n]])
        lam = (mu @ dV(q) - v[1 : 1 + n] @ v[1 + n :]) / (mu @ mu)
        return np.concatenate([v, -dV(q) + lam * mu])

    qdot = m.f(m.x0)[:nq]
    kw = dict(method="DOP853", rtol=1e-12, atol=1e-12)
    a = solve_ivp(canonical, (0, 2), np.concatenate([m.x0[:nq], qdot]), **kw).y[:nq, -1]
    b = solve_ivp(lambda t, x: m.f(x), (0, 2), m.x0, **kw).y[:nq, -1]
    assert np.abs(a - b).max() < 1e-10


def test_gearbox_reduced_keeps_the_constraint_canonical_does_not():
    """004 §4.4 (h = 0.1, 10⁴ steps): GONZALEZ-R (analytic or QR basis) and GONZALEZ-F hold H to round-off;
    |p1 + sin(q3) p2| stays at round-off for GONZALEZ-R and not for GONZALEZ-F; RK4 drifts."""
    red, can = S.gearbox("reduced"), S.gearbox("canonical")
    assert abs(red.H(red.x0) - can.H(can.x0)) < 1e-15
    r = _run(red, "dg_gonzalez", 1000.0, h=0.1).values
    f = _run(can, "dg_gonzalez", 1000.0, h=0.1).values
    for v in (r, f):
        assert v["steps"] == 10_000 and v["max_rel_energy_error"] < 1e-13
    assert r["max_constraint_error"] < 1e-15
    assert f["max_constraint_error"] > 1e-4
    # GONZALEZ-R through the Householder basis and a finite-difference ∂X (spec §6): the same
    qr = _run(S.gearbox("qr"), "dg_gonzalez", 1000.0, h=0.1).values
    assert qr["max_rel_energy_error"] < 1e-13 and qr["max_constraint_error"] < 1e-15
    assert np.abs(qr["final_state"][0, :3] - r["final_state"][0, :3]).max() < 1e-6
    rk4 = _run(red, "rk4_skew", 1000.0, h=0.1, dt_out=100.0).values["rel_energy_error"]
    assert abs(rk4[-1]) > 5 * abs(rk4[1]) > 1e-6  # grows ~linearly with t
    # the two forms are the same motion: q(T) agrees, to O(h²)
    gap = []
    for h in (0.002, 0.001):
        qr = _run(red, "dg_gonzalez", 2.0, h=h).values["final_state"][0, :3]
        qc = _run(can, "dg_gonzalez", 2.0, h=h).values["final_state"][0, :3]
        gap.append(np.abs(qr - qc).max())
    assert gap[1] < 1e-6 and 3.5 < gap[0] / gap[1] < 4.5


@pytest.mark.parametrize("rho1", [0.001, -0.001])
def test_sleigh_leaves_the_unstable_equilibrium(rho1):
    """004 §4.2 / spec §7.2: J = 8, a = m = 1, h = 0.5, 400 steps from ρ2 = −0.6: ρ2 → 0.599996,
    |ρ1| = 2.3e-3 and decaying at the rate λ1 = (2 − hCρ2)/(2 + hCρ2) of Prop. 4.1, |ΔH| ~ 1e-16.
    All discrete gradients coincide with the midpoint rule (Remark 3.2: H quadratic)."""
    m = S.sleigh(rho1=rho1)
    finals = {}
    for name in ("dg_avf", "dg_gonzalez", "dg_itoh_abe", "implicit_midpoint"):
        v = _run(m, name, 200.0, h=0.5, dt_out=0.5).values
        assert v["steps"] == 400 and v["max_abs_energy_error"] < 1e-15
        finals[name] = v["final_state"][0]
    x = finals["dg_gonzalez"]
    assert round(x[4], 6) == 0.599996
    # {ρ1 = 0} is invariant, so ρ1 keeps its sign (the spec's "∓" cannot hold)
    assert abs(abs(x[3]) - 2.3e-3) < 0.05e-3 and np.sign(x[3]) == np.sign(rho1)
    for y in finals.values():
        np.testing.assert_allclose(y, x, rtol=0, atol=1e-12)
    C = m.info["C"]
    lam = (2 - 0.5 * C * 0.6) / (2 + 0.5 * C * 0.6)
    tail = _run(m, "dg_gonzalez", 201.0, h=0.5, dt_out=0.5).values["final_state"][0]
    assert abs(tail[3] / x[3] - lam**2) < 1e-4  # two more steps: asymptotically stable in ρ1, at λ1 per step


def test_casimir_kept_by_s_of_the_midpoint_and_energy_by_discrete_gradients():
    """Lie–Poisson S (rigid body with a quartic term): ½|m|² is kept to round-off by every S(x̄)
    scheme (spec §6, derived); H only by the discrete gradients; RK4 keeps neither."""
    m = S.rigid_body()
    for name in ("dg_avf", "dg_gonzalez", "dg_itoh_abe", "implicit_midpoint"):
        v = _run(m, name, 100.0, h=0.05).values
        assert v["max_casimir_error"] < 2e-14, name
        assert (v["max_rel_energy_error"] < 1e-14) == (name != "implicit_midpoint"), name
    rk4 = _run(m, "rk4_skew", 100.0, h=0.05).values
    assert rk4["max_casimir_error"] > 1e-9 and rk4["max_rel_energy_error"] > 1e-9


def test_rolling_disk_and_suslov():
    """Rolling disk: the scheme is the midpoint rule, ρ constant, constraints exact; Suslov: H kept."""
    d = S.rolling_disk()
    v = _run(d, "dg_gonzalez", 50.0, h=0.1).values
    x = v["final_state"][0]
    assert v["max_abs_energy_error"] == 0.0 and v["max_constraint_error"] < 1e-15
    np.testing.assert_array_equal(x[4:], d.x0[4:])
    J = d.params
    np.testing.assert_allclose(x[2], 50.0 * d.x0[5] / J[2], rtol=1e-13)  # θ = ρ2 t / Jθ
    s = S.suslov()
    for name in ("dg_gonzalez", "dg_itoh_abe"):
        assert _run(s, name, 50.0, h=0.1).values["max_rel_energy_error"] < 1e-14


def test_nonconverged_step_ends_the_run_with_its_residual_and_fixed_point_option():
    """maxit = 1 cannot converge: status nonconverged at step 1, residual recorded; the fixed-point
    solver reaches the same states as Newton with more iterations (spec §6: 9.8 vs 6.3)."""
    m = S.quartic()
    bad = _run(m, "dg_gonzalez", 1.0, h=0.01, maxit=1)
    v = bad.values
    assert bad.status == int(Status.NONCONVERGED) and v["fail_step"] == 1 and v["nonconverged_steps"] == 1
    assert 0.0 < v["nonconverged_residual"] < 1e-3 and v["steps"] == 0
    np.testing.assert_array_equal(v["final_state"][0], m.x0)
    newton = _run(m, "dg_gonzalez", 1.0, h=0.01).values
    fixed = _run(m, "dg_gonzalez", 1.0, h=0.01, solver="fixed_point").values
    np.testing.assert_allclose(fixed["final_state"], newton["final_state"], rtol=0, atol=1e-12)
    assert fixed["newton_iterations_mean"] > newton["newton_iterations_mean"]
    with pytest.raises(ValueError, match="solver"):
        _run(S.gearbox("canonical"), "dg_gonzalez", 1.0, h=0.1, solver="fixed_point")


def test_dopri5_tolerance_and_dense_output():
    """DOPRI5(4): error falls with tol; dense-output samples agree with a fine fixed-step run."""
    m = S.gearbox("reduced")
    errs = [_run(m, "dopri5_skew", 20.0, tol=tol, dt_out=0.5).values["max_rel_energy_error"] for tol in (1e-5, 1e-8)]
    assert errs[1] < 1e-2 * errs[0]
    a = _run(m, "dopri5_skew", 20.0, tol=1e-10, dt_out=0.01).values
    b = _run(m, "rk4_skew", 20.0, h=0.002, dt_out=0.01).values
    assert a["steps"] < 0.5 * a["energy"].size  # several samples per step: dense output
    np.testing.assert_allclose(a["energy"], b["energy"], rtol=0, atol=1e-8)


def test_pendulum_chain_in_lie_poisson_form():
    """Spec pendulum_chain §4 / §6 (N = 3, random masses, T = 1, h = 0.01): the (q, π) form has the
    chain's energy and velocities; Gonzalez keeps H (≤ 1.7e-12 in the spec) and both Casimirs
    (≤ 2e-14), Itoh–Abe too; order 2; the 20-link chain starts at E0 = 2891.71067992 (spec §5)."""
    from geosweep.kernels.chain.model import dense_energy, dense_F
    from geosweep.kernels.dg.chain_lp import chain_lp

    m = chain_lp(3, masses="random", ic="random")
    ch = m.info["chain"]
    assert abs(m.H(m.x0) - dense_energy(ch, ch.y0)) < 1e-12
    assert np.abs(m.f(m.x0)[:9].reshape(3, 3) - dense_F(ch, ch.y0)[:, :3]).max() < 1e-14
    assert m.gradient_fd_error(m.x0 + 0.01) < 1e-8
    for name in ("dg_gonzalez", "dg_itoh_abe"):
        v = _run(m, name, 1.0, h=0.01).values
        assert v["max_rel_energy_error"] < 2e-12 and v["max_casimir_error"] < 2e-14, name
    ref = _run(m, "dopri5_skew", 0.4, tol=1e-13).values["final_state"][0]
    e = [np.abs(_run(m, "dg_gonzalez", 0.4, h=h).values["final_state"][0] - ref).max() for h in (0.02, 0.01)]
    assert abs(np.log2(e[0] / e[1]) - 2.0) < 0.1
    assert abs(chain_lp(20).H(chain_lp(20).x0) - 2891.71067992) < 1e-7
    # the O(N) solve of R̃ω = π against the dense LU, off the sphere (|q_i| in [0.3, 1.7])
    from geosweep.kernels.dg.chain_lp import _omega, omega_dense

    m20 = chain_lp(20, masses="random", ic="random")
    rng = np.random.default_rng(7)
    x = m20.x0.copy()
    x[:60] *= np.repeat(rng.uniform(0.3, 1.7, 20), 3)
    x[60:] += rng.standard_normal(60)
    a, b = np.zeros(60), np.zeros(60)
    assert _omega(x, m20.params, a) == 0 and omega_dense(x, m20.params, b) == 0
    assert np.abs(a - b).max() < 1e-13 * np.abs(b).max()


@pytest.mark.slow
def test_gearbox_fig4_to_t_50000():
    """004 Fig. 4 at full length (5·10⁵ steps of h = 0.1): GONZALEZ-R and GONZALEZ-F keep H to
    round-off (random walk of ε per step), R keeps the constraint, F does not; RK4 drifts."""
    red, can = S.gearbox("reduced"), S.gearbox("canonical")
    r = _run(red, "dg_gonzalez", 50_000.0, h=0.1, dt_out=100.0).values
    f = _run(can, "dg_gonzalez", 50_000.0, h=0.1, dt_out=100.0).values
    assert r["max_rel_energy_error"] < 2e-12 and f["max_rel_energy_error"] < 2e-12
    assert r["max_constraint_error"] < 1e-15 < 1e-4 < f["max_constraint_error"]
    rk4 = _run(red, "rk4_skew", 50_000.0, h=0.1, dt_out=100.0).values
    assert rk4["max_rel_energy_error"] > 1e-2
