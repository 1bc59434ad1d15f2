"""Physics acceptance tests of the (S²)ⁿ systems (spec sphere.md §4, criteria A1–A3, A6, A8).

Reference numbers are the spec's "ours" values; the measured values of this implementation
are quoted next to each tolerance.
"""

from __future__ import annotations

import types

import numpy as np
import pytest

from geosweep.kernels.s2.integrate import _integrate
from geosweep.kernels.s2.model import gradient_fd_error, momentum_map, normalise_and_project
from geosweep.kernels.systems.catalogue import double_spherical_pendulum, elastic_rod, spring_pendula
from geosweep.kernels.systems.icosphere import icosphere
from geosweep.kernels.systems.lj_sphere import lj_sphere

E3 = np.array([0.0, 0.0, 1.0])


def _rel(x: float, ref: float) -> float:
    return abs(x / ref - 1.0)


def _a1_bound(n_steps: int) -> float:
    """A1: max_k u_k ≤ 1e-14 (1 + sqrt(N))."""
    return 1e-14 * (1.0 + np.sqrt(n_steps))


def _a2_bound(system, tr) -> float:
    """A2: max_k τ_k ≤ 1e-12 max(1, max|ω|) (max|ω| from the initial and final states)."""
    _, w0 = system.initial_state()
    wmax = max(np.linalg.norm(w0, axis=1).max(), np.linalg.norm(tr.w, axis=1).max())
    return 1e-12 * max(1.0, wmax)


def _near_sphere(rng, n: int, spread: float = 0.05) -> np.ndarray:
    q = rng.standard_normal((n, 3))
    q /= np.linalg.norm(q, axis=1)[:, None]
    return q * (1.0 + spread * rng.uniform(-1.0, 1.0, (n, 1)))


# --------------------------------------------------------------------------------------
# A8: gradients
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "build",
    [
        double_spherical_pendulum,
        lambda: double_spherical_pendulum(l1=1.0, l2=1.0, g=1.0),
        spring_pendula,
        elastic_rod,
        lambda: elastic_rod(rod_inertia_mode="derived", n=4, kick_rod=2),
    ],
    ids=["ex1", "ex1_unit", "ex3", "ex4", "ex4_n4"],
)
def test_a8_gradient_fd(build):
    """Measured: 3e-11 (Ex. 1), 4e-11…2e-10 (Ex. 3), 3e-10…5e-10 (Ex. 4)."""
    s = build()
    rng = np.random.default_rng(8)
    for _ in range(3):
        assert gradient_fd_error(s, _near_sphere(rng, s.n)) <= 1e-6


@pytest.mark.parametrize("level", [1, 2])
def test_a8_gradient_fd_lj(level):
    """LJ on perturbed icosphere vertices (random points on the sphere would put pairs at
    r ≪ σ). Measured 5.6e-10…5.8e-10."""
    s = lj_sphere(level=level)
    v, _ = icosphere(level)
    rng = np.random.default_rng(level)
    q = v * (1.0 + 0.02 * rng.uniform(-1, 1, (len(v), 1))) + 0.01 * rng.standard_normal(v.shape)
    assert gradient_fd_error(s, q) <= 1e-6


def test_a8_fd_helper_detects_a_wrong_gradient():
    """The helper itself must fail a gradient that is off by 1e-4 (relative) in one entry."""
    s = spring_pendula()
    rng = np.random.default_rng(0)
    q = _near_sphere(rng, s.n)

    def wrong(qq):
        V, g = s.potential_and_gradient(qq)
        g = g.copy()
        g[2, 1] += 1e-4 * np.abs(g).max()
        return V, g

    assert gradient_fd_error(s, q) <= 1e-6
    assert gradient_fd_error(types.SimpleNamespace(potential_and_gradient=wrong), q) >= 5e-5


def test_a8_lj_rotation_invariance():
    """Σ q_i × g_i = 0 (measured 1e-14 against Σ|q_i × g_i| = 240) and V(Rq) = V(q)."""
    s = lj_sphere(level=2)
    v, _ = icosphere(2)
    rng = np.random.default_rng(3)
    q = v + 0.01 * rng.standard_normal(v.shape)
    V, g = s.potential_and_gradient(q)
    torques = np.cross(q, g)
    assert np.abs(torques.sum(axis=0)).max() <= 1e-13 * np.abs(torques).sum()
    assert np.abs(torques).sum() > 1.0  # the individual torques are not small
    A = rng.standard_normal((3, 3))
    R, _ = np.linalg.qr(A)
    VR, gR = s.potential_and_gradient(q @ R.T)
    assert abs(VR - V) <= 1e-13 * abs(V)
    assert np.abs(gR - g @ R.T).max() <= 1e-12 * np.abs(g).max()  # equivariant gradient


