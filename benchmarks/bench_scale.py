"""Cost of many cells against their number: kernels, ``run_sweep`` serial and on 2 workers, the CLI,
the driver's planning and store creation, reading back.

Run: ``python benchmarks/bench_scale.py [--cells 100 1000 10000 100000] [--cell-ms 0.1 10]
[--rows kernel serial workers procs cli] [--driver 1000000] [--synthetic 100000] [--quick] [--figure PATH]``.
The sweep of issue 21: ``pendulum_chain`` N = 3, ``ic = "random"``, ``seed`` = 0 … n/4 − 1,
2 integrators × 2 step sizes; T = 0.1 gives about 0.1 ms per cell, ``--cell-ms 10`` stretches T
to 25 (and dt_out, so every cell keeps 11 samples): about 10 ms. Rows per size and cell cost, each
measured in a fresh process (so its peak memory is its own):

* ``kernel``: the bare loop ``FAMILIES[...].start(model, integrator, request, options).advance()``
  over every cell (models built beforehand), no store;
* ``serial``: ``run_sweep(serial=True)`` into a fresh store; ``workers``: a local cluster of
  2 geosweep workers (threads; :func:`geosweep.sweeps.execution.local_cluster`) made beforehand, so
  its start-up is not counted; ``procs``: the same with
  2 worker processes (``--processes``), their kernels loaded beforehand; every row imports the
  libraries a run loads on first use before its clock starts (:func:`preload`);
A ``workers``, ``procs`` or ``cli`` row of a few short cells runs in the driver without Dask, as
geosweep decides by default (:func:`geosweep.sweeps.execution.runs_in_driver`; marked "in the driver";
``GEOSWEEP_IN_DRIVER_BELOW=0`` in the environment measures the Dask path instead).

* ``cli``: ``geosweep run SPEC --no-prefect --workers 2`` as a subprocess (everything:
  imports, plan, cluster, run, closing summary; its workers are what geosweep chooses by default:
  processes for 20 000 or more sub-millisecond cells, else threads);
* ``driver`` (``--driver N``): the driver alone on an N-cell spec (10⁶ by default with ``--driver``):
  ``make_plan``, the ``geosweep validate`` estimate, store creation (``ensure_store``), and
  ``done_mask`` + the status table of the empty store;
* ``synthetic`` (``--synthetic N``): a store of N cells made without computing them: the template,
  then every shard filled with one computed cell's values through :func:`geosweep.sweeps.store.write_shard`
  — for read-back and status times of stores too large to compute here.

Columns: wall s, cells/s, overhead per cell (wall − kernel loop, per cell), driver peak memory (peak
RSS of the process; the CLI row: of the ``geosweep`` process), store objects (files), read-back of
one variable (``ds.max_rel_energy_error.values``) and of the whole store (``xr.open_zarr(s).load()``),
``done_mask`` + status table (read times: the least of 3, 1 with ``--quick``). ``--quick``: sizes
10² and 10³, 0.1 ms cells, one read. The log–log figure (cost per row against cells) goes to
``benchmarks/scale_cost.png`` unless ``--figure ''``; ``--json F`` keeps the results, ``--from-json F …``
draws the figure of several runs; ``--max-work S`` skips sizes of more than S kernel seconds.

``--off PATH …`` switches those micro-paths off in every ``run_sweep`` row
(:class:`geosweep.sweeps.backends.paths.MicroPaths`); ``--compare-paths [PATH …] [--rounds R]`` runs the
``serial``/``workers``/``procs`` rows with every path on and with each named one (default: all) off,
alternating in one run, and prints the medians and the ratios off / on (:func:`compare_paths`).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
warnings.filterwarnings("ignore")

ROWS = ("kernel", "serial", "workers", "procs", "cli")
#: the engine's micro-paths (:class:`geosweep.sweeps.backends.paths.MicroPaths`), each switchable off
PATHS = ("inproc", "inline_models", "spread", "one_task_shards", "writers_apart", "early_wave", "together",
         "resubmit", "tails")  # fmt: skip


def spec(cells: int, cell_ms: float = 0.1) -> dict:
    """The issue's ensemble: ``cells`` / 4 seeds × 2 integrators × 2 h, ≈ ``cell_ms`` ms per cell:
    T = 0.1 (the issue's 0.1 ms cells), else T = 2.5 × ``cell_ms`` (measured: ≈ 0.4 ms per unit of T
    beyond the cell's set-up)."""
    T = 0.1 if cell_ms <= 0.1 else round(2.5 * cell_ms, 6)
    return {
        "name": f"scale-{cells}-{cell_ms:g}ms".replace(".", "p"),
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": T,
        "dt_out": round(T / 10, 6),
        "params": {"N": 3, "ic": "random", "seed": list(range(max(1, cells // 4)))},
    }


def warmed_plan(cells: int, cell_ms: float = 0.1):
    """The plan of :func:`spec` (``cells``, ``cell_ms``) with its cells' kernels compiled or loaded."""
    from geosweep.sweeps.engine import warm_plan
    from geosweep.sweeps.plan import make_plan

    plan = make_plan(spec(cells, cell_ms))
    warm_plan(plan)
    return plan


def spec_toml(data: dict, path: Path) -> Path:
    p = data["params"]
    path.write_text(
        f'name = "{data["name"]}"\nsystem = "{data["system"]}"\nintegrators = {json.dumps(data["integrators"])}\n'
        f"h = {data['h']}\nT = {data['T']}\ndt_out = {data['dt_out']}\n[params]\nN = {p['N']}\n"
        f'ic = "{p["ic"]}"\nseed = {p["seed"]}\n'
    )
    return path


def peak_mb(who: int = resource.RUSAGE_SELF) -> float:
    return resource.getrusage(who).ru_maxrss / 1024


def objects(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file())


def kernel_loop(plan) -> float:
    """Seconds of the bare kernels over every cell of ``plan`` (request and options built outside)."""
    fam = plan.famdef
    jobs = []
    for cell in plan.grid.cells():
        request, options = plan.request(cell)
        jobs.append((plan.model(cell), plan.grid.coords(cell)["integrator"], request, options))
    t0 = time.perf_counter()
    for model, integrator, request, options in jobs:
        fam.start(model, integrator, request, options).advance()
    return time.perf_counter() - t0


def read_times(path: Path, repeats: int = 3) -> dict[str, float]:
    """Seconds (the least of ``repeats``) to read one variable, the whole store, and done_mask + the
    status table; dask chunks per variable along the seed axis."""
    import xarray as xr

    from geosweep.sweeps.store import StoreRef, done_mask
    from geosweep.sweeps.summary import status_table

    def status() -> None:
        done_mask(StoreRef.of(path))
        status_table(path)

    out: dict[str, float] = {}
    for key, fn in (
        ("one", lambda: xr.open_zarr(path)["max_rel_energy_error"].values),
        ("whole", lambda: xr.open_zarr(path).load()),
        ("status", status),
    ):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[key] = min(times)
    out["chunks"] = len(xr.open_zarr(path)["max_rel_energy_error"].data.chunks[2])
    return out


def synthetic_store(plan, path: Path) -> float:
    """Create the store of ``plan`` and fill every shard with copies of one computed cell; seconds."""
    import numpy as np

    from geosweep.sweeps.engine import compute_slice
    from geosweep.sweeps.store import ArrayCache, StoreRef, ensure_store, shard_region, sweep_shards, write_shard

    ref = StoreRef.of(path)
    t0 = time.perf_counter()
    ensure_store(plan, ref)
    (run,) = compute_slice(plan, [plan.grid.first_cell], ref)
    values, status, wall = run[6], run[1], run[2]
    group = ArrayCache(ref.open_group("r+"))
    shards = sweep_shards(group)
    shape = plan.grid.shape
    for index in np.ndindex(*[-(-n // s) for n, s in zip(shape, shards)]):
        region = shard_region(index, shards, shape)
        cells = [tuple(r.start + i for r, i in zip(region, c)) for c in np.ndindex(*[r.stop - r.start for r in region])]
        write_shard(group, {c: (values, status, wall) for c in cells})
    return time.perf_counter() - t0


# ---------------------------------------------------------------------------------------
# one measurement, in its own process
# ---------------------------------------------------------------------------------------
def measure(row: str, n: int, cell_ms: float, tmp: Path, repeats: int, off: tuple[str, ...] = ()) -> dict:
    """What one row measures (run inside a fresh process: ``--one``); ``off``: the micro-paths switched
    off (:class:`geosweep.sweeps.backends.paths.MicroPaths`; the ``run_sweep`` rows only)."""
    from geosweep.sweeps.backends.paths import MicroPaths
    from geosweep.sweeps.engine import run_sweep, warm_plan
    from geosweep.sweeps.execution import Execution
    from geosweep.sweeps.plan import make_plan

    out: dict = {"row": row, "cells": n, "cell_ms": cell_ms, "off": list(off)}
    paths = MicroPaths(**dict.fromkeys(off, False))
    if row == "cli":
        path = tmp / "cli.zarr"
        spec_file = spec_toml(spec(n, cell_ms), tmp / "spec.toml")
        exe = [sys.executable, "-m", "geosweep.flows.cli"]
        cmd = [*exe, "run", str(spec_file), "--store", str(path), "--no-prefect", "--workers", "2"]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        t0 = time.perf_counter()
        p = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=tmp)
        out["wall"] = time.perf_counter() - t0
        out["in_driver"] = "without Dask" in p.stderr
        out["peak_mb"] = peak_mb(resource.RUSAGE_CHILDREN)
    elif row == "driver":
        from geosweep.sweeps.estimate import estimate
        from geosweep.sweeps.store import StoreRef, done_mask, ensure_store
        from geosweep.sweeps.summary import status_table

        spec_file = spec_toml(spec(n, cell_ms), tmp / "spec.toml")
        t0 = time.perf_counter()
        plan = make_plan(str(spec_file))
        out["plan"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        estimate(plan, 2, prefect=False)
        out["estimate"] = time.perf_counter() - t0
        path = tmp / "driver.zarr"
        t0 = time.perf_counter()
        ensure_store(plan, StoreRef.of(path))
        out["create"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        done_mask(StoreRef.of(path))
        status_table(path)
        out["status"] = time.perf_counter() - t0
        out["wall"] = out["plan"] + out["estimate"] + out["create"]
        out["peak_mb"] = peak_mb()
        out["objects"] = objects(path)
        return out
    else:
        plan = make_plan(spec(n, cell_ms))
        if row == "synthetic":
            warm_plan(plan, [plan.grid.first_cell])
            path = tmp / "synthetic.zarr"
            out["wall"] = synthetic_store(plan, path)
        else:
            warm_plan(plan)
            preload()
            if row == "kernel":
                out["wall"] = kernel_loop(plan)
                out["peak_mb"] = peak_mb()
                return out
            client = None
            if row in ("workers", "procs"):
                from distributed import Client

                from geosweep.sweeps.engine import warm_part, warm_worker
                from geosweep.sweeps.execution import local_cluster

                processes = row == "procs"
                cluster = local_cluster(2, processes=processes, dashboard_address=None)  # geosweep's workers
                client = Client(cluster)
                if processes:  # the worker processes load their kernels before the clock starts
                    client.run(warm_worker, *warm_part(plan, list(plan.grid.cells())))
            path = tmp / f"{row}.zarr"
            t0 = time.perf_counter()
            lines: list[str] = []
            execution = Execution(serial=row == "serial", paths=paths)
            res = run_sweep(plan, path, client=client, log=lines.append, execution=execution)
            out["wall"] = time.perf_counter() - t0
            out["in_driver"] = any("without Dask" in line for line in lines)  # a few short cells (runs_in_driver)
            assert res.complete, res.errors
            if client is not None:
                client.close()
                cluster.close()
        out["peak_mb"] = peak_mb()
    out["objects"] = objects(path)
    out.update(read_times(path, repeats))
    return out


def preload() -> None:
    """Import what a run loads on first use (dask.array, zarr and its codecs, xarray's zarr backend:
    0.2–0.4 s once per process), before the clock of every row, as the kernels are compiled before it."""
    import dask.array  # noqa: F401
    import xarray.backends.zarr  # noqa: F401
    import zarr.codecs  # noqa: F401
    import zarr.errors  # noqa: F401


def run_one(row: str, n: int, cell_ms: float, repeats: int, off: tuple[str, ...] = ()) -> dict:
    """``measure`` in a fresh Python process (its peak memory is the row's alone)."""
    load = os.getloadavg()[0]  # the machine's load when the row starts (shared machines)
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, __file__, "--one", row, str(n), str(cell_ms), tmp, str(repeats), ",".join(off)]
        p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
        if p.returncode != 0:
            return {"row": row, "cells": n, "cell_ms": cell_ms, "error": p.stderr.strip().splitlines()[-1:]}
        return {**json.loads(p.stdout.strip().splitlines()[-1]), "load": load}


def fmt_row(r: dict, kernel: float | None) -> str:
    if "error" in r:
        return f"| {r['cells']} | {r['cell_ms']:g} | {r['row']} | failed: {r['error']} |"
    n, wall = r["cells"], r["wall"]
    over = f"{1e3 * (wall - kernel) / n:.2f}" if kernel is not None and r["row"] != "kernel" else "—"

    def g(key: str) -> str:
        return f"{r[key]:.2f}" if key in r else "—"

    extra = ""
    if r.get("in_driver"):
        extra = " (in the driver)"
    if r["row"] == "driver":
        extra = f" (plan {r['plan']:.1f} s, estimate {r['estimate']:.1f} s, store {r['create']:.1f} s)"
    return (
        f"| {n} | {r['cell_ms']:g} | {r['row']}{extra} | {wall:.2f} | {n / wall:.0f} | {over} | "
        f"{r.get('peak_mb', 0):.0f} | {r.get('objects', '—')} | {r.get('chunks', '—')} | {g('one')} | "
        f"{g('whole')} | {g('status')} | {r.get('load', 0):.1f} |"
    )


def figure(results: list[dict], path: str) -> None:
    """Log–log: wall seconds against cells, one panel per cell cost, one colour per row (the same in
    every panel; a hollow marker: the run went in the driver, without Dask); the driver and synthetic
    rows (no cells computed) as points in the first panel."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    costs = sorted({r["cell_ms"] for r in results if "wall" in r and r["row"] not in ("driver", "synthetic")}) or [0.1]
    fig, axes = plt.subplots(1, len(costs), figsize=(5.2 * len(costs), 4.5), squeeze=False, sharey=True)
    colours = dict(zip((*ROWS, "driver", "synthetic"), plt.get_cmap("tab10").colors))
    for ax, ms in zip(axes[0], costs):
        series: dict[str, list[tuple[int, float, bool]]] = {}
        for r in results:
            if "wall" in r and (r["cell_ms"] == ms or (r["row"] in ("driver", "synthetic") and ms == costs[0])):
                series.setdefault(r["row"], []).append((r["cells"], r["wall"], bool(r.get("in_driver"))))
        for row, pts in series.items():
            pts.sort()
            label = "driver: plan + estimate + create" if row == "driver" else row
            ax.loglog([p[0] for p in pts], [p[1] for p in pts], marker="o", color=colours.get(row), label=label)
            hollow = [p for p in pts if p[2]]
            if hollow:
                ax.loglog([p[0] for p in hollow], [p[1] for p in hollow], "o", color=colours.get(row), mfc="white")
        if any(r.get("in_driver") for r in results if r.get("cell_ms") == ms):
            ax.plot([], [], "o", color="grey", mfc="white", label="hollow: in the driver, no Dask")
        ax.set_title(f"{ms:g} ms cells")
        ax.set_xlabel("cells")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("wall time (s)")
    fig.suptitle("geosweep: cost against the number of cells (bench_scale.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"figure: {path}")


def compare_paths(args) -> None:
    """Every (cell cost, size, row) with every micro-path on and with each of ``args.compare_paths`` off
    (all of them if none is named), in fresh processes, alternating on, off₁, off₂, … for
    ``args.rounds`` rounds, so that the machine's drift affects each alike. Prints the median wall
    of each and the ratio of each path off to on (> 1: the path gains)."""
    import statistics

    names = tuple(args.compare_paths or PATHS)
    cells = args.cells or [100, 1000]
    rows = [r for r in args.rows if r in ("serial", "workers", "procs")]
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}, {args.rounds} rounds")  # fmt: skip
    print("| cells | cell ms | run | all on: wall s | " + " | ".join(f"{p} off" for p in names) + " |")
    print("|---|---|---|---|" + "---|" * len(names))
    for ms in args.cell_ms or [0.1]:
        for n in cells:
            for row in rows:
                walls: dict[tuple[str, ...], list[float]] = {(): [], **{(p,): [] for p in names}}
                for _ in range(args.rounds):
                    for off in walls:
                        r = run_one(row, n, ms, 1, off)
                        walls[off].append(r.get("wall", float("nan")))
                on = statistics.median(walls[()])
                offs = [statistics.median(walls[(p,)]) for p in names]
                cols = " | ".join(f"{w:.3g} ({w / on:.2f})" for w in offs)
                print(f"| {n} | {ms:g} | {row} | {on:.3g} | {cols} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.1f}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--one":
        row, n, ms, tmp, repeats, off = sys.argv[2:8]
        print(json.dumps(measure(row, int(n), float(ms), Path(tmp), int(repeats), tuple(filter(None, off.split(","))))))
        return
    ap = argparse.ArgumentParser(description="cost against the number of cells: kernels, run_sweep, CLI, driver")
    ap.add_argument("--cells", type=int, nargs="*", default=None, help="sizes (default 100 1000 10000 100000)")
    ap.add_argument("--cell-ms", type=float, nargs="*", default=None, help="cell costs in ms (default 0.1 10)")
    ap.add_argument("--rows", nargs="*", choices=ROWS, default=list(ROWS))
    ap.add_argument("--driver", type=int, nargs="*", default=[], help="driver-only sizes (e.g. 1000000)")
    ap.add_argument("--synthetic", type=int, nargs="*", default=[], help="synthetic store sizes (e.g. 100000)")
    ap.add_argument("--quick", action="store_true", help="sizes 100 1000, 0.1 ms cells, one read each")
    ap.add_argument("--no-workers", action="store_true", help="skip the 2-worker rows (as --rows without them)")
    ap.add_argument("--figure", default=str(ROOT / "benchmarks" / "scale_cost.png"), help="'' for none")
    ap.add_argument("--max-work", type=float, default=None, help="skip sizes of more kernel seconds (cells × ms)")
    ap.add_argument("--json", default="", help="also write the results to this JSON file")
    ap.add_argument("--from-json", nargs="*", default=[], help="no runs: the figure from these result files")
    ap.add_argument("--off", nargs="*", default=[], choices=PATHS, help="micro-paths switched off in every row")
    ap.add_argument("--compare-paths", nargs="*", choices=PATHS, default=None,
                    help="rows with every micro-path on and each of these off, alternating")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=5, help="rounds of --compare-paths")
    args = ap.parse_args()
    if args.compare_paths is not None:
        compare_paths(args)
        return
    if args.from_json:
        figure([r for f in args.from_json for r in json.loads(Path(f).read_text())], args.figure)
        return
    cells = args.cells or ([100, 1000] if args.quick else [100, 1000, 10000, 100000])
    costs = args.cell_ms or ([0.1] if args.quick else [0.1, 10.0])
    rows = [r for r in args.rows if not (args.no_workers and r in ("workers", "procs"))]
    repeats = 1 if args.quick else 3
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print(
        "| cells | cell ms | run | wall s | cells/s | overhead ms/cell | peak MB | objects | dask chunks/var | "
        "read 1 var s | load() s | done_mask+status s | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    results = []
    for ms in costs:
        for n in cells:
            if args.max_work is not None and n * ms / 1e3 > args.max_work:
                print(f"| {n} | {ms:g} | skipped: {n * ms / 1e3:.0f} s of kernel work > --max-work |", flush=True)
                continue
            kernel = None
            for row in rows:
                r = run_one(row, n, ms, repeats, tuple(args.off))
                kernel = r.get("wall") if row == "kernel" else kernel
                results.append(r)
                print(fmt_row(r, kernel), flush=True)
    for n in args.driver:
        r = run_one("driver", n, 0.1, repeats)
        results.append(r)
        print(fmt_row(r, None), flush=True)
    for n in args.synthetic:
        r = run_one("synthetic", n, 0.1, repeats)
        results.append(r)
        print(fmt_row(r, None), flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(results))
    if args.figure:
        figure(results, args.figure)


if __name__ == "__main__":
    main()
