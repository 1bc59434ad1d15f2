"""Running a sweep on a ``distributed.Client`` (or serially in-process).

Flow: plan (spec validated and models built once, :mod:`geosweep.sweeps.plan`) → create/check the
store → pending cells (``done == 0``) → slices of ~``slice_seconds`` of work that never cross a
store shard → one plain Dask future per slice, and one writer future per shard that depends on
the shard's slices. Each shard's models go to the cluster once, as a tiny task of their own (not scattered
data: the scheduler can recompute them when the worker holding them dies or retires; models too large
to travel in a task are built by it on the worker, :mod:`geosweep.sweeps.bundles`); a slice receives the plan part
its cells need and runs the kernels cell by cell (long cells in checkpointed segments), its fresh
short cells of one method together in one compiled call (:mod:`geosweep.sweeps.together`); the
shard's writer writes all its cells at once, one object per variable (:mod:`geosweep.sweeps.store`), on a
worker's spare thread where workers declare :data:`SLICE_RESOURCE` (local clusters do), so a
finished shard is written while the next shard's slices run. (A shard of short cells in one slice is
computed and written by that one task: a writer beside the next slice would wait for the GIL.)
Numba caches are warmed in the driver first (which writes the on-disk cache), then on every
worker, so workers never compile concurrently. A slice whose workers died is resubmitted as long as
its cells' checkpoints advance (:mod:`geosweep.sweeps.resubmit`), and adaptive scaling is told how many
workers the pending cells can keep busy (:mod:`geosweep.sweeps.demand`).
"""

from __future__ import annotations

import dataclasses
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from geosweep.kernels.core.layout import C_HOLD, I_NSAMP
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.kernels.status import Status
from geosweep.sweeps import bundles as bundles_mod
from geosweep.sweeps import checkpoints, demand, early, extension, first_worker, liveness, resubmit, visibility
from geosweep.sweeps import together as together_mod
from geosweep.sweeps.compact import MAX_ERROR_CHARS, MAX_ITEMS
from geosweep.sweeps.execution import (  # noqa: F401 - LOCAL_WORKER, SLICE_RESOURCE, WORKER_ARGS re-exported
    AUTO_PROCESS_CELL_SECONDS,
    IN_DRIVER_ENV,
    LOCAL_WORKER,
    SLICE_RESOURCE,
    WORKER_ARGS,
    Execution,
)
from geosweep.sweeps.gc_policy import fewer_collections
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.lease import Lease, LeaseLost, StoreWriteError, fence, store_write_error
from geosweep.sweeps.plan import MIN_SLICE_SECONDS, Plan, make_plan
from geosweep.sweeps.spec import SweepSpec
from geosweep.sweeps.store import (
    ArrayCache,
    StoreRef,
    done_mask,
    ensure_store,
    group_by_shard,
    mark_fillers,
    record_run,
    shard_shape,
    sweep_shards,
    write_shard,
)
from geosweep.sweeps.store.layout import cell_block
from geosweep.sweeps.together import CellBatch

#: Default work per checkpointed segment (single-core seconds) when a spec sets no checkpoint_every.
SEGMENT_SECONDS = 120.0
#: A finished cell that took at least this long (s) is kept as a complete checkpoint until its
#: shard is written, so an interruption before the shard write loses no such cell.
KEEP_SECONDS = 2.0

#: A cell that finished in one segment shorter than this (s) sends no progress event of its own:
#: its shard's write reports it soon after (a sweep of sub-millisecond cells sent one per cell).
EVENT_SECONDS = 1.0


@dataclass
class Progress:
    """Progress of a running sweep, passed to the ``progress`` callback after each slice and
    after each checkpointed segment of a long cell.

    ``steps_done``/``steps_total`` count integration steps of the cells still to run when the
    sweep started (adaptive cells: estimated steps, scaled by the fraction of their time span
    done), so long cells show progress and an ETA before they finish.
    """

    done: int  # cells complete (including those found complete in the store)
    total: int
    failed: int  # cells completed with a non-zero status in this run
    elapsed: float  # seconds since execution started
    skipped: int  # cells already complete before this run
    steps_done: int = 0
    steps_total: int = 0

    @property
    def eta(self) -> float | None:
        if self.steps_total > 0 and self.steps_done > 0:
            return self.elapsed / self.steps_done * (self.steps_total - self.steps_done)
        ran = self.done - self.skipped
        left = self.total - self.done
        if ran <= 0:
            return None
        return self.elapsed / ran * left


@dataclass
class SweepResult:
    """Summary of one ``run_sweep`` call."""

    store: str
    total: int
    skipped: int
    ran: int
    failed_cells: int
    wall_time: float
    slices: int
    errors: list[str] = field(default_factory=list)
    segments: int = 0  # checkpointed segments integrated by this run
    resumed: int = 0  # partial cells continued from a checkpoint

    @property
    def complete(self) -> bool:
        return not self.errors and self.skipped + self.ran == self.total


# ---------------------------------------------------------------------------------------
# worker side
# ---------------------------------------------------------------------------------------
def segment_time(plan: Plan, cell: Cell, seconds: float = SEGMENT_SECONDS) -> float:
    """Time between checkpoints of ``cell``: the spec's ``checkpoint_every``, else the multiple of
    ``dt_out`` closest to ``seconds`` of estimated single-core work (at least one interval)."""
    spec = plan.spec
    if spec.checkpoint_every is not None:
        return float(spec.checkpoint_every)
    per_interval = plan.cost(cell) / max(spec.n_time - 1, 1)
    k = max(1, int(seconds / per_interval)) if per_interval > 0 else spec.n_time
    return k * spec.dt_out


def cell_steps(plan: Plan, cell: Cell) -> int:
    """Steps of a cell for progress (adaptive: the cost model's estimate)."""
    idef = plan.idefs[plan.grid.coords(cell)["integrator"]]
    if idef.adaptive:
        return 20 * (plan.spec.n_time - 1)
    return plan.spec.n_steps(float(plan.grid.coords(cell)["h"]))


#: what a slice returns per cell: (cell, status, wall time, segments, resumed, ran, values or None,
#: final carry or None, rows kept as stored)
CellRun = tuple


