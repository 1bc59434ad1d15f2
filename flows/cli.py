"""``geosweep`` command line: run, demo, extend, serve, validate, status, verify, report, systems.

``run``/``demo`` write to a local path or an fsspec URL (``--store s3://…`` with
``--storage-options``: JSON, or a reference ``env:NAME``/``@FILE``/``profile:NAME`` for credentials,
see :mod:`geosweep.sweeps.credentials`) on a local cluster, a scheduler (``--address``) or a cluster
described in a file (``--cluster FILE``, see :mod:`geosweep.deploy.clusters`); ``extend`` (and ``run --grow``)
continues a finished store to a later T (:mod:`geosweep.sweeps.extension`); ``serve`` serves the
nightly Prefect deployment of a spec (see :mod:`geosweep.flows.deployments`).

Every command takes ``--quiet``, ``--log-level`` and ``--import MODULE`` (custom systems; the
``geosweep.plugins`` entry points are always loaded, see :mod:`geosweep.flows.plugins`).

Exit codes: 0 success (cells whose integration failed are results, not errors), 1 some
slices raised or no Dask worker answered (:mod:`geosweep.sweeps.liveness`) or connected
(:mod:`geosweep.sweeps.first_worker`), 2 the spec, cluster file, options, a plugin, the scheduler address
or the store location were refused, a worker does not see the store (:mod:`geosweep.sweeps.visibility`), the store is
damaged, cannot be written (disk full, read-only) or its ``<store>.lease`` is not a lease file
(one line each), 3 the store belongs to another spec or has
another store format, or another run holds its lease (also ``verify --repair``; a run that lost
its lease to another stops with exit 3, writing nothing more), 130/143 interrupted by
SIGINT/SIGTERM (one line, no traceback; rerun to resume).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from typing import Any

from geosweep.flows.output import LEVELS, LOG, Interrupts, configure, progress_reporter, store_problem

DEMO_SPEC = "sphere_demo.toml"


def _demo_spec_path() -> str:
    return str(resources.files("geosweep.sweeps").joinpath("examples", DEMO_SPEC))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geosweep")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _how_to_open(store: str, storage_options=None) -> str:
    # the options may hold credentials: name them (or their reference), never print them
    extra = ", storage_options=STORAGE_OPTIONS)  # the dict given to --storage-options" if storage_options else ")"
    if getattr(storage_options, "reference", None):
        ref = storage_options.reference
        extra = f", storage_options=resolve({ref!r}))  # from geosweep.sweeps.credentials import resolve"
    return (
        f"\nresults: {store}\n"
        "open them with:\n"
        "    import xarray as xr\n"
        f"    ds = xr.open_zarr({store!r}{extra}\n"
        "    ds.max_rel_energy_error.where(ds.status == 0)   # failed cells dropped explicitly\n"
    )


def _storage_options(text: str):
    """``--storage-options``: a reference (``env:NAME``, ``@file.json``, ``profile:NAME``) or a JSON
    object of fsspec options (see :mod:`geosweep.sweeps.credentials`); resolved now, refused in one line."""
    from geosweep.sweeps.credentials import StorageOptions, StorageOptionsError

    try:
        return StorageOptions.of(text)
    except StorageOptionsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _positive_int(text: str) -> int:
    """``--workers``: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("must be between 0 and 1")
    return value


class ClusterFileError(ValueError):
    """A ``--cluster`` file could not be read or describes no usable cluster."""


def _cluster_config(path: str):
    """Read and check a :class:`geosweep.deploy.clusters.ClusterConfig` file (refused before any work)."""
    from pydantic import ValidationError

    from geosweep.deploy.clusters import ClusterConfig, check_dependencies

    try:
        cfg = ClusterConfig.from_file(path)
        check_dependencies(cfg.kind)
    except ValidationError as e:  # one line: each field and its problem
        problems = "; ".join(
            ".".join(str(p) for p in err["loc"][1:])
            + (": " if err["loc"][1:] else "")
            + err["msg"].removeprefix("Value error, ")
            for err in e.errors()
        )
        raise ClusterFileError(f"cluster file {path}: {problems}") from e
    except (OSError, ValueError, ImportError) as e:
        raise ClusterFileError(f"cluster file {path}: {e}") from e
    if not cfg.root.requests_workers:
        raise ClusterFileError(f"cluster file {path} starts no workers: set jobs, n_workers or an adapt maximum")
    return cfg


