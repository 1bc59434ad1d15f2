"""Python entry point: integrate a :class:`ChainModel` with a named method on the shared driver.

Fixed-step methods: ``h`` is the step, ``n_steps`` the number of steps, a sample every
``stride`` steps (``t_k = k·stride·h``). Adaptive runs (``adaptive=True``, for methods with an
embedded formula): ``h`` is the output interval Δt_out, ``n_steps`` the number of output
intervals (``T = n_steps·h``), ``stride`` is ignored; see :mod:`geosweep.kernels.core.driver` and
:mod:`geosweep.kernels.lie.stepper`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from geosweep.kernels.chain.model import ChainModel
from geosweep.kernels.chain.rhs import N_DIAG, chain_diag, chain_F, chain_f, chain_F_dense, work_size
from geosweep.kernels.core.results import StoredResult
from geosweep.kernels.core.trajectory import Trajectory as CoreTrajectory
from geosweep.kernels.deprecation import changed_options, deprecated_alias, front_door_call
from geosweep.kernels.lie import tableaux
from geosweep.kernels.lie.stepper import initial_state, make_stepper
from geosweep.kernels.lie.tableaux import AMBIENT, Method
from geosweep.kernels.status import Status

SUMMARY_FIELDS = ("h_min_used", "h_max_used", "t_end", "max_err_est")
INFO_FIELDS = ("status", "fail_step", "steps", "rejected", "f_evals", "samples")


@dataclass
class ChainRun(StoredResult):
    """Result: ``time`` (K,), ``diag`` (K, 6) = [E, L_x, L_y, L_z, max|√(q·q) − 1|, max|q·ω|]
    (NaN after a failure), ``step_size`` (K,) in force at each sample, final (or last valid)
    state ``y`` (N, 6), ``summary``/``info`` dicts, ``wall_time`` (s), and the ``core``
    trajectory (summaries over every step).

    ``run[name]`` is the value a sweep cell of the same run stores under ``name`` (e.g.
    ``run["rejected_steps"]``); ``info``/``summary`` keep older names of some of them as
    deprecated aliases (``rejected`` = ``rejected_steps``)."""

    time: np.ndarray
    diag: np.ndarray
    step_size: np.ndarray
    y: np.ndarray
    summary: dict[str, float]
    info: dict[str, int]
    wall_time: float
    core: CoreTrajectory | None = None
    model: ChainModel | None = None
    method: str = ""

    @property
    def status(self) -> Status:
        return Status(self.info["status"])

    def _stored_values(self) -> dict[str, np.ndarray]:
        from geosweep.kernels.chain.family import collect  # the family module imports this one

        assert self.core is not None and self.model is not None
        return collect(self.model, self.method, self.core).values

    @property
    def energy(self) -> np.ndarray:
        return self.diag[:, 0]

    @property
    def momentum(self) -> np.ndarray:
        return self.diag[:, 1:4]


def chain_stepper(model: ChainModel, method: str | Method, adaptive: bool = False, ambient_rhs: str = "dense"):
    """The shared driver's view of the chain with ``method`` (SE(3)ᴺ acting on (TS²)ᴺ)."""
    m = tableaux.get(method) if isinstance(method, str) else method
    dense = m.kind == AMBIENT and ambient_rhs == "dense"
    nwc = work_size(model.n, dense)
    ffield = chain_F_dense if dense else chain_F
    return make_stepper((chain_f, ffield, chain_diag), model.params, model.n, nwc, m, adaptive)


def scipy_rhs(model: ChainModel, dense: bool = False) -> Callable[[float, np.ndarray], np.ndarray]:
    """The chain's ambient field as a SciPy ``solve_ivp`` right-hand side ``f(t, y_flat)`` (a new
    array each call): the compiled O(N) field, or the dense reference formula with ``dense``."""
    n = model.n
    work = np.zeros(work_size(n, dense))
    buf = np.empty((n, 6))
    yb = np.empty((n, 6))
    field = chain_F_dense if dense else chain_F

    def rhs(t: float, yf: np.ndarray) -> np.ndarray:
        yb[:, :] = yf.reshape(n, 6)
        field(yb, model.params, work, buf)
        return buf.ravel().copy()

    return rhs


