"""Short cells of a slice computed together: one compiled call per kind of cell, values stacked (issue 21).

A 0.1 ms cell run on its own spends more time in Python around its kernel than in the kernel, and
hands the GIL over twice per cell, so threads running such cells side by side mostly wait for each
other. Here a slice's fresh short cells of one integrator are started, advanced together
(:func:`geosweep.kernels.core.batch.advance_together`: the rows of one kind in one ``nogil`` call)
and collected together (the family's ``collect_many``); the result is one :class:`CellBatch`
whose values have a leading cell axis, and the shard's writer takes them as they are
(:func:`geosweep.sweeps.store.write_shard`). Every stored value is bitwise what the cell computed
alone stores (``tests/test_batch.py``, ``tests/test_together.py``).

A cell is computed together when its family has ``collect_many`` and ``batches`` accepts its
integrator and options, it is fresh (not done, no checkpoint, no carry from a shorter run), it runs
in one segment on one thread, its estimated cost is under :data:`TOGETHER_CELL_SECONDS`, and it is
not an adaptive dense-output cell whose store keeps carries (those stop before their last step,
:func:`geosweep.sweeps.engine.compute_cell`). Every other cell runs alone as before. A cell's
``wall_time`` is its share of its call's time, in proportion to its steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from geosweep.kernels.core.batch import advance_together
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.plan import Plan

#: cells estimated under this many single-core seconds are computed together (0 turns it off);
#: longer cells gain nothing from it and report progress and checkpoints of their own
TOGETHER_CELL_SECONDS = 0.05

#: the arrays of a cell's final carry (:meth:`~geosweep.kernels.core.trajectory.Trajectory.checkpoint`)
CARRY_ARRAYS = ("S", "acc", "info", "out", "env", "snaps", "ictl", "fctl")


@dataclass
class CellBatch:
    """Cells computed together: ``values`` by stored name with a leading cell axis (row ``i`` is
    ``cells[i]``), ``status`` and ``wall_time`` per cell, ``carries`` the cells' final carries
    stacked the same way (None: the store keeps none)."""

    cells: list[Cell]
    values: dict[str, np.ndarray]
    status: np.ndarray
    wall_time: np.ndarray
    carries: dict[str, np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.cells)

    def carry(self, i: int) -> dict[str, Any] | None:
        """Cell ``i``'s final carry (views of the stacked arrays), as ``Trajectory.checkpoint`` has it."""
        if self.carries is None:
            return None
        return {name: a[i] for name, a in self.carries.items()}

    def carries_of(self, rows: np.ndarray) -> tuple[list[Cell], dict[str, np.ndarray]]:
        """The final carries of ``rows`` (indices), stacked: (their cells, arrays with a leading cell axis)."""
        assert self.carries is not None
        return [self.cells[i] for i in rows.tolist()], {n: a[rows] for n, a in self.carries.items()}

    def runs(self) -> list[tuple]:
        """The cells as :func:`geosweep.sweeps.engine.compute_cell` returns them (values as row views)."""
        return [
            (c, int(self.status[i]), float(self.wall_time[i]), 1, False, True,
             {n: v[i] for n, v in self.values.items()}, self.carry(i), (0, 0))
            for i, c in enumerate(self.cells)
        ]  # fmt: skip

    def reports(self) -> list[tuple]:
        """``(cell, status, wall time, segments, resumed, ran)`` of every cell."""
        status, wall = self.status.tolist(), self.wall_time.tolist()
        return [(c, status[i], wall[i], 1, False, True) for i, c in enumerate(self.cells)]


