"""The built-in (S²)ⁿ systems: sphere MD (000 Ex. 6) and the catalogue of 000 (Ex. 1–5)."""

from __future__ import annotations

import numpy as np

from geosweep.kernels.registry import Figure, Param, SystemDef
from geosweep.kernels.s2.model import S2System, s2_potential
from geosweep.kernels.systems import catalogue
from geosweep.kernels.systems.lj_sphere import SIGMA_RULES, lj_sphere


def _lj_build(level, epsilon, sigma_rule, sigma, omega, sense, separation_deg, radius_deg):
    return lj_sphere(level, epsilon, sigma_rule, sigma, omega, sense, separation_deg, radius_deg)


# ---------------------------------------------------------------------------------------
# 000 Ex. 2: three bodies on the sphere under the "spherical gravity" potential
# ---------------------------------------------------------------------------------------
@s2_potential(lazy=True)
def sphere_nbody_potential(q, p, g):
    """``V = −γ Σ_{i<j} c_ij / sqrt(1 − c_ij²)``, ``c_ij = q_i·q_j`` (``p = [γ]``).

    ``d/dc [c (1 − c²)^(−1/2)] = (1 − c²)^(−3/2)``, so ``∂V/∂q_i = −γ Σ_j q_j (1 − c_ij²)^(−3/2)``.
    Singular at collisions and antipodal pairs (c = ±1).
    """
    gam = p[0]
    n = q.shape[0]
    V = 0.0
    for i in range(n):
        g[i, 0] = 0.0
        g[i, 1] = 0.0
        g[i, 2] = 0.0
    for i in range(n):
        for j in range(i + 1, n):
            c = q[i, 0] * q[j, 0] + q[i, 1] * q[j, 1] + q[i, 2] * q[j, 2]
            s2 = 1.0 - c * c
            s = np.sqrt(s2)
            V -= gam * c / s
            k = gam / (s2 * s)
            for a in range(3):
                g[i, a] -= k * q[j, a]
                g[j, a] -= k * q[i, a]
    return V


