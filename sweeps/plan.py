"""The plan of a sweep: the spec validated and every model built, exactly once.

:func:`make_plan` is the only place a spec is validated against the registry and the only
place ``SystemDef.build`` runs in the driver. The :class:`Plan` then travels on: CLI →
Prefect flow → :func:`geosweep.sweeps.engine.run_sweep` → Dask workers. Workers receive a plan (or
the :meth:`Plan.part` their cells need) and never parse a spec or touch the global registries
``SYSTEMS``/``INTEGRATORS``/``FAMILIES``; they build a model only when it is too large to ship
(:mod:`geosweep.sweeps.bundles`, the plan's own ``SystemDef.build``).

A plan is a frozen pydantic model so that it pickles for worker processes (by cloudpickle;
user potentials are Numba dispatchers, which pickle) and so that Prefect, which records every
flow parameter as JSON, records a plan by its spec and grid shape (see ``_summary``) instead
of trying to encode models and compiled functions.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, InstanceOf, PrivateAttr, model_serializer

from geosweep.kernels.registry import FAMILIES, INTEGRATORS, SYSTEMS, FamilyDef, IntegratorDef, RunRequest, SystemDef
from geosweep.sweeps.grid import Cell, Grid
from geosweep.sweeps.spec import SpecError, SweepSpec, build_models, check_size_limits, parse_spec
from geosweep.sweeps.store.layout import cell_bytes, shard_shape
from geosweep.sweeps.store.schema import name_clash, state_layout_clash


class Plan(BaseModel):
    """A validated sweep with its resolved declarations and built models.

    ``models`` maps a parameter combination (the cell's indices along the swept parameter
    axes, :meth:`Grid.combination`) to its model; ``sizes`` are the store's per-cell
    dimension lengths (``time``, ``snapshot``, then the largest family sizes over every model).

    >>> from geosweep.sweeps.plan import make_plan
    >>> plan = make_plan({"name": "doc-plan", "system": "heavy_top", "integrators": ["lp_rkmk4", "slgi0"],
    ...                   "h": [0.01], "T": 1.0, "dt_out": 0.1, "params": {"M": [10.0, 15.0]}})
    >>> plan.spec.system, plan.grid.dims, plan.sizes["time"]
    ('heavy_top', ('integrator', 'h', 'M'), 11)
    >>> sorted(plan.idefs), type(plan.first_model).__name__
    (['lp_rkmk4', 'slgi0'], 'TopModel')
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    spec: SweepSpec
    sysdef: InstanceOf[SystemDef]
    famdef: InstanceOf[FamilyDef]
    idefs: dict[str, InstanceOf[IntegratorDef]]
    grid: InstanceOf[Grid]
    models: dict[tuple[int, ...], Any]
    sizes: dict[str, int]

    @model_serializer
    def _summary(self) -> dict[str, Any]:
        """JSON form (what Prefect records as the flow parameter): the spec and the grid shape."""
        return {
            "spec": self.spec.model_dump(mode="json"),
            "cells": self.grid.size,
            "dims": dict(zip(self.grid.dims, self.grid.shape)),
        }

    #: :meth:`per_step`, computed once (a 10⁶-cell spec has 250 000 models: 500 000 cost calls)
    _per_step: np.ndarray | None = PrivateAttr(default=None)

    @property
    def first_model(self) -> Any:
        """The model of the first parameter combination (declares the stored diagnostics)."""
        return next(iter(self.models.values()))

    def model(self, cell: Cell) -> Any:
        return self.models[self.grid.combination(cell)]

    def request(self, cell: Cell) -> tuple[RunRequest, dict[str, Any]]:
        """(RunRequest, options) of a cell for ``famdef.run``."""
        return self.grid.request(cell)

    def cost(self, cell: Cell) -> float:
        """Estimated single-core seconds of a cell, on its own model."""
        model = self.model(cell)
        return self.grid.cost(cell, lambda integrator: self.famdef.cost_per_step(model, integrator))

    def per_step(self) -> np.ndarray:
        """``FamilyDef.cost_per_step`` of each integrator (rows, the grid's order) on each parameter
        combination's model, shape ``(n_integrators, *grid.combination_shape)`` (needs every model;
        computed once per plan, read-only)."""
        if self._per_step is not None:
            return self._per_step
        names = self.grid.axes[0].values
        shape = self.grid.combination_shape
        cps = self.famdef.cost_per_step
        out = np.empty((len(names), *shape))
        for i, name in enumerate(names):
            out[i] = np.fromiter(
                (cps(self.models[c], name) for c in np.ndindex(*shape)), dtype=float, count=int(np.prod(shape))
            ).reshape(shape)
        out.setflags(write=False)
        self._per_step = out
        return out

    def cost_array(self) -> np.ndarray:
        """:meth:`cost` of every cell as an array over the grid (bitwise the same values, 0 where not
        applicable): one ``cost_per_step`` call per integrator and model, none per cell."""
        return self.grid.costs(self.per_step())

    def slices(self, cells: list[Cell], target_seconds: float = 10.0, n_workers: int = 1) -> list[list[Cell]]:
        """Slices of ``cells`` of about ``target_seconds`` each (see :meth:`Grid.slices`)."""
        return self.grid.slices(cells, self._costs_of(cells), target_seconds, n_workers)

    def _costs_of(self, cells: list[Cell]) -> Any:
        """``cell → cost`` for ``cells``: looked up in :meth:`cost_array` for many cells of a full plan."""
        if len(cells) > 64 and len(self.models) == int(np.prod(self.grid.combination_shape)):
            return self.cost_array()  # indexed by cell tuples like a mapping
        return {c: self.cost(c) for c in cells}

    def size_estimate(self) -> dict[str, float]:
        """Bytes before any work (uncompressed): ``cell_bytes`` (every stored value of one cell),
        ``store_bytes`` (the finished store) and ``task_memory_bytes`` — a task holds about 3 copies of
        a cell (trajectory buffers, collected values, stored copy) or 2 of each cell of the shard it
        writes, whichever is more (the models are not counted)."""
        import math

        per_cell = float(sum(cell_bytes(self).values()))
        cells_per_write = math.prod(shard_shape(self))
        return {
            "cell_bytes": per_cell,
            "store_bytes": per_cell * self.grid.size,
            "task_memory_bytes": max(3.0, 2.0 * cells_per_write) * per_cell,
        }

    def combinations(self, cells: list[Cell]) -> list[tuple[int, ...]]:
        """The parameter combinations (model keys) ``cells`` need, each once."""
        return list(dict.fromkeys(self.grid.combination(tuple(int(i) for i in c)) for c in cells))

    def part(self, cells: list[Cell] | None = None, models: dict[tuple[int, ...], Any] | None = None) -> Plan:
        """The same plan holding only ``models`` (default: the models ``cells`` need) — what a task ships."""
        if models is None:
            models = {k: self.models[k] for k in self.combinations(cells or [])}
        part = self.model_copy(update={"models": models})
        part._per_step = None  # of every model: not the part's, and not shipped with each task
        return part


