"""``geosweep`` command line: run, demo, serve, validate, status, systems.

``run``/``demo`` write to a local path or an fsspec URL (``--store s3://…`` with
``--storage-options JSON``) on a local cluster, a scheduler (``--address``) or a cluster
described in a file (``--cluster FILE``, see :mod:`deploy.clusters`); ``serve`` serves the
nightly Prefect deployment of a spec (see :mod:`flows.deployments`).

Every command takes ``--quiet``, ``--log-level`` and ``--import MODULE`` (custom systems; the
``geosweep.plugins`` entry points are always loaded, see :mod:`flows.plugins`).

Exit codes: 0 success (cells whose integration failed are results, not errors), 1 some
slices raised, 2 the spec, cluster file, options, a plugin or the store location were refused,
3 the store belongs to another spec or has another store format, 130/143 interrupted by
SIGINT/SIGTERM (one line, no traceback; rerun to resume).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from contextlib import ExitStack
from importlib import resources
from pathlib import Path
from typing import Any

from flows.output import LEVELS, LOG, Interrupts, configure, progress_reporter, store_problem

DEMO_SPEC = "sphere_demo.toml"


def _demo_spec_path() -> str:
    return str(resources.files("sweeps").joinpath("examples", DEMO_SPEC))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("geosweep")
    except PackageNotFoundError:
        return "unknown (not installed)"


def _how_to_open(store: str, storage_options: dict | None = None) -> str:
    # the options may hold credentials: name them, never print them
    extra = ", storage_options=STORAGE_OPTIONS)  # the dict given to --storage-options" if storage_options else ")"
    return (
        f"\nresults: {store}\n"
        "open them with:\n"
        "    import xarray as xr\n"
        f"    ds = xr.open_zarr({store!r}{extra}\n"
        "    ds.max_rel_energy_error.where(ds.status == 0)   # failed cells dropped explicitly\n"
    )


def _storage_options(text: str) -> dict:
    """``--storage-options``: a JSON object (fsspec options of the store's filesystem)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"not valid JSON: {e}") from e
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("must be a JSON object, e.g. '{\"anon\": false}'")
    return value


def _share(text: str) -> float:
    value = float(text)
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("must be between 0 and 1")
    return value


class ClusterFileError(ValueError):
    """A ``--cluster`` file could not be read or describes no usable cluster."""


def _cluster_config(path: str):
    """Read and check a :class:`deploy.clusters.ClusterConfig` file (refused before any work)."""
    from pydantic import ValidationError

    from deploy.clusters import ClusterConfig, check_dependencies

    try:
        cfg = ClusterConfig.from_file(path)
        check_dependencies(cfg.kind)
    except (OSError, ValueError, ValidationError, ImportError) as e:
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


def _check_store(store: str, storage_options: dict | None) -> None:
    problem = store_problem(store, storage_options)
    if problem:
        raise StoreProblem(problem)


def _execution(args: argparse.Namespace, stack: ExitStack) -> tuple[str | None, Any]:
    """Start (or connect to) the Dask cluster of a run: (scheduler address, client or None).

    The cluster lives as long as ``stack``; its dashboard link is printed when it has one.
    """
    if args.serial:
        return None, None
    from distributed import Client, LocalCluster

    if args.cluster:
        cluster = stack.enter_context(_start_cluster(args.cluster))
        address, link = cluster.scheduler_address, cluster.dashboard_link
        client = None
    elif args.address:
        client = stack.enter_context(Client(args.address, timeout="30s"))
        address, link = args.address, client.dashboard_link
    else:
        n = args.workers or os.cpu_count() or 1
        cluster = LocalCluster(
            n_workers=n,
            threads_per_worker=1,
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
    from flows import firstrun
    from sweeps.engine import default_store_path, run_sweep
    from sweeps.plan import make_plan
    from sweeps.summary import status_table

    on_prefect = not (args.no_prefect or args.serial)
    server = firstrun.start_prefect_server() if on_prefect else None  # starts while the kernels load
    cold = firstrun.prepare()
    plan = make_plan(spec_path)  # validated and models built, once; a bad spec is refused before anything starts
    if cold:
        plan.famdef.warmup()  # the driver's specialisations, here while Prefect's server starts
        firstrun.mark_warm()
    store = os.fspath(args.store or default_store_path(plan.spec))
    _check_store(store, args.storage_options)
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
            )
            ok = not result.errors
            for err in result.errors[:3]:
                LOG.error(f"slice failed: {err}")
            summary = status_table(store, args.storage_options)
        else:
            from flows.sweep_flow import SlicesFailed, sweep_flow

            if server is not None:
                server.join()
            try:
                out = sweep_flow(
                    plan,
                    store=store,
                    address=address,
                    n_workers=args.workers,
                    slice_seconds=args.slice_seconds,
                    storage_options=args.storage_options,
                    processes=args.processes,
                    progress=hook,
                )
                ok, summary = True, out.get("summary")
            except SlicesFailed as e:
                LOG.error(str(e))
                ok, summary = False, status_table(store, args.storage_options)
    if summary and not args.quiet:
        print(summary)
    LOG.info(f"finished in {time.perf_counter() - t0:.1f}s")
    print(_how_to_open(store, args.storage_options) if not args.quiet else store)
    return 0 if ok else 1


def cmd_serve(args: argparse.Namespace) -> int:
    from flows import firstrun
    from flows.deployments import prefect_api_url, serve_nightly

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
        storage_options=args.storage_options,
        cluster=cluster,
        max_failed_share=args.max_failed_share,
        compare_rtol=args.compare_rtol,
        imports=args.imports,
        temporary=args.temporary,
    )
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from flows import firstrun
    from sweeps.plan import make_plan

    cold = firstrun.prepare()
    plan = make_plan(args.spec)
    if cold:
        firstrun.mark_warm()
    grid = plan.grid
    dims = ", ".join(f"{d}={n}" for d, n in zip(grid.dims, grid.shape))
    est = sum(plan.cost(c) for c in grid.cells())
    print(f"{args.spec}: valid. {grid.size} cells ({dims}); time samples {plan.spec.n_time}; ")
    print(f"estimated work ≈ {est:.0f} core-seconds")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from sweeps.store import StoreRef
    from sweeps.summary import status_table

    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        LOG.error(f"no store at {ref.url}")
        return 2
    print(status_table(ref))
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    """``geosweep verify STORE [--repair]``: check every finished cell against its checksum."""
    from sweeps.store import StoreRef, mark_for_rerun, verify

    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        LOG.error(f"no store at {ref.url}")
        return 2
    found = verify(ref)
    bad = found["damaged"] + found["flags"]
    if not bad:
        print(f"{ref.url}: every finished cell matches its checksum")
        return 0
    print(f"{ref.url}: {len(found['damaged'])} damaged cell(s), {len(found['flags'])} unreadable flag(s)")
    for cell in bad[:20]:
        print(f"  cell {tuple(int(i) for i in cell)}")
    if args.repair:
        mark_for_rerun(ref, bad)
        print("marked for recomputation: rerun the sweep's command to recompute exactly these cells")
        return 0
    print("run `geosweep verify STORE --repair`, then the sweep's command, to recompute them")
    return 1


