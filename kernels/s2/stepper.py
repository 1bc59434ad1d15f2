"""The (S²)ⁿ family on the shared driver: state layout, method records, step and observe.

State ``S`` (flat, length 9n + 2): ``q`` (3n) | ``ω`` (3n) | ``g`` = ∂V/∂q at q (3n, kept so
each VI step costs one potential evaluation) | ``V`` | ``|a|`` of the last explicit VI step.
Snapshots and finiteness checks cover the prefix (q, ω). Model vector ``p``: a header
(n, diagonal M, symmetry code, axis), then M (n·n), then the potential's own parameters.

Method record ``meth`` (float64): kind (explicit VI, implicit VI, explicit RK), projection
flag, implicit tolerance and iteration limit, the number of stages s, the RK divisor, then the
tableau A (s·s) and weights b (s) — RK methods are data, not code paths.

Observation columns: energy, unit error max_i |√(q_i·q_i) − 1| (mean and max over every step),
tangency error max_i |q_i·ω_i| (max), momentum map J (3; max ‖J − J0‖ when V is rotation
invariant), axis·J (max deviation when V is invariant about one axis), explicit VI step norm
max_i |a_i| (max).
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels import tableaux as rk_tableaux
from geosweep.kernels._jit import kjit
from geosweep.kernels.core import observables
from geosweep.kernels.core.cells import UNIT_SPHERE_OBSERVABLES, blocks_to_bodies, common_values
from geosweep.kernels.core.driver import compile_driver
from geosweep.kernels.core.layout import I_EVALS, I_ITERS, I_ITERS_MAX, S_FAIL_INDEX, S_FAIL_VALUE
from geosweep.kernels.core.observables import Derived, Observable, Samples, columns, obs_names, reductions
from geosweep.kernels.core.signatures import contract_types
from geosweep.kernels.core.threads import usable_threads
from geosweep.kernels.core.trajectory import Reductions, StepperSpec
from geosweep.kernels.core.views import view2, view3
from geosweep.kernels.registry import Diagnostic
from geosweep.kernels.s2.model import SYMMETRY_CODES, PotentialType, S2System, threaded_potential
from geosweep.kernels.s2.steps import (
    constraint_errors,
    kinetic,
    momentum,
    step_explicit_vi,
    step_implicit_vi,
    step_rk,
)

EXPLICIT_VI, IMPLICIT_VI, EXPLICIT_RK = 0, 1, 2
# method record fields
M_KIND, M_PROJECT, M_TOL, M_MAXIT, M_S, M_BDIV = 0, 1, 2, 3, 4, 5
M_HEAD = 8
# model vector header
P_N, P_DIAG, P_SYM, P_AXIS = 0, 1, 2, 3
P_HEAD = 8

_EVERY = "every step"


def _momentum_error(traj, model: S2System, integrator: str, obs: Observable) -> np.ndarray:
    """|J − J0| (rotation invariant V), |a·J − a·J0| (invariant about a), NaN otherwise."""
    J = traj.out[:, O_J : O_J + 3]
    with np.errstate(over="ignore", invalid="ignore"):
        if model.symmetry == "full":
            return np.sqrt(((J - J[0]) ** 2).sum(axis=1))
        if model.symmetry == "axis":
            ax = traj.samples("J_axis")
            return np.abs(ax - ax[0])
    return np.full(len(J), np.nan)


def _max_momentum_error(traj, model: S2System, integrator: str, obs: Observable) -> np.float64:
    """The running max deviation of the conserved momentum (DEVNORM3 / DEV), NaN if none."""
    col = {"full": "J_x", "axis": "J_axis"}.get(model.symmetry)
    return np.float64(traj.reduced(col) if col is not None else np.nan)


def _max_step_norm(traj, model: S2System, integrator: str, obs: Observable) -> np.float64:
    return np.float64(traj.reduced("step_norm") if integrator == "explicit_vi" else np.nan)


#: The observables of an (S²)ⁿ cell beyond the shared ones: what the family stores from them.
OWN_OBSERVABLES: tuple[Observable, ...] = (
    Observable(
        "momentum",
        lambda m: Reductions.DEVNORM3 if m.symmetry == "full" else Reductions.NONE,
        (
            Samples(Diagnostic("momentum", ("time", "component"), "angular momentum", "momentum map J = Σ π_i")),
            Derived(Diagnostic(
                "momentum_error", ("time",), "angular momentum",
                "|J − J0| (V rotation invariant) or |a·J − a·J0| (invariant about axis a); NaN if not conserved",
            ), rank=0, fn=_momentum_error),
            Derived(Diagnostic(
                "max_momentum_error", (), "angular momentum", "max of the momentum error; NaN if not conserved",
                computed_over=_EVERY,
            ), fn=_max_momentum_error),
        ),
        columns=("J_x", "J_y", "J_z"),
    ),
    Observable("J_axis", lambda m: Reductions.DEV if m.symmetry == "axis" else Reductions.NONE),
    Observable("step_norm", Reductions.MAX, (
        Derived(Diagnostic("max_step_norm", (), "1", "explicit VI: max_i |a_i| (validity needs < 1); NaN otherwise",
                           computed_over=_EVERY), fn=_max_step_norm),
    )),
)  # fmt: skip
#: Every observation column of the family, in order: energy, the unit-sphere constraint errors, own.
OBSERVABLES: tuple[Observable, ...] = (Observable("energy"), *UNIT_SPHERE_OBSERVABLES, *OWN_OBSERVABLES)
OBS_NAMES = obs_names(OBSERVABLES)
_COL = columns(OBSERVABLES)
O_UNIT, O_TANGENCY, O_J, O_J_AXIS, O_STEP_NORM = (
    _COL[c] for c in ("unit_error", "tangency_error", "J_x", "J_axis", "step_norm")
)

_STEP_SIG, _OBS_SIG, _DENSE_SIG, _ = contract_types(PotentialType)


def method_record(kind: int, A=None, b=None, bdiv: float = 1.0, project: bool = False, tol=1e-14, maxit=50):
    """Pack a method into its float64 record (see module docstring)."""
    A = np.zeros((1, 1)) if A is None else np.asarray(A, dtype=np.float64)
    b = np.zeros(1) if b is None else np.asarray(b, dtype=np.float64)
    s = b.shape[0]
    head = np.zeros(M_HEAD)
    head[M_KIND] = kind
    head[M_PROJECT] = float(project)
    head[M_TOL] = tol
    head[M_MAXIT] = maxit
    head[M_S] = s
    head[M_BDIV] = bdiv
    return np.ascontiguousarray(np.concatenate([head, A.ravel(), b]))


#: the family's Runge–Kutta baselines: integrator → (tableau of :data:`geosweep.kernels.tableaux.TABLEAUX`,
#: projection q_i ← q_i/|q_i| after each step); order and coefficients come from the tableau's record
RK_BASELINES: dict[str, tuple[str, bool]] = {
    "rk2": ("midpoint", False),
    "rk2_proj": ("midpoint", True),
    "rk4": ("rk4", False),
    "rk4_proj": ("rk4", True),
}


def _rk_method(tableau: str, project: bool) -> tuple:
    """(kind, A, b·d, d, projection): the weights over their common denominator d (RK4: 1, 2, 2, 1 and 6)."""
    t = rk_tableaux.get(tableau)
    b, d = t.scaled_weights()
    return (EXPLICIT_RK, t.A_f64(), b, d, project)


#: name → (kind, tableau A, weights b·bdiv, bdiv, projection)
METHODS: dict[str, tuple] = {
    "explicit_vi": (EXPLICIT_VI, None, None, 1.0, False),
    "implicit_vi": (IMPLICIT_VI, None, None, 1.0, False),
    **{name: _rk_method(*rk) for name, rk in RK_BASELINES.items()},
}


def model_vector(system: S2System) -> np.ndarray:
    n = system.n
    head = np.zeros(P_HEAD)
    head[P_N] = n
    head[P_DIAG] = float(system.is_diagonal)
    head[P_SYM] = SYMMETRY_CODES[system.symmetry]
    head[P_AXIS : P_AXIS + 3] = system.axis
    return np.ascontiguousarray(np.concatenate([head, system.M.ravel(), system.params]))


def state_size(n: int) -> int:
    return 9 * n + 2


def work_size(n: int, s: int, dense_matrix: bool) -> int:
    """Scratch: 12 (n, 3) buffers, 2·s stage buffers and a (3n)² matrix when a solve is needed."""
    m3 = 3 * n if dense_matrix else 1
    return 36 * n + 6 * s * n + m3 * m3 + 3 * m3


# One step function per method kind, all with the step signature of the contract: a run compiles
# (lazily, on first use, then from the cache) only its own kind, not the dense LU solve of the
# implicit VI when it runs explicit VI or RK. Work layout (shared): 6 (n, 3) observe/scratch
# buffers, then sa, sb, qs, ws, gs (+1 spare), then kq, kw (s each), then a (3n)² matrix and
# three 3n vectors (a 1×1 matrix when no solve is needed).
@kjit(inline="always")
def _state_views(S, Sn, p):
    """(n, M, potential parameters, q, ω, g, qn, ωn, gn) as views into S, Sn and p."""
    n = int(p[P_N])
    n3 = 3 * n
    M = view2(p, P_HEAD, n, n)
    pp = p[P_HEAD + n * n :]
    return (
        n, M, pp, view2(S, 0, n, 3), view2(S, n3, n, 3), view2(S, 2 * n3, n, 3),
        view2(Sn, 0, n, 3), view2(Sn, n3, n, 3), view2(Sn, 2 * n3, n, 3),
    )  # fmt: skip


@kjit(inline="always")
def _finish_step(st, idx, val, Vn, n, Sn, sio):
    """Record a failure (body, value) or the new potential energy; the step's status."""
    if st != 0:
        sio[S_FAIL_INDEX] = idx
        sio[S_FAIL_VALUE] = val
        return st
    Sn[9 * n] = Vn
    return 0


