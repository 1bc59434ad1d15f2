"""Integrate an SE(3)ⁿ model from Python: :func:`integrate` on the shared driver.

The maps (23), (25), (27) and the state layout are in :mod:`geosweep.kernels.torus.stepper`; the
bookkeeping (samples, snapshots, summaries over every step, failures, the energy guard
``|E − E0| > blowup·|E0|`` checked after every step) in :mod:`geosweep.kernels.core.driver`.
``fail_reason`` (kernel API only) names the spec §2.5 reason of a failure status.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geosweep.kernels.core.results import StoredResult
from geosweep.kernels.core.trajectory import Trajectory as CoreTrajectory
from geosweep.kernels.deprecation import changed_options, deprecated_alias, front_door_call
from geosweep.kernels.status import Status
from geosweep.kernels.torus.forces import N_AUX
from geosweep.kernels.torus.model import SE3Model
from geosweep.kernels.torus.stepper import METHODS, _forces, initial_state, make_stepper, model_arrays

SAMPLE_FIELDS: tuple[str, ...] = (
    "KE_trans",
    "KE_rot",
    "U_0",
    "U_1",
    "U_2",
    "U_3",
    "U_4",
    "E_total",
    "P_x",
    "P_y",
    "P_z",
    "L_x",
    "L_y",
    "L_z",
    "Ls_x",
    "Ls_y",
    "Ls_z",
    "n_contact_pp",
    "n_contact_bonded_pp",
    "n_contact_wall",
    "max_abs_alpha",
    "max_bond_angle",
    "max_hb2",
    "qnorm_integrand",
    "rho_dot_Omega",
    "e3_dot_Omega",
    "rho_norm_error",
)
SUMMARY_FIELDS: tuple[str, ...] = (
    "E0",
    "max_rel_dE",
    "max_abs_dE",
    "drift_slope",
    "max_abs_alpha",
    "max_hb2",
    "max_bond_angle",
    "first_wall_t",
    "last_wall_t",
    "fail_value",
    "dP_max_x",
    "dP_max_y",
    "dP_max_z",
    "dL_max_x",
    "dL_max_y",
    "dL_max_z",
    "dP_free_x",
    "dP_free_y",
    "dP_free_z",
    "dL_free_x",
    "dL_free_y",
    "dL_free_z",
)
INFO_FIELDS: tuple[str, ...] = (
    "status",
    "fail_step",
    "fail_index",
    "steps_done",
    "force_evals",
    "nbl_rebuilds",
)  # force_evals includes the evaluation at t = 0
#: the spec §2.5 name of each failure :class:`Status` of these maps (DOMAIN: the rotation
#: increment left the chart's domain); any other status is reported as non-finite
FAIL_REASONS: dict[Status, str] = {
    Status.OK: "none",
    Status.DOMAIN: "rotation_increment",
    Status.CHART_SINGULAR: "chart_singular",
    Status.NONFINITE: "nonfinite",
    Status.ENERGY_BLOWUP: "energy_blowup",
}


@dataclass
class Trajectory(StoredResult):
    """Result of :func:`integrate`.

    ``tr[name]`` is the value a sweep cell of the same run stores under ``name`` (e.g.
    ``tr["first_wall_contact_t"]``); ``summary``/``info`` are the older names of some of them,
    kept as deprecated aliases (``first_wall_t`` = ``first_wall_contact_t``, ``max_abs_dE`` =
    ``max_abs_energy_error``, ``steps_done`` = ``steps``, …). ``fail_reason`` names the spec
    §2.5 reason of :attr:`status` (:data:`FAIL_REASONS`).

    ``time`` (K,) and ``samples`` (K, len(SAMPLE_FIELDS)) every ``stride`` steps (NaN after a
    failure); ``snap_time`` (S,) and ``snap`` (S, n, 12) = (x, v, α, Ω) snapshots; final (or
    last valid) state ``x, v, alpha, Omega``; ``summary``/``info`` dicts; ``wall_time`` in s.
    """

    time: np.ndarray
    samples: np.ndarray
    snap_time: np.ndarray
    snap: np.ndarray
    x: np.ndarray
    v: np.ndarray
    alpha: np.ndarray
    Omega: np.ndarray
    summary: dict[str, float]
    info: dict[str, int]
    wall_time: float
    core: CoreTrajectory | None = None
    model: SE3Model | None = None
    method: str = ""

    def _stored_values(self) -> dict[str, np.ndarray]:
        from geosweep.kernels.torus.family import collect  # the family module imports this one

        assert self.core is not None
        return collect(self.model, self.method, self.core).values

    def field(self, name: str) -> np.ndarray:
        """One sample column by name (see :data:`SAMPLE_FIELDS`)."""
        return self.samples[:, SAMPLE_FIELDS.index(name)]

    @property
    def P(self) -> np.ndarray:
        return self.samples[:, 8:11]

    @property
    def L(self) -> np.ndarray:
        return self.samples[:, 11:14]

    @property
    def status(self) -> Status:
        return Status(self.info["status"])

    @property
    def fail_reason(self) -> str:
        return FAIL_REASONS.get(self.status, FAIL_REASONS[Status.NONFINITE])


def _integrate(
    model: SE3Model,
    method: str,
    h: float,
    n_steps: int,
    stride: int = 1,
    *,
    snapshot_interval: float = 1.0,
    blowup: float = 0.5,
    x0: np.ndarray | None = None,
    v0: np.ndarray | None = None,
    alpha0: np.ndarray | None = None,
    Omega0: np.ndarray | None = None,
    steps_per_segment: int | None = None,
) -> Trajectory:
    """Integrate ``model`` with ``method`` for ``n_steps`` steps of size ``h`` (the kernels-alone run
    behind the deprecated :func:`integrate`; the project's kernel tests, benchmarks and warm-ups call it).

    ``stride``: steps between samples; ``snapshot_interval``: time between full-state
    snapshots, rounded to a multiple of the sample interval (≤ 0: only t = 0 and the end);
    ``blowup``: relative energy-error threshold (≤ 0 disables). Initial-state overrides default
    to the model's. ``steps_per_segment`` runs the driver in segments (bitwise the same).
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {sorted(METHODS)}")
    if not h > 0 or n_steps < 0 or stride < 1:
        raise ValueError("need h > 0, n_steps >= 0, stride >= 1")

    def _state(a, default):
        return np.array(default if a is None else a, dtype=np.float64, order="C").reshape(model.n, 3)

    stepper = make_stepper(model, method, h)
    S0, builds = initial_state(
        stepper, _state(x0, model.x0), _state(v0, model.v0), _state(alpha0, model.alpha0), _state(Omega0, model.Omega0)
    )
    n_out = n_steps // stride
    dt_out = stride * h
    every = int(round(snapshot_interval / dt_out)) if snapshot_interval > 0 else 0
    traj = CoreTrajectory(
        stepper, S0, T=n_out * dt_out, dt_out=dt_out, h=h, n_steps=n_steps, snap_every=max(every, 0), blowup=blowup
    )
    while not traj.finished:
        traj.advance(steps_per_segment)
    return from_core(model, traj, builds, method)


def _new_call(a: dict) -> str:
    """The front-door call of an old :func:`integrate` call's arguments ``a``."""
    h, stride = a["h"], a["stride"]
    dt_out = stride * h
    step = {"h": h}
    every = int(round(a["snapshot_interval"] / dt_out)) if a["snapshot_interval"] > 0 else 0
    n_out = a["n_steps"] // stride
    if every > 0 and n_out % every == 0:  # (an interval longer than T took t = 0 only: no front-door form)
        step["snapshot_dt"] = every * dt_out
    T = n_out * dt_out
    options = changed_options(a, a["model"].name, a["method"], ())
    return front_door_call(a["model"].name, a["method"], T=T, dt_out=dt_out, step=step, options=options)


#: the public kernels-alone entry point until the next release
integrate = deprecated_alias("geosweep.kernels.torus.integrate.integrate", _new_call, ("x0", "v0", "alpha0", "Omega0"))(
    _integrate
)


def from_core(model: SE3Model, traj: CoreTrajectory, builds: int = 0, method: str = "") -> Trajectory:
    """The kernel-level :class:`Trajectory` view of a finished core trajectory."""
    n = model.n
    col = {name: traj.stepper.obs_names.index(name) for name in traj.stepper.obs_names}
    col["E_total"] = col["energy"]
    samples = np.stack([traj.out[:, col[name]] for name in SAMPLE_FIELDS], axis=1)
    e = traj.energy_summaries()
    f = traj.failure()
    c = traj.costs()
    S = traj.S
    o = 18 * n + N_AUX + 15  # dfree in the state (see geosweep.kernels.torus.stepper)
    dfree = S[o : o + 6]
    summary = {
        "E0": e["E0"],
        "max_rel_dE": e["max_rel_energy_error"],
        "max_abs_dE": e["max_abs_energy_error"],
        "drift_slope": e["energy_drift_slope"],
        "max_abs_alpha": traj.reduced("max_abs_alpha"),
        "max_hb2": traj.reduced("hb2_step"),
        "max_bond_angle": traj.reduced("max_bond_angle"),
        "first_wall_t": traj.reduced("n_contact_wall", "first"),
        "last_wall_t": traj.reduced("n_contact_wall", "last"),
        "fail_value": f["fail_value"],
    }
    for k, name in enumerate(("P_x", "P_y", "P_z", "L_x", "L_y", "L_z")):
        summary[("dP_max_" if k < 3 else "dL_max_") + "xyz"[k % 3]] = traj.reduced(name)
    for k in range(6):
        summary[("dP_free_" if k < 3 else "dL_free_") + "xyz"[k % 3]] = float(dfree[k])
    status = int(traj.status)
    info = {
        "status": status,
        "fail_step": f["fail_step"],
        "fail_index": f["fail_index"],
        "steps_done": c["steps"],
        "force_evals": c["f_evals"] + traj.stepper.extra.get("evals0", 0),
        "nbl_rebuilds": c["extra_counter"] + builds,
    }
    snap = traj.snaps.reshape(-1, 4, n, 3).transpose(0, 2, 1, 3).reshape(-1, n, 12).copy()
    return Trajectory(
        time=traj.sample_times,
        samples=samples,
        snap_time=traj.snapshot_times,
        snap=snap,
        x=S[0 : 3 * n].reshape(n, 3).copy(),
        v=S[3 * n : 6 * n].reshape(n, 3).copy(),
        alpha=S[6 * n : 9 * n].reshape(n, 3).copy(),
        Omega=S[9 * n : 12 * n].reshape(n, 3).copy(),
        summary=summary,
        info=info,
        wall_time=traj.wall_time,
        core=traj,
        model=model,
        method=method,
    )


def evaluate(model: SE3Model, x: np.ndarray, alpha: np.ndarray) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """One force evaluation at (x, α): ``(U, F, τ, aux)`` (all-pairs contacts; tests, diagnostics)."""
    x = np.array(x, dtype=np.float64, order="C").reshape(model.n, 3)
    a = np.array(alpha, dtype=np.float64, order="C").reshape(model.n, 3)
    F = np.empty_like(x)
    T = np.empty_like(x)
    R = np.empty((model.n, 3, 3))
    aux = np.empty(N_AUX)
    nb = np.zeros(1, dtype=np.int64)
    U = _forces(int(model.kind), x, a, R, model.p, model_arrays(model), False, nb, nb, F, T, aux)
    return float(U), F, T, aux
