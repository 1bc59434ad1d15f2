"""The nightly schedule: one date-stamped store per night, a Prefect deployment with a cron.

``nightly_flow`` runs a spec into ``{store_root}/{name}/{YYYY-MM-DD}.zarr`` (the UTC date of
the flow run's scheduled start), so each night adds a store to the record and re-running on
the same day resumes that day's store. ``nightly_deployment`` wraps it in a Prefect
deployment with a cron schedule (default ``0 2 * * *`` UTC); ``serve_nightly`` serves it in
this process (``geosweep serve``). ``deploy/prefect.yaml`` describes the same deployment for
``prefect deploy``.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from flows.sweep_flow import sweep_flow
from sweeps.plan import make_plan

DEFAULT_CRON = "0 2 * * *"
DEFAULT_TIMEZONE = "UTC"


def run_day() -> dt.date:
    """The UTC date of the current flow run's scheduled start (today, outside a flow run)."""
    from prefect.runtime import flow_run

    start = flow_run.scheduled_start_time if flow_run.id else None
    when = start if start is not None else dt.datetime.now(dt.UTC)
    if when.tzinfo is not None:
        when = when.astimezone(dt.UTC)
    return when.date()


def dated_store(store_root: str | os.PathLike, name: str, day: dt.date | str | None = None) -> str:
    """``{store_root}/{name}/{YYYY-MM-DD}.zarr`` for a local directory or an fsspec URL."""
    if day is None:
        day = run_day()
    if isinstance(day, str):
        day = dt.date.fromisoformat(day)
    root = os.fspath(store_root)
    if "://" in root:
        return f"{root.rstrip('/')}/{name}/{day.isoformat()}.zarr"
    return str(Path(root).expanduser().absolute() / name / f"{day.isoformat()}.zarr")


@flow(name="geosweep-nightly")
def nightly_flow(
    spec: str | dict,
    store_root: str,
    address: str | None = None,
    n_workers: int | None = None,
    slice_seconds: float = 10.0,
    storage_options: dict | None = None,
    cluster: dict | None = None,
    day: str | None = None,
) -> dict[str, Any]:
    """Run ``spec`` into ``{store_root}/{name}/{YYYY-MM-DD}.zarr`` (resumes that day's store).

    ``cluster`` is a :class:`deploy.clusters.ClusterConfig` mapping: the cluster is started for
    this run only (batch jobs are submitted at run time, not while the deployment idles) and
    closed afterwards. Otherwise ``address`` or a local cluster of ``n_workers`` is used.
    ``day`` (``YYYY-MM-DD``) overrides the date, e.g. to redo a past night's store.
    """
    plan = make_plan(spec)  # the run's only validation and model build
    store = dated_store(store_root, plan.spec.name, day)
    get_run_logger().info(f"nightly store {store}")
    own = None
    if cluster is not None:
        from deploy.clusters import ClusterConfig

        own = ClusterConfig.model_validate(cluster).make()
        address = own.scheduler_address
    try:
        return sweep_flow(
            plan,
            store=store,
            address=address,
            n_workers=n_workers,
            slice_seconds=slice_seconds,
            storage_options=storage_options,
        )
    finally:
        if own is not None:
            own.close()


def nightly_deployment(
    spec: str | os.PathLike | dict,
    store_root: str,
    *,
    name: str | None = None,
    cron: str = DEFAULT_CRON,
    timezone: str = DEFAULT_TIMEZONE,
    address: str | None = None,
    n_workers: int | None = None,
    slice_seconds: float = 10.0,
    storage_options: dict | None = None,
    cluster: dict | None = None,
):
    """A Prefect ``RunnerDeployment`` of :func:`nightly_flow` on a cron schedule.

    The spec is validated now (a bad spec is refused before anything is scheduled); a spec
    file is passed by absolute path, so edits take effect from the next night on. The
    deployment is named ``nightly-{spec name}`` unless ``name`` is given.
    """
    from prefect.schedules import Cron

    sweep = make_plan(spec).spec
    spec_param: str | dict = spec if isinstance(spec, dict) else str(Path(os.fspath(spec)).expanduser().absolute())
    root = os.fspath(store_root)
    if "://" not in root:
        root = str(Path(root).expanduser().absolute())
    parameters: dict[str, Any] = {
        "spec": spec_param,
        "store_root": root,
        "address": address,
        "n_workers": n_workers,
        "slice_seconds": slice_seconds,
        "storage_options": storage_options,
        "cluster": cluster,
    }
    return nightly_flow.to_deployment(
        name=name or f"nightly-{sweep.name}",
        schedules=[Cron(cron, timezone=timezone)],
        parameters=parameters,
        description=f"geosweep {sweep.name!r} every night ({cron}, {timezone}) into {root}/{sweep.name}/<date>.zarr",
        tags=["geosweep", "nightly"],
    )


def serve_nightly(spec: str | os.PathLike | dict, store_root: str, **kwargs: Any) -> None:
    """Serve :func:`nightly_deployment` in this process until interrupted (``prefect.serve``)."""
    from prefect import serve

    serve(nightly_deployment(spec, store_root, **kwargs))
