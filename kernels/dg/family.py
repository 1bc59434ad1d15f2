"""The ``dg`` family: skew-gradient systems ẋ = S(x)∇H(x) with discrete-gradient integrators (004).

One body whose state is the system's vector x ∈ Rᴺ (``final_state`` (1, N)). Besides the common
diagnostics every cell stores the constraint residual and the Casimir errors (NaN where the
system has none) and the nonlinear-solver statistics of the implicit methods. The discrete
Lagrange–d'Alembert integrators ``si_dla``/``i_dla`` (:mod:`geosweep.kernels.dg.dla`) run on a system's
Lagrangian form (q, p) and hand back states in the system's own coordinates.
"""

from __future__ import annotations

import numpy as np

from geosweep.kernels import tableaux as rk_tableaux
from geosweep.kernels.core import observables
from geosweep.kernels.core.cells import (
    ADAPTIVE_PARAMS,
    BLOWUP,
    COMMON_DIAGNOSTICS,
    common_values,
    finish,
    make_run,
    start_trajectory,
)
from geosweep.kernels.core.observables import Derived, Max, Observable, Output, RunValues, Samples, with_outputs
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.dg import dla
from geosweep.kernels.dg.chain_lp import SYSTEM as CHAIN_LP
from geosweep.kernels.dg.model import SkewSystem, reduce_angles
from geosweep.kernels.dg.steppers import (
    METHODS,
    RK_TABLEAUX,
    casimir_error,
    make_stepper,
    max_casimir_error,
    observables_of,
)
from geosweep.kernels.dg.systems import SYSTEMS as _BUILTIN
from geosweep.kernels.dg.systems import rigid_body
from geosweep.kernels.registry import CellResult, Diagnostic, FamilyDef, Figure, IntegratorDef, Param, RunRequest
from geosweep.kernels.status import Status

_EVERY = "every step"
#: the family's systems, registered with it
SYSTEMS = _BUILTIN + (CHAIN_LP,)

CONSTRAINT_ERROR = Diagnostic(
    "constraint_error", ("time",), "1", "nonholonomic constraint residual at the sample; NaN if none"
)
MAX_CONSTRAINT_ERROR = Diagnostic(
    "max_constraint_error", (), "1", "max of the constraint residual; NaN if none", computed_over=_EVERY
)
CASIMIR_ERROR = Diagnostic("casimir_error", ("time",), "1", "max_j |C_j(t) − C_j(0)| over the Casimirs; NaN if none")
MAX_CASIMIR_ERROR = Diagnostic(
    "max_casimir_error", (), "1", "max over Casimirs of max_k |C_j − C_j(0)|; NaN if none", computed_over=_EVERY
)
NEWTON_ITERATIONS_MEAN = Diagnostic(
    "newton_iterations_mean",
    (),
    "1",
    "mean nonlinear iterations per step (implicit methods; else 0)",
    computed_over=_EVERY,
)
NEWTON_ITERATIONS_MAX = Diagnostic(
    "newton_iterations_max", (), "1", "max nonlinear iterations in one step", "int64", computed_over=_EVERY
)
NONCONVERGED_STEPS = Diagnostic(
    "nonconverged_steps", (), "1", "steps whose nonlinear solve did not converge (it ends the run)", "int64"
)
NONCONVERGED_RESIDUAL = Diagnostic(
    "nonconverged_residual", (), "1", "‖G‖∞ at the last iterate of the non-converged step; NaN if none"
)  # fmt: skip


def _constrained(model: SkewSystem) -> bool:
    return bool(model.has_constraint)


def _unconstrained(model: SkewSystem) -> bool:
    return not model.has_constraint


def _nan_series(traj: Trajectory, model: SkewSystem, integrator: str, obs: Observable) -> np.ndarray:
    return np.full(traj.out.shape[0], np.nan)


def _nan(traj: Trajectory, model: SkewSystem, integrator: str, obs: Observable) -> np.float64:
    return np.float64(np.nan)


