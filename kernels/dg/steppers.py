"""The skew-gradient family on the shared driver: method records, step, observe, dense.

State ``S`` = x (N): nothing else survives a step. Model vector ``p``: a header (N, k
multipliers, number of invariants, number m of periodic entries) then the system's own
parameters, then the m indices of the periodic entries, which every accepted step reduces to
(−π, π] (:func:`geosweep.kernels.dg.model.reduce_angles`). Method record ``meth``:
kind (discrete gradient, RK4, DOPRI5), discrete-gradient kind, quadrature points s, solver,
tolerance, iteration limit, then s Gauss–Legendre nodes and weights, then the DOPRI5 tableau.

Discrete-gradient steps (004 eq. (14), spec §6) solve G(x') = x' − x − h S(x̄)∇̄H(x, x') = 0
from the predictor x' = x + hS(x)∇H(x), by simplified Newton with the frozen Jacobian
I − (h/2)D(S∇H)(x) (finite differences) or by fixed-point iteration, until
‖Δ‖∞ ≤ tol·max(1, ‖x'‖∞), or until the corrections stop contracting below 10³ times that
(the round-off floor: the Gonzalez quotient carries ε|H|/|Δx|, which the multiplier form
amplifies by 1/h); otherwise the step fails with status NONCONVERGED and the last residual
‖G‖∞. Multiplier forms (k > 0, 004 eq. (15)) solve for (z', λ):
z' − z = hJ∇̄H + hΣλ_α c_α(z̄), c_α(z̄)·∇̄H = 0 from the explicit-midpoint predictor and the
model's multipliers, with the Newton matrix of both row blocks (finite-difference Hessian and
∂c_α) at the predictor's midpoint, and they iterate past the tolerance until what is left is
round-off (:func:`~geosweep.kernels.linalg.newton_at_round_off`): their energy error per step is
∇̄H·G, so a residual at the tolerance would accumulate in one direction. ``f_evals`` counts ∇H and H evaluations.

Observation columns: energy H, then (if the model has them) the constraint residual (max over
every step) and each Casimir (max deviation from its initial value).
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np

from geosweep.kernels import tableaux as rk_tableaux
from geosweep.kernels._jit import kjit
from geosweep.kernels.core import observables
from geosweep.kernels.core.driver import compile_driver
from geosweep.kernels.core.layout import (
    I_EVALS,
    I_ITERS,
    I_ITERS_MAX,
    MODE_RATE,
    MODE_STEP,
    S_ERR,
    S_FAIL_VALUE,
    S_MODE,
)
from geosweep.kernels.core.observables import Observable
from geosweep.kernels.core.signatures import contract_types
from geosweep.kernels.core.trajectory import Reductions, StepperSpec, Trajectory
from geosweep.kernels.core.views import view2
from geosweep.kernels.dg.gradients import (
    AVF,
    GONZALEZ,
    ITOH_ABE,
    MIDPOINT,
    discrete_gradient,
    gauss_legendre,
    lu_factor,
    lu_solve,
)
from geosweep.kernels.dg.model import CB_TYPE, SkewSystem, reduce_angles, with_angles
from geosweep.kernels.linalg import newton_at_round_off, newton_converged
from geosweep.kernels.status import Status

_OK = int(Status.OK)
_NONCONV = int(Status.NONCONVERGED)
_NONFINITE = int(Status.NONFINITE)
_STEP_SIG, _OBS_SIG, _DENSE_SIG, _ = contract_types(CB_TYPE)

K_DG, K_RK4, K_DOPRI5 = 0, 1, 2
M_KIND, M_DG, M_S, M_FIXED, M_TOL, M_MAXIT = range(6)
M_HEAD = 8
S_MAX = 32
_O_NODES = M_HEAD
_O_WEIGHTS = M_HEAD + S_MAX
_O_TAB = M_HEAD + 2 * S_MAX  # DOPRI5: A (7·7), b (7), b̂ (7), P (7·4)
P_N, P_K, P_NINV, P_NPER = 0, 1, 2, 3
P_HEAD = 4
_EPS = np.finfo(np.float64).eps
#: multiplier forms: the error a solve may leave, in units of ε·max(1, ‖x'‖∞)
#: (:func:`geosweep.kernels.linalg.newton_at_round_off`)
RESIDUAL_FRACTION = 1e-3

#: integrator name → (kind, discrete-gradient kind)
METHODS: dict[str, tuple[int, int]] = {
    "dg_avf": (K_DG, AVF),
    "dg_gonzalez": (K_DG, GONZALEZ),
    "dg_itoh_abe": (K_DG, ITOH_ABE),
    "implicit_midpoint": (K_DG, MIDPOINT),
    "rk4_skew": (K_RK4, 0),
    "dopri5_skew": (K_DOPRI5, 0),
}


def method_record(name: str, s: int = 6, solver: str = "newton", tol: float = 1e-14, maxit: int = 50) -> np.ndarray:
    """The float64 record of integrator ``name`` (see module docstring)."""
    kind, dgk = METHODS[name]
    if not 1 <= s <= S_MAX:
        raise ValueError(f"quad_points must be in 1..{S_MAX}, got {s}")
    rec = np.zeros(_O_TAB + 49 + 14 + 28)
    rec[M_KIND] = kind
    rec[M_DG] = dgk
    rec[M_S] = s
    rec[M_FIXED] = float(solver == "fixed_point")
    rec[M_TOL] = tol
    rec[M_MAXIT] = maxit
    c, w = gauss_legendre(s)
    rec[_O_NODES : _O_NODES + s] = c
    rec[_O_WEIGHTS : _O_WEIGHTS + s] = w
    rec[_O_TAB : _O_TAB + 91] = _DOPRI5
    return rec


#: the RK baselines' tableaux (:data:`geosweep.kernels.tableaux.TABLEAUX`): integrator → tableau
RK_TABLEAUX: dict[str, str] = {"rk4_skew": "rk4", "dopri5_skew": "dopri5"}


def _dopri5_block() -> np.ndarray:
    """DOPRI5's A (7×7), b, b̂ and the order-4 continuous extension P (7×4), flat, from its record."""
    t = rk_tableaux.get(RK_TABLEAUX["dopri5_skew"])
    if (t.stages, t.P is not None and len(t.P[0])) != (7, 4) or t.bhat is None:
        raise ValueError(f"dg's DOPRI5 kernel reads a 7-stage tableau with b̂ and a 4-term P, not {t!r}")
    return np.concatenate([t.A_f64().ravel(), t.b_f64(), t.bhat_f64(), t.P_f64().ravel()])  # type: ignore[union-attr]