def cmd_report(args: argparse.Namespace) -> int:
    """``geosweep report STORE [--out DIR]``: figures and index.md/index.html (see analysis.report)."""
    from analysis.report import main_report
    from sweeps.store import StoreRef, open_results

    ref = StoreRef.of(args.store, args.storage_options)
    _check_store(ref.url, args.storage_options)
    if not ref.exists():
        LOG.error(f"no store at {ref.url}")
        return 2
    open_results(ref)  # a store of another format is refused here (exit 3), before any figure
    rep = main_report(args.store, args.out, args.storage_options)
    print(f"report: {rep.index_location} ({len(rep.figures)} figures)")
    for note in rep.notes:
        LOG.info(f"note: {note}")
    return 0


def cmd_systems(args: argparse.Namespace) -> int:
    from kernels.registry import INTEGRATORS, SYSTEMS, integrators_for, load_builtins

    load_builtins()
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
    parser = argparse.ArgumentParser(prog="geosweep", description=__doc__.splitlines()[0])
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
            metavar="JSON",
            help='fsspec options of a remote store, e.g. \'{"client_kwargs": {"endpoint_url": "https://…"}}\'',
        )

    def add_execution_options(p: argparse.ArgumentParser, workers_help: str) -> None:
        p.add_argument("--workers", type=int, help=workers_help)
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

    p = command("run", help="run (or resume) a sweep spec")
    p.add_argument("spec", help="sweep spec file (.toml, .yaml)")
    add_run_options(p)
    p = command("demo", help="run the built-in sphere MD demo sweep (~30 s on 2 cores; ~25 s more on the first run)")
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
    add_execution_options(p, "local Dask worker threads of each run (default: all cores)")
    p = command("validate", help="check a spec without running it")
    p.add_argument("spec")
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
    add_store_options(p)
    command("systems", help="list systems, integrators and their parameters")
    return parser


def _dispatch(args: argparse.Namespace) -> int:
    if args.command == "run":
        return cmd_run(args, args.spec)
    if args.command == "demo":
        LOG.info(f"demo spec {Path(_demo_spec_path()).name}")
        return cmd_run(args, _demo_spec_path())
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
    parser = build_parser()
    args = parser.parse_args(argv)
    args.exit_on_interrupt = argv is None  # the console script: leave at once after Ctrl-C (see _exit_now)
    if getattr(args, "cluster", None) and (args.address or getattr(args, "serial", False)):
        parser.error("--cluster cannot be combined with --address or --serial")
    with Interrupts(restore=argv is not None) as interrupts:
        try:
            configure(args.log_level, args.quiet)
            from flows.plugins import PluginError, load_plugins
            from sweeps.spec import SpecError
            from sweeps.store import StoreMismatchError

            try:
                for name in load_plugins(args.imports):
                    LOG.debug(f"plugin loaded: {name}")
                return _dispatch(args)
            except PluginError as e:
                LOG.error(str(e))
                return 2
            except SpecError as e:
                LOG.error(str(e))
                return 2
            except StoreMismatchError as e:
                LOG.error(str(e))
                return 3
            except (ClusterFileError, StoreProblem) as e:
                LOG.error(str(e))
                return 2
        except KeyboardInterrupt:
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