def _start_cluster(path: str):
    """Start the cluster described in a cluster file."""
    cfg = _cluster_config(path)
    LOG.info(f"starting {cfg.kind} cluster from {path}")
    return cfg.make()


class StoreProblem(RuntimeError):
    """A URL store that cannot be used (missing bucket, unreachable endpoint)."""


def _check_store(store: str, storage_options: dict | None, write: bool = False) -> None:
    """Refuse (one line, exit 2) a URL store that cannot be reached or a local path that cannot
    hold a store: a file, under a file, a non-zarr directory, damaged root metadata, or (``write``) read-only."""
    from geosweep.sweeps.store import StoreRef

    problem = store_problem(store, storage_options) or StoreRef.of(store).problem(write)
    if problem:
        raise StoreProblem(problem)


#: seconds to wait for a TCP connection to ``--address`` before refusing it
SCHEDULER_CONNECT_TIMEOUT = 5.0


class SchedulerUnreachable(RuntimeError):
    """``--address`` names a Dask scheduler that does not answer."""


def _check_scheduler(address: str | None) -> None:
    """A TCP connection to a ``tcp://host:port`` scheduler within :data:`SCHEDULER_CONNECT_TIMEOUT`,
    before any work (Dask's own client would retry for its whole timeout, then traceback)."""
    if not address:
        return
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls"):
        return  # other comms (inproc, ucx …): the client's own timeout applies
    try:
        port = parts.port or 8786
        with socket.create_connection((parts.hostname or "", port), timeout=SCHEDULER_CONNECT_TIMEOUT):
            return
    except (OSError, ValueError) as e:
        reason = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise SchedulerUnreachable(f"cannot reach the Dask scheduler at --address {address}: {reason}") from None


def _execution(args: argparse.Namespace, stack: ExitStack) -> tuple[str | None, Any]:
    """Start (or connect to) the Dask cluster of a run: (scheduler address, client or None).

    The cluster lives as long as ``stack``; its dashboard link is printed when it has one.
    """
    if args.serial:
        return None, None
    from distributed import Client, LocalCluster

    from geosweep.sweeps.engine import LOCAL_WORKER

    if args.cluster:
        from geosweep.deploy.clusters import batch_jobs_state
        from geosweep.sweeps.first_worker import describing

        cluster = stack.enter_context(_start_cluster(args.cluster))
        stack.enter_context(describing(lambda: batch_jobs_state(cluster)))  # while waiting for a worker
        address, link = cluster.scheduler_address, cluster.dashboard_link
        client = None
    elif args.address:
        try:
            client = stack.enter_context(Client(args.address, timeout="30s"))
        except (OSError, TimeoutError) as e:
            msg = f"cannot connect to the Dask scheduler at --address {args.address}: {e}"
            raise SchedulerUnreachable(msg) from None
        address, link = args.address, client.dashboard_link
    else:
        n = args.workers or os.cpu_count() or 1
        cluster = LocalCluster(
            n_workers=n,
            **LOCAL_WORKER,  # one slice at a time, a spare thread for shard writers
            processes=args.processes,
            dashboard_address="127.0.0.1:0",  # a free port; served only if bokeh is installed
            silence_logs=logging.ERROR if LOG.level > logging.DEBUG else logging.DEBUG,  # worker processes
        )
        threads_die_with_us = not args.processes and getattr(args, "exit_on_interrupt", False)

        def close(exc_type, exc, tb) -> bool:
            # closing waits for the cells running in worker threads (maybe hours): after Ctrl-C the
            # process exits at once instead (main → _exit_now), and those cells rerun on resume
            if not (exc_type is KeyboardInterrupt and threads_die_with_us):
                cluster.close()
            return False

        stack.push(close)
        address, client = cluster.scheduler_address, None
        link = f"http://127.0.0.1:{cluster.scheduler.http_server.port}/status" if _has_bokeh() else None
    if link:
        LOG.info(f"Dask dashboard: {link}")
    return address, client


def _has_bokeh() -> bool:
    """The Dask dashboard needs bokeh (``pip install "geosweep[dashboard]"``); without it there is no link."""
    from importlib.util import find_spec

    return find_spec("bokeh") is not None