def _check_hand_coded_rk4() -> None:
    """``_rk_step``'s RK4 branch writes the classical tableau out (c = ½, ½, 1 on the previous stage;
    weights (1, 2, 2, 1)/6, for the textbook rounding): the record must be that tableau."""
    t = rk_tableaux.get(RK_TABLEAUX["rk4_skew"])
    step = (Fraction(1, 2), Fraction(1, 2), Fraction(1))  # stage st = 1, 2, 3: y = x + (step·h)·k_{st−1}
    b, d = t.scaled_weights()
    loop = t.stages == 4 and all(t.A[i][j] == (step[i - 1] if j == i - 1 else 0) for i in range(4) for j in range(4))
    if not loop or list(b) != [1.0, 2.0, 2.0, 1.0] or d != 6.0:
        raise ValueError(f"dg's hand-coded RK4 loop does not match the tableau record {t!r}")


_check_hand_coded_rk4()
_DOPRI5 = _dopri5_block()


def model_vector(system: SkewSystem) -> np.ndarray:
    head = np.array([system.N, system.n_multipliers, system.n_invariants, 0.0])
    return with_angles(np.concatenate([head, system.params]), system.periodic)


def work_size(N: int, k: int, ninv: int) -> int:
    nu = N + k
    return 7 * N + (8 + ninv) + 8 * nu + 2 * N * N + nu * nu + 2 * max(k, 1) * N + k * k


@kjit
def _field(cb, p, x, Smat, g, out):
    """out ← S(x)∇H(x)."""
    skew, energy, grad, extra = cb
    skew(x, p, Smat)
    grad(x, p, g)
    n = x.shape[0]
    for i in range(n):
        a = 0.0
        for j in range(n):
            a += Smat[i, j] * g[j]
        out[i] = a


@kjit
def _norm_inf(v, n):
    m = 0.0
    for i in range(n):
        a = abs(v[i])
        if not a <= m:
            m = a
    return m


