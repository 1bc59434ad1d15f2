"""``geosweep`` command line: run, demo, validate, status, systems.

Exit codes: 0 success (cells whose integration failed are results, not errors), 1 some
slices raised, 2 the spec was refused, 3 the store belongs to another spec.
"""

from __future__ import annotations

import argparse
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


def _how_to_open(store: str) -> str:
    return (
        f"\nresults: {store}\n"
        "open them with:\n"
        "    import xarray as xr\n"
        f"    ds = xr.open_zarr({store!r})\n"
        "    ds.mean_abs_energy_error.where(ds.status == 0)   # failed cells dropped explicitly\n"
    )


def cmd_run(args: argparse.Namespace, spec_path: str) -> int:
    from sweeps.engine import default_store_path, run_sweep
    from sweeps.spec import load_spec

    spec = load_spec(spec_path)  # refuse a bad spec before starting anything
    store = args.store or default_store_path(spec)
    hook, close = _progress_bar()
    t0 = time.perf_counter()
    try:
        if args.no_prefect or args.serial:
            result = run_sweep(
                spec,
                store,
                address=args.address,
                n_workers=args.workers,
                serial=args.serial,
                slice_seconds=args.slice_seconds,
                progress=hook,
                log=lambda m: print(f"geosweep: {m}", file=sys.stderr),
            )
            ok = not result.errors
            summary = None
        else:
            from flows.sweep_flow import PROGRESS_HOOKS, sweep_flow

            PROGRESS_HOOKS.append(hook)
            try:
                out = sweep_flow(
                    spec.model_dump(mode="json"),
                    store=store,
                    address=args.address,
                    n_workers=args.workers,
                    slice_seconds=args.slice_seconds,
                )
            finally:
                PROGRESS_HOOKS.remove(hook)
            ok = True
            summary = out.get("summary")
    finally:
        close()
    if summary:
        print(summary)
    print(f"finished in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    print(_how_to_open(os.fspath(store)))
    return 0 if ok else 1


def cmd_validate(args: argparse.Namespace) -> int:
    from sweeps.grid import Grid
    from sweeps.spec import load_spec

    spec = load_spec(args.spec)
    grid = Grid(spec)
    dims = ", ".join(f"{d}={n}" for d, n in zip(grid.dims, grid.shape))
    est = sum(grid.cost(c) for c in grid.cells())
    print(f"{args.spec}: valid. {grid.size} cells ({dims}); time samples {spec.n_time}; ")
    print(f"estimated work ≈ {est:.0f} core-seconds")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from sweeps.store import StoreRef
    from sweeps.summary import status_table

    ref = StoreRef.of(args.store)
    if not ref.exists():
        print(f"geosweep: no store at {ref.url}", file=sys.stderr)
        return 2
    print(status_table(ref))
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
    sub = parser.add_subparsers(dest="command", required=True)

    def add_run_options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--store", help="zarr store path or URL (default: results/<name>.zarr)")
        p.add_argument("--workers", type=int, help="local Dask worker processes (default: all cores)")
        p.add_argument("--address", help="address of an existing Dask scheduler (tcp://host:8786)")
        p.add_argument("--slice-seconds", type=float, default=10.0, help="target work per Dask task (s)")
        p.add_argument("--no-prefect", action="store_true", help="run on Dask without the Prefect flow")
        p.add_argument("--serial", action="store_true", help="run in this process, no Dask, no Prefect")

    p = sub.add_parser("run", help="run (or resume) a sweep spec")
    p.add_argument("spec", help="sweep spec file (.toml, .yaml)")
    add_run_options(p)
    p = sub.add_parser("demo", help="run the built-in sphere MD demo sweep (~1 min on 2 cores)")
    add_run_options(p)
    p = sub.add_parser("validate", help="check a spec without running it")
    p.add_argument("spec")
    p = sub.add_parser("status", help="completion and status of a store")
    p.add_argument("store")
    sub.add_parser("systems", help="list systems, integrators and their parameters")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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
        if args.command == "validate":
            return cmd_validate(args)
        if args.command == "status":
            return cmd_status(args)
        if args.command == "systems":
            return cmd_systems(args)
    except SpecError as e:
        print(f"geosweep: {e}", file=sys.stderr)
        return 2
    except StoreMismatchError as e:
        print(f"geosweep: {e}", file=sys.stderr)
        return 3
    return 2


if __name__ == "__main__":
    sys.exit(main())
