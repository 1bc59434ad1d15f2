"""SE(3)^N primitives acting on (TS²)^N, link by link (spec lie_group_integrators §2).

Conventions: an algebra element of se(3)^N is an (N, 6) array with rows ``(A, a)`` (rotation
part ``A``, translation part ``a``); a state of (TS²)^N is an (N, 6) array with rows
``(q, ω)``. ``exp(A, a) = (R, V a)`` (Rodrigues); the action is
``ψ((R, r), (q, ω)) = (R q, R ω + r × R q)``; the bracket is the matrix commutator,
``[(A, a), (B, b)] = (A × B, A × b − B × a)``; ``dexp⁻¹`` is the right-trivialised inverse,
i.e. ``σ̇ = dexp⁻¹_σ(v)`` ⇔ ``d/dt e^σ = v e^σ``. Group elements are never stored: products
``e^{X_J}···e^{X_1}·y`` are applied as successive actions. :func:`exp_act_keep` and
:func:`dexpinv_kept` are the fused pair an RKMK stage uses (one sin/cos pair of |A|/2 per link
for both).
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels import linalg as la
from geosweep.kernels._jit import kjit

#: dexp⁻¹ mode meaning "exact closed form" (other modes: number of ad-terms kept, 0..6).
DEXPINV_EXACT = -1


@kjit
def exp_coeffs(al):
    """(sin α/α, (1−cos α)/α², (α−sin α)/α³); Taylor polynomials (no trig) below α = 0.1,
    where the first omitted term is below 3e-18 relative."""
    if al < 0.1:
        a2 = al * al
        c1 = 1.0 - a2 / 6.0 * (1.0 - a2 / 20.0 * (1.0 - a2 / 42.0 * (1.0 - a2 / 72.0)))
        c2 = 0.5 - a2 / 24.0 * (1.0 - a2 / 30.0 * (1.0 - a2 / 56.0 * (1.0 - a2 / 90.0)))
        c3 = 1.0 / 6.0 - a2 / 120.0 * (1.0 - a2 / 42.0 * (1.0 - a2 / 72.0 * (1.0 - a2 / 110.0)))
        return c1, c2, c3
    s = np.sin(al)
    c = np.cos(al)
    return s / al, (1.0 - c) / (al * al), (al - s) / (al * al * al)


@kjit(inline="always")
def _rodrigues(A0, A1, A2, ca, cb, x0, x1, x2):
    """``x + ca A×x + cb A×(A×x)`` — with (c1, c2) the rotation ``R x``, with (c2, c3) ``V x``."""
    y0 = A1 * x2 - A2 * x1
    y1 = A2 * x0 - A0 * x2
    y2 = A0 * x1 - A1 * x0
    z0 = A1 * y2 - A2 * y1
    z1 = A2 * y0 - A0 * y2
    z2 = A0 * y1 - A1 * y0
    return x0 + ca * y0 + cb * z0, x1 + ca * y1 + cb * z1, x2 + ca * y2 + cb * z2


@kjit(inline="always")
def _act_link(X, y, out, i, c1, c2, c3):
    """``out_i = ψ(exp(X_i), y_i) = (R q, R ω + V a × R q)`` from the coefficients of |A_i|."""
    A0 = X[i, 0]
    A1 = X[i, 1]
    A2 = X[i, 2]
    Rq0, Rq1, Rq2 = _rodrigues(A0, A1, A2, c1, c2, y[i, 0], y[i, 1], y[i, 2])
    Rw0, Rw1, Rw2 = _rodrigues(A0, A1, A2, c1, c2, y[i, 3], y[i, 4], y[i, 5])
    r0, r1, r2 = _rodrigues(A0, A1, A2, c2, c3, X[i, 3], X[i, 4], X[i, 5])
    out[i, 0] = Rq0
    out[i, 1] = Rq1
    out[i, 2] = Rq2
    out[i, 3] = Rw0 + r1 * Rq2 - r2 * Rq1
    out[i, 4] = Rw1 + r2 * Rq0 - r0 * Rq2
    out[i, 5] = Rw2 + r0 * Rq1 - r1 * Rq0


@kjit
def exp_act(X, y, out):
    """``out_i = ψ(exp(X_i), y_i)`` for every link (``out`` may alias ``y``)."""
    for i in range(X.shape[0]):
        al = np.sqrt(X[i, 0] * X[i, 0] + X[i, 1] * X[i, 1] + X[i, 2] * X[i, 2])
        c1, c2, c3 = exp_coeffs(al)
        _act_link(X, y, out, i, c1, c2, c3)


@kjit
def exp_matrix(X, R, r):
    """Group element of one link: ``R`` (3, 3) and ``r`` (3,) with ``exp(X) = (R, r)``."""
    A0 = X[0]
    A1 = X[1]
    A2 = X[2]
    al = np.sqrt(A0 * A0 + A1 * A1 + A2 * A2)
    c1, c2, c3 = exp_coeffs(al)
    H = np.array([[0.0, -A2, A1], [A2, 0.0, -A0], [-A1, A0, 0.0]])
    H2 = la.matmul(H, H)
    I3 = np.eye(3)
    R[:, :] = I3 + c1 * H + c2 * H2
    V = I3 + c2 * H + c3 * H2
    r[:] = la.matvec(V, X[3:6])


@kjit
def bracket(U, V, out):
    """``out_i = [U_i, V_i] = (A×B, A×b − B×a)`` (``out`` must not alias the inputs)."""
    for i in range(U.shape[0]):
        A0, A1, A2, a0, a1, a2 = U[i, 0], U[i, 1], U[i, 2], U[i, 3], U[i, 4], U[i, 5]
        B0, B1, B2, b0, b1, b2 = V[i, 0], V[i, 1], V[i, 2], V[i, 3], V[i, 4], V[i, 5]
        out[i, 0] = A1 * B2 - A2 * B1
        out[i, 1] = A2 * B0 - A0 * B2
        out[i, 2] = A0 * B1 - A1 * B0
        out[i, 3] = (A1 * b2 - A2 * b1) - (B1 * a2 - B2 * a1)
        out[i, 4] = (A2 * b0 - A0 * b2) - (B2 * a0 - B0 * a2)
        out[i, 5] = (A0 * b1 - A1 * b0) - (B0 * a1 - B1 * a0)


@kjit
def _g2_coeffs(al):
    """(g₂(α), g̃₂(α)) of the exact se(3) dexp⁻¹, with the spec's small-α series."""
    a2 = al * al
    if al < 0.1:
        g2 = 1.0 / 12.0 + a2 * (1.0 / 720.0 + a2 * (1.0 / 30240.0 + a2 * (1.0 / 1209600.0 + a2 / 47900160.0)))
    else:
        half = 0.5 * al
        cot = np.cos(half) / np.sin(half)
        g2 = (1.0 - half * cot) / a2
    if al < 0.5:
        gt = 1.0 / 360.0 + a2 * (
            1.0 / 7560.0
            + a2 * (1.0 / 201600.0 + a2 * (1.0 / 5987520.0 + a2 * (691.0 / 130767436800.0 + a2 / 6227020800.0)))
        )
    else:
        half = 0.5 * al
        sn = np.sin(half)
        cot = np.cos(half) / sn
        gt = (0.25 * al / (sn * sn) - 0.5 * cot) / (a2 * al) - 2.0 * g2 / a2
    return g2, gt