@kjit
def s2_step_explicit_vi(pot, meth, h, S, Sn, p, work, iwork, info, sio):
    """One explicit VI step (000 Cor. 3); keeps max_i |a_i| in the state for the observation."""
    n, M, pp, q, w, g, qn, wn, gn = _state_views(S, Sn, p)
    o = 18 * n
    st, idx, val, Vn, anorm = step_explicit_vi(pot, pp, M, q, w, g, h, qn, wn, gn, view2(work, o, n, 3),
                                               view2(work, o + 3 * n, n, 3))  # fmt: skip
    info[I_EVALS] += 1
    Sn[9 * n + 1] = anorm
    return _finish_step(st, idx, val, Vn, n, Sn, sio)


@kjit
def s2_step_implicit_vi(pot, meth, h, S, Sn, p, work, iwork, info, sio):
    """One implicit VI step (000 (22)–(28)): fixed point with a dense LU solve per iteration."""
    n, M, pp, q, w, g, qn, wn, gn = _state_views(S, Sn, p)
    n3 = 3 * n
    o = 36 * n + 6 * int(meth[M_S]) * n
    Amat = view2(work, o, n3, n3)
    o += n3 * n3
    st, idx, val, Vn, its = step_implicit_vi(
        pot, pp, M, q, w, g, h, qn, wn, gn, work[o : o + n3], work[o + n3 : o + 2 * n3], Amat,
        work[o + 2 * n3 : o + 3 * n3], meth[M_TOL], int(meth[M_MAXIT]),
    )  # fmt: skip
    info[I_EVALS] += 1
    info[I_ITERS] += its
    if its > info[I_ITERS_MAX]:
        info[I_ITERS_MAX] = its
    return _finish_step(st, idx, val, Vn, n, Sn, sio)


