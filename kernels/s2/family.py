"""The ``s2`` family: what an (S²)ⁿ cell stores and how it runs."""

from __future__ import annotations

import numpy as np

from kernels.registry import CellResult, Diagnostic, FamilyDef, IntegratorDef, Param
from kernels.s2.integrate import METHODS, integrate
from kernels.s2.model import S2System

_E = "energy"  # placeholder replaced by the system's energy units in the store attrs

TIME_SERIES = (
    Diagnostic("energy", ("time",), _E, "total energy E = T + V"),
    Diagnostic("energy_error", ("time",), _E, "energy error E(t) − E(0)"),
    Diagnostic("unit_error", ("time",), "1", "unit-length error max_i |sqrt(q_i·q_i) − 1|"),
    Diagnostic("tangency_error", ("time",), "1", "tangency error max_i |q_i·ω_i|"),
    Diagnostic("momentum", ("time", "component"), "angular momentum", "momentum map J = Σ π_i"),
    Diagnostic(
        "momentum_error",
        ("time",),
        "angular momentum",
        "momentum error |J − J0| (full symmetry) or |a·(J − J0)| (axis); NaN if not conserved",
    ),
)
SUMMARIES = (
    Diagnostic("E0", (), _E, "initial energy"),
    Diagnostic("mean_abs_energy_error", (), _E, "time mean of |E_k − E_0| over every step k = 0..N"),
    Diagnostic("max_abs_energy_error", (), _E, "max_k |E_k − E_0| over every step"),
    Diagnostic("max_rel_energy_error", (), "1", "max_k |E_k − E_0| / |E_0|"),
    Diagnostic("energy_drift_slope", (), _E + " / time", "least-squares slope of E_k − E_0 against t_k"),
    Diagnostic("mean_unit_error", (), "1", "time mean of the unit-length error"),
    Diagnostic("max_unit_error", (), "1", "max of the unit-length error over every step"),
    Diagnostic("max_tangency_error", (), "1", "max of the tangency error over every step"),
    Diagnostic("max_momentum_error", (), "angular momentum", "max momentum error over every step"),
    Diagnostic("max_step_norm", (), "1", "explicit VI: max |a_i| (validity needs < 1)"),
    Diagnostic("fail_value", (), "1", "diagnostic value at failure (e.g. |a_i|); NaN if ok"),
    Diagnostic("fail_step", (), "1", "index k of the failed step, −1 if none", "int64"),
    Diagnostic("fail_index", (), "1", "offending body at failure, −1 if none", "int64"),
    Diagnostic("steps", (), "1", "steps completed", "int64"),
    Diagnostic("potential_evals", (), "1", "potential/gradient evaluations", "int64"),
    Diagnostic("solver_iterations", (), "1", "total nonlinear iterations (implicit)", "int64"),
    Diagnostic("solver_iterations_max", (), "1", "max nonlinear iterations in one step", "int64"),
)
STATE = (
    Diagnostic("q_final", ("body", "component"), "1", "final (or last valid) positions q_i"),
    Diagnostic("w_final", ("body", "component"), "1 / time", "final (or last valid) ω_i"),
    Diagnostic("q_snap", ("snapshot", "body", "component"), "1", "positions q_i at snapshot_time"),
    Diagnostic("w_snap", ("snapshot", "body", "component"), "1 / time", "angular velocities ω_i at snapshot_time"),
)


def diagnostics(model: S2System) -> tuple[Diagnostic, ...]:
    return TIME_SERIES + SUMMARIES + STATE


def sizes(model: S2System) -> dict[str, int]:
    return {"body": model.n, "component": 3}


_SUMMARY_KEYS = {
    "E0": "E0",
    "mean_abs_energy_error": "mean_abs_dE",
    "max_abs_energy_error": "max_abs_dE",
    "max_rel_energy_error": "max_rel_dE",
    "energy_drift_slope": "drift_slope",
    "mean_unit_error": "mean_unit_error",
    "max_unit_error": "max_unit_error",
    "max_tangency_error": "max_tangency_error",
    "max_momentum_error": "max_momentum_error",
    "max_step_norm": "max_step_norm",
    "fail_value": "fail_value",
}
_INFO_KEYS = {
    "fail_step": "fail_step",
    "fail_index": "fail_index",
    "steps": "steps_done",
    "potential_evals": "potential_evals",
    "solver_iterations": "solver_iterations",
    "solver_iterations_max": "solver_iterations_max",
}


