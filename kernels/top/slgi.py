"""Formulations A and C: the symplectic Lie group integrators of 001 (15)–(17) (spec §2.7).

State ``S`` (18,) = ``[vec Q (row-major, 9), π (3), q (3), p (3)]``; A ignores ``q``/``p``.
One step solves for ``w = (ξ, n̄) ∈ R⁶`` (A) or ``w = (ξ, ξ_q, n̄, n̄_p) ∈ R¹²`` (C)::

    M_θ = dexp_ξ(π0 + e^{−θξ̂} n̄) − θ dexp_{θξ}(e^{−θξ̂} n̄),     w = h f(e^{θξ̂} Q0, M_θ)
    Q1 = e^{ξ̂} Q0,   π1 = e^{ξ̂} π0 + e^{(1−θ)ξ̂} n̄        (C also: q1 = q0 + ξ_q, p1 = p0 + n̄_p)

with ``f_A = (ω, π×ω + Mgℓ e3 × QX)``, ``ω = Q𝕀⁻¹Qᵀπ`` and ``f_C = (ω, p − Qᵀe3,
π×ω − e3 × Qp, 0)`` (the abelian R³ factor has identity exp, dexp and Ad*, so its momentum
argument is ``p0 + (1−θ) n̄_p``). Newton on ``G(w) = w − h f`` with a forward-difference
Jacobian (δ_j = 1e-7 max(1, |w_j|)), predictor ``w = h f(Q0, π0)``, stop when
``max_j |Δw_j| / max(1, |w_j|) ≤ tol`` — or once that ratio is below 1e3·tol and no longer
shrinks by half per iteration (the round-off floor: at tol = 1e-14 a fixed 1e-14 test can
stagnate at ~1.1e-14 forever, as measured at step 620 of θ = 0, h = 0.01); after ``maxit``
iterations the step fails with status ``nonconverged`` (the last valid state is kept; no step-size reduction).

Method record ``meth = [θ, kk (0: A, 1: C), tol, maxit]``.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.core.driver import compile_driver
from geosweep.kernels.core.layout import I_EVALS, I_ITERS, I_ITERS_MAX, S_FAIL_INDEX, S_FAIL_VALUE
from geosweep.kernels.core.observables import Observable, obs_names, reductions
from geosweep.kernels.core.signatures import F1, contract_types
from geosweep.kernels.core.trajectory import Reductions, StepperSpec
from geosweep.kernels.core.views import view2
from geosweep.kernels.lie.se3 import exp_coeffs
from geosweep.kernels.linalg import lu_solve_inplace, newton_converged
from geosweep.kernels.status import Status
from geosweep.kernels.top.model import P_IINV, P_J30, P_MGL, P_S0, P_X

CB = F1  # the callbacks are the model's parameter vector (the step is specific to the top)
_STEP, _OBS, _DENSE, _ = contract_types(CB)
_OK = int(Status.OK)
_NONCONV = int(Status.NONCONVERGED)
_NONFINITE = int(Status.NONFINITE)
STATE_SIZE = 18
#: The columns ``slgi_observe`` writes and their running reductions: H, J3 = e3·π and the spin S
#: (deviations from their initial values), ||Γ|² − 1|, max|QᵀQ − I| and |det Q − 1| (maxima).
OBSERVABLES: tuple[Observable, ...] = (
    Observable("energy"), Observable("J3", Reductions.DEV), Observable("S", Reductions.DEV),
    Observable("cas_gamma", Reductions.MAX), Observable("orth", Reductions.MAX), Observable("det", Reductions.MAX),
)  # fmt: skip
OBS_NAMES = obs_names(OBSERVABLES)
M_THETA, M_KK, M_TOL, M_MAXIT = range(4)


@kjit
def _rot(x, s, R):
    """R = exp(s x̂) (Rodrigues)."""
    a0, a1, a2 = s * x[0], s * x[1], s * x[2]
    al = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    c1, c2, _ = exp_coeffs(al)
    _fill(a0, a1, a2, 1.0, c1, c2, R)


@kjit
def _dexp(x, s, D):
    """D = dexp_{s x} = I + (1−cos α)/α² û + (α−sin α)/α³ û² (u = s x, α = |u|)."""
    a0, a1, a2 = s * x[0], s * x[1], s * x[2]
    al = np.sqrt(a0 * a0 + a1 * a1 + a2 * a2)
    _, c2, c3 = exp_coeffs(al)
    _fill(a0, a1, a2, 1.0, c2, c3, D)


@kjit
def _fill(a0, a1, a2, c0, c1, c2, R):
    """R = c0 I + c1 â + c2 â² with â² = a aᵀ − |a|² I."""
    n2 = a0 * a0 + a1 * a1 + a2 * a2
    a = (a0, a1, a2)
    for i in range(3):
        for j in range(3):
            R[i, j] = c2 * a[i] * a[j]
        R[i, i] += c0 - c2 * n2
    R[0, 1] -= c1 * a2
    R[0, 2] += c1 * a1
    R[1, 0] += c1 * a2
    R[1, 2] -= c1 * a0
    R[2, 0] -= c1 * a1
    R[2, 1] += c1 * a0


@kjit
def _mv(A, x, out):
    for i in range(3):
        out[i] = A[i, 0] * x[0] + A[i, 1] * x[1] + A[i, 2] * x[2]


@kjit
def _mtv(A, x, out):
    for i in range(3):
        out[i] = A[0, i] * x[0] + A[1, i] * x[1] + A[2, i] * x[2]


@kjit
def _cross(a, b, out):
    out[0] = a[1] * b[2] - a[2] * b[1]
    out[1] = a[2] * b[0] - a[0] * b[2]
    out[2] = a[0] * b[1] - a[1] * b[0]


@kjit
def _field(Q, pi, pm, prm, kk, f):
    """``f_A(Q, π)`` (6,) or, with ``kk``, ``f_C(Q, π, p)`` (12,)."""
    v = np.empty(3)
    w = np.empty(3)
    t = np.empty(3)
    _mtv(Q, pi, v)  # Π = Qᵀπ
    for c in range(3):
        v[c] *= prm[P_IINV + c]
    _mv(Q, v, w)  # ω = Q 𝕀⁻¹ Qᵀ π
    _cross(pi, w, t)  # π × ω
    if kk == 0:
        _mv(Q, prm[P_X : P_X + 3], v)  # QX
        mgl = prm[P_MGL]
        for c in range(3):
            f[c] = w[c]
        f[3] = t[0] + mgl * (-v[1])  # e3 × v = (−v1, v0, 0)
        f[4] = t[1] + mgl * v[0]
        f[5] = t[2]
    else:
        for c in range(3):
            f[c] = w[c]
            f[3 + c] = pm[c] - Q[2, c]  # p − Qᵀe3
            f[9 + c] = 0.0
        _mv(Q, pm, v)  # Qp;  −e3 × Qp = (v1, −v0, 0)
        f[6] = t[0] + v[1]
        f[7] = t[1] - v[0]
        f[8] = t[2]


@kjit
def _residual(w, Q0, pi0, p0, prm, theta, kk, h, G, sc, R, D, Qt):
    """``G = w − h f(e^{θξ̂} Q0, M_θ)``; ``sc`` scratch (≥ 24)."""
    n = 12 if kk else 6
    o = 6 if kk else 3
    xi = w[0:3]
    nb = w[o : o + 3]
    v = sc[0:3]
    u = sc[3:6]
    M = sc[6:9]
    pm = sc[9:12]
    f = sc[12:24]
    _rot(xi, -theta, R)
    _mv(R, nb, v)  # v = e^{−θξ̂} n̄
    for c in range(3):
        u[c] = pi0[c] + v[c]
    _dexp(xi, 1.0, D)
    _mv(D, u, M)
    _dexp(xi, theta, D)
    _mv(D, v, u)
    for c in range(3):
        M[c] -= theta * u[c]
    _rot(xi, theta, R)
    for i in range(3):
        for j in range(3):
            Qt[i, j] = R[i, 0] * Q0[0, j] + R[i, 1] * Q0[1, j] + R[i, 2] * Q0[2, j]
    if kk:
        for c in range(3):
            pm[c] = p0[c] + (1.0 - theta) * w[9 + c]
    _field(Qt, M, pm, prm, kk, f)
    for j in range(n):
        G[j] = w[j] - h * f[j]


@kjit(_STEP)
def slgi_step(prm, meth, h, S, Sn, p, work, iwork, info, sio):
    theta = meth[M_THETA]
    kk = int(meth[M_KK])
    tol = meth[M_TOL]
    maxit = int(meth[M_MAXIT])
    n = 12 if kk else 6
    Q0 = view2(S, 0, 3, 3)
    pi0 = S[9:12]
    q0 = S[12:15]
    p0 = S[15:18]
    # scratch
    w = work[0:12]
    G = work[12:24]
    G2 = work[24:36]
    dw = work[36:48]
    sc = work[48:72]
    J = np.empty((n, n))
    R = np.empty((3, 3))
    D = np.empty((3, 3))
    Qt = np.empty((3, 3))
    f = sc[12:24]
    # predictor w = h f(Q0, π0)
    _field(Q0, pi0, p0, prm, kk, f)
    for j in range(n):
        w[j] = h * f[j]
    evals = 1
    it = 0
    conv = False
    resid = np.inf
    prev = np.inf
    while it < maxit:
        it += 1
        _residual(w, Q0, pi0, p0, prm, theta, kk, h, G, sc, R, D, Qt)
        for j in range(n):
            d = 1e-7 * max(1.0, abs(w[j]))
            wj = w[j]
            w[j] = wj + d
            _residual(w, Q0, pi0, p0, prm, theta, kk, h, G2, sc, R, D, Qt)
            w[j] = wj
            for i in range(n):
                J[i, j] = (G2[i] - G[i]) / d
        evals += n + 1
        for i in range(n):
            dw[i] = -G[i]
        if lu_solve_inplace(J, dw[:n]) != 0:
            break
        resid = 0.0
        for j in range(n):
            w[j] += dw[j]
            r = abs(dw[j]) / max(1.0, abs(w[j]))
            if not r <= resid:  # also catches NaN
                resid = r
        # converged; or stagnating at the round-off floor (no contraction within 1e3·tol)
        if newton_converged(resid, prev, it, tol, 1, True):
            conv = True
            break
        prev = resid
    info[I_EVALS] += evals
    info[I_ITERS] += it
    if it > info[I_ITERS_MAX]:
        info[I_ITERS_MAX] = it
    if not conv:
        sio[S_FAIL_INDEX] = 0.0
        sio[S_FAIL_VALUE] = resid
        return _NONCONV
    # update
    o = 6 if kk else 3
    xi = w[0:3]
    nb = w[o : o + 3]
    v = sc[0:3]
    u = sc[3:6]
    _rot(xi, 1.0, R)
    Q1 = view2(Sn, 0, 3, 3)
    for i in range(3):
        for j in range(3):
            Q1[i, j] = R[i, 0] * Q0[0, j] + R[i, 1] * Q0[1, j] + R[i, 2] * Q0[2, j]
    _mv(R, pi0, v)
    _rot(xi, 1.0 - theta, R)
    _mv(R, nb, u)
    for c in range(3):
        Sn[9 + c] = v[c] + u[c]
        if kk:
            Sn[12 + c] = q0[c] + w[3 + c]
            Sn[15 + c] = p0[c] + w[9 + c]
        else:
            Sn[12 + c] = q0[c]
            Sn[15 + c] = p0[c]
    for c in range(STATE_SIZE):
        if not np.isfinite(Sn[c]):
            sio[S_FAIL_INDEX] = 0.0
            sio[S_FAIL_VALUE] = Sn[c]
            return _NONFINITE
    return _OK


@kjit(_OBS)
def slgi_observe(prm, meth, S, p, work, full, obs):
    """``[H, e3·π, Π·X, ||Γ|² − 1|, max|QᵀQ − I|, |det Q − 1|]`` (H = H_A, or H_C for C)."""
    Q = view2(S, 0, 3, 3)
    pi = S[9:12]
    pm = S[15:18]
    Pi = np.empty(3)
    _mtv(Q, pi, Pi)
    ke = 0.0
    for c in range(3):
        ke += 0.5 * prm[P_IINV + c] * Pi[c] * Pi[c]
    Gam = np.empty(3)
    for c in range(3):
        Gam[c] = Q[2, c]  # Γ = Qᵀ e3
    if meth[M_KK] != 0.0:
        pot = 0.0
        for c in range(3):
            d = pm[c] - Gam[c]
            pot += 0.5 * d * d - 0.5 * Gam[c] * Gam[c]
    else:
        pot = prm[P_MGL] * (Gam[0] * prm[P_X] + Gam[1] * prm[P_X + 1] + Gam[2] * prm[P_X + 2])
    obs[0] = ke + pot
    obs[1] = pi[2]
    obs[2] = Pi[0] * prm[P_X] + Pi[1] * prm[P_X + 1] + Pi[2] * prm[P_X + 2]
    obs[3] = abs(Gam[0] * Gam[0] + Gam[1] * Gam[1] + Gam[2] * Gam[2] - 1.0)
    orth = 0.0
    for i in range(3):
        for j in range(3):
            s = Q[0, i] * Q[0, j] + Q[1, i] * Q[1, j] + Q[2, i] * Q[2, j]
            if i == j:
                s -= 1.0
            orth = max(orth, abs(s))
    obs[4] = orth
    det = (
        Q[0, 0] * (Q[1, 1] * Q[2, 2] - Q[1, 2] * Q[2, 1])
        - Q[0, 1] * (Q[1, 0] * Q[2, 2] - Q[1, 2] * Q[2, 0])
        + Q[0, 2] * (Q[1, 0] * Q[2, 1] - Q[1, 1] * Q[2, 0])
    )
    obs[5] = abs(det - 1.0)


@kjit(_DENSE)
def slgi_no_dense(prm, meth, theta, h, S, Sn, work, Sd):
    pass


def make_stepper(params: np.ndarray, theta: float, kk: bool, tol: float = 1e-14, maxit: int = 50) -> StepperSpec:
    """The shared driver's view of SLGI(θ) on formulation A (``kk`` false) or C."""
    red = reductions(OBSERVABLES)
    return StepperSpec(
        drive=compile_driver(CB), step=slgi_step, observe=slgi_observe, dense=slgi_no_dense,
        cb=np.ascontiguousarray(params, dtype=np.float64), meth=np.array([theta, float(kk), tol, float(maxit)]),
        p=np.zeros(1), work_size=72, iwork_size=1, state_size=STATE_SIZE, n_check=STATE_SIZE,
        obs_names=OBS_NAMES, red=red,
    )  # fmt: skip


def initial_state(params: np.ndarray, Pi0: np.ndarray) -> np.ndarray:
    """``Q = I``, ``π = Π(0)``, ``q = 0``, ``p = −Mgℓ X``."""
    S = np.zeros(STATE_SIZE)
    S[0:9] = np.eye(3).ravel()
    S[9:12] = Pi0
    S[15:18] = -params[P_MGL] * params[P_X : P_X + 3]
    return S


__all__ = ["make_stepper", "initial_state", "OBSERVABLES", "OBS_NAMES", "P_J30", "P_S0"]