def compute_cell(
    plan: Plan,
    cell: Cell,
    ref: StoreRef,
    group,
    on_segment=None,
    done: bool | None = None,
    saved_keys: set[str] | None = None,
    carry: dict | None = None,
    keep: bool = True,
) -> CellRun:
    """Integrate one cell in checkpointed segments; returns ``(cell, status, wall time, segments
    run, resumed from a checkpoint, ran, values)`` — the values are written by the shard's
    writer (:func:`write_runs`).

    A cell already ``done`` in the store is not touched (ran = False, values None): a
    rescheduled or retried slice never recomputes a finished cell. A cell that needed
    checkpoints saves its complete trajectory too, so a lost result is not recomputed.
    ``done``: the cell's ``done`` flag if the caller has read it (else it is read here);
    ``saved_keys``: the checkpoints in the store (:func:`geosweep.sweeps.checkpoints.present`) if the
    caller has listed them (else the cell's checkpoint is looked for here); ``carry``: the cell's
    final carry from a shorter run (:mod:`geosweep.sweeps.extension`), continued when there is no checkpoint;
    ``keep=False``: no checkpoint is saved (a cell of a store still being created, :mod:`geosweep.sweeps.early`).
    A finished cell also returns its final carry (None when failed or ``ref.carries`` is off) and
    the (samples, snapshots) rows it leaves as stored.
    """
    if done is None:
        done = int(group["done"][cell]) == 1
    if done:
        return cell, int(group["status"][cell]), float(group["wall_time"][cell]), 0, False, False, None
    request, options = plan.request(cell)
    if plan.threads_per_cell is not None and plan.threads_per_cell > 1:
        options = {**options, "threads": plan.threads_per_cell}  # a run option: results are the same
    integrator = plan.grid.coords(cell)["integrator"]
    model = plan.model(cell)
    traj = plan.famdef.start(model, integrator, request, options)  # type: ignore[misc]  # every family has one
    hold = ref.carries and traj.adaptive and traj.stepper.has_dense
    if hold:  # keep the state before the last step (clipped to T): a longer run continues from there
        traj.ictl[C_HOLD] = 1
    listed = saved_keys is None or (bool(saved_keys) and checkpoints.cell_key(cell) in saved_keys)
    saved = checkpoints.load(ref, cell) if listed else None
    traj, resumed, pre, rows = _continued(traj, saved if saved is not None else carry)
    seg = segment_time(plan, cell)
    segments = 0
    while not traj.finished:
        until = (math.floor(traj.time / seg + 1e-9) + 1) * seg
        traj.advance(until=until)
        if traj.ictl[C_HOLD] == 2:  # held before the last step: keep the carry, then take the step
            pre, traj.ictl[C_HOLD] = traj.checkpoint(), 0
            traj.advance(until=until)
        segments += 1
        if keep and traj.finished and (segments > 1 or resumed or traj.wall_time >= KEEP_SECONDS):
            # complete, until its shard is written
            checkpoints.save(ref, cell, extension.joined(traj.checkpoint(), pre, rows), 1.0)
        elif keep and not traj.finished:
            checkpoints.save(ref, cell, extension.joined(traj.checkpoint(), pre, rows), traj.progress)
        if on_segment is not None and (not traj.finished or segments > 1 or resumed or traj.wall_time >= EVENT_SECONDS):
            on_segment(cell, traj.progress)
    res = plan.famdef.collect(model, integrator, traj, options)  # type: ignore[misc]  # (tests/test_registry.py)
    kept = None
    if ref.carries:  # failed cells too: they take a longer layout when the store grows
        kept = pre if (hold and pre is not None) else traj.checkpoint()
    return cell, int(res.status), float(res.wall_time), segments, resumed, True, res.values, kept, rows


def _continued(traj: Trajectory, saved: dict | None) -> tuple[Trajectory, bool, dict | None, tuple[int, int]]:
    """``traj`` (a fresh start) continued from ``saved`` — a checkpoint of this run, or a carry
    or checkpoint of a shorter run of the cell, grown to ``traj``'s span (:mod:`geosweep.sweeps.extension`):
    (trajectory, resumed, the pre-final carry kept so far, the (samples, snapshots) rows the run
    leaves as stored). An incompatible or damaged ``saved`` starts the cell again."""
    if saved is None:
        return traj, False, None, (0, 0)
    own, pre, rows = extension.split(saved)
    try:
        restored = Trajectory.restore(traj.stepper, own)
        if restored.n_out == traj.n_out and restored.S.shape == traj.S.shape and restored.out.shape == traj.out.shape:
            return restored, True, pre, rows
        if restored.n_out < traj.n_out:  # a shorter run of this cell: continue it to the longer span
            base = pre if pre is not None else own  # a dense-output run continues from before its last step
            old = Trajectory.restore(traj.stepper, base)
            # rows the store holds (a dense-output run's carry is before its last step: the rows it
            # computes again are compared with the stored ones, geosweep.sweeps.store.write_shard)
            n_samples = old.n_out + 1 if old.finished or pre is not None else int(old.info[I_NSAMP])
            grown = Trajectory.grown(traj.stepper, base, traj)
            return grown, True, None, grown.rows_kept(n_samples)
    except (KeyError, ValueError, TypeError, IndexError):
        pass  # an incompatible checkpoint: start the cell again
    return traj, False, None, (0, 0)


#: the store's arrays as this process opened them for a run: (url, lease token) -> ArrayCache
_RUN_ARRAYS: dict[tuple[str, str], ArrayCache] = {}
_RUN_ARRAYS_LOCK = threading.Lock()
#: runs whose opened store a worker process keeps (the oldest is dropped first)
RUN_ARRAYS_KEPT = 4


def run_arrays(ref: StoreRef, mode: Literal["r", "r+", "a", "w", "w-"] = "r+") -> ArrayCache:
    """The store's arrays for the tasks of one run, opened once per process and run: opening a
    store reads every array's metadata, which costs more than a slice of sub-millisecond cells.
    A run is known by its lease token (``ref.lease``; the store's layout does not change while
    the run holds the lease); without one the store is opened anew (``mode``)."""
    if ref.lease is None:
        return ArrayCache(ref.open_group(mode))
    key = (ref.url, ref.lease)
    with _RUN_ARRAYS_LOCK:  # opened under the lock: the slices and writers starting at once open it once
        arrays = _RUN_ARRAYS.get(key)
        if arrays is None:
            arrays = _RUN_ARRAYS[key] = ArrayCache(ref.open_group("r+")).open_all()  # the run writes: one for both
            while len(_RUN_ARRAYS) > RUN_ARRAYS_KEPT:
                _RUN_ARRAYS.pop(next(iter(_RUN_ARRAYS)))
    return arrays