def _nonconverged(traj: Trajectory, integrator: str) -> bool:
    """The run ended in an implicit method's non-converged solve."""
    implicit = integrator in dla.METHODS or METHODS[integrator][0] == 0
    return traj.status == Status.NONCONVERGED and implicit


def _newton_mean(traj: Trajectory, model: SkewSystem, integrator: str, obs: Observable) -> np.float64:
    c = traj.costs()
    return np.float64(c["solver_iterations"] / max(c["steps"], 1))


def _newton_max(traj: Trajectory, model: SkewSystem, integrator: str, obs: Observable) -> np.int64:
    return np.int64(traj.costs()["solver_iterations_max"])


def _nonconverged_steps(traj: Trajectory, model: SkewSystem, integrator: str, obs: Observable) -> np.int64:
    return np.int64(1 if _nonconverged(traj, integrator) else 0)


def _nonconverged_residual(traj: Trajectory, model: SkewSystem, integrator: str, obs: Observable) -> np.float64:
    return np.float64(traj.failure()["fail_value"] if _nonconverged(traj, integrator) else np.nan)


#: outputs of the constraint column (systems with a constraint) and of the Casimir columns
_ON_COLUMNS: dict[str, tuple[Output, ...]] = {
    "constraint": (
        Samples(CONSTRAINT_ERROR, when=_constrained),
        Max(MAX_CONSTRAINT_ERROR, when=_constrained),
    ),
    "casimir": (Derived(CASIMIR_ERROR, rank=0, fn=casimir_error), Derived(MAX_CASIMIR_ERROR, fn=max_casimir_error)),
}
_NO_CONSTRAINT = RunValues(
    "no_constraint",
    outputs=(
        Derived(CONSTRAINT_ERROR, rank=0, fn=_nan_series, when=_unconstrained),
        Derived(MAX_CONSTRAINT_ERROR, fn=_nan, when=_unconstrained),
    ),
)
_NO_CASIMIR = RunValues(
    "no_casimir",
    outputs=(
        Derived(CASIMIR_ERROR, rank=0, fn=_nan_series),
        Derived(MAX_CASIMIR_ERROR, fn=_nan),
    ),
)
_SOLVER = RunValues("solver", outputs=(
    Derived(NEWTON_ITERATIONS_MEAN, fn=_newton_mean), Derived(NEWTON_ITERATIONS_MAX, fn=_newton_max),
    Derived(NONCONVERGED_STEPS, fn=_nonconverged_steps), Derived(NONCONVERGED_RESIDUAL, fn=_nonconverged_residual),
))  # fmt: skip


def stored(model: SkewSystem, integrator: str | None = None) -> tuple[Observable, ...]:
    """What a cell of ``model`` run by ``integrator`` stores, declared on its stepper's columns
    (:func:`geosweep.kernels.dg.steppers.observables_of`, or the DLA form's
    :data:`geosweep.kernels.dg.dla.OBSERVABLES`): the constraint residual and the Casimir errors
    (NaN where the system, or the form, has none) and the solver statistics. Every integrator
    stores the same names."""
    base = dla.OBSERVABLES if integrator in dla.METHODS else observables_of(model)
    present = {o.name for o in base}
    declared = with_outputs(base, {k: v for k, v in _ON_COLUMNS.items() if k in present})
    extra = (_NO_CONSTRAINT,) + (() if "casimir" in present else (_NO_CASIMIR,))
    return (*declared, *extra, _SOLVER)


def diagnostics(model: SkewSystem) -> tuple[Diagnostic, ...]:
    return COMMON_DIAGNOSTICS + observables.diagnostics(stored(model), model)


def sizes(model: SkewSystem) -> dict[str, int]:
    return {"body": 1, "state": len(model.stored_labels)}


def _stepper(model: SkewSystem, integrator: str, options: dict):
    if integrator in dla.METHODS:
        return dla.make_stepper(
            model, integrator, tol=float(options.get("nl_tol", 1e-14)), maxit=int(options.get("maxit", 50))
        )
    return make_stepper(
        model,
        integrator,
        quad_points=int(options.get("quad_points", 6)),
        solver=str(options.get("solver", "newton")),
        tol=float(options.get("nl_tol", 1e-14)),
        maxit=int(options.get("maxit", 50)),
    )


