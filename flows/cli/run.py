"""``geosweep run SPEC`` and ``geosweep demo``: run (or resume) a sweep into a store."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from contextlib import ExitStack

from geosweep.flows.cli.common import (
    _check_scheduler,
    _check_store,
    _execution,
    _how_to_open,
)
from geosweep.flows.cli.exits import OptionsError, refusal_names
from geosweep.flows.entry import pause
from geosweep.flows.output import LOG, progress_reporter


def cmd_run(args: argparse.Namespace, spec_path: str) -> int:
    from geosweep.sweeps.summary import status_table

    on_prefect = not (args.no_prefect or args.serial)
    plan, server = _plan(args, spec_path, on_prefect)
    store = _store(args, plan)
    # a log file gets plain progress lines; on the Prefect path the flow already logs them
    prefect_logs_progress = on_prefect and not sys.stderr.isatty()
    hook, close = progress_reporter(enabled=LOG.isEnabledFor(logging.INFO) and not prefect_logs_progress)
    t0 = time.perf_counter()
    with ExitStack() as stack:
        stack.callback(close)
        execution = _execution(args)  # whole, to run_sweep directly or through the flow
        if on_prefect:
            ok, summary = _on_prefect(args, plan, store, execution, hook, server, stack)
        else:
            ok = _direct(args, plan, store, execution, hook)
            summary = status_table(store, args.storage_options)
    if summary and not args.quiet:
        print(summary)
    LOG.info(f"finished in {time.perf_counter() - t0:.1f}s")
    print(_how_to_open(store, args.storage_ref) if not args.quiet else store)
    return 0 if ok else 1


def _plan(args: argparse.Namespace, spec_path: str, on_prefect: bool):
    """(the run's plan, Prefect's starting server or None): what can be refused at once is refused
    before Prefect's server starts (one line, no server noise); the spec file is read once."""
    from geosweep.flows import firstrun
    from geosweep.sweeps.execution import in_driver_seconds
    from geosweep.sweeps.first_worker import first_worker_seconds
    from geosweep.sweeps.liveness import unresponsive_seconds
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.spec import read_spec_file

    spec = read_spec_file(spec_path)  # the run's only read of the file
    if args.store:
        _check_store(args.store, args.storage_options, write=True)
    _check_scheduler(args.address)
    try:
        unresponsive_seconds()
        first_worker_seconds()
        in_driver_seconds()
    except ValueError as e:
        raise OptionsError(str(e)) from None
    # a cold Numba cache: only the spec's family compiles, here, while Prefect's server boots in its process
    first_run = firstrun.FirstRun(spec)
    cold = first_run.prepare(wait=False)
    server = firstrun.start_prefect_server() if on_prefect else None
    pause("prefect-start")  # a test hook: a signal while Prefect's server starts
    first_run.finish()
    plan = make_plan(spec)  # validated and models built, once; a bad spec is refused before anything starts
    first_run.warm(plan)  # the driver's specialisations, here while Prefect's server starts
    if cold:
        first_run.mark_warm()
    return plan, server


def _store(args: argparse.Namespace, plan) -> str:
    """The run's store, checked; a warning for credentials given on the command line."""
    from geosweep.sweeps.engine import default_store_path

    store = os.fspath(args.store or default_store_path(plan.spec))
    _check_store(store, args.storage_options, write=True)
    if args.storage_ref is not None and args.storage_ref.secrets and not args.storage_ref.reference:
        LOG.warning(
            f"--storage-options holds credentials ({', '.join(args.storage_ref.secrets)}) on the command line, "
            "where other users and the shell history see them; prefer env:NAME or @FILE (deploy/README.md)"
        )
    return store


def _direct(args: argparse.Namespace, plan, store: str, execution, hook) -> bool:
    """``--no-prefect``/``--serial``: ``run_sweep`` here; whether no slice failed."""
    from geosweep.sweeps.engine import run_sweep

    result = run_sweep(
        plan,
        store,
        execution=execution,
        storage_options=args.storage_options,
        progress=hook,
        log=LOG.info,
        grow=getattr(args, "grow", False),
        recompute=getattr(args, "recompute", False),
    )
    for err in result.errors[:3]:
        LOG.error(f"slice failed: {err[:300]}")
    return not result.errors


def _on_prefect(args: argparse.Namespace, plan, store: str, execution, hook, server, stack: ExitStack):
    """The run as a Prefect flow: (whether no slice failed, the store's summary)."""
    from geosweep.flows.output import RunFailureFilter
    from geosweep.flows.sweep_flow import SlicesFailed, sweep_flow
    from geosweep.sweeps.summary import status_table

    if server is not None:
        # what the flow imports anyway (≈ 1.3 s), here while Prefect's server finishes starting
        import dask.array  # noqa: F401
        import xarray  # noqa: F401

        server.join()
    # a refusal (the store busy or of another spec, no worker answered, one cannot see the store …):
    # geosweep's one line, not Prefect's records and tracebacks before it
    stack.enter_context(RunFailureFilter(*refusal_names()))
    try:
        out = sweep_flow(
            plan,
            store=store,
            execution=execution,
            storage_options=args.storage_ref,  # recorded by Prefect as the reference or redacted
            progress=hook,
            grow=getattr(args, "grow", False),
            recompute=getattr(args, "recompute", False),
        )
        return True, out.get("summary")
    except SlicesFailed as e:
        LOG.error(str(e))
        return False, status_table(store, args.storage_options)