def test_a8_ex1_axis_invariance():
    """Gravity along e3: only the e3 component of Σ q_i × g_i vanishes."""
    s = double_spherical_pendulum()
    rng = np.random.default_rng(1)
    q = _near_sphere(rng, 2, spread=0.0)
    _, g = s.potential_and_gradient(q)
    tot = np.cross(q, g).sum(axis=0)
    assert abs(tot @ E3) <= 1e-13 * np.abs(tot).max()
    assert np.abs(tot[:2]).max() > 1.0


def test_symmetry_declarations():
    assert double_spherical_pendulum().symmetry == "axis"
    assert np.array_equal(double_spherical_pendulum().axis, E3)
    assert lj_sphere(level=1).symmetry == "full"
    assert spring_pendula().symmetry == "none" and elastic_rod().symmetry == "none"
    assert spring_pendula().is_diagonal and lj_sphere(level=1).is_diagonal
    assert not double_spherical_pendulum().is_diagonal and not elastic_rod().is_diagonal


def test_momentum_map_is_sum_of_pi():
    """J = Σ_i π_i with π_i = M_ii ω_i − q_i × Σ_{j≠i} M_ij (q_j × ω_j) (§1.3/§1.4), coupled M."""
    s = elastic_rod(n=4, kick_rod=2)
    rng = np.random.default_rng(5)
    q, w = normalise_and_project(_near_sphere(rng, 4, 0.0), rng.standard_normal((4, 3)))
    pi = np.empty_like(w)
    for i in range(4):
        s_ = sum(s.M[i, j] * np.cross(q[j], w[j]) for j in range(4) if j != i)
        pi[i] = s.M[i, i] * w[i] - np.cross(q[i], s_)
    assert np.abs(momentum_map(s.M, q, w) - pi.sum(axis=0)).max() <= 1e-14 * np.abs(pi).max()
    assert np.abs(pi.sum(axis=0)).max() > 0.1 * np.abs(pi).max()


# --------------------------------------------------------------------------------------
# Ex. 1: double spherical pendulum, implicit VI, h = 0.01, T = 100
# --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ex1_runs():
    out = {}
    for scale in (9.81, 1.0):
        s = double_spherical_pendulum(l1=scale, l2=scale, g=scale)
        out[scale] = (s, _integrate(s, "implicit_vi", 0.01, 10_000, stride=10))
    return out


@pytest.mark.parametrize(
    "scale, mean_ref, e0_ref",
    [(9.81, 2.0734e-3, -72.1803), (1.0, 2.1545e-5, -0.75003)],
)
def test_ex1_a3_energy(ex1_runs, scale, mean_ref, e0_ref):
    """Measured 2.07336e-3 and 2.15446e-5 (spec ours 2.0734e-3 / 2.1545e-5; paper 2.1641e-5)."""
    s, tr = ex1_runs[scale]
    assert tr.status == 0 and tr.info["steps_done"] == 10_000
    assert _rel(tr.summary["mean_abs_dE"], mean_ref) <= 0.10
    assert abs(tr.summary["E0"] - e0_ref) <= 1e-4 * abs(e0_ref)


def test_ex1_energy_scaling(ex1_runs):
    """Motion depends only on g/l; energies scale by l²: ratio 9.81² (measured 96.23607)."""
    a, b = ex1_runs[9.81][1], ex1_runs[1.0][1]
    assert _rel(a.summary["mean_abs_dE"] / b.summary["mean_abs_dE"], 9.81**2) <= 1e-5
    assert _rel(a.summary["E0"] / b.summary["E0"], 9.81**2) <= 1e-12


@pytest.mark.parametrize("scale", [9.81, 1.0])
def test_ex1_a1_a2_a6(ex1_runs, scale):
    """Measured max u 2.2e-14 / 1.2e-14 (bound 1.0e-12), τ 5.6e-16, relative e3·J drift
    1.0e-10 / 8.9e-11 (bound 1e-9)."""
    s, tr = ex1_runs[scale]
    assert tr.summary["max_unit_error"] <= _a1_bound(10_000)
    assert tr.summary["mean_unit_error"] <= 2e-14
    assert tr.summary["max_tangency_error"] <= _a2_bound(s, tr)
    q, w = s.initial_state()
    j0 = momentum_map(s.M, q, w) @ E3
    assert abs(j0 - 144.35 * scale**2 / 9.81**2) <= 0.01 * scale**2
    assert tr.summary["max_momentum_error"] / abs(j0) <= 1e-9
    assert np.abs(tr.momentum @ E3 - j0).max() / abs(j0) <= 1e-9
    # the full J is not conserved (gravity breaks the symmetry): the check is not vacuous
    assert np.abs(tr.momentum[:, :2] - tr.momentum[0, :2]).max() > 1e-3 * abs(j0)