@kjit
def _residual(cb, p, dgk, nodes, weights, s, k, h, x, xn, lam, Smat, crow, g, y, t, xb, G):
    """G(x', λ) of the discrete-gradient scheme (module docstring); returns evaluations."""
    skew, energy, grad, extra = cb
    n = x.shape[0]
    ev = discrete_gradient(cb, p, dgk, nodes, weights, s, x, xn, g, y, t)
    for i in range(n):
        xb[i] = 0.5 * (x[i] + xn[i])
    if k == 0:
        skew(xb, p, Smat)
        for i in range(n):
            a = 0.0
            for j in range(n):
                a += Smat[i, j] * g[j]
            G[i] = xn[i] - x[i] - h * a
        return ev
    m = n // 2
    extra(xb, p, 1, crow)
    for i in range(n):
        jg = g[m + i] if i < m else -g[i - m]
        a = 0.0
        for al in range(k):
            a += lam[al] * crow[al * n + i]
        G[i] = xn[i] - x[i] - h * (jg + a)
    for al in range(k):
        a = 0.0
        for i in range(n):
            a += crow[al * n + i] * g[i]
        G[n + al] = a
    return ev


@kjit
def _multiplier_guess(cb, p, k, x, f, g, crow, gram, piv, lam):
    """``lam`` ← the least-squares multipliers of the model's field: f = S(x)∇H(x) ≈ J∇H(x) + Σλ_α c_α(x)
    (``g`` holds ∇H(x)); the continuous λ(x) where S is the constrained canonical field, zero if the
    Gram matrix of the rows is singular."""
    skew, energy, grad, extra = cb
    n = x.shape[0]
    m = n // 2
    extra(x, p, 1, crow)
    for al in range(k):
        a = 0.0
        for i in range(n):
            jg = g[m + i] if i < m else -g[i - m]
            a += crow[al * n + i] * (f[i] - jg)
        lam[al] = a
        for be in range(k):
            b = 0.0
            for i in range(n):
                b += crow[al * n + i] * crow[be * n + i]
            gram[al, be] = b
    if lu_factor(gram, piv) != 0:
        for al in range(k):
            lam[al] = 0.0
        return
    lu_solve(gram, piv, lam)


@kjit
def _multiplier_jacobian(cb, p, k, h, x, gx, lam, D, crow, cy, y, t, Jac):
    """Frozen Newton matrix of the multiplier form at x (finite differences of ∇H and of the rows
    c_α): the z' rows I − (h/2)(J∇²H + Σλ_α ∂c_α) and columns −h c_α, the constraint rows
    ½(c_α·∇²H + ∇H·∂c_α) (``gx`` = ∇H(x), ``lam`` the multipliers of :func:`_multiplier_guess`).
    Returns evaluations."""
    skew, energy, grad, extra = cb
    n = x.shape[0]
    nu = n + k
    m = n // 2
    for i in range(nu):
        for j in range(nu):
            Jac[i, j] = 0.0
    extra(x, p, 1, crow)
    for j in range(n):
        for i in range(n):
            y[i] = x[i]
        dj = np.sqrt(_EPS) * max(1.0, abs(x[j]))
        y[j] = x[j] + dj
        grad(y, p, t)
        for i in range(n):
            D[i, j] = (t[i] - gx[i]) / dj
        extra(y, p, 1, cy)
        for al in range(k):
            a = 0.0
            for i in range(n):
                dc = (cy[al * n + i] - crow[al * n + i]) / dj
                a += dc * gx[i]
                Jac[i, j] -= 0.5 * h * lam[al] * dc
            Jac[n + al, j] = 0.5 * a
    for i in range(n):
        for j in range(n):
            jh = D[m + i, j] if i < m else -D[i - m, j]
            Jac[i, j] -= 0.5 * h * jh
        Jac[i, i] += 1.0
        for al in range(k):
            Jac[i, n + al] = -h * crow[al * n + i]
    for al in range(k):
        for j in range(n):
            a = 0.0
            for i in range(n):
                a += crow[al * n + i] * D[i, j]
            Jac[n + al, j] += 0.5 * a
    return n


@kjit
def _multiplier_start(cb, p, k, h, x, xn, f0, lam, Smat, D, crow, cy, gram, g, y, t, xb, Jac, piv):
    """Start of a multiplier-form solve at the midpoint z̄ = x + (h/2)f(x) of the Euler predictor
    (``f0`` = f(x)): x' ← x + h f(z̄) (explicit midpoint, O(h³) from the solution), λ ← the
    model's multipliers at z̄, and the Newton matrix at z̄ (O(h²) from the solution's midpoint: a
    contraction ~h², where the matrix at x contracts by ~h/2 only). Returns evaluations."""
    n = x.shape[0]
    for i in range(n):
        xb[i] = x[i] + 0.5 * h * f0[i]
    _field(cb, p, xb, Smat, g, t)
    for i in range(n):
        xn[i] = x[i] + h * t[i]
    _multiplier_guess(cb, p, k, xb, t, g, crow, gram, piv, lam)
    return 1 + _multiplier_jacobian(cb, p, k, h, xb, g, lam, D, crow, cy, y, t, Jac)