def cmd_run(args: argparse.Namespace, spec_path: str) -> int:
    from geosweep.flows import firstrun
    from geosweep.sweeps.engine import default_store_path, run_sweep, warm_plan
    from geosweep.sweeps.first_worker import first_worker_seconds
    from geosweep.sweeps.liveness import unresponsive_seconds
    from geosweep.sweeps.plan import make_plan
    from geosweep.sweeps.spec import read_spec_file
    from geosweep.sweeps.summary import status_table

    on_prefect = not (args.no_prefect or args.serial)
    # what can be refused at once is refused before Prefect's server starts (one line, no server noise)
    read_spec_file(spec_path)
    if args.store:
        _check_store(args.store, args.storage_options, write=True)
    _check_scheduler(args.address)
    try:
        unresponsive_seconds()
        first_worker_seconds()
    except ValueError as e:
        LOG.error(str(e))
        return 2
    # a cold Numba cache: only the spec's family compiles, in a helper process, while Prefect's server starts
    cold = firstrun.prepare(spec_path, wait=False)
    server = firstrun.start_prefect_server() if on_prefect else None
    firstrun.finish()
    plan = make_plan(spec_path)  # validated and models built, once; a bad spec is refused before anything starts
    if args.threads_per_cell is not None:  # travels with the plan, through the Prefect flow too
        plan = plan.model_copy(update={"threads_per_cell": args.threads_per_cell})
    if cold:
        warm_plan(plan)  # the driver's specialisations, here while Prefect's server starts
        firstrun.mark_warm()
    store = os.fspath(args.store or default_store_path(plan.spec))
    _check_store(store, args.storage_options, write=True)
    if args.storage_ref is not None and args.storage_ref.secrets and not args.storage_ref.reference:
        LOG.warning(
            f"--storage-options holds credentials ({', '.join(args.storage_ref.secrets)}) on the command line, "
            "where other users and the shell history see them; prefer env:NAME or @FILE (deploy/README.md)"
        )
    prefect_logs_progress = not (args.no_prefect or args.serial) and not sys.stderr.isatty()
    # a log file gets plain progress lines; on the Prefect path the flow already logs them
    hook, close = progress_reporter(enabled=LOG.isEnabledFor(logging.INFO) and not prefect_logs_progress)
    t0 = time.perf_counter()
    with ExitStack() as stack:
        stack.callback(close)
        address, client = _execution(args, stack)
        if args.no_prefect or args.serial:
            result = run_sweep(
                plan,
                store,
                client=client,
                address=None if client is not None else address,
                serial=args.serial,
                slice_seconds=args.slice_seconds,
                storage_options=args.storage_options,
                progress=hook,
                log=LOG.info,
                grow=getattr(args, "grow", False),
                recompute=getattr(args, "recompute", False),
            )
            ok = not result.errors
            for err in result.errors[:3]:
                LOG.error(f"slice failed: {err[:300]}")
            summary = status_table(store, args.storage_options)
        else:
            from geosweep.flows.output import RunFailureFilter
            from geosweep.flows.sweep_flow import SlicesFailed, sweep_flow

            if server is not None:
                # what the flow imports anyway (≈ 1.3 s), here while Prefect's server finishes starting
                import dask.array  # noqa: F401
                import xarray  # noqa: F401

                server.join()
            # no worker answered, or one cannot see the store: geosweep's one line, not Prefect's records
            stack.enter_context(RunFailureFilter("WorkersUnresponsive", "NoWorkerConnected", "StoreNotVisible"))
            try:
                out = sweep_flow(
                    plan,
                    store=store,
                    address=address,
                    n_workers=args.workers,
                    slice_seconds=args.slice_seconds,
                    storage_options=args.storage_ref,  # recorded by Prefect as the reference or redacted
                    processes=args.processes,
                    progress=hook,
                    grow=getattr(args, "grow", False),
                    recompute=getattr(args, "recompute", False),
                )
                ok, summary = True, out.get("summary")
            except SlicesFailed as e:
                LOG.error(str(e))
                ok, summary = False, status_table(store, args.storage_options)
    if summary and not args.quiet:
        print(summary)
    LOG.info(f"finished in {time.perf_counter() - t0:.1f}s")
    print(_how_to_open(store, args.storage_ref) if not args.quiet else store)
    return 0 if ok else 1


