"""Many short trajectories of one kind advanced in one compiled call, their values computed together.

A 0.1 ms cell spends about as long in Python around its kernel (a driver call, reading its values)
as in the kernel, and a driver call hands the GIL over twice: threads running such cells side by
side mostly wait for each other (issue 21). :func:`advance_together` stacks fresh trajectories of
one kind (the same compiled functions, method record, reductions and array shapes) along a leading
cell axis and advances every row in one ``nogil`` call (:func:`drive_rows`: a loop calling the
family's compiled driver through its addressed entry, the same machine code as
:meth:`Trajectory.advance`, so every row is bitwise the trajectory run alone). Each trajectory's
arrays become views of its row, so the per-cell API (``checkpoint``, a family's ``collect``)
still works on it. A :class:`Stack` gives the stacked arrays to a family's ``collect_many``, which
computes every stored value for all rows at once (:func:`stacked_values`, and
:func:`geosweep.kernels.core.cells.common_values_many`).

>>> trajs = [family.start(model, integrator, request, options) for model in models]
>>> for stack in advance_together(trajs):
...     values = family.collect_many(models_of(stack), integrator, stack, options)  # (rows, ...) each
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from geosweep.kernels._jit import kjit
from geosweep.kernels.core import fastcall
from geosweep.kernels.core import layout as L
from geosweep.kernels.core.addressed import _functions
from geosweep.kernels.core.trajectory import StepperSpec, Trajectory

#: a trajectory's arrays in the driver's order (``p`` comes from the stepper, between ``work`` and ``iwork``)
ARRAYS = ("ictl", "fctl", "S", "Sn", "Sd", "work", "iwork", "acc", "info", "sio", "obs", "obs2", "out", "env", "snaps")
_NO_LIMIT = np.int64(np.iinfo(np.int64).max)


@kjit
def drive_rows(addrs, tref, meth, ictl, fctl, k_stop, t_stop, S, Sn, Sd, p, work, iwork, red, acc, info, sio, obs,
               obs2, out, env, snaps):  # fmt: skip
    """The driver (and functions) ``addrs``/``tref`` name (:mod:`geosweep.kernels.core.addressed`) on
    every row of the stacked arrays, one row after the other; ``meth`` and ``red`` are shared."""
    drive, step, observe, dense, cb = _functions(addrs, tref)
    for k in range(S.shape[0]):
        drive(step, observe, dense, cb, meth, ictl[k], fctl[k], k_stop, t_stop, S[k], Sn[k], Sd[k], p[k], work[k],
              iwork[k], red, acc[k], info[k], sio[k], obs[k], obs2[k], out[k], env[k], snaps[k])  # fmt: skip
    return 0


class Stack:
    """Trajectories of one kind stacked along a leading row axis: ``S``, ``out``, ``env``, ``acc``,
    ``info``, ``snaps`` … as :class:`Trajectory` has them, and ``p`` (each row's parameter vector).
    ``stepper``: the first row's (the rows share its functions, method, reductions and observation
    names); ``index``: each row's position in the caller's list of cells; ``wall_time``: each row's
    share of the time spent advancing the stack (s). ``trajs``: each row as a :class:`Trajectory` whose
    arrays are views of its row (built on first use when the stack was not made from trajectories)."""

    # the stacked arrays (set from ``arrays``; one row per trajectory)
    ictl: np.ndarray
    fctl: np.ndarray
    S: np.ndarray
    Sn: np.ndarray
    Sd: np.ndarray
    work: np.ndarray
    iwork: np.ndarray
    acc: np.ndarray
    info: np.ndarray
    sio: np.ndarray
    obs: np.ndarray
    obs2: np.ndarray
    out: np.ndarray
    env: np.ndarray
    snaps: np.ndarray

    def __init__(
        self,
        arrays: dict[str, np.ndarray],
        p: np.ndarray,
        stepper: StepperSpec,
        index: list[int],
        trajs: list[Trajectory] | None = None,
    ) -> None:
        self.arrays = arrays
        self.p = p
        self.stepper = stepper
        self.index = index
        self._trajs = trajs
        self.wall_time = np.zeros(len(p)) if trajs is None else np.array([t.wall_time for t in trajs])
        for name, a in arrays.items():
            setattr(self, name, a)

    def __len__(self) -> int:
        return len(self.p)

    @property
    def trajs(self) -> list[Trajectory]:
        if self._trajs is None:
            self._trajs = [self._row(k) for k in range(len(self))]
        return self._trajs

    def _row(self, k: int) -> Trajectory:
        t = Trajectory.__new__(Trajectory)
        t.stepper = dataclasses.replace(self.stepper, p=self.p[k])
        t.wall_time = float(self.wall_time[k])
        for name, a in self.arrays.items():
            setattr(t, name, a[k])
        t._call = None
        return t

    def column(self, name: str) -> int:
        """The observation column ``name`` (its index in ``out``)."""
        return self.stepper.obs_names.index(name)

    def reduced(self, name: str, what: str = "max") -> np.ndarray:
        """:meth:`Trajectory.reduced` of every row (float64, one per row)."""
        b = L.A_OBS + 3 * self.column(name)
        if what in ("max", "last"):
            return self.acc[:, b + 1].copy()
        if what == "mean":
            return self.acc[:, b] / (self.info[:, L.I_K] + 1)
        if what == "first":
            return self.acc[:, b].copy()
        raise ValueError(what)

    @property
    def status(self) -> np.ndarray:
        return self.info[:, L.I_STATUS].copy()

    def advance(self) -> None:
        """Advance every row to its end in one compiled ``nogil`` call (the rows must be of one kind,
        :func:`fresh_stack` or :func:`advance_together`); each row's ``wall_time`` grows by its share of
        the call's time, in proportion to its accepted steps."""
        sp = self.stepper
        b = fastcall.binding(sp)
        if b is None or b.at is None or len(b.at[1]) != 2 or sp.threads > 1:  # row by row, each as it runs alone
            for k, t in enumerate(self.trajs):
                t.advance()
                self.wall_time[k] = t.wall_time
            return
        addrs, tref = b.at[1]
        a = self.arrays
        t0 = time.perf_counter()
        drive_rows(addrs, tref, sp.meth, a["ictl"], a["fctl"], _NO_LIMIT, np.inf, a["S"], a["Sn"], a["Sd"], self.p,
                   a["work"], a["iwork"], sp.red, a["acc"], a["info"], a["sio"], a["obs"], a["obs2"], a["out"],
                   a["env"], a["snaps"])  # fmt: skip
        spent = time.perf_counter() - t0
        if not len(self):  # compiled (or loaded) only: warm_rows
            return
        steps = a["info"][:, L.I_K].astype(float) + 1.0  # + 1: the initial state's observation
        self.wall_time += spent * (steps / steps.sum())
        if self._trajs is not None:
            for t, w in zip(self._trajs, self.wall_time.tolist()):
                t.wall_time = w


