"""The ``ts2`` family: the N-link 3D pendulum on (TS²)^N with Lie group and ambient methods.

Fixed-step integrators run at the request's ``h``. Adaptive integrators (``rkmk45``,
``rkmk853``, ``dopri5_ambient``, ``dop853_ambient``) run at the request's ``tol`` (the sweep's
``tol`` axis) with the controller options ``theta``, ``exponent``, ``h0``. Samples land on
``t_k = k·Δt_out`` through the methods' **dense output** (continuous Dormand–Prince extensions,
order 4 for the 5(4) pairs and 7 for DOP853; for RKMK applied to the dexp⁻¹ equation and mapped
by the group action, so samples stay on (TS²)^N); the step
sequence is therefore independent of the output grid, and only the last step is clipped to
hit T (see :mod:`geosweep.kernels.core.driver` and :mod:`geosweep.kernels.lie.stepper`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from geosweep.kernels import linalg as la
from geosweep.kernels.chain.integrate import _integrate, chain_stepper, scipy_rhs
from geosweep.kernels.chain.model import ChainModel, build_chain, chain_params
from geosweep.kernels.core import layout as L_
from geosweep.kernels.core import observables
from geosweep.kernels.core.cells import (
    ADAPTIVE_PARAMS,
    BLOWUP,
    COMMON_DIAGNOSTICS,
    REFERENCE_PARAMS,
    UNIT_SPHERE_OBSERVABLES,
    blocks_to_bodies,
    common_values,
    common_values_many,
    finish,
    make_run,
    start_trajectory,
)
from geosweep.kernels.core.observables import Derived, Max, Observable, RunValues, Samples, with_outputs
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.lie import tableaux
from geosweep.kernels.lie.methods import LieAction, offer
from geosweep.kernels.lie.stepper import OBSERVABLES as LIE_OBSERVABLES
from geosweep.kernels.lie.stepper import dense_evals
from geosweep.kernels.lie.stepper import initial_state as lie_initial_state
from geosweep.kernels.registry import CellResult, Diagnostic, FamilyDef, Param, RunRequest, SystemDef

#: the dg family's integrators that also run here (on the chain's Lie–Poisson form, geosweep.kernels.chain.dg_bridge)
DG_ON_CHAIN = ("dg_avf", "dg_gonzalez", "dg_itoh_abe", "implicit_midpoint")
_E = "energy"
_EVERY = "every step"
STATE_LABELS = ("q_x", "q_y", "q_z", "w_x", "w_y", "w_z")

_AM = "angular momentum"
VERTICAL_J = Diagnostic("J", ("time",), _AM, "vertical angular momentum e3·L about the pivot")
MOMENTUM = Diagnostic(
    "momentum",
    ("time", "component"),
    _AM,
    "angular momentum L = Σ m_k x_k × v_k about the pivot (all of it conserved only when g = 0)",
)
MOMENTUM_ERROR = Diagnostic("momentum_error", ("time",), _AM, "|L − L0| when g = 0 (L conserved); NaN otherwise")
MAX_J_ERROR = Diagnostic("max_J_error", (), _AM, "max |J − J0| (J = e3·L)", computed_over=_EVERY)
MAX_MOMENTUM_ERROR = Diagnostic(
    "max_momentum_error",
    (),
    _AM,
    "max |L − L0| when g = 0 (L conserved); NaN otherwise",
    computed_over=_EVERY,
)
CASIMIR_ERROR = Diagnostic(
    "casimir_error",
    ("time",),
    "1",
    "discrete gradients on the (q, π) form: max over the Casimirs |q_i|² − 1 and q_i·π_i of |C(t) − C(0)| "
    "(max over links); NaN for the other methods",
)
MAX_CASIMIR_ERROR = Diagnostic(
    "max_casimir_error",
    (),
    "1",
    "max of casimir_error over every step; NaN for the non-dg methods",
    computed_over=_EVERY,
)
NEWTON_ITERATIONS_MEAN = Diagnostic(
    "newton_iterations_mean",
    (),
    "1",
    "mean nonlinear iterations per step (dg Newton, implicit_vi fixed point; 0 for explicit methods)",
    computed_over=_EVERY,
)
GLOBAL_ERROR = Diagnostic(
    "global_error", (), "1",
    "‖y(T) − y_ref(T)‖₂ in R^{6N} against DOP853 (rtol = atol = ref_tol) on the dense RHS; "
    "NaN unless option global_error is true",
)  # fmt: skip


def _momentum(traj: Trajectory, obs: Observable) -> np.ndarray:
    j = traj.stepper.obs_names.index(obs.columns[0])
    return traj.out[:, j : j + 3].copy()


def _momentum_error(traj: Trajectory, model: ChainModel, integrator: str, obs: Observable) -> np.ndarray:
    """|L − L0| at every sample when g = 0 (L conserved), else NaN."""
    if model.g != 0.0:
        return np.full(traj.out.shape[0], np.nan)
    L = _momentum(traj, obs)
    with np.errstate(invalid="ignore"):
        return np.linalg.norm(L - L[0], axis=1)


def _max_momentum_error(traj: Trajectory, model: ChainModel, integrator: str, obs: Observable) -> np.float64:
    """Lie group and dg methods: the running max of |L − L0| (DEVNORM3) when g = 0."""
    return np.float64(traj.reduced(obs.columns[0]) if model.g == 0.0 else np.nan)


def _momentum_error_many(stack, models, integrator: str, obs: Observable) -> np.ndarray:
    """:func:`_momentum_error` of every row of a stack."""
    j = stack.column(obs.columns[0])
    L = stack.out[:, :, j : j + 3].copy()
    conserved = np.array([m.g == 0.0 for m in models])
    with np.errstate(invalid="ignore"):
        drift = np.linalg.norm(L - L[:, :1, :], axis=-1)
    return np.where(conserved[:, None], drift, np.nan)


def _max_momentum_error_many(stack, models, integrator: str, obs: Observable) -> np.ndarray:
    conserved = np.array([m.g == 0.0 for m in models])
    return np.where(conserved, stack.reduced(obs.columns[0]), np.nan)


def _max_momentum_error_vi(traj: Trajectory, model: ChainModel, integrator: str, obs: Observable) -> np.float64:
    """implicit_vi: the (S²)ⁿ stepper reduces no |L − L0| for the chain; the max over the samples."""
    merr = _momentum_error(traj, model, integrator, obs)
    return np.float64(float(np.nanmax(merr)) if model.g == 0.0 and np.isfinite(merr).any() else np.nan)


def _nan_series(traj: Trajectory, model: ChainModel, integrator: str, obs: Observable) -> np.ndarray:
    return np.full(traj.out.shape[0], np.nan)


def _nan(traj: Trajectory, model: ChainModel, integrator: str, obs: Observable) -> np.float64:
    return np.float64(np.nan)


def _nan_series_many(stack, models, integrator: str, obs: Observable) -> np.ndarray:
    return np.full(stack.out.shape[:2], np.nan)


def _nan_many(stack, models, integrator: str, obs: Observable) -> np.ndarray:
    return np.full(len(stack), np.nan)


def _newton_iterations_mean(traj: Trajectory, model: ChainModel, integrator: str, obs: Observable) -> np.float64:
    c = traj.costs()
    return np.float64(np.int64(c["solver_iterations"]) / max(int(c["steps"]), 1))


def _newton_iterations_mean_many(stack, models, integrator: str, obs: Observable) -> np.ndarray:
    return stack.info[:, L_.I_ITERS] / np.maximum(stack.info[:, L_.I_K], 1)


def _global_error(traj: Trajectory, model: ChainModel, integrator: str, obs: Observable, options: dict) -> np.float64:
    """‖y(T) − y_ref(T)‖ of the stored final state when ``options["global_error"]`` (else NaN)."""
    if not (bool(options.get("global_error", False)) and traj.status == 0):
        return np.float64(np.nan)
    y = to_bodies(model, integrator, traj)(traj.S[: traj.stepper.n_check])
    return np.float64(la.norm(np.ravel(y - reference_solution(model, traj.time, float(options.get("ref_tol", 1e-13))))))


def _global_error_many(stack, models, integrator: str, obs: Observable, options: dict) -> np.ndarray:
    """:func:`_global_error` of every row (NaN unless ``options["global_error"]``; then row by row)."""
    if bool(options.get("global_error", False)):
        return np.array([_global_error(t, m, integrator, obs, options) for t, m in zip(stack.trajs, models)])
    return np.full(len(stack), np.nan)


_SPHERE = {o.name: o.outputs for o in UNIT_SPHERE_OBSERVABLES}  # unit_error, tangency_error
_SHARED = RunValues(
    "chain",
    outputs=(
        Derived(NEWTON_ITERATIONS_MEAN, fn=_newton_iterations_mean, fn_many=_newton_iterations_mean_many),
        Derived(GLOBAL_ERROR, fn=_global_error, options=True, fn_many=_global_error_many),
    ),
)
_ON_L = (  # the Lie stepper's (and the dg form's) angular momentum columns L_x, L_y, L_z
    Samples(VERTICAL_J, column=2),
    Samples(MOMENTUM),
    Derived(MOMENTUM_ERROR, rank=0, fn=_momentum_error, fn_many=_momentum_error_many),
    Max(MAX_J_ERROR, column=2),
    Derived(MAX_MOMENTUM_ERROR, fn=_max_momentum_error, fn_many=_max_momentum_error_many),
)
_NO_CASIMIR = RunValues(
    "no_casimir",
    outputs=(
        Derived(CASIMIR_ERROR, rank=0, fn=_nan_series, fn_many=_nan_series_many),
        Derived(MAX_CASIMIR_ERROR, fn=_nan, fn_many=_nan_many),
    ),
)
#: What a chain cell run by a Lie group or ambient method stores (on the Lie stepper's columns).
#: The discrete gradients (the (q, π) form's columns, with its Casimirs) and implicit_vi (the
#: (S²)ⁿ stepper's, J_x..J_z and J_axis) store the same names: :func:`stored`.
STORED_LIE: tuple[Observable, ...] = (
    *with_outputs(LIE_OBSERVABLES, {"L": _ON_L, **_SPHERE}), _NO_CASIMIR, _SHARED,
)  # fmt: skip


@functools.cache
def stored(integrator: str) -> tuple[Observable, ...]:
    """The declaration of what a cell run by ``integrator`` stores: :data:`STORED_LIE`, or the
    same names from the discrete gradients' or the (S²)ⁿ variational integrator's columns (their
    modules are imported only when such a cell runs)."""
    if integrator in DG_ON_CHAIN:
        from geosweep.kernels.chain import dg_bridge
        from geosweep.kernels.dg.steppers import casimir_error, max_casimir_error

        casimir = (
            Derived(CASIMIR_ERROR, rank=0, fn=casimir_error),
            Derived(MAX_CASIMIR_ERROR, fn=max_casimir_error),
        )
        return (*with_outputs(dg_bridge.OBSERVABLES, {"L": _ON_L, **_SPHERE, "casimir": casimir}), _SHARED)
    if integrator == "implicit_vi":
        from geosweep.kernels.s2.stepper import OBSERVABLES as S2_OBSERVABLES

        momentum = (
            Samples(VERTICAL_J, column=2),
            Samples(MOMENTUM),
            Derived(MOMENTUM_ERROR, rank=0, fn=_momentum_error),
            Derived(MAX_MOMENTUM_ERROR, fn=_max_momentum_error_vi),
        )
        vi = with_outputs(S2_OBSERVABLES, {**_SPHERE, "momentum": momentum, "J_axis": (Max(MAX_J_ERROR),)})
        return (*vi, _NO_CASIMIR, _SHARED)
    return STORED_LIE


def thin_carries(model: ChainModel, integrator: str) -> bool:
    """Whether a cell's stored values read its samples row by row (and row 0: the deviations from
    t = 0) — every method but implicit_vi, whose ``max_momentum_error`` is a max over the samples."""
    return integrator != "implicit_vi"


def diagnostics(model: ChainModel) -> tuple[Diagnostic, ...]:
    return COMMON_DIAGNOSTICS + observables.diagnostics(STORED_LIE, model)


def to_bodies(model: ChainModel, integrator: str, traj: Trajectory):
    """The stepper's state prefix → the stored (N, 6) rows (q_i, ω_i)."""
    n = model.n
    if integrator in DG_ON_CHAIN:
        from geosweep.kernels.chain import dg_bridge

        return dg_bridge.to_bodies(model, traj.stepper.p[dg_bridge.P_HEAD :])
    if integrator == "implicit_vi":
        return blocks_to_bodies(n, 2)
    return lambda x: np.ascontiguousarray(x.reshape(n, 6))


