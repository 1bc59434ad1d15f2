"""Running a sweep on a ``distributed.Client`` (or serially in-process).

Flow: validate spec → grid → create/check the store → pending cells (``done == 0``) →
slices of ~``slice_seconds`` of work → one plain Dask future per slice. Each slice builds
the model once per parameter combination, runs the kernels cell by cell and writes each
finished cell into its own zarr chunks. Numba caches are warmed in the driver first (which
writes the on-disk cache), then on every worker, so workers never compile concurrently.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kernels.registry import FAMILIES, INTEGRATORS, SYSTEMS, IntegratorDef, SystemDef, load_builtins
from kernels.status import Status
from sweeps.grid import Cell, Grid
from sweeps.spec import SweepSpec, load_spec
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
def _register(sysdef: SystemDef, idefs: dict[str, IntegratorDef], famdef: Any) -> None:
    """Make user-defined systems/integrators shipped with a task known on this worker."""
    load_builtins()
    SYSTEMS.setdefault(sysdef.name, sysdef)
    FAMILIES.setdefault(famdef.name, famdef)
    for name, idef in idefs.items():
        INTEGRATORS.setdefault(name, idef)


def run_slice(
    spec_json: str,
    cells: list[Cell],
    ref: StoreRef,
    sysdef: SystemDef,
    idefs: dict[str, IntegratorDef],
    famdef: Any,
) -> list[tuple[Cell, int, float]]:
    """Run ``cells`` of a sweep and write each into the store. Returns (cell, status, wall)."""
    _register(sysdef, idefs, famdef)
    spec = SweepSpec.model_validate_json(spec_json)
    grid = Grid(spec)
    group = ArrayCache(ref.open_group("r+"))
    models: dict[str, Any] = {}
    out = []
    for cell in cells:
        cell = tuple(int(i) for i in cell)
        coords = grid.coords(cell)
        combo = grid.params_of(cell)
        key = repr(sorted(combo.items()))
        if key not in models:
            models[key] = sysdef.build(**spec.system_kwargs(combo))
        model = models[key]
        h, n_steps, stride, options = grid.run_args(cell)
        res = famdef.run(model, coords["integrator"], h, n_steps, stride, options)
        write_cell(group, cell, res.values, res.status, res.wall_time)
        out.append((cell, int(res.status), float(res.wall_time)))
    return out


def warm_worker(famdef: Any) -> str:
    """Compile or load the family's kernels in this process (call once per worker)."""
    t0 = time.perf_counter()
    famdef.warmup()
    return f"{socket.gethostname()}:{os.getpid()} warm in {time.perf_counter() - t0:.1f}s"


# ---------------------------------------------------------------------------------------
# driver side
# ---------------------------------------------------------------------------------------
def plan(spec: SweepSpec | str | os.PathLike | dict) -> tuple[SweepSpec, Grid, Any]:
    """Validate a spec and return (spec, grid, a model of its first parameter combination)."""
    spec = load_spec(spec)
    grid = Grid(spec)
    model = SYSTEMS[spec.system].build(**spec.system_kwargs(spec.param_combinations()[0]))
    return spec, grid, model


def default_store_path(spec: SweepSpec) -> str:
    return os.path.join("results", f"{spec.name}.zarr")


def run_sweep(
    spec: SweepSpec | str | os.PathLike | dict,
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
    """Run every cell of ``spec`` that is not yet complete in ``store``.

    Execution: ``client`` (a ``distributed.Client``), else ``address`` of a scheduler, else a
    new ``LocalCluster`` with ``n_workers`` single-threaded workers (default: all cores) —
    threads in this process by default (the kernels release the GIL, so threads run in
    parallel and start instantly), separate processes with ``processes=True``;
    ``serial=True`` runs in this process without Dask (same results, bitwise).
    Raises :class:`sweeps.spec.SpecError` for a bad spec and
    :class:`sweeps.store.StoreMismatchError` if ``store`` holds another sweep — in both
    cases before any work. Integration failures are recorded as cell status, not raised.
    """
    log = log or (lambda msg: None)
    spec, grid, model = plan(spec)
    ref = StoreRef.of(store if store is not None else default_store_path(spec), storage_options)
    sysdef = SYSTEMS[spec.system]
    famdef = FAMILIES[sysdef.family]
    idefs = {n: INTEGRATORS[n] for n in spec.integrators}

    created = ensure_store(spec, grid, model, ref)
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

    spec_json = spec.model_dump_json()
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
            slices = grid.slices(pending, slice_seconds, 1)
            for cells in slices:
                report(run_slice(spec_json, cells, ref, sysdef, idefs, famdef))
        else:
            from distributed import Client, LocalCluster, as_completed

            if client is None:
                if address:
                    client = own_client = Client(address)
                else:
                    n = n_workers or os.cpu_count() or 1
                    own_cluster = LocalCluster(
                        n_workers=n, threads_per_worker=1, processes=processes, dashboard_address=None
                    )
                    client = own_client = Client(own_cluster)
            n_w = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
            slices = grid.slices(pending, slice_seconds, n_w)
            log(f"{len(pending)} cells in {len(slices)} slices on {n_w} workers")
            for line in client.run(warm_worker, famdef).values():
                log(f"worker {line}")
            # longest slices first (Dask runs higher priority first): no worker is left
            # finishing one long slice at the end while the other idles
            futures = [
                client.submit(
                    run_slice,
                    spec_json,
                    cells,
                    ref,
                    sysdef,
                    idefs,
                    famdef,
                    key=f"geosweep-{spec.spec_hash[:10]}-{i}-{os.getpid()}-{time.time_ns()}",
                    pure=False,
                    priority=int(1000 * sum(grid.cost(c) for c in cells)),
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