def sphere_three_body(m1: float = 1.0, m2: float = 1.0, m3: float = 1.0, gamma: float = 1.0) -> S2System:
    """000 Ex. 2: three point masses on the unit sphere, ``M = diag(m_i)``, the potential of
    :func:`sphere_nbody_potential`; rotation invariant, so the whole J is conserved.

    Paper data: m_i = 1, γ = 1, T = 10, initial state q = (−e2, e3, −e1),
    ω = ((0, 0, −1.1), e1, e2) (already unit and tangent). The paper compares the explicit VI
    with a fixed-step RK2 at h = 1e-3 … 1e-4 (its Fig. 2). Dimensionless units. Measured with
    the explicit VI over T = 10: max|E − E0|/E0 = 1.1836e-4 (h = 1e-3) and 1.1837e-6 (h = 1e-4),
    000's "total energy error" 1.1717e-4 and 1.1986e-6 read as that relative maximum.
    """
    M = np.diag([m1, m2, m3]).astype(float)
    q0 = np.array([[0.0, -1.0, 0.0], [0.0, 0.0, 1.0], [-1.0, 0.0, 0.0]])
    w0 = np.array([[0.0, 0.0, -1.1], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
    return S2System("sphere_three_body", M, sphere_nbody_potential, np.array([gamma]), q0, w0, symmetry="full")


# ---------------------------------------------------------------------------------------
# 000 Ex. 5: planar array of magnetic dipoles (spherical compasses)
# ---------------------------------------------------------------------------------------
@s2_potential(lazy=True)
def dipole_array_potential(q, p, g):
    """Mutual dipole energy ``Σ_{i<j} k_ij/|r|³ [q_i·q_j − 3 (q_i·r̂)(q_j·r̂)]``, ``r = x_j − x_i``.

    ``p = [k_0..k_{n−1}, x_0 (3), …, x_{n−1} (3)]`` with ``k_i = ν_i sqrt(μ/4π)`` so that
    ``k_ij = k_i k_j = μ ν_i ν_j / 4π``; ``x_i`` are the pivot positions (m).
    """
    n = q.shape[0]
    V = 0.0
    for i in range(n):
        g[i, 0] = 0.0
        g[i, 1] = 0.0
        g[i, 2] = 0.0
    for i in range(n):
        bi = n + 3 * i
        for j in range(i + 1, n):
            bj = n + 3 * j
            rx = p[bj] - p[bi]
            ry = p[bj + 1] - p[bi + 1]
            rz = p[bj + 2] - p[bi + 2]
            r2 = rx * rx + ry * ry + rz * rz
            r = np.sqrt(r2)
            k = p[i] * p[j] / (r2 * r)
            ux = rx / r
            uy = ry / r
            uz = rz / r
            qiu = q[i, 0] * ux + q[i, 1] * uy + q[i, 2] * uz
            qju = q[j, 0] * ux + q[j, 1] * uy + q[j, 2] * uz
            qq = q[i, 0] * q[j, 0] + q[i, 1] * q[j, 1] + q[i, 2] * q[j, 2]
            V += k * (qq - 3.0 * qiu * qju)
            g[i, 0] += k * (q[j, 0] - 3.0 * qju * ux)
            g[i, 1] += k * (q[j, 1] - 3.0 * qju * uy)
            g[i, 2] += k * (q[j, 2] - 3.0 * qju * uz)
            g[j, 0] += k * (q[i, 0] - 3.0 * qiu * ux)
            g[j, 1] += k * (q[i, 1] - 3.0 * qiu * uy)
            g[j, 2] += k * (q[i, 2] - 3.0 * qiu * uz)
    return V


MU0 = 4e-7 * np.pi  # permeability constant μ, N / A²


def dipole_array(
    rows: int = 4,
    cols: int = 4,
    m: float = 0.05,
    l: float = 0.02,
    nu: float = 0.1,
    spacing: float = 1.2,
    kick: float = 0.5,
) -> S2System:
    """000 Ex. 5: ``rows × cols`` spherical compasses (thin rod magnets of mass m, length l,
    moment ν q_i) pivoted on a square grid of edge ``spacing·l``; ``M = diag(m l²/12)``.

    Paper data: 4 × 4 grid, m = 0.05 kg, l = 0.02 m, ν = 0.1 A m², edge 1.2 l; q_i(0) = e1 and
    ω_i(0) = 0 except q_16(0) = (0.3536, 0.3536, −0.8660) and ω_1(0) = (0, 0.5, 0) rad/s.
    Decisions where 000 is silent: the grid lies in the e1–e2 plane (z = 0), dipole i
    (1-based) sits at ``x = ((i−1) mod cols, (i−1) div cols, 0)·spacing·l`` (row-major from one
    corner, so dipoles 1 and 16 are opposite corners); the catalogue run uses h = 1e-3 s and
    T = 10 s (``example``), about 10 periods of the slowest compass oscillation. No symmetry
    (the pivots break rotation invariance). With these choices the explicit VI's mean |E − E0|
    is 1.087e-8 J (h = 1e-3) and scales as h²; 000's 8.5403e-10 J would correspond to
    h ≈ 2.8e-4 (000 states no h), its mean unit-length error 1.6e-14 to a few 1e4 steps.
    """
    n = rows * cols
    d = spacing * l
    x = np.array([[(i % cols) * d, (i // cols) * d, 0.0] for i in range(n)])
    k = np.full(n, nu * np.sqrt(MU0 / (4.0 * np.pi)))
    M = np.diag(np.full(n, m * l * l / 12.0))
    q0 = np.tile([1.0, 0.0, 0.0], (n, 1))
    q0[n - 1] = (0.3536, 0.3536, -0.8660)
    w0 = np.zeros((n, 3))
    w0[0] = (0.0, kick, 0.0)
    p = np.concatenate([k, x.ravel()])
    return S2System("dipole_array", M, dipole_array_potential, p, q0, w0, extras={"pivots": x})


SYSTEMS = (
    SystemDef(
        name="lj_sphere",
        family="s2",
        doc="Lennard-Jones molecules on the unit sphere (000 Ex. 6): icosphere positions, "
        "two Gaussian vortex patches as initial velocities, all pairs, M = I.",
        params=(
            Param("level", int, 3, "1", "icosphere subdivision level (3: n = 642 molecules)", ge=0, le=5),
            Param("epsilon", float, 0.01, "energy", "LJ well depth ε", gt=0.0),
            Param("sigma_rule", str, "mean_edge", "1", "how σ is chosen", choices=SIGMA_RULES),
            Param("sigma", float, None, "length", "σ when sigma_rule = 'explicit'", gt=0.0),
            Param("omega", float, 3.25, "rad / time", "vortex core angular speed Ω", ge=0.0),
            Param("sense", str, "co", "1", "second vortex co- or counter-rotating", choices=("co", "counter")),
            Param("separation_deg", float, 30.0, "degree", "angle between vortex centres", ge=0.0, le=180.0),
            Param("radius_deg", float, 15.0, "degree", "vortex angular radius ρ", gt=0.0, le=180.0),
        ),
        build=_lj_build,
        example={"h": [0.01, 0.005], "T": 5.0, "dt_out": 0.05},
        figures=(Figure("ke_map", "geosweep.analysis.system_figures:ke_map"),),
        report_sel={"omega": 3.25},  # the vortex case (ω = 0 starts at rest: nothing to see)
    ),
    SystemDef(
        name="double_pendulum",
        family="s2",
        doc="Double spherical pendulum (000 Ex. 1): coupled M, gravity along +e3, e3·J conserved.",
        params=(
            Param("m1", float, 1.0, "kg", "mass 1", gt=0.0),
            Param("m2", float, 1.0, "kg", "mass 2", gt=0.0),
            Param("l1", float, 9.81, "m", "link 1 length", gt=0.0),
            Param("l2", float, 9.81, "m", "link 2 length", gt=0.0),
            Param("g", float, 9.81, "m / s^2", "gravity", ge=0.0),
        ),
        build=catalogue.double_spherical_pendulum,
        time_units="s",
        energy_units="J",
        example={"h": [0.01], "T": 100.0, "dt_out": 0.1},
    ),
    SystemDef(
        name="spring_pendula",
        family="s2",
        doc="Four spherical pendula on a square of pivots joined by springs (000 Ex. 3); diagonal M.",
        params=(
            Param("m", float, 0.1, "kg", "mass of each pendulum", gt=0.0),
            Param("l", float, 0.1, "m", "link length and pivot spacing", gt=0.0),
            Param("g", float, 9.81, "m / s^2", "gravity", ge=0.0),
            Param("kappa12", float, 10.0, "N / m", "spring 1-2 stiffness", ge=0.0),
            Param("kappa23", float, 20.0, "N / m", "spring 2-3 stiffness", ge=0.0),
            Param("kappa34", float, 30.0, "N / m", "spring 3-4 stiffness", ge=0.0),
            Param("kappa41", float, 40.0, "N / m", "spring 4-1 stiffness", ge=0.0),
        ),
        build=catalogue.spring_pendula,
        time_units="s",
        energy_units="J",
        example={"h": [0.01, 0.005], "T": 20.0, "dt_out": 0.05},
    ),
    SystemDef(
        name="elastic_rod",
        family="s2",
        doc="Pure bending of an elastic rod of n+1 rigid rods, rod 0 clamped (000 Ex. 4); coupled M.",
        params=(
            Param("n", int, 10, "1", "movable rods", ge=1, le=200),
            Param("total_mass", float, 0.055, "kg", "mass of all n+1 rods", gt=0.0),
            Param("total_length", float, 1.1, "m", "length of all n+1 rods", gt=0.0),
            Param("kappa", float, 1000.0, "N m", "bending stiffness κ_i", ge=0.0),
            Param("g", float, 9.81, "m / s^2", "gravity", ge=0.0),
            Param("rod_inertia_mode", str, "paper", "1", "inertia matrix version", choices=("paper", "derived")),
            Param("kick", float, 10.0, "rad / s", "initial ω_z of the kicked rod"),
            Param("kick_rod", int, 5, "1", "index (1..n) of the kicked rod", ge=1),
        ),
        build=catalogue.elastic_rod,
        time_units="s",
        energy_units="J",
        example={"h": [1e-4], "T": 3.0, "dt_out": 0.01},
    ),
    SystemDef(
        name="sphere_three_body",
        family="s2",
        doc="Three point masses on the unit sphere under the spherical-gravity potential "
        "(000 Ex. 2); diagonal M, J conserved.",
        params=(
            Param("m1", float, 1.0, "1", "mass 1", gt=0.0),
            Param("m2", float, 1.0, "1", "mass 2", gt=0.0),
            Param("m3", float, 1.0, "1", "mass 3", gt=0.0),
            Param("gamma", float, 1.0, "1", "potential strength γ", gt=0.0),
        ),
        build=sphere_three_body,
        example={"h": [1e-3, 1e-4], "T": 10.0, "dt_out": 0.01},
    ),
    SystemDef(
        name="dipole_array",
        family="s2",
        doc="Planar square array of magnetic dipoles on two-axis pivots (000 Ex. 5); diagonal M. "
        "Grid in the e1-e2 plane, row-major from a corner; paper run h = 1e-3 s, T = 10 s (our choice).",
        params=(
            Param("rows", int, 4, "1", "grid rows", ge=1, le=30),
            Param("cols", int, 4, "1", "grid columns", ge=1, le=30),
            Param("m", float, 0.05, "kg", "mass of each magnet", gt=0.0),
            Param("l", float, 0.02, "m", "length of each magnet", gt=0.0),
            Param("nu", float, 0.1, "A m^2", "magnetic moment magnitude ν", gt=0.0),
            Param("spacing", float, 1.2, "1", "grid edge in units of l", gt=0.0),
            Param("kick", float, 0.5, "rad / s", "initial ω_y of dipole 1"),
        ),
        build=dipole_array,
        time_units="s",
        energy_units="J",
        example={"h": [1e-3], "T": 10.0, "dt_out": 0.01},
    ),
)
