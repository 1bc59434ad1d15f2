"""The nightly schedule: one date-stamped store per night, a Prefect deployment with a cron.

``nightly_flow`` runs a spec into ``{store_root}/{name}/{YYYY-MM-DD}.zarr`` (the UTC date of
the flow run's scheduled start), so each night adds a store to the record and re-running on
the same day resumes that day's store. Each night then writes its report beside its store
(``{YYYY-MM-DD}.zarr.report/``) with a comparison against the latest earlier night's store, and the
flow run fails (visibly in Prefect) when the share of failed cells exceeds
``max_failed_share``. ``nightly_deployment`` wraps it in a Prefect deployment with a cron
schedule (default ``0 2 * * *`` UTC); ``serve_nightly`` serves it in this process
(``geosweep serve``). ``deploy/prefect.yaml`` describes the same deployment for
``prefect deploy``.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from geosweep.flows.nights import (
    dated_store,
    extend_by_problem,
    extending_night,
    failed_cells,
    night_stores,
    night_summary_name,
    previous_night,
)
from geosweep.flows.sweep_flow import sweep_flow
from geosweep.sweeps.credentials import StorageOptions, resolve
from geosweep.sweeps.execution import Execution
from geosweep.sweeps.plan import make_plan

#: the nights' stores' names given here too (the CLI and the deployments' users read them here)
__all__ = ["NightlyCheckFailed", "NoPrefectServerError", "dated_store", "extend_by_problem", "night_stores"]
__all__ += ["night_summary_name", "nightly_deployment", "nightly_flow", "prefect_api_url", "serve_nightly"]

DEFAULT_CRON = "0 2 * * *"
DEFAULT_TIMEZONE = "UTC"
#: a night fails when more than this share of its runnable cells failed (status > 0)
DEFAULT_MAX_FAILED_SHARE = 0.5
#: per-cell values that differ from the previous night by more than this (relative) are listed
DEFAULT_COMPARE_RTOL = 1e-6


class NightlyCheckFailed(RuntimeError):
    """Too many cells of a night failed: the flow run is marked Failed (its store and report stay)."""


class NoPrefectServerError(RuntimeError):
    """``serve`` without ``PREFECT_API_URL``: the schedule would die with this process."""


@task(name="nightly-report", cache_policy=NO_CACHE)
def nightly_report(
    store: str, previous: str | None, storage_options: StorageOptions | dict | None, rtol: float = DEFAULT_COMPARE_RTOL
) -> dict[str, Any]:
    """Write the night's report beside its store, with the comparison against ``previous``."""
    from prefect.artifacts import create_markdown_artifact

    from geosweep.analysis.report import compare_stores, write_report

    storage_options = resolve(storage_options)  # a task input: passed as StorageOptions, never as secrets
    logger = get_run_logger()
    sections = []
    out: dict[str, Any] = {"previous": previous, "changed_cells": None, "comparison": "no earlier night to compare"}
    if previous is not None:
        cmp = compare_stores(previous, store, rtol=rtol, storage_options=storage_options)
        sections.append(("Comparison with the previous night", cmp.markdown()))
        out.update(changed_cells=cmp.changed_cells, comparison=cmp.headline())
        create_markdown_artifact(markdown=cmp.markdown(), description=f"night against night: {cmp.headline()}")
    logger.info(f"comparison: {out['comparison']}")
    rep = write_report(store, None, storage_options, sections=sections)
    out["report"] = rep.index_location
    logger.info(f"report: {rep.index_location} ({len(rep.figures)} figures)")
    return out