@kjit
def _jacobian(cb, p, h, x, f0, Smat, D, g, y, t, Jac):
    """Frozen simplified-Newton matrix I − (h/2)D(S∇H)(x) (finite differences; ``f0`` = S(x)∇H(x));
    returns evaluations."""
    n = x.shape[0]
    for j in range(n):
        for i in range(n):
            y[i] = x[i]
        dj = np.sqrt(_EPS) * max(1.0, abs(x[j]))
        y[j] = x[j] + dj
        _field(cb, p, y, Smat, g, t)
        for i in range(n):
            D[i, j] = (t[i] - f0[i]) / dj
    for i in range(n):
        for j in range(n):
            Jac[i, j] = -0.5 * h * D[i, j]
        Jac[i, i] += 1.0
    return n


@kjit
def _dg_step(cb, p, meth, k, nk, o, h, x, xn, work, piv, info, sio):
    """One discrete-gradient step; ``nk`` the model's multipliers (work layout), ``o`` the start of
    the solver buffers in ``work``; ``k`` the multipliers this step uses."""
    skew, energy, grad, extra = cb
    n = x.shape[0]
    nu = n + nk
    s = int(meth[M_S])
    fixed = meth[M_FIXED] != 0.0
    tol = meth[M_TOL]
    maxit = int(meth[M_MAXIT])
    dgk = int(meth[M_DG])
    nodes = meth[_O_NODES : _O_NODES + S_MAX]
    weights = meth[_O_WEIGHTS : _O_WEIGHTS + S_MAX]
    f0 = work[o : o + n]
    g = work[o + nu : o + nu + n]
    y = work[o + 2 * nu : o + 2 * nu + n]
    t = work[o + 3 * nu : o + 3 * nu + n]
    xb = work[o + 4 * nu : o + 4 * nu + n]
    G = work[o + 5 * nu : o + 6 * nu]
    lam = work[o + 6 * nu : o + 6 * nu + max(k, 1)]
    o += 8 * nu
    Smat = view2(work, o, n, n)
    D = view2(work, o + n * n, n, n)
    o += 2 * n * n
    Jac = view2(work, o, n + k, n + k)
    o += nu * nu
    crow = work[o : o + max(nk, 1) * n]
    cy = work[o + max(nk, 1) * n : o + 2 * max(nk, 1) * n]
    gram = view2(work, o + 2 * max(nk, 1) * n, k, k)
    # predictor x' = x + h S(x)∇H(x)
    _field(cb, p, x, Smat, g, f0)
    ev = 1
    for i in range(n):
        xn[i] = x[i] + h * f0[i]
    for al in range(k):
        lam[al] = 0.0
    if not fixed:
        if k > 0:
            ev += _multiplier_start(cb, p, k, h, x, xn, f0, lam, Smat, D, crow, cy, gram, g, y, t, xb, Jac, piv)
        else:
            ev += _jacobian(cb, p, h, x, f0, Smat, D, g, y, t, Jac)
        if lu_factor(Jac, piv) != 0:
            info[I_EVALS] += ev
            sio[S_FAIL_VALUE] = np.nan
            return _NONCONV
    it = 0
    ok = False
    rn = np.inf
    dx_prev = np.inf
    while it < maxit:
        it += 1
        ev += _residual(cb, p, dgk, nodes, weights, s, k, h, x, xn, lam, Smat, crow, g, y, t, xb, G)
        rn = _norm_inf(G, n + k)
        if not np.isfinite(rn):
            break
        for i in range(n + k):
            G[i] = -G[i]
        if not fixed:
            lu_solve(Jac, piv, G)
        for i in range(n):
            xn[i] += G[i]
        for al in range(k):
            lam[al] += G[n + al]
        dx = _norm_inf(G, n)
        xs = max(1.0, _norm_inf(xn, n))
        sc = tol * xs
        stop = newton_converged(dx, dx_prev, it, sc, 3, False)
        if stop and (k == 0 or newton_at_round_off(dx, dx_prev, sc, xs, RESIDUAL_FRACTION)):
            ok = True
            break
        dx_prev = dx
    info[I_EVALS] += ev
    info[I_ITERS] += it
    if it > info[I_ITERS_MAX]:
        info[I_ITERS_MAX] = it
    if not ok:
        sio[S_FAIL_VALUE] = rn
        return _NONFINITE if not np.isfinite(rn) else _NONCONV
    return _OK