def integrators(plan: Plan, carries: bool) -> set[int]:
    """The integrators (indices on the grid's first axis) whose short cells are computed together —
    as :func:`split` decides for a cell, judged on the first model (the local cluster's kind of
    workers is chosen from it, :meth:`geosweep.sweeps.execution.Execution.for_cells`)."""
    famdef = plan.famdef
    if TOGETHER_CELL_SECONDS <= 0 or famdef.collect_many is None or famdef.batches is None:
        return set()
    every = plan.spec.checkpoint_every
    cell = plan.grid.first_cell
    model = plan.model(cell)
    out = set()
    for i, name in enumerate(plan.grid.axes[0].values):
        request, options = plan.request((i, *cell[1:]))
        if (request.adaptive and carries) or (every is not None and every < request.T):
            continue
        if famdef.batches(model, name, options):
            out.add(i)
    return out


def joint_mask(plan: Plan, cost: np.ndarray, carries: bool = True) -> np.ndarray:
    """Over the grid: the cells a run computes together, judged from ``cost`` (each cell's estimated
    seconds, :meth:`~geosweep.sweeps.plan.Plan.cost_array`; 0 for cells not to run) and
    :func:`integrators`."""
    joint = integrators(plan, carries)
    if not joint:
        return np.zeros(cost.shape, dtype=bool)
    on = np.isin(np.arange(cost.shape[0]), sorted(joint)).reshape((-1,) + (1,) * (cost.ndim - 1))
    return on & (cost > 0) & (cost < TOGETHER_CELL_SECONDS)


#: a cell to compute together: (cell, model, (request, options))
Member = tuple[Cell, Any, tuple]


def split(plan: Plan, cells: Sequence[Cell], carries: bool) -> tuple[list[Member], list[Cell]]:
    """(cells to compute together, with their models and requests; the others) of fresh ``cells``
    (each runs in one segment: the spec's ``checkpoint_every``, if any, is not shorter than T — the
    engine's default segments hold minutes of work); ``carries``: the store keeps final carries."""
    famdef = plan.famdef
    if TOGETHER_CELL_SECONDS <= 0 or famdef.collect_many is None or famdef.batches is None:
        return [], list(cells)
    every = plan.spec.checkpoint_every
    names = plan.grid.axes[0].values  # the integrator axis (options are per integrator)
    together: list[Member] = []
    alone: list[Cell] = []
    accepted: dict[tuple, bool] = {}
    for cell in cells:
        request, options = plan.request(cell)
        if (
            (request.adaptive and carries)
            or (every is not None and every < request.T)
            or not plan.cost(cell) < TOGETHER_CELL_SECONDS
        ):
            alone.append(cell)
            continue
        model = plan.model(cell)
        key = (cell[0], id(model))
        ok = accepted.get(key)
        if ok is None:
            ok = accepted[key] = bool(famdef.batches(model, names[cell[0]], options))
        if ok:
            together.append((cell, model, (request, options)))
        else:
            alone.append(cell)
    return together, alone


def compute(plan: Plan, members: Sequence[Member], carries: bool) -> list[CellBatch]:
    """Compute ``members`` (from :func:`split`) together: one :class:`CellBatch` per integrator and kind
    of trajectory."""
    famdef = plan.famdef
    names = plan.grid.axes[0].values
    n_method = plan.grid.n_method_axes
    groups: dict[tuple, list[Member]] = {}  # by method (integrator, h or tol): one request and options
    for m in members:
        groups.setdefault(m[0][:n_method], []).append(m)
    out = []
    for key, group in groups.items():
        integrator = names[key[0]]
        if famdef.start_many is not None:
            stacks = famdef.start_many([m for _, m, _ in group], integrator, *group[0][2])
            for stack in stacks:
                stack.advance()
        else:
            stacks = advance_together([famdef.start(model, integrator, *req) for _, model, req in group])  # type: ignore[misc]
        for stack in stacks:
            rows = [group[i] for i in stack.index]
            models = [m for _, m, _ in rows]
            values = famdef.collect_many(models, integrator, stack, rows[0][2][1])  # type: ignore[misc]
            kept = None
            if carries:
                kept = {n: stack.arrays[n] for n in CARRY_ARRAYS}
                kept["wall_time"] = stack.wall_time
            out.append(CellBatch([c for c, _, _ in rows], values, stack.status.astype(np.int64), stack.wall_time, kept))
    return out
