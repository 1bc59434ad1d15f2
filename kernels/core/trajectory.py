"""One trajectory in Python: buffers for the shared driver, segments, checkpoints, summaries.

>>> traj = Trajectory(stepper, S0, T=10.0, dt_out=0.1, h=1e-3)
>>> traj.advance(2000)          # stop after 2000 accepted steps (a segment) …
>>> saved = traj.checkpoint()   # … persist it (plain arrays) …
>>> traj = Trajectory.restore(stepper, saved)
>>> traj.advance()              # … and finish: bitwise identical to one uninterrupted run

All persistent information is in the arrays of :meth:`Trajectory.checkpoint`; the work arrays
only hold scratch and caches that steps rebuild (the contract of :mod:`geosweep.kernels.core.signatures`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from geosweep.kernels.core import fastcall
from geosweep.kernels.core import layout as L
from geosweep.kernels.core.threads import numba_threads
from geosweep.kernels.status import Status


class Reductions:
    """Reduction codes of observation columns (see :mod:`geosweep.kernels.core.layout`)."""

    NONE = L.R_NONE
    MAX = L.R_MAX
    MEANMAX = L.R_MEANMAX
    DEV = L.R_DEV
    DEVNORM3 = L.R_DEVNORM3
    WHENPOS = L.R_WHENPOS


@dataclass(frozen=True, eq=False)
class StepperSpec:
    """Everything a family hands to the driver for one (model, method) pair.

    ``drive`` is the driver compiled for the family's callback type; ``step``/``observe``/
    ``dense`` the family's compiled functions; ``cb`` its callbacks; ``meth`` the method record
    (float64); ``p`` the model's parameter vector; ``obs_names`` name the observation columns
    and ``red`` their reductions; ``n_check`` is the length of the state prefix that is
    snapshotted and checked for finiteness. ``start_order``: the order of an adaptive method
    whose ``step`` answers the driver's starting-step modes (``layout.MODE_RATE``/``MODE_EULER``):
    its default first trial step is the driver's rule (:func:`geosweep.kernels.core.driver.starting_step`);
    0: ``dt_out``.
    """

    drive: Any
    step: Any
    observe: Any
    dense: Any
    cb: Any
    meth: np.ndarray
    p: np.ndarray
    work_size: int
    iwork_size: int
    state_size: int
    n_check: int
    obs_names: tuple[str, ...]
    red: np.ndarray
    has_energy: bool = True
    has_dense: bool = False
    start_order: int = 0
    extra: dict = field(default_factory=dict)
    #: Numba threads the driver call runs on (:mod:`geosweep.kernels.core.threads`; 1: this thread only)
    threads: int = 1

    @property
    def n_obs(self) -> int:
        return len(self.obs_names)


#: k_stop of a run without a step limit
_NO_STEP_LIMIT = int(np.iinfo(np.int64).max)

_PERSISTENT = ("S", "acc", "info", "out", "env", "snaps", "ictl", "fctl")


def _nans(shape: tuple[int, ...]) -> np.ndarray:
    """``np.full(shape, np.nan)``, without its per-call overhead (a short cell makes three)."""
    a = np.empty(shape)
    a.fill(np.nan)
    return a


class Trajectory:
    """A resumable run of the shared driver (fixed step if ``h`` is given, else adaptive with ``tol``).

    ``T``/``dt_out``: final time and output interval (``n_out = round(T/dt_out)``); ``h`` must
    divide ``dt_out``. ``snap_every``: output intervals between snapshots (0: t = 0 and T only).
    ``blowup``: relative energy guard (≤ 0 disables). Adaptive controls: ``tol``, ``h0`` (≤ 0:
    the driver's starting-step rule, independent of T), ``theta``, ``exponent``, ``fac_min``,
    ``fac_max``, ``h_min``, ``max_steps``.
    """

    def __init__(
        self,
        stepper: StepperSpec,
        S0: np.ndarray,
        *,
        T: float,
        dt_out: float,
        h: float | None = None,
        tol: float | None = None,
        snap_every: int = 0,
        blowup: float = 0.0,
        h0: float = 0.0,
        theta: float = 0.85,
        exponent: float = 0.25,
        fac_min: float = 0.2,
        fac_max: float = 5.0,
        h_min: float = 1e-12,
        max_steps: int = 10_000_000,
        n_steps: int | None = None,
        _restore: dict | None = None,
    ) -> None:
        self.stepper = stepper
        self.wall_time = 0.0
        m = stepper.n_obs
        if _restore is not None:
            for name in _PERSISTENT:
                setattr(self, name, np.array(_restore[name], copy=True, order="C"))
            ictl = np.asarray(_restore["ictl"], dtype=np.int64)
            if ictl.shape[0] < L.N_ICTL:  # saved before the control had its last entries (they are 0)
                self.ictl = np.concatenate([ictl, np.zeros(L.N_ICTL - ictl.shape[0], dtype=np.int64)])
        else:
            if (h is None) == (tol is None):
                raise ValueError("give exactly one of h (fixed step) or tol (adaptive)")
            adaptive = h is None
            if not (T >= 0 and dt_out > 0):
                raise ValueError("need T >= 0 and dt_out > 0")
            n_out = int(round(T / dt_out))
            if n_out < 1 and (adaptive or n_steps is None):
                raise ValueError("need T >= dt_out")
            h_fixed: float = 0.0 if h is None else h  # unused when adaptive
            stride = 1 if adaptive else int(round(dt_out / h_fixed))
            # |stride·h − dt_out| ≤ 1e-9·|dt_out| (np.isclose's test, without its per-call array set-up)
            if not adaptive and (stride < 1 or not abs(stride * h_fixed - dt_out) <= 1e-9 * abs(dt_out)):
                raise ValueError(f"dt_out = {dt_out} is not a multiple of h = {h}")
            every = int(snap_every) if snap_every and snap_every > 0 else max(n_out, 1)
            n_snap = n_out // every + 1
            S = np.array(S0, dtype=np.float64, copy=True, order="C").ravel()
            if S.shape[0] != stepper.state_size:
                raise ValueError(f"state has {S.shape[0]} entries, the stepper expects {stepper.state_size}")
            self.S = S
            # the controls filled as lists, then one array each (an array's item assignment costs more)
            ic = [0] * L.N_ICTL
            ic[L.C_ADAPTIVE] = int(adaptive)
            ic[L.C_HAS_DENSE] = int(stepper.has_dense)
            ic[L.C_N_OUT] = n_out
            ic[L.C_STRIDE] = stride
            ic[L.C_SNAP_EVERY] = every
            ic[L.C_MAX_STEPS] = int(max_steps)
            ic[L.C_N_CHECK] = stepper.n_check
            ic[L.C_HAS_ENERGY] = int(stepper.has_energy)
            ic[L.C_N_STEPS] = n_out * stride if n_steps is None else int(n_steps)
            ic[L.C_START_ORDER] = int(stepper.start_order) if adaptive else 0
            self.ictl = np.array(ic, dtype=np.int64)
            fc = [0.0] * L.N_FCTL
            fc[L.F_H] = float(h0 if adaptive else h_fixed)
            fc[L.F_TOL] = float(tol) if tol is not None else np.nan
            fc[L.F_THETA] = theta
            fc[L.F_ALPHA] = exponent
            fc[L.F_FAC_MIN] = fac_min
            fc[L.F_FAC_MAX] = fac_max
            fc[L.F_H_MIN] = h_min
            fc[L.F_BLOWUP] = blowup
            fc[L.F_DT_OUT] = dt_out
            self.fctl = np.array(fc, dtype=np.float64)
            self.acc = np.zeros(L.acc_size(m))
            self.info = np.zeros(L.N_INFO, dtype=np.int64)
            self.out = _nans((n_out + 1, m + 1))
            self.env = _nans((n_out + 1, m + 2))
            self.snaps = _nans((n_snap, stepper.n_check))
        self.Sn = np.zeros(self.S.shape, dtype=self.S.dtype)
        self.Sd = np.zeros(self.S.shape, dtype=self.S.dtype)
        self.work = np.zeros(max(stepper.work_size, 1))
        self.iwork = np.zeros(max(stepper.iwork_size, 1), dtype=np.int64)
        self.sio = np.zeros(L.N_SIO)
        self.obs = np.zeros(m)
        self.obs2 = np.zeros(m)
        self._call: tuple | None = None  # the driver call, built at the first advance()

    # ---- running ------------------------------------------------------------------------
    @property
    def adaptive(self) -> bool:
        return bool(self.ictl[L.C_ADAPTIVE])

    @property
    def n_out(self) -> int:
        return int(self.ictl[L.C_N_OUT])

    @property
    def steps(self) -> int:
        """Accepted steps so far."""
        return int(self.info[L.I_K])

    @property
    def status(self) -> Status:
        return Status(int(self.info[L.I_STATUS]))

    @property
    def finished(self) -> bool:
        """True once the run reached T or failed."""
        if not self.info[L.I_INIT]:
            return False
        if self.info[L.I_STATUS] != 0:
            return True
        if self.adaptive:
            return self.info[L.I_NSAMP] > self.n_out
        return self.info[L.I_K] >= self.ictl[L.C_N_STEPS]

    @property
    def time(self) -> float:
        """Time of the current (last valid) state."""
        return float(self.acc[L.A_T])

    def advance(self, steps: int | None = None, until: float | None = None) -> Status:
        """Run ``steps`` more accepted steps and/or until the time reaches ``until`` (whichever
        comes first; all remaining if neither); returns the status."""
        k_stop = _NO_STEP_LIMIT if steps is None else int(self.info[L.I_K]) + int(steps)
        t_stop = np.inf if until is None else float(until)
        sp = self.stepper
        call = self._call
        if call is None:
            call = self._call = self._driver_call()
        drive, head = call
        args = (
            *head, sp.meth, self.ictl, self.fctl, k_stop, t_stop, self.S, self.Sn, self.Sd, sp.p, self.work,
            self.iwork, sp.red, self.acc, self.info, self.sio, self.obs, self.obs2, self.out, self.env, self.snaps,
        )  # fmt: skip
        t0 = time.perf_counter()
        if sp.threads > 1:
            with numba_threads(sp.threads):
                drive(*args)
        else:  # one thread: no context to enter (a sub-millisecond cell's advance is a few µs of Python)
            drive(*args)
        self.wall_time += time.perf_counter() - t0
        return self.status

    def _driver_call(self) -> tuple:
        """(callable, the arguments before ``meth``): when this trajectory's arrays fit the compiled
        signature, the driver's addressed entry with the stepper's function addresses
        (:mod:`geosweep.kernels.core.addressed`), or its compiled entry point with its functions typed
        once (:mod:`geosweep.kernels.core.fastcall`); else the dispatcher and the stepper's own values."""
        sp = self.stepper
        b = fastcall.binding(sp)
        arrays = (self.ictl, self.fctl, self.S, self.Sn, self.Sd, self.work, self.iwork, self.acc, self.info,
                  self.sio, self.obs, self.obs2, self.out, self.env, self.snaps)  # fmt: skip
        if b is not None and b.accepts(arrays):
            return b.at if b.at is not None else (b.entry, (b.step, b.observe, b.dense, b.cb))
        return sp.drive, (sp.step, sp.observe, sp.dense, sp.cb)

    def __getstate__(self) -> dict:
        d = dict(self.__dict__)
        d["_call"] = None  # compiled entry points and addresses are per process
        return d

    # ---- persistence --------------------------------------------------------------------
    def checkpoint(self) -> dict[str, np.ndarray]:
        """Copies of every array the run carries (enough to :meth:`restore` it anywhere)."""
        d = {name: getattr(self, name).copy() for name in _PERSISTENT}
        d["wall_time"] = np.float64(self.wall_time)
        return d

    @classmethod
    def restore(cls, stepper: StepperSpec, saved: dict[str, np.ndarray]) -> Trajectory:
        traj = cls(stepper, saved["S"], T=1.0, dt_out=1.0, _restore=saved)
        traj.wall_time = float(saved.get("wall_time", 0.0))
        return traj

    @classmethod
    def grown(cls, stepper: StepperSpec, saved: dict[str, np.ndarray], target: Trajectory) -> Trajectory:
        """The saved run continued to ``target``'s longer span: ``target`` is a fresh trajectory of
        the same cell to a later T (same step, tolerance, controller, output interval). The samples,
        envelopes and snapshots already taken are kept; the rest runs as if T had been the later
        one from the start (fixed step and adaptive without dense output reach T₁ exactly as a
        longer run does; a dense-output run must have been saved before its last, clipped step).
        Raises ValueError when ``saved`` cannot be continued to ``target``."""
        old = cls.restore(stepper, saved)
        n1, n2 = old.n_out, target.n_out
        if n2 < n1:
            raise ValueError(f"cannot shorten a run ({n1} output intervals) to {n2}")
        same = (L.C_ADAPTIVE, L.C_HAS_DENSE, L.C_STRIDE, L.C_MAX_STEPS, L.C_N_CHECK, L.C_HAS_ENERGY)
        f1, f2 = old.fctl.copy(), target.fctl.copy()
        if old.adaptive:  # the first trial step was used once, at t = 0
            f1[L.F_H] = f2[L.F_H] = 0.0
        if any(old.ictl[i] != target.ictl[i] for i in same) or not np.array_equal(f1, f2, equal_nan=True):
            raise ValueError("the saved run has another step, tolerance, controller or output interval")
        if old.S.shape != target.S.shape or old.out.shape[1] != target.out.shape[1]:
            raise ValueError("the saved run has another state or observation layout")
        if not old.adaptive and old.ictl[L.C_N_STEPS] != n1 * old.ictl[L.C_STRIDE]:
            raise ValueError("the saved run has a step count that is not its span")
        if old.adaptive and old.stepper.has_dense and old.finished and old.info[L.I_STATUS] == 0:
            raise ValueError("a dense-output run saved after its last step (clipped to T) cannot be continued")
        old.ictl[L.C_N_OUT] = n2
        old.ictl[L.C_N_STEPS] = target.ictl[L.C_N_STEPS]
        e1, e2 = int(old.ictl[L.C_SNAP_EVERY]), int(target.ictl[L.C_SNAP_EVERY])
        old.ictl[L.C_SNAP_EVERY] = e2
        out, env, snaps = target.out.copy(), target.env.copy(), target.snaps.copy()
        out[: n1 + 1], env[: n1 + 1] = old.out, old.env
        for i in range(old.snaps.shape[0]):  # snapshots at sample i·e1 stay where the longer run has them
            if (i * e1) % e2 == 0 and (i * e1) // e2 < snaps.shape[0]:
                snaps[(i * e1) // e2] = old.snaps[i]
        old.out, old.env, old.snaps = out, env, snaps
        old.info[L.I_NSNAP] = (max(int(old.info[L.I_NSAMP]), 1) - 1) // e2 + 1
        old.ictl[L.C_HOLD] = target.ictl[L.C_HOLD]
        return old

    def rows_kept(self, n_samples: int) -> tuple[int, int]:
        """(samples, snapshots) of this run that a longer run from its first ``n_samples`` samples
        leaves as they are: the leading rows already taken."""
        every = int(self.ictl[L.C_SNAP_EVERY])
        return n_samples, min((n_samples - 1) // every + 1, self.snaps.shape[0]) if n_samples > 0 else 0

    # ---- results ------------------------------------------------------------------------
    @property
    def sample_times(self) -> np.ndarray:
        return np.arange(self.n_out + 1) * self.fctl[L.F_DT_OUT]

    @property
    def snapshot_times(self) -> np.ndarray:
        every = int(self.ictl[L.C_SNAP_EVERY])
        return np.arange(self.snaps.shape[0]) * every * self.fctl[L.F_DT_OUT]

    def samples(self, name: str) -> np.ndarray:
        """One observation column at every sample (NaN where not reached)."""
        return self.out[:, self.stepper.obs_names.index(name)]

    def envelope(self, name: str = "energy") -> tuple[np.ndarray, np.ndarray] | np.ndarray:
        """Per output interval, over every step in it: ``(min, max)`` of E − E0 for
        ``"energy"``; the max of a column with a MAX/MEANMAX reduction otherwise."""
        if name == "energy":
            return self.env[:, 0], self.env[:, 1]
        return self.env[:, 2 + self.stepper.obs_names.index(name)]

    @property
    def progress(self) -> float:
        """Fraction of the run done (by time; 1 once finished or failed)."""
        if self.finished:
            return 1.0
        T = self.n_out * self.fctl[L.F_DT_OUT]
        return float(min(self.acc[L.A_T] / T, 1.0)) if T > 0 else 0.0

    @property
    def step_size(self) -> np.ndarray:
        """The step in force at each sample (adaptive: the accepted step containing it)."""
        return self.out[:, -1]

    def reduced(self, name: str, what: str = "max") -> float:
        """Running reduction of an observation column over every step: ``max``, ``mean``, ``first``, ``last``."""
        j = self.stepper.obs_names.index(name)
        b = L.A_OBS + 3 * j
        if what == "max":
            return float(self.acc[b + 1])
        if what == "mean":
            return float(self.acc[b] / (self.info[L.I_K] + 1))
        if what == "first":
            return float(self.acc[b])
        if what == "last":
            return float(self.acc[b + 1])
        raise ValueError(what)

    def energy_summaries(self) -> dict[str, float]:
        """E0 and |E − E0| statistics over every step k = 0..K, and the drift slope (energy/time;
        0 when only the initial state exists)."""
        a = self.acc
        cnt = float(self.info[L.I_K] + 1)
        E0 = float(a[L.A_E0])
        den = cnt * a[L.A_STT] - a[L.A_ST] * a[L.A_ST]
        return {
            "E0": E0,
            "mean_abs_energy_error": float(a[L.A_SUM_ABS] / cnt),
            "max_abs_energy_error": float(a[L.A_MAX_ABS]),
            "max_rel_energy_error": float(a[L.A_MAX_ABS] / abs(E0)) if E0 != 0.0 else float("nan"),
            # one point (a run that failed at its first step) shows no drift: 0, not NaN
            "energy_drift_slope": float((cnt * a[L.A_STE] - a[L.A_ST] * a[L.A_SE]) / den) if den > 0 else 0.0,
        }

    def failure(self) -> dict[str, Any]:
        """``fail_step`` (from 1; 0 initial state; −1 none), ``fail_index``, ``fail_value``, ``fail_time``."""
        failed = self.info[L.I_STATUS] != 0
        return {
            "fail_step": int(self.info[L.I_FAIL_STEP]),
            "fail_index": int(self.info[L.I_FAIL_INDEX]),
            "fail_value": float(self.acc[L.A_FAIL_VALUE]),
            "fail_time": float(self.acc[L.A_T]) if failed else float("nan"),
        }

    def costs(self) -> dict[str, Any]:
        i = self.info
        k = int(i[L.I_K])
        return {
            "steps": k,
            "rejected_steps": int(i[L.I_REJECTED]),
            "f_evals": int(i[L.I_EVALS]),
            "solver_iterations": int(i[L.I_ITERS]),
            "solver_iterations_max": int(i[L.I_ITERS_MAX]),
            "h_min_used": float(self.acc[L.A_HMIN]) if k > 0 else float("nan"),
            "h_max_used": float(self.acc[L.A_HMAX]) if k > 0 else float("nan"),
            "max_err_est": float(self.acc[L.A_ERRMAX]) if self.adaptive else float("nan"),
            "extra_counter": int(i[L.I_EXTRA]),
        }