@kjit(inline="always")
def _dexpinv_link(U, V, out, i, g2, gt):
    """``out_i = dexp⁻¹_{U_i}(V_i)`` in closed form, given (g₂, g̃₂) of α = |A_i|."""
    A0, A1, A2, a0, a1, a2 = U[i, 0], U[i, 1], U[i, 2], U[i, 3], U[i, 4], U[i, 5]
    B0, B1, B2, b0, b1, b2 = V[i, 0], V[i, 1], V[i, 2], V[i, 3], V[i, 4], V[i, 5]
    rho = A0 * a0 + A1 * a1 + A2 * a2
    # AB = A×B, AAB = A×(A×B)
    AB0 = A1 * B2 - A2 * B1
    AB1 = A2 * B0 - A0 * B2
    AB2 = A0 * B1 - A1 * B0
    AAB0 = A1 * AB2 - A2 * AB1
    AAB1 = A2 * AB0 - A0 * AB2
    AAB2 = A0 * AB1 - A1 * AB0
    # aB = a×B, Ab = A×b
    aB0 = a1 * B2 - a2 * B1
    aB1 = a2 * B0 - a0 * B2
    aB2 = a0 * B1 - a1 * B0
    Ab0 = A1 * b2 - A2 * b1
    Ab1 = A2 * b0 - A0 * b2
    Ab2 = A0 * b1 - A1 * b0
    # a×(A×B) + A×(a×B) + A×(A×b)
    t0 = (a1 * AB2 - a2 * AB1) + (A1 * aB2 - A2 * aB1) + (A1 * Ab2 - A2 * Ab1)
    t1 = (a2 * AB0 - a0 * AB2) + (A2 * aB0 - A0 * aB2) + (A2 * Ab0 - A0 * Ab2)
    t2 = (a0 * AB1 - a1 * AB0) + (A0 * aB1 - A1 * aB0) + (A0 * Ab1 - A1 * Ab0)
    out[i, 0] = B0 - 0.5 * AB0 + g2 * AAB0
    out[i, 1] = B1 - 0.5 * AB1 + g2 * AAB1
    out[i, 2] = B2 - 0.5 * AB2 + g2 * AAB2
    out[i, 3] = b0 - 0.5 * (aB0 + Ab0) + rho * gt * AAB0 + g2 * t0
    out[i, 4] = b1 - 0.5 * (aB1 + Ab1) + rho * gt * AAB1 + g2 * t1
    out[i, 5] = b2 - 0.5 * (aB2 + Ab2) + rho * gt * AAB2 + g2 * t2