def cmd_extend(args: argparse.Namespace) -> int:
    """``geosweep extend STORE --T NEW``: continue every finished cell to the later T
    (:mod:`geosweep.sweeps.extension`)."""
    from geosweep.sweeps.extension import extend
    from geosweep.sweeps.store import StoreRef
    from geosweep.sweeps.summary import status_table

    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options, write=True)
    if not ref.exists():
        LOG.error(f"no store at {ref.url}")
        return 2
    hook, close = progress_reporter(enabled=LOG.isEnabledFor(logging.INFO))
    with ExitStack() as stack:
        stack.callback(close)
        address, client = _execution(args, stack)
        result = extend(
            ref.url,
            args.T,
            recompute=args.recompute,
            storage_options=args.storage_options,
            client=client,
            address=None if client is not None else address,
            serial=args.serial,
            slice_seconds=args.slice_seconds,
            processes=args.processes,
            n_workers=args.workers,
            progress=hook,
            log=LOG.info,
        )
    for err in result.errors[:3]:
        LOG.error(f"slice failed: {err[:300]}")
    if not args.quiet:
        print(status_table(ref.url, args.storage_options))
    return 0 if not result.errors else 1


def cmd_serve(args: argparse.Namespace) -> int:
    from geosweep.flows import firstrun
    from geosweep.flows.deployments import prefect_api_url, serve_nightly
    from geosweep.sweeps.credentials import deployment_parameter

    cluster = _cluster_config(args.cluster).model_dump(mode="json") if args.cluster else None
    if not args.temporary and prefect_api_url() is None:
        LOG.error(
            "no Prefect server: PREFECT_API_URL is not set, and a temporary server would take the schedule with it "
            "when this process stops. Start one (prefect server start) and export "
            "PREFECT_API_URL=http://127.0.0.1:4200/api, or pass --temporary"
        )
        return 2
    firstrun.prepare()
    serve_nightly(
        args.spec,
        args.store_root,
        name=args.name,
        cron=args.cron,
        timezone=args.timezone,
        address=args.address,
        n_workers=args.workers,
        slice_seconds=args.slice_seconds,
        storage_options=deployment_parameter(args.storage_ref),  # a reference, never a secret
        cluster=cluster,
        max_failed_share=args.max_failed_share,
        compare_rtol=args.compare_rtol,
        imports=args.imports,
        extend_by=args.extend_by,
        temporary=args.temporary,
        heartbeat=args.heartbeat,
        crash_after=args.crash_after,
        crash_detection=not args.no_crash_detection,
    )
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from geosweep.flows import firstrun
    from geosweep.sweeps.engine import warm_plan
    from geosweep.sweeps.estimate import estimate
    from geosweep.sweeps.plan import make_plan

    t0 = time.perf_counter()
    cold = firstrun.prepare(args.spec)
    plan = make_plan(args.spec)
    if cold:
        warm_plan(plan)
        firstrun.mark_warm()
    compiled = time.perf_counter() - t0
    grid = plan.grid
    dims = ", ".join(f"{d}={n}" for d, n in zip(grid.dims, grid.shape))
    print(f"{args.spec}: valid. {grid.size} cells ({dims}); time samples {plan.spec.n_time}")
    from geosweep.sweeps.compact import axis_text

    print("axes: " + "; ".join(axis_text(axis.name, axis.values) for axis in grid.axes))
    est = estimate(
        plan,
        args.workers,
        prefect=not args.no_prefect,
        cold=False,  # compiled by now, here
        # measured here when this validate compiled; else the reference machine's figure
        compile_seconds=compiled if firstrun.compiled() else firstrun.COLD_SECONDS["family"],
        slice_seconds=args.slice_seconds,
    )
    for line in est.lines():
        print(line)
    if firstrun.compiled():
        print(f"(this validate compiled the kernels, {compiled:.0f} s: runs on this machine skip it)")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from geosweep.sweeps.store import StoreRef
    from geosweep.sweeps.summary import status_table

    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        LOG.error(f"no store at {ref.url}")
        return 2
    table = _read_damaged(ref, lambda: status_table(ref))
    if table is None:
        return 2
    print(table)
    return 0


