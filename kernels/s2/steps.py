"""One-step maps on (S²)ⁿ and the physics they share (energy, momentum map, constraint errors).

Conventions: ``q``, ``w`` (n, 3); ``M`` (n, n) inertia (``diag`` True when uncoupled); ``pot``
the compiled potential ``V = pot(q, p, g)``. A step reads (q, w, g) — g the gradient at q kept
from the previous step — and writes (qn, wn, gn); it returns (status, index, value, V_new, …).

* explicit VI (diagonal M, 000 Cor. 3): needs ``|h ω_i − h²/(2m_i) q_i×g_i| < 1``, else DOMAIN.
* implicit VI (coupled M, 000 (22)–(28)): Cayley-form equation for f, linearised fixed point
  with a dense LU solve per iteration, stop at ``max|Δf| ≤ tol·max(1, max|f|)``.
* explicit Runge–Kutta on the ambient ODE in (q, ω) ∈ R⁶ⁿ for any explicit tableau (A, b),
  optionally followed by ``q_i ← q_i/|q_i|`` (the projection baseline).
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.linalg import all_finite as _all_finite
from geosweep.kernels.linalg import lu_solve_inplace
from geosweep.kernels.status import Status

_OK = int(Status.OK)
_DOMAIN = int(Status.DOMAIN)
_NONCONV = int(Status.NONCONVERGED)
_NONFINITE = int(Status.NONFINITE)


@kjit
def _qdot(M, diag, q, w, qd):
    """q̇_i = ω_i × q_i into ``qd``."""
    for i in range(q.shape[0]):
        qd[i, 0] = w[i, 1] * q[i, 2] - w[i, 2] * q[i, 1]
        qd[i, 1] = w[i, 2] * q[i, 0] - w[i, 0] * q[i, 2]
        qd[i, 2] = w[i, 0] * q[i, 1] - w[i, 1] * q[i, 0]


@kjit
def kinetic(M, diag, q, w, qd):
    _qdot(M, diag, q, w, qd)
    n = q.shape[0]
    T = 0.0
    if diag:
        for i in range(n):
            T += M[i, i] * (qd[i, 0] * qd[i, 0] + qd[i, 1] * qd[i, 1] + qd[i, 2] * qd[i, 2])
    else:
        for i in range(n):
            for j in range(n):
                T += M[i, j] * (qd[i, 0] * qd[j, 0] + qd[i, 1] * qd[j, 1] + qd[i, 2] * qd[j, 2])
    return 0.5 * T


@kjit
def momentum(M, diag, q, qd, J):
    """J = Σ_i q_i × Σ_j M_ij q̇_j (``qd`` must hold q̇)."""
    n = q.shape[0]
    J[0] = 0.0
    J[1] = 0.0
    J[2] = 0.0
    for i in range(n):
        if diag:
            s0 = M[i, i] * qd[i, 0]
            s1 = M[i, i] * qd[i, 1]
            s2 = M[i, i] * qd[i, 2]
        else:
            s0 = 0.0
            s1 = 0.0
            s2 = 0.0
            for j in range(n):
                s0 += M[i, j] * qd[j, 0]
                s1 += M[i, j] * qd[j, 1]
                s2 += M[i, j] * qd[j, 2]
        J[0] += q[i, 1] * s2 - q[i, 2] * s1
        J[1] += q[i, 2] * s0 - q[i, 0] * s2
        J[2] += q[i, 0] * s1 - q[i, 1] * s0


@kjit
def constraint_errors(q, w):
    """(max_i |sqrt(q_i·q_i) − 1|, max_i |q_i·ω_i|)."""
    u = 0.0
    tau = 0.0
    for i in range(q.shape[0]):
        r = np.sqrt(q[i, 0] * q[i, 0] + q[i, 1] * q[i, 1] + q[i, 2] * q[i, 2])
        e = abs(r - 1.0)
        if not e <= u:  # also propagates NaN
            u = e
        d = abs(q[i, 0] * w[i, 0] + q[i, 1] * w[i, 1] + q[i, 2] * w[i, 2])
        if not d <= tau:
            tau = d
    return u, tau


@kjit
def _assemble_K(M, q, K):
    """K(q): blocks K_ii = M_ii I, K_ij = −M_ij [q_j q_iᵀ − (q_i·q_j) I]."""
    n = q.shape[0]
    for i in range(n):
        for j in range(n):
            if i == j:
                for a in range(3):
                    for b in range(3):
                        K[3 * i + a, 3 * j + b] = M[i, i] if a == b else 0.0
            else:
                dij = q[i, 0] * q[j, 0] + q[i, 1] * q[j, 1] + q[i, 2] * q[j, 2]
                for a in range(3):
                    for b in range(3):
                        v = q[j, a] * q[i, b]
                        if a == b:
                            v -= dij
                        K[3 * i + a, 3 * j + b] = -M[i, j] * v


@kjit
def _angular_acceleration(M, diag, q, w, g, dw, K, rhs):
    """ω̇ of the Euler–Lagrange equations: K(q) ω̇ = r (diagonal M: ω̇_i = −q_i×g_i / m_i)."""
    n = q.shape[0]
    if diag:
        for i in range(n):
            c = -1.0 / M[i, i]
            dw[i, 0] = c * (q[i, 1] * g[i, 2] - q[i, 2] * g[i, 1])
            dw[i, 1] = c * (q[i, 2] * g[i, 0] - q[i, 0] * g[i, 2])
            dw[i, 2] = c * (q[i, 0] * g[i, 1] - q[i, 1] * g[i, 0])
        return 0
    for i in range(n):
        r0 = -(q[i, 1] * g[i, 2] - q[i, 2] * g[i, 1])
        r1 = -(q[i, 2] * g[i, 0] - q[i, 0] * g[i, 2])
        r2 = -(q[i, 0] * g[i, 1] - q[i, 1] * g[i, 0])
        for j in range(n):
            if j != i:
                c = M[i, j] * (w[j, 0] * w[j, 0] + w[j, 1] * w[j, 1] + w[j, 2] * w[j, 2])
                r0 += c * (q[i, 1] * q[j, 2] - q[i, 2] * q[j, 1])
                r1 += c * (q[i, 2] * q[j, 0] - q[i, 0] * q[j, 2])
                r2 += c * (q[i, 0] * q[j, 1] - q[i, 1] * q[j, 0])
        rhs[3 * i] = r0
        rhs[3 * i + 1] = r1
        rhs[3 * i + 2] = r2
    _assemble_K(M, q, K)
    if lu_solve_inplace(K, rhs) != 0:
        return 1
    for i in range(n):
        dw[i, 0] = rhs[3 * i]
        dw[i, 1] = rhs[3 * i + 1]
        dw[i, 2] = rhs[3 * i + 2]
    return 0


# --------------------------------------------------------------------------------------
# single steps: read (q, w, g), write (qn, wn, gn); return (status, index, value, V_new)
# --------------------------------------------------------------------------------------
@kjit
def step_explicit_vi(pot, p, M, q, w, g, h, qn, wn, gn, a, t):
    n = q.shape[0]
    amax = 0.0
    for i in range(n):
        c = h * h / (2.0 * M[i, i])
        t[i, 0] = q[i, 1] * g[i, 2] - q[i, 2] * g[i, 1]
        t[i, 1] = q[i, 2] * g[i, 0] - q[i, 0] * g[i, 2]
        t[i, 2] = q[i, 0] * g[i, 1] - q[i, 1] * g[i, 0]
        a[i, 0] = h * w[i, 0] - c * t[i, 0]
        a[i, 1] = h * w[i, 1] - c * t[i, 1]
        a[i, 2] = h * w[i, 2] - c * t[i, 2]
        aa = a[i, 0] * a[i, 0] + a[i, 1] * a[i, 1] + a[i, 2] * a[i, 2]
        s = 1.0 - aa
        if not s > 0.0:  # s <= 0 or NaN
            return _DOMAIN, i, np.sqrt(aa), 0.0, np.sqrt(amax)
        if aa > amax:
            amax = aa
        r = np.sqrt(s)
        qn[i, 0] = a[i, 1] * q[i, 2] - a[i, 2] * q[i, 1] + r * q[i, 0]
        qn[i, 1] = a[i, 2] * q[i, 0] - a[i, 0] * q[i, 2] + r * q[i, 1]
        qn[i, 2] = a[i, 0] * q[i, 1] - a[i, 1] * q[i, 0] + r * q[i, 2]
    Vn = pot(qn, p, gn)
    for i in range(n):
        c = h / (2.0 * M[i, i])
        tn0 = qn[i, 1] * gn[i, 2] - qn[i, 2] * gn[i, 1]
        tn1 = qn[i, 2] * gn[i, 0] - qn[i, 0] * gn[i, 2]
        tn2 = qn[i, 0] * gn[i, 1] - qn[i, 1] * gn[i, 0]
        wn[i, 0] = w[i, 0] - c * t[i, 0] - c * tn0
        wn[i, 1] = w[i, 1] - c * t[i, 1] - c * tn1
        wn[i, 2] = w[i, 2] - c * t[i, 2] - c * tn2
    return _OK, -1, 0.0, Vn, np.sqrt(amax)


@kjit
def step_implicit_vi(pot, p, M, q, w, g, h, qn, wn, gn, d, f, A, rhs, tol, maxit):
    """Returns (status, index, value, V_new, iterations)."""
    n = q.shape[0]
    # π_i = M_ii ω_i − q_i × Σ_{j≠i} M_ij (q_j × ω_j);  d_i = h π_i − h²/2 q_i × g_i
    for i in range(n):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        for j in range(n):
            if j != i and M[i, j] != 0.0:
                c0 = q[j, 1] * w[j, 2] - q[j, 2] * w[j, 1]
                c1 = q[j, 2] * w[j, 0] - q[j, 0] * w[j, 2]
                c2 = q[j, 0] * w[j, 1] - q[j, 1] * w[j, 0]
                s0 += M[i, j] * c0
                s1 += M[i, j] * c1
                s2 += M[i, j] * c2
        pi0 = M[i, i] * w[i, 0] - (q[i, 1] * s2 - q[i, 2] * s1)
        pi1 = M[i, i] * w[i, 1] - (q[i, 2] * s0 - q[i, 0] * s2)
        pi2 = M[i, i] * w[i, 2] - (q[i, 0] * s1 - q[i, 1] * s0)
        hh = 0.5 * h * h
        d[3 * i] = h * pi0 - hh * (q[i, 1] * g[i, 2] - q[i, 2] * g[i, 1])
        d[3 * i + 1] = h * pi1 - hh * (q[i, 2] * g[i, 0] - q[i, 0] * g[i, 2])
        d[3 * i + 2] = h * pi2 - hh * (q[i, 0] * g[i, 1] - q[i, 1] * g[i, 0])
    for i in range(n):
        for a in range(3):
            f[3 * i + a] = d[3 * i + a] / (2.0 * M[i, i])
    it = 0
    converged = False
    change = 0.0
    while it < maxit:
        it += 1
        # assemble A(f)
        for j in range(n):
            fj0 = f[3 * j]
            fj1 = f[3 * j + 1]
            fj2 = f[3 * j + 2]
            cj = 2.0 / (1.0 + fj0 * fj0 + fj1 * fj1 + fj2 * fj2)
            for i in range(n):
                if i == j:
                    for a in range(3):
                        for b in range(3):
                            A[3 * i + a, 3 * j + b] = cj * M[i, i] if a == b else 0.0
                else:
                    cij = -cj * M[i, j]
                    dij = q[i, 0] * q[j, 0] + q[i, 1] * q[j, 1] + q[i, 2] * q[j, 2]
                    x0 = q[i, 1] * q[j, 2] - q[i, 2] * q[j, 1]
                    x1 = q[i, 2] * q[j, 0] - q[i, 0] * q[j, 2]
                    x2 = q[i, 0] * q[j, 1] - q[i, 1] * q[j, 0]
                    for a in range(3):
                        xa = x0 if a == 0 else (x1 if a == 1 else x2)
                        for b in range(3):
                            fb = fj0 if b == 0 else (fj1 if b == 1 else fj2)
                            v = q[j, a] * q[i, b] + xa * fb
                            if a == b:
                                v -= dij
                            A[3 * i + a, 3 * j + b] = cij * v
        for r in range(3 * n):
            rhs[r] = d[r]
        if lu_solve_inplace(A, rhs) != 0:
            return _NONCONV, -1, np.inf, 0.0, it
        change = 0.0
        fmax = 0.0
        for r in range(3 * n):
            dv = abs(rhs[r] - f[r])
            if not dv <= change:
                change = dv
            av = abs(rhs[r])
            if av > fmax:
                fmax = av
            f[r] = rhs[r]
        if not np.isfinite(change):
            return _NONFINITE, -1, change, 0.0, it
        if change <= tol * max(1.0, fmax):
            converged = True
            break
    if not converged:
        return _NONCONV, -1, change, 0.0, it
    # Cayley update q_i' = ((1 − |f|²) q_i + 2 f_i × q_i) / (1 + |f|²)
    for i in range(n):
        f0 = f[3 * i]
        f1 = f[3 * i + 1]
        f2 = f[3 * i + 2]
        ff = f0 * f0 + f1 * f1 + f2 * f2
        c = 1.0 / (1.0 + ff)
        qn[i, 0] = ((1.0 - ff) * q[i, 0] + 2.0 * (f1 * q[i, 2] - f2 * q[i, 1])) * c
        qn[i, 1] = ((1.0 - ff) * q[i, 1] + 2.0 * (f2 * q[i, 0] - f0 * q[i, 2])) * c
        qn[i, 2] = ((1.0 - ff) * q[i, 2] + 2.0 * (f0 * q[i, 1] - f1 * q[i, 0])) * c
    Vn = pot(qn, p, gn)
    # b_i = (1/h) q_i' × Σ_j M_ij (q_j' − q_j) − (h/2) q_i' × g_i'
    for i in range(n):
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        for j in range(n):
            mij = M[i, j]
            if mij != 0.0:
                s0 += mij * (qn[j, 0] - q[j, 0])
                s1 += mij * (qn[j, 1] - q[j, 1])
                s2 += mij * (qn[j, 2] - q[j, 2])
        rhs[3 * i] = (qn[i, 1] * s2 - qn[i, 2] * s1) / h - 0.5 * h * (qn[i, 1] * gn[i, 2] - qn[i, 2] * gn[i, 1])
        rhs[3 * i + 1] = (qn[i, 2] * s0 - qn[i, 0] * s2) / h - 0.5 * h * (qn[i, 2] * gn[i, 0] - qn[i, 0] * gn[i, 2])
        rhs[3 * i + 2] = (qn[i, 0] * s1 - qn[i, 1] * s0) / h - 0.5 * h * (qn[i, 0] * gn[i, 1] - qn[i, 1] * gn[i, 0])
    _assemble_K(M, qn, A)
    if lu_solve_inplace(A, rhs) != 0:
        return _NONFINITE, -1, np.inf, Vn, it
    for i in range(n):
        wn[i, 0] = rhs[3 * i]
        wn[i, 1] = rhs[3 * i + 1]
        wn[i, 2] = rhs[3 * i + 2]
    return _OK, -1, change, Vn, it


@kjit
def step_rk(pot, p, M, diag, q, w, g, h, qn, wn, gn, A, b, bdiv, project, kq, kw, qs, ws, gs, K, rhs):
    """Explicit RK with tableau (A, b/bdiv) on (q, ω) ∈ R⁶ⁿ; ``kq``/``kw`` are (s, n, 3) stage buffers.

    Stage 1 uses the cached gradient ``g``; the gradient at the new state is kept (FSAL).
    Returns (status, index, value, V_new, evaluations).
    """
    n = q.shape[0]
    s = b.shape[0]
    evals = 0
    _qdot(M, diag, q, w, kq[0])
    if _angular_acceleration(M, diag, q, w, g, kw[0], K, rhs) != 0:
        return _NONFINITE, -1, np.inf, 0.0, evals
    for st in range(1, s):
        for i in range(n):
            for a in range(3):
                qs[i, a] = 0.0
                ws[i, a] = 0.0
        for j in range(st):
            c = A[st, j]
            if c != 0.0:
                hc = h * c
                for i in range(n):
                    for a in range(3):
                        qs[i, a] += hc * kq[j, i, a]
                        ws[i, a] += hc * kw[j, i, a]
        for i in range(n):
            for a in range(3):
                qs[i, a] = q[i, a] + qs[i, a]
                ws[i, a] = w[i, a] + ws[i, a]
        pot(qs, p, gs)
        evals += 1
        _qdot(M, diag, qs, ws, kq[st])
        if _angular_acceleration(M, diag, qs, ws, gs, kw[st], K, rhs) != 0:
            return _NONFINITE, -1, np.inf, 0.0, evals
    hb = h / bdiv  # weights b are given as b_j·bdiv (RK4: 1, 2, 2, 1 and 6) to keep textbook rounding
    for i in range(n):
        for a in range(3):
            sq = 0.0
            sw = 0.0
            for j in range(s):
                if b[j] != 0.0:
                    sq += b[j] * kq[j, i, a]
                    sw += b[j] * kw[j, i, a]
            qn[i, a] = q[i, a] + hb * sq
            wn[i, a] = w[i, a] + hb * sw
    if project:
        for i in range(n):
            r = np.sqrt(qn[i, 0] * qn[i, 0] + qn[i, 1] * qn[i, 1] + qn[i, 2] * qn[i, 2])
            qn[i, 0] /= r
            qn[i, 1] /= r
            qn[i, 2] /= r
    if not (_all_finite(qn) and _all_finite(wn)):
        return _NONFINITE, -1, np.nan, 0.0, evals
    Vn = pot(qn, p, gn)
    evals += 1
    return _OK, -1, 0.0, Vn, evals
