"""Running a sweep on a ``distributed.Client`` (or serially in-process).

Flow: plan (spec validated and models built once, :mod:`sweeps.plan`) → create/check the
store → pending cells (``done == 0``) → slices of ~``slice_seconds`` of work → one plain Dask
future per slice. Each model is scattered to the cluster once; a slice receives the plan part
its cells need, runs the kernels cell by cell and writes each finished cell into its own zarr
chunks. Numba caches are warmed in the driver first (which writes the on-disk cache), then on
every worker, so workers never compile concurrently.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernels.status import Status
from sweeps.grid import Cell
from sweeps.plan import Plan, make_plan
from sweeps.spec import SweepSpec
from sweeps.store import ArrayCache, StoreRef, done_mask, ensure_store, record_run, write_cell


@dataclass
class Progress:
    """Progress of a running sweep, passed to the ``progress`` callback after each slice."""

    done: int  # cells complete (including those found complete in the store)
    total: int
    failed: int  # cells completed with a non-zero status in this run
    elapsed: float  # seconds since execution started
    skipped: int  # cells already complete before this run

    @property
    def eta(self) -> float | None:
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

    @property
    def complete(self) -> bool:
        return not self.errors and self.skipped + self.ran == self.total


# ---------------------------------------------------------------------------------------
# worker side
# ---------------------------------------------------------------------------------------
def run_slice(plan: Plan, cells: list[Cell], ref: StoreRef) -> list[tuple[Cell, int, float]]:
    """Run ``cells`` of a plan and write each into the store. Returns (cell, status, wall time).

    ``plan`` holds (at least) the models of ``cells`` (:meth:`Plan.part`); nothing is parsed,
    built or registered here.
    """
    group = ArrayCache(ref.open_group("r+"))
    out = []
    for cell in cells:
        cell = tuple(int(i) for i in cell)
        request, options = plan.request(cell)
        integrator = plan.grid.coords(cell)["integrator"]
        res = plan.famdef.run(plan.model(cell), integrator, request, options)
        write_cell(group, cell, res.values, res.status, res.wall_time)
        out.append((cell, int(res.status), float(res.wall_time)))
    return out


def _run_part(plan: Plan, models: dict[tuple[int, ...], Any], cells: list[Cell], ref: StoreRef) -> list:
    """Worker entry point: ``models`` arrive as scattered data (each shipped to the cluster once)."""
    return run_slice(plan.part(models=models), cells, ref)


def warm_worker(famdef: Any) -> str:
    """Compile or load the family's kernels in this process (call once per worker)."""
    t0 = time.perf_counter()
    famdef.warmup()
    return f"{socket.gethostname()}:{os.getpid()} warm in {time.perf_counter() - t0:.1f}s"


