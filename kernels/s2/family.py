"""The ``s2`` family: what an (S²)ⁿ cell stores and how it runs."""

from __future__ import annotations

from collections.abc import Sequence

from geosweep.kernels import tableaux as rk_tableaux
from geosweep.kernels.core import observables
from geosweep.kernels.core.cells import (
    BLOWUP,
    COMMON_DIAGNOSTICS,
    UNIT_SPHERE_DIAGNOSTICS,
    finish,
    make_run,
    start_trajectory,
)
from geosweep.kernels.core.driver import compile_driver
from geosweep.kernels.core.observables import Observable
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.registry import CellResult, Diagnostic, FamilyDef, IntegratorDef, Param, RunRequest
from geosweep.kernels.s2.integrate import METHODS, _integrate
from geosweep.kernels.s2.model import PotentialType, S2System, compile_potentials
from geosweep.kernels.s2.stepper import (
    _STEP_SIG,
    OBSERVABLES,
    OWN_OBSERVABLES,
    RK_BASELINES,
    STEPS,
    cell_values,
    initial_state,
    make_stepper,
    s2_no_dense,
    s2_observe,
)
from geosweep.kernels.s2.stepper import METHODS as RECORDS
from geosweep.kernels.s2.systems import SYSTEMS  # noqa: F401 - the family's systems, registered with it

_E = "energy"  # placeholder replaced by the system's energy units in the store attrs
_EVERY = "every step"
STATE_LABELS = ("q_x", "q_y", "q_z", "w_x", "w_y", "w_z")

#: the family's own stored diagnostics, from its observables' declarations
OWN = observables.diagnostics(OWN_OBSERVABLES)


def diagnostics(model: S2System) -> tuple[Diagnostic, ...]:
    return COMMON_DIAGNOSTICS + UNIT_SPHERE_DIAGNOSTICS + OWN


def sizes(model: S2System) -> dict[str, int]:
    return {"body": model.n, "component": 3, "state": 6}


def start(model: S2System, integrator: str, request: RunRequest, options: dict) -> Trajectory:
    """A resumable trajectory of one cell (``options``: tol, maxit for implicit_vi; blowup;
    ``threads``, the run's threads per cell)."""
    if request.adaptive:
        raise ValueError(f"{integrator} is a fixed-step method: the request needs h, not tol")
    stepper = make_stepper(
        model, integrator, tol=float(options.get("tol", 1e-14)), maxit=int(options.get("maxit", 50)),
        threads=int(options.get("threads", 1)),
    )  # fmt: skip
    q, w = model.initial_state()
    return start_trajectory(stepper, initial_state(model, q, w), request, options)


def collect(model: S2System, integrator: str, traj: Trajectory, options: dict | None = None) -> CellResult:
    """The stored values of a finished (or failed) trajectory."""
    values = cell_values(model, integrator, traj)
    return finish(traj, values)


run = make_run(start, collect)


def warmup() -> None:
    """Compile (or load from cache) everything of the family: every built-in potential, every
    method kind and the driver, for diagonal and coupled M."""
    from geosweep.kernels.systems.catalogue import double_spherical_pendulum, spring_pendula

    compile_potentials()
    for model, methods in ((spring_pendula(), METHODS), (double_spherical_pendulum(), ["implicit_vi", "rk4"])):
        for m in methods:
            if m == "explicit_vi" and not model.is_diagonal:
                continue
            _integrate(model, m, 1e-3, 2, 1)


def warm_for(models: Sequence[S2System], integrators: Sequence[str]) -> None:
    """Compile (or load from cache) only what these models × integrators run: their potentials,
    the step functions of their method kinds, the observation and the driver (a cold demo then
    skips the implicit VI's LU solve and the other systems' potentials)."""
    compile_driver(PotentialType)
    for kernel in (s2_observe, s2_no_dense):  # explicit signatures: compiled on first use, so here
        kernel.compile_declared()
    potentials = {id(m.potential): m.potential for m in models}.values()
    compile_potentials(potentials)  # with their threaded copies (a run may give a cell several threads)
    for m in models[:1]:
        m.initial_state()  # its normalisation kernel
    for kind in {RECORDS[i][0] for i in integrators if i in RECORDS}:
        STEPS[kind].compile(_STEP_SIG)


def _evals_per_step(integrator: str) -> int:
    """Potential gradients per step: one for the VIs, a baseline's tableau's stages (those added at
    run time included)."""
    tab = RK_BASELINES.get(integrator)
    return rk_tableaux.get(tab[0]).stages if tab else 1 if integrator.endswith("_vi") else 4


def cost_per_step(model: S2System, integrator: str) -> float:
    """Rough seconds per step on one core (used only to size slices)."""
    n = model.n
    grad = 2.5e-9 * n * n + 2e-8 * n
    evals = _evals_per_step(integrator)
    cost = evals * grad
    if integrator == "implicit_vi":
        cost += 6 * (3 * n) ** 3 / 3 * 1.5e-9
    elif not model.is_diagonal:
        cost += evals * (3 * n) ** 3 / 3 * 1.5e-9
    return cost + 1e-7


