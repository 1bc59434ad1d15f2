"""Computing a slice's cells on a worker (or in the driver): each cell in checkpointed segments, a slice's
fresh short cells together (:mod:`geosweep.sweeps.together`), and the kernels warmed first.

Nothing here parses a spec, builds a model or talks to Dask: a slice receives the plan part its cells need,
the store's reference and the run's :class:`~geosweep.sweeps.run_options.RunOptions`, and returns what the
shard's writer writes (:func:`geosweep.sweeps.writes.write_runs`).
"""

from __future__ import annotations

import math
import os
import socket
import threading
import time
from collections.abc import Sequence
from typing import Literal

import numpy as np

from geosweep.kernels.core.layout import C_HOLD, I_NSAMP
from geosweep.kernels.core.trajectory import Trajectory
from geosweep.sweeps import carries as carry_objects
from geosweep.sweeps import checkpoints, extension
from geosweep.sweeps import together as together_mod
from geosweep.sweeps.grid import Cell
from geosweep.sweeps.plan import Plan
from geosweep.sweeps.run_options import DEFAULT, RunOptions
from geosweep.sweeps.store import ArrayCache, StoreRef, group_by_shard, sweep_shards
from geosweep.sweeps.together import CellBatch

#: Default work per checkpointed segment (single-core seconds) when a spec sets no checkpoint_every.
SEGMENT_SECONDS = 120.0
#: A finished cell that took at least this long (s) is kept as a complete checkpoint until its
#: shard is written, so an interruption before the shard write loses no such cell.
KEEP_SECONDS = 2.0