# ---------------------------------------------------------------------------------------
# driver side
# ---------------------------------------------------------------------------------------
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
    processes: bool = False,
    slice_seconds: float = 10.0,
    storage_options: dict | None = None,
    progress: Callable[[Progress], None] | None = None,
    log: Callable[[str], None] | None = None,
) -> SweepResult:
    """Run every cell of ``spec`` (a :class:`Plan`, or anything :func:`make_plan` takes) not yet complete in ``store``.

    Execution: ``client`` (a ``distributed.Client``), else ``address`` of a scheduler, else a
    new ``LocalCluster`` with ``n_workers`` single-threaded workers (default: all cores) —
    threads in this process by default (the kernels release the GIL, so threads run in
    parallel and start instantly), separate processes with ``processes=True``;
    ``serial=True`` runs in this process without Dask (same results, bitwise).
    Raises :class:`sweeps.spec.SpecError` for a bad spec,
    :class:`sweeps.store.StoreMismatchError` if ``store`` holds another sweep and
    :class:`sweeps.store.StoreFormatError` if it has another store format — all before any
    work. Integration failures are recorded as cell status, not raised.
    """
    log = log or (lambda msg: None)
    plan = make_plan(spec)
    spec, grid, famdef = plan.spec, plan.grid, plan.famdef
    ref = StoreRef.of(store if store is not None else default_store_path(spec), storage_options)

    created = ensure_store(plan, ref)
    mask = done_mask(ref)
    pending = [c for c in grid.cells() if not mask[c] and grid.applicable(c)]
    total = sum(1 for c in grid.cells() if grid.applicable(c))
    skipped = total - len(pending)
    log(
        f"store {ref.url}: {'created' if created else 'resuming'}; "
        f"{skipped}/{total} cells already complete, {len(pending)} to run"
    )
    t_start = time.perf_counter()
    if not pending:
        return SweepResult(ref.url, total, skipped, 0, 0, 0.0, 0)

    t0 = time.perf_counter()
    famdef.warmup()  # compiles once here and fills the on-disk cache
    log(f"kernels ready in {time.perf_counter() - t0:.1f}s")

    done = skipped
    failed = 0
    errors: list[str] = []

    def report(results: list[tuple[Cell, int, float]]) -> None:
        nonlocal done, failed
        done += len(results)
        failed += sum(1 for _, st, _ in results if st != Status.OK)
        if progress:
            progress(Progress(done, total, failed, time.perf_counter() - t_start, skipped))

    if progress:
        progress(Progress(done, total, failed, 0.0, skipped))

    own_cluster = None
    own_client = None
    try:
        if serial:
            slices = plan.slices(pending, slice_seconds, 1)
            for cells in slices:
                report(run_slice(plan, cells, ref))
        else:
            from distributed import Client, LocalCluster, as_completed

            if client is None:
                if address:
                    client = own_client = Client(address)
                else:
                    n = n_workers or os.cpu_count() or 1
                    own_cluster = LocalCluster(
                        n_workers=n,
                        threads_per_worker=1,
                        processes=processes,
                        dashboard_address=None,  # no dashboard; its HTTP server on a free port, not 8787
                        scheduler_kwargs={"dashboard_address": ":0"},
                    )
                    client = own_client = Client(own_cluster)
            n_w = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
            slices = plan.slices(pending, slice_seconds, n_w)
            log(f"{len(pending)} cells in {len(slices)} slices on {n_w} workers")
            for line in client.run(warm_worker, famdef).values():
                log(f"worker {line}")
            # every model once to the cluster; tasks carry the plan without models, plus references
            keys = plan.combinations(pending)
            scattered = dict(zip(keys, client.scatter([plan.models[k] for k in keys], hash=False)))
            bare = plan.part(models={})
            # longest slices first (Dask runs higher priority first): no worker is left
            # finishing one long slice at the end while the other idles
            futures = [
                client.submit(
                    _run_part,
                    bare,
                    {k: scattered[k] for k in plan.combinations(cells)},
                    cells,
                    ref,
                    key=f"geosweep-{spec.spec_hash[:10]}-{i}-{os.getpid()}-{time.time_ns()}",
                    pure=False,
                    priority=int(1000 * sum(plan.cost(c) for c in cells)),
                )
                for i, cells in enumerate(slices)
            ]
            for fut in as_completed(futures):
                try:
                    report(fut.result())
                except Exception as exc:  # noqa: BLE001 - one bad slice must not lose the others
                    errors.append(f"{type(exc).__name__}: {exc}")
                    log(f"slice failed: {type(exc).__name__}: {exc}")
    finally:
        if own_client is not None:
            own_client.close()
        if own_cluster is not None:
            own_cluster.close()

    wall = time.perf_counter() - t_start
    ran = done - skipped
    record_run(
        ref,
        {
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "cells_run": ran,
            "cells_failed_status": failed,
            "task_errors": len(errors),
            "wall_time_s": round(wall, 3),
            "host": socket.gethostname(),
        },
    )
    return SweepResult(ref.url, total, skipped, ran, failed, wall, len(slices), errors)
