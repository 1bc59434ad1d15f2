"""The transitive action of 001 §6.1 (spec §3.4) on the (8, 6) quadrotor state, as the Lie
stepper's group callbacks ``act``, ``dexpinv``, ``bracket``.

Algebra element ``X`` (8, 6), rows aligned with the state rows of :mod:`geosweep.kernels.quad.model`:
row 0 ``(ξ1, ξ2)`` translates ``(y, v)``; row 1 ``(η1, η2)`` acts on ``(R1, Ω1)`` by
``(e^{η̂1} R1, Ω1 + η2)`` (direct product SO(3) × R³, spec §11 item 10); row 3 ``(η3, η4)`` the
same on ``(R2, Ω2)``; rows 5, 6 ``(μ, c)`` act on ``(q_i, ω_i)`` by SE(3) (the (TS²) action of
:mod:`geosweep.kernels.lie.se3`); row 7 translates the time; rows 2 and 4 are unused (always zero).
``dexp⁻¹`` and the bracket are blockwise: identity / zero on the abelian factors, the so(3)
and se(3) formulas elsewhere.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.lie import se3
from geosweep.kernels.lie.stepper import ACT_SIG, BRACKET_SIG, DEXPINV_SIG


@kjit
def _rot_left(A0, A1, A2, y, r0, out):
    """Rows r0, r0+1 of ``y`` hold R (9 entries); write e^{Â} R into ``out`` (may alias)."""
    al = np.sqrt(A0 * A0 + A1 * A1 + A2 * A2)
    c1, c2, _ = se3.exp_coeffs(al)
    R = np.empty((3, 3))
    for k in range(9):
        R[k // 3, k % 3] = y[r0 + k // 6, k % 6]
    n2 = A0 * A0 + A1 * A1 + A2 * A2
    A = (A0, A1, A2)
    B = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            B[i, j] = c2 * A[i] * A[j]
        B[i, i] += 1.0 - c2 * n2
    B[0, 1] -= c1 * A2
    B[0, 2] += c1 * A1
    B[1, 0] += c1 * A2
    B[1, 2] -= c1 * A0
    B[2, 0] -= c1 * A1
    B[2, 1] += c1 * A0
    for i in range(3):
        for j in range(3):
            s = B[i, 0] * R[0, j] + B[i, 1] * R[1, j] + B[i, 2] * R[2, j]
            k = 3 * i + j
            out[r0 + k // 6, k % 6] = s


@kjit(ACT_SIG)
def quad_act(X, y, out):
    for c in range(6):
        out[0, c] = y[0, c] + X[0, c]
        out[7, c] = y[7, c] + X[7, c]
    for blk in range(2):
        r = 1 + 2 * blk
        _rot_left(X[r, 0], X[r, 1], X[r, 2], y, r, out)
        for c in range(3):
            out[r + 1, 3 + c] = y[r + 1, 3 + c] + X[r, 3 + c]
    se3.exp_act(X[5:7], y[5:7], out[5:7])


@kjit
def _so3_dexpinv(U, V, out, r, mode):
    """Rotation part of row r: the se(3) formula with zero translation is the so(3) one."""
    u = np.zeros((1, 6))
    v = np.zeros((1, 6))
    o = np.empty((1, 6))
    for c in range(3):
        u[0, c] = U[r, c]
        v[0, c] = V[r, c]
    se3.dexpinv(u, v, o, mode)
    for c in range(3):
        out[r, c] = o[0, c]


@kjit(DEXPINV_SIG)
def quad_dexpinv(U, V, out, mode):
    for r in (0, 2, 4, 7):
        for c in range(6):
            out[r, c] = V[r, c]
    for r in (1, 3):
        _so3_dexpinv(U, V, out, r, mode)
        for c in range(3, 6):
            out[r, c] = V[r, c]
    se3.dexpinv(U[5:7], V[5:7], out[5:7], mode)


@kjit(BRACKET_SIG)
def quad_bracket(U, V, out):
    for r in (0, 2, 4, 7):
        for c in range(6):
            out[r, c] = 0.0
    for r in (1, 3):
        out[r, 0] = U[r, 1] * V[r, 2] - U[r, 2] * V[r, 1]
        out[r, 1] = U[r, 2] * V[r, 0] - U[r, 0] * V[r, 2]
        out[r, 2] = U[r, 0] * V[r, 1] - U[r, 1] * V[r, 0]
        for c in range(3, 6):
            out[r, c] = 0.0
    se3.bracket(U[5:7], V[5:7], out[5:7])


@kjit
def quad_generator(X, y, out):
    """ψ_*(X)|_y (tests): (ξ1, ξ2, η̂1R1, η2, η̂3R2, η4, μ×q, μ×ω + c×q, τ)."""
    for r in range(8):
        for c in range(6):
            out[r, c] = 0.0
    for c in range(6):
        out[0, c] = X[0, c]
    out[7, 0] = X[7, 0]
    for blk in range(2):
        r = 1 + 2 * blk
        A0, A1, A2 = X[r, 0], X[r, 1], X[r, 2]
        for j in range(3):
            R0 = y[r + (0 + j) // 6, (0 + j) % 6]
            R1 = y[r + (3 + j) // 6, (3 + j) % 6]
            R2 = y[r + (6 + j) // 6, (6 + j) % 6]
            col = (A1 * R2 - A2 * R1, A2 * R0 - A0 * R2, A0 * R1 - A1 * R0)
            for i in range(3):
                k = 3 * i + j
                out[r + k // 6, k % 6] = col[i]
        for c in range(3):
            out[r + 1, 3 + c] = X[r, 3 + c]
    se3.generator(X[5:7], y[5:7], out[5:7])
