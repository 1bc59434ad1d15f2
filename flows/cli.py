"""``geosweep`` command line: run, demo, serve, validate, status, systems.

``run``/``demo`` write to a local path or an fsspec URL (``--store s3://…`` with
``--storage-options JSON``) on a local cluster, a scheduler (``--address``) or a cluster
described in a file (``--cluster FILE``, see :mod:`deploy.clusters`); ``serve`` serves the
nightly Prefect deployment of a spec (see :mod:`flows.deployments`).

Exit codes: 0 success (cells whose integration failed are results, not errors), 1 some
slices raised, 2 the spec, cluster file or options were refused, 3 the store belongs to
another spec or has another store format.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from importlib import resources
from pathlib import Path

DEMO_SPEC = "sphere_demo.toml"


def _demo_spec_path() -> str:
    return str(resources.files("sweeps").joinpath("examples", DEMO_SPEC))


def _progress_bar(total_hint: int | None = None):
    from tqdm import tqdm

    state: dict = {"bar": None}

    def hook(p) -> None:
        if state["bar"] is None:
            state["bar"] = tqdm(total=p.total, initial=p.done, unit="cell", desc="cells", dynamic_ncols=True)
            return
        bar = state["bar"]
        bar.set_postfix(failed=p.failed, refresh=False)
        bar.update(p.done - bar.n)

    def close() -> None:
        if state["bar"] is not None:
            state["bar"].close()

    return hook, close


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
    print(f"geosweep: starting {cfg.kind} cluster from {path}", file=sys.stderr)
    return cfg.make()


def cmd_run(args: argparse.Namespace, spec_path: str) -> int:
    from sweeps.engine import default_store_path, run_sweep
    from sweeps.plan import make_plan

    plan = make_plan(spec_path)  # validated and models built, once; a bad spec is refused before anything starts
    store = args.store or default_store_path(plan.spec)
    cluster = _start_cluster(args.cluster) if args.cluster else None
    address = cluster.scheduler_address if cluster is not None else args.address
    hook, close = _progress_bar()
    t0 = time.perf_counter()
    try:
        if args.no_prefect or args.serial:
            result = run_sweep(
                plan,
                store,
                address=address,
                n_workers=args.workers,
                processes=args.processes,
                serial=args.serial,
                slice_seconds=args.slice_seconds,
                storage_options=args.storage_options,
                progress=hook,
                log=lambda m: print(f"geosweep: {m}", file=sys.stderr),
            )
            ok = not result.errors
            summary = None
        else:
            from flows.sweep_flow import sweep_flow

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
            ok = True
            summary = out.get("summary")
    finally:
        close()
        if cluster is not None:
            cluster.close()
    if summary:
        print(summary)
    print(f"finished in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    print(_how_to_open(os.fspath(store), args.storage_options))
    return 0 if ok else 1


def cmd_serve(args: argparse.Namespace) -> int:
    from flows.deployments import serve_nightly

    cluster = _cluster_config(args.cluster).model_dump(mode="json") if args.cluster else None
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
    )
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from sweeps.plan import make_plan

    plan = make_plan(args.spec)
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
    if not ref.exists():
        print(f"geosweep: no store at {ref.url}", file=sys.stderr)
        return 2
    print(status_table(ref))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``geosweep report STORE [--out DIR]``: figures and index.md/index.html (see analysis.report)."""
    from analysis.report import main_report
    from sweeps.store import StoreRef, open_results

    ref = StoreRef.of(args.store, args.storage_options)
    if not ref.exists():
        print(f"geosweep: no store at {ref.url}", file=sys.stderr)
        return 2
    open_results(ref)  # a store of another format is refused here (exit 3), before any figure
    rep = main_report(args.store, args.out, args.storage_options)
    print(f"report: {rep.index} ({len(rep.figures)} figures)")
    for note in rep.notes:
        print(f"note: {note}", file=sys.stderr)
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
    sub = parser.add_subparsers(dest="command", required=True)

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

    p = sub.add_parser("run", help="run (or resume) a sweep spec")
    p.add_argument("spec", help="sweep spec file (.toml, .yaml)")
    add_run_options(p)
    p = sub.add_parser("demo", help="run the built-in sphere MD demo sweep (~30 s on 2 cores)")
    add_run_options(p)
    p = sub.add_parser("serve", help="serve the nightly Prefect deployment of a spec (runs until stopped)")
    p.add_argument("spec", help="sweep spec file (.toml, .yaml)")
    p.add_argument("--store-root", required=True, help="directory or URL; stores go to ROOT/<name>/<YYYY-MM-DD>.zarr")
    p.add_argument("--cron", default="0 2 * * *", help='cron schedule (default "0 2 * * *")')
    p.add_argument("--timezone", default="UTC", help="timezone of the cron schedule (default UTC)")
    p.add_argument("--name", help="deployment name (default nightly-<spec name>)")
    add_execution_options(p, "local Dask worker threads of each run (default: all cores)")
    p = sub.add_parser("validate", help="check a spec without running it")
    p.add_argument("spec")
    p = sub.add_parser("status", help="completion and status of a store")
    p.add_argument("store")
    add_store_options(p)
    p = sub.add_parser("report", help="figures and an index (Markdown, HTML) of a store's results")
    p.add_argument("store")
    p.add_argument("--out", help="output directory (default: <store>.report)")
    add_store_options(p)
    sub.add_parser("systems", help="list systems, integrators and their parameters")
    return parser


def main(argv: list[str] | None = None) -> int:
    # an offline machine cannot send Prefect's telemetry: do not log an error for it
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "cluster", None) and (args.address or getattr(args, "serial", False)):
        parser.error("--cluster cannot be combined with --address or --serial")
    import logging

    for name in ("distributed", "distributed.scheduler", "distributed.nanny", "distributed.core"):
        logging.getLogger(name).setLevel(logging.WARNING)
    from sweeps.spec import SpecError
    from sweeps.store import StoreMismatchError

    try:
        if args.command == "run":
            return cmd_run(args, args.spec)
        if args.command == "demo":
            print(f"geosweep: demo spec {Path(_demo_spec_path()).name}", file=sys.stderr)
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
    except SpecError as e:
        print(f"geosweep: {e}", file=sys.stderr)
        return 2
    except StoreMismatchError as e:
        print(f"geosweep: {e}", file=sys.stderr)
        return 3
    except ClusterFileError as e:
        print(f"geosweep: {e}", file=sys.stderr)
        return 2
    return 2


if __name__ == "__main__":
    sys.exit(main())