def test_ex1_picard_iterations(ex1_runs):
    """Spec: 6–7 iterations per step. Measured: max 7, mean 5.49 (this code counts every
    linear solve, including the one that meets the tolerance)."""
    tr = ex1_runs[9.81][1]
    assert 6 <= tr.info["solver_iterations_max"] <= 7
    assert 5.0 <= tr.info["solver_iterations"] / tr.info["steps_done"] <= 7.0


# --------------------------------------------------------------------------------------
# Ex. 3: spring-connected pendula, explicit VI, h = 0.005, T = 20
# --------------------------------------------------------------------------------------
def test_ex3_a1_a2_a3():
    """Measured mean|ΔE| 3.62035e-5 (spec 3.6204e-5), E0 −0.3123560, mean u 2.7e-15,
    max u 4.6e-15 (bound 6.4e-13), τ 2.0e-14 (bound 1.1e-11)."""
    s = spring_pendula()
    tr = _integrate(s, "explicit_vi", 0.005, 4000, stride=40)
    assert tr.status == 0
    assert _rel(tr.summary["mean_abs_dE"], 3.6204e-5) <= 0.10
    assert abs(tr.summary["E0"] - (-0.312356)) <= 1e-6
    assert tr.summary["mean_unit_error"] <= 1e-14
    assert tr.summary["max_unit_error"] <= _a1_bound(4000)
    assert tr.summary["max_tangency_error"] <= _a2_bound(s, tr)
    assert np.isnan(tr.summary["max_momentum_error"])  # no symmetry, no momentum metric


# --------------------------------------------------------------------------------------
# Ex. 4: elastic rod, implicit VI, h = 1e-4, T = 3 — chaotic, so an ensemble
# --------------------------------------------------------------------------------------
EX4_SEED = 20240611
EX4_ENSEMBLE = 6


@pytest.fixture(scope="module")
def ex4_ensemble():
    """6 runs with ω perturbed by 1e-13·N(0, 1) (fixed seed), ~1 s each."""
    s = elastic_rod()
    rng = np.random.default_rng(EX4_SEED)
    runs = []
    for _ in range(EX4_ENSEMBLE):
        w0 = s.w0 + 1e-13 * rng.standard_normal(s.w0.shape)
        runs.append(_integrate(s, "implicit_vi", 1e-4, 30_000, stride=100, w0=w0))
    return s, runs


def test_ex4_is_chaotic(ex4_ensemble):
    """1e-13 perturbations change the final tip direction at the 1e-2 level (measured ~0.1):
    a single-run comparison with the spec's 1.389e-6 is meaningless."""
    _, runs = ex4_ensemble
    tips = np.array([tr.q[-1] for tr in runs])
    assert np.abs(tips - tips[0]).max() >= 1e-2


def test_ex4_a3_energy_ensemble(ex4_ensemble):
    """Spec ours: mean|ΔE| 1.3892e-6, max 1.32e-5, E0 0.0133333. Measured (seed 20240611):
    mean|ΔE| 1.233e-6…1.768e-6, median 1.360e-6 (−2.1 %); max|ΔE| 1.3197e-5 in 4 of 6 runs
    (others 1.356e-5, 1.760e-5), median 1.3197e-5. The unperturbed run gives 2.03e-6."""
    s, runs = ex4_ensemble
    means = np.array([tr.summary["mean_abs_dE"] for tr in runs])
    maxes = np.array([tr.summary["max_abs_dE"] for tr in runs])
    assert all(tr.status == 0 and tr.info["steps_done"] == 30_000 for tr in runs)
    assert means.min() <= 1.389e-6 <= means.max()
    assert _rel(np.median(means), 1.389e-6) <= 0.30
    assert _rel(np.median(maxes), 1.32e-5) <= 0.30
    assert all(abs(tr.summary["E0"] - 0.0133333) <= 1e-7 for tr in runs)


def test_ex4_a1_a2_iterations(ex4_ensemble):
    """Measured: mean u 4.8e-14…5.8e-14 (spec ours 2.33e-14), max u 0.85e-13…1.1e-13
    (bound 1.7e-12), τ 2.3e-14…2.8e-14 (bound 1e-11), Picard max 5, mean 4.00."""
    s, runs = ex4_ensemble
    for tr in runs:
        assert tr.summary["mean_unit_error"] <= 1e-13
        assert tr.summary["max_unit_error"] <= _a1_bound(30_000)
        assert tr.summary["max_tangency_error"] <= _a2_bound(s, tr)
        assert tr.info["solver_iterations_max"] in (4, 5)
        assert 3.5 <= tr.info["solver_iterations"] / tr.info["steps_done"] <= 5.0