def sizes(model: ChainModel) -> dict[str, int]:
    return {"body": model.n, "component": 3, "state": 6}


def reference_solution(model: ChainModel, T: float, tol: float = 1e-13) -> np.ndarray:
    """y(T) (N, 6) from scipy DOP853 (rtol = atol = ``tol``) on the dense ambient RHS."""
    from scipy.integrate import solve_ivp

    sol = solve_ivp(scipy_rhs(model, dense=True), (0.0, T), model.y0.ravel(), method="DOP853", rtol=tol, atol=tol)
    if not sol.success:
        raise RuntimeError(f"reference integration failed: {sol.message}")
    return sol.y[:, -1].reshape(model.n, 6)


def start(model: ChainModel, integrator: str, request: RunRequest, options: dict) -> Trajectory:
    """A resumable trajectory of one cell. Lie group and ambient methods run on (TS²)ᴺ with
    SE(3)ᴺ acting; ``implicit_vi`` runs the (S²)ⁿ variational integrator on the chain's (S²)ⁿ form;
    the discrete gradients of the dg family run on its Lie–Poisson form (:mod:`geosweep.kernels.chain.dg_bridge`)."""
    if integrator in DG_ON_CHAIN:
        from geosweep.kernels.chain import dg_bridge

        return dg_bridge.start(model, integrator, request, options)
    if integrator == "implicit_vi":
        from geosweep.kernels.chain.s2_bridge import chain_as_s2
        from geosweep.kernels.s2 import stepper as s2

        system = chain_as_s2(model)
        stepper = s2.make_stepper(
            system, "implicit_vi", tol=float(options.get("tol", 1e-14)), maxit=int(options.get("maxit", 50))
        )
        q, w = system.initial_state()
        return start_trajectory(stepper, s2.initial_state(system, q, w), request, options)
    if LIE.find(integrator) is None:
        raise ValueError(f"unknown chain integrator {integrator!r}; choose from {sorted(LIE.methods())}")
    idef = LIE.integrator(LIE.method(integrator))
    options = {**{q.name: q.default for q in idef.params}, **options}  # e.g. DOP853's exponent 1/8
    if idef.adaptive != request.adaptive:
        want = "tol" if idef.adaptive else "h"
        raise ValueError(f"{integrator} needs a request with {want}")
    stepper = chain_stepper(model, integrator, request.adaptive, str(options.get("ambient_rhs", "dense")))
    return start_trajectory(stepper, lie_initial_state(model.y0), request, options)