def _read_damaged(ref, read):
    """``read()``, or None after one line naming the damage of a store it cannot read (flag arrays
    missing, undecodable chunks or metadata) and the command that repairs it."""
    from geosweep.sweeps.repair import missing_flags
    from geosweep.sweeps.store import StoreMismatchError

    try:
        missing = missing_flags(ref)
        if not missing:
            return read()
        problem = f"its flag array(s) {', '.join(missing)} are missing"
    except StoreMismatchError:
        raise
    except Exception as e:  # noqa: BLE001 - any damage becomes one line
        problem = f"it cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"[:300]
    LOG.error(
        f"store {ref.url} is damaged: {problem}. `geosweep verify {ref.url} --repair` (or rerunning the sweep) "
        f"rebuilds the flags and marks damaged cells for recomputation"
    )
    return None


def cmd_verify(args: argparse.Namespace) -> int:
    """``geosweep verify STORE [--repair]``: check every finished cell against its checksum."""
    from geosweep.sweeps.store import StoreRef, mark_for_rerun, verify

    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        LOG.error(f"no store at {ref.url}")
        return 2
    if args.repair:  # a repair writes: under the store's lease (exit 3 while a run writes the store)
        from geosweep.sweeps.lease import Lease

        with Lease(ref) as lease:
            return _verify(lease.ref, args, mark_for_rerun, verify)
    return _verify(ref, args, mark_for_rerun, verify)


def _verify(ref, args: argparse.Namespace, mark_for_rerun, verify) -> int:
    from geosweep.sweeps.repair import missing_flags, repair_flags

    if missing := missing_flags(ref):
        print(f"{ref.url}: flag array(s) {', '.join(missing)} missing")
        if not args.repair:
            print("run `geosweep verify STORE --repair` to rebuild them (cells whose checksum verifies stay done)")
            return 1
        out = repair_flags(ref)
        print(f"rebuilt {', '.join(out['rebuilt'])}: {out['verified']} cell(s) verified, {out['rerun']} to recompute")
    found = verify(ref)
    bad = found["damaged"] + found["flags"]
    if not bad:
        print(f"{ref.url}: every finished cell matches its checksum")
        return 0
    print(f"{ref.url}: {len(found['damaged'])} damaged cell(s), {len(found['flags'])} unreadable flag(s)")
    from geosweep.sweeps.compact import MAX_ITEMS, capped

    for line in capped(_cell_labels(ref, bad[:MAX_ITEMS]), total=len(bad), indent="  "):
        print(line)
    if args.repair:
        mark_for_rerun(ref, bad)
        print("marked for recomputation: rerun the sweep's command to recompute exactly these cells")
        return 0
    print("run `geosweep verify STORE --repair`, then the sweep's command, to recompute them")
    return 1


def _cell_labels(ref, cells: list) -> list[str]:
    """Cells by their coordinates (``integrator=rk4, h=0.01, omega=3.25``), or by index where the
    store's coordinates cannot be read."""
    import numpy as np

    try:
        group = ref.open_group("r")
        status = group["status"]
        dims = getattr(status.metadata, "dimension_names", None) or status.attrs["_ARRAY_DIMENSIONS"]
        coords = {d: np.asarray(group[d][:]) for d in dims}
    except Exception:  # noqa: BLE001 - a damaged store: the indices still name the cells
        return [f"cell {tuple(int(i) for i in cell)}" for cell in cells]

    def value(v) -> str:
        return format(float(v), ".12g") if isinstance(v, np.floating | float) else str(v)

    return [", ".join(f"{d}={value(coords[d][int(i)])}" for d, i in zip(dims, cell)) for cell in cells]


def cmd_report(args: argparse.Namespace) -> int:
    """``geosweep report STORE [--out DIR]``: figures and index.md/index.html (see geosweep.analysis.report)."""
    from geosweep.analysis.report import main_report
    from geosweep.sweeps.store import StoreRef, open_results

    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        LOG.error(f"no store at {ref.url}")
        return 2
    open_results(ref)  # a store of another format is refused here (exit 3), before any figure
    select = {}
    for item in args.sel or []:
        name, eq, value = item.partition("=")
        if not eq or not name.strip():
            LOG.error(f"--sel {item!r}: expected NAME=VALUE, e.g. --sel omega=3.25")
            return 2
        select[name.strip()] = value.strip()
    try:
        rep = main_report(args.store, args.out, args.storage_options, select=select)
    except ValueError as e:
        if not str(e).startswith("sel."):
            raise
        LOG.error(str(e))
        return 2
    print(f"report: {rep.index_location} ({len(rep.figures)} figures{'; ' + rep.selection if rep.selection else ''})")
    for note in rep.notes:
        LOG.info(f"note: {note}")
    return 0