@kjit
def s2_step_rk(pot, meth, h, S, Sn, p, work, iwork, info, sio):
    """One explicit Runge–Kutta step on the ambient ODE (tableau from ``meth``), optionally projected."""
    n, M, pp, q, w, g, qn, wn, gn = _state_views(S, Sn, p)
    diag = p[P_DIAG] != 0.0
    n3 = 3 * n
    s = int(meth[M_S])
    o = 6 * n3
    qs = view2(work, o + 2 * n3, n, 3)
    ws = view2(work, o + 3 * n3, n, 3)
    gs = view2(work, o + 4 * n3, n, 3)
    o += 6 * n3
    kq = view3(work, o, s, n, 3)
    o += s * n3
    kw = view3(work, o, s, n, 3)
    o += s * n3
    m3 = 1 if diag else n3
    Amat = view2(work, o, m3, m3)
    o += m3 * m3
    A = view2(meth, M_HEAD, s, s)
    b = meth[M_HEAD + s * s : M_HEAD + s * s + s]
    st, idx, val, Vn, ev = step_rk(
        pot, pp, M, diag, q, w, g, h, qn, wn, gn, A, b, meth[M_BDIV], meth[M_PROJECT] != 0.0,
        kq, kw, qs, ws, gs, Amat, work[o : o + m3],
    )  # fmt: skip
    info[I_EVALS] += ev
    return _finish_step(st, idx, val, Vn, n, Sn, sio)