def compute_slice(
    plan: Plan,
    cells: Sequence[Cell] | np.ndarray,
    ref: StoreRef,
    on_segment=None,
    group=None,
    fresh: bool = False,
    together: bool = False,
) -> list[CellRun | CellBatch]:
    """Compute ``cells`` (:func:`compute_cell` each); ``plan`` holds (at least) their models
    (:meth:`Plan.part`); nothing is parsed, built or registered here. ``on_segment(cell,
    fraction)`` is called after each segment; ``group``: the store's open group (an
    :class:`ArrayCache`), else opened here. ``fresh``: the store is being created meanwhile
    (:mod:`geosweep.sweeps.early`): no cell is done, checkpointed or carried, and the store is not touched.
    ``together``: fresh short cells are computed together (:mod:`geosweep.sweeps.together`) and
    returned as :class:`CellBatch` items among the others' :data:`CellRun` (what :func:`write_runs`
    takes); else every cell is a :data:`CellRun`."""
    if isinstance(cells, np.ndarray):  # a task's cell_block: python ints in one call, not one per index
        cells = list(map(tuple, cells.tolist()))
    else:
        cells = [tuple(int(i) for i in cell) for cell in cells]
    if fresh:
        done: dict[Cell, bool] = dict.fromkeys(cells, False)
        saved: set[str] = set()
        carries: dict[Cell, dict] = {}
    else:
        group = group if group is not None else run_arrays(ref, "r")
        done = _done_flags(group, cells)
        saved = checkpoints.present(ref) if not all(done.values()) else set()  # one listing per slice
        carries = _carries_of(ref, group, [c for c in cells if not done[c]], plan)
    batches: list[CellBatch] = []
    if together:
        new = [c for c in cells if not done[c] and c not in carries]
        if saved:  # a cell with a checkpoint continues from it, on its own
            new = [c for c in new if checkpoints.cell_key(c) not in saved]
        joint, _ = together_mod.split(plan, new, ref.carries)
        if joint:
            batches = together_mod.compute(plan, joint, ref.carries)
            joined = {m[0] for m in joint}
            cells = [c for c in cells if c not in joined]
    if fresh:
        runs = [compute_cell(plan, cell, ref, None, on_segment, False, set(), None, keep=False) for cell in cells]
    else:
        runs = [
            compute_cell(plan, cell, ref, group, on_segment, done[cell], saved, carries.get(cell)) for cell in cells
        ]
    if ref.carries:
        _stamp(plan, runs, batches)
    return [*runs, *batches]


def _stamp(plan: Plan, runs: list[CellRun], batches: list[CellBatch]) -> None:
    """Record in each final carry whose trajectory it is and the run's T (:func:`geosweep.sweeps.extension.stamped`)."""
    ident, T = extension.identities(plan), float(plan.spec.T)
    for k, r in enumerate(runs):
        if len(r) > 7 and r[7] is not None:
            runs[k] = (*r[:7], extension.stamped(r[7], ident(r[0]), T), *r[8:])
    for b in batches:
        if b.carries is not None:
            ids = np.array([ident(c) for c in b.cells], dtype=np.int64)
            b.carries = {**b.carries, extension.ID_TRAJECTORY: ids, extension.ID_T: np.full(len(b.cells), T)}


def _carries_of(ref: StoreRef, group, cells: list[Cell], plan: Plan) -> dict[Cell, dict]:
    """The stored final carries of ``cells`` that are theirs (one read per shard; a damaged object,
    or a carry of another cell or trajectory or with other arrays than it was sealed with, is not
    used: the cell starts from t = 0; :mod:`geosweep.sweeps.extension`)."""
    if not cells:
        return {}
    out: dict[Cell, dict] = {}
    ident = None
    for index, members in group_by_shard(cells, sweep_shards(group)).items():
        stored = extension.load_shard(ref, index)
        for c in members:
            carry = stored.get(c)
            if carry is None:
                continue
            ident = ident or extension.identities(plan)
            if extension.problem(c, carry, ident(c)) is None:
                out[c] = extension.usable(carry)
    return out


def _done_flags(group, cells: list[Cell]) -> dict[Cell, bool]:
    """``done`` of each of ``cells``, read as one block (the cells' bounding box: one shard for a slice)."""
    if not cells:
        return {}
    lo = [min(c[k] for c in cells) for k in range(len(cells[0]))]
    hi = [max(c[k] for c in cells) + 1 for k in range(len(cells[0]))]
    block = group["done"][tuple(slice(a, b) for a, b in zip(lo, hi))]
    return {c: int(block[tuple(ci - a for ci, a in zip(c, lo))]) == 1 for c in cells}


def _carry_saver(
    ref: StoreRef, index: tuple[int, ...], kept: dict[Cell, dict | None], together: list[tuple[CellBatch, np.ndarray]]
) -> Callable[[dict[Cell, int]], None]:
    """What the shard's writer calls with the checksums of the cells it writes, before their flags:
    their final carries saved, each sealed with its cell and checksum (:func:`geosweep.sweeps.extension.sealed`);
    without carries kept (``ref.carries`` off) any older carry of theirs is dropped."""

    def save(checksums: dict[Cell, int]) -> None:
        if not ref.carries:
            gone = {c: None for c in checksums}
            extension.save_shard(ref, index, gone)
            return
        mine = {c: extension.sealed(a, c, checksums[c]) for c, a in kept.items() if c in checksums and a is not None}
        stacked = []
        for b, ix in together:
            cells, arrays = b.carries_of(ix)
            sel = [k for k, c in enumerate(cells) if c in checksums]
            if sel and len(sel) < len(cells):
                cells, arrays = [cells[k] for k in sel], {n: a[sel] for n, a in arrays.items()}
            if sel:
                stacked.append((cells, extension.sealed_stack(cells, arrays, [checksums[c] for c in cells])))
        extension.save_shard(ref, index, mine, stacked)

    return save