def run(model: S2System, integrator: str, h: float, n_steps: int, stride: int, options: dict) -> CellResult:
    """Run one cell and return its stored values."""
    tr = integrate(model, integrator, h, n_steps, stride, **options)  # options may hold snapshot_stride
    J0 = tr.momentum[0]
    dJ = tr.momentum - J0
    if model.symmetry == "full":
        with np.errstate(over="ignore", invalid="ignore"):
            merr = np.sqrt((dJ**2).sum(axis=1))
    elif model.symmetry == "axis":
        merr = np.abs(dJ @ model.axis)
    else:
        merr = np.full(len(tr.time), np.nan)
    values: dict[str, np.ndarray] = {
        "energy": tr.energy,
        "energy_error": tr.energy_error,
        "unit_error": tr.unit_error,
        "tangency_error": tr.tangency_error,
        "momentum": tr.momentum,
        "momentum_error": merr,
        "q_final": tr.q,
        "w_final": tr.w,
        "q_snap": tr.q_snap,
        "w_snap": tr.w_snap,
    }
    for k, src in _SUMMARY_KEYS.items():
        values[k] = np.float64(tr.summary[src])
    for k, src in _INFO_KEYS.items():
        values[k] = np.int64(tr.info[src])
    return CellResult(values=values, status=int(tr.info["status"]), wall_time=tr.wall_time)


def warmup() -> None:
    """Compile (or load from cache) the (S²)ⁿ driver for diagonal and coupled M."""
    from kernels.systems.catalogue import double_spherical_pendulum, spring_pendula

    for model, methods in ((spring_pendula(), METHODS), (double_spherical_pendulum(), ["implicit_vi", "rk4"])):
        for m in methods:
            if m == "explicit_vi" and not model.is_diagonal:
                continue
            integrate(model, m, 1e-3, 2, 1)


_EVALS_PER_STEP = {"explicit_vi": 1, "implicit_vi": 1, "rk2": 2, "rk2_proj": 2, "rk4": 4, "rk4_proj": 4}


def cost_per_step(model: S2System, integrator: str) -> float:
    """Rough seconds per step on one core (used only to size slices)."""
    n = model.n
    grad = 2.5e-9 * n * n + 2e-8 * n
    cost = _EVALS_PER_STEP.get(integrator, 4) * grad
    if integrator == "implicit_vi":
        cost += 6 * (3 * n) ** 3 / 3 * 1.5e-9
    elif not model.is_diagonal:
        cost += _EVALS_PER_STEP.get(integrator, 4) * (3 * n) ** 3 / 3 * 1.5e-9
    return cost + 1e-7


FAMILY = FamilyDef(
    name="s2",
    diagnostics=diagnostics,
    sizes=sizes,
    run=run,
    warmup=warmup,
    cost_per_step=cost_per_step,
    snapshots=True,
)


def _needs_diagonal(model: S2System) -> str | None:
    if not model.is_diagonal:
        return "explicit_vi needs a diagonal inertia matrix M (this system couples its bodies); use implicit_vi"
    return None


INTEGRATORS = (
    IntegratorDef(
        "explicit_vi",
        "s2",
        2,
        "Explicit variational integrator on (S²)ⁿ for diagonal M (000 Cor. 3): symplectic, "
        "momentum preserving, |q_i| = 1 to round-off.",
        applicable=_needs_diagonal,
    ),
    IntegratorDef(
        "implicit_vi",
        "s2",
        2,
        "Variational integrator for coupled M (000 (22)-(28)): Cayley update, fixed point with "
        "a dense LU solve per iteration. Also applies to the pendulum chain (ts2).",
        params=(
            Param("tol", float, 1e-14, "1", "fixed-point stop: max|Δf| ≤ tol·max(1, max|f|)", gt=0.0),
            Param("maxit", int, 50, "1", "iterations before status NONCONVERGED", ge=1),
        ),
        also=("ts2",),
    ),
    IntegratorDef("rk2", "s2", 2, "Explicit midpoint on the ambient ODE in R⁶ⁿ (baseline)."),
    IntegratorDef("rk2_proj", "s2", 2, "Explicit midpoint, then q_i ← q_i/|q_i| each step (baseline)."),
    IntegratorDef("rk4", "s2", 4, "Classical RK4 on the ambient ODE in R⁶ⁿ (baseline)."),
    IntegratorDef("rk4_proj", "s2", 4, "Classical RK4, then q_i ← q_i/|q_i| each step (baseline)."),
)
