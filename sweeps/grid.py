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
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from kernels.registry import FAMILIES, INTEGRATORS, SYSTEMS
from sweeps.spec import SweepSpec

Cell = tuple[int, ...]


@dataclass(frozen=True)
class Axis:
    name: str
    values: tuple[Any, ...]
    units: str
    doc: str


class Grid:
    """Cartesian product of a spec's axes."""

    def __init__(self, spec: SweepSpec):
        self.spec = spec
        sysdef = SYSTEMS[spec.system]
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

    def applicable(self, cell: Cell) -> bool:
        """False for the filler cells of a mixed fixed-step/adaptive grid (see module doc)."""
        c = dict(zip(self.dims, cell))
        adaptive = INTEGRATORS[self.axes[0].values[c["integrator"]]].adaptive
        if adaptive:
            return c.get("h", 0) == 0
        return c.get("tol", 0) == 0

    def run_args(self, cell: Cell) -> tuple[float, int, int, dict[str, Any]]:
        """(h, n_steps, stride, options) for the family's ``run``.

        Fixed step: the cell's h. Adaptive: ``h`` is the output interval, ``n_steps`` the
        number of output intervals and the cell's ``tol`` goes into the options.
        """
        c = self.coords(cell)
        name = c["integrator"]
        options = self.spec.options_for(name)
        if INTEGRATORS[name].adaptive:
            options["tol"] = float(c["tol"])
            return self.spec.dt_out, self.spec.n_time - 1, 1, options
        h = float(c["h"])
        if FAMILIES[SYSTEMS[self.spec.system].family].snapshots:
            options["snapshot_stride"] = int(round(self.spec.snapshot_interval / h))
        return h, self.spec.n_steps(h), self.spec.stride(h), options

    @cached_property
    def _model_for_cost(self):
        sysdef = SYSTEMS[self.spec.system]
        return sysdef.build(**self.spec.system_kwargs(self.spec.param_combinations()[0]))

    def cost(self, cell: Cell) -> float:
        """Estimated single-core seconds of a cell (sizes slices; need not be exact)."""
        if not self.applicable(cell):
            return 0.0
        c = self.coords(cell)
        fam = FAMILIES[SYSTEMS[self.spec.system].family]
        if INTEGRATORS[c["integrator"]].adaptive:
            steps = 20 * (self.spec.n_time - 1)  # a guess: ~20 accepted steps per output interval
        else:
            steps = self.spec.n_steps(c["h"])
        return steps * fam.cost_per_step(self._model_for_cost, c["integrator"])

    def slices(self, cells: list[Cell], target_seconds: float = 10.0, n_workers: int = 1) -> list[list[Cell]]:
        """Group cells into slices of about ``target_seconds`` of work each.

        Cells sharing system parameters are kept together (the model is built once per
        slice). At least ``4 × n_workers`` slices are made when there are enough cells,
        so no worker idles while another finishes a long slice.
        """
        if not cells:
            return []
        k = self.n_method_axes
        key = {cell: (cell[k:], cell[:k]) for cell in cells}
        ordered = sorted(cells, key=key.__getitem__)
        costs = [self.cost(c) for c in ordered]
        total = float(sum(costs))
        n_min = min(len(ordered), 4 * max(1, n_workers))
        target = min(target_seconds, total / n_min) if total > 0 else target_seconds
        out: list[list[Cell]] = []
        cur: list[Cell] = []
        acc = 0.0
        for cell, c in zip(ordered, costs):
            if cur and acc + c > target * 1.0001:
                out.append(cur)
                cur, acc = [], 0.0
            cur.append(cell)
            acc += c
        if cur:
            out.append(cur)
        return out


def integrator_defs(spec: SweepSpec):
    return {name: INTEGRATORS[name] for name in spec.integrators}