# Bernoulli coefficients B_k / k! for k = 0..6
_BK = (1.0, -0.5, 1.0 / 12.0, 0.0, -1.0 / 720.0, 0.0, 1.0 / 30240.0)


@kjit
def dexpinv(U, V, out, mode):
    """``out_i = dexp⁻¹_{U_i}(V_i)``; ``mode = -1`` exact (valid for |A| < 2π), else the series
    truncated after ``ad^mode`` (``mode`` in 0..6). ``out`` must not alias the inputs."""
    n = U.shape[0]
    if mode >= 0:
        for i in range(n):
            for c in range(6):
                out[i, c] = V[i, c]
        if mode == 0:
            return
        for i in range(n):
            A0, A1, A2, a0, a1, a2 = U[i, 0], U[i, 1], U[i, 2], U[i, 3], U[i, 4], U[i, 5]
            B0, B1, B2, b0, b1, b2 = V[i, 0], V[i, 1], V[i, 2], V[i, 3], V[i, 4], V[i, 5]
            for k in range(1, mode + 1):
                C0 = A1 * B2 - A2 * B1
                C1 = A2 * B0 - A0 * B2
                C2 = A0 * B1 - A1 * B0
                c0 = (A1 * b2 - A2 * b1) - (B1 * a2 - B2 * a1)
                c1 = (A2 * b0 - A0 * b2) - (B2 * a0 - B0 * a2)
                c2 = (A0 * b1 - A1 * b0) - (B0 * a1 - B1 * a0)
                B0, B1, B2, b0, b1, b2 = C0, C1, C2, c0, c1, c2
                ck = _BK[k] if k < 7 else 0.0
                out[i, 0] += ck * B0
                out[i, 1] += ck * B1
                out[i, 2] += ck * B2
                out[i, 3] += ck * b0
                out[i, 4] += ck * b1
                out[i, 5] += ck * b2
        return
    for i in range(n):
        al = np.sqrt(U[i, 0] * U[i, 0] + U[i, 1] * U[i, 1] + U[i, 2] * U[i, 2])
        g2, gt = _g2_coeffs(al)
        _dexpinv_link(U, V, out, i, g2, gt)


@kjit
def generator(X, y, out):
    """Infinitesimal generator ``ψ_*(X)|_y = (u×q, u×ω + v×q)`` link by link."""
    for i in range(X.shape[0]):
        u0, u1, u2, v0, v1, v2 = X[i, 0], X[i, 1], X[i, 2], X[i, 3], X[i, 4], X[i, 5]
        q0, q1, q2, w0, w1, w2 = y[i, 0], y[i, 1], y[i, 2], y[i, 3], y[i, 4], y[i, 5]
        out[i, 0] = u1 * q2 - u2 * q1
        out[i, 1] = u2 * q0 - u0 * q2
        out[i, 2] = u0 * q1 - u1 * q0
        out[i, 3] = (u1 * w2 - u2 * w1) + (v1 * q2 - v2 * q1)
        out[i, 4] = (u2 * w0 - u0 * w2) + (v2 * q0 - v0 * q2)
        out[i, 5] = (u0 * w1 - u1 * w0) + (v0 * q1 - v1 * q0)


