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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geosweep.kernels.core.trajectory import Reductions, Trajectory
from geosweep.kernels.registry import Diagnostic

#: ``(traj, model, integrator, observable) -> value`` of a :class:`Derived` output
DeriveFn = Callable[[Trajectory, Any, str, "Observable"], Any]


@dataclass(frozen=True)
class Output:
    """One stored value of an observable: its :class:`Diagnostic` (name, dims, units …)."""

    diagnostic: Diagnostic
    #: position of the kind in the store's list of diagnostics (samples first)
    rank: int = 0

    def value(self, traj: Trajectory, model: Any, integrator: str, obs: Observable) -> Any:
        raise NotImplementedError


@dataclass(frozen=True)
class Samples(Output):
    """The observable's columns at every sample: dims ``("time",)`` (one column) or
    ``("time", "component")`` (several)."""

    def value(self, traj, model, integrator, obs):
        if len(obs.columns) == 1:
            return traj.samples(obs.columns[0]).copy()
        j = traj.stepper.obs_names.index(obs.columns[0])
        return traj.out[:, j : j + len(obs.columns)].copy()


@dataclass(frozen=True)
class Envelope(Output):
    """The max of the column over every step of each output interval (MAX/MEANMAX reductions)."""

    rank: int = 1

    def value(self, traj, model, integrator, obs):
        return np.array(traj.envelope(obs.columns[0]), copy=True)


@dataclass(frozen=True)
class Mean(Output):
    """The mean of the column over every accepted step k = 0..K (MEANMAX reduction)."""

    rank: int = 2

    def value(self, traj, model, integrator, obs):
        return np.float64(traj.reduced(obs.columns[0], "mean"))


@dataclass(frozen=True)
class Max(Output):
    """The running reduction's result over every step: the max (MAX/MEANMAX), the max deviation
    (DEV/DEVNORM3) or the time (WHENPOS, ``what="first"``/``"last"``)."""

    rank: int = 3
    what: str = "max"

    def value(self, traj, model, integrator, obs):
        return np.float64(traj.reduced(obs.columns[0], self.what))


@dataclass(frozen=True)
class Derived(Output):
    """A value computed from the trajectory by ``fn(traj, model, integrator, observable)`` (e.g.
    a deviation that depends on the system's symmetry, or NaN for methods it does not apply to)."""

    rank: int = 3
    fn: DeriveFn | None = None

    def value(self, traj, model, integrator, obs):
        assert self.fn is not None
        return self.fn(traj, model, integrator, obs)


@dataclass(frozen=True)
class Observable:
    """An observation column (or ``columns``, e.g. the three components of a momentum) with its
    running reduction over every accepted step and the values a cell stores from it.

    ``reduction`` is a :class:`Reductions` code or ``model -> code`` (e.g. a momentum reduced
    only when the system conserves it); it applies to the first column (the others are reduced
    with it, e.g. DEVNORM3, or not at all)."""

    name: str
    reduction: int | Callable[[Any], int] = Reductions.NONE
    outputs: tuple[Output, ...] = ()
    columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.columns:
            object.__setattr__(self, "columns", (self.name,))

    def reduction_for(self, model: Any) -> int:
        return int(self.reduction(model) if callable(self.reduction) else self.reduction)


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
        red[j] = o.reduction_for(model)
        j += len(o.columns)
    return red


def _outputs(observables: Sequence[Observable]) -> list[tuple[Output, Observable]]:
    pairs = [(out, o) for o in observables for out in o.outputs]
    return sorted(pairs, key=lambda p: p[0].rank)  # stable: declaration order within a kind


def diagnostics(observables: Sequence[Observable]) -> tuple[Diagnostic, ...]:
    """The stored diagnostics of ``observables`` (samples, envelopes, means, maxima/derived)."""
    return tuple(out.diagnostic for out, _ in _outputs(observables))


def values(
    observables: Sequence[Observable], traj: Trajectory, model: Any = None, integrator: str = ""
) -> dict[str, Any]:
    """A finished trajectory's stored values of ``observables``, keyed by the stored names."""
    return {out.diagnostic.name: out.value(traj, model, integrator, o) for out, o in _outputs(observables)}