def stored(model: S2System, integrator: str) -> tuple[Observable, ...]:
    """The observables an (S²)ⁿ cell stores from (every method: the stepper's :data:`OBSERVABLES`)."""
    return OBSERVABLES


FAMILY = FamilyDef(
    name="s2",
    diagnostics=diagnostics,
    sizes=sizes,
    run=run,
    warmup=warmup,
    warm_for=warm_for,
    cost_per_step=cost_per_step,
    state_labels=STATE_LABELS,
    start=start,
    collect=collect,
    order_error_vars=("mean_abs_energy_error", "max_abs_energy_error"),
    observables=stored,
)


def _needs_diagonal(model: S2System) -> str | None:
    if not model.is_diagonal:
        return "explicit_vi needs a diagonal inertia matrix M (this system couples its bodies); use implicit_vi"
    return None


#: what the variational integrators keep (000): the symplectic form, the momentum map of a symmetry of V, |q_i| = 1
_UNIT = ("|q_i| = 1",)
_VI_KEEPS = ("symplectic", "momentum map J (symmetric V)", *_UNIT)

#: the RK baselines' docs (their tableaux and projection: :data:`RK_BASELINES`)
_RK_DOC = {
    "rk2": "Explicit midpoint on the ambient ODE in R⁶ⁿ (baseline).",
    "rk2_proj": "Explicit midpoint, then q_i ← q_i/|q_i| (baseline).",
    "rk4": "Classical RK4 on the ambient ODE in R⁶ⁿ (baseline).",
    "rk4_proj": "Classical RK4, then q_i ← q_i/|q_i| each step (baseline).",
}


def _rk_def(name: str, tableau: str, project: bool, doc: str) -> IntegratorDef:
    """The declaration of the RK baseline ``name``: tableau ``tableau``'s order, the energy guard, and
    |q_i| = 1 kept when it projects."""
    return IntegratorDef(
        name, "s2", rk_tableaux.get(tableau).order, doc, params=(BLOWUP,), preserves=_UNIT if project else ()
    )


def add_rk_baseline(name: str, tableau: str, project: bool) -> IntegratorDef:
    """Offer the explicit tableau ``tableau`` (a record of :data:`geosweep.kernels.tableaux.TABLEAUX`)
    as the (S²)ⁿ Runge–Kutta baseline ``name`` on the ambient ODE in R⁶ⁿ, with the projection
    q_i ← q_i/|q_i| after each step when ``project``; fixed step (an embedded formula is not used).
    Registers it and returns its declaration (:func:`geosweep.methods.register` calls this)."""
    from geosweep.kernels.registry import register_integrator
    from geosweep.kernels.s2 import stepper

    t = rk_tableaux.get(tableau)  # every record is explicit (Tableau checks A)
    RK_BASELINES[name] = (tableau, project)
    RECORDS[name] = stepper._rk_method(tableau, project)
    METHODS.setdefault(name, len(METHODS))  # the kernels-alone run's method names
    then = ", then q_i ← q_i/|q_i| each step" if project else ""
    doc = f"{t.name} tableau on the ambient ODE in R⁶ⁿ{then} (baseline)."
    return register_integrator(_rk_def(name, tableau, project, doc))


def remove_rk_baseline(name: str) -> None:
    """Undo :func:`add_rk_baseline` (the built-in baselines of :data:`_RK_DOC` stay)."""
    from geosweep.kernels.registry import INTEGRATORS

    if name in _RK_DOC:
        raise ValueError(f"{name!r} is a built-in baseline")
    for table in (RK_BASELINES, RECORDS, METHODS):
        table.pop(name, None)
    if name in INTEGRATORS and INTEGRATORS[name].family == "s2":
        del INTEGRATORS[name]


INTEGRATORS = (
    IntegratorDef(
        "explicit_vi",
        "s2",
        2,
        "Explicit variational integrator on (S²)ⁿ for diagonal M (000 Cor. 3): symplectic, "
        "momentum preserving, |q_i| = 1 to round-off.",
        params=(BLOWUP,),
        applicable=_needs_diagonal,
        preserves=_VI_KEEPS,
    ),
    IntegratorDef(
        "implicit_vi",
        "s2",
        2,
        "Variational integrator for coupled M (000 (22)-(28)): Cayley update, fixed point with "
        "a dense LU solve per iteration. Also applies to the pendulum chain (ts2).",
        params=(
            Param("tol", float, 1e-14, "1", "fixed-point stop: max|Δf| ≤ tol·max(1, max|f|)", gt=0.0),
            Param("maxit", int, 50, "1", "iterations before status NONCONVERGED", ge=1, le=1_000_000),
            BLOWUP,
        ),
        also=("ts2",),
        preserves=_VI_KEEPS,
    ),
    *(_rk_def(name, tab, project, _RK_DOC[name]) for name, (tab, project) in RK_BASELINES.items()),
)