def start(model: SkewSystem, integrator: str, request: RunRequest, options: dict) -> Trajectory:
    """A resumable trajectory of one cell (options: quad_points, solver, nl_tol, maxit, blowup)."""
    adaptive = integrator == "dopri5_skew"
    if adaptive != request.adaptive:
        raise ValueError(f"{integrator} needs a request with {'tol' if adaptive else 'h'}")
    stepper = _stepper(model, integrator, options)
    x0 = np.array(dla.initial_state(model) if integrator in dla.METHODS else model.x0)
    reduce_angles(stepper.p, len(model.periodic), x0)  # the periodic entries in (−π, π] from the start
    return start_trajectory(stepper, x0, request, options)


def collect(model: SkewSystem, integrator: str, traj: Trajectory, options: dict | None = None) -> CellResult:
    """The stored values of a finished (or failed) trajectory."""
    if integrator in dla.METHODS:  # (q, p) → the system's coordinates
        lag = dla.lagrangian(model)
        values = common_values(traj, lambda z: model.to_layout(lag.from_canonical(z)))
    else:
        values = common_values(traj, model.to_layout)
    values.update(observables.values(stored(model, integrator), traj, model, integrator))
    return finish(traj, values)


run = make_run(start, collect)


def warmup() -> None:
    """Compile (or load from the on-disk cache) the driver and the family's kernels."""
    model = rigid_body()
    for name in METHODS:
        req = RunRequest(T=0.2, dt_out=0.1, tol=1e-6) if name == "dopri5_skew" else RunRequest(T=0.2, dt_out=0.1, h=0.1)
        run(model, name, req, {})
    from geosweep.kernels.dg.systems import gearbox

    for name in dla.METHODS:
        run(gearbox("canonical"), name, RunRequest(T=0.2, dt_out=0.1, h=0.1), {})


def cost_per_step(model: SkewSystem, integrator: str) -> float:
    """Rough single-core seconds per step (slicing only): implicit steps pay a finite-difference
    Jacobian, an LU and ~6 iterations."""
    n = model.N
    if integrator in dla.METHODS:
        return 2e-7 + 5e-8 * n * (n if integrator == "i_dla" else 1)
    field = 5e-9 * n * n + 5e-8
    if integrator == "rk4_skew":
        return 4 * field
    if integrator == "dopri5_skew":
        return 4 * 7 * field
    return (n + 8) * field + 3e-10 * n**3 + 2e-7


FAMILY = FamilyDef(
    name="dg",
    diagnostics=diagnostics,
    sizes=sizes,
    run=run,
    warmup=warmup,
    cost_per_step=cost_per_step,
    start=start,
    collect=collect,
    order_error_vars=("max_rel_energy_error",),
    figures=(Figure("dg_invariants", "geosweep.analysis.system_figures:dg_invariants"),),
    observables=stored,
)


def _rk_order(integrator: str) -> int:
    """The order of an RK baseline, from its tableau's record."""
    return rk_tableaux.get(RK_TABLEAUX[integrator]).order


_SOLVE = (
    Param("solver", str, "newton", "1", "simplified Newton (frozen Jacobian) or fixed point",
          choices=("newton", "fixed_point")),
    Param("nl_tol", float, 1e-14, "1", "stop when ‖Δ‖∞ ≤ nl_tol·max(1, ‖x'‖∞)", gt=0.0),
    Param("maxit", int, 50, "1", "iterations before status nonconverged", ge=1, le=10_000),
    BLOWUP,
)  # fmt: skip
#: the links a ts2 chain may have for the discrete gradients (dense (6N)² Jacobian and LU per step)
CHAIN_MAX_LINKS = 60