def cmd_systems(args: argparse.Namespace) -> int:
    from geosweep.flows import firstrun
    from geosweep.kernels.registry import INTEGRATORS, SYSTEMS, integrators_for

    firstrun.load_families()  # says "compiling kernels" when a cold Numba cache makes importing compile
    for sysdef in SYSTEMS.values():
        print(f"{sysdef.name}  [family {sysdef.family}]")
        print(f"    {sysdef.doc}")
        for p in sysdef.params:
            extra = f" one of {list(p.choices)}" if p.choices else ""
            units = f" [{p.units}]" if p.units and p.units != "1" else ""
            print(f"    - {p.name} ({p.kind.__name__}{units}, default {p.default!r}){extra}: {p.doc}")
        print(f"    integrators: {', '.join(i.name for i in integrators_for(sysdef))}")
        print()
    print("integrators:")
    for idef in INTEGRATORS.values():
        print(f"  {idef.name}  [family {idef.family}, order {idef.order}]: {idef.doc}")
        for p in idef.params:
            print(f"    - {p.name} ({p.kind.__name__}, default {p.default!r}): {p.doc}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="geosweep")
    parser.add_argument("--version", action="version", version=f"geosweep {_version()}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-q", "--quiet", action="store_true", help="print only warnings, errors and the result (no progress)"
    )
    common.add_argument(
        "--log-level",
        type=str.upper,
        choices=LEVELS,
        default="INFO",
        help="level of geosweep's and Prefect's messages (default INFO; Dask's stay at WARNING unless DEBUG)",
    )
    common.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="import MODULE first (repeatable): your own systems, integrators or families (see flows/plugins.py); "
        "installed geosweep.plugins entry points are always loaded",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def command(name: str, **kwargs) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[common], **kwargs)

    def add_store_options(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--storage-options",
            type=_storage_options,
            metavar="JSON|env:NAME|@FILE|profile:NAME",
            help='fsspec options of a remote store: JSON, e.g. \'{"client_kwargs": {"endpoint_url": "https://…"}}\', '
            "or, for credentials, a reference: env:NAME (JSON in a variable), @FILE (a JSON file), profile:NAME",
        )

    def add_execution_options(p: argparse.ArgumentParser, workers_help: str) -> None:
        p.add_argument("--workers", type=_positive_int, help=workers_help)
        p.add_argument("--address", help="address of an existing Dask scheduler (tcp://host:8786)")
        p.add_argument("--cluster", metavar="FILE", help="start the cluster described in FILE (deploy/clusters.py)")
        p.add_argument("--slice-seconds", type=float, default=10.0, help="target work per Dask task (s)")
        add_store_options(p)

    def add_run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--store", help="zarr store path or URL (default: results/<name>.zarr)")
        add_execution_options(
            p, "local Dask workers (default: all cores): threads in this process by default, processes with --processes"
        )
        p.add_argument("--no-prefect", action="store_true", help="run on Dask without the Prefect flow")
        p.add_argument("--serial", action="store_true", help="run in this process, no Dask, no Prefect")
        p.add_argument(
            "--processes",
            action="store_true",
            help="local Dask workers as processes (default: threads; the kernels release the GIL)",
        )
        p.add_argument(
            "--threads-per-cell",
            type=_positive_int,
            metavar="N",
            help="threads inside one cell, same results on any count (default: 1, or cores/cells when "
            "fewer cells than cores are to run; the (S²)ⁿ potentials use them)",
        )

    p = command("run", help="run (or resume) a sweep spec")
    p.add_argument("spec", help="sweep spec file (.toml, .yaml)")
    add_run_options(p)
    p.add_argument(
        "--grow",
        action="store_true",
        help="grow the --store to this spec: values appended at the end of its sweep axes (only the new cells "
        "are computed; stored cells are kept as they are) and/or a larger T (finished cells continue, see extend)",
    )
    p.add_argument(
        "--recompute", action="store_true", help="with --grow: cells without a kept carry run again from t = 0"
    )
    p = command("extend", help="continue every finished cell of a store to a later final time T")
    p.add_argument("store")
    p.add_argument("--T", type=float, required=True, help="the new final time (a multiple of the store's dt_out)")
    p.add_argument(
        "--recompute", action="store_true", help="cells without a kept carry run again from t = 0 (else: refused)"
    )
    add_execution_options(p, "local Dask workers (default: all cores)")
    p.add_argument("--serial", action="store_true", help="run in this process, no Dask")
    p.add_argument("--processes", action="store_true", help="local Dask workers as processes (default: threads)")
    p = command("demo", help="run the built-in sphere MD demo sweep (≈ 13 s on 2 idle cores, ≈ 8 s more at first)")
    add_run_options(p)
    p = command("serve", help="serve the nightly Prefect deployment of a spec (runs until stopped)")
    p.add_argument("spec", help="sweep spec file (.toml, .yaml)")
    p.add_argument("--store-root", required=True, help="directory or URL; stores go to ROOT/<name>/<YYYY-MM-DD>.zarr")
    p.add_argument("--cron", default="0 2 * * *", help='cron schedule (default "0 2 * * *")')
    p.add_argument("--timezone", default="UTC", help="timezone of the cron schedule (default UTC)")
    p.add_argument("--name", help="deployment name (default nightly-<spec name>)")
    p.add_argument(
        "--max-failed-share",
        type=_share,
        default=0.5,
        metavar="F",
        help="a night's flow run fails when more than this share of its cells failed (0–1, default 0.5)",
    )
    p.add_argument(
        "--compare-rtol",
        type=float,
        default=1e-6,
        metavar="R",
        help="relative change of a per-cell value that the comparison with the previous night lists (default 1e-6)",
    )
    p.add_argument(
        "--temporary",
        action="store_true",
        help="allow serving without PREFECT_API_URL, on a temporary Prefect server (the schedule dies with it)",
    )
    p.add_argument(
        "--heartbeat",
        type=int,
        default=60,
        metavar="S",
        help="seconds between the flow runs' heartbeats (≥ 30, default 60)",
    )
    p.add_argument(
        "--crash-after",
        type=float,
        metavar="S",
        help="a run that sends no heartbeat for S seconds (killed by walltime, scancel …) is marked Crashed "
        "by a server automation (default 2 heartbeats + 30 s)",
    )
    p.add_argument("--no-crash-detection", action="store_true", help="do not create the crash-detection automation")
    p.add_argument(
        "--extend-by",
        type=float,
        metavar="DT",
        help="grow one store, ROOT/<name>/extended.zarr, by DT each night (geosweep extend) instead of a dated store",
    )
    add_execution_options(p, "local Dask worker threads of each run (default: all cores)")
    p = command("validate", help="check a spec and estimate its cost (cells, core-s, wall time, store); runs nothing")
    p.add_argument("spec")
    p.add_argument("--workers", type=int, help="local workers the wall-time estimate assumes (default: all cores)")
    p.add_argument("--no-prefect", action="store_true", help="estimate a run without the Prefect flow")
    p.add_argument("--slice-seconds", type=float, default=10.0, help="target work per Dask task (s), as for run")
    p = command("status", help="completion and status of a store")
    p.add_argument("store")
    add_store_options(p)
    p = command("verify", help="check every finished cell of a store against its checksum")
    p.add_argument("store")
    p.add_argument("--repair", action="store_true", help="mark damaged cells so that the next run recomputes them")
    add_store_options(p)
    p = command("report", help="figures and an index (Markdown, HTML) of a store's results")
    p.add_argument("store")
    p.add_argument("--out", help="output directory or URL (default: <store>.report beside the store, URLs too)")
    p.add_argument(
        "--sel",
        action="append",
        metavar="NAME=VALUE",
        help="slice of the per-slice figures, e.g. --sel omega=3.25 (repeatable; default: the system's declared one)",
    )
    add_store_options(p)
    command("systems", help="list systems, integrators and their parameters")
    # the description names every command, from the parser itself (one added later is listed too)
    parser.description = f"Distributed parameter sweeps of geometric integrators. Commands: {', '.join(sub.choices)}."
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        return cmd_run(args, args.spec)
    if args.command == "demo":
        LOG.info(f"demo spec {Path(_demo_spec_path()).name}")
        return cmd_run(args, _demo_spec_path())
    if args.command == "extend":
        return cmd_extend(args)
    if args.command == "serve":
        return cmd_serve(args)
    if args.command == "validate":
        return cmd_validate(args)
    if args.command == "status":
        return cmd_status(args)
    if args.command == "systems":
        return cmd_systems(args)
    if args.command == "report":
        return cmd_report(args)
    if args.command == "verify":
        return cmd_verify(args)
    return 2


