"""Two quadrotors joined to a point load by rigid massless links (spec heavy_top_quadrotors §3–4).

Frame: ``e3`` points **down**, along gravity (spec D7; opposite to the heavy top's). State
``P = (y, v, R1, Ω1, R2, Ω2, q1, ω1, q2, ω2)`` stored as an (8, 6) array::

    row 0  y, v               row 4  R2[2, :], Ω2
    row 1  R1[0, :], R1[1, :] row 5  q1, ω1   (ω_i inertial, q̇_i = ω_i × q_i)
    row 2  R1[2, :], Ω1       row 6  q2, ω2
    row 3  R2[0, :], R2[1, :] row 7  t, 0, 0, 0, 0, 0

Rows 0–6 flattened are the spec's 42-vector ``[y, v, vec R1, Ω1, vec R2, Ω2, q1, ω1, q2, ω2]``
(row-major vec); row 7 carries the time so that the autonomous Lie stepper evaluates the
controller at the stage times ``t_n + c_i h`` (spec D15; also exact for CF4, whose stages sit at
t_n, t_n + h/2, t_n + h/2, t_n + h).

Controller (spec §4, D9–D13): the load loop ``u_i^∥``, the direction loop ``u_i^⊥`` with the
feed-forward derivatives of §4.3, and constant attitude moments ``M_i`` (the attitude is
decoupled from the translation, D9). Parameter vector (:data:`P_*` offsets)::

    [m_y, m1, m2, L1, L2, J1 (3), J2 (3), g, k_y, k_v, k_q, k_ω, r1d (3), r2d (3), s_d (3),
     M1 (3), M2 (3), c1, c2]
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels import linalg as la
from geosweep.kernels._jit import kjit

P_MY, P_M1, P_M2, P_L1, P_L2, P_J1, P_J2, P_G = 0, 1, 2, 3, 4, 5, 8, 11
P_KY, P_KV, P_KQ, P_KW, P_R1D, P_R2D, P_SD, P_MOM1, P_MOM2, P_C1, P_C2 = 12, 13, 14, 15, 16, 19, 22, 25, 28, 31, 32
N_PARAMS = 33
#: offsets in the closed-loop output vector of :func:`closed_loop`
C_VDOT, C_OM1DOT, C_OM2DOT, C_W1DOT, C_W2DOT, C_U1, C_U2, C_Q1D, C_Q2D, C_TEN = 0, 3, 6, 9, 12, 15, 18, 21, 24, 27
#: feed-forward outputs (tests): q̇_id, ω_id, ω̇_id and the direction-loop bracket, link 1 then 2
C_QDOT_D, C_W_D, C_WDOT_D, C_BRK = 29, 35, 41, 47
N_CL = 53
#: singularity thresholds of spec D17
EPS_F = 1e-6


@kjit
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@kjit
def _cross(a, b, out):
    x = a[1] * b[2] - a[2] * b[1]
    y = a[2] * b[0] - a[0] * b[2]
    z = a[0] * b[1] - a[1] * b[0]
    out[0] = x
    out[1] = y
    out[2] = z


@kjit
def _unit_derivs(w, wd, wdd, u, ud, udd):
    """u = w/|w| and its first two time derivatives (spec §4.3)."""
    n = np.sqrt(_dot(w, w))
    nd = _dot(w, wd) / n
    ndd = (_dot(wd, wd) + _dot(w, wdd) - nd * nd) / n
    for c in range(3):
        u[c] = w[c] / n
    for c in range(3):
        ud[c] = (wd[c] - nd * u[c]) / n
    for c in range(3):
        udd[c] = (wdd[c] - 2.0 * nd * ud[c] - ndd * u[c]) / n


@kjit
def desired(t, yd, yd1, yd2):
    """y_d(t) = (t − 2.5, 0, (t − 2.5)² − 7) and its first two derivatives (higher ones are 0)."""
    s = t - 2.5
    yd[0] = s
    yd[1] = 0.0
    yd[2] = s * s - 7.0
    yd1[0] = 1.0
    yd1[1] = 0.0
    yd1[2] = 2.0 * s
    yd2[0] = 0.0
    yd2[1] = 0.0
    yd2[2] = 2.0


@kjit
def closed_loop(y, p, cl):
    """Controls, accelerations and tensions at the state ``y`` (8, 6) into ``cl`` (N_CL,).

    Returns −1, or the D17 condition that made the controller singular (0: |F_d| < 1e-6,
    1: |s_d × F_d| < 1e-6 |F_d|, 2: |a| < 1e-6 |F_d|²), checked before any normalisation.
    """
    my = p[P_MY]
    g = p[P_G]
    t = y[7, 0]
    yd = np.empty(3)
    yd1 = np.empty(3)
    yd2 = np.empty(3)
    desired(t, yd, yd1, yd2)
    pos = y[0, 0:3]
    vel = y[0, 3:6]
    ey = np.empty(3)
    ev = np.empty(3)
    Fd = np.empty(3)
    for c in range(3):
        ey[c] = pos[c] - yd[c]
        ev[c] = vel[c] - yd1[c]
        Fd[c] = my * (-p[P_KY] * ey[c] - p[P_KV] * ev[c] + yd2[c])
    Fd[2] -= my * g
    sd = p[P_SD : P_SD + 3]
    nF = np.sqrt(_dot(Fd, Fd))
    b = np.empty(3)
    _cross(sd, Fd, b)
    Fs = _dot(Fd, sd)
    a = np.empty(3)
    for c in range(3):
        a[c] = nF * nF * sd[c] - Fs * Fd[c]
    if not nF >= EPS_F:
        return 0
    if not np.sqrt(_dot(b, b)) >= EPS_F * nF:
        return 1
    if not np.sqrt(_dot(a, a)) >= EPS_F * nF * nF:
        return 2
    q1 = y[5, 0:3]
    w1 = y[5, 3:6]
    q2 = y[6, 0:3]
    w2 = y[6, 3:6]
    # load loop
    mu1 = np.empty(3)
    mu2 = np.empty(3)
    f1 = p[P_C1] * _dot(Fd, q1)
    f2 = p[P_C2] * _dot(Fd, q2)
    for c in range(3):
        mu1[c] = f1 * q1[c]
        mu2[c] = f2 * q2[c]
    # feed-forward derivatives
    q1d_ = np.empty(3)
    q2d_ = np.empty(3)
    _cross(w1, q1, q1d_)  # q̇1
    _cross(w2, q2, q2d_)
    evd = np.empty(3)
    Fd1 = np.empty(3)
    for c in range(3):
        ydd = (mu1[c] + mu2[c]) / my
        if c == 2:
            ydd += g
        evd[c] = ydd - yd2[c]
        Fd1[c] = my * (-p[P_KY] * ev[c] - p[P_KV] * evd[c])  # y_d''' = 0
    mud = np.empty(3)
    s1 = _dot(Fd1, q1) + _dot(Fd, q1d_)
    s2 = _dot(Fd1, q2) + _dot(Fd, q2d_)
    for c in range(3):
        mud[c] = p[P_C1] * (s1 * q1[c] + f1 / p[P_C1] * q1d_[c]) + p[P_C2] * (s2 * q2[c] + f2 / p[P_C2] * q2d_[c])
    Fd2 = np.empty(3)
    for c in range(3):
        Fd2[c] = my * (-p[P_KY] * evd[c] - p[P_KV] * (mud[c] / my))  # y_d''' = y_d'''' = 0
    # frame Q(F_d) = [a/|a|, b/|b|, c/|c|] and its derivatives
    ad = np.empty(3)
    add = np.empty(3)
    FdF1 = _dot(Fd, Fd1)
    F1s = _dot(Fd1, sd)
    F2s = _dot(Fd2, sd)
    k2 = _dot(Fd1, Fd1) + _dot(Fd, Fd2)
    for c in range(3):
        ad[c] = 2.0 * sd[c] * FdF1 - Fd1[c] * Fs - Fd[c] * F1s
        add[c] = 2.0 * sd[c] * k2 - Fd2[c] * Fs - 2.0 * Fd1[c] * F1s - Fd[c] * F2s
    bd = np.empty(3)
    bdd = np.empty(3)
    _cross(sd, Fd1, bd)
    _cross(sd, Fd2, bdd)
    cc = np.empty(3)
    cd = np.empty(3)
    cdd = np.empty(3)
    for c in range(3):
        cc[c] = -Fd[c]
        cd[c] = -Fd1[c]
        cdd[c] = -Fd2[c]
    U = np.empty((3, 3))
    Ud = np.empty((3, 3))
    Udd = np.empty((3, 3))
    _unit_derivs(a, ad, add, U[0], Ud[0], Udd[0])
    _unit_derivs(b, bd, bdd, U[1], Ud[1], Udd[1])
    _unit_derivs(cc, cd, cdd, U[2], Ud[2], Udd[2])
    # direction loop, per link
    for i in range(2):
        rd = p[P_R1D + 3 * i : P_R1D + 3 * i + 3]
        mi = p[P_M1 + i]
        Li = p[P_L1 + i]
        qi = y[5 + i, 0:3]
        wi = y[5 + i, 3:6]
        qdi = q1d_ if i == 0 else q2d_
        muj = mu2 if i == 0 else mu1
        qid = np.zeros(3)
        qidd = np.zeros(3)
        qiddd = np.zeros(3)
        for k in range(3):
            for c in range(3):
                qid[c] += rd[k] * U[k, c]
                qidd[c] += rd[k] * Ud[k, c]
                qiddd[c] += rd[k] * Udd[k, c]
        wid = np.empty(3)
        wid1 = np.empty(3)
        _cross(qid, qidd, wid)
        _cross(qid, qiddd, wid1)
        eq = np.empty(3)
        _cross(qid, qi, eq)
        tmp = np.empty(3)
        tmp2 = np.empty(3)
        _cross(qi, wid, tmp)
        _cross(qi, tmp, tmp2)  # q × (q × ω_d)
        brk = np.empty(3)
        qw = _dot(qi, wid)
        _cross(qi, wid1, tmp)
        _cross(qi, tmp, tmp)  # q × (q × ω̇_d)
        for c in range(3):
            ew = wi[c] + tmp2[c]
            brk[c] = -p[P_KQ] * eq[c] - p[P_KW] * ew - qw * qdi[c] - tmp[c]
        up = np.empty(3)
        _cross(qi, brk, up)
        _cross(qi, muj, tmp)
        _cross(qi, tmp, tmp)
        wsq = _dot(wi, wi)
        fq = _dot(qi, mu1) + _dot(qi, mu2)
        mui = mu1 if i == 0 else mu2
        o = C_U1 + 3 * i
        for c in range(3):
            cl[C_QDOT_D + 3 * i + c] = qidd[c]
            cl[C_W_D + 3 * i + c] = wid[c]
            cl[C_WDOT_D + 3 * i + c] = wid1[c]
            cl[C_BRK + 3 * i + c] = brk[c]
            upar = mui[c] + mi * Li * wsq * qi[c] + mi / my * qi[c] * fq
            cl[o + c] = upar + mi * Li * up[c] - mi / my * tmp[c]
            cl[C_Q1D + 3 * i + c] = qid[c]
    # dynamics (spec §3.3): M_q v̇ = M_q g e3 − Σ m_i L_i |ω_i|² q_i + Σ q_i q_iᵀ u_i
    Mq = np.zeros((3, 3))
    rhs = np.zeros(3)
    for i in range(2):
        mi = p[P_M1 + i]
        Li = p[P_L1 + i]
        qi = y[5 + i, 0:3]
        wi = y[5 + i, 3:6]
        ui = cl[C_U1 + 3 * i : C_U1 + 3 * i + 3]
        qu = _dot(qi, ui)
        wsq = _dot(wi, wi)
        for r in range(3):
            for c in range(3):
                Mq[r, c] += mi * qi[r] * qi[c]
            rhs[r] += -mi * Li * wsq * qi[r] + qu * qi[r]
    for r in range(3):
        Mq[r, r] += my
    for r in range(3):
        rhs[r] += Mq[r, 2] * g
    vdot = rhs  # Mq v̇ = rhs, solved in place (the same bits on every CPU: geosweep.kernels.linalg)
    la.lu_solve_inplace(Mq, vdot)
    for c in range(3):
        cl[C_VDOT + c] = vdot[c]
    # attitude: J Ω̇ = −Ω × JΩ + M (diagonal J)
    for i in range(2):
        J = p[P_J1 + 3 * i : P_J1 + 3 * i + 3]
        Om = y[2 + 2 * i, 3:6]
        JO = np.empty(3)
        for c in range(3):
            JO[c] = J[c] * Om[c]
        _cross(Om, JO, tmp)
        for c in range(3):
            cl[C_OM1DOT + 3 * i + c] = (-tmp[c] + p[P_MOM1 + 3 * i + c]) / J[c]
    # links: ω̇_i = (q_i × v̇ − g q_i × e3 − q_i × u_i^⊥ / m_i) / L_i ; tension
    e3 = np.array([0.0, 0.0, 1.0])
    for i in range(2):
        mi = p[P_M1 + i]
        Li = p[P_L1 + i]
        qi = y[5 + i, 0:3]
        wi = y[5 + i, 3:6]
        ui = cl[C_U1 + 3 * i : C_U1 + 3 * i + 3]
        qu = _dot(qi, ui)
        uperp = np.empty(3)
        for c in range(3):
            uperp[c] = ui[c] - qu * qi[c]
        a1 = np.empty(3)
        a2 = np.empty(3)
        a3 = np.empty(3)
        _cross(qi, vdot, a1)
        _cross(qi, e3, a2)
        _cross(qi, uperp, a3)
        for c in range(3):
            cl[C_W1DOT + 3 * i + c] = (a1[c] - g * a2[c] - a3[c] / mi) / Li
        cl[C_TEN + i] = mi * (_dot(qi, vdot) + Li * _dot(wi, wi)) - qu - mi * g * qi[2]
    return -1


def pack_params(
    m_y: float, m1: float, m2: float, L1: float, L2: float, J1, J2, g: float, k_y: float, k_v: float, k_q: float,
    k_w: float, r1d, r2d, s_d, M1, M2,
) -> np.ndarray:  # fmt: skip
    """The parameter vector (see module docstring); c_i = 1/((r_id·e3)|r1d + r2d|) (spec §4.2)."""
    r1d = np.asarray(r1d, dtype=float)
    r2d = np.asarray(r2d, dtype=float)
    nr = la.norm(r1d + r2d)
    c1, c2 = 1.0 / (r1d[2] * nr), 1.0 / (r2d[2] * nr)
    p = np.concatenate([[m_y, m1, m2, L1, L2], J1, J2, [g, k_y, k_v, k_q, k_w], r1d, r2d, s_d, M1, M2, [c1, c2]])
    assert p.shape == (N_PARAMS,)
    return np.ascontiguousarray(p, dtype=np.float64)
