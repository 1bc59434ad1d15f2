"""Discrete Lagrange–d'Alembert (DLA) integrators: the comparison methods of paper 004 §4.1, §4.4.

Paper 004 compares its discrete gradients with two variational integrators of McLachlan and
Perlmutter (2006) that it names but does not restate. Both are built here from the discrete
Lagrange–d'Alembert principle for a :class:`geosweep.kernels.dg.model.LagrangianForm`,
L(q, q̇) = ½|q̇|² − V(q) on Rⁿ with k constraints A(q)q̇ = 0 (unit mass matrix: true of the
quartic system and the gearbox). Our derivation, step by step:

Discrete principle. For a discrete Lagrangian L_d(q_k, q_{k+1}) ≈ ∫ L dt over one step, admissible
sequences satisfy, for variations δq_k in the constraint space ker A(q_k),

    D₂L_d(q_{k−1}, q_k) + D₁L_d(q_k, q_{k+1}) = A(q_k)ᵀλ_k,           (DLA)

and each step satisfies a discrete constraint. We impose the constraint on the discrete velocity
v_k = (q_{k+1} − q_k)/h at the midpoint q̄_k = (q_k + q_{k+1})/2:

    A(q̄_k) v_k = 0.                                                     (C)

(C) is odd under exchanging q_k and q_{k+1}, so with a symmetric L_d the two-step recursion in q is
invariant under k ↦ −k. One-step form on z = (q, p): with the discrete Legendre momentum
p⁻_k = D₂L_d(q_{k−1}, q_k), (DLA) reads −D₁L_d(q_k, q_{k+1}) = p⁻_k − A(q_k)ᵀλ_k (λ rescaled).
A component of p⁻_k along the rows of A(q_k) is absorbed by λ_k, so the state momentum may be
p_k = P(q_k)p⁻_k, the orthogonal projection onto ker A(q_k), without changing the q-sequence.
We store that one: p⁻_k is only a first-order node velocity (it lacks half of the impulse
A(q_k)ᵀλ_k), P(q_k)p⁻_k is second order, satisfies A(q_k)p_k = 0 exactly, and makes the
one-step map reversible: Φ(q_{k+1}, −p_{k+1}) = (q_k, −p_k) (checked in the tests).

**I-DLA** (implicit): midpoint L_d = h[½|v_k|² − V(q̄_k)]. Unknowns (v, λ) ∈ R^{n+k}:

    v − p_k + (h/2)∇V(q_k + (h/2)v) + A(q_k)ᵀλ = 0,    A(q_k + (h/2)v) v = 0,
    q_{k+1} = q_k + h v,    p_{k+1} = P(q_{k+1})[v − (h/2)∇V(q̄_k)].

**SI-DLA** (semi-implicit): trapezoidal L_d = h[½|v_k|² − ½V(q_k) − ½V(q_{k+1})]. The potential
enters explicitly (a velocity-Verlet kick–drift–kick); only λ ∈ Rᵏ is implicit, through A(q̄):

    v = p_k − (h/2)∇V(q_k) − A(q_k)ᵀλ,    A(q_k + (h/2)v) v = 0,
    q_{k+1} = q_k + h v,    p_{k+1} = P(q_{k+1})[v − (h/2)∇V(q_{k+1})].

(When the coordinates A depends on are not moved by the constraint impulse, as for the quartic
system and the gearbox, the λ equation is linear and Newton converges in one iteration.)

Both solve by simplified Newton (finite-difference Jacobian at the predictor, frozen), stopping
as the dg steps do (``tol``, ``maxit``, round-off floor); a failed solve is status NONCONVERGED.
Neither conserves the energy E = ½|p|² + V(q) (observed). The constraint observed is the
continuous one at the node, max over rows |A(q_k)p_k| (the gearbox's |p1 + sin(q3)p2|), which the
projection keeps at round-off; the discrete constraint (C) holds to the solver tolerance.

State ``S`` = (q, p) (n + n). Model vector ``p``: a header (n, k) then the form's parameters.
Method record: kind, tol, maxit. The system's own state is mapped by its
:class:`~geosweep.kernels.dg.model.LagrangianForm` (adapted coordinates: ρ = X(q)ᵀp).
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.core.driver import compile_driver
from geosweep.kernels.core.layout import I_EVALS, I_ITERS, I_ITERS_MAX, S_FAIL_VALUE
from geosweep.kernels.core.observables import Observable, obs_names, reductions
from geosweep.kernels.core.signatures import contract_types
from geosweep.kernels.core.trajectory import Reductions, StepperSpec
from geosweep.kernels.dg.gradients import lu_factor, lu_solve
from geosweep.kernels.dg.model import CB_TYPE, LagrangianForm, SkewSystem, dg_skew, reduce_angles, with_angles
from geosweep.kernels.linalg import newton_converged
from geosweep.kernels.status import Status

_STEP_SIG, _OBS_SIG, _DENSE_SIG, _ = contract_types(CB_TYPE)
_OK = int(Status.OK)
_NONCONV = int(Status.NONCONVERGED)
_NONFINITE = int(Status.NONFINITE)
_EPS = np.finfo(np.float64).eps
K_SI, K_I = 0, 1
#: integrator name → kind
METHODS: dict[str, int] = {"si_dla": K_SI, "i_dla": K_I}
P_HEAD = 4


@dg_skew
def _no_skew(x, p, S):
    """Placeholder of the callback tuple (the DLA steps use no skew matrix)."""


@kjit
def _residual(cb, pp, kind, n, k, h, q, pk, g0, A0, u, v, qm, gv, Am, G):
    """G(u) of the step (module docstring), u = λ (SI-DLA) or (v, λ) (I-DLA); fills v and
    qm = q + (h/2)v; returns the ∇V evaluations."""
    skew, V, dV, cons = cb
    if kind == K_SI:
        for i in range(n):
            a = pk[i] - 0.5 * h * g0[i]
            for al in range(k):
                a -= A0[al * n + i] * u[al]
            v[i] = a
    else:
        for i in range(n):
            v[i] = u[i]
    for i in range(n):
        qm[i] = q[i] + 0.5 * h * v[i]
    cons(qm, pp, 1, Am)
    ev = 0
    off = 0
    if kind == K_I:
        dV(qm, pp, gv)
        ev = 1
        for i in range(n):
            a = v[i] - pk[i] + 0.5 * h * gv[i]
            for al in range(k):
                a += A0[al * n + i] * u[n + al]
            G[i] = a
        off = n
    for al in range(k):
        a = 0.0
        for i in range(n):
            a += Am[al * n + i] * v[i]
        G[off + al] = a
    return ev


@kjit
def _norm_inf(v):
    m = 0.0
    for i in range(v.shape[0]):
        a = abs(v[i])
        if not a <= m:
            m = a
    return m


@kjit
def _project(A, k, n, p):
    """p ← p − Aᵀ(AAᵀ)⁻¹Ap (orthogonal projection onto ker A, A (k, n) row after row); 1 if AAᵀ is singular."""
    if k == 0:
        return 0
    B = np.empty((k, k))
    r = np.empty(k)
    for a in range(k):
        s = 0.0
        for i in range(n):
            s += A[a * n + i] * p[i]
        r[a] = s
        for b in range(k):
            s = 0.0
            for i in range(n):
                s += A[a * n + i] * A[b * n + i]
            B[a, b] = s
    piv = np.empty(k, dtype=np.int64)
    if lu_factor(B, piv) != 0:
        return 1
    lu_solve(B, piv, r)
    for i in range(n):
        s = 0.0
        for a in range(k):
            s += A[a * n + i] * r[a]
        p[i] -= s
    return 0


@kjit(_STEP_SIG)
def dla_step(cb, meth, h, S, Sn, p, work, iwork, info, sio):
    skew, V, dV, cons = cb
    n = int(p[0])
    k = int(p[1])
    pp = p[P_HEAD : p.shape[0] - int(p[3])]
    kind = int(meth[0])
    tol = meth[1]
    maxit = int(meth[2])
    q = S[:n]
    pk = S[n : 2 * n]
    m = k if kind == K_SI else n + k
    u = np.zeros(m)
    G = np.empty(m)
    Gp = np.empty(m)
    Jac = np.empty((m, m))
    piv = np.empty(m, dtype=np.int64)
    v = np.empty(n)
    qm = np.empty(n)
    g0 = np.empty(n)
    gv = np.empty(n)
    A0 = np.empty(max(k, 1) * n)
    Am = np.empty(max(k, 1) * n)
    dV(q, pp, g0)
    cons(q, pp, 1, A0)
    ev = 1
    if kind == K_I:  # predictor: the explicit kick
        for i in range(n):
            u[i] = pk[i] - 0.5 * h * g0[i]
    ev += _residual(cb, pp, kind, n, k, h, q, pk, g0, A0, u, v, qm, gv, Am, G)
    for j in range(m):  # frozen finite-difference Jacobian at the predictor
        uj = u[j]
        d = np.sqrt(_EPS) * max(1.0, abs(uj))
        u[j] = uj + d
        ev += _residual(cb, pp, kind, n, k, h, q, pk, g0, A0, u, v, qm, gv, Am, Gp)
        u[j] = uj
        for i in range(m):
            Jac[i, j] = (Gp[i] - G[i]) / d
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
        if it > 1:
            ev += _residual(cb, pp, kind, n, k, h, q, pk, g0, A0, u, v, qm, gv, Am, G)
        rn = _norm_inf(G)
        if not np.isfinite(rn):
            break
        for i in range(m):
            G[i] = -G[i]
        lu_solve(Jac, piv, G)
        for i in range(m):
            u[i] += G[i]
        dx = _norm_inf(G)
        sc = tol * max(1.0, _norm_inf(u))
        if newton_converged(dx, dx_prev, it, sc, 3, False):  # the discrete gradients' stall rule
            ok = True
            break
        dx_prev = dx
    info[I_ITERS] += it
    if it > info[I_ITERS_MAX]:
        info[I_ITERS_MAX] = it
    if not ok:
        info[I_EVALS] += ev
        sio[S_FAIL_VALUE] = rn
        return _NONFINITE if not np.isfinite(rn) else _NONCONV
    ev += _residual(cb, pp, kind, n, k, h, q, pk, g0, A0, u, v, qm, gv, Am, G)  # v, q̄ at the solution
    qn = Sn[:n]
    pn = Sn[n : 2 * n]
    for i in range(n):
        qn[i] = q[i] + h * v[i]
    dV(qn if kind == K_SI else qm, pp, gv)
    ev += 1
    for i in range(n):
        pn[i] = v[i] - 0.5 * h * gv[i]
    info[I_EVALS] += ev
    cons(qn, pp, 1, A0)
    if _project(A0, k, n, pn) != 0:
        sio[S_FAIL_VALUE] = np.nan
        return _NONCONV
    reduce_angles(p, int(p[3]), qn)
    return _OK


#: The columns ``dla_observe`` writes: E = ½|p|² + V(q) and the node constraint residual (max).
OBSERVABLES: tuple[Observable, ...] = (Observable("energy"), Observable("constraint", Reductions.MAX))


@kjit(_OBS_SIG)
def dla_observe(cb, meth, S, p, work, full, obs):
    """E = ½|p|² + V(q) and the node constraint residual max_α |A_α(q)·p|."""
    skew, V, dV, cons = cb
    n = int(p[0])
    k = int(p[1])
    pp = p[P_HEAD : p.shape[0] - int(p[3])]
    E = V(S[:n], pp)
    for i in range(n):
        E += 0.5 * S[n + i] * S[n + i]
    obs[0] = E
    A = np.empty(max(k, 1) * n)
    cons(S[:n], pp, 1, A)
    c = 0.0
    for al in range(k):
        a = 0.0
        for i in range(n):
            a += A[al * n + i] * S[n + i]
        c = max(c, abs(a))
    obs[1] = c


@kjit(_DENSE_SIG)
def dla_dense(cb, meth, theta, h, S, Sn, work, Sd):
    """No dense output (fixed-step methods)."""
    for i in range(Sd.shape[0]):
        Sd[i] = np.nan


def lagrangian(system: SkewSystem) -> LagrangianForm:
    lag = system.info.get("lagrangian")
    if lag is None:
        raise ValueError(f"{system.name} has no Lagrangian description (the DLA integrators need one)")
    return lag


def initial_state(system: SkewSystem) -> np.ndarray:
    """S0 = (q0, p0) from the system's initial state (p0 = q̇0)."""
    return lagrangian(system).to_canonical(system.x0)


def make_stepper(system: SkewSystem, method: str, *, tol: float = 1e-14, maxit: int = 50) -> StepperSpec:
    """The driver's view of ``system``'s Lagrangian form integrated with ``method`` (si_dla, i_dla)."""
    if method not in METHODS:
        raise ValueError(f"unknown DLA integrator {method!r}; choose from {sorted(METHODS)}")
    lag = lagrangian(system)
    n = lag.n
    if any(i >= n for i in system.periodic):  # q comes first in the system's state and in z = (q, p)
        raise ValueError(f"{system.name}: periodic entries {system.periodic} must be configuration coordinates")
    p = with_angles(np.concatenate([[n, lag.k, 0.0, 0.0], lag.params]), system.periodic)
    red = reductions(OBSERVABLES)
    return StepperSpec(
        drive=compile_driver(CB_TYPE),
        step=dla_step,
        observe=dla_observe,
        dense=dla_dense,
        cb=(_no_skew, lag.potential, lag.potential_grad, lag.constraint),
        meth=np.array([float(METHODS[method]), tol, float(maxit)]),
        p=p,
        work_size=1,
        iwork_size=1,
        state_size=2 * n,
        n_check=2 * n,
        obs_names=obs_names(OBSERVABLES),
        red=red,
    )