# ---- fused exp action + exact dexp⁻¹ (RKMK stages: act with U, evaluate f, dexp⁻¹ at the same U)
@kjit
def _fused_coeffs(al):
    """(c1, c2, c3) of :func:`exp_coeffs` and (g₂, g̃₂) of :func:`_g2_coeffs` at α, the same
    functions up to round-off: one sin/cos pair of α/2 for all five (sin α = 2 sin(α/2) cos(α/2),
    1 − cos α = 2 sin²(α/2)); below α = 0.1 the same Taylor polynomials in Horner form with
    constant coefficients (no division)."""
    a2 = al * al
    if al < 0.1:  # the Taylor polynomials of exp_coeffs and _g2_coeffs in Horner form, no division
        c1 = 1.0 + a2 * (-1.0 / 6.0 + a2 * (1.0 / 120.0 + a2 * (-1.0 / 5040.0 + a2 * (1.0 / 362880.0))))
        c2 = 0.5 + a2 * (-1.0 / 24.0 + a2 * (1.0 / 720.0 + a2 * (-1.0 / 40320.0 + a2 * (1.0 / 3628800.0))))
        c3 = 1.0 / 6.0 + a2 * (-1.0 / 120.0 + a2 * (1.0 / 5040.0 + a2 * (-1.0 / 362880.0 + a2 * (1.0 / 39916800.0))))
        g2 = 1.0 / 12.0 + a2 * (1.0 / 720.0 + a2 * (1.0 / 30240.0 + a2 * (1.0 / 1209600.0 + a2 * (1.0 / 47900160.0))))
        gt = 1.0 / 360.0 + a2 * (
            1.0 / 7560.0
            + a2 * (1.0 / 201600.0 + a2 * (1.0 / 5987520.0 + a2 * (691.0 / 130767436800.0 + a2 * (1.0 / 6227020800.0))))
        )
        return c1, c2, c3, g2, gt
    half = 0.5 * al
    sn = np.sin(half)
    cs = np.cos(half)
    sa = 2.0 * sn * cs
    c1 = sa / al
    c2 = 2.0 * sn * sn / a2
    c3 = (al - sa) / (a2 * al)
    cot = cs / sn
    g2 = (1.0 - half * cot) / a2
    if al < 0.5:
        gt = 1.0 / 360.0 + a2 * (
            1.0 / 7560.0
            + a2 * (1.0 / 201600.0 + a2 * (1.0 / 5987520.0 + a2 * (691.0 / 130767436800.0 + a2 / 6227020800.0)))
        )
    else:
        gt = (0.25 * al / (sn * sn) - 0.5 * cot) / (a2 * al) - 2.0 * g2 / a2
    return c1, c2, c3, g2, gt


@kjit
def exp_act_keep(X, y, out, C):
    """:func:`exp_act` that also keeps, per link, the dexp⁻¹ coefficients of the same ``X`` in
    ``C[i, 0:2]`` = (g₂, g̃₂) for :func:`dexpinv_kept` (``out`` may alias ``y``, not ``C``)."""
    for i in range(X.shape[0]):
        al = np.sqrt(X[i, 0] * X[i, 0] + X[i, 1] * X[i, 1] + X[i, 2] * X[i, 2])
        c1, c2, c3, g2, gt = _fused_coeffs(al)
        C[i, 0] = g2
        C[i, 1] = gt
        _act_link(X, y, out, i, c1, c2, c3)


@kjit
def dexpinv_kept(U, V, out, C):
    """Exact ``dexp⁻¹_{U_i}(V_i)`` with (g₂, g̃₂) from ``C`` as :func:`exp_act_keep` left them
    for this ``U``: the expressions of :func:`dexpinv` (mode −1), bit for bit."""
    for i in range(U.shape[0]):
        _dexpinv_link(U, V, out, i, C[i, 0], C[i, 1])
