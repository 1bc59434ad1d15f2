"""One declaration per observable: its observation columns, its running reduction and the
values it stores (issue 24: one vocabulary from kernel to store).

A stepper's ``observe`` writes one row of observation columns per accepted step; the driver
reduces each column over every step (:class:`~geosweep.kernels.core.trajectory.Reductions`);
a family stores some of the samples, envelopes and reductions under names of its own. An
:class:`Observable` says all of it once::

    Observable("unit_error", Reductions.MEANMAX, (
        Samples(Diagnostic("unit_error", ("time",), "1", "…")),
        Envelope(Diagnostic("unit_error_upper", ("time",), "1", "…", computed_over="every step")),
        Mean(Diagnostic("mean_unit_error", (), "1", "…", computed_over="every step")),
        Max(Diagnostic("max_unit_error", (), "1", "…", computed_over="every step")),
    ))

and a family derives from its tuple of observables the stepper's ``obs_names`` and ``red``
(:func:`obs_names`, :func:`reductions`), the column numbers its ``observe`` kernel writes
(:func:`columns`), the store's diagnostics (:func:`diagnostics`) and a finished trajectory's
values keyed by the stored names (:func:`values`). Adding a stored diagnostic is one
:class:`Observable` (or one more output of an existing one) plus the code in ``observe`` that
computes its column.

Diagnostics come out grouped by kind — samples, envelopes, means, maxima and derived values in
their :attr:`Output.rank` — and in declaration order within a kind, so a family's store layout
does not depend on how its observables are grouped.

Beyond one column and one model:

* an output with ``when=`` applies only to the models it accepts (the SE(3)ⁿ family stores the
  column ``U_0`` as ``U_m`` for the torus and as ``U_grav`` for the pendulum);
* ``column=`` picks one column of a multi-column observable (``Samples``, ``Max``), :class:`MaxEach`
  keeps the reduction of every column, and ``reduction`` may be one code per column;
* :class:`RunValues` declares values computed from the whole cell (a paper's error norm, a
  reference solution's error) that no observation column holds; a :class:`Derived` output with
  ``options=True`` also gets the cell's integrator options;
* :func:`with_outputs` attaches a family's outputs to the columns a shared stepper declares (the
  group-generic Lie stepper observes the same columns for every family that uses it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from geosweep.kernels.core.trajectory import Reductions, Trajectory

if TYPE_CHECKING:
    from geosweep.kernels.core.batch import Stack
from geosweep.kernels.registry import Diagnostic

#: ``(traj, model, integrator, observable) -> value`` of a :class:`Derived` output (with
#: ``options=True`` also the cell's integrator options as a fifth argument)
DeriveFn = Callable[..., Any]


@dataclass(frozen=True)
class Output:
    """One stored value of an observable: its :class:`Diagnostic` (name, dims, units …)."""

    diagnostic: Diagnostic
    #: position of the kind in the store's list of diagnostics (samples first)
    rank: int = 0
    #: ``model -> bool``: the models this output is stored for (None: every model)
    when: Callable[[Any], bool] | None = None
    #: the column (index into ``Observable.columns``) the output reads; None: the first (or, for
    #: :class:`Samples`, all of them)
    column: int | None = None

    def applies(self, model: Any) -> bool:
        return self.when is None or (model is not None and bool(self.when(model)))

    def col(self, obs: Observable) -> str:
        return obs.columns[self.column or 0]

    def value(self, traj: Trajectory, model: Any, integrator: str, obs: Observable, options: Any = None) -> Any:
        raise NotImplementedError

    def many(self, stack: Stack, models: Sequence[Any], integrator: str, obs: Observable, options: Any = None) -> Any:
        """:meth:`value` of every row of ``stack`` (:mod:`geosweep.kernels.core.batch`) with a leading
        row axis, bitwise each row's own; ``models``: the rows' models. By default row by row."""
        return np.array([self.value(t, m, integrator, obs, options) for t, m in zip(stack.trajs, models)])


@dataclass(frozen=True)
class Samples(Output):
    """The observable's columns at every sample: dims ``("time",)`` (one column, or the one
    picked by ``column``) or ``("time", "component")`` (several)."""

    def value(self, traj, model, integrator, obs, options=None):
        if len(obs.columns) == 1 or self.column is not None:
            return traj.samples(self.col(obs)).copy()
        j = traj.stepper.obs_names.index(obs.columns[0])
        return traj.out[:, j : j + len(obs.columns)].copy()

    def many(self, stack, models, integrator, obs, options=None):
        if len(obs.columns) == 1 or self.column is not None:
            return stack.out[:, :, stack.column(self.col(obs))].copy()
        j = stack.column(obs.columns[0])
        return stack.out[:, :, j : j + len(obs.columns)].copy()


@dataclass(frozen=True)
class Envelope(Output):
    """The max of the column over every step of each output interval (MAX/MEANMAX reductions)."""

    rank: int = 1

    def value(self, traj, model, integrator, obs, options=None):
        return np.array(traj.envelope(self.col(obs)), copy=True)

    def many(self, stack, models, integrator, obs, options=None):
        if self.col(obs) == "energy":  # (min, max) of E − E0
            return np.stack([stack.env[:, :, 0], stack.env[:, :, 1]], axis=1)
        return stack.env[:, :, 2 + stack.column(self.col(obs))].copy()


@dataclass(frozen=True)
class Mean(Output):
    """The mean of the column over every accepted step k = 0..K (MEANMAX reduction)."""

    rank: int = 2

    def value(self, traj, model, integrator, obs, options=None):
        return np.float64(traj.reduced(self.col(obs), "mean"))

    def many(self, stack, models, integrator, obs, options=None):
        return stack.reduced(self.col(obs), "mean")


@dataclass(frozen=True)
class Max(Output):
    """The running reduction's result over every step: the max (MAX/MEANMAX), the max deviation
    (DEV/DEVNORM3) or the time (WHENPOS, ``what="first"``/``"last"``)."""

    rank: int = 3
    what: str = "max"

    def value(self, traj, model, integrator, obs, options=None):
        return np.float64(traj.reduced(self.col(obs), self.what))

    def many(self, stack, models, integrator, obs, options=None):
        return stack.reduced(self.col(obs), self.what)


@dataclass(frozen=True)
class MaxEach(Output):
    """The running reduction's result of every column (e.g. the max drift of each component of a
    momentum, DEV per column): dims ``("component",)`` or another per-column dim."""

    rank: int = 3
    what: str = "max"

    def value(self, traj, model, integrator, obs, options=None):
        return np.array([traj.reduced(c, self.what) for c in obs.columns])

    def many(self, stack, models, integrator, obs, options=None):
        return np.stack([stack.reduced(c, self.what) for c in obs.columns], axis=1)


@dataclass(frozen=True)
class Derived(Output):
    """A value computed from the trajectory by ``fn(traj, model, integrator, observable)`` (e.g.
    a deviation that depends on the system's symmetry, or NaN for methods it does not apply to);
    with ``options=True``, ``fn(traj, model, integrator, observable, options)``."""

    rank: int = 3
    fn: DeriveFn | None = None
    options: bool = False
    #: ``fn`` for every row of a :class:`~geosweep.kernels.core.batch.Stack` at once, ``(stack, models,
    #: integrator, observable[, options])``, bitwise ``fn`` of each row (None: ``fn`` row by row)
    fn_many: DeriveFn | None = None

    def value(self, traj, model, integrator, obs, options=None):
        assert self.fn is not None
        if self.options:
            return self.fn(traj, model, integrator, obs, options or {})
        return self.fn(traj, model, integrator, obs)

    def many(self, stack, models, integrator, obs, options=None):
        if self.fn_many is None:
            return super().many(stack, models, integrator, obs, options)
        if self.options:
            return self.fn_many(stack, models, integrator, obs, options or {})
        return self.fn_many(stack, models, integrator, obs)


@dataclass(frozen=True)
class Observable:
    """An observation column (or ``columns``, e.g. the three components of a momentum) with its
    running reduction over every accepted step and the values a cell stores from it.

    ``reduction`` is a :class:`Reductions` code or ``model -> code`` (e.g. a momentum reduced
    only when the system conserves it); it applies to the first column (the others are reduced
    with it, e.g. DEVNORM3, or not at all). A tuple of codes (or ``model -> tuple``) gives one
    code per column."""

    name: str
    reduction: int | tuple[int, ...] | Callable[[Any], Any] = Reductions.NONE
    outputs: tuple[Output, ...] = ()
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.columns:
            object.__setattr__(self, "columns", (self.name,))

    def reduction_for(self, model: Any) -> int:
        """The code of the first column (see :meth:`codes` for every column)."""
        return self.codes(model)[0]

    def codes(self, model: Any) -> tuple[int, ...]:
        """One :class:`Reductions` code per column for ``model``."""
        red = self.reduction(model) if callable(self.reduction) else self.reduction
        if isinstance(red, tuple):
            if len(red) != len(self.columns):
                raise ValueError(f"observable {self.name!r}: {len(red)} reductions for {len(self.columns)} columns")
            return tuple(int(r) for r in red)
        return (int(red),) + (int(Reductions.NONE),) * (len(self.columns) - 1)


@dataclass(frozen=True)
class RunValues(Observable):
    """Stored values with no observation column: computed from the finished cell by
    :class:`Derived` outputs (e.g. an error norm over the samples, a reference solution's error)."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "columns", ())

    def codes(self, model: Any) -> tuple[int, ...]:
        return ()


def with_outputs(base: Sequence[Observable], outputs: dict[str, tuple[Output, ...]]) -> tuple[Observable, ...]:
    """``base`` (a shared stepper's columns and reductions) with a family's ``outputs`` attached by
    observable name; observables not named store nothing. Unknown names are an error."""
    unknown = set(outputs) - {o.name for o in base}
    if unknown:
        raise ValueError(f"no observable named {sorted(unknown)} in {[o.name for o in base]}")
    return tuple(dataclasses.replace(o, outputs=tuple(outputs.get(o.name, ()))) for o in base)


def obs_names(observables: Sequence[Observable]) -> tuple[str, ...]:
    """The stepper's observation column names, in order."""
    return tuple(c for o in observables for c in o.columns)


def columns(observables: Sequence[Observable]) -> dict[str, int]:
    """Column name → its index in the observation vector (what ``observe`` writes)."""
    return {c: j for j, c in enumerate(obs_names(observables))}


def reductions(observables: Sequence[Observable], model: Any = None) -> np.ndarray:
    """The stepper's ``red`` array (one code per column) for ``model``."""
    red = np.zeros(len(obs_names(observables)), dtype=np.int64)
    j = 0
    for o in observables:
        codes = o.codes(model)
        red[j : j + len(codes)] = codes
        j += len(o.columns)
    return red


#: process-wide state: id(observables) -> (the observables, their outputs) for declarations (tuples) none of whose
#: outputs depends on the model (no ``when``): the same for every cell, found once (a few recent declarations are kept)
_MODEL_FREE: dict[int, tuple[Sequence[Observable], tuple[tuple[Output, Observable], ...]]] = {}
_MODEL_FREE_MAX = 64


def _outputs(observables: Sequence[Observable], model: Any = None) -> tuple[tuple[Output, Observable], ...]:
    hit = _MODEL_FREE.get(id(observables))  # the entry keeps its declaration alive: an id names one object
    if hit is not None:
        return hit[1]
    pairs = [(out, o) for o in observables for out in o.outputs if out.applies(model)]
    found = tuple(sorted(pairs, key=lambda p: p[0].rank))  # stable: declaration order within a kind
    if isinstance(observables, tuple) and all(out.when is None for o in observables for out in o.outputs):
        if len(_MODEL_FREE) >= _MODEL_FREE_MAX:
            _MODEL_FREE.clear()
        _MODEL_FREE[id(observables)] = (observables, found)
    return found


def diagnostics(observables: Sequence[Observable], model: Any = None) -> tuple[Diagnostic, ...]:
    """The stored diagnostics of ``observables`` for ``model`` (samples, envelopes, means,
    maxima/derived; outputs with a ``when`` need a model they apply to)."""
    return tuple(out.diagnostic for out, _ in _outputs(observables, model))


def names(observables: Sequence[Observable], model: Any = None) -> tuple[str, ...]:
    """The stored names of ``observables`` for ``model``, in store order."""
    return tuple(d.name for d in diagnostics(observables, model))


def values(
    observables: Sequence[Observable],
    traj: Trajectory,
    model: Any = None,
    integrator: str = "",
    options: Any = None,
) -> dict[str, Any]:
    """A finished trajectory's stored values of ``observables``, keyed by the stored names
    (``options``: the cell's integrator options, for :class:`Derived` outputs that read them)."""
    pairs = _outputs(observables, model)
    return {out.diagnostic.name: out.value(traj, model, integrator, o, options) for out, o in pairs}


def values_many(
    observables: Sequence[Observable],
    stack: Stack,
    models: Sequence[Any],
    integrator: str = "",
    options: Any = None,
) -> dict[str, Any]:
    """:func:`values` of every row of ``stack`` at once, each with a leading row axis (bitwise each
    row's own). The rows' models must store the same names (outputs with ``when=`` decided by the
    first)."""
    pairs = _outputs(observables, models[0])
    if any(out.when is not None for o in observables for out in o.outputs):
        if any(names(observables, m) != names(observables, models[0]) for m in models[1:]):
            raise ValueError("the rows' models store different names")
    return {out.diagnostic.name: out.many(stack, models, integrator, o, options) for out, o in pairs}
