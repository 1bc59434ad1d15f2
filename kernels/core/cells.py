"""Stored names every family shares, and how a finished trajectory becomes one cell's values.

One meaning per name, in every family (store format 2, README "Store layout"):

* time series: ``energy`` E(t), ``energy_error`` E(t) − E0, ``rel_energy_error``
  (E(t) − E0)/|E0|, ``energy_error_lower``/``_upper`` (the envelope: min/max of E − E0 over
  every step of the output interval ending at t), ``step_size`` (the step in force at each
  sample);
* summaries over **every** accepted step (attr ``computed_over = "every step"``): ``E0``,
  ``max_abs_energy_error``, ``mean_abs_energy_error``, ``max_rel_energy_error``,
  ``energy_drift_slope``, ``h_min_used``, ``h_max_used``;
* failure: ``fail_step`` (number of the failing step counted from 1 — the step from t_{k−1} to
  t_k; 0 = the initial state is invalid; −1 = none), ``fail_index`` (body, −1 none),
  ``fail_value``, ``fail_time`` (time of the last valid state; NaN if ok);
* cost: ``steps``, ``rejected_steps``, ``f_evals`` (force / gradient / vector-field
  evaluations), ``solver_iterations``, ``solver_iterations_max``;
* state: ``final_state`` (body, state) — final or last valid — and ``snapshot_state``
  (snapshot, body, state); the family's ``state_labels`` name the ``state`` entries.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from geosweep.kernels.core import layout as L
from geosweep.kernels.core import observables
from geosweep.kernels.core.observables import Envelope, Max, Mean, Observable, Samples
from geosweep.kernels.core.trajectory import Reductions, Trajectory
from geosweep.kernels.registry import CellResult, Diagnostic, Param, RunRequest

if TYPE_CHECKING:
    from geosweep.kernels.core.batch import Stack

_E = "energy"
_EVERY = "every step"

COMMON_DIAGNOSTICS: tuple[Diagnostic, ...] = (
    Diagnostic("energy", ("time",), _E, "total energy E"),
    Diagnostic("energy_error", ("time",), _E, "energy error E(t) − E0"),
    Diagnostic("rel_energy_error", ("time",), "1", "relative energy error (E(t) − E0) / |E0|"),
    Diagnostic(
        "energy_error_lower",
        ("time",),
        _E,
        "min of E − E0 over every step of the output interval ending at t",
        computed_over=_EVERY,
    ),
    Diagnostic(
        "energy_error_upper",
        ("time",),
        _E,
        "max of E − E0 over every step of the output interval ending at t",
        computed_over=_EVERY,
    ),
    Diagnostic("step_size", ("time",), "time", "step in force at the sample (adaptive: the accepted step around it)"),
    Diagnostic("E0", (), _E, "initial energy"),
    Diagnostic("max_abs_energy_error", (), _E, "max_k |E_k − E0|", computed_over=_EVERY),
    Diagnostic("mean_abs_energy_error", (), _E, "mean over k = 0..K of |E_k − E0|", computed_over=_EVERY),
    Diagnostic("max_rel_energy_error", (), "1", "max_k |E_k − E0| / |E0|", computed_over=_EVERY),
    Diagnostic(
        "energy_drift_slope", (), _E + " / time", "least-squares slope of E_k − E0 against t_k", computed_over=_EVERY
    ),
    Diagnostic("fail_step", (), "1", "number (from 1) of the failing step; 0 invalid initial state; −1 none", "int64"),
    Diagnostic("fail_index", (), "1", "offending body at failure, −1 if none", "int64"),
    Diagnostic("fail_value", (), "1", "offending value at failure (step norm, E, ΔE, step size …); NaN if ok"),
    Diagnostic("fail_time", (), "time", "time of the last valid state of a failed run; NaN if ok"),
    Diagnostic("steps", (), "1", "accepted steps", "int64"),
    Diagnostic("rejected_steps", (), "1", "rejected trial steps (adaptive; 0 for fixed step)", "int64"),
    Diagnostic("f_evals", (), "1", "evaluations of the force / gradient / vector field", "int64"),
    Diagnostic("solver_iterations", (), "1", "nonlinear solver iterations, total (0: explicit)", "int64"),
    Diagnostic("solver_iterations_max", (), "1", "max solver iterations in one step", "int64"),
    Diagnostic("h_min_used", (), "time", "smallest accepted step", computed_over=_EVERY),
    Diagnostic("h_max_used", (), "time", "largest accepted step", computed_over=_EVERY),
    Diagnostic("final_state", ("body", "state"), "1", "final (or last valid) state of each body (see state)"),
    Diagnostic("snapshot_state", ("snapshot", "body", "state"), "1", "state of each body at snapshot_time"),
)

#: Constraint errors of states made of unit vectors with tangent velocities ((S²)ⁿ and (TS²)ᴺ):
#: observation columns ``unit_error`` and ``tangency_error`` with MEANMAX / MAX reductions.
UNIT_SPHERE_OBSERVABLES: tuple[Observable, ...] = (
    Observable("unit_error", Reductions.MEANMAX, (
        Samples(Diagnostic("unit_error", ("time",), "1", "unit-length error max_i |√(q_i·q_i) − 1|")),
        Envelope(Diagnostic(
            "unit_error_upper", ("time",), "1",
            "max of the unit-length error over the steps of the interval ending at t", computed_over=_EVERY,
        )),
        Mean(Diagnostic("mean_unit_error", (), "1", "mean over k = 0..K of the unit-length error",
                        computed_over=_EVERY)),
        Max(Diagnostic("max_unit_error", (), "1", "max of the unit-length error", computed_over=_EVERY)),
    )),
    Observable("tangency_error", Reductions.MAX, (
        Samples(Diagnostic("tangency_error", ("time",), "1 / time", "tangency error max_i |q_i·ω_i|")),
        Envelope(Diagnostic(
            "tangency_error_upper", ("time",), "1 / time", "max of the tangency error over the interval ending at t",
            computed_over=_EVERY,
        )),
        Max(Diagnostic("max_tangency_error", (), "1 / time", "max of the tangency error", computed_over=_EVERY)),
    )),
)  # fmt: skip
UNIT_SPHERE_DIAGNOSTICS: tuple[Diagnostic, ...] = observables.diagnostics(UNIT_SPHERE_OBSERVABLES)


#: The energy guard every family's integrators take as an option.
BLOWUP = Param(
    "blowup",
    float,
    0.5,
    "1",
    "stop with status energy_blowup once |E − E0| > blowup·|E0| after a step (0 disables)",
    ge=0.0,
)

#: The global-error options of families with a DOP853 reference (chain, heavy top, quadrotors).
REFERENCE_PARAMS: tuple[Param, ...] = (
    Param(
        "global_error", bool, False, "1",
        "compute ‖y(T) − y_ref(T)‖ against a DOP853 reference (an extra run, not in the cell's wall time)",
    ),
    Param("ref_tol", float, 1e-13, "1", "rtol = atol of the DOP853 reference", gt=0.0),
)  # fmt: skip

#: Controller options of adaptive integrators (the tolerance is the sweep's ``tol`` axis).
ADAPTIVE_PARAMS: tuple[Param, ...] = (
    Param("theta", float, 0.85, "1", "controller safety factor θ", gt=0.0, le=1.0),
    Param("exponent", float, 0.25, "1", "controller exponent α (001: 1/5; its code: 1/4)", gt=0.0, le=1.0),
    Param("h0", float, 0.0, "time", "first trial step; ≤ 0: the rule from f(y0), tol and the order (not T)"),
)


def start_trajectory(stepper, S0: np.ndarray, request: RunRequest, options: dict[str, Any]) -> Trajectory:
    """A core trajectory for ``request`` with the shared options (``blowup``, controller)."""
    kw: dict[str, Any] = {"blowup": float(options.get("blowup", BLOWUP.default))}
    if request.adaptive:
        kw.update(
            tol=float(request.tol),  # type: ignore[arg-type]  # set when adaptive
            theta=float(options.get("theta", 0.85)),
            exponent=float(options.get("exponent", 0.25)),
            h0=float(options.get("h0", 0.0)),
        )
    else:
        kw["h"] = float(request.h)  # type: ignore[arg-type]  # set when fixed-step
    return Trajectory(stepper, S0, T=request.T, dt_out=request.dt_out, snap_every=request.snapshot_every, **kw)


def common_values(traj: Trajectory, to_bodies: Callable[[np.ndarray], np.ndarray]) -> dict[str, Any]:
    """The shared stored values of a finished trajectory; ``to_bodies`` maps a state prefix
    (length ``n_check``) to a (body, state) array."""
    e = traj.energy_summaries()
    f = traj.failure()
    c = traj.costs()
    E = traj.out[:, 0].copy()
    E0 = e["E0"]
    if E0 != 0.0 and math.isfinite(E0):  # a finite non-zero divisor: no floating-point warning to silence
        rel = (E - E0) / abs(E0)
    else:
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = (E - E0) / abs(E0) if E0 != 0.0 else np.full_like(E, np.nan)
    # np.array of equal-shaped rows is np.stack's array, built in one call
    snaps = np.array([to_bodies(row) for row in traj.snaps]) if len(traj.snaps) else traj.snaps
    return {
        "energy": E,
        "energy_error": E - E0,
        "rel_energy_error": rel,
        "energy_error_lower": traj.env[:, 0].copy(),
        "energy_error_upper": traj.env[:, 1].copy(),
        "step_size": np.where(np.isfinite(E), traj.step_size, np.nan),
        "E0": np.float64(E0),
        "max_abs_energy_error": np.float64(e["max_abs_energy_error"]),
        "mean_abs_energy_error": np.float64(e["mean_abs_energy_error"]),
        "max_rel_energy_error": np.float64(e["max_rel_energy_error"]),
        "energy_drift_slope": np.float64(e["energy_drift_slope"]),
        "fail_step": np.int64(f["fail_step"]),
        "fail_index": np.int64(f["fail_index"]),
        "fail_value": np.float64(f["fail_value"]),
        "fail_time": np.float64(f["fail_time"]),
        "steps": np.int64(c["steps"]),
        "rejected_steps": np.int64(c["rejected_steps"]),
        "f_evals": np.int64(c["f_evals"] + traj.stepper.extra.get("evals0", 0)),
        "solver_iterations": np.int64(c["solver_iterations"]),
        "solver_iterations_max": np.int64(c["solver_iterations_max"]),
        "h_min_used": np.float64(c["h_min_used"]),
        "h_max_used": np.float64(c["h_max_used"]),
        "final_state": to_bodies(traj.S[: traj.stepper.n_check]),
        "snapshot_state": snaps,
    }


def common_values_many(stack: Stack, to_bodies: Callable[[np.ndarray], np.ndarray]) -> dict[str, np.ndarray]:
    """:func:`common_values` of every row of ``stack`` (:mod:`geosweep.kernels.core.batch`) at once, each
    with a leading row axis, bitwise each row's own; ``to_bodies`` maps the rows' state prefixes
    (rows, ``n_check``) to (rows, body, state)."""
    out, env, acc, info, snaps = stack.out, stack.env, stack.acc, stack.info, stack.snaps
    K = len(stack)
    k = info[:, L.I_K]
    cnt = (k + 1).astype(np.float64)
    E0 = acc[:, L.A_E0].copy()
    E = out[:, :, 0].copy()
    failed = info[:, L.I_STATUS] != 0
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = np.where((E0 != 0.0)[:, None], (E - E0[:, None]) / np.abs(E0)[:, None], np.nan)
        den = cnt * acc[:, L.A_STT] - acc[:, L.A_ST] * acc[:, L.A_ST]
        slope = np.where(den > 0, (cnt * acc[:, L.A_STE] - acc[:, L.A_ST] * acc[:, L.A_SE]) / den, 0.0)
        max_rel = np.where(E0 != 0.0, acc[:, L.A_MAX_ABS] / np.abs(E0), np.nan)
    n_check = stack.stepper.n_check
    snapshot = to_bodies(snaps.reshape(K * snaps.shape[1], n_check))
    return {
        "energy": E,
        "energy_error": E - E0[:, None],
        "rel_energy_error": rel,
        "energy_error_lower": env[:, :, 0].copy(),
        "energy_error_upper": env[:, :, 1].copy(),
        "step_size": np.where(np.isfinite(E), out[:, :, -1], np.nan),
        "E0": E0,
        "max_abs_energy_error": acc[:, L.A_MAX_ABS].copy(),
        "mean_abs_energy_error": acc[:, L.A_SUM_ABS] / cnt,
        "max_rel_energy_error": max_rel,
        "energy_drift_slope": slope,
        "fail_step": info[:, L.I_FAIL_STEP].copy(),
        "fail_index": info[:, L.I_FAIL_INDEX].copy(),
        "fail_value": acc[:, L.A_FAIL_VALUE].copy(),
        "fail_time": np.where(failed, acc[:, L.A_T], np.nan),
        "steps": k.copy(),
        "rejected_steps": info[:, L.I_REJECTED].copy(),
        "f_evals": info[:, L.I_EVALS] + np.int64(stack.stepper.extra.get("evals0", 0)),
        "solver_iterations": info[:, L.I_ITERS].copy(),
        "solver_iterations_max": info[:, L.I_ITERS_MAX].copy(),
        "h_min_used": np.where(k > 0, acc[:, L.A_HMIN], np.nan),
        "h_max_used": np.where(k > 0, acc[:, L.A_HMAX], np.nan),
        "final_state": to_bodies(np.ascontiguousarray(stack.S[:, :n_check])),
        "snapshot_state": snapshot.reshape(K, snaps.shape[1], *snapshot.shape[1:]),
    }


def make_run(start: Callable[..., Trajectory], collect: Callable[..., CellResult]) -> Callable[..., CellResult]:
    """A family's ``run``: ``start`` the cell, advance it to the end, ``collect`` its values."""

    def run(model: Any, integrator: str, request: RunRequest, options: dict[str, Any]) -> CellResult:
        traj = start(model, integrator, request, options)
        traj.advance()
        return collect(model, integrator, traj, options)

    run.__doc__ = "Run one cell to the end and return its stored values (start → advance → collect)."
    return run


def finish(traj: Trajectory, values: dict[str, np.ndarray]) -> CellResult:
    return CellResult(values=values, status=int(traj.status), wall_time=traj.wall_time)


def blocks_to_bodies(n: int, blocks: int) -> Callable[[np.ndarray], np.ndarray]:
    """For states stored as ``blocks`` consecutive (n, 3) arrays: prefix → (n, 3·blocks)."""

    def convert(x: np.ndarray) -> np.ndarray:
        return np.ascontiguousarray(x.reshape(blocks, n, 3).transpose(1, 0, 2).reshape(n, 3 * blocks))

    return convert


def names(diagnostics) -> set[str]:
    return {d.name for d in diagnostics}