def write_runs(ref: StoreRef, runs: list[CellRun | CellBatch], group=None) -> list[tuple]:
    """Write computed cells shard by shard (:func:`geosweep.sweeps.store.write_shard`; the caller is the
    only writer of those shards), then drop their checkpoints. ``runs``: :func:`compute_slice`'s items
    (cells computed together as :class:`CellBatch`). Returns ``(cell, status, wall time, segments,
    resumed, ran)`` per cell, ``ran`` False for a cell found already done."""
    group = group if group is not None else run_arrays(ref, "r+")
    batches = [r for r in runs if isinstance(r, CellBatch)]
    own = [r for r in runs if not isinstance(r, CellBatch)]
    computed = {r[0]: (r[6], r[1], r[2]) for r in own if r[5]}
    extra = {r[0]: (r[7], r[8]) if len(r) > 8 else (None, (0, 0)) for r in own if r[5]}
    row_of = {c: (b, i) for b in batches for i, c in enumerate(b.cells)}  # a cell computed together: its row
    written: set[Cell] = set()
    for index, cells in group_by_shard([*computed, *row_of], sweep_shards(group)).items():
        mine = [c for c in cells if c in computed]
        parts: dict[int, tuple[CellBatch, list[int]]] = {}
        for c in cells:
            if c in row_of:
                b, i = row_of[c]
                parts.setdefault(id(b), (b, []))[1].append(i)
        together = [(b, np.asarray(ix, dtype=np.intp)) for b, ix in parts.values()]
        # the final carries after the values and before the flags: a cell marked done always has
        # the carry of its values, sealed with the checksum written for them
        keep = _carry_saver(ref, index, {c: extra[c][0] for c in mine}, together)
        rows = {"time": min((extra[c][1][0] for c in mine), default=0),
                "snapshot": min((extra[c][1][1] for c in mine), default=0)}  # fmt: skip
        with fence(ref):  # this run still holds the store's lease, for the whole shard write
            written.update(
                write_shard(group, {c: computed[c] for c in mine}, rows if any(rows.values()) else None, together, keep)
            )
    saved = checkpoints.present(ref) if written else set()  # one listing per write, not a probe per cell
    for cell in written if saved else ():
        if checkpoints.cell_key(cell) in saved:
            checkpoints.delete(ref, cell)
    reports = [(r[0], r[1], r[2], r[3], r[4], r[0] in written) for r in own]
    return reports + [(*r[:5], r[0] in written) for b in batches for r in b.reports()]


def _run_serial(plan: Plan, by_shard: dict, ref: StoreRef, on_segment, report: Callable[[list], None]) -> None:
    """``serial=True``: shard by shard in this thread, each shard written (:func:`write_runs`) and
    reported (``report``) as soon as its cells are done. (Writing on a helper thread while the next
    shard runs was measured slower: the threads contend for the GIL.)"""
    arrays = ArrayCache(ref.open_group("r+")).open_all()  # opened once (each open reads every array's metadata)
    for group in by_shard.values():
        runs = [r for cells in group for r in compute_slice(plan, cells, ref, on_segment, arrays, together=True)]
        report(write_runs(ref, runs, arrays))


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


@dataclass(frozen=True)
class StoreFault:
    """What a worker task returns instead of raising when the store refuses its writes: the lease
    was lost (``lost``) or a write failed for good (disk full, read-only). The driver stops the
    run with this one line; no retry, no worker traceback in the logs."""

    message: str
    lost: bool

    def error(self) -> Exception:
        return LeaseLost(self.message) if self.lost else StoreWriteError(self.message)


def store_fault(ref: StoreRef, exc: BaseException) -> StoreFault | None:
    """The :class:`StoreFault` of ``exc`` (a lost lease or a store write no retry fixes), else None."""
    if isinstance(exc, LeaseLost):
        return StoreFault(str(exc), True)
    if isinstance(exc, StoreWriteError):
        return StoreFault(str(exc), False)
    if isinstance(exc, OSError) and (err := store_write_error(ref.url, exc)) is not None:
        return StoreFault(str(err), False)
    return None


def _guarded(ref: StoreRef, fn: Callable[..., Any], *args: Any) -> Any:
    try:
        visibility.ensure_visible(ref)  # a worker that joined late proves it sees this run's store
        with fewer_collections():
            return fn(*args)
    except Exception as exc:
        if (fault := store_fault(ref, exc)) is not None:
            return fault
        raise


def _compute_part(
    plan: Plan,
    models: Any,
    cells: Sequence[Cell] | np.ndarray,
    ref: StoreRef,
    topic: str | None = None,
    fresh: bool = False,
) -> list[CellRun] | StoreFault:
    """Worker entry point of a slice: ``models`` (its own, :class:`geosweep.sweeps.bundles.Models`, or
    its shard's as the result of a model task, shipped once); ``fresh``: see :func:`compute_slice`."""
    return _guarded(
        ref, compute_slice, plan.part(models=bundles_mod.unwrap(models)), cells, ref, _on_segment_events(topic), None,
        fresh, True,
    )  # fmt: skip


def _run_part(
    plan: Plan, models: Any, cells: Sequence[Cell] | np.ndarray, ref: StoreRef, topic: str | None = None
) -> list[tuple] | StoreFault:
    """Worker entry point of a slice that is a whole shard: compute, then write (no hop between tasks)."""
    runs = _compute_part(plan, models, cells, ref, topic)
    return runs if isinstance(runs, StoreFault) else _guarded(ref, write_runs, ref, runs)


def _write_part(ref: StoreRef, *parts: list[CellRun] | StoreFault) -> list[tuple] | StoreFault:
    """Worker entry point of a shard's writer: the results of the shard's slices."""
    for part in parts:
        if isinstance(part, StoreFault):
            return part
    return _guarded(ref, write_runs, ref, [run for part in parts if not isinstance(part, StoreFault) for run in part])


def slice_resources(workers: dict[str, dict]) -> dict[str, float] | None:
    """``resources=`` for slice tasks on a cluster of ``workers`` (the scheduler's worker info):
    :data:`SLICE_RESOURCE` if every worker has it."""
    if workers and all(SLICE_RESOURCE in (w.get("resources") or {}) for w in workers.values()):
        return {SLICE_RESOURCE: 1}
    return None


#: Most bytes :func:`_spread` copies to the workers (bundle bytes × other workers).
SPREAD_BYTES = 512 * 2**20


def _spread(client: Any, bundles: list, n_workers: int, log: Callable[[str], None]) -> None:
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


def warm_plan(plan: Plan, cells: Sequence[Cell] | None = None) -> None:
    """Compile (or load from the cache) the kernels ``cells`` (default: every cell) of ``plan`` run:
    only their models and integrators when the family can say so (``FamilyDef.warm_for``), else
    the family's whole ``warmup``."""
    famdef = plan.famdef
    if famdef.warm_for is None:
        famdef.warmup()
        return
    cells = list(plan.grid.cells()) if cells is None else list(cells)
    keys = {plan.grid.combination(c) for c in cells}
    integrators = sorted({plan.grid.coords(c)["integrator"] for c in cells})
    famdef.warm_for([plan.models[k] for k in keys], integrators)