def collect(model: ChainModel, integrator: str, traj: Trajectory, options: dict | None = None) -> CellResult:
    """The stored values of a finished (or failed) trajectory; ``options["global_error"]`` adds a
    DOP853 reference at T (costly; not part of the cell's wall time)."""
    options = options or {}
    values = common_values(traj, to_bodies(model, integrator, traj))
    if integrator != "implicit_vi" and integrator not in DG_ON_CHAIN:  # DOP853's dense-only stages
        values["f_evals"] = np.int64(values["f_evals"] + dense_evals(traj.S))  # are counted in the state
    values.update(observables.values(stored(integrator), traj, model, integrator, options))
    return finish(traj, values)


def batches(model: ChainModel, integrator: str, options: dict) -> bool:
    """Whether cells of ``integrator`` can be collected together (:func:`collect_many`): the Lie group
    and ambient methods of SE(3)ᴺ on (TS²)ᴺ without a reference solution."""
    return LIE.find(integrator) is not None and not bool(options.get("global_error", False))


def start_many(models: Sequence[ChainModel], integrator: str, request: RunRequest, options: dict) -> list:
    """:func:`start` of every model for one integrator of :func:`batches`, as fresh stacks (one per chain
    length; :func:`geosweep.kernels.core.batch.fresh_stack`): one stepper per stack, each row's own
    initial state and parameter vector (the only parts of a chain's stepper that depend on the model)."""
    from geosweep.kernels.core.batch import fresh_stack
    from geosweep.kernels.lie.stepper import P_HEAD

    by_n: dict[int, list[int]] = {}
    for i, m in enumerate(models):
        by_n.setdefault(m.n, []).append(i)
    stacks = []
    for index in by_n.values():
        template = start(models[index[0]], integrator, request, options)
        head = template.stepper.p[:P_HEAD]
        S0 = np.stack([lie_initial_state(models[i].y0) for i in index])
        p = np.stack([np.concatenate([head, models[i].params]) for i in index])
        stacks.append(fresh_stack(template, S0, p, index))
    return stacks