#: A cell that finished in one segment shorter than this (s) sends no progress event of its own:
#: its shard's write reports it soon after (a sweep of sub-millisecond cells sent one per cell).
EVENT_SECONDS = 1.0


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
#: final carry or None, rows kept as stored, rows whose values are the store's)
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
    run: RunOptions = DEFAULT,
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
    ``keep=False``: no checkpoint is saved (a cell of a store still being created, :mod:`geosweep.sweeps.early`);
    ``run``: the run's options (threads per cell).
    A finished cell also returns its final carry (None when failed or ``ref.carries`` is off),
    the (samples, snapshots) rows it leaves as stored and the rows whose values its writer takes
    from the store ((0, 0) unless continued from a :func:`geosweep.sweeps.carries.thin` carry).
    """
    if done is None:
        done = int(group["done"][cell]) == 1
    if done:
        return cell, int(group["status"][cell]), float(group["wall_time"][cell]), 0, False, False, None
    request, options = plan.request(cell)
    if run.threads > 1:
        options = {**options, "threads": run.threads}  # a run option: results are the same
    integrator = plan.grid.coords(cell)["integrator"]
    model = plan.model(cell)
    traj = plan.famdef.start(model, integrator, request, options)  # type: ignore[misc]  # every family has one
    hold = ref.carries and traj.adaptive and traj.stepper.has_dense
    if hold:  # keep the state before the last step (clipped to T): a longer run continues from there
        traj.ictl[C_HOLD] = 1
    listed = saved_keys is None or (bool(saved_keys) and checkpoints.cell_key(cell) in saved_keys)
    saved = checkpoints.load(ref, cell) if listed else None
    traj, resumed, pre, rows, from_store = _continued(traj, saved if saved is not None else carry)
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
            checkpoints.save(ref, cell, extension.joined(traj.checkpoint(), pre, rows, from_store), 1.0)
        elif keep and not traj.finished:
            checkpoints.save(ref, cell, extension.joined(traj.checkpoint(), pre, rows, from_store), traj.progress)
        if on_segment is not None and (not traj.finished or segments > 1 or resumed or traj.wall_time >= EVENT_SECONDS):
            on_segment(cell, traj.progress)
    res = plan.famdef.collect(model, integrator, traj, options)  # type: ignore[misc]  # (tests/test_registry.py)
    kept = None
    if ref.carries:  # failed cells too: they take a longer layout when the store grows
        kept = pre if (hold and pre is not None) else traj.checkpoint()
    return cell, int(res.status), float(res.wall_time), segments, resumed, True, res.values, kept, rows, from_store


def _continued(
    traj: Trajectory, saved: dict | None
) -> tuple[Trajectory, bool, dict | None, tuple[int, int], tuple[int, int]]:
    """``traj`` (a fresh start) continued from ``saved`` — a checkpoint of this run, or a carry
    or checkpoint of a shorter run of the cell, grown to ``traj``'s span (:mod:`geosweep.sweeps.extension`):
    (trajectory, resumed, the pre-final carry kept so far, the (samples, snapshots) rows the run
    leaves as stored, the rows of those whose values are the store's: a
    :func:`~geosweep.sweeps.carries.thin` carry's are NaN here). An incompatible or damaged ``saved``
    (or a thin carry of this very span: its samples are the store's, which a rerun recomputes)
    starts the cell again."""
    if saved is None:
        return traj, False, None, (0, 0), (0, 0)
    own, pre, rows, from_store = extension.split(saved)
    thin = carry_objects.is_thin(own)
    own = carry_objects.widened(own, traj.stepper.n_obs)
    try:
        restored = Trajectory.restore(traj.stepper, own)
        same = restored.n_out == traj.n_out and restored.S.shape == traj.S.shape
        if same and not thin and restored.out.shape == traj.out.shape:
            return restored, True, pre, rows, from_store
        if restored.n_out < traj.n_out:  # a shorter run of this cell: continue it to the longer span
            base = pre if pre is not None else own  # a dense-output run continues from before its last step
            old = Trajectory.restore(traj.stepper, base)
            # rows the store holds (a dense-output run's carry is before its last step: the rows it
            # computes again are compared with the stored ones, geosweep.sweeps.store.write_shard)
            n_samples = old.n_out + 1 if old.finished or pre is not None else int(old.info[I_NSAMP])
            grown = Trajectory.grown(traj.stepper, base, traj)
            kept = grown.rows_kept(n_samples)
            return grown, True, None, kept, kept if thin else from_store
    except (KeyError, ValueError, TypeError, IndexError):
        pass  # an incompatible checkpoint: start the cell again
    return traj, False, None, (0, 0), (0, 0)


#: process-wide state: the store's arrays as this process opened them for a run: (url, lease token) -> ArrayCache
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
    run: RunOptions = DEFAULT,
) -> list[CellRun | CellBatch]:
    """Compute ``cells`` (:func:`compute_cell` each); ``plan`` holds (at least) their models
    (:meth:`Plan.part`); nothing is parsed, built or registered here. ``on_segment(cell,
    fraction)`` is called after each segment; ``group``: the store's open group (an
    :class:`ArrayCache`), else opened here. ``fresh``: the store is being created meanwhile
    (:mod:`geosweep.sweeps.early`): no cell is done, checkpointed or carried, and the store is not touched.
    ``together``: fresh short cells are computed together (:mod:`geosweep.sweeps.together`) and
    returned as :class:`CellBatch` items among the others' :data:`CellRun` (what :func:`write_runs`
    takes); else every cell is a :data:`CellRun`. ``run``: the run's options, handed to every cell."""
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
    if together and run.threads == 1:  # a cell on several threads runs alone
        new = [c for c in cells if not done[c] and c not in carries]
        if saved:  # a cell with a checkpoint continues from it, on its own
            new = [c for c in new if checkpoints.cell_key(c) not in saved]
        joint, _ = together_mod.split(plan, new, ref.carries)
        if joint:
            batches = together_mod.compute(plan, joint, ref.carries)
            joined = {m[0] for m in joint}
            cells = [c for c in cells if c not in joined]
    if fresh:
        runs = [compute_cell(plan, c, ref, None, on_segment, False, set(), None, False, run) for c in cells]
    else:
        runs = [compute_cell(plan, c, ref, group, on_segment, done[c], saved, carries.get(c), True, run) for c in cells]
    if ref.carries:
        _stamp(plan, runs, batches)
    return [*runs, *batches]


def _stamp(plan: Plan, runs: list[CellRun], batches: list[CellBatch]) -> None:
    """Record in each final carry whose trajectory it is and the run's T (:func:`geosweep.sweeps.extension.stamped`);
    a cell's carry :func:`~geosweep.sweeps.carries.thin` when its family's values allow (``FamilyDef.thin_carries``)."""
    ident, T = extension.identities(plan), float(plan.spec.T)
    thins = plan.famdef.thin_carries

    def thin(cell: Cell) -> bool:
        return thins is not None and bool(thins(plan.model(cell), plan.grid.coords(cell)["integrator"]))

    for k, r in enumerate(runs):
        if len(r) > 7 and r[7] is not None:
            carry = carry_objects.thin(r[7]) if thin(r[0]) else r[7]
            if len(r) > 9 and r[9] != (0, 0) and not carry_objects.is_thin(carry):
                runs[k] = (*r[:7], None, *r[8:])  # its rows from the store are NaN here: no whole carry of them
                continue
            runs[k] = (*r[:7], extension.stamped(carry, ident(r[0]), T), *r[8:])
    for b in batches:
        if b.carries is not None:
            ids = np.array([ident(c) for c in b.cells], dtype=np.int64)
            carries = carry_objects.thin(b.carries, stacked=True) if all(map(thin, b.cells)) else b.carries
            b.carries = {**carries, extension.ID_TRAJECTORY: ids, extension.ID_T: np.full(len(b.cells), T)}


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