def _chain_size(model) -> str | None:
    """On the ts2 chain (through geosweep.kernels.chain.dg_bridge): at most CHAIN_MAX_LINKS links."""
    from geosweep.kernels.chain.model import ChainModel

    if isinstance(model, ChainModel) and model.n > CHAIN_MAX_LINKS:
        return (
            f"the discrete gradients run the chain with a dense (6N)² Jacobian: N ≤ {CHAIN_MAX_LINKS} "
            f"(got N = {model.n})"
        )
    return None


def _needs_lagrangian(model) -> str | None:
    if isinstance(model, SkewSystem) and "lagrangian" not in model.info:
        return f"the DLA integrators need a Lagrangian form (q, p) with constraints; {model.name} has none"
    return None


def _itoh_abe_order(model) -> int:
    """2 on an additively separable H (SkewSystem.separable: Itoh–Abe = AVF there), else 1."""
    return 2 if getattr(model, "separable", False) else 1


_ON_CHAIN = {"also": ("ts2",), "applicable": _chain_size}
_S = Param("quad_points", int, 6, "1", "Gauss–Legendre points s (exact for polynomial H of degree ≤ 2s)", ge=1, le=32)

INTEGRATORS = (
    IntegratorDef(
        "dg_avf", "dg", 2,
        "Mean-value (AVF) discrete gradient with S(x̄) (004 eqs. (11), (14)); energy exact up to quadrature.",
        params=(_S,) + _SOLVE, preserves=("energy (up to quadrature)",), **_ON_CHAIN,
    ),
    IntegratorDef(
        "dg_gonzalez", "dg", 2,
        "Gonzalez midpoint discrete gradient with S(x̄) (004 eqs. (12), (14)); GONZALEZ-R on a reduced form, "
        "GONZALEZ-F (multipliers, eq. (15)) on a canonical one. Also runs pendulum_chain (ts2) on its (q, π) form.",
        params=_SOLVE, preserves=("energy",), **_ON_CHAIN,
    ),
    IntegratorDef(
        "dg_itoh_abe", "dg", 1, "Itoh–Abe coordinate-increment discrete gradient with S(x̄) (004 eq. (13)); "
        "order 1, and 2 on an additively separable H (gearbox, sleigh, Suslov, rolling disk, rigid body), where it "
        "equals AVF.", params=_SOLVE, order_on=_itoh_abe_order, preserves=("energy",), **_ON_CHAIN,
    ),
    IntegratorDef(
        "implicit_midpoint", "dg", 2, "Implicit midpoint rule on ẋ = S(x)∇H(x) (baseline; a discrete gradient "
        "method when H is quadratic).", params=_SOLVE, preserves=("quadratic invariants",), **_ON_CHAIN,
    ),
    IntegratorDef(
        "si_dla", "dg", 2,
        "Semi-implicit reversible discrete Lagrange–d'Alembert integrator (004's SI-DLA, our derivation, "
        "geosweep.kernels.dg.dla): trapezoidal discrete Lagrangian, constraint A(q̄)(q' − q)/h = 0 at the "
        "midpoint, only "
        "the multipliers implicit; needs the system's Lagrangian form (nh_quartic, gearbox).",
        params=_SOLVE[1:], applicable=_needs_lagrangian,
    ),
    IntegratorDef(
        "i_dla", "dg", 2,
        "Implicit discrete Lagrange–d'Alembert integrator (004's I-DLA): midpoint discrete Lagrangian, constraint "
        "at the midpoint, Newton on (v, λ); needs the system's Lagrangian form (nh_quartic, gearbox).",
        params=_SOLVE[1:], applicable=_needs_lagrangian,
    ),
    IntegratorDef(
        "rk4_skew", "dg", _rk_order("rk4_skew"), "Classical RK4 on ẋ = S(x)∇H(x) (baseline).", params=(BLOWUP,)
    ),
    IntegratorDef(
        "dopri5_skew", "dg", _rk_order("dopri5_skew"),
        "Variable-step DOPRI5(4) on ẋ = S(x)∇H(x) with the shared controller and dense output; sweep axis tol; "
        "h0 ≤ 0 starts from the driver's starting-step rule.",
        params=ADAPTIVE_PARAMS + (BLOWUP,), adaptive=True,
    ),
)  # fmt: skip