@flow(name="geosweep-nightly")
def nightly_flow(
    spec: str | dict,
    store_root: str,
    address: str | None = None,
    n_workers: int | None = None,
    slice_seconds: float = 10.0,
    storage_options: StorageOptions | dict | str | None = None,
    cluster: dict | None = None,
    day: str | None = None,
    max_failed_share: float = DEFAULT_MAX_FAILED_SHARE,
    compare_rtol: float = DEFAULT_COMPARE_RTOL,
    report: bool = True,
    imports: list[str] | None = None,
    extend_by: float | None = None,
) -> dict[str, Any]:
    """Run ``spec`` into ``{store_root}/{name}/{YYYY-MM-DD}.zarr`` (resumes that day's store),
    write its report beside it (compared with the latest earlier night) and check its failures.

    ``extend_by`` (ΔT): instead of a new store each night, grow one store,
    ``{store_root}/{name}/extended.zarr``, by ΔT every night
    (:func:`geosweep.flows.nights.extending_night`): the report compares each cell's summaries with the
    previous night's (what changed as T grew).

    ``cluster`` is a :class:`geosweep.deploy.clusters.ClusterConfig` mapping: the cluster is started for
    this run only (batch jobs are submitted at run time, not while the deployment idles) and
    closed afterwards. Otherwise ``address`` or a local cluster of ``n_workers`` is used.
    ``day`` (``YYYY-MM-DD``) overrides the date, e.g. to redo a past night's store. The run
    fails (:class:`NightlyCheckFailed`, after the report is written) when more than
    ``max_failed_share`` of the runnable cells have a failure status. ``imports`` are modules
    imported first (custom systems), after the ``geosweep.plugins`` entry points.
    """
    from geosweep.flows.plugins import load_plugins

    load_plugins(imports)  # a deployment run is a fresh process: custom systems register here
    # a reference (env:NAME, @file) is resolved here, in the flow's process; the subflow records it redacted
    so = StorageOptions.of(storage_options)
    storage_options = so.options if so is not None else None
    if problem := extend_by_problem(extend_by):  # a deployment's parameters can be edited after serve checked them
        raise ValueError(problem)
    plan = make_plan(spec)  # the run's only validation and model build
    logger = get_run_logger()
    if extend_by:
        plan, store, previous = extending_night(plan, store_root, extend_by, storage_options, logger.info)
    else:
        store = dated_store(store_root, plan.spec.name, day)
        previous = previous_night(
            store_root, plan.spec.name, dt.date.fromisoformat(Path(store).stem), storage_options
        )  # before this night's store exists
    logger.info(f"nightly store {store}")
    own = None
    if cluster is not None:
        from geosweep.deploy.clusters import ClusterConfig

        own = ClusterConfig.model_validate(cluster).make()
        address = own.scheduler_address
    try:
        execution = Execution(address=address, n_workers=n_workers, slice_seconds=slice_seconds)
        result = sweep_flow(
            plan,
            store=store,
            execution=execution,
            storage_options=so,
            grow=bool(extend_by),
        )
    finally:
        if own is not None:
            own.close()
    if report:
        result.update(nightly_report(store, previous, so, compare_rtol))
    failed, runnable = failed_cells(store, storage_options)
    result.update(failed=failed, runnable=runnable)
    share = failed / max(runnable, 1)
    if share > max_failed_share:
        raise NightlyCheckFailed(
            f"{failed} of {runnable} cells failed ({share:.0%} > max_failed_share {max_failed_share:.0%}); "
            f"store {store}" + (f", report {result['report']}" if report else "")
        )
    return result


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
    max_failed_share: float = DEFAULT_MAX_FAILED_SHARE,
    compare_rtol: float = DEFAULT_COMPARE_RTOL,
    imports: list[str] | None = None,
    extend_by: float | None = None,
):
    """A Prefect ``RunnerDeployment`` of :func:`nightly_flow` on a cron schedule (``extend_by``:
    one store grown by ΔT each night instead of a dated store per night).

    The spec is validated now (a bad spec is refused before anything is scheduled); a spec
    file is passed by absolute path, so edits take effect from the next night on. The
    deployment is named ``nightly-{spec name}`` unless ``name`` is given.
    """
    from prefect.schedules import Cron

    from geosweep.flows.plugins import load_plugins
    from geosweep.sweeps.credentials import deployment_parameter

    load_plugins(imports)
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
        "storage_options": deployment_parameter(storage_options),  # a reference: no secret in the database
        "cluster": cluster,
        "max_failed_share": max_failed_share,
        "compare_rtol": compare_rtol,
        "imports": imports,
        "extend_by": extend_by,
    }
    return nightly_flow.to_deployment(
        name=name or f"nightly-{sweep.name}",
        schedules=[Cron(cron, timezone=timezone)],
        parameters=parameters,
        description=f"geosweep {sweep.name!r} every night ({cron}, {timezone}) into {root}/{sweep.name}/<date>.zarr",
        tags=["geosweep", "nightly"],
    )


