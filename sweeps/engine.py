"""Running a sweep: one pipeline, read top to bottom — lease → store → work list → backend → record.

:func:`run_sweep` takes the store's lease (one writer per store), grows the store first when asked
(:mod:`geosweep.sweeps.extension`), creates or checks it (a new store of short cells is created while the
first slices compute, :mod:`geosweep.sweeps.early`), lists the pending cells with their costs
(:class:`~geosweep.sweeps.worklist.WorkList`, costs computed once), makes every execution choice once on
them (:func:`~geosweep.sweeps.worklist.resolve`), hands the shard jobs to one backend
(:mod:`~geosweep.sweeps.backends.local`: serial or in the driver; :mod:`~geosweep.sweeps.backends.dask`),
and records the run in the store. What a slice computes is :mod:`geosweep.sweeps.cells`, how a shard is
written :mod:`geosweep.sweeps.writes`.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from geosweep.sweeps import checkpoints, early, extension
from geosweep.sweeps.backends import dask as dask_backend
from geosweep.sweeps.backends import local as local_backend
from geosweep.sweeps.backends.dask_tasks import _run_part, slice_resources  # noqa: F401 - re-exported
from geosweep.sweeps.cells import (  # noqa: F401 - re-exported
    EVENT_SECONDS,
    KEEP_SECONDS,
    SEGMENT_SECONDS,
    cell_steps,
    compute_cell,
    compute_slice,
    run_arrays,
    segment_time,
    warm_part,
    warm_plan,
    warm_worker,
)
from geosweep.sweeps.compact import MAX_ITEMS
from geosweep.sweeps.execution import LOCAL_WORKER, SLICE_RESOURCE, WORKER_ARGS, Execution  # noqa: F401
from geosweep.sweeps.gc_policy import fewer_collections
from geosweep.sweeps.lease import Lease
from geosweep.sweeps.plan import Plan, make_plan
from geosweep.sweeps.progress import Progress, SweepResult, Tracker
from geosweep.sweeps.run_options import RunOptions
from geosweep.sweeps.spec import SweepSpec
from geosweep.sweeps.store import StoreRef, done_mask, ensure_store, mark_fillers, record_run, shard_shape, sweep_shards
from geosweep.sweeps.worklist import WorkList, cell_threads, resolve  # noqa: F401 - cell_threads re-exported
from geosweep.sweeps.writes import StoreFault, store_fault, write_runs  # noqa: F401 - re-exported
from geosweep.sweeps.writes import guarded as _guarded  # noqa: F401 - re-exported


def default_store_path(spec: SweepSpec) -> str:
    return os.path.join("results", f"{spec.name}.zarr")


def run_sweep(
    spec: Plan | SweepSpec | str | os.PathLike | dict,
    store: str | os.PathLike | StoreRef | None = None,
    *,
    client: Any = None,
    address: str | None = None,
    n_workers: int | None = None,
    serial: bool = False,
    processes: bool | None = None,
    slice_seconds: float = 10.0,
    storage_options: dict | None = None,
    progress: Callable[[Progress], None] | None = None,
    log: Callable[[str], None] | None = None,
    grow: bool = False,
    threads_per_cell: int | None = None,
    recompute: bool = False,
    keep_carries: bool = True,
    execution: Execution | None = None,
) -> SweepResult:
    """Run every cell of ``spec`` (a :class:`Plan`, or anything :func:`make_plan` takes) not yet complete in ``store``.

    Execution: ``execution`` (:class:`~geosweep.sweeps.execution.Execution`, e.g. from the command line), else one made
    of ``address``, ``n_workers``, ``serial``, ``processes``, ``slice_seconds`` and ``threads_per_cell``; ``client`` (a
    ``distributed.Client``) runs the Dask backend on a cluster of the caller's. A new local cluster has ``n_workers``
    workers running one slice each (default: all cores; :data:`LOCAL_WORKER`) — threads, or processes for many
    sub-millisecond cells (:func:`geosweep.sweeps.execution.auto_processes`); ``serial=True`` runs in this process
    without Dask, and so does a run of a few short cells whatever the execution
    (:func:`geosweep.sweeps.execution.runs_in_driver`); results are bitwise the same on every path and any
    ``threads_per_cell``. Every such choice is made once, on the pending cells
    (:func:`geosweep.sweeps.worklist.resolve`).

    ``grow=True``: ``spec`` may add values at the end of sweep axes of the store's spec (:mod:`geosweep.sweeps.grow`) or
    have a larger ``T``: the store grows in place and its finished cells continue from their final carries
    (:mod:`geosweep.sweeps.extension`; ``recompute``: every finished cell is computed again from t = 0, where cells
    without a carry are otherwise refused with :class:`geosweep.sweeps.extension.ExtendError`). ``keep_carries``: keep
    each finished cell's final carry in the store (default), so that it can be extended.

    Raises :class:`geosweep.sweeps.spec.SpecError` for a bad spec, :class:`geosweep.sweeps.store.StoreMismatchError` if
    ``store`` holds another sweep, :class:`geosweep.sweeps.store.StoreFormatError` if it has another store format and
    :class:`geosweep.sweeps.lease.StoreBusyError` while another run writes it — all before any work;
    :class:`geosweep.sweeps.lease.LeaseLost` if another run takes the lease over meanwhile and
    :class:`geosweep.sweeps.lease.StoreWriteError` when the store refuses writes for good (disk full, read-only).
    Integration failures are recorded as cell status, not raised.

    >>> import os, tempfile; store = os.path.join(tempfile.mkdtemp(), "top.zarr")
    >>> spec = {"name": "doc-top", "system": "heavy_top", "integrators": ["lp_rkmk4"], "h": [0.01, 0.005], "T": 0.1,
    ...         "dt_out": 0.05}  # times in s
    >>> run_sweep(spec, store, serial=True).ran, run_sweep(spec, store, serial=True).skipped  # the second resumes
    (2, 2)
    """
    log = log or (lambda msg: None)
    if execution is None:
        execution = Execution(
            serial=serial,
            address=address,
            n_workers=n_workers,
            processes=processes,
            slice_seconds=slice_seconds,
            run=RunOptions(threads_per_cell=threads_per_cell),
        )
    plan = make_plan(spec)
    ref = StoreRef.of(store if store is not None else default_store_path(plan.spec), storage_options)
    # one writer per store; refused at once (StoreBusyError) while another run holds it. Every write
    # goes through lease.ref (the store's real path and this run's token) and is fenced by the lease.
    with Lease(ref, log=log) as lease:
        try:
            run_ref = dataclasses.replace(lease.ref, carries=keep_carries)
            if grow:  # the store grows first, by the steps chosen once from its spec and this one
                plan = _grow(plan, run_ref, log, recompute)
            cost = plan.cost_array()  # every cell's estimated seconds: the run's only cost computation
            creating = early.start(plan, run_ref, execution, grow, log, cost)
            try:
                return _run_locked(plan, run_ref, execution, client, progress, log, lease, creating, cost)
            finally:
                if creating is not None:  # no write of this run outlives its lease
                    creating.finish()
        except OSError as exc:
            if (fault := store_fault(lease.ref, exc)) is None:
                raise
            raise fault.error() from None


def _grow(plan: Plan, ref: StoreRef, log: Callable[[str], None], recompute: bool) -> Plan:
    """Grow the store in ``ref`` to ``plan`` (``run --grow``): values appended to sweep axes
    (:mod:`geosweep.sweeps.grow`) at the store's T, then a later T (:mod:`geosweep.sweeps.extension`);
    the plan left to run."""
    step = extension.growth(plan, ref)
    if step.axes is not None:
        ensure_store(step.axes, ref, log, grow=True)
    return extension.extend_time(step, ref, log, recompute) if step.time else step.plan


@fewer_collections()  # a cell's objects are freed by reference counting (geosweep.sweeps.gc_policy)
def _run_locked(
    plan: Plan,
    ref: StoreRef,
    execution: Execution,
    client: Any,
    progress: Callable[[Progress], None] | None,
    log: Callable[[str], None],
    lease: Lease | None,
    creating: early.EarlyStore | None,
    cost: np.ndarray,
) -> SweepResult:
    """The pipeline once the lease is held: store → work list → backend → record."""
    done, created = _open_store(plan, ref, log, creating)
    pending = plan.grid.pending(done)
    total = plan.grid.runnable()
    state = "creating" if creating else "created" if created else "resuming"
    log(f"store {ref.url}: {state}; {total - len(pending)}/{total} cells already complete, {len(pending)} to run")
    if not pending:
        if creating is not None:
            creating.wait()
        return SweepResult(ref.url, total, total, 0, 0, 0.0, 0)
    tracker = Tracker(total, total - len(pending), {c: cell_steps(plan, c) for c in pending}, progress)
    _warm_driver(plan, pending, log)
    shards = shard_shape(plan) if creating is not None else sweep_shards(ref.open_group("r"))
    work = WorkList(plan, pending, cost, shards, ref.carries)
    choices = resolve(execution, work, log)
    if choices.local:
        slices = local_backend.run(work, choices, ref, tracker, creating, log)
    else:
        slices = dask_backend.run(work, choices, ref, tracker, lease, creating, client, log)
    return _record(ref, work, tracker, slices, log)


def _open_store(
    plan: Plan, ref: StoreRef, log: Callable[[str], None], creating: early.EarlyStore | None
) -> tuple[np.ndarray, bool]:
    """(the cells done in the store, whether this run creates it): a store created now holds none. A
    store that grew (:func:`run_sweep`) already holds this plan's sweep."""
    if creating is not None:  # a store that does not exist yet: created meanwhile
        return np.zeros(plan.grid.shape, dtype=bool), True
    if ensure_store(plan, ref, log):  # just created by this run (its fillers marked)
        return np.zeros(plan.grid.shape, dtype=bool), True
    mask = done_mask(ref, log)
    if mark_fillers(plan, ref):
        log(f"store {ref.url}: not-applicable filler cells re-marked")
    return mask, False


