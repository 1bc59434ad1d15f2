"""A run's work list: its pending cells, their estimated costs (computed once, as arrays), and the shard
jobs they are cut into; and every execution choice of the run, made once on those cells (:func:`resolve`).

The slicing variants are data (:class:`Slicing`): the target work per slice, the least number of slices
per worker, the shortest slice cut to reach that number (cells computed together) and the pieces the
run's last shards are cut in (tails). :func:`shard_slices` is the one place cells become slices.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

import numpy as np

from geosweep.sweeps.execution import AUTO_PROCESS_CELL_SECONDS, IN_DRIVER_ENV, Execution
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.run_options import RunOptions
from geosweep.sweeps.store.layout import cell_block, group_by_shard

if TYPE_CHECKING:
    from geosweep.sweeps.grid import Grid
    from geosweep.sweeps.plan import Plan

#: slices each of a run's last shards is cut in (:func:`shard_slices`): measured on 1000 cells of
#: 10 ms on 2 workers, whole last shards left one worker idle for a quarter of a shard
TAIL_PIECES = 8
#: the shortest estimated slice (s of one core) a run of cells computed together (:mod:`geosweep.sweeps.together`)
#: is cut in to give every worker slices (``Slicing.min_slice``): their compute is one compiled call of
#: ~50 µs a cell, and a slice's task and set-up (reading ``done``, listing checkpoints, handing its values to
#: the shard's writer) cost more than the worker it spares; 10³ cells of 0.1 ms on 2 worker threads,
#: medians of 8 runs: 10 slices 0.53 s, 2 slices 0.40 s
MIN_SLICE_SECONDS = 0.05


@dataclass(frozen=True)
class Slicing:
    """How pending cells are cut into slices (:func:`shard_slices`).

    ``target``: estimated single-core seconds per slice; ``n_workers``: the workers that take them;
    ``per_worker``: slices per worker at least, when there are enough cells and fewer than
    ``2 × n_workers`` shards (4; 1 when a cut shard's values are costly to bring to its writer);
    ``min_slice``: no slice cut shorter than this to reach that count (:data:`MIN_SLICE_SECONDS` for
    cells computed together); ``tails``: pieces each of the ``n_workers`` cheapest shards is cut in when
    there are ``4 × n_workers`` shards or more (0: none), so the workers finish together."""

    target: float = 10.0
    n_workers: int = 1
    per_worker: int = 4
    min_slice: float = 0.0
    tails: int = TAIL_PIECES

    @classmethod
    def of(cls, target: float, n_workers: int, cheap_cuts: bool = True, min_slice: float = 0.0) -> Slicing:
        """``cheap_cuts=False``: a cut shard's values travel between worker processes — shards are cut
        only so far that every worker has a slice, and the last shards stay whole."""
        return cls(target, max(1, n_workers), 4 if cheap_cuts else 1, min_slice, TAIL_PIECES if cheap_cuts else 0)


def shard_slices(
    grid: Grid, cells: list[Cell], costs: Any, shards: tuple[int, ...], slicing: Slicing
) -> dict[tuple[int, ...], list[list[Cell]]]:
    """``shard → slices`` of ``cells`` (``costs``: estimated seconds, indexed by cell): slices never cross
    a store shard (one task writes each shard), in the order a run takes them (the costliest shard first),
    cut as ``slicing`` says. Many shards (``2 × n_workers`` or more) are split only by ``target``: a split
    shard's results travel from its slices to its writer (between worker processes that costs more than
    0.1 ms cells: 2·10⁴ such cells on 2 processes, the two cut shards' transfers took 0.9 and 2.1 s; 10³
    in 2 shards: 0.84–1.07 s in 10 slices, 0.54–0.68 s in 2)."""
    groups = group_by_shard(cells, shards)
    n_w = slicing.n_workers
    total = float(sum(float(costs[c]) for c in cells))
    n_min = min(len(cells), slicing.per_worker * n_w)
    if total > 0 and slicing.min_slice > 0:  # no slice cut shorter than that to reach the count
        n_min = max(1, min(n_min, int(total / slicing.min_slice)))
    enough = len(groups) >= 2 * n_w
    target = min(slicing.target, total / n_min) if total > 0 and n_min and not enough else slicing.target
    shard_cost = {shard: float(sum(float(costs[c]) for c in group)) for shard, group in groups.items()}
    order = sorted(groups, key=lambda s: -shard_cost[s])  # stable: equal shards keep the grid's order
    out = {shard: grid.slices(groups[shard], costs, target, exact=True) for shard in order}
    if slicing.tails and len(groups) >= 4 * n_w and n_w > 1:  # fewer: the tail is a large part of the run
        for shard in order[-n_w:]:
            if len(out[shard]) < slicing.tails and shard_cost[shard] > 0:
                piece = min(slicing.target, shard_cost[shard] / slicing.tails)
                out[shard] = grid.slices(groups[shard], costs, piece, exact=True)
    return out


@dataclass
class WorkList:
    """The pending cells of a run and their estimated costs: ``cost`` over the grid
    (:meth:`~geosweep.sweeps.plan.Plan.cost_array`, computed once per run), ``costs`` the pending cells'
    (in ``pending``'s order); ``shards``: the store's shard shape; ``carries``: the store keeps carries."""

    plan: Plan
    pending: list[Cell]
    cost: np.ndarray
    shards: tuple[int, ...]
    carries: bool = True
    at: tuple[np.ndarray, ...] = field(init=False)
    costs: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.at = tuple(cell_block(self.pending).T) if self.pending else ()  # the pending cells' indices
        self.costs = self.cost[self.at] if self.pending else np.zeros(0)

    @cached_property
    def joint(self) -> np.ndarray:
        """Which pending cells are computed together (:func:`geosweep.sweeps.together.joint_mask`)."""
        from geosweep.sweeps.together import joint_mask

        return joint_mask(self.plan, self.cost, self.carries)[self.at]

    @cached_property
    def by_cell(self) -> dict[Cell, float]:
        """``cell → cost`` of the pending cells."""
        return dict(zip(self.pending, self.costs.tolist()))

    @cached_property
    def by_shard(self) -> dict[tuple[int, ...], list[Cell]]:
        """The pending cells of each store shard."""
        return group_by_shard(self.pending, self.shards)

    def slices(self, slicing: Slicing) -> dict[tuple[int, ...], list[list[Cell]]]:
        """The pending cells cut as ``slicing`` says (:func:`shard_slices`)."""
        return shard_slices(self.plan.grid, self.pending, self.cost, self.shards, slicing)

    def slicing(self, target: float, n_workers: int, processes: bool) -> Slicing:
        """The slicing of this work on ``n_workers`` workers (``processes``: each a process of its own).
        The last shards cut finer, except for short cells on worker processes (their values would travel to
        the writer between processes: slower than the idle worker it spares); cells computed together are
        not cut into slices shorter than :data:`MIN_SLICE_SECONDS`."""
        cheap_cuts = not processes or self.long_cells
        return Slicing.of(target, n_workers, cheap_cuts, MIN_SLICE_SECONDS if bool(self.joint.all()) else 0.0)

    @property
    def long_cells(self) -> bool:
        """The pending cells average at least :data:`AUTO_PROCESS_CELL_SECONDS` each."""
        return float(np.mean(self.costs)) >= AUTO_PROCESS_CELL_SECONDS


def cell_threads(requested: int | None, pending: int, cores: int) -> int:
    """Threads per cell of a run: ``requested`` if given, else (automatic) one per cell, or
    ``cores // pending`` when fewer cells are runnable than there are cores. Results are bitwise
    the same on any count; families that cannot split a step use one thread
    (:mod:`geosweep.kernels.core.threads`; capped there at the worker's ``NUMBA_NUM_THREADS``)."""
    if requested is not None:
        return max(1, int(requested))
    return max(1, cores // pending) if 0 < pending < cores else 1


def with_threads(run: RunOptions, pending: int, cores: int, log: Callable[[str], None]) -> RunOptions:
    """``run`` with its threads per cell resolved (:func:`cell_threads`), logged when above one."""
    k = cell_threads(run.threads_per_cell, pending, cores)
    if k > 1:
        log(f"{pending} cell(s) on {cores} cores: up to {k} threads per cell")
    return run.model_copy(update={"threads_per_cell": k})


@dataclass(frozen=True)
class Choices:
    """The execution of one run with every choice made: ``local`` (serial, or a few short cells in the
    driver: one code path, :mod:`geosweep.sweeps.backends.local`) or Dask with the worker kind decided."""

    execution: Execution
    local: bool

    @property
    def run(self) -> RunOptions:
        return self.execution.run


def resolve(execution: Execution, work: WorkList, log: Callable[[str], None]) -> Choices:
    """Every choice ``execution`` leaves open, made once on the pending cells of ``work``: in the driver for
    a few short cells (:meth:`Execution.in_driver`), else Dask with local workers of processes or threads
    as the cells suit (:meth:`Execution.for_cells`; cells computed together run well on threads). Threads
    per cell (:func:`with_threads`) and slicing (:meth:`WorkList.slicing`) follow the cores the backend has."""
    if execution.serial:
        return Choices(execution, True)
    if execution.in_driver(work.costs):
        log(
            f"{len(work.pending)} short cells of {float(work.costs.sum()):.2g} s estimated work in all: run in this "
            f"process, without Dask ({IN_DRIVER_ENV}=0 sends every run to the workers)"
        )
        if execution.cluster_file:  # not started, but a bad file is refused all the same
            from geosweep.sweeps.execution import cluster_config

            cluster_config(execution.cluster_file)
        return Choices(execution, True)
    if execution.processes is None and execution.starts_local_cluster:
        execution = execution.for_cells(work.costs[(work.costs > 0) & ~work.joint], log)
    return Choices(execution, False)


def local_cores() -> int:
    """The cores of this machine (the local backend's threads per cell)."""
    return os.cpu_count() or 1