#: method kind → its step function
STEPS = {EXPLICIT_VI: s2_step_explicit_vi, IMPLICIT_VI: s2_step_implicit_vi, EXPLICIT_RK: s2_step_rk}


@kjit(_OBS_SIG)
def s2_observe(pot, meth, S, p, work, full, obs):
    n = int(p[P_N])
    diag = p[P_DIAG] != 0.0
    M = view2(p, P_HEAD, n, n)
    n3 = 3 * n
    q = view2(S, 0, n, 3)
    w = view2(S, n3, n, 3)
    qd = view2(work, 0, n, 3)
    obs[0] = kinetic(M, diag, q, w, qd) + S[9 * n]
    u, tau = constraint_errors(q, w)
    obs[O_UNIT] = u
    obs[O_TANGENCY] = tau
    J = obs[O_J : O_J + 3]
    momentum(M, diag, q, qd, J)
    obs[O_J_AXIS] = p[P_AXIS] * J[0] + p[P_AXIS + 1] * J[1] + p[P_AXIS + 2] * J[2]
    obs[O_STEP_NORM] = S[9 * n + 1]


@kjit(_DENSE_SIG)
def s2_no_dense(pot, meth, theta, h, S, Sn, work, Sd):
    """The (S²)ⁿ methods are fixed-step: no dense output."""
    for i in range(Sd.shape[0]):
        Sd[i] = np.nan


@kjit
def _initial_gradient(pot, p, q, g):
    return pot(q, p, g)


def initial_state(system: S2System, q: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Flat state from (q, ω) (already normalised and projected); evaluates V and g once."""
    n = system.n
    S = np.zeros(state_size(n))
    S[: 3 * n] = q.ravel()
    S[3 * n : 6 * n] = w.ravel()
    g = np.empty((n, 3))
    S[9 * n] = system.potential(np.ascontiguousarray(q), system.params, g)
    S[6 * n : 9 * n] = g.ravel()
    return S


def cell_values(system: S2System, method: str, traj) -> dict[str, np.ndarray]:
    """A finished (or failed) trajectory's stored values, keyed by the stored names: the shared
    ones (:func:`geosweep.kernels.core.cells.common_values`) and every output of :data:`OBSERVABLES`."""
    values = common_values(traj, blocks_to_bodies(system.n, 2))
    values.update(observables.values(OBSERVABLES, traj, system, method))
    return values


def make_stepper(
    system: S2System, method: str, *, tol: float = 1e-14, maxit: int = 50, threads: int = 1
) -> StepperSpec:
    """The driver's view of ``system`` integrated with ``method`` (one of :data:`METHODS`).

    ``threads`` > 1 runs the potential's threaded copy on that many threads when it has one
    (``@s2_potential(threaded=True)``; capped by :func:`geosweep.kernels.core.threads.usable_threads`);
    the results are bitwise the same as on one thread.
    """
    cb = system.potential
    k = 1
    if threads > 1 and (par := threaded_potential(system.potential)) is not None:
        k = usable_threads(threads)
        cb = par if k > 1 else cb
    kind, A, b, bdiv, project = METHODS[method]
    meth = method_record(kind, A, b, bdiv, project, tol, maxit)
    s = int(meth[M_S])
    n = system.n
    diag = system.is_diagonal
    red = reductions(OBSERVABLES, system)
    return StepperSpec(
        drive=compile_driver(PotentialType),
        step=STEPS[kind],
        observe=s2_observe,
        dense=s2_no_dense,
        cb=cb,
        meth=meth,
        p=model_vector(system),
        work_size=work_size(n, s, kind == IMPLICIT_VI or not diag),
        iwork_size=1,
        state_size=state_size(n),
        n_check=6 * n,
        obs_names=OBS_NAMES,
        red=red,
        extra={"evals0": 1},
        threads=k,
    )