def _warm_driver(plan: Plan, pending: list, log: Callable[[str], None]) -> None:
    """Compile the pending cells' kernels here first, which fills the on-disk cache for the workers."""
    from geosweep.kernels._jit import watch_compiles

    t0 = time.perf_counter()
    with watch_compiles() as compiles:
        warm_plan(plan, pending)
    if compiles[0]:
        log(f"kernels compiled in {time.perf_counter() - t0:.1f}s")


def _record(ref: StoreRef, work: WorkList, tracker: Tracker, slices: int, log: Callable[[str], None]) -> SweepResult:
    """Tidy the checkpoints no writer of this run is left to use and record the run in the store."""
    errors = tracker.errors
    if len(errors) > MAX_ITEMS:
        log(f"… and {len(errors) - MAX_ITEMS} more slice(s) failed ({len(errors)} in all)")
    checkpoints.tidy(ref)
    wall = time.perf_counter() - tracker.t_start
    # what really ran: the cells complete now that were not when this run started (a slice whose
    # worker died after writing its cells reports nothing, and its retry finds them done)
    ran = tracker.ran
    if ran < len(work.pending):  # not every pending cell was reported written: count them in the store
        now = done_mask(ref)
        ran = max(ran, sum(1 for c in work.pending if now[c]))
    from geosweep.flows.entry import pause

    pause("tail")  # a test hook: a signal between the last cell and the run's record
    record_run(
        ref,
        {
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cells_run": ran,
            "cells_resumed": tracker.resumed,
            "segments_run": tracker.segments,
            "cells_failed_status": tracker.failed,
            "task_errors": len(errors),
            "wall_time_s": round(wall, 3),
            "host": socket.gethostname(),
        },
    )
    t = tracker
    return SweepResult(ref.url, t.total, t.skipped, ran, t.failed, wall, slices, errors, t.segments, t.resumed)