def main(argv: list[str] | None = None) -> int:
    # an offline machine cannot send Prefect's telemetry: do not log an error for it
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    if argv is None:  # the console script: every Python process it starts (Dask's spawned workers too)
        # keeps the working directory off sys.path, like firstrun.SAFE_PATH (a multiprocessing.py there
        # must not run in a worker); --import still finds modules there (geosweep.flows.plugins puts it on sys.path)
        os.environ.setdefault("PYTHONSAFEPATH", "1")
    parser = build_parser()
    args = parser.parse_args(argv)
    # the options themselves (dict) for this process; the StorageOptions (reference, or redacted when
    # serialised) for Prefect flow and deployment parameters, which are stored
    args.storage_ref = getattr(args, "storage_options", None)
    args.storage_options = args.storage_ref.options if args.storage_ref is not None else None
    args.exit_on_interrupt = argv is None  # the console script: leave at once after Ctrl-C (see _exit_now)
    if getattr(args, "cluster", None) and (args.address or getattr(args, "serial", False)):
        parser.error("--cluster cannot be combined with --address or --serial")
    with Interrupts(restore=argv is not None) as interrupts:
        try:
            configure(args.log_level, args.quiet)
            from geosweep.flows.plugins import PluginError, load_plugins
            from geosweep.sweeps.credentials import StorageOptionsError
            from geosweep.sweeps.extension import ExtendError
            from geosweep.sweeps.lease import LeaseFileError, StoreWriteError
            from geosweep.sweeps.liveness import WorkersUnresponsive
            from geosweep.sweeps.repair import StoreDamagedError
            from geosweep.sweeps.spec import SpecError
            from geosweep.sweeps.store import StoreMismatchError

            try:
                for name in load_plugins(args.imports):
                    LOG.debug(f"plugin loaded: {name}")
                return _dispatch(args)
            except PluginError as e:
                LOG.error(str(e))
                return 2
            except (SpecError, ExtendError) as e:
                LOG.error(str(e))
                return 2
            except StoreMismatchError as e:
                LOG.error(str(e))
                return 3
            except WorkersUnresponsive as e:
                LOG.error(str(e))
                return 1
            except (
                ClusterFileError,
                StoreProblem,
                SchedulerUnreachable,
                StorageOptionsError,
                StoreDamagedError,
                LeaseFileError,
                StoreWriteError,
            ) as e:
                LOG.error(str(e))
                return 2
        except KeyboardInterrupt:
            interrupts.caught()  # a second signal no longer cuts the shutdown short
            logging.disable(logging.CRITICAL)  # no shutdown noise from Dask or Prefect after the one line
            print(f"geosweep: {Interrupts.MESSAGE}", file=sys.stderr, flush=True)
            if argv is not None:  # called in-process (not the console script): logging back on
                logging.disable(logging.NOTSET)
                return interrupts.exit_code
    _exit_now(interrupts.exit_code)
    return interrupts.exit_code


def _exit_now(code: int) -> None:
    """Leave without waiting for worker threads still inside a cell (a Numba kernel cannot be
    interrupted; the cell is not marked done and reruns on resume). Exit handlers (e.g. stopping
    Prefect's temporary server) still run."""
    import atexit

    sys.stdout.flush()
    sys.stderr.flush()
    # distributed's exit handlers join the worker threads, i.e. wait for their cells to finish
    waits = (("distributed._concurrent_futures_thread", "_python_exit"), ("distributed.deploy.spec", "close_clusters"))
    for module, name in waits:
        if (fn := getattr(sys.modules.get(module), name, None)) is not None:
            atexit.unregister(fn)
    atexit._run_exitfuncs()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
