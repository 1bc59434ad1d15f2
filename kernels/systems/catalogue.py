"""Validation systems on (S²)ⁿ from paper 000 (Lee, Leok, McClamroch), Examples 1, 3 and 4.

Conventions (as in that paper): ``e3 = (0, 0, 1)`` is the direction of gravity, so the
gravity potential is ``V = −Σ_i c_i e3·q_i`` with ``c_i > 0``. SI units (kg, m, s, N·m).
The printed initial conditions are 4-digit roundings; every integrator normalises q and
projects ω once at t = 0.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels.s2.model import S2System, s2_potential

E1 = np.array([1.0, 0.0, 0.0])
E2 = np.array([0.0, 1.0, 0.0])
E3 = np.array([0.0, 0.0, 1.0])


@s2_potential(lazy=True)
def gravity_potential(q, p, g):
    """``V = −Σ_i p_i q_i·e3`` (e3 = gravity direction); ``p_i`` = weight × lever arm."""
    V = 0.0
    for i in range(q.shape[0]):
        g[i, 0] = 0.0
        g[i, 1] = 0.0
        g[i, 2] = -p[i]
        V -= p[i] * q[i, 2]
    return V


def double_spherical_pendulum(
    m1: float = 1.0, m2: float = 1.0, l1: float = 9.81, l2: float = 9.81, g: float = 9.81
) -> S2System:
    """Ex. 1: two point masses on massless links; gravity along +e3; e3·J conserved.

    The motion depends only on g/l and energies scale with l²: the paper's energy figures
    correspond to l = g = 1 (spec sphere §4).
    """
    M = np.array([[(m1 + m2) * l1 * l1, m2 * l1 * l2], [m2 * l1 * l2, m2 * l2 * l2]])
    p = np.array([(m1 + m2) * g * l1, m2 * g * l2])
    q0 = np.array([[0.8660, 0.0, 0.5], [0.0, 0.0, 1.0]])
    w0 = np.array([[-0.4330, 0.0, 0.75], [0.0, 1.0, 0.0]])
    return S2System("double_pendulum", M, gravity_potential, p, q0, w0, symmetry="axis", axis=E3)


# ---------------------------------------------------------------------------------------
# Ex. 3: spring-connected spherical pendula
# ---------------------------------------------------------------------------------------
_SPRING_FIELDS = 8  # i, j, kappa, r_x, r_y, r_z, l_i/2, l_j/2


@s2_potential(lazy=True)
def spring_pendula_potential(q, p, g):
    """Gravity plus springs joining link midpoints.

    ``p = [c_0..c_{n−1}, n_s, (i, j, κ, r_x, r_y, r_z, l_i/2, l_j/2) × n_s]`` with
    ``s_ij = r_ij + (l_j/2) q_j − (l_i/2) q_i`` and ``V_s = ½ κ (|s_ij| − |r_ij|)²``.
    """
    n = q.shape[0]
    V = 0.0
    for i in range(n):
        g[i, 0] = 0.0
        g[i, 1] = 0.0
        g[i, 2] = -p[i]
        V -= p[i] * q[i, 2]
    ns = int(p[n])
    for s in range(ns):
        b = n + 1 + _SPRING_FIELDS * s
        i = int(p[b])
        j = int(p[b + 1])
        kap = p[b + 2]
        hi = p[b + 6]
        hj = p[b + 7]
        sx = p[b + 3] + hj * q[j, 0] - hi * q[i, 0]
        sy = p[b + 4] + hj * q[j, 1] - hi * q[i, 1]
        sz = p[b + 5] + hj * q[j, 2] - hi * q[i, 2]
        slen = np.sqrt(sx * sx + sy * sy + sz * sz)
        rlen = np.sqrt(p[b + 3] * p[b + 3] + p[b + 4] * p[b + 4] + p[b + 5] * p[b + 5])
        ext = slen - rlen
        V += 0.5 * kap * ext * ext
        c = kap * ext / slen
        for a in range(3):
            sa = sx if a == 0 else (sy if a == 1 else sz)
            g[j, a] += hj * c * sa
            g[i, a] -= hi * c * sa
    return V


def spring_pendula(
    m: float = 0.1,
    l: float = 0.1,
    g: float = 9.81,
    kappa12: float = 10.0,
    kappa23: float = 20.0,
    kappa34: float = 30.0,
    kappa41: float = 40.0,
) -> S2System:
    """Ex. 3: four spherical pendula whose pivots form a square of side l, springs between
    link midpoints (rest length = pivot distance); no symmetry (springs break it)."""
    n = 4
    M = np.diag(np.full(n, m * l * l))
    r = {(0, 1): l * E1, (1, 2): -l * E2, (2, 3): -l * E1, (3, 0): l * E2}
    kap = {(0, 1): kappa12, (1, 2): kappa23, (2, 3): kappa34, (3, 0): kappa41}
    p = [m * g * l] * n + [len(r)]
    for (i, j), rij in r.items():
        p += [i, j, kap[(i, j)], *rij, 0.5 * l, 0.5 * l]
    q0 = np.array([E3, E3, [0.4698, 0.1710, 0.8660], E3])
    w0 = np.zeros((n, 3))
    w0[0] = (-10.0, 4.0, 0.0)
    return S2System("spring_pendula", M, spring_pendula_potential, np.array(p, dtype=float), q0, w0)


# ---------------------------------------------------------------------------------------
# Ex. 4: pure bending of an elastic rod (n movable rigid rods, rod 0 clamped along e1)
# ---------------------------------------------------------------------------------------
@s2_potential(lazy=True)
def elastic_rod_potential(q, p, g):
    """Gravity plus quartic bending ``½ κ_i (1 − q_{i−1}·q_i)²``.

    ``p = [c_1..c_n, κ_1..κ_n, q_0 (3)]`` with ``c_i = g l_i (½ m_i + Σ_{k>i} m_k)``; body
    ``b`` in code is rod ``i = b + 1``; rod 0 is fixed at ``q_0``.
    """
    n = q.shape[0]
    V = 0.0
    for b in range(n):
        g[b, 0] = 0.0
        g[b, 1] = 0.0
        g[b, 2] = -p[b]
        V -= p[b] * q[b, 2]
    q00 = p[2 * n]
    q01 = p[2 * n + 1]
    q02 = p[2 * n + 2]
    for b in range(n):
        kap = p[n + b]
        if b == 0:
            d = q00 * q[0, 0] + q01 * q[0, 1] + q02 * q[0, 2]
            e = 1.0 - d
            V += 0.5 * kap * e * e
            g[0, 0] -= kap * e * q00
            g[0, 1] -= kap * e * q01
            g[0, 2] -= kap * e * q02
        else:
            d = q[b - 1, 0] * q[b, 0] + q[b - 1, 1] * q[b, 1] + q[b - 1, 2] * q[b, 2]
            e = 1.0 - d
            V += 0.5 * kap * e * e
            for a in range(3):
                g[b, a] -= kap * e * q[b - 1, a]
                g[b - 1, a] -= kap * e * q[b, a]
    return V


def rod_inertia(m: np.ndarray, l: np.ndarray, mode: str = "paper") -> np.ndarray:
    """Inertia of rods 1..n (arrays of length n+1 include rod 0).

    ``paper``: M_ii = ⅓ m_i l_i² + Σ_{k>i} m_k l_i², M_ij = Σ_{k≥max(i,j)} ½ m_k l_k²;
    ``derived`` (thin rods): same M_ii, M_ij = l_i l_j (½ m_J + Σ_{k>J} m_k), J = max(i, j).
    """
    n = len(m) - 1
    M = np.zeros((n, n))
    for i in range(1, n + 1):
        for j in range(1, n + 1):
            if i == j:
                M[i - 1, j - 1] = m[i] * l[i] ** 2 / 3.0 + m[i + 1 :].sum() * l[i] ** 2
            else:
                J = max(i, j)
                if mode == "paper":
                    M[i - 1, j - 1] = sum(0.5 * m[k] * l[k] ** 2 for k in range(J, n + 1))
                elif mode == "derived":
                    M[i - 1, j - 1] = l[i] * l[j] * (0.5 * m[J] + m[J + 1 :].sum())
                else:
                    raise ValueError("rod_inertia must be 'paper' or 'derived'")
    return M


def elastic_rod(
    n: int = 10,
    total_mass: float = 0.055,
    total_length: float = 1.1,
    kappa: float = 1000.0,
    g: float = 9.81,
    rod_inertia_mode: str = "paper",
    kick: float = 10.0,
    kick_rod: int = 5,
) -> S2System:
    """Ex. 4: n+1 equal rigid rods, rod 0 clamped along e1; rod ``kick_rod`` starts with
    ω = (0, 0, kick). No symmetry."""
    if not 1 <= kick_rod <= n:
        raise ValueError("kick_rod must be between 1 and n")
    mi = np.full(n + 1, total_mass / (n + 1))
    li = np.full(n + 1, total_length / (n + 1))
    M = rod_inertia(mi, li, rod_inertia_mode)
    c = np.array([g * li[i] * (0.5 * mi[i] + mi[i + 1 :].sum()) for i in range(1, n + 1)])
    p = np.concatenate([c, np.full(n, kappa), E1])
    q0 = np.tile(E1, (n, 1))
    w0 = np.zeros((n, 3))
    w0[kick_rod - 1] = (0.0, 0.0, kick)
    return S2System("elastic_rod", M, elastic_rod_potential, p, q0, w0)