def warm_part(plan: Plan, cells: Sequence[Cell]) -> tuple[Plan, list[Cell]]:
    """What a worker needs to warm its kernels for ``cells`` (:func:`warm_worker`): the plan without
    models and no cells when the family warms without them (``FamilyDef.warm_for`` is None), else one
    cell per (parameter combination, integrator) and those cells' models — not the whole plan, which
    at 10⁵ seeds pickles to 14 MB for every worker."""
    if plan.famdef.warm_for is None:
        return plan.part(models={}), []
    grid = plan.grid
    axis = grid.dims.index("integrator")
    first: dict[tuple, Cell] = {}
    for cell in cells:
        first.setdefault((grid.combination(cell), cell[axis]), cell)
    reps = list(first.values())
    return plan.part(cells=reps), reps


def warm_worker(plan: Plan, cells: Sequence[Cell] | None = None) -> str:
    """Compile or load the kernels of ``cells`` in this process (call once per worker), and import the
    store's library; what it compiled, as a line to log, or "" when everything came from the cache."""
    import zarr  # noqa: F401 - imported here, not by the first shard writer beside a running slice (~0.6 s)

    from geosweep.kernels._jit import watch_compiles

    t0 = time.perf_counter()
    with watch_compiles() as compiles:
        warm_plan(plan, cells)
    if not compiles[0]:
        return ""  # loaded from the cache: nothing to say
    return f"{socket.gethostname()}:{os.getpid()} compiled its kernels in {time.perf_counter() - t0:.1f}s"