def collect_many(models: Sequence[ChainModel], integrator: str, stack, options: dict | None = None) -> dict:
    """:func:`collect`'s values of every row of a :class:`~geosweep.kernels.core.batch.Stack` of cells of
    ``integrator`` (one of :func:`batches`; ``models``: the rows'), each with a leading row axis,
    bitwise each row's own."""
    options = options or {}
    n = models[0].n
    values = common_values_many(stack, lambda x: x.reshape(len(x), n, 6))
    values["f_evals"] = values["f_evals"] + np.maximum(stack.S[:, -1] - 1.0, 0.0).astype(np.int64)
    values.update(observables.values_many(stored(integrator), stack, models, integrator, options))
    return values


run = make_run(start, collect)


def warmup() -> None:
    """Compile (or load from the on-disk cache) the driver and the chain kernels."""
    model = build_chain(2)
    _integrate(model, "rkmk4", 1e-3, 2, 1)
    _integrate(model, "rk4_ambient", 1e-3, 2, 1)
    _integrate(model, "rkmk45", 1e-3, 2, adaptive=True, h0=1e-3)
    from geosweep.kernels.core.batch import warm_rows  # cells computed together (geosweep.sweeps.together)

    for name, request in (
        ("rkmk4", RunRequest(T=2e-3, dt_out=1e-3, h=1e-3)),
        ("rkmk45", RunRequest(T=2e-3, dt_out=1e-3, tol=1e-6)),
    ):
        warm_rows(start(model, name, request, {}))


