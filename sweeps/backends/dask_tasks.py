"""The Dask backend's tasks: what runs on a worker (a slice, a shard's writer, a slice that is a whole
shard) and the small cluster helpers (slice resources, model copies, kernel warm-up)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from geosweep.sweeps import bundles as bundles_mod
from geosweep.sweeps.cells import CellRun, compute_slice
from geosweep.sweeps.execution import SLICE_RESOURCE
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.plan import Plan
from geosweep.sweeps.run_options import DEFAULT, RunOptions
from geosweep.sweeps.store import StoreRef
from geosweep.sweeps.writes import StoreFault, guarded, write_runs


def _on_segment_events(topic: str | None):
    """``on_segment`` that sends progress to the driver as events on ``topic`` (``Worker.log_event``);
    first an event that this slice started (its task key: :mod:`geosweep.sweeps.resubmit` tells a slice whose
    workers died running it from one that only waited on them)."""
    if not topic:
        return None
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not running on a worker
        return None
    worker.log_event(topic, {"started": str(worker.get_current_task())})

    def on_segment(cell, fraction):
        worker.log_event(topic, {"cell": [int(i) for i in cell], "fraction": float(fraction)})

    return on_segment


def _compute_part(
    plan: Plan,
    models: Any,
    cells: Sequence[Cell] | np.ndarray,
    ref: StoreRef,
    topic: str | None = None,
    fresh: bool = False,
    run: RunOptions = DEFAULT,
    together: bool = True,
) -> list[CellRun] | StoreFault:
    """Worker entry point of a slice: ``models`` (its own, :class:`geosweep.sweeps.bundles.Models`, or
    its shard's as the result of a model task, shipped once); ``fresh``, ``run``, ``together``: see
    :func:`~geosweep.sweeps.cells.compute_slice`."""
    return guarded(
        ref, compute_slice, plan.part(models=bundles_mod.unwrap(models)), cells, ref, _on_segment_events(topic), None,
        fresh, together, run,
    )  # fmt: skip


def _run_part(
    plan: Plan,
    models: Any,
    cells: Sequence[Cell] | np.ndarray,
    ref: StoreRef,
    topic: str | None = None,
    fresh: bool = False,
    run: RunOptions = DEFAULT,
    together: bool = True,
) -> list[tuple] | StoreFault:
    """Worker entry point of a slice that is a whole shard: compute, then write (no hop between tasks)."""
    runs = _compute_part(plan, models, cells, ref, topic, fresh, run, together)
    return runs if isinstance(runs, StoreFault) else guarded(ref, write_runs, ref, runs)


def _write_part(ref: StoreRef, *parts: list[CellRun] | StoreFault) -> list[tuple] | StoreFault:
    """Worker entry point of a shard's writer: the results of the shard's slices."""
    for part in parts:
        if isinstance(part, StoreFault):
            return part
    return guarded(ref, write_runs, ref, [run for part in parts if not isinstance(part, StoreFault) for run in part])


def slice_resources(workers: dict[str, dict]) -> dict[str, float] | None:
    """``resources=`` for slice tasks on a cluster of ``workers`` (the scheduler's worker info):
    :data:`SLICE_RESOURCE` if every worker has it."""
    if workers and all(SLICE_RESOURCE in (w.get("resources") or {}) for w in workers.values()):
        return {SLICE_RESOURCE: 1}
    return None


#: Most bytes :func:`spread` copies to the workers (bundle bytes × other workers).
SPREAD_BYTES = 512 * 2**20


def spread(client: Any, bundles: list, n_workers: int, log: Callable[[str], None]) -> None:
    """Copy the shards' model bundles to every worker when that costs at most :data:`SPREAD_BYTES`.

    A slice depends on its shard's bundle, and Dask gives a ready task to a worker that holds its
    dependencies: with one bundle per worker, each worker ran "its" shard and the shards were
    written together at the end (an interruption then lost all of them). With a copy everywhere
    the workers take the slices in priority order, shard by shard."""
    if n_workers < 2 or not bundles:
        return
    try:
        from distributed import wait

        wait(bundles)
        size = sum(client.nbytes(keys=[b.key for b in bundles], summary=False).values())
        if size * (n_workers - 1) <= SPREAD_BYTES:
            client.replicate(bundles)
    except Exception as exc:  # noqa: BLE001 — an optimisation: the run goes on without it
        log(f"model bundles not copied to every worker ({type(exc).__name__}: {exc})")
