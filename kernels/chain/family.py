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

import numpy as np

from geosweep.kernels.chain.integrate import chain_stepper, integrate, scipy_rhs
from geosweep.kernels.chain.model import ChainModel, build_chain, chain_params
from geosweep.kernels.core.cells import (
    ADAPTIVE_PARAMS,
    BLOWUP,
    COMMON_DIAGNOSTICS,
    REFERENCE_PARAMS,
    UNIT_SPHERE_DIAGNOSTICS,
    blocks_to_bodies,
    common_values,
    finish,
    make_run,
    start_trajectory,
    unit_sphere_values,
)
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.lie import tableaux
from geosweep.kernels.lie.methods import LieAction
from geosweep.kernels.lie.stepper import dense_evals
from geosweep.kernels.lie.stepper import initial_state as lie_initial_state
from geosweep.kernels.registry import CellResult, Diagnostic, FamilyDef, Param, RunRequest, SystemDef

#: the dg family's integrators that also run here (on the chain's Lie–Poisson form, geosweep.kernels.chain.dg_bridge)
DG_ON_CHAIN = ("dg_avf", "dg_gonzalez", "dg_itoh_abe", "implicit_midpoint")
_E = "energy"
_EVERY = "every step"
STATE_LABELS = ("q_x", "q_y", "q_z", "w_x", "w_y", "w_z")

OWN = (
    Diagnostic("J", ("time",), "angular momentum", "vertical angular momentum e3·L about the pivot"),
    Diagnostic(
        "momentum",
        ("time", "component"),
        "angular momentum",
        "angular momentum L = Σ m_k x_k × v_k about the pivot (all of it conserved only when g = 0)",
    ),
    Diagnostic("momentum_error", ("time",), "angular momentum", "|L − L0| when g = 0 (L conserved); NaN otherwise"),
    Diagnostic("max_J_error", (), "angular momentum", "max |J − J0| (J = e3·L)", computed_over=_EVERY),
    Diagnostic(
        "max_momentum_error", (), "angular momentum", "max |L − L0| when g = 0 (L conserved); NaN otherwise",
        computed_over=_EVERY,
    ),
    Diagnostic(
        "casimir_error", ("time",), "1",
        "discrete gradients on the (q, π) form: max over the Casimirs |q_i|² − 1 and q_i·π_i of |C(t) − C(0)| "
        "(max over links); NaN for the other methods",
    ),
    Diagnostic(
        "max_casimir_error", (), "1", "max of casimir_error over every step; NaN for the non-dg methods",
        computed_over=_EVERY,
    ),
    Diagnostic(
        "newton_iterations_mean", (), "1",
        "mean nonlinear iterations per step (dg Newton, implicit_vi fixed point; 0 for explicit methods)",
        computed_over=_EVERY,
    ),
    Diagnostic(
        "global_error", (), "1",
        "‖y(T) − y_ref(T)‖₂ in R^{6N} against DOP853 (rtol = atol = ref_tol) on the dense RHS; "
        "NaN unless option global_error is true",
    ),
)  # fmt: skip


def diagnostics(model: ChainModel) -> tuple[Diagnostic, ...]:
    return COMMON_DIAGNOSTICS + UNIT_SPHERE_DIAGNOSTICS + OWN


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
    idef = _BY_NAME[integrator]
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
    n = model.n
    obs = traj.stepper.obs_names
    dg = integrator in DG_ON_CHAIN
    if dg:  # the (q, π) form's columns, observed like the Lie group methods' (geosweep.kernels.chain.dg_bridge)
        from geosweep.kernels.chain import dg_bridge

        values = common_values(traj, dg_bridge.to_bodies(model, traj.stepper.p[dg_bridge.P_HEAD :]))
        values.update(dg_bridge.casimir_values(traj))
        L = traj.out[:, obs.index("L_x") : obs.index("L_x") + 3].copy()
        max_J = traj.reduced("L_z")
        max_L = traj.reduced("L_x")
    elif integrator == "implicit_vi":  # the (S²)ⁿ stepper's observation columns
        values = common_values(traj, blocks_to_bodies(n, 2))
        L = traj.out[:, obs.index("J_x") : obs.index("J_x") + 3].copy()
        max_J = traj.reduced("J_axis")
        max_L = np.nan
    else:
        values = common_values(traj, lambda x: np.ascontiguousarray(x.reshape(n, 6)))
        L = traj.out[:, obs.index("L_x") : obs.index("L_x") + 3].copy()
        max_J = traj.reduced("L_z")
        max_L = traj.reduced("L_x")
    with np.errstate(invalid="ignore"):
        merr = np.linalg.norm(L - L[0], axis=1) if model.g == 0.0 else np.full(len(L), np.nan)
    if model.g == 0.0 and integrator == "implicit_vi":
        max_L = float(np.nanmax(merr)) if np.isfinite(merr).any() else np.nan  # the VI's view: over samples
    gerr = np.nan
    if bool(options.get("global_error", False)) and traj.status == 0:
        y = values["final_state"]
        gerr = float(np.linalg.norm(y - reference_solution(model, traj.time, float(options.get("ref_tol", 1e-13)))))
    if not dg:
        values["casimir_error"] = np.full(traj.out.shape[0], np.nan)
        values["max_casimir_error"] = np.float64(np.nan)
    values["newton_iterations_mean"] = np.float64(values["solver_iterations"] / max(int(values["steps"]), 1))
    if integrator != "implicit_vi" and not dg:  # DOP853's dense-only stages are counted in the state
        values["f_evals"] = np.int64(values["f_evals"] + dense_evals(traj.S))
    values.update(unit_sphere_values(traj))
    values.update(
        J=L[:, 2].copy(),
        momentum=L,
        momentum_error=merr,
        max_J_error=np.float64(max_J),
        max_momentum_error=np.float64(max_L if model.g == 0.0 else np.nan),
        global_error=np.float64(gerr),
    )
    return finish(traj, values)


run = make_run(start, collect)


def warmup() -> None:
    """Compile (or load from the on-disk cache) the driver and the chain kernels."""
    model = build_chain(2)
    integrate(model, "rkmk4", 1e-3, 2, 1)
    integrate(model, "rk4_ambient", 1e-3, 2, 1)
    integrate(model, "rkmk45", 1e-3, 2, adaptive=True, h0=1e-3)


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
    order_error_vars=("global_error", "max_rel_energy_error"),
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
)
INTEGRATORS = LIE.integrators()
_BY_NAME = {i.name: i for i in INTEGRATORS}


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
