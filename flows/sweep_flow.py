"""The Prefect flow that runs a sweep: plan → execute (Dask futures) → finalise.

Prefect adds scheduling, retries and run history; the science runs in
:func:`geosweep.sweeps.engine.run_sweep`, which fans out one plain Dask future per slice of cells
(not one Prefect task per cell: a Prefect task costs tens of ms plus API traffic).

In-process objects as flow parameters: the CLI builds the :class:`geosweep.sweeps.plan.Plan` (the spec
validated and the models built, once) and passes it, with its progress callback, straight into
:func:`sweep_flow`. Prefect hands parameters of a flow called in this process to the function
unchanged (a ``Plan`` passes pydantic validation as itself, a callable as itself); for the
run's record in the API it encodes them as JSON, which for a plan is its spec and grid shape
(``Plan``'s serialiser) and for a callback an empty placeholder. A deployment run (parameters
from the API) passes a spec path or mapping instead and no callback: the flow then plans once
itself. The tasks take these objects too, so they use ``NO_CACHE`` (no input hashing; a sweep's
results live in its store, and a rerun resumes it).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.artifacts import create_markdown_artifact, create_progress_artifact, update_progress_artifact
from prefect.cache_policies import NO_CACHE

from geosweep.flows.entry import pause
from geosweep.flows.output import quiet_distributed
from geosweep.sweeps.credentials import StorageOptions, resolve
from geosweep.sweeps.engine import Progress, run_sweep
from geosweep.sweeps.execution import Execution
from geosweep.sweeps.liveness import WorkersUnresponsive
from geosweep.sweeps.plan import Plan, make_plan
from geosweep.sweeps.summary import status_table


class SlicesFailed(RuntimeError):
    """Some slices raised (a bug or a lost worker, not a failed integration); a rerun resumes the store."""


@task(name="plan-sweep", cache_policy=NO_CACHE)
def plan_sweep(plan: Plan | str | dict) -> Plan:
    """Validate a spec and build its models, once (a bad spec is refused before any work); a plan passes through."""
    plan = make_plan(plan)
    dims = ", ".join(f"{d}={n}" for d, n in zip(plan.grid.dims, plan.grid.shape))
    get_run_logger().info(f"sweep {plan.spec.name}: {plan.grid.size} cells ({dims})")
    return plan


def _retry_unless_refused(task, task_run, state) -> bool:
    """Retry a failed sweep task, except when the store refused this run (another spec or format,
    another run holds or took over its lease, it cannot be written) or no Dask worker answered:
    a retry gives the same, or waits as long again."""
    from geosweep.sweeps.extension import ExtendError
    from geosweep.sweeps.lease import LeaseFileError, StoreWriteError
    from geosweep.sweeps.store import StoreMismatchError

    refused = (StoreMismatchError, StoreWriteError, LeaseFileError, WorkersUnresponsive, ExtendError)
    data = getattr(state, "data", None)
    if isinstance(data, refused):
        return False
    try:
        exc = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - no result to inspect: retry as before
        return True
    return not isinstance(exc, refused)


@task(
    name="execute-sweep",
    retries=1,
    retry_delay_seconds=5,
    retry_condition_fn=_retry_unless_refused,
    cache_policy=NO_CACHE,
)
def execute_sweep(
    plan: Plan,
    store: str | None,
    execution: Execution,
    storage_options: StorageOptions | None,
    progress: Callable[[Progress], None] | None = None,
    grow: bool = False,
    recompute: bool = False,
) -> dict[str, Any]:
    """Run the pending cells on Dask; a retry resumes from the store (finished cells stay).
    ``grow``: grow the store to the spec first — values appended to sweep axes (:mod:`geosweep.sweeps.grow`)
    or a larger T (:mod:`geosweep.sweeps.extension`; ``recompute``: cells without a carry run again)."""
    logger = get_run_logger()
    if logging.getLogger("distributed").getEffectiveLevel() > logging.DEBUG:
        quiet_distributed()  # no distributed INFO in flow-run logs (deployment runs start without the CLI)
    artifact = create_progress_artifact(progress=0.0, description=f"cells done of sweep {plan.spec.name}")
    last = {"pct": -10.0}

    def on_progress(p: Progress) -> None:
        pct = 100.0 * p.done / max(p.total, 1)
        if progress is not None:
            progress(p)
        if pct - last["pct"] >= 10.0 or p.done == p.total:
            last["pct"] = pct
            update_progress_artifact(artifact, progress=pct)
            eta = f", ETA {p.eta:.0f}s" if p.eta is not None else ""
            logger.info(f"{p.done}/{p.total} cells ({pct:.0f}%), {p.failed} failed{eta}")

    result = run_sweep(
        plan,
        store,
        execution=execution,
        storage_options=resolve(storage_options),
        progress=on_progress,
        log=logger.info,
        grow=grow,
        recompute=recompute,
    )
    if result.errors:
        raise SlicesFailed(
            f"{len(result.errors)} slice(s) raised: {[e[:300] for e in result.errors[:3]]}; rerun to resume"
        )
    return asdict(result)


@task(name="finalise-sweep", cache_policy=NO_CACHE)
def finalise_sweep(store: str, storage_options: StorageOptions | None) -> str:
    """Summarise the store (status per integrator and h) as a Prefect markdown artifact."""
    table = status_table(store, resolve(storage_options))
    create_markdown_artifact(markdown=table, description=f"geosweep store {store}")
    return table


@flow(name="geosweep-sweep")
def sweep_flow(
    plan: Plan | str | dict,
    store: str | None = None,
    execution: Execution | None = None,
    storage_options: StorageOptions | dict | str | None = None,
    progress: Callable[[Progress], None] | None = None,
    grow: bool = False,
    recompute: bool = False,
) -> dict[str, Any]:
    """Run a sweep into a zarr store; resumes an existing store (``grow``: grows it to a spec that
    adds values at the end of its sweep axes, :mod:`geosweep.sweeps.grow`, or has a larger T,
    :mod:`geosweep.sweeps.extension`).

    ``plan`` is a :class:`~geosweep.sweeps.plan.Plan` (from :func:`~geosweep.sweeps.plan.make_plan`; used as is)
    or a spec path/mapping (planned once here). ``progress`` is called with every
    :class:`~geosweep.sweeps.engine.Progress` update (in-process callers only; see the module doc).
    ``execution``: how the cells run (:class:`~geosweep.sweeps.execution.Execution`, whole; default: a local
    Dask cluster, or this process for a few short cells), its open choices made once by ``run_sweep``.
    ``storage_options``
    are fsspec options, best a reference (``env:NAME``, ``@file.json``, ``profile:NAME``) or a
    :class:`~geosweep.sweeps.credentials.StorageOptions`: resolved here, in the flow's process, and
    recorded by Prefect as the reference or redacted, never with a secret value.
    """
    pause("flow-start")  # a test hook: a signal while Prefect's flow engine runs the flow
    storage_options = StorageOptions.of(storage_options)
    planned = plan_sweep(plan)
    result = execute_sweep(planned, store, execution or Execution(), storage_options, progress, grow, recompute)
    result["summary"] = finalise_sweep(result["store"], storage_options)
    return result