def prefect_api_url() -> str | None:
    """The Prefect API this process talks to (``PREFECT_API_URL`` or the active profile), or None."""
    from prefect.settings import get_current_settings

    return get_current_settings().api.url


def serve_nightly(
    spec: str | os.PathLike | dict,
    store_root: str,
    *,
    temporary: bool = False,
    heartbeat: int | None = None,
    crash_after: float | None = None,
    crash_detection: bool = True,
    **kwargs: Any,
) -> None:
    """Serve :func:`nightly_deployment` in this process until interrupted (``prefect.serve``).

    Needs a Prefect server that outlives this process (``PREFECT_API_URL``); ``temporary=True``
    accepts Prefect's temporary server instead, whose schedule dies with this process. Flow runs
    send a heartbeat every ``heartbeat`` seconds (default
    :data:`geosweep.flows.crash_detection.DEFAULT_HEARTBEAT`), and unless ``crash_detection=False`` the
    server gets the automation that marks a run silent for ``crash_after`` seconds (default two
    heartbeats + 30 s) ``Crashed`` (:mod:`geosweep.flows.crash_detection`).
    """
    from geosweep.flows.crash_detection import DEFAULT_HEARTBEAT, ensure_crash_detection

    if not temporary and prefect_api_url() is None:
        raise NoPrefectServerError(
            "no Prefect server: PREFECT_API_URL is not set, so the schedule would live on a temporary server "
            "that dies with this process. Start one (prefect server start) and export "
            "PREFECT_API_URL=http://127.0.0.1:4200/api, or pass --temporary"
        )
    dep = nightly_deployment(spec, store_root, **kwargs)
    import logging

    heartbeat = int(heartbeat or DEFAULT_HEARTBEAT)
    log = logging.getLogger("geosweep")
    if crash_detection:
        ensure_crash_detection(heartbeat, crash_after)
        grace = crash_after or 2 * heartbeat + 30
        log.info(f"crash detection: a run silent for {grace:.0f} s is marked Crashed (heartbeat {heartbeat} s)")
    log.info(f"serving deployment geosweep-nightly/{dep.name} ({dep.description}); stop with Ctrl-C")
    _serve(dep, heartbeat=heartbeat)


def _serve(*deployments, heartbeat: int | None = None) -> None:
    """``prefect.serve``, except that SIGTERM stops it like Ctrl-C: Prefect 3.8's runner answers SIGTERM
    with ``sys.exit(0)`` without awaiting its shutdown; here the signal goes to the handler installed
    before (the CLI's: a ``KeyboardInterrupt``, exit 143), so the runner closes and its flow runs stop."""
    import asyncio
    import signal

    from prefect.runner import Runner

    class _Runner(Runner):
        async def start(self, *args: Any, **kwargs: Any) -> None:
            self._geosweep_sigterm = signal.getsignal(signal.SIGTERM)
            return await super().start(*args, **kwargs)

        def handle_sigterm(self, signum: int = signal.SIGTERM, frame: Any = None, *args: Any, **kwargs: Any) -> None:
            previous = self._geosweep_sigterm
            if callable(previous):
                previous(signum, frame)
            raise KeyboardInterrupt

    runner = _Runner(pause_on_shutdown=True, heartbeat_seconds=heartbeat)
    for dep in deployments:
        runner.add_deployment(dep)
    asyncio.run(runner.start())
