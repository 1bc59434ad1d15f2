"""Integrators on (S²)ⁿ with the trajectory loop and diagnostics inside Numba.

Methods (``METHODS``; codes are stable):

* ``explicit_vi`` — explicit variational integrator for diagonal M (Lee–Leok–McClamroch
  Cor. 3): second order, symplectic, |q_i| = 1 and momentum map to round-off. Needs
  ``|h ω_i − h²/(2m_i) q_i×g_i| < 1``; otherwise the step fails with status DOMAIN.
* ``implicit_vi`` — variational integrator for general (coupled) M: the Cayley-form
  equation for f is solved by a linearised fixed point with a dense LU solve per iteration
  (stop at ``max|Δf| ≤ tol·max(1, max|f|)``; ``maxit`` iterations → status NONCONVERGED).
* ``rk2``, ``rk4`` — explicit midpoint and classical RK4 on the ambient ODE in (q, ω) ∈ R⁶ⁿ
  (comparison baselines, not structure preserving).
* ``rk2_proj``, ``rk4_proj`` — the same followed by ``q_i ← q_i/|q_i|`` after every step
  (ω untouched), the "projection" baseline.

Common rules: ``t_k = k h``; ``q`` normalised and ``ω`` projected once at t = 0 and never
again (except in the ``*_proj`` baselines); one potential evaluation per VI step (the
gradient at the new state is kept for the next step); a failed step keeps the last valid
state and ends the trajectory with its status, step index, offending body and value.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numba import types

from kernels._jit import kjit
from kernels.linalg import all_finite as _all_finite
from kernels.linalg import lu_solve_inplace
from kernels.s2.model import SYMMETRY_CODES, PotentialType, S2System
from kernels.status import Status

METHODS: dict[str, int] = {
    "explicit_vi": 0,
    "implicit_vi": 1,
    "rk2": 2,
    "rk2_proj": 3,
    "rk4": 4,
    "rk4_proj": 5,
}

#: Order of the entries of the float summary vector written by the driver.
SUMMARY_FIELDS: tuple[str, ...] = (
    "E0",  # initial energy
    "mean_abs_dE",  # (1/(K+1)) Σ_k |E_k − E_0| over every step k = 0..K done
    "max_abs_dE",  # max_k |E_k − E_0|
    "max_rel_dE",  # max_k |E_k − E_0| / |E_0|
    "drift_slope",  # least-squares slope of E_k − E_0 against t_k (energy per time)
    "mean_unit_error",  # mean_k max_i |sqrt(q_i·q_i) − 1|
    "max_unit_error",
    "max_tangency_error",  # max_k max_i |q_i·ω_i|
    "max_momentum_error",  # max_k |J_k − J_0| (full) or |a·(J_k − J_0)| (axis); NaN if none
    "fail_value",  # diagnostic value at failure (|a_i|, last Picard change, ...); NaN if ok
    "max_step_norm",  # explicit VI: max |a_i| (validity needs < 1); NaN for other methods
)
#: Order of the entries of the integer info vector written by the driver.
INFO_FIELDS: tuple[str, ...] = (
    "status",
    "fail_step",  # index k of the step that failed (−1 if none)
    "fail_index",  # offending body i (−1 if none)
    "steps_done",
    "potential_evals",
    "solver_iterations",  # total nonlinear iterations (implicit methods)
    "solver_iterations_max",  # max iterations in one step
)
_NS = len(SUMMARY_FIELDS)
_NI = len(INFO_FIELDS)

_OK = int(Status.OK)
_DOMAIN = int(Status.DOMAIN)
_NONCONV = int(Status.NONCONVERGED)
_NONFINITE = int(Status.NONFINITE)


# --------------------------------------------------------------------------------------
# small helpers
# --------------------------------------------------------------------------------------
@kjit
def _qdot(M, diag, q, w, qd):
    """q̇_i = ω_i × q_i into ``qd``."""
    for i in range(q.shape[0]):
        qd[i, 0] = w[i, 1] * q[i, 2] - w[i, 2] * q[i, 1]
        qd[i, 1] = w[i, 2] * q[i, 0] - w[i, 0] * q[i, 2]
        qd[i, 2] = w[i, 0] * q[i, 1] - w[i, 1] * q[i, 0]


@kjit
def _kinetic(M, diag, q, w, qd):
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
def _momentum(M, diag, q, qd, J):
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
def _constraint_errors(q, w):
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
def _step_explicit_vi(pot, p, M, q, w, g, h, qn, wn, gn, a, t):
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
def _step_implicit_vi(pot, p, M, q, w, g, h, qn, wn, gn, d, f, A, rhs, tol, maxit):
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
def _rk_stage_state(q, w, h, kq, kw, qs, ws):
    for i in range(q.shape[0]):
        for a in range(3):
            qs[i, a] = q[i, a] + h * kq[i, a]
            ws[i, a] = w[i, a] + h * kw[i, a]


@kjit
def _step_rk(pot, p, M, diag, q, w, g, h, qn, wn, gn, order, project, kq, kw, qs, ws, gs, K, rhs):
    """Explicit midpoint (order 2) or classical RK4 (order 4) on (q, ω) ∈ R⁶ⁿ.

    ``kq``/``kw`` are (4, n, 3) stage buffers. Returns (status, index, value, V_new, evals).
    """
    n = q.shape[0]
    evals = 0
    # stage 1 at (q, w) with the cached gradient g
    _qdot(M, diag, q, w, kq[0])
    if _angular_acceleration(M, diag, q, w, g, kw[0], K, rhs) != 0:
        return _NONFINITE, -1, np.inf, 0.0, evals
    if order == 2:
        _rk_stage_state(q, w, 0.5 * h, kq[0], kw[0], qs, ws)
        pot(qs, p, gs)
        evals += 1
        _qdot(M, diag, qs, ws, kq[1])
        if _angular_acceleration(M, diag, qs, ws, gs, kw[1], K, rhs) != 0:
            return _NONFINITE, -1, np.inf, 0.0, evals
        for i in range(n):
            for a in range(3):
                qn[i, a] = q[i, a] + h * kq[1, i, a]
                wn[i, a] = w[i, a] + h * kw[1, i, a]
    else:
        for s in range(1, 4):
            c = 0.5 * h if s < 3 else h
            _rk_stage_state(q, w, c, kq[s - 1], kw[s - 1], qs, ws)
            pot(qs, p, gs)
            evals += 1
            _qdot(M, diag, qs, ws, kq[s])
            if _angular_acceleration(M, diag, qs, ws, gs, kw[s], K, rhs) != 0:
                return _NONFINITE, -1, np.inf, 0.0, evals
        h6 = h / 6.0
        for i in range(n):
            for a in range(3):
                qn[i, a] = q[i, a] + h6 * (kq[0, i, a] + 2.0 * kq[1, i, a] + 2.0 * kq[2, i, a] + kq[3, i, a])
                wn[i, a] = w[i, a] + h6 * (kw[0, i, a] + 2.0 * kw[1, i, a] + 2.0 * kw[2, i, a] + kw[3, i, a])
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


# --------------------------------------------------------------------------------------
# the trajectory driver
# --------------------------------------------------------------------------------------
@kjit
def _sample(k, stride, E, E0, u, tau, J, out_E, out_dE, out_u, out_tau, out_J):
    if k % stride == 0:
        s = k // stride
        out_E[s] = E
        out_dE[s] = E - E0
        out_u[s] = u
        out_tau[s] = tau
        out_J[s, 0] = J[0]
        out_J[s, 1] = J[1]
        out_J[s, 2] = J[2]


@kjit
def _snapshot(k, snap_stride, q, w, out_qs, out_ws):
    if k % snap_stride == 0:
        s = k // snap_stride
        out_qs[s, :, :] = q
        out_ws[s, :, :] = w


_F1 = types.float64[::1]
_F2 = types.float64[:, ::1]
_RUN_S2_SIG = types.int64(
    types.int64,
    PotentialType,
    _F1,
    _F2,
    types.boolean,
    _F2,
    _F2,
    types.float64,
    types.int64,
    types.int64,
    types.int64,
    _F1,
    types.float64,
    types.int64,
    _F1,
    _F1,
    _F1,
    _F1,
    _F2,
    _F1,
    types.int64[::1],
    types.int64,
    types.float64[:, :, ::1],
    types.float64[:, :, ::1],
)


@kjit(_RUN_S2_SIG)
def run_s2(
    method,
    pot,
    p,
    M,
    diag,
    q,
    w,
    h,
    nsteps,
    stride,
    sym,
    axis,
    tol,
    maxit,
    out_E,
    out_dE,
    out_u,
    out_tau,
    out_J,
    summary,
    info,
    snap_stride,
    out_qs,
    out_ws,
):
    """Integrate ``nsteps`` steps of size ``h`` in place on (q, w).

    Samples every ``stride`` steps go to the ``out_*`` arrays (length nsteps//stride + 1,
    pre-filled with NaN by the caller); every step enters the summaries. The state (q, ω) is
    copied into ``out_qs``/``out_ws`` every ``snap_stride`` steps (length nsteps//snap_stride + 1). On return, (q, w)
    hold the final (or last valid) state. Returns the status code.
    """
    n = q.shape[0]
    g = np.empty((n, 3))
    qn = np.empty((n, 3))
    wn = np.empty((n, 3))
    gn = np.empty((n, 3))
    qd = np.empty((n, 3))
    sa = np.empty((n, 3))
    sb = np.empty((n, 3))
    J = np.empty(3)
    J0 = np.empty(3)
    kq = np.empty((4, n, 3))
    kw = np.empty((4, n, 3))
    qs = np.empty((n, 3))
    ws = np.empty((n, 3))
    gs = np.empty((n, 3))
    m3 = 3 * n if (method == 1 or not diag) else 1
    A = np.empty((m3, m3))
    v1 = np.empty(m3)
    v2 = np.empty(m3)
    v3 = np.empty(m3)
    for s in range(_NS):
        summary[s] = np.nan
    for s in range(_NI):
        info[s] = 0
    info[1] = -1
    info[2] = -1

    V = pot(q, p, g)
    evals = 1
    E0 = _kinetic(M, diag, q, w, qd) + V
    _momentum(M, diag, q, qd, J0)
    u, tau = _constraint_errors(q, w)
    _sample(0, stride, E0, E0, u, tau, J0, out_E, out_dE, out_u, out_tau, out_J)
    _snapshot(0, snap_stride, q, w, out_qs, out_ws)
    summary[0] = E0
    status = _OK
    if not np.isfinite(E0):
        status = _NONFINITE
        info[1] = 0
    sum_abs = 0.0
    max_abs = 0.0
    sum_u = u
    max_u = u
    max_tau = tau
    max_dJ = 0.0
    # least-squares slope of ΔE against t: accumulate with t_k = k h
    st = 0.0
    stt = 0.0
    se = 0.0
    ste = 0.0
    max_a = 0.0
    iters_total = 0
    iters_max = 0
    fail_value = np.nan
    k_done = 0
    project = method == 3 or method == 5
    order = 2 if (method == 2 or method == 3) else 4
    for k in range(1, nsteps + 1):
        if status != _OK:
            break
        if method == 0:
            st_, idx, val, Vn, anorm = _step_explicit_vi(pot, p, M, q, w, g, h, qn, wn, gn, sa, sb)
            evals += 1
            if anorm > max_a:
                max_a = anorm
        elif method == 1:
            st_, idx, val, Vn, its = _step_implicit_vi(pot, p, M, q, w, g, h, qn, wn, gn, v1, v2, A, v3, tol, maxit)
            evals += 1
            iters_total += its
            if its > iters_max:
                iters_max = its
        else:
            st_, idx, val, Vn, ev = _step_rk(
                pot, p, M, diag, q, w, g, h, qn, wn, gn, order, project, kq, kw, qs, ws, gs, A, v1
            )
            evals += ev
        if st_ == _OK:
            E = _kinetic(M, diag, qn, wn, qd) + Vn
            if not np.isfinite(E) or not _all_finite(wn):
                st_ = _NONFINITE
                val = E
        if st_ != _OK:
            status = st_
            info[1] = k
            info[2] = idx
            fail_value = val
            break
        # accept: swap buffers
        q, qn = qn, q
        w, wn = wn, w
        g, gn = gn, g
        k_done = k
        _momentum(M, diag, q, qd, J)
        u, tau = _constraint_errors(q, w)
        dE = E - E0
        adE = abs(dE)
        sum_abs += adE
        if adE > max_abs:
            max_abs = adE
        sum_u += u
        if u > max_u:
            max_u = u
        if tau > max_tau:
            max_tau = tau
        if sym == 2:
            dj = np.sqrt((J[0] - J0[0]) ** 2 + (J[1] - J0[1]) ** 2 + (J[2] - J0[2]) ** 2)
        elif sym == 1:
            dj = abs(axis[0] * (J[0] - J0[0]) + axis[1] * (J[1] - J0[1]) + axis[2] * (J[2] - J0[2]))
        else:
            dj = 0.0
        if dj > max_dJ:
            max_dJ = dj
        t = k * h
        st += t
        stt += t * t
        se += dE
        ste += t * dE
        _sample(k, stride, E, E0, u, tau, J, out_E, out_dE, out_u, out_tau, out_J)
        _snapshot(k, snap_stride, q, w, out_qs, out_ws)

    # the final state must be in the caller's arrays
    if k_done % 2 == 1:
        qn[:, :] = q
        wn[:, :] = w
        q, qn = qn, q
        w, wn = wn, w
    cnt = k_done + 1
    summary[1] = sum_abs / cnt
    summary[2] = max_abs
    summary[3] = max_abs / abs(E0) if E0 != 0.0 else np.nan
    den = cnt * stt - st * st
    summary[4] = (cnt * ste - st * se) / den if den > 0.0 else np.nan
    summary[5] = sum_u / cnt
    summary[6] = max_u
    summary[7] = max_tau
    summary[8] = max_dJ if sym != 0 else np.nan
    summary[9] = fail_value
    summary[10] = max_a if method == 0 else np.nan
    info[0] = status
    info[3] = k_done
    info[4] = evals
    info[5] = iters_total
    info[6] = iters_max
    return status


# --------------------------------------------------------------------------------------
# Python entry point
# --------------------------------------------------------------------------------------
@dataclass
class Trajectory:
    """Result of :func:`integrate` (all arrays float64 unless stated).

    ``time`` (K,), ``energy``/``energy_error``/``unit_error``/``tangency_error`` (K,) and
    ``momentum`` (K, 3) sampled every ``stride`` steps (NaN after a failure); ``q``, ``w``
    final (or last valid) state; ``q_snap``/``w_snap`` (S, n, 3) states at ``snapshot_time``;
    ``summary`` and ``info`` dicts keyed by :data:`SUMMARY_FIELDS` and :data:`INFO_FIELDS`; ``wall_time`` in seconds.
    """

    time: np.ndarray
    energy: np.ndarray
    energy_error: np.ndarray
    unit_error: np.ndarray
    tangency_error: np.ndarray
    momentum: np.ndarray
    q: np.ndarray
    w: np.ndarray
    q_snap: np.ndarray
    w_snap: np.ndarray
    snapshot_time: np.ndarray
    summary: dict[str, float]
    info: dict[str, int]
    wall_time: float

    @property
    def status(self) -> Status:
        return Status(self.info["status"])


def integrate(
    system: S2System,
    method: str,
    h: float,
    n_steps: int,
    stride: int = 1,
    *,
    tol: float = 1e-14,
    maxit: int = 50,
    q0: np.ndarray | None = None,
    w0: np.ndarray | None = None,
    snapshot_stride: int = 0,
) -> Trajectory:
    """Integrate ``system`` with ``method`` for ``n_steps`` steps of size ``h``.

    The initial state (``system.q0/w0`` unless given) is normalised and projected once.
    ``stride`` is the sampling interval in steps. ``tol``/``maxit`` control the implicit VI.
    ``snapshot_stride``: steps between stored states (0: only t = 0 and t = T).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    if method == "explicit_vi" and not system.is_diagonal:
        raise ValueError("explicit_vi needs a diagonal inertia matrix M; use implicit_vi")
    if h <= 0 or n_steps < 0 or stride < 1:
        raise ValueError("need h > 0, n_steps >= 0, stride >= 1")
    from kernels.s2.model import normalise_and_project

    q, w = normalise_and_project(system.q0 if q0 is None else q0, system.w0 if w0 is None else w0)
    ns = n_steps // stride + 1
    out = {k: np.full(ns, np.nan) for k in ("E", "dE", "u", "tau")}
    out_J = np.full((ns, 3), np.nan)
    snap = int(snapshot_stride) if snapshot_stride > 0 else max(int(n_steps), 1)
    n_snap = int(n_steps) // snap + 1
    out_qs = np.full((n_snap, system.n, 3), np.nan)
    out_ws = np.full((n_snap, system.n, 3), np.nan)
    summary = np.empty(_NS)
    info = np.empty(_NI, dtype=np.int64)
    diag = system.is_diagonal  # an O(n²) check: keep it out of the timed region
    t0 = time.perf_counter()
    run_s2(
        METHODS[method],
        system.potential,
        system.params,
        system.M,
        diag,
        q,
        w,
        float(h),
        int(n_steps),
        int(stride),
        SYMMETRY_CODES[system.symmetry],
        system.axis,
        float(tol),
        int(maxit),
        out["E"],
        out["dE"],
        out["u"],
        out["tau"],
        out_J,
        summary,
        info,
        snap,
        out_qs,
        out_ws,
    )
    wall = time.perf_counter() - t0
    return Trajectory(
        time=np.arange(ns) * (stride * h),
        energy=out["E"],
        energy_error=out["dE"],
        unit_error=out["u"],
        tangency_error=out["tau"],
        momentum=out_J,
        q=q,
        w=w,
        q_snap=out_qs,
        w_snap=out_ws,
        snapshot_time=np.arange(n_snap) * (snap * h),
        summary=dict(zip(SUMMARY_FIELDS, summary.tolist())),
        info=dict(zip(INFO_FIELDS, info.tolist())),
        wall_time=wall,
    )
