"""Integrate an (S²)ⁿ system from Python: :func:`integrate` on the shared driver.

Methods (:data:`METHODS`): ``explicit_vi`` (diagonal M, 000 Cor. 3), ``implicit_vi`` (coupled
M, 000 (22)–(28)), ``rk2``/``rk4`` (explicit midpoint / classical RK4 on the ambient ODE in
R⁶ⁿ) and ``rk2_proj``/``rk4_proj`` (the same followed by ``q_i ← q_i/|q_i|``); see
:mod:`geosweep.kernels.s2.steps` for the maps and :mod:`geosweep.kernels.core.driver` for the bookkeeping.

Common rules: ``t_k = k h``; ``q`` normalised and ``ω`` projected once at t = 0 and never
again (except in the ``*_proj`` baselines); one potential evaluation per VI step; a failed step
keeps the last valid state and ends the trajectory with its status, step number (from 1),
offending body and value.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geosweep.kernels.core.results import StoredResult
from geosweep.kernels.core.trajectory import Trajectory as CoreTrajectory
from geosweep.kernels.deprecation import changed_options, deprecated_alias, front_door_call
from geosweep.kernels.s2.model import S2System, normalise_and_project
from geosweep.kernels.s2.stepper import METHODS as _METHODS
from geosweep.kernels.s2.stepper import cell_values, initial_state, make_stepper
from geosweep.kernels.status import Status

METHODS: dict[str, int] = {name: i for i, name in enumerate(_METHODS)}

#: Keys of :attr:`Trajectory.summary` (summaries over every step k = 0..K done).
SUMMARY_FIELDS: tuple[str, ...] = (
    "E0",  # initial energy
    "mean_abs_dE",  # (1/(K+1)) Σ_k |E_k − E_0| over every step k = 0..K done
    "max_abs_dE",  # max_k |E_k − E_0|
    "max_rel_dE",  # max_k |E_k − E_0| / |E_0|
    "drift_slope",  # least-squares slope of E_k − E_0 against t_k (energy per time)
    "mean_unit_error",  # mean_k max_i |sqrt(q_i·q_i) − 1|
    "max_unit_error",
    "max_tangency_error",  # max_k max_i |q_i·ω_i|
    "max_momentum_error",  # max_k |J_k − J_0| (full) or |a·J_k − a·J_0| (axis); NaN if none
    "fail_value",  # diagnostic value at failure (|a_i|, last Picard change, E, ΔE …); NaN if ok
    "max_step_norm",  # explicit VI: max |a_i| (validity needs < 1); NaN for other methods
)
#: Keys of :attr:`Trajectory.info`.
INFO_FIELDS: tuple[str, ...] = (
    "status",
    "fail_step",  # number (from 1) of the step that failed; 0 invalid initial state; −1 none
    "fail_index",  # offending body i (−1 if none)
    "steps_done",
    "potential_evals",  # including the one at t = 0
    "solver_iterations",  # total nonlinear iterations (implicit methods)
    "solver_iterations_max",  # max iterations in one step
)


# --------------------------------------------------------------------------------------
# Python entry point
# --------------------------------------------------------------------------------------
@dataclass
class Trajectory(StoredResult):
    """Result of :func:`integrate` (all arrays float64 unless stated).

    ``tr[name]`` is the value a sweep cell of the same run stores under ``name`` (e.g.
    ``tr["mean_abs_energy_error"]``, see :class:`~geosweep.kernels.core.results.StoredResult`).
    ``summary`` and ``info`` are the older names of some of them, kept as deprecated aliases:
    ``mean_abs_dE`` = ``mean_abs_energy_error``, ``max_abs_dE`` = ``max_abs_energy_error``,
    ``max_rel_dE`` = ``max_rel_energy_error``, ``drift_slope`` = ``energy_drift_slope``,
    ``steps_done`` = ``steps``, ``potential_evals`` = ``f_evals``.

    ``time`` (K,), ``energy``/``energy_error``/``unit_error``/``tangency_error`` (K,) and
    ``momentum`` (K, 3) sampled every ``stride`` steps (NaN after a failure); ``q``, ``w``
    final (or last valid) state; ``q_snap``/``w_snap`` (S, n, 3) states at ``snapshot_time``;
    ``summary`` and ``info`` dicts keyed by :data:`SUMMARY_FIELDS` and :data:`INFO_FIELDS`; ``wall_time`` in seconds.
    """

    time: np.ndarray
    energy: np.ndarray
    energy_error: np.ndarray
    unit_error: np.ndarray
    tangency_error: np.ndarray
    momentum: np.ndarray
    q: np.ndarray
    w: np.ndarray
    q_snap: np.ndarray
    w_snap: np.ndarray
    snapshot_time: np.ndarray
    summary: dict[str, float]
    info: dict[str, int]
    wall_time: float
    core: CoreTrajectory | None = None
    system: S2System | None = None
    method: str = ""

    @property
    def status(self) -> Status:
        return Status(self.info["status"])

    def _stored_values(self) -> dict[str, np.ndarray]:
        assert self.core is not None and self.system is not None
        return cell_values(self.system, self.method, self.core)


def _integrate(
    system: S2System,
    method: str,
    h: float,
    n_steps: int,
    stride: int = 1,
    *,
    tol: float = 1e-14,
    maxit: int = 50,
    q0: np.ndarray | None = None,
    w0: np.ndarray | None = None,
    snapshot_stride: int = 0,
    blowup: float = 0.0,
    steps_per_segment: int | None = None,
    threads: int = 1,
) -> Trajectory:
    """Integrate ``system`` with ``method`` for ``n_steps`` steps of size ``h`` (the kernels-alone run
    behind the deprecated :func:`integrate`; the project's kernel tests, benchmarks and warm-ups call it).

    The initial state (``system.q0/w0`` unless given) is normalised and projected once.
    ``stride`` is the sampling interval in steps. ``tol``/``maxit`` control the implicit VI.
    ``snapshot_stride``: steps between stored states, a multiple of ``stride`` (0: only t = 0
    and t = T). ``blowup``: stop with ENERGY_BLOWUP when |E − E0| > blowup·|E0| (0: off).
    ``steps_per_segment`` runs the driver in segments of that many steps (same result, bitwise).
    ``threads``: threads for a potential compiled with ``threaded=True`` (same result, bitwise;
    see :func:`geosweep.kernels.s2.stepper.make_stepper`).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    if method == "explicit_vi" and not system.is_diagonal:
        raise ValueError("explicit_vi needs a diagonal inertia matrix M; use implicit_vi")
    if h <= 0 or n_steps < 0 or stride < 1:
        raise ValueError("need h > 0, n_steps >= 0, stride >= 1")
    n_out = n_steps // stride
    snap = int(snapshot_stride) if snapshot_stride > 0 else max(n_out, 1) * stride
    if snap % stride:
        raise ValueError("snapshot_stride must be a multiple of stride")
    q, w = normalise_and_project(system.q0 if q0 is None else q0, system.w0 if w0 is None else w0)
    stepper = make_stepper(system, method, tol=tol, maxit=maxit, threads=threads)
    traj = CoreTrajectory(
        stepper,
        initial_state(system, q, w),
        T=n_out * stride * h,
        dt_out=stride * h,
        h=h,
        n_steps=n_steps,
        snap_every=snap // stride,
        blowup=blowup,
    )
    while not traj.finished:
        traj.advance(steps_per_segment)
    return from_core(system, method, traj)


def _new_call(a: dict) -> str:
    """The front-door call of an old :func:`integrate` call's arguments ``a``."""
    h, stride = a["h"], a["stride"]
    step = {"h": h}
    if a["snapshot_stride"] > 0:
        step["snapshot_dt"] = a["snapshot_stride"] * h
    options = changed_options(a, a["system"].name, a["method"], ("maxit",))
    T = (a["n_steps"] // stride) * stride * h
    return front_door_call(a["system"].name, a["method"], T=T, dt_out=stride * h, step=step, options=options)


#: the public kernels-alone entry point until the next release
integrate = deprecated_alias("geosweep.kernels.s2.integrate", _new_call, ("q0", "w0"))(_integrate)


def from_core(system: S2System, method: str, traj: CoreTrajectory) -> Trajectory:
    """The kernel-level :class:`Trajectory` view of a finished core trajectory."""
    n = system.n
    e = traj.energy_summaries()
    f = traj.failure()
    c = traj.costs()
    E = traj.samples("energy")
    if system.symmetry == "full":
        mom = traj.reduced("J_x")
    elif system.symmetry == "axis":
        mom = traj.reduced("J_axis")
    else:
        mom = np.nan
    summary = {
        "E0": e["E0"],
        "mean_abs_dE": e["mean_abs_energy_error"],
        "max_abs_dE": e["max_abs_energy_error"],
        "max_rel_dE": e["max_rel_energy_error"],
        "drift_slope": e["energy_drift_slope"],
        "mean_unit_error": traj.reduced("unit_error", "mean"),
        "max_unit_error": traj.reduced("unit_error"),
        "max_tangency_error": traj.reduced("tangency_error"),
        "max_momentum_error": mom,
        "fail_value": f["fail_value"],
        "max_step_norm": traj.reduced("step_norm") if method == "explicit_vi" else np.nan,
    }
    info = {
        "status": int(traj.status),
        "fail_step": f["fail_step"],
        "fail_index": f["fail_index"],
        "steps_done": c["steps"],
        "potential_evals": c["f_evals"] + traj.stepper.extra.get("evals0", 0),
        "solver_iterations": c["solver_iterations"],
        "solver_iterations_max": c["solver_iterations_max"],
    }
    snaps = traj.snaps
    S = traj.S
    return Trajectory(
        time=traj.sample_times,
        energy=E.copy(),
        energy_error=E - e["E0"],
        unit_error=traj.samples("unit_error").copy(),
        tangency_error=traj.samples("tangency_error").copy(),
        momentum=traj.out[:, 3:6].copy(),
        q=S[: 3 * n].reshape(n, 3).copy(),
        w=S[3 * n : 6 * n].reshape(n, 3).copy(),
        q_snap=snaps[:, : 3 * n].reshape(-1, n, 3).copy(),
        w_snap=snaps[:, 3 * n : 6 * n].reshape(-1, n, 3).copy(),
        snapshot_time=traj.snapshot_times,
        summary=summary,
        info=info,
        wall_time=traj.wall_time,
        core=traj,
        system=system,
        method=method,
    )
