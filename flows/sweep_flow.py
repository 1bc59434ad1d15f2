"""The Prefect flow that runs a sweep: plan → execute (Dask futures) → finalise.

Prefect adds scheduling, retries and run history; the science runs in
:func:`sweeps.engine.run_sweep`, which fans out one plain Dask future per slice of cells
(not one Prefect task per cell: a Prefect task costs tens of ms plus API traffic).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact

from sweeps.engine import Progress, plan, run_sweep
from sweeps.summary import status_table

#: Callbacks (e.g. the CLI's progress bar) called with every :class:`Progress` update.
PROGRESS_HOOKS: list[Callable[[Progress], None]] = []


@task(name="plan-sweep")
def plan_sweep(spec: str | dict) -> dict[str, Any]:
    """Validate the spec (refused before any work) and describe the grid."""
    sweep, grid, _ = plan(spec)
    return {
        "spec": sweep.model_dump(mode="json"),
        "name": sweep.name,
        "cells": grid.size,
        "dims": dict(zip(grid.dims, grid.shape)),
    }


@task(name="execute-sweep", retries=1, retry_delay_seconds=5)
def execute_sweep(
    spec: dict,
    store: str | None,
    address: str | None,
    n_workers: int | None,
    slice_seconds: float,
    storage_options: dict | None,
    processes: bool = False,
) -> dict[str, Any]:
    """Run the pending cells on Dask; a retry resumes from the store (finished cells stay)."""
    logger = get_run_logger()
    artifact = create_progress_artifact(progress=0.0, description=f"cells done of sweep {spec['name']}")
    last = {"pct": -10.0}

    def progress(p: Progress) -> None:
        pct = 100.0 * p.done / max(p.total, 1)
        for hook in PROGRESS_HOOKS:
            hook(p)
        if pct - last["pct"] >= 10.0 or p.done == p.total:
            last["pct"] = pct
            update_progress_artifact(artifact, progress=pct)
            eta = f", ETA {p.eta:.0f}s" if p.eta is not None else ""
            logger.info(f"{p.done}/{p.total} cells ({pct:.0f}%), {p.failed} failed{eta}")

    result = run_sweep(
        spec,
        store,
        address=address,
        n_workers=n_workers,
        processes=processes,
        slice_seconds=slice_seconds,
        storage_options=storage_options,
        progress=progress,
        log=logger.info,
    )
    if result.errors:
        raise RuntimeError(f"{len(result.errors)} slice(s) raised: {result.errors[:3]}; rerun to resume")
    return asdict(result)


@task(name="finalise-sweep")
def finalise_sweep(store: str, storage_options: dict | None) -> str:
    """Summarise the store (status per integrator and h) as a Prefect markdown artifact."""
    table = status_table(store, storage_options)
    create_markdown_artifact(markdown=table, description=f"geosweep store {store}")
    return table


@flow(name="geosweep-sweep")
def sweep_flow(
    spec: str | dict,
    store: str | None = None,
    address: str | None = None,
    n_workers: int | None = None,
    slice_seconds: float = 10.0,
    storage_options: dict | None = None,
    processes: bool = False,
) -> dict[str, Any]:
    """Run a sweep spec (path or mapping) into a zarr store; resumes an existing store.

    Without ``address`` a local Dask cluster of ``n_workers`` single-threaded workers runs the
    cells (threads by default, worker processes with ``processes=True``).
    """
    planned = plan_sweep(spec)
    result = execute_sweep(planned["spec"], store, address, n_workers, slice_seconds, storage_options, processes)
    result["summary"] = finalise_sweep(result["store"], storage_options)
    return result
