"""Molecular dynamics on the unit sphere: Lennard-Jones molecules on (S²)ⁿ (paper 000, Ex. 6).

Dimensionless units, m_i = 1 (M = I), chord distance ``r_ij = |q_i − q_j|``, all pairs, no
cutoff: ``V = Σ_{i<j} 4ε[(σ/r)¹² − (σ/r)⁶]``. V depends only on ``q_i·q_j`` so the total
angular momentum ``J = Σ ω_i`` is conserved. Positions: geodesic icosphere vertices
(level 3: n = 642). Velocities: two Gaussian vortex patches (see :func:`vortex_velocities`).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic
from numba.np.ufunc.parallel import _iget_num_threads as _num_threads  # cacheable, unlike get_num_threads
from scipy.optimize import brentq

from geosweep.kernels import linalg as la
from geosweep.kernels._jit import kjit
from geosweep.kernels.s2.model import S2System, s2_potential
from geosweep.kernels.systems.icosphere import edges, icosphere

SIGMA_RULES = ("mean_edge", "zero_mean_force", "mean_nn", "explicit")


# Tile of molecules i whose gradient/energy accumulators live in a stack buffer (see below).
_TILE = 64
_TILE_BUF = 7 * _TILE


@intrinsic
def _stack_buffer(typingctx, size):
    """Pointer to ``size`` float64 on the calling kernel's stack (``size`` must be a literal).

    An ``alloca`` in the entry block of the caller: no heap allocation, freed on return,
    private to each call (re-entrant, safe under ``nogil`` threads). Not zero-filled.
    """
    if not isinstance(size, types.IntegerLiteral):
        return None
    nbuf = size.literal_value

    def codegen(context, builder, signature, args):
        with builder.goto_entry_block():
            ptr = builder.alloca(ir.ArrayType(ir.DoubleType(), nbuf))
            ptr.align = 64
        return builder.bitcast(ptr, ir.DoubleType().as_pointer())

    return types.CPointer(types.float64)(size), codegen


@kjit
def _lj_rows(q, p, g, e, i0, i1):
    """Rows ``i0 ≤ i < i1``: the LJ gradient into ``g``; returns ``Σ_i e_i`` (i ascending), where
    ``e_i = Σ_{j≠i} [s¹² − s⁶]``, also stored into ``e`` unless ``e`` is empty.

    Each row's sums run over j ascending; molecules i are taken in tiles of ``_TILE`` whose
    coordinates and accumulators are SoA copies in a stack buffer, the outer loop runs over j
    and the inner loop over the tile (a pure element-wise update that vectorises without
    reassociation; the self pair is masked). A row's values therefore do not depend on the
    tile size, the vector width or ``i0``/``i1``. No heap allocation.
    """
    sig2 = p[1] * p[1]
    c24s = -24.0 * p[0] / sig2
    n = q.shape[0]
    keep = e.shape[0] > 0
    buf = numba.carray(_stack_buffer(_TILE_BUF), (7, _TILE))
    xi = buf[0]
    yi = buf[1]
    zi = buf[2]
    gx = buf[3]
    gy = buf[4]
    gz = buf[5]
    vi = buf[6]
    V = 0.0
    for t0 in range(i0, i1, _TILE):
        m = min(_TILE, i1 - t0)
        for k in range(m):
            xi[k] = q[t0 + k, 0]
            yi[k] = q[t0 + k, 1]
            zi[k] = q[t0 + k, 2]
            gx[k] = 0.0
            gy[k] = 0.0
            gz[k] = 0.0
            vi[k] = 0.0
        for j in range(n):
            xj = q[j, 0]
            yj = q[j, 1]
            zj = q[j, 2]
            if t0 <= j < t0 + m:  # the tile contains i = j: mask the self pair
                kself = j - t0
                for k in range(m):
                    dx = xi[k] - xj
                    dy = yi[k] - yj
                    dz = zi[k] - zj
                    s2 = sig2 / (dx * dx + dy * dy + dz * dz)
                    s6 = s2 * s2 * s2
                    s12 = s6 * s6
                    ej = s12 - s6
                    c = c24s * s2 * (s12 + ej)
                    if k == kself:
                        ej = 0.0
                        c = 0.0
                    vi[k] += ej
                    gx[k] += c * dx
                    gy[k] += c * dy
                    gz[k] += c * dz
            else:
                for k in range(m):
                    dx = xi[k] - xj
                    dy = yi[k] - yj
                    dz = zi[k] - zj
                    s2 = sig2 / (dx * dx + dy * dy + dz * dz)
                    s6 = s2 * s2 * s2
                    s12 = s6 * s6
                    ej = s12 - s6
                    c = c24s * s2 * (s12 + ej)
                    vi[k] += ej
                    gx[k] += c * dx
                    gy[k] += c * dy
                    gz[k] += c * dz
        for k in range(m):
            g[t0 + k, 0] = gx[k]
            g[t0 + k, 1] = gy[k]
            g[t0 + k, 2] = gz[k]
            V += vi[k]
            if keep:
                e[t0 + k] = vi[k]
    return V


def _lj_potential_threaded(q, p, g):
    """:func:`lj_potential` on threads: one block of consecutive rows per thread (equal sizes
    within one row) in a ``prange`` loop, each storing its rows' energies; those are added in i
    order on one thread afterwards. A row's values do not depend on its block and no sum crosses
    a block, so the result is bitwise the one-thread value for every thread count."""
    n = q.shape[0]
    e = np.empty(n)
    nb = max(1, min(_num_threads(), n))
    for b in numba.prange(nb):
        _lj_rows(q, p, g, e, b * n // nb, (b + 1) * n // nb)
    V = 0.0
    for i in range(n):
        V += e[i]
    return 2.0 * p[0] * V


@s2_potential(lazy=True, threaded=_lj_potential_threaded)
def lj_potential(q, p, g):
    """All-pairs LJ energy and gradient; ``p = (ε, σ)``.

    Full n×n loop (no Newton's third law): ``g_i = Σ_{j≠i} c_ij (q_i − q_j)`` summed over
    j ascending, ``V = 2ε Σ_i Σ_{j≠i} [s¹² − s⁶]`` with the per-i sums added in i order,
    where ``s² = σ²/r²``, ``c_ij = −(24ε/σ²) s² (s¹² + (s¹² − s⁶))`` (= spec §3.1).
    Every pair is evaluated twice, but the loop nest has no floating-point reduction in its
    inner loop, so it vectorises without reassociation (:func:`_lj_rows`). The summation order
    is fixed and independent of the tile size, the vector width and the thread count (the
    threaded copy, :func:`_lj_potential_threaded`): the result is bitwise identical to the
    plain scalar double loop with the same formula, run to run, across processes and on any
    number of threads. No heap allocation (the threaded copy allocates the per-row energies).
    """
    return 2.0 * p[0] * _lj_rows(q, p, g, g[0, :0], 0, q.shape[0])


def pair_force(r: np.ndarray | float, sigma: float, eps: float) -> np.ndarray | float:
    """Repulsive-positive LJ pair force along the chord, ``−dV/dr``."""
    s6 = (sigma / np.asarray(r)) ** 6
    return 24.0 * eps / np.asarray(r) * (2.0 * s6 * s6 - s6)


def sigma_for(rule: str, level: int = 3, eps: float = 0.01, sigma: float | None = None) -> float:
    """σ from a rule on the icosphere's neighbour distances (spec sphere §3.3).

    ``mean_edge``: r* = 2^{1/6} σ at the mean mesh-edge chord (default);
    ``zero_mean_force``: the sum of LJ forces over mesh edges vanishes;
    ``mean_nn``: r* at the mean nearest-neighbour chord; ``explicit``: ``sigma`` as given.
    """
    if rule == "explicit":
        if sigma is None or not sigma > 0:
            raise ValueError("sigma_rule = 'explicit' needs sigma > 0")
        return float(sigma)
    v, f = icosphere(level)
    e = edges(f)
    lengths = np.linalg.norm(v[e[:, 0]] - v[e[:, 1]], axis=1)
    if rule == "mean_edge":
        return float(lengths.mean() / 2.0 ** (1.0 / 6.0))
    if rule == "mean_nn":
        d = np.full(len(v), np.inf)
        np.minimum.at(d, e[:, 0], lengths)
        np.minimum.at(d, e[:, 1], lengths)
        return float(d.mean() / 2.0 ** (1.0 / 6.0))
    if rule == "zero_mean_force":
        s0 = lengths.mean() / 2.0 ** (1.0 / 6.0)
        return float(brentq(lambda s: pair_force(lengths, s, eps).sum(), 0.8 * s0, 1.2 * s0, xtol=1e-15))
    raise ValueError(f"unknown sigma_rule {rule!r}; choose from {SIGMA_RULES}")


def vortex_velocities(
    q: np.ndarray,
    omega: float = 3.25,
    separation_deg: float = 30.0,
    radius_deg: float = 15.0,
    senses: tuple[float, float] = (1.0, 1.0),
) -> np.ndarray:
    """Two Gaussian vortex patches (spec sphere §3.4).

    ``ω_i = Σ_k s_k Ω W_k(q_i) (c_k − (c_k·q_i) q_i)``, ``W_k(q) = exp(−(1 − c_k·q)/ρ²)``,
    centres ``c_{1,2} = (±sin(Δ/2), 0, cos(Δ/2))``. ``omega`` is the core angular speed
    (rad per time unit), ρ the angular radius; positive sense = counter-clockwise seen from
    outside above the centre.
    """
    half = math.radians(separation_deg) / 2.0
    rho = math.radians(radius_deg)
    centres = np.array([[math.sin(half), 0.0, math.cos(half)], [-math.sin(half), 0.0, math.cos(half)]])
    w = np.zeros_like(q)
    for c, s in zip(centres, senses):
        cq = la.matvec(q, c)
        # libm's exp element by element: NumPy's own (AVX-512) exp differs in last bits between CPUs
        W = np.array([math.exp(x) for x in -(1.0 - cq) / rho**2])
        w += (s * omega * W)[:, None] * (c[None, :] - cq[:, None] * q)
    return w


def lj_sphere(
    level: int = 3,
    epsilon: float = 0.01,
    sigma_rule: str = "mean_edge",
    sigma: float | None = None,
    omega: float = 3.25,
    sense: str = "co",
    separation_deg: float = 30.0,
    radius_deg: float = 15.0,
) -> S2System:
    """The sphere MD system: molecules on icosphere vertices with two-vortex velocities."""
    if sense not in ("co", "counter"):
        raise ValueError("sense must be 'co' or 'counter'")
    q, _ = icosphere(level)
    sig = sigma_for(sigma_rule, level=level, eps=epsilon, sigma=sigma)
    w = vortex_velocities(q, omega, separation_deg, radius_deg, (1.0, 1.0 if sense == "co" else -1.0))
    n = len(q)
    return S2System(
        name="lj_sphere",
        M=np.eye(n),
        potential=lj_potential,
        params=np.array([epsilon, sig]),
        q0=q,
        w0=w,
        symmetry="full",
        extras={"sigma": sig, "level": level},
    )