def test_ex4_second_order_short_horizon():
    """T = 0.3 (not yet chaotic: a 1e-13 kick moves q by ~4e-11). Halving h 2e-4 → 1e-4 divides
    mean|ΔE| by 4.006 and max|ΔE| by 3.957 (measured)."""
    s = elastic_rod()
    a = _integrate(s, "implicit_vi", 2e-4, 1500, stride=1500)
    b = _integrate(s, "implicit_vi", 1e-4, 3000, stride=3000)
    assert a.status == 0 and b.status == 0
    assert abs(a.summary["mean_abs_dE"] / b.summary["mean_abs_dE"] - 4.0) <= 0.4
    assert abs(a.summary["max_abs_dE"] / b.summary["max_abs_dE"] - 4.0) <= 0.4
    assert abs(b.summary["mean_abs_dE"] - 1.09e-6) <= 0.1 * 1.09e-6


# --------------------------------------------------------------------------------------
# Ex. 6: sphere MD, explicit VI, h = 0.005, T = 5
# --------------------------------------------------------------------------------------
def test_ex6_a3_energy(s2_lj_default_run):
    """Measured mean|ΔE| 1.86744e-3 (spec 1.867e-3, paper 1.8893e-3), max 3.905e-3,
    E0 −10.712364, mean u 6.1e-15 (< 1e-13), max|a| 3.108e-3."""
    tr = s2_lj_default_run
    assert tr.status == 0 and tr.info["steps_done"] == 1000
    assert _rel(tr.summary["mean_abs_dE"], 1.867e-3) <= 0.10
    assert _rel(tr.summary["max_abs_dE"], 3.905e-3) <= 0.10
    assert abs(tr.summary["E0"] - (-10.71236)) <= 1e-5
    assert tr.summary["mean_unit_error"] < 1e-13
    assert abs(tr.summary["max_step_norm"] - 3.1e-3) <= 0.1e-3
    # the summary is the time mean over all 1001 samples, k = 0 included
    assert abs(np.abs(tr.energy_error).mean() - tr.summary["mean_abs_dE"]) <= 1e-15


def test_ex6_kinetic_energy_falls(s2_lj_default, s2_lj_default_run):
    """KE falls from 7.67 to 5.22 by T = 5 (measured 5.2175)."""
    from geosweep.kernels.s2.model import kinetic_energy

    tr = s2_lj_default_run
    assert abs(kinetic_energy(s2_lj_default.M, tr.q, tr.w) - 5.22) <= 0.02


def test_ex6_a1_a2_a6(s2_lj_default, s2_lj_default_run):
    """Measured max u 8.2e-15 (bound 3.3e-13), τ 8.9e-16, max|J − J0| 0.9e-13…1.0e-13
    (bound 1e-12 (1 + 17.755) = 1.9e-11)."""
    tr = s2_lj_default_run
    assert tr.summary["max_unit_error"] <= _a1_bound(1000)
    assert np.nanmax(tr.unit_error) <= _a1_bound(1000)
    assert tr.summary["max_tangency_error"] <= _a2_bound(s2_lj_default, tr)
    J0 = tr.momentum[0]
    bound = 1e-12 * (1.0 + np.linalg.norm(J0))
    assert tr.summary["max_momentum_error"] <= bound
    assert np.linalg.norm(tr.momentum - J0, axis=1).max() <= bound
    assert np.linalg.norm(momentum_map(s2_lj_default.M, tr.q, tr.w) - J0) <= bound


@pytest.mark.slow
@pytest.mark.parametrize(
    "omega, sense, mean_ref, max_ref, ke_end",
    [
        (0.0, "co", 6.635e-4, 1.575e-3, 0.75),
        (1.0, "co", 7.002e-4, 1.199e-3, None),
        (2.0, "co", 9.620e-4, 1.477e-3, None),
        (3.0, "co", 1.598e-3, 3.372e-3, None),
        (3.0, "counter", 1.570e-3, 4.734e-3, None),
        (4.0, "co", 2.810e-3, 6.240e-3, None),
    ],
)
def test_ex6_reference_table(omega, sense, mean_ref, max_ref, ke_end):
    """Spec §3.5 table (1 s per row). Measured: every row within 0.2 % of the table."""
    from geosweep.kernels.s2.model import kinetic_energy

    s = lj_sphere(omega=omega, sense=sense)
    tr = _integrate(s, "explicit_vi", 0.005, 1000, stride=1000)
    assert tr.status == 0
    assert _rel(tr.summary["mean_abs_dE"], mean_ref) <= 0.10
    assert _rel(tr.summary["max_abs_dE"], max_ref) <= 0.10
    assert tr.summary["mean_unit_error"] <= 1e-13
    assert tr.summary["max_momentum_error"] <= 1e-12 * (1.0 + 17.8 * omega / 3.25)
    if ke_end is not None:
        assert abs(kinetic_energy(s.M, tr.q, tr.w) - ke_end) <= 0.01