def make_plan(source: Plan | SweepSpec | str | os.PathLike | dict) -> Plan:
    """Validate a spec and build its models, once. A :class:`Plan` is returned unchanged.

    Raises :class:`geosweep.sweeps.spec.SpecError` (every problem, with its field) before any work.

    >>> from geosweep.sweeps.plan import make_plan
    >>> plan = make_plan({"name": "doc-plan", "system": "heavy_top", "integrators": ["lp_rkmk4"], "h": [0.01],
    ...                   "T": 1.0, "dt_out": 0.1, "params": {"M": [10.0, 15.0]}})  # T, dt_out, h in s; M in kg
    >>> plan.grid.size
    2
    >>> make_plan({"name": "bad", "system": "heavy_top", "integrators": ["lp_rkmk4"], "T": 1.0, "dt_out": 0.1})
    Traceback (most recent call last):
    ...
    geosweep.sweeps.spec_error.SpecError: invalid sweep spec 'bad': h: needs at least one step size ...
    """
    if isinstance(source, Plan):
        return source
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    spec = parse_spec(source)  # type: ignore[arg-type]  # a PathLike became a str above
    sysdef = SYSTEMS[spec.system]
    idefs = {name: INTEGRATORS[name] for name in spec.integrators}
    famdef = FAMILIES[sysdef.family]
    models = build_models(spec, sysdef, idefs)
    grid = Grid(spec, sysdef, idefs)
    request, _ = grid.request(grid.first_cell)
    sizes = {"time": request.n_out + 1, "snapshot": request.n_snapshots}
    for model in models.values():
        for dim, n in famdef.sizes(model).items():
            sizes[dim] = max(sizes.get(dim, 0), int(n))
    plan = Plan(spec=spec, sysdef=sysdef, famdef=famdef, idefs=idefs, grid=grid, models=models, sizes=sizes)
    clash = name_clash(sysdef, famdef, plan.first_model) or state_layout_clash(plan)
    if clash:  # xarray would refuse the store's template only once the run starts
        raise SpecError([clash], spec.name)
    check_size_limits(spec, plan.size_estimate(), grid.size)  # before any store or cluster exists
    return plan