# ---------------------------------------------------------------------------------------
# driver side
# ---------------------------------------------------------------------------------------
def cell_threads(requested: int | None, pending: int, cores: int) -> int:
    """Threads per cell of a run: ``requested`` if given, else (automatic) one per cell, or
    ``cores // pending`` when fewer cells are runnable than there are cores. Results are bitwise
    the same on any count; families that cannot split a step use one thread
    (:mod:`geosweep.kernels.core.threads`; capped there at the worker's ``NUMBA_NUM_THREADS``)."""
    if requested is not None:
        return max(1, int(requested))
    return max(1, cores // pending) if 0 < pending < cores else 1


def _with_threads(plan: Plan, pending: int, cores: int, log: Callable[[str], None]) -> Plan:
    """``plan`` with its threads per cell resolved (:func:`cell_threads`), logged when above one."""
    k = cell_threads(plan.threads_per_cell, pending, cores)
    if k > 1:
        log(f"{pending} cell(s) on {cores} cores: up to {k} threads per cell")
    return plan.model_copy(update={"threads_per_cell": k})


@dataclass
class _Shard:
    """One store shard's slices as submitted, kept until the shard is written: what the driver needs
    to resubmit a slice whose workers died (:mod:`geosweep.sweeps.resubmit`)."""

    index: int  # rank of the shard (task keys and priorities)
    shard: Any  # the store shard's key (its models' bundle)
    slices: list[list[Cell]]
    parts: list[Any]  # the slices' futures (their values live on the workers until the shard is written)
    attempt: int = 0
    progress: dict[Cell, float] = field(default_factory=dict)  # cells' progress at the last resubmission
    waited: int = 0  # resubmissions in a row of slices that never started (their queued workers died)
    advances: int = 0  # the run's progress count when ``waited`` was last reset


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

    ``grow=True``: ``spec`` may add values at the end of sweep axes of the store's spec; the store
    is grown to it and only the new cells are computed (:mod:`geosweep.sweeps.grow`).

    Execution: ``client`` (a ``distributed.Client``), else ``address`` of a scheduler, else a
    new ``LocalCluster`` with ``n_workers`` workers running one slice each (default: all cores;
    :data:`LOCAL_WORKER`: a spare thread per worker writes finished shards) — threads in this
    process (``processes=False``: the kernels release the GIL, so cells of a millisecond or more run in
    parallel, and threads start instantly) or worker processes (``processes=True``); by default
    processes for many sub-millisecond cells, whose Python around the kernel holds the GIL, else
    threads (:func:`geosweep.sweeps.execution.auto_processes`);
    ``serial=True`` runs in this process without Dask (same results, bitwise); so does a run of a few
    short cells whatever the execution (:func:`geosweep.sweeps.execution.runs_in_driver`: estimated under
    ``execution.in_driver_below`` seconds in all, default 0.025 s, e.g. 10³ cells of 0.1 ms).
    ``threads_per_cell``: threads inside one cell (default: the plan's, else automatic, see
    :func:`cell_threads`; same results, bitwise, on any count).
    Raises :class:`geosweep.sweeps.spec.SpecError` for a bad spec,
    :class:`geosweep.sweeps.store.StoreMismatchError` if ``store`` holds another sweep,
    :class:`geosweep.sweeps.store.StoreFormatError` if it has another store format and
    :class:`geosweep.sweeps.lease.StoreBusyError` while another run writes it — all before any work;
    :class:`geosweep.sweeps.lease.LeaseLost` if another run takes the lease over meanwhile (this run was
    stopped past the lease timeout: it writes nothing more) and :class:`geosweep.sweeps.lease.StoreWriteError`
    when the store refuses writes for good (disk full, read-only). Integration failures are
    recorded as cell status, not raised.

    ``grow``: ``spec`` may be the store's with a larger ``T``: the store grows in place and its
    finished cells continue from their final carries (:mod:`geosweep.sweeps.extension`; ``recompute``: every
    finished cell is computed again from t = 0, no carry read, where cells without a carry are otherwise
    refused with :class:`geosweep.sweeps.extension.ExtendError`). ``keep_carries``: keep each finished cell's
    final carry in the store (default), so that it can be extended later.

    ``execution``: all of the execution options at once (:class:`~geosweep.sweeps.execution.Execution`,
    e.g. from the command line) instead of ``address``, ``n_workers``, ``serial``, ``processes``,
    ``slice_seconds`` and ``threads_per_cell``.
    """
    log = log or (lambda msg: None)
    if execution is None:
        execution = Execution(
            serial=serial,
            address=address,
            n_workers=n_workers,
            processes=processes,
            slice_seconds=slice_seconds,
            threads_per_cell=threads_per_cell,
        )
    plan = make_plan(spec)
    if execution.threads_per_cell is not None:
        plan = plan.model_copy(update={"threads_per_cell": execution.threads_per_cell})
    ref = StoreRef.of(store if store is not None else default_store_path(plan.spec), storage_options)
    # one writer per store; refused at once (StoreBusyError) while another run holds it. Every write
    # goes through lease.ref (the store's real path and this run's token) and is fenced by the lease.
    with Lease(ref, log=log) as lease:
        try:
            run_ref = dataclasses.replace(lease.ref, carries=keep_carries)
            # a larger T: the store grows to it first (geosweep.sweeps.extension); added axis values: sweeps.grow
            if grow:
                from geosweep.sweeps import extension as grow_mod

                grown = grow_mod.prepare(plan, run_ref, log, recompute)
                if grown is not plan:  # a plan of the grown spec: keep this run's options
                    plan = grown.model_copy(update={"threads_per_cell": plan.threads_per_cell})
            # a new store of short cells is created while the first slices compute (geosweep.sweeps.early)
            creating = early.start(plan, run_ref, execution, grow, log)
            try:
                return _run_locked(plan, run_ref, execution, client, progress, log, lease, grow, creating)
            finally:
                if creating is not None:  # no write of this run outlives its lease
                    creating.finish()
        except OSError as exc:
            if (fault := store_fault(lease.ref, exc)) is None:
                raise
            raise fault.error() from None


@fewer_collections()  # a cell's objects are freed by reference counting (geosweep.sweeps.gc_policy)
def _run_locked(
    plan: Plan,
    ref: StoreRef,
    execution: Execution,
    client: Any,
    progress: Callable[[Progress], None] | None,
    log: Callable[[str], None],
    lease: Lease | None,
    grow: bool,
    creating: early.EarlyStore | None,
) -> SweepResult:
    spec, grid = plan.spec, plan.grid
    if creating is None:
        created = ensure_store(plan, ref, log, grow=grow)
        if created:  # just created by this run (its fillers marked): no cell is done
            mask = np.zeros(grid.shape, dtype=bool)
        else:
            mask = done_mask(ref, log)
            if mark_fillers(plan, ref):
                log(f"store {ref.url}: not-applicable filler cells re-marked")
    else:  # a store that does not exist yet: no cell is done
        created, mask = True, np.zeros(grid.shape, dtype=bool)
    pending = grid.pending(mask)
    total = grid.runnable()
    skipped = total - len(pending)
    log(
        f"store {ref.url}: {'creating' if creating else 'created' if created else 'resuming'}; "
        f"{skipped}/{total} cells already complete, {len(pending)} to run"
    )
    t_start = time.perf_counter()
    if not pending:
        if creating is not None:
            creating.wait()
        return SweepResult(ref.url, total, skipped, 0, 0, 0.0, 0)

    from geosweep.kernels._jit import watch_compiles

    t0 = time.perf_counter()
    with watch_compiles() as compiles:
        warm_plan(plan, pending)  # compiles once here and fills the on-disk cache
    if compiles[0]:
        log(f"kernels compiled in {time.perf_counter() - t0:.1f}s")

    shards = shard_shape(plan) if creating is not None else sweep_shards(ref.open_group("r"))
    done = skipped
    failed = 0
    segments = 0
    resumed = 0
    ran_cells = 0
    errors: list[str] = []
    steps_of = {c: cell_steps(plan, c) for c in pending}
    steps_total = sum(steps_of.values())
    partial: dict[Cell, float] = {}
    finished_steps = 0
    lock = threading.Lock()

    def emit() -> None:
        if progress:
            steps = finished_steps + sum(int(f * steps_of.get(c, 0)) for c, f in partial.items())
            progress(Progress(done, total, failed, time.perf_counter() - t_start, skipped, steps, steps_total))

    advances = [0]  # segments and shards reported so far: the run makes progress (geosweep.sweeps.resubmit)

    def on_segment(cell, fraction: float) -> None:
        with lock:
            partial[tuple(cell)] = fraction
            advances[0] += 1
            emit()

    def report(results: list[tuple]) -> None:
        nonlocal done, failed, segments, resumed, ran_cells, finished_steps
        with lock:
            for cell, st, _wall, nseg, res, ran in results:
                done += 1
                failed += int(ran and st != Status.OK)
                segments += nseg
                resumed += int(res)
                ran_cells += int(ran)
                partial.pop(cell, None)
                finished_steps += steps_of.get(cell, 0)
            advances[0] += 1
            emit()

    with lock:
        emit()

    own_cluster = None
    own_client = None
    publisher: demand.Publisher | None = None
    try:
        cost = np.zeros(0) if execution.serial else plan.cost_array()  # plan.cost of every cell, indexed by cell
        at = tuple(cell_block(pending).T)  # the pending cells' indices, as arrays
        to_run = cost[at] if cost.size else cost  # the pending cells' costs
        # a few short cells: a Dask round trip costs more than the workers save (execution.runs_in_driver)
        in_driver = execution.in_driver(to_run)
        if in_driver:
            log(
                f"{len(pending)} short cells of {float(to_run.sum()):.2g} s estimated work in all: run in this "
                f"process, without Dask ({IN_DRIVER_ENV}=0 sends every run to the workers)"
            )
            if creating is not None:
                creating.wait()
        if execution.serial or in_driver:
            by_shard = plan.shard_slices(pending, shards, execution.slice_seconds, 1)
            slices = [cells for group in by_shard.values() for cells in group]
            plan = _with_threads(plan, len(pending), os.cpu_count() or 1, log)
            _run_serial(plan, by_shard, ref, on_segment, report)
        else:
            pending_cost = {c: cost[c] for c in pending}  # looked up once: for the workers, demand, slicing
            # which pending cells are computed together (geosweep.sweeps.together): the choice of workers, slicing
            joint = together_mod.joint_mask(plan, cost, ref.carries)[at]
            if client is None:
                if execution.processes is None and execution.starts_local_cluster:  # threads or processes
                    # cells computed together hold the GIL briefly: threads run them
                    execution = execution.for_cells(to_run[(to_run > 0) & ~joint], log)
                own_cluster, client = execution.open_client()
                own_client = client
            # adaptive scaling is told how many workers the pending cells can keep busy (geosweep.sweeps.demand)
            publisher = demand.Publisher(client, demand.Demand(pending_cost, execution.slice_seconds))
            publisher.publish()
            # never a task per model (a sweep of many seeds has a model per seed: a task each cost more
            # than their cells): small models ride inside their slices, larger ones go to the cluster
            # once per shard as one task the shard's slices refer to (geosweep.sweeps.bundles)
            tag = f"{spec.spec_hash[:10]}-{os.getpid()}-{time.time_ns()}"
            pending_by_shard = group_by_shard(pending, shards)

            no_models = plan.part(models={})  # large models are built on the worker (geosweep.sweeps.bundles)
            per_model = bundles_mod.model_bytes(plan)

            def bundle(shard: Any, key: str) -> Any:
                keys = plan.combinations(pending_by_shard[shard])
                return bundles_mod.submit_bundle(client, plan, no_models, keys, key, per_model)

            workers = client.scheduler_info(n_workers=-1).get("workers", {})
            # small models travel inside the slices that need them (no model task to wait for, copy
            # or lose); an adaptive cluster without workers yet is started by the pending model tasks
            inline = bool(workers) and bundles_mod.inline_models(per_model, pending_by_shard, plan)
            bundles = (
                {}
                if inline
                else {shard: bundle(shard, f"geosweep-models-{tag}-{i}") for i, shard in enumerate(pending_by_shard)}
            )
            if not workers:
                # an adaptive cluster starts workers for the pending model tasks; the slices' layout
                # and resources follow the workers it starts
                log("waiting for a first Dask worker")
                first_worker.wait(client, log)  # says what the batch jobs do; stops when they cannot start
                workers = client.scheduler_info(n_workers=-1).get("workers", {})
            # workers that are threads of this process (inproc://) see its store and share its kernels, warmed
            # above: no round trip to them for either (the 10³-cell run of 0.1 ms cells spends ~0.1 s in all)
            in_process = bool(workers) and all(str(addr).startswith("inproc://") for addr in workers)
            if in_process:
                visibility.prove_local(ref)
            else:
                visibility.check_workers(client, ref, log)  # every worker sees this store, before any slice
            n_w = max(1, len(workers))
            resources = slice_resources(workers)
            procs = all(w.get("nanny") for w in workers.values())  # a worker with a nanny is a process of its own
            # the last shards cut finer, except for short cells on worker processes (their values would
            # travel to the writer between processes: slower than the idle worker it spares); for those,
            # fewer shards than 2 per worker are cut only so far that every worker has a slice
            long_cells = float(np.mean(list(pending_cost.values()))) >= AUTO_PROCESS_CELL_SECONDS
            cheap_cuts = not procs or long_cells
            # a shard of one slice is written by a task of its own on the worker's spare writer thread,
            # beside the next slice, when its cells hardly hold the GIL (10³ cells of 10 ms on 2 threads:
            # 6.24–6.52 → 6.10–6.32 s); short cells compute and write in one task (their writer would
            # contend with the next slice for the GIL: 10⁴ cells of 0.1 ms, 3.53–3.78 → 3.69–4.33 s)
            writers_apart = bool(resources) and long_cells
            # cells computed together are not cut into slices shorter than MIN_SLICE_SECONDS
            min_slice = MIN_SLICE_SECONDS if bool(joint.all()) else 0.0
            by_shard = plan.shard_slices(pending, shards, execution.slice_seconds, n_w, cheap_cuts, min_slice)
            slices = [cells for group in by_shard.values() for cells in group]
            kind = " (processes)" if procs else ""
            log(f"{len(pending)} cells in {len(slices)} slices ({len(by_shard)} store shards) on {n_w} workers{kind}")
            # a worker that cannot be reached (paused, lost) is named, not fatal: liveness.completed watches it
            warmed = {} if in_process else client.run(warm_worker, *warm_part(plan, pending), on_error="return")
            for addr, line in warmed.items():
                if not isinstance(line, str):
                    log(f"worker {addr}: not warmed up ({line!r:.200})")
                elif line:  # empty: nothing was compiled
                    log(f"worker {line}")
            _spread(client, list(bundles.values()), n_w, log)
            # cores: the workers' threads, less the spare writer thread of a LOCAL_WORKER
            cores = sum(int(w.get("nthreads", 1)) for w in workers.values()) - (len(workers) if resources else 0)
            bare = _with_threads(plan, len(pending), max(1, cores), log).part(models={})
            topic = f"geosweep-progress-{spec.spec_hash[:10]}-{os.getpid()}-{time.time_ns()}"
            started: dict[str, int] = {}  # task key → times a slice started running (not only waited)

            def on_event(event: tuple) -> None:
                msg = event[1]
                if "started" in msg:
                    started[msg["started"]] = started.get(msg["started"], 0) + 1
                else:
                    on_segment(tuple(msg["cell"]), msg["fraction"])

            client.subscribe_topic(topic, on_event)
            # Dask runs higher priority first: shard by shard, the costliest shards first, and the
            # longest slices first within a shard — finished shards reach the store while the sweep
            # runs, and no worker is left finishing one long slice at the end while the other idles.
            # Each shard's writer runs as soon as its slices are done and is its only writer.
            groups = list(by_shard.items())  # in that order (Plan.shard_slices)
            futures: list = []
            if lease is not None:  # a lost lease cancels the run's tasks (the slices go with their writers)
                lease.on_lost(lambda _msg: client.cancel(futures))
            waiting: dict[Any, _Shard] = {}  # the future the driver waits for → its shard's slices

            def submit(sh: _Shard, redo: list[int], fresh: bool = False) -> None:
                """Submit the slices ``redo`` of ``sh`` (new keys on a resubmission) and its writer;
                ``fresh``: compute-only slices of a store not created yet, their writer comes later (:func:`write`)."""
                sh.attempt += 1
                rank = (len(groups) - sh.index) * 10**12
                again = "" if sh.attempt == 1 else f"-r{sh.attempt}"
                if not inline and bundles[sh.shard].status == "error":  # its model task died with its workers
                    bundles[sh.shard] = bundle(sh.shard, f"geosweep-models-{tag}-{sh.index}{again}")
                for i in redo:
                    cells = sh.slices[i]
                    sh.parts[i] = client.submit(
                        _run_part if len(sh.slices) == 1 and not fresh and not writers_apart else _compute_part,
                        bare,
                        bundles_mod.Models({k: plan.models[k] for k in plan.combinations(cells)})
                        if inline
                        else bundles[sh.shard],
                        cell_block(cells),  # one array: Dask does not walk it, it pickles as one buffer
                        ref,
                        topic,
                        *((True,) if fresh else ()),
                        key=f"geosweep-{tag}-slice-{sh.index}-{i}{again}",
                        pure=False,
                        retries=execution.retries,  # a slice that raised is retried; finished cells, checkpoints: cheap
                        priority=rank + min(int(1000 * sum(cost[c] for c in cells)), 10**12 - 1),
                        resources=resources,
                    )
                if not fresh:
                    write(sh, len(sh.slices) > 1 or writers_apart)

            def write(sh: _Shard, writer: bool = True) -> None:
                """Wait for the shard's writer (``writer=False``: its one slice, which writes the shard itself)."""
                fut = sh.parts[0]
                if writer:
                    fut = client.submit(
                        _write_part,
                        ref,
                        *sh.parts,
                        key=f"geosweep-{tag}-shard-{sh.index}{'' if sh.attempt == 1 else f'-r{sh.attempt}'}",
                        pure=False,
                        retries=execution.retries,
                        priority=10**15 + (len(groups) - sh.index) * 10**12,
                    )
                waiting[fut] = sh
                futures.append(fut)

            wave: list[_Shard] = []  # a store being created: the first slices compute meanwhile (sweeps.early)
            if creating is not None:
                # on worker processes, not when the wave would be a large part of the run: each of its shards
                # sends its values to a writer task in another process (10⁴ cells of 0.1 ms, 4 shards on 2
                # processes: 3.3 s without the wave, 3.6 s with it; threads share the values for free)
                leading = groups if not procs or len(groups) >= early.MIN_SHARDS_PER_WORKER * n_w else []
                for s_i, (shard, group) in enumerate(leading):
                    if sum(len(sh.slices) for sh in wave) >= 2 * n_w:
                        break
                    wave.append(_Shard(s_i, shard, group, [None] * len(group)))
                    submit(wave[-1], list(range(len(group))), fresh=True)
                try:
                    creating.wait()
                except BaseException:
                    client.cancel([p for sh in wave for p in sh.parts])
                    raise
            own_arrays = ArrayCache(ref.open_group("r"))  # the driver's reads of its store (resubmissions)
            at_start = {c: f for c, f in checkpoints.progress(ref).items() if f == f}  # before any slice runs
            for first in wave:  # the store exists: their writers may run
                write(first)
            for s_i, (shard, group) in enumerate(groups[len(wave) :], start=len(wave)):
                submit(_Shard(s_i, shard, group, [None] * len(group)), list(range(len(group))))

            def resubmitted(sh: _Shard, exc: BaseException) -> str:
                """Resubmit the slices of ``sh`` whose workers died (``exc``) if a cell of theirs advanced
                since the last attempt: ""; else the error line (:mod:`geosweep.sweeps.resubmit`)."""
                died = resubmit.lost_workers(exc)
                if not died:
                    return f"{type(exc).__name__}: {exc}"
                keys = {getattr(exc, "task", None)}
                redo = [i for i, p in enumerate(sh.parts) if p.key in keys or p.status == "error"]
                cells = [c for i in (redo or range(len(sh.slices))) for c in sh.slices[i]]
                now = resubmit.cell_progress(ref, own_arrays, cells)
                before = {c: sh.progress.get(c, at_start.get(c, 0.0)) for c in now}
                moved = resubmit.advanced(before, now)
                if moved:
                    sh.progress.update(now)
                    sh.waited = 0
                    log(
                        f"a slice of {len(cells)} cell(s) lost its worker {died} time(s); its checkpoints advanced "
                        f"({resubmit.describe(moved, before, now)}): resubmitted (attempt {sh.attempt + 1})"
                    )
                    submit(sh, redo)
                    return ""
                ran = any(started.get(str(sh.parts[i].key)) for i in redo)
                if sh.advances != advances[0]:  # other cells progressed meanwhile: the cluster does work
                    sh.waited, sh.advances = 0, advances[0]
                if not ran and sh.waited < resubmit.MAX_WAITED:  # queued on workers that died: not its fault
                    sh.waited += 1
                    log(
                        f"a slice of {len(cells)} cell(s) waited on {died} worker(s) that died: "
                        f"resubmitted (attempt {sh.attempt + 1})"
                    )
                    submit(sh, redo)
                    return ""
                return (
                    f"KilledWorker: a slice of {len(cells)} cell(s) lost its worker {died} time(s) and none of its "
                    f"checkpoints advanced since the last attempt ({resubmit.describe(cells, before, now)}); "
                    "not resubmitted — finished cells and checkpoints are kept, a rerun resumes"
                )

            # a worker that stops answering is named, and a cluster none of whose workers answers stops the run
            for fut in liveness.completed(client, futures, log):
                if lease is not None and lease.lost:
                    break
                sh = waiting.pop(fut, None)  # its slices' values are released once the shard is written
                try:
                    result = fut.result()
                except Exception as exc:  # noqa: BLE001 - one bad slice must not lose the others
                    if lease is not None and lease.lost:
                        break
                    why = resubmitted(sh, exc) if sh is not None else f"{type(exc).__name__}: {exc}"
                    if not why:
                        continue
                    errors.append(why)
                    if len(errors) <= MAX_ITEMS:  # bounded: the rest are counted below
                        log(f"slice failed: {errors[-1][:MAX_ERROR_CHARS]}")
                    continue
                if isinstance(result, StoreFault):  # the store refuses this run's writes: stop
                    client.cancel(futures)
                    raise result.error()
                report(result)
                publisher.demand.finished(r[0] for r in result)
                publisher.publish()
            client.unsubscribe_topic(topic)
            if lease is not None and lease.lost:
                client.cancel(futures)
                raise LeaseLost(lease.lost)
    finally:
        if publisher is not None:
            publisher.publish(0)  # this run wants no more workers
        if own_client is not None:
            own_client.close()
        if own_cluster is not None:
            own_cluster.close()

    if len(errors) > MAX_ITEMS:
        log(f"… and {len(errors) - MAX_ITEMS} more slice(s) failed ({len(errors)} in all)")
    checkpoints.tidy(ref)  # no writer of this run is left
    wall = time.perf_counter() - t_start
    # what really ran: the cells complete now that were not when this run started (a slice whose
    # worker died after writing its cells reports nothing, and its retry finds them done)
    ran = ran_cells
    if ran_cells < len(pending):  # not every pending cell was reported written: count them in the store
        now = done_mask(ref)
        ran = max(ran_cells, sum(1 for c in pending if now[c]))
    from geosweep.flows.entry import pause

    pause("tail")  # a test hook: a signal between the last cell and the run's record
    record_run(
        ref,
        {
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cells_run": ran,
            "cells_resumed": resumed,
            "segments_run": segments,
            "cells_failed_status": failed,
            "task_errors": len(errors),
            "wall_time_s": round(wall, 3),
            "host": socket.gethostname(),
        },
    )
    return SweepResult(ref.url, total, skipped, ran, failed, wall, len(slices), errors, segments, resumed)