@kjit
def _rk_step(cb, p, meth, nu, o, h, x, xn, work, info, sio):
    """Classical RK4 or DOPRI5(4) (with its error estimate) on ẋ = S(x)∇H(x). The RK4 loop is the
    record's tableau written out (checked at import: :func:`_check_hand_coded_rk4`); DOPRI5 reads its
    coefficients from ``meth``."""
    n = x.shape[0]
    kind = int(meth[M_KIND])
    kst = view2(work, 0, 7, n)
    g = work[o + nu : o + nu + n]
    y = work[o + 2 * nu : o + 2 * nu + n]
    Smat = view2(work, o + 8 * nu, n, n)
    if kind == K_RK4:
        _field(cb, p, x, Smat, g, kst[0])
        for st in range(1, 4):
            c = 0.5 * h if st < 3 else h
            for i in range(n):
                y[i] = x[i] + c * kst[st - 1, i]
            _field(cb, p, y, Smat, g, kst[st])
        for i in range(n):
            xn[i] = x[i] + h * (kst[0, i] + 2.0 * kst[1, i] + 2.0 * kst[2, i] + kst[3, i]) / 6.0
        info[I_EVALS] += 4
        return _OK
    A = view2(meth, _O_TAB, 7, 7)
    b = meth[_O_TAB + 49 : _O_TAB + 56]
    bh = meth[_O_TAB + 56 : _O_TAB + 63]
    _field(cb, p, x, Smat, g, kst[0])
    for st in range(1, 7):
        for i in range(n):
            a = 0.0
            for j in range(st):
                a += A[st, j] * kst[j, i]
            y[i] = x[i] + h * a
        _field(cb, p, y, Smat, g, kst[st])
    e2 = 0.0
    for i in range(n):
        a = 0.0
        d = 0.0
        for j in range(7):
            a += b[j] * kst[j, i]
            d += (b[j] - bh[j]) * kst[j, i]
        xn[i] = x[i] + h * a
        e2 += (h * d) ** 2
    info[I_EVALS] += 7
    sio[S_ERR] = np.sqrt(e2)
    return _OK


@kjit
def _start_mode(cb, p, mode, nu, o, h, x, xn, work, info, sio):
    """The driver's starting-step modes on ẋ = S(x)∇H(x) (the error estimate's coordinates are
    x): ``MODE_RATE`` writes the field into ``xn`` and ``‖x‖₂`` into ``sio[S_ERR]``,
    ``MODE_EULER`` writes ``x + h·S(x)∇H(x)``. One evaluation each."""
    n = x.shape[0]
    g = work[o + nu : o + nu + n]
    Smat = view2(work, o + 8 * nu, n, n)
    _field(cb, p, x, Smat, g, xn)
    info[I_EVALS] += 1
    if mode == MODE_RATE:
        s = 0.0
        for i in range(n):
            s += x[i] * x[i]
        sio[S_ERR] = np.sqrt(s)
    else:
        for i in range(n):
            xn[i] = x[i] + h * xn[i]
    for i in range(n):
        if not np.isfinite(xn[i]):
            return _NONFINITE
    return _OK


@kjit(_STEP_SIG)
def dg_step(cb, meth, h, S, Sn, p, work, iwork, info, sio):
    n = int(p[P_N])
    k = int(p[P_K])
    m = int(p[P_NPER])
    pp = p[P_HEAD : p.shape[0] - m]
    x = S[:n]
    xn = Sn[:n]
    o = 7 * n + 8 + int(p[P_NINV])  # past the stages and the observe scratch
    mode = int(sio[S_MODE])
    if mode != MODE_STEP:
        st = _start_mode(cb, pp, mode, n + k, o, h, x, xn, work, info, sio)
        if st == _OK and mode != MODE_RATE and m > 0:
            reduce_angles(p, m, xn)
        return st
    if int(meth[M_KIND]) == K_DG:
        ks = k if int(meth[M_DG]) != MIDPOINT else 0
        st = _dg_step(cb, pp, meth, ks, k, o, h, x, xn, work, iwork, info, sio)
    else:
        st = _rk_step(cb, pp, meth, n + k, o, h, x, xn, work, info, sio)
    if st == _OK and m > 0:
        reduce_angles(p, m, xn)
    return st