def fresh_stack(template: Trajectory, S0: np.ndarray, p: np.ndarray, index: list[int] | None = None) -> Stack:
    """A stack of fresh trajectories like ``template`` (a fresh trajectory: its stepper, request and
    options) from each row of ``S0`` (rows, state) with the parameter vector of the same row of ``p``
    — bitwise the trajectories a family's ``start`` makes for those initial states and parameters,
    without building each one. Not advanced yet (:meth:`Stack.advance`)."""
    K = len(S0)
    arrays = {}
    for name in ARRAYS:
        a = getattr(template, name)
        arrays[name] = np.empty((K, *a.shape), dtype=a.dtype)
        arrays[name][...] = a
    arrays["S"][...] = S0
    return Stack(arrays, np.ascontiguousarray(p, dtype=np.float64), template.stepper,
                 list(range(K)) if index is None else index)  # fmt: skip


def warm_rows(template: Trajectory) -> None:
    """Compile (or load from the cache) :func:`drive_rows` for trajectories of ``template``'s kind, running
    no step (a family's ``warmup``: workers must not compile it side by side)."""
    fresh_stack(template, template.S[None, :][:0], template.stepper.p[None, :][:0]).advance()


def _kind(traj: Trajectory) -> tuple | None:
    """What trajectories advanced in one call share (None: this one runs alone): the addressed entry's
    functions, the method record, reductions and the arrays' shapes (the others' follow from these:
    the observation columns from ``red``, the state's scratch from ``S``)."""
    sp = traj.stepper
    if sp.threads > 1:
        return None
    b = fastcall.binding(sp)
    if b is None or b.at is None or len(b.at[1]) != 2:
        return None
    t = traj
    shapes = (t.S.shape, t.out.shape, t.snaps.shape, t.work.shape, t.iwork.shape, sp.p.shape)
    return id(b.at[1][0]), id(b.at[1][1]), sp.meth.tobytes(), sp.red.tobytes(), shapes


def _fits(traj: Trajectory) -> bool:
    """The trajectory's arrays have the compiled driver's types (checked on one trajectory of a kind:
    fresh trajectories of one kind are built alike)."""
    b = fastcall.binding(traj.stepper)
    return b is not None and b.accepts(tuple(getattr(traj, n) for n in ARRAYS))


def advance_together(trajs: Sequence[Trajectory]) -> list[Stack]:
    """Advance every trajectory to its end (as ``advance()``), those of one kind in one compiled
    ``nogil`` call over their stacked rows; returns the stacks (every trajectory in exactly one).
    Each trajectory's arrays become views of its row; its ``wall_time`` gets its share of the call's
    time, in proportion to its accepted steps. A trajectory without an addressed driver entry (or
    running on several Numba threads) is advanced alone and is a stack of one. The trajectories must
    be fresh (from a family's ``start``, not advanced yet)."""
    kinds: dict[Any, list[int]] = {}
    for i, t in enumerate(trajs):
        key = _kind(t)
        kinds.setdefault(key if key is not None else ("alone", i), []).append(i)
    for key in [k for k in kinds if k[0] != "alone" and not _fits(trajs[kinds[k][0]])]:
        kinds.update({("alone", i): [i] for i in kinds.pop(key)})
    stacks = []
    for key, members in kinds.items():
        rows = [trajs[i] for i in members]
        if key[0] == "alone":
            rows[0].advance()
        arrays = {n: np.stack([getattr(t, n) for t in rows]) for n in ARRAYS}
        stack = Stack(arrays, np.stack([t.stepper.p for t in rows]), rows[0].stepper, members, rows)
        if key[0] != "alone":
            stack.advance()
        for k, t in enumerate(rows):
            for n in ARRAYS:
                setattr(t, n, arrays[n][k])
        stacks.append(stack)
    return stacks
