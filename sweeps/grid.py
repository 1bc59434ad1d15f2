"""The grid of a sweep: labelled axes, cells, and slices of cells for Dask tasks.

Axes, in store order: ``integrator``, ``h`` (if any fixed-step integrator), ``tol`` (if any
adaptive integrator), then every swept system parameter in the order the spec lists them. A
cell is one index per axis (a tuple); its coordinates label it.

When a spec mixes fixed-step and adaptive integrators, the grid is still a full hypercube:
a fixed-step integrator runs only at the first ``tol`` and an adaptive one only at the first
``h``; the other cells are *not applicable* (status ``not_applicable``, never run).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geosweep.kernels.registry import IntegratorDef, RunRequest, SystemDef
from geosweep.sweeps.spec import SweepSpec

Cell = tuple[int, ...]


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[Any, ...]
    units: str
    doc: str


class Grid:
    """Cartesian product of a spec's axes.

    ``sysdef`` and ``idefs`` (integrator name → definition) are the plan's resolved
    declarations: the grid never looks names up in the global registries.
    """

    def __init__(self, spec: SweepSpec, sysdef: SystemDef, idefs: Mapping[str, IntegratorDef]):
        self.spec = spec
        self.idefs = dict(idefs)
        axes = [Axis("integrator", tuple(spec.integrators), "", "integrator name")]
        if spec.h:
            axes.append(Axis("h", tuple(spec.h), sysdef.time_units, "step size of fixed-step integrators"))
        if spec.tol:
            axes.append(Axis("tol", tuple(spec.tol), "1", "error tolerance of adaptive integrators"))
        self.n_method_axes = len(axes)
        for name, values in spec.swept_params().items():
            p = sysdef.param(name)
            axes.append(Axis(name, tuple(values), p.units, p.doc))
        self.axes: tuple[Axis, ...] = tuple(axes)
        #: method indices (integrator, h/tol) -> the cells' (RunRequest, options): the same for every cell
        #: of a method, built once (a request is frozen; callers get their own copy of the options)
        self._requests: dict[tuple[int, ...], tuple[RunRequest, dict[str, Any]]] = {}
        #: method indices -> (integrator name, steps) of a runnable method, None for fillers (:meth:`cost`)
        self._methods: dict[tuple[int, ...], tuple[str, int] | None] = {}

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.axes)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(len(a.values) for a in self.axes)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))

    def cells(self) -> list[Cell]:
        """Every cell, in C order (a list of tuples: O(cells) Python objects; the driver's bulk
        work uses the arrays of :meth:`applicable_mask` and :meth:`costs` instead)."""
        return list(itertools.product(*(range(n) for n in self.shape)))

    @property
    def first_cell(self) -> Cell:
        return (0,) * len(self.shape)

    @property
    def combination_shape(self) -> tuple[int, ...]:
        """Extents of the swept parameter axes (the models' keys, :meth:`combination`, in C order)."""
        return self.shape[self.n_method_axes :]

    def applicable_methods(self) -> np.ndarray:
        """Boolean array over the method axes (integrator, h, tol): where :meth:`applicable` holds."""
        method_shape = self.shape[: self.n_method_axes]
        out = np.zeros(method_shape, dtype=bool)
        for m in np.ndindex(*method_shape):
            out[m] = self.applicable(m)
        return out

    def applicable_mask(self) -> np.ndarray:
        """Boolean array over the grid, True for the cells that run (a read-only broadcast view of
        :meth:`applicable_methods`: no per-cell work)."""
        m = self.applicable_methods()
        return np.broadcast_to(m.reshape(m.shape + (1,) * (len(self.shape) - m.ndim)), self.shape)

    def runnable(self) -> int:
        """How many cells run (the grid without the not-applicable fillers)."""
        return int(self.applicable_methods().sum()) * int(np.prod(self.combination_shape, dtype=np.int64))

    def pending(self, done: np.ndarray) -> list[Cell]:
        """The runnable cells where ``done`` (a boolean array over the grid) is false, in C order."""
        return [tuple(int(i) for i in c) for c in np.argwhere(self.applicable_mask() & ~done)]

    def steps(self, method: tuple[int, ...]) -> int:
        """Steps :meth:`cost` assumes for a cell at ``method`` (its indices along the method axes)."""
        c = dict(zip(self.dims, method))
        if self.idefs[self.axes[0].values[c["integrator"]]].adaptive:
            return 20 * (self.spec.n_time - 1)  # a guess: ~20 accepted steps per output interval
        return self.spec.n_steps(self.axes[self.dims.index("h")].values[c["h"]])

    def costs(self, per_step: np.ndarray) -> np.ndarray:
        """:meth:`cost` of every cell as an array over the grid (0 where not applicable), from
        ``per_step`` (n_integrators, *combination_shape): seconds per step of each integrator on each
        combination's model. Bitwise what :meth:`cost` gives cell by cell."""
        out = np.zeros(self.shape)
        for m in np.ndindex(*self.shape[: self.n_method_axes]):
            if self.applicable(m):
                out[m] = self.steps(m) * per_step[m[0]]
        return out

    def coords(self, cell: Cell) -> dict[str, Any]:
        return {a.name: a.values[i] for a, i in zip(self.axes, cell)}

    def params_of(self, cell: Cell) -> dict[str, Any]:
        """System parameters of a cell (fixed + swept)."""
        c = self.coords(cell)
        combo = dict(self.spec.fixed_params())
        combo.update({a.name: c[a.name] for a in self.axes[self.n_method_axes :]})
        return combo

    def combination(self, cell: Cell) -> tuple[int, ...]:
        """Index of the cell's parameter combination along the swept axes (the plan's model key)."""
        return tuple(cell[self.n_method_axes :])

    def applicable(self, cell: Cell) -> bool:
        """False for the filler cells of a mixed fixed-step/adaptive grid (see module doc)."""
        c = dict(zip(self.dims, cell))
        if self.idefs[self.axes[0].values[c["integrator"]]].adaptive:
            return c.get("h", 0) == 0
        return c.get("tol", 0) == 0

    def options(self, integrator: str) -> dict[str, Any]:
        """Options passed to ``run``: declared defaults overridden by the spec. An adaptive method's
        tolerance is never among them: it travels in the :class:`RunRequest` (the sweep's ``tol`` axis)."""
        options = self.spec.options_for(integrator, self.idefs[integrator])
        if self.idefs[integrator].adaptive:
            options.pop("tol", None)
        return options

    def request(self, cell: Cell) -> tuple[RunRequest, dict[str, Any]]:
        """(RunRequest, options) for the family's ``run``: the cell's ``h`` or ``tol``, the spec's time grid."""
        key = tuple(cell[: self.n_method_axes])
        hit = self._requests.get(key)
        if hit is None:
            c = self.coords(cell)
            name = c["integrator"]
            step = {"tol": float(c["tol"])} if self.idefs[name].adaptive else {"h": float(c["h"])}
            req = RunRequest(self.spec.T, self.spec.dt_out, snapshot_every=self.spec.snapshot_every, **step)
            hit = self._requests[key] = (req, self.options(name))
        return hit[0], dict(hit[1])

    def cost(self, cell: Cell, cost_per_step: Callable[[str], float]) -> float:
        """Estimated single-core seconds of a cell (sizes slices; need not be exact).

        ``cost_per_step(integrator)`` gives seconds per step on the cell's model.
        """
        key = tuple(cell[: self.n_method_axes])
        if key not in self._methods:  # found once per method: a cell's segments ask per cell
            name = self.axes[0].values[key[0]]
            self._methods[key] = (name, self.steps(key)) if self.applicable(key) else None
        method = self._methods[key]
        if method is None:
            return 0.0
        return method[1] * cost_per_step(method[0])

    def slices(
        self,
        cells: list[Cell],
        costs: Mapping[Cell, float],
        target_seconds: float = 10.0,
        n_workers: int = 1,
        exact: bool = False,
    ) -> list[list[Cell]]:
        """Group cells into slices of about ``target_seconds`` of work each (``costs``: seconds per cell).

        Cells sharing system parameters are kept together (the model is built once per
        slice). At least ``4 × n_workers`` slices are made when there are enough cells,
        so no worker idles while another finishes a long slice; ``exact=True`` uses
        ``target_seconds`` as given.
        """
        if not cells:
            return []
        k = self.n_method_axes
        ordered = sorted(cells, key=lambda cell: (cell[k:], cell[:k]))
        cost = [float(costs[c]) for c in ordered]
        bounds = slice_bounds(cost, slice_target(cost, target_seconds, n_workers, exact))
        return [ordered[a:b] for a, b in zip(bounds[:-1], bounds[1:])]

    def ordered_costs(self, costs: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
        """The values of ``costs`` (an array over the grid) in the order :meth:`slices` takes cells:
        parameter combinations outermost, method axes inside; only where ``mask`` (default: every cell)."""
        k = self.n_method_axes
        order = list(range(k, len(self.shape))) + list(range(k))
        values = np.transpose(costs, order).ravel()
        return values if mask is None else values[np.transpose(mask, order).ravel()]


def slice_target(
    cost: Sequence[float] | np.ndarray, target_seconds: float, n_workers: int = 1, exact: bool = False
) -> float:
    """Seconds per slice: ``target_seconds``, or less so that there are at least ``4 × n_workers``
    slices when there are enough cells (not when ``exact``)."""
    total = float(cost.sum()) if isinstance(cost, np.ndarray) else float(sum(cost))
    if exact or total <= 0:
        return target_seconds
    return min(target_seconds, total / min(len(cost), 4 * max(1, n_workers)))


#: cells :func:`slice_bounds` turns into Python floats at a time (bounds its memory at any grid size)
BOUNDS_CHUNK = 1 << 16


def slice_bounds(cost: Sequence[float] | np.ndarray, target: float) -> list[int]:
    """Start indices of the slices of cells costing ``cost`` (in slicing order; a list or an array)
    plus the end: a new slice starts when the current one would exceed ``target``."""
    bounds = [0]
    acc = 0.0
    limit = target * 1.0001
    n = len(cost)
    for start in range(0, n, BOUNDS_CHUNK):
        part = cost[start : start + BOUNDS_CHUNK]
        for i, c in enumerate(part.tolist() if isinstance(part, np.ndarray) else part, start):
            if i > bounds[-1] and acc + c > limit:
                bounds.append(i)
                acc = 0.0
            acc += c
    if n:
        bounds.append(n)
    return bounds