def _lie_step_cost(model: ChainModel, m: tableaux.Method) -> float:
    """Seconds per step of a method of the tableaux: per evaluation O(N) RHS + exp/dexp⁻¹ (ambient:
    the dense O(N³) formula); adaptive: per output interval, assuming about 4 steps per interval."""
    n = model.n
    if m.kind == tableaux.AMBIENT:
        per_eval = 3e-9 * (3 * n) ** 3 + 5e-8 * n
    else:
        per_eval = 6e-8 * n + 1e-7  # O(N) RHS + exp/dexp⁻¹ per stage
    cost = m.evals_per_step * per_eval + 1e-7
    return cost * (4 if m.adaptive else 1)


def cost_per_step(model: ChainModel, integrator: str) -> float:
    """Rough seconds per step on one core (for slicing). Adaptive: per output interval, assuming
    about 4 steps per interval."""
    n = model.n
    if integrator in DG_ON_CHAIN:
        from geosweep.kernels.chain import dg_bridge

        return dg_bridge.cost_per_step(model, integrator)
    if integrator == "implicit_vi":
        return 6 * (3 * n) ** 3 / 3 * 1.5e-9 + 1e-6
    return LIE.cost_per_step(model, integrator)


FAMILY = FamilyDef(
    name="ts2",
    diagnostics=diagnostics,
    sizes=sizes,
    run=run,
    warmup=warmup,
    cost_per_step=cost_per_step,
    state_labels=STATE_LABELS,
    start=start,
    collect=collect,
    batches=batches,
    start_many=start_many,
    collect_many=collect_many,
    order_error_vars=("global_error", "max_rel_energy_error"),
    observables=lambda model, integrator: stored(integrator),
    thin_carries=thin_carries,
)

_REF = (BLOWUP, *REFERENCE_PARAMS)
_AMB = (
    Param(
        "ambient_rhs",
        str,
        "dense",
        "1",
        "ambient RHS: dense formula of spec §2 or the O(N) path",
        choices=("dense", "fast"),
    ),
)
#: every method of geosweep.kernels.lie.tableaux: SE(3)ᴺ acting on (TS²)ᴺ, the ambient ones on R^{6N}
LIE = LieAction(
    family="ts2",
    prefix="",
    group="SE(3)ᴺ acting on (TS²)ᴺ",
    ambient="ambient ODE in R^{6N}",
    params=_REF,
    adaptive_params=ADAPTIVE_PARAMS,
    step_cost=_lie_step_cost,
    ambient_params=_AMB,
    preserves=("|x_k| = 1", "x_k·v_k = 0"),
)
INTEGRATORS = offer(LIE)


def _build(
    N: int, masses: str, mass_seed: int, length_mode: str, L_tot: float, g: float, ic: str, kappa: float, seed: int
) -> ChainModel:
    return build_chain(
        N,
        masses=masses,
        length_mode=length_mode,
        L_tot=L_tot,
        g=g,
        ic=ic,
        kappa=kappa,
        seed=seed,
        mass_seed=mass_seed,
    )


SYSTEMS = (
    SystemDef(
        name="pendulum_chain",
        family="ts2",
        doc="N-link 3D pendulum on (TS²)^N (001 §5): point masses on massless rigid links from a "
        "fixed pivot, gravity along −e3 (e3 up). Conserves E and J = e3·L (all of L when g = 0).",
        params=chain_params(2, 100_000),
        build=_build,
        time_units="s",
        energy_units="J",
        example={"h": [0.01, 0.005], "T": 3.0, "dt_out": 0.01},
    ),
)
