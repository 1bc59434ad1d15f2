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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from kernels.registry import IntegratorDef, RunRequest, SystemDef
from sweeps.spec import SweepSpec

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
        return list(itertools.product(*(range(n) for n in self.shape)))

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
        c = self.coords(cell)
        name = c["integrator"]
        options = self.options(name)
        step = {"tol": float(c["tol"])} if self.idefs[name].adaptive else {"h": float(c["h"])}
        req = RunRequest(self.spec.T, self.spec.dt_out, snapshot_every=self.spec.snapshot_every, **step)
        return req, options

    def cost(self, cell: Cell, cost_per_step: Callable[[str], float]) -> float:
        """Estimated single-core seconds of a cell (sizes slices; need not be exact).

        ``cost_per_step(integrator)`` gives seconds per step on the cell's model.
        """
        if not self.applicable(cell):
            return 0.0
        c = self.coords(cell)
        if self.idefs[c["integrator"]].adaptive:
            steps = 20 * (self.spec.n_time - 1)  # a guess: ~20 accepted steps per output interval
        else:
            steps = self.spec.n_steps(c["h"])
        return steps * cost_per_step(c["integrator"])

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
        key = {cell: (cell[k:], cell[:k]) for cell in cells}
        ordered = sorted(cells, key=key.__getitem__)
        cost = [costs[c] for c in ordered]
        total = float(sum(cost))
        n_min = min(len(ordered), 4 * max(1, n_workers))
        target = target_seconds
        if not exact and total > 0:
            target = min(target_seconds, total / n_min)
        out: list[list[Cell]] = []
        cur: list[Cell] = []
        acc = 0.0
        for cell, c in zip(ordered, cost):
            if cur and acc + c > target * 1.0001:
                out.append(cur)
                cur, acc = [], 0.0
            cur.append(cell)
            acc += c
        if cur:
            out.append(cur)
        return out
