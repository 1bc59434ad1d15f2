"""The grid of a sweep: labelled axes, cells, and slices of cells for Dask tasks.

Axes, in store order: ``integrator``, ``h``, then every swept system parameter in the order
the spec lists them. A cell is one index per axis (a tuple); its coordinates label it.
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
        axes = [
            Axis("integrator", tuple(spec.integrators), "", "integrator name"),
            Axis("h", tuple(spec.h), sysdef.time_units, "step size"),
        ]
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
        combo.update({a.name: c[a.name] for a in self.axes[2:]})
        return combo

    @cached_property
    def _model_for_cost(self):
        sysdef = SYSTEMS[self.spec.system]
        return sysdef.build(**self.spec.system_kwargs(self.spec.param_combinations()[0]))

    def cost(self, cell: Cell) -> float:
        """Estimated single-core seconds of a cell (sizes slices; need not be exact)."""
        c = self.coords(cell)
        fam = FAMILIES[SYSTEMS[self.spec.system].family]
        return self.spec.n_steps(c["h"]) * fam.cost_per_step(self._model_for_cost, c["integrator"])

    def slices(self, cells: list[Cell], target_seconds: float = 10.0, n_workers: int = 1) -> list[list[Cell]]:
        """Group cells into slices of about ``target_seconds`` of work each.

        Cells sharing system parameters are kept together (the model is built once per
        slice). At least ``2 × n_workers`` slices are made when there are enough cells,
        so no worker idles while another finishes a long slice.
        """
        if not cells:
            return []
        key = {cell: (cell[2:], cell[0], cell[1]) for cell in cells}
        ordered = sorted(cells, key=key.__getitem__)
        costs = [self.cost(c) for c in ordered]
        total = float(sum(costs))
        n_min = min(len(ordered), 2 * max(1, n_workers))
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