def _integrate(
    model: ChainModel,
    method: str | Method,
    h: float,
    n_steps: int,
    stride: int = 1,
    *,
    adaptive: bool = False,
    tol: float = 1e-6,
    theta: float = 0.85,
    exponent: float = 0.25,
    h0: float = 0.0,
    fac_min: float = 0.2,
    fac_max: float = 5.0,
    h_min: float = 1e-12,
    max_steps: int = 10_000_000,
    ambient_rhs: str = "dense",
    y0: np.ndarray | None = None,
    blowup: float = 0.0,
    steps_per_segment: int | None = None,
) -> ChainRun:
    """Run one trajectory (the kernels-alone run behind the deprecated :func:`integrate`; the project's
    kernel tests, benchmarks and warm-ups call it). ``h0 <= 0`` means the driver's starting-step rule;
    ``exponent`` is the controller α; ``ambient_rhs`` (``"dense"`` reference formula or ``"fast"``
    O(N) path) for AMBIENT kinds;
    ``blowup`` the relative energy guard (0: off); ``steps_per_segment`` runs the driver in
    segments of that many accepted steps (bitwise the same result)."""
    if h <= 0 or n_steps < 0 or stride < 1:
        raise ValueError("need h > 0, n_steps >= 0, stride >= 1")
    stepper = chain_stepper(model, method, adaptive, ambient_rhs)
    y = np.ascontiguousarray(model.y0 if y0 is None else y0, dtype=np.float64)
    if adaptive:
        traj = CoreTrajectory(
            stepper, initial_state(y), T=n_steps * h, dt_out=h, tol=tol, h0=h0, theta=theta, exponent=exponent,
            fac_min=fac_min, fac_max=fac_max, h_min=h_min, max_steps=max_steps, blowup=blowup,
        )  # fmt: skip
    else:
        n_out = n_steps // stride
        traj = CoreTrajectory(
            stepper, initial_state(y), T=n_out * stride * h, dt_out=stride * h, h=h, n_steps=n_steps, blowup=blowup
        )
    while not traj.finished:
        traj.advance(steps_per_segment)
    return from_core(model, traj, method if isinstance(method, str) else method.name)


def _new_call(a: dict) -> str:
    """The front-door call of an old :func:`integrate` call's arguments ``a``."""
    method, h, stride = a["method"], a["h"], a["stride"]
    name = method if isinstance(method, str) else method.name
    options = changed_options(a, "pendulum_chain", name, ("theta", "exponent", "h0", "ambient_rhs"))
    if a["adaptive"]:  # h is the output interval, n_steps the number of output intervals
        T, step = a["n_steps"] * h, {"tol": a["tol"]}
        return front_door_call("pendulum_chain", name, T=T, dt_out=h, step=step, options=options)
    T = (a["n_steps"] // stride) * stride * h
    return front_door_call("pendulum_chain", name, T=T, dt_out=stride * h, step={"h": h}, options=options)


#: the public kernels-alone entry point until the next release
integrate = deprecated_alias("geosweep.kernels.chain.integrate.integrate", _new_call, ("y0",))(_integrate)


def from_core(model: ChainModel, traj: CoreTrajectory, method: str = "") -> ChainRun:
    """The kernel-level :class:`ChainRun` view of a core trajectory."""
    n = model.n
    c = traj.costs()
    f = traj.failure()
    info = {
        "status": int(traj.status),
        "fail_step": f["fail_step"],
        "steps": c["steps"],
        "rejected": c["rejected_steps"],
        "f_evals": c["f_evals"],
        "samples": int(np.isfinite(traj.out[:, 0]).sum()),
    }
    summary = {
        "h_min_used": c["h_min_used"],
        "h_max_used": c["h_max_used"],
        "t_end": traj.time,
        "max_err_est": c["max_err_est"],
    }
    return ChainRun(
        time=traj.sample_times,
        diag=traj.out[:, :N_DIAG].copy(),
        step_size=traj.step_size.copy(),
        y=traj.S[: 6 * n].reshape(n, 6).copy(),
        summary=summary,
        info=info,
        wall_time=traj.wall_time,
        core=traj,
        model=model,
        method=method,
    )
