"""Compiled vector field of the N-link 3D pendulum on (TS²)^N (spec pendulum_chain §1–5).

State ``y`` (N, 6), rows ``(q_i, ω_i)``; parameters packed in one float64 vector
``p = [g, m(N), L(N), μ(N), G_diag(N), G_off(N)]`` (see :func:`pack_params`), where
``μ_i = Σ_{k≥i} m_k`` and ``G = M⁻¹`` is tridiagonal. Gravity along −e3 (e3 up, paper 001):
``U = Σ μ_i g L_i e3·q_i``. Every function takes a flat float64 scratch vector ``work`` of
at least :func:`work_size` entries, so nothing allocates per call.

Functions with signature :data:`FIELD_SIG` (``status = fn(y, p, work, out)``):

* :func:`chain_f` — algebra map f(y) = (ω_i, q_i × ω̇_i) ∈ se(3)^N, O(N) (RSOLVE path).
* :func:`chain_F` — ambient field F(y) = (ω_i × q_i, ω̇_i), O(N); assumes y on (TS²)^N.
* :func:`chain_F_dense` — ambient field with the dense ``R(q) ω̇ = b`` solve (O(N³)); the
  reference definition off the manifold (ambient baselines).

:func:`chain_diag` (signature :data:`DIAG_SIG`) writes ``[E, Lx, Ly, Lz, max|1−q·q|,
max|q·ω|]`` in O(N). Returned status: 0 ok, 3 (``Status.NONFINITE``) on a non-positive pivot
or a non-finite result.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.lie.signatures import DIAG_SIG, FIELD_SIG
from geosweep.kernels.linalg import lu_solve_inplace
from geosweep.kernels.status import Status

#: length of the diagnostics row: [E, L (3), max|1−q·q|, max|q·ω|]
N_DIAG = 6
_NONFINITE = int(Status.NONFINITE)


def work_size(n: int, dense: bool = False) -> int:
    """Scratch length needed by the functions of this module for ``n`` links."""
    return 24 * n + (9 * n * n + 3 * n if dense else 0)


def pack_params(g: float, m: np.ndarray, L: np.ndarray) -> np.ndarray:
    """Parameter vector ``[g, m, L, μ, G_diag, G_off]`` (length 1 + 5N)."""
    m = np.asarray(m, dtype=np.float64)
    L = np.asarray(L, dtype=np.float64)
    n = m.size
    out = np.zeros(1 + 5 * n)  # filled in place (a sweep builds one model per seed): the same values
    out[0] = float(g)
    out[1 : 1 + n] = m
    out[1 + n : 1 + 2 * n] = L
    out[1 + 2 * n : 1 + 3 * n] = np.cumsum(m[::-1])[::-1]  # μ_i = Σ_{j ≥ i} m_j
    inv_m = 1.0 / m
    gd = out[1 + 3 * n : 1 + 4 * n]
    gd[:] = inv_m
    gd[1:] += inv_m[:-1]
    gd /= L**2
    out[1 + 4 * n : 5 * n] = -1.0 / (m[:-1] * L[:-1] * L[1:])
    return out


@kjit
def _tri_apply(gd, go, s, t):
    """t = G s for tridiagonal symmetric G (each Cartesian component), s/t (n, 3)."""
    n = s.shape[0]
    for i in range(n):
        for c in range(3):
            v = gd[i] * s[i, c]
            if i > 0:
                v += go[i - 1] * s[i - 1, c]
            if i < n - 1:
                v += go[i] * s[i + 1, c]
            t[i, c] = v


@kjit
def rsolve(q, r, p, work, x):
    """Solve ``R(q) x = r`` for tangent ``x`` (|q_i| = 1, r_i ⊥ q_i); O(N). Returns status.

    ``q``, ``r``, ``x`` are (N, 3) arrays (any layout); ``x`` must not alias ``r``.
    """
    n = q.shape[0]
    gd = p[1 + 3 * n : 1 + 4 * n]
    go = p[1 + 4 * n : 1 + 5 * n]
    s = work[0 : 3 * n].reshape((n, 3))
    t = work[3 * n : 6 * n].reshape((n, 3))
    kd = work[6 * n : 7 * n]
    ko = work[7 * n : 8 * n]
    rho = work[8 * n : 9 * n]
    for i in range(n):
        s[i, 0] = r[i, 1] * q[i, 2] - r[i, 2] * q[i, 1]
        s[i, 1] = r[i, 2] * q[i, 0] - r[i, 0] * q[i, 2]
        s[i, 2] = r[i, 0] * q[i, 1] - r[i, 1] * q[i, 0]
    _tri_apply(gd, go, s, t)
    for i in range(n):
        kd[i] = gd[i]
        rho[i] = -(q[i, 0] * t[i, 0] + q[i, 1] * t[i, 1] + q[i, 2] * t[i, 2])
        if i < n - 1:
            ko[i] = go[i] * (q[i, 0] * q[i + 1, 0] + q[i, 1] * q[i + 1, 1] + q[i, 2] * q[i + 1, 2])
    # Thomas algorithm (K SPD): forward elimination in place on kd/rho
    for i in range(1, n):
        if not kd[i - 1] > 0.0:
            return _NONFINITE
        w = ko[i - 1] / kd[i - 1]
        kd[i] -= w * ko[i - 1]
        rho[i] -= w * rho[i - 1]
    if not kd[n - 1] > 0.0:
        return _NONFINITE
    rho[n - 1] /= kd[n - 1]
    for i in range(n - 2, -1, -1):
        rho[i] = (rho[i] - ko[i] * rho[i + 1]) / kd[i]
    # a = G (s + λ q)  (reuse t for s + λ q, then s for a)
    for i in range(n):
        for c in range(3):
            t[i, c] = s[i, c] + rho[i] * q[i, c]
    _tri_apply(gd, go, t, s)
    for i in range(n):
        x[i, 0] = q[i, 1] * s[i, 2] - q[i, 2] * s[i, 1]
        x[i, 1] = q[i, 2] * s[i, 0] - q[i, 0] * s[i, 2]
        x[i, 2] = q[i, 0] * s[i, 1] - q[i, 1] * s[i, 0]
    return 0


@kjit
def rmult(q, x, p, work, out):
    """``out = R(q) x`` for tangent ``x`` in O(N) (prefix then suffix sums); (N, 3) arrays."""
    n = q.shape[0]
    m = p[1 : 1 + n]
    L = p[1 + n : 1 + 2 * n]
    u = work[0 : 3 * n].reshape((n, 3))
    u0 = 0.0
    u1 = 0.0
    u2 = 0.0
    for k in range(n):
        u0 += L[k] * (x[k, 1] * q[k, 2] - x[k, 2] * q[k, 1])
        u1 += L[k] * (x[k, 2] * q[k, 0] - x[k, 0] * q[k, 2])
        u2 += L[k] * (x[k, 0] * q[k, 1] - x[k, 1] * q[k, 0])
        u[k, 0] = u0
        u[k, 1] = u1
        u[k, 2] = u2
    S0 = 0.0
    S1 = 0.0
    S2 = 0.0
    for i in range(n - 1, -1, -1):
        S0 += m[i] * u[i, 0]
        S1 += m[i] * u[i, 1]
        S2 += m[i] * u[i, 2]
        out[i, 0] = L[i] * (q[i, 1] * S2 - q[i, 2] * S1)
        out[i, 1] = L[i] * (q[i, 2] * S0 - q[i, 0] * S2)
        out[i, 2] = L[i] * (q[i, 0] * S1 - q[i, 1] * S0)


@kjit
def accel(y, p, work, hacc):
    """``hacc = ω̇`` (N, 3) from the O(N) RHS algorithm (spec §3). Returns status."""
    n = y.shape[0]
    g = p[0]
    L = p[1 + n : 1 + 2 * n]
    mu = p[1 + 2 * n : 1 + 3 * n]
    b = work[9 * n : 12 * n].reshape((n, 3))
    S = work[12 * n : 15 * n].reshape((n, 3))
    # suffix sums S_i = Σ_{j>i} μ_j c_j, c_j = L_j |ω_j|² q_j
    s0 = 0.0
    s1 = 0.0
    s2 = 0.0
    for i in range(n - 1, -1, -1):
        S[i, 0] = s0
        S[i, 1] = s1
        S[i, 2] = s2
        cj = L[i] * (y[i, 3] * y[i, 3] + y[i, 4] * y[i, 4] + y[i, 5] * y[i, 5])
        s0 += mu[i] * cj * y[i, 0]
        s1 += mu[i] * cj * y[i, 1]
        s2 += mu[i] * cj * y[i, 2]
    P0 = 0.0
    P1 = 0.0
    P2 = 0.0
    for i in range(n):
        v0 = mu[i] * P0 + S[i, 0]
        v1 = mu[i] * P1 + S[i, 1]
        v2 = mu[i] * P2 + S[i, 2]
        q0 = y[i, 0]
        q1 = y[i, 1]
        q2 = y[i, 2]
        gl = mu[i] * g
        # b_i = L_i q_i × (μ_i P_i + S_i) − μ_i g L_i q_i × e3
        b[i, 0] = L[i] * ((q1 * v2 - q2 * v1) - gl * q1)
        b[i, 1] = L[i] * ((q2 * v0 - q0 * v2) + gl * q0)
        b[i, 2] = L[i] * (q0 * v1 - q1 * v0)
        cj = L[i] * (y[i, 3] * y[i, 3] + y[i, 4] * y[i, 4] + y[i, 5] * y[i, 5])
        P0 += cj * q0
        P1 += cj * q1
        P2 += cj * q2
    return rsolve(y[:, 0:3], b, p, work, hacc)


@kjit(FIELD_SIG)
def chain_f(y, p, work, out):
    """Algebra map ``f(y) = (ω_i, q_i × ω̇_i)`` into ``out`` (N, 6)."""
    n = y.shape[0]
    hacc = work[15 * n : 18 * n].reshape((n, 3))
    st = accel(y, p, work, hacc)
    bad = st != 0
    for i in range(n):
        q0 = y[i, 0]
        q1 = y[i, 1]
        q2 = y[i, 2]
        out[i, 0] = y[i, 3]
        out[i, 1] = y[i, 4]
        out[i, 2] = y[i, 5]
        out[i, 3] = q1 * hacc[i, 2] - q2 * hacc[i, 1]
        out[i, 4] = q2 * hacc[i, 0] - q0 * hacc[i, 2]
        out[i, 5] = q0 * hacc[i, 1] - q1 * hacc[i, 0]
        for c in range(3, 6):
            if not np.isfinite(out[i, c]):
                bad = True
    return _NONFINITE if bad else 0


@kjit(FIELD_SIG)
def chain_F(y, p, work, out):
    """Ambient field ``F(y) = (ω_i × q_i, ω̇_i)`` via the O(N) path (on-manifold states)."""
    n = y.shape[0]
    hacc = work[15 * n : 18 * n].reshape((n, 3))
    st = accel(y, p, work, hacc)
    bad = st != 0
    for i in range(n):
        out[i, 0] = y[i, 4] * y[i, 2] - y[i, 5] * y[i, 1]
        out[i, 1] = y[i, 5] * y[i, 0] - y[i, 3] * y[i, 2]
        out[i, 2] = y[i, 3] * y[i, 1] - y[i, 4] * y[i, 0]
        for c in range(3):
            out[i, 3 + c] = hacc[i, c]
            if not np.isfinite(hacc[i, c]):
                bad = True
    return _NONFINITE if bad else 0


@kjit
def _gauss_solve(a, x):
    """Solve ``a z = x`` in place (z into x); NONFINITE status on a singular matrix."""
    return _NONFINITE if lu_solve_inplace(a, x) != 0 else 0


@kjit(FIELD_SIG)
def chain_F_dense(y, p, work, out):
    """Ambient field with the dense formula of spec §2 evaluated at the raw state (O(N³))."""
    n = y.shape[0]
    g = p[0]
    L = p[1 + n : 1 + 2 * n]
    mu = p[1 + 2 * n : 1 + 3 * n]
    m3 = 3 * n
    R = work[24 * n : 24 * n + m3 * m3].reshape((m3, m3))
    x = work[24 * n + m3 * m3 : 24 * n + m3 * m3 + m3]
    for i in range(n):
        for j in range(n):
            Mij = mu[max(i, j)] * L[i] * L[j]
            if i == j:
                for a in range(3):
                    for c in range(3):
                        R[3 * i + a, 3 * j + c] = Mij if a == c else 0.0
            else:
                # q̂_iᵀ q̂_j = (q_i·q_j) I − q_j q_iᵀ
                d = y[i, 0] * y[j, 0] + y[i, 1] * y[j, 1] + y[i, 2] * y[j, 2]
                for a in range(3):
                    for c in range(3):
                        v = -y[j, a] * y[i, c]
                        if a == c:
                            v += d
                        R[3 * i + a, 3 * j + c] = Mij * v
    for i in range(n):
        r0 = 0.0
        r1 = 0.0
        r2 = 0.0
        for j in range(n):
            if j != i:
                cc = mu[max(i, j)] * L[i] * L[j] * (y[j, 3] ** 2 + y[j, 4] ** 2 + y[j, 5] ** 2)
                r0 += cc * (y[i, 1] * y[j, 2] - y[i, 2] * y[j, 1])
                r1 += cc * (y[i, 2] * y[j, 0] - y[i, 0] * y[j, 2])
                r2 += cc * (y[i, 0] * y[j, 1] - y[i, 1] * y[j, 0])
        gl = mu[i] * g * L[i]
        x[3 * i] = r0 - gl * y[i, 1]
        x[3 * i + 1] = r1 + gl * y[i, 0]
        x[3 * i + 2] = r2
    st = _gauss_solve(R, x)
    bad = st != 0
    for i in range(n):
        out[i, 0] = y[i, 4] * y[i, 2] - y[i, 5] * y[i, 1]
        out[i, 1] = y[i, 5] * y[i, 0] - y[i, 3] * y[i, 2]
        out[i, 2] = y[i, 3] * y[i, 1] - y[i, 4] * y[i, 0]
        for c in range(3):
            out[i, 3 + c] = x[3 * i + c]
            if not np.isfinite(x[3 * i + c]):
                bad = True
    return _NONFINITE if bad else 0


@kjit(DIAG_SIG)
def chain_diag(y, p, work, out):
    """``out = [E, L_x, L_y, L_z, max_i|√(q_i·q_i) − 1|, max_i|q_i·ω_i|]``; returns E. O(N).

    ``E = ½ Σ m_k |v_k|² + g Σ m_k e3·x_k`` and ``L = Σ m_k x_k × v_k`` (about the pivot)
    with ``x_k = Σ_{i≤k} L_i q_i``, ``v_k = Σ_{i≤k} L_i ω_i × q_i``.
    """
    n = y.shape[0]
    g = p[0]
    m = p[1 : 1 + n]
    L = p[1 + n : 1 + 2 * n]
    x0 = 0.0
    x1 = 0.0
    x2 = 0.0
    v0 = 0.0
    v1 = 0.0
    v2 = 0.0
    T = 0.0
    U = 0.0
    J0 = 0.0
    J1 = 0.0
    J2 = 0.0
    ue = 0.0
    te = 0.0
    for k in range(n):
        q0, q1, q2, w0, w1, w2 = y[k, 0], y[k, 1], y[k, 2], y[k, 3], y[k, 4], y[k, 5]
        x0 += L[k] * q0
        x1 += L[k] * q1
        x2 += L[k] * q2
        v0 += L[k] * (w1 * q2 - w2 * q1)
        v1 += L[k] * (w2 * q0 - w0 * q2)
        v2 += L[k] * (w0 * q1 - w1 * q0)
        T += m[k] * (v0 * v0 + v1 * v1 + v2 * v2)
        U += m[k] * x2
        J0 += m[k] * (x1 * v2 - x2 * v1)
        J1 += m[k] * (x2 * v0 - x0 * v2)
        J2 += m[k] * (x0 * v1 - x1 * v0)
        e = abs(np.sqrt(q0 * q0 + q1 * q1 + q2 * q2) - 1.0)
        if not e <= ue:
            ue = e
        e = abs(q0 * w0 + q1 * w1 + q2 * w2)
        if not e <= te:
            te = e
    E = 0.5 * T + g * U
    out[0] = E
    out[1] = J0
    out[2] = J1
    out[3] = J2
    out[4] = ue
    out[5] = te
    return E
