"""Heavy top (001 §3, spec heavy_top_quadrotors §2 and §10 items 1–7): data, vector fields,
orders, invariants and energy behaviour of the three formulations.

Reference values are the spec's (§9.1, measured with an independent NumPy/SciPy prototype);
this implementation's measured values are quoted next to each tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from geosweep.kernels.lie.se3 import exp_act, exp_matrix, generator
from geosweep.kernels.registry import RunRequest
from geosweep.kernels.status import Status
from geosweep.kernels.top import lp, slgi
from geosweep.kernels.top.family import LP, _integrate, collect, run, start
from geosweep.kernels.top.model import E3, hat, heavy_top

TOP = heavy_top()
H0 = 5275.933796782547


def _slopes(errs):
    e = np.asarray(errs)
    return np.log2(e[:-1] / e[1:])


@pytest.fixture(scope="module")
def ref():
    """DOP853 references (rtol = atol = 1e-13): A at T = 0.2, A and B at T = 1."""
    return {"A0.2": TOP.reference(0.2, "A"), "A1": TOP.reference(1.0, "A"), "B1": TOP.reference(1.0, "B")}


# ---- §10 items 1–3: primitives, vector fields, data ---------------------------------------
def test_data_and_invariants_at_t0():
    assert TOP.mgl == pytest.approx(294.3, rel=1e-15)
    np.testing.assert_allclose(TOP.Pi0, [0.0, 70.3125, -1.0817296875], rtol=1e-15)
    assert TOP.energy_B(E3, TOP.Pi0) == pytest.approx(H0, rel=1e-12)
    assert TOP.energy_A(np.eye(3), TOP.Pi0) == pytest.approx(H0, rel=1e-12)
    assert TOP.params[7] == pytest.approx(-1.0817296875, rel=1e-15)  # J3 = C2
    assert TOP.params[8] == 70.3125  # S


def test_coadjoint_action_is_the_ts2_action():
    """(g, u)·(Π, Γ) = Ad*_{(g,u)⁻¹}(Π, Γ) = (gΠ + u × gΓ, gΓ): the se3 kernel with (q, ω) = (Γ, Π).
    Measured 3.7e-16 relative."""
    rng = np.random.default_rng(1)
    for _ in range(5):
        X = rng.standard_normal((1, 6))
        y = rng.standard_normal((1, 6))
        out = np.empty((1, 6))
        exp_act(X, y, out)
        g, u = np.empty((3, 3)), np.empty(3)
        exp_matrix(X[0], g, u)
        Gam, Pi = g @ y[0, :3], g @ y[0, 3:] + np.cross(u, g @ y[0, :3])
        assert np.abs(out[0] - np.concatenate([Gam, Pi])).max() <= 1e-14 * max(1.0, np.abs(out).max())


def test_generator_of_f_B_is_the_lie_poisson_field():
    """ψ_*(f_B)|_(Γ,Π) equals 001 (23)–(24) (measured: identical; the Python form of (23)–(24) agrees to 4.7e-16)."""
    rng = np.random.default_rng(2)
    p = TOP.params
    for _ in range(5):
        y = rng.standard_normal((1, 6)) * [1, 1, 1, 50, 50, 50]
        f, F, gen = np.empty((1, 6)), np.empty((1, 6)), np.empty((1, 6))
        assert lp.top_f(y, p, np.zeros(1), f) == 0 and lp.top_F(y, p, np.zeros(1), F) == 0
        generator(f, y, gen)
        dG, dP = TOP.rhs_B(y[0, :3], y[0, 3:])
        assert np.abs(gen[0] - F[0]).max() <= 1e-13 * np.abs(F).max()
        assert np.abs(F[0] - np.concatenate([dG, dP])).max() <= 1e-13 * np.abs(F).max()


def test_f_A_reproduces_the_canonical_equations_through_eq_12():
    """F = (ω̂Q, f₂ − ad*_ω π) = (ω̂Q, f₂ − π × ω) is 001 (21)–(22); f_C = f_A on p = −MgℓX."""
    rng = np.random.default_rng(3)
    Q, _ = np.linalg.qr(rng.standard_normal((3, 3)))
    Q *= np.sign(np.linalg.det(Q))
    pi = rng.standard_normal(3) * 40
    f = np.empty(12)
    slgi._field(Q, pi, np.zeros(3), TOP.params, 0, f)
    dQ, dpi = TOP.rhs_A(Q, pi)
    np.testing.assert_allclose(hat(f[:3]) @ Q, dQ, atol=1e-13 * np.abs(dQ).max())
    np.testing.assert_allclose(f[3:6] - np.cross(pi, f[:3]), dpi, atol=1e-12 * np.abs(f[3:6]).max())
    fc = np.empty(12)
    slgi._field(Q, pi, -TOP.mgl * TOP.X, TOP.params, 1, fc)
    np.testing.assert_allclose(fc[6:9], f[3:6], rtol=1e-13, atol=1e-12)
    np.testing.assert_allclose(fc[0:3], f[0:3], rtol=1e-15)
    assert not fc[9:].any()


def test_reference_state_at_t1(ref):
    """§9.1 (DOP853 at 2.3e-14); ours at 1e-13 differs by ≤ 1e-10 (spec §1.1)."""
    A, B = ref["A1"], ref["B1"]
    Q = A[:9].reshape(3, 3)
    np.testing.assert_allclose(A[9:], [60.6067685469, -35.6819854793, -1.0817296875], atol=1e-9)
    np.testing.assert_allclose(Q[0], [-0.4055215476, 0.8750798915, 0.2641731590], atol=1e-9)
    np.testing.assert_allclose(B[3:], [1.7467162649, 70.3125, -0.8099053004], atol=1e-9)
    np.testing.assert_allclose(B[:3], [0.5175832287, -0.0183890375, 0.8554352370], atol=1e-9)
    np.testing.assert_allclose(Q @ TOP.X, [0.8750798915, -0.4836290177, -0.0183890375], atol=1e-9)
    np.testing.assert_allclose(Q.T @ E3, B[:3], atol=3e-9)  # A and B agree


# ---- §10 item 4: orders ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "name, errs, last_slope",
    [
        ("slgi0", [1.928e-3, 1.205e-3, 6.671e-4, 3.500e-4], 0.93),
        ("slgi_half", [1.208e-3, 3.028e-4, 7.575e-5, 1.894e-5], 2.00),
        ("slgi1", [4.054e-3, 1.742e-3, 8.016e-4, 3.837e-4], 1.06),
    ],
)
def test_slgi_orders_on_A(ref, name, errs, last_slope):
    """T = 0.2, N = 400 … 3200. Measured 1.9283e-3 … 3.5003e-4 (θ = 0), 1.2080e-3 … 1.8941e-5
    (θ = ½), 4.0542e-3 … 3.8369e-4 (θ = 1): within 0.1 % of the spec."""
    got = [
        np.linalg.norm(_integrate(TOP, name, 0.2 / N, N, stride=N).S[:12] - ref["A0.2"]) for N in (400, 800, 1600, 3200)
    ]
    np.testing.assert_allclose(got, errs, rtol=0.03)
    assert abs(_slopes(got)[-1] - last_slope) <= 0.1


@pytest.mark.parametrize(
    "name, e1600, last_slope",
    [("lp_rkmk4", 1.358e-3, 3.98), ("lp_cf4", 2.470e-3, 3.99), ("lp_rk4_ambient", 2.606e-4, 3.94)],
)
def test_explicit_orders_on_B(ref, name, e1600, last_slope):
    """T = 1, N = 400, 800, 1600. Measured 1.3577e-3 (RKMK4), 2.4696e-3 (CF4), 2.6061e-4 (RK4)."""
    got = [np.linalg.norm(_integrate(TOP, name, 1.0 / N, N, stride=N).S[:6] - ref["B1"]) for N in (400, 800, 1600)]
    assert got[-1] == pytest.approx(e1600, rel=0.03)
    assert abs(_slopes(got)[-1] - last_slope) <= 0.1


@pytest.mark.parametrize(
    "name",
    ["lp_lie_euler_heun", "lp_rkmk3", "lp_rkmk4_2comm", "lp_cf3", "lp_cf43", "lp_rkmk5"],
)
def test_nominal_orders_of_the_other_lie_poisson_methods(name):
    """T = 0.2, N = 400 → 800 → 1600: slopes 2.00, 3.00, 4.00, 3.00, 4.00, 5.01 (measured)."""
    from geosweep.kernels.top.family import INTEGRATORS

    order = next(i.order for i in INTEGRATORS if i.name == name)
    r = TOP.reference(0.2, "B")
    got = [np.linalg.norm(_integrate(TOP, name, 0.2 / N, N, stride=N).S[:6] - r) for N in (400, 800, 1600)]
    assert abs(_slopes(got)[-1] - order) <= 0.1


def test_adaptive_pair_on_B(ref):
    """RKMK(5,4): tol 1e-6 → 1e-8 → 1e-10 gives global errors 1.9e-3, 1.7e-5, 1.7e-7 with the
    Casimirs at round-off (≤ 4e-14); ambient DOPRI5(4) drifts off them (|Γ|² − 1 ≈ 2e-7 at 1e-8)."""
    errs, cas = [], []
    for tol in (1e-6, 1e-8, 1e-10):
        r = run(TOP, "lp_rkmk45", RunRequest(T=1.0, dt_out=0.05, tol=tol), {"blowup": 0.0})
        assert r.status == 0 and r.values["rejected_steps"] >= 0
        errs.append(np.linalg.norm(r.values["final_state"][0, 18:] - ref["B1"]))
        cas.append(max(r.values["max_cas_gamma"], r.values["max_dJ3"]))
    assert errs[0] > 30 * errs[1] > 900 * errs[2]
    assert max(cas) <= 5e-13
    amb = run(TOP, "lp_dopri5_ambient", RunRequest(T=1.0, dt_out=0.05, tol=1e-8), {"blowup": 0.0})
    assert amb.values["max_cas_gamma"] >= 1e-8
    # a long run from the default first trial step (the starting-step rule, not T/100 = 0.6 s,
    # which would turn the body by 90 rad, outside the exact dexp⁻¹)
    long = run(TOP, "lp_rkmk45", RunRequest(T=60.0, dt_out=0.5, tol=1e-6), {"blowup": 0.0})
    assert long.status == 0 and long.values["max_cas_gamma"] <= 5e-13


# ---- §10 items 5–7: geometry, energy, SLGIKK ---------------------------------------------------
@pytest.fixture(scope="module")
def long_slgi():
    """h = 0.01, 6000 steps (T = 60, 001 Fig. 3), every step sampled."""
    return {
        name: run(TOP, name, RunRequest(T=60.0, dt_out=0.01, h=0.01), {"blowup": 0.0}).values
        for name in ("slgi0", "slgi_half", "slgi1")
    }


def test_slgi_energy_bounded_without_drift(long_slgi):
    """θ = ½: max|ΔH|/H0 3.1940e-5 (spec 3.19e-5), means over the first/last 10 % (after t = 0)
    −1.63593e-5 / −1.63592e-5. θ = 0: 3.7191e-3 (spec 3.72e-3), means 1.0447e-3 / 1.0456e-3."""
    half, zero, one = long_slgi["slgi_half"], long_slgi["slgi0"], long_slgi["slgi1"]
    assert half["max_rel_energy_error"] == pytest.approx(3.19e-5, rel=0.05)
    assert abs(half["drift_last10"] - half["drift_first10"]) <= 1e-8
    assert zero["max_rel_energy_error"] == pytest.approx(3.72e-3, rel=0.05)
    assert abs(zero["drift_last10"] - zero["drift_first10"]) <= 1e-5
    assert one["max_rel_energy_error"] == pytest.approx(3.72e-3, rel=0.05)
    assert abs(one["drift_last10"] - one["drift_first10"]) <= 1e-5


def test_slgi_invariants_and_newton(long_slgi):
    """J3 ≤ 8.5e-13, S ≤ 1.5e-12, orth ≤ 2.6e-14 (measured); Newton 4.6–5.0 iterations per step
    (spec 4.8–5.4), at most 7."""
    for v in long_slgi.values():
        assert v["max_dJ3"] <= 1e-11 and v["max_dS"] <= 1e-11
        assert v["max_orth"] <= 1e-13 and v["max_det_error"] <= 1e-13 and v["max_cas_gamma"] <= 1e-13
        assert 3.0 <= v["newton_mean"] <= 6.0 and v["solver_iterations_max"] <= 10
        assert np.isfinite(v["final_state"][0, :12]).all() and np.isnan(v["final_state"][0, 12:18]).all()


def test_lie_poisson_casimirs_at_round_off_while_energy_and_spin_drift():
    """h = 0.005, 12 000 steps: |C1 − 1| 1.8e-14, |C2 − C2(0)| 3.9e-14 (RKMK4), 2.3e-14 and 9.3e-14 (CF4);
    ΔH/H0 drifts (RKMK4 −7.0e-4 → 1.66e-3, spec the same) and S is not kept (0.12, CF4 5.3)."""
    for name in ("lp_rkmk4", "lp_cf4"):
        v = run(TOP, name, RunRequest(T=60.0, dt_out=0.05, h=0.005), {"blowup": 0.0}).values
        assert v["max_cas_gamma"] <= 5e-13 and v["max_dJ3"] <= 5e-13
        assert v["max_dS"] >= 1e-3
        assert abs(v["drift_last10"] - v["drift_first10"]) >= 1e-3
        assert np.isnan(v["max_orth"]) and np.isnan(v["final_state"][0, :18]).all()


def test_explicit_energy_drift_is_linear_and_order_five_like():
    """RKMK4 on B, h = 6.25e-4, T = 60: ΔH/H0(60) = −8.6376e-6 (spec −8.64e-6); linear in t
    (residual of a straight-line fit 0.12 % of the drift)."""
    v = run(TOP, "lp_rkmk4", RunRequest(T=60.0, dt_out=0.5, h=6.25e-4), {"blowup": 0.0}).values
    e = v["rel_energy_error"]
    assert e[-1] == pytest.approx(-8.6e-6, rel=0.10)
    t = np.arange(len(e)) * 0.5
    fit = np.polyval(np.polyfit(t, e, 1), t)
    assert np.abs(e - fit).max() <= 0.02 * abs(e[-1])


def test_explicit_methods_drift_at_the_paper_step():
    """h = 0.01: ΔH/H0 ends at 0.189 (RKMK4) and 0.164 (CF4); the SLGI stays at 3.2e-5."""
    for name in ("lp_rkmk4", "lp_cf4"):
        v = run(TOP, name, RunRequest(T=60.0, dt_out=0.05, h=0.01), {"blowup": 0.0}).values
        assert 0.1 <= v["rel_energy_error"][-1] <= 0.25
        assert v["max_cas_gamma"] <= 5e-13


def test_rk4_ambient_collapses_gamma():
    """RK4 on the ambient R⁶ at h = 0.01 damps the 150 rad/s rotation: |Γ|² − 1 reaches −0.999."""
    v = run(TOP, "lp_rk4_ambient", RunRequest(T=60.0, dt_out=0.05, h=0.01), {"blowup": 0.0}).values
    assert v["max_cas_gamma"] >= 0.99


def test_slgikk_reproduces_slgi_half():
    """600 steps at h = 0.01: (Q, π) agree to 0 (bitwise here; spec ≤ 1e-11), p stays constant,
    H_C − H_A = ½(Mgℓ)² = 43306.245; q drifts like −MgℓX t."""
    a = _integrate(TOP, "slgi_half", 0.01, 600)
    b = _integrate(TOP, "slgikk_half", 0.01, 600)
    assert np.abs(a.S[:12] - b.S[:12]).max() <= 1e-11 * np.abs(a.S[:12]).max()
    np.testing.assert_array_equal(b.S[15:18], -TOP.mgl * TOP.X)
    assert b.out[0, 0] - a.out[0, 0] == pytest.approx(0.5 * TOP.mgl**2, rel=1e-14)
    assert b.S[13] == pytest.approx(-TOP.mgl * 6.0, rel=0.01)


# ---- failure path and resumability -------------------------------------------------------------
def test_newton_nonconvergence_is_a_status():
    req = RunRequest(T=0.1, dt_out=0.01, h=0.01)
    traj = start(TOP, "slgi_half", req, {"maxit": 1})
    traj.advance()
    res = collect(TOP, "slgi_half", traj)
    assert res.status == int(Status.NONCONVERGED)
    v = res.values
    assert v["fail_step"] == 1 and v["fail_time"] == 0.0 and v["steps"] == 0
    np.testing.assert_array_equal(v["final_state"][0, :9], np.eye(3).ravel())  # last valid state
    assert np.isfinite(v["energy"][0]) and np.isnan(v["energy"][1:]).all()
    assert np.isfinite(v["max_rel_energy_error"])


@pytest.mark.parametrize("name", ["slgi_half", "lp_rkmk4"])
def test_segments_and_checkpoints_are_bitwise(name):
    from geosweep.kernels.core.trajectory import Trajectory

    req = RunRequest(T=1.0, dt_out=0.1, h=0.01)
    whole = start(TOP, name, req, {})
    whole.advance()
    part = start(TOP, name, req, {})
    part.advance(37)
    saved = part.checkpoint()
    part = Trajectory.restore(part.stepper, saved)
    part.advance()
    assert np.array_equal(whole.S, part.S) and np.array_equal(whole.out, part.out, equal_nan=True)


def test_every_declared_integrator_runs():
    for name in LP:
        adaptive = LP[name].adaptive
        req = RunRequest(T=0.02, dt_out=0.01, tol=1e-6) if adaptive else RunRequest(T=0.02, dt_out=0.01, h=0.005)
        assert run(TOP, name, req, {}).status == 0, name