@kjit(_OBS_SIG)
def dg_observe(cb, meth, S, p, work, full, obs):
    skew, energy, grad, extra = cb
    n = int(p[P_N])
    ninv = int(p[P_NINV])
    pp = p[P_HEAD : p.shape[0] - int(p[P_NPER])]
    x = S[:n]
    obs[0] = energy(x, pp)
    if ninv > 0:
        buf = work[7 * n : 7 * n + 8 + ninv]
        extra(x, pp, 0, buf)
        for j in range(ninv):
            obs[1 + j] = buf[j]


@kjit(_DENSE_SIG)
def dg_dense(cb, meth, theta, h, S, Sn, work, Sd):
    """DOPRI5: the Dormand–Prince continuous extension y + hΣ w_i(θ) k_i; NaN otherwise."""
    n = Sd.shape[0]
    if int(meth[M_KIND]) != K_DOPRI5:
        for i in range(n):
            Sd[i] = np.nan
        return
    kst = view2(work, 0, 7, n)
    P = view2(meth, _O_TAB + 63, 7, 4)
    for i in range(n):
        Sd[i] = S[i]
    for st in range(7):
        w = 0.0
        tp = theta
        for m in range(4):
            w += P[st, m] * tp
            tp *= theta
        for i in range(n):
            Sd[i] += h * w * kst[st, i]


def observables_of(system: SkewSystem) -> tuple[Observable, ...]:
    """The columns ``dg_observe`` writes for ``system`` and their running reductions: the energy,
    the constraint residual (max; systems with a constraint) and the Casimirs (deviation from
    their initial values; systems with Casimirs)."""
    obs = [Observable("energy")]
    if system.has_constraint:
        obs.append(Observable("constraint", Reductions.MAX))
    if system.casimirs:
        cols = tuple(f"casimir_{c}" for c in system.casimirs)
        obs.append(Observable("casimir", (Reductions.DEV,) * len(cols), columns=cols))
    return tuple(obs)


def obs_names(system: SkewSystem) -> tuple[str, ...]:
    return observables.obs_names(observables_of(system))


def casimir_error(traj: Trajectory, model, integrator: str, obs: Observable) -> np.ndarray:
    """Per sample, the max over the Casimirs (``obs.columns``) of |C − C(0)|."""
    cols = np.stack([traj.samples(c) for c in obs.columns])
    return np.abs(cols - cols[:, :1]).max(axis=0)


def max_casimir_error(traj: Trajectory, model, integrator: str, obs: Observable) -> np.float64:
    """The max over the Casimirs of their running max deviation over every step."""
    return np.float64(max(traj.reduced(c) for c in obs.columns))


def make_stepper(
    system: SkewSystem,
    method: str,
    *,
    quad_points: int = 6,
    solver: str = "newton",
    tol: float = 1e-14,
    maxit: int = 50,
) -> StepperSpec:
    """The driver's view of ``system`` integrated with ``method`` (one of :data:`METHODS`)."""
    if method not in METHODS:
        raise ValueError(f"unknown skew-gradient integrator {method!r}; choose from {sorted(METHODS)}")
    if solver not in ("newton", "fixed_point"):
        raise ValueError(f"solver must be 'newton' or 'fixed_point', got {solver!r}")
    kind, dgk = METHODS[method]
    if solver == "fixed_point" and system.n_multipliers and kind == K_DG and dgk != MIDPOINT:
        raise ValueError(f"solver: the multiplier form of {system.name} (004 eq. (15)) needs 'newton'")
    declared = observables_of(system)
    N = system.N
    return StepperSpec(
        drive=compile_driver(CB_TYPE),
        step=dg_step,
        observe=dg_observe,
        dense=dg_dense,
        cb=system.cb,
        meth=method_record(method, quad_points, solver, tol, maxit),
        p=model_vector(system),
        work_size=work_size(N, system.n_multipliers, system.n_invariants),
        iwork_size=N + system.n_multipliers,
        state_size=N,
        n_check=N,
        obs_names=observables.obs_names(declared),
        red=observables.reductions(declared),
        has_dense=kind == K_DOPRI5,
        start_order=rk_tableaux.get(RK_TABLEAUX[method]).order if kind == K_DOPRI5 else 0,
    )
