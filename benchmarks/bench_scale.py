"""Cost of many cheap cells: bare kernels, ``run_sweep`` serial and on 2 workers, reading back.

Run: ``python benchmarks/bench_scale.py [--cells 100 1000 10000] [--synthetic 100000] [--no-workers]``.
The sweep of issue 21: ``pendulum_chain`` N = 3, ``ic = "random"``, ``seed`` = 0 … n/4 − 1,
2 integrators × 2 step sizes, T = 0.1 (about 0.1 ms per cell). Rows per size:

* ``kernel``: the bare loop ``FAMILIES[...].start(model, integrator, request, options).advance()``
  over every cell (models built beforehand), no store;
* ``serial``: ``run_sweep(serial=True)`` into a fresh store; ``2 workers``: a ``LocalCluster``
  of 2 workers (threads) made beforehand, so its start-up is not counted;
* ``synthetic`` (``--synthetic N``): a store of N cells made without computing them: the template,
  then every shard filled with one computed cell's values through the store's own write path
  (:func:`sweeps.store.write_shard`) — for read-back times of stores too large to compute here.

Columns: wall s, cells/s, overhead per cell (wall − kernel loop, per cell), store objects (files),
dask chunks per variable, read-back of one variable (``ds.max_rel_energy_error.values``) and of the
whole store (``xr.open_zarr(store).load()``), and ``done_mask`` + ``geosweep status`` table time
(read times: the least of 3).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402
import xarray as xr  # noqa: E402

from sweeps import store as store_mod  # noqa: E402
from sweeps.engine import run_sweep, warm_plan  # noqa: E402
from sweeps.plan import make_plan  # noqa: E402


def spec(cells: int) -> dict:
    """The issue's ensemble: ``cells`` / 4 seeds × 2 integrators × 2 h."""
    return {
        "name": f"scale-{cells}",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": 0.1,
        "dt_out": 0.01,
        "params": {"N": 3, "ic": "random", "seed": list(range(max(1, cells // 4)))},
    }


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


def objects(path: Path) -> int:
    return sum(1 for p in path.rglob("*") if p.is_file())


def read_times(path: Path, repeats: int = 3) -> dict[str, float]:
    """Seconds (the least of ``repeats``) to read one variable, the whole store, and done_mask + the
    status table."""
    from sweeps.store import StoreRef, done_mask
    from sweeps.summary import status_table

    def one() -> None:
        _ = xr.open_zarr(path)["max_rel_energy_error"].values

    def status() -> None:
        done_mask(StoreRef.of(path))
        status_table(path)

    out = {}
    for key, fn in (("one", one), ("whole", lambda: xr.open_zarr(path).load()), ("status", status)):
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        out[key] = min(times)
    out["chunks"] = len(xr.open_zarr(path)["max_rel_energy_error"].data.chunks[2])  # along the seed axis
    return out


def synthetic_store(plan, path: Path) -> float:
    """Create the store of ``plan`` and fill every shard with copies of one computed cell; seconds."""
    from sweeps.engine import compute_slice
    from sweeps.store import ArrayCache, StoreRef, ensure_store, group_by_shard, shard_region, sweep_shards, write_shard

    ref = StoreRef.of(path)
    t0 = time.perf_counter()
    ensure_store(plan, ref)
    first = plan.grid.cells()[0]
    (run,) = compute_slice(plan, [first], ref)
    values, status, wall = run[6], run[1], run[2]
    group = ArrayCache(ref.open_group("r+"))
    shards = sweep_shards(group)
    shape = plan.grid.shape
    n_shards = [-(-n // s) for n, s in zip(shape, shards)]
    for index in np.ndindex(*n_shards):
        region = shard_region(index, shards, shape)
        cells = [tuple(r.start + i for r, i in zip(region, c)) for c in np.ndindex(*[r.stop - r.start for r in region])]
        write_shard(group, {c: (values, status, wall) for c in cells})
    assert len(group_by_shard(list(plan.grid.cells()), shards)) == int(np.prod(n_shards))
    return time.perf_counter() - t0


def row(label: str, n: int, wall: float, kernel: float, path: Path | None) -> str:
    r = read_times(path) if path is not None else {}
    obj = objects(path) if path is not None else 0
    fmt = (lambda k: f"{r[k]:.2f}") if r else (lambda k: "—")
    return (
        f"| {n} | {label} | {wall:.2f} | {n / wall:.0f} | {1e3 * (wall - kernel) / n:.2f} | {obj or '—'} | "
        f"{r.get('chunks', '—')} | {fmt('one')} | {fmt('whole')} | {fmt('status')} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description="many cheap cells: kernels, run_sweep, read-back")
    ap.add_argument("--cells", type=int, nargs="*", default=[100, 1000, 10000])
    ap.add_argument("--synthetic", type=int, nargs="*", default=[])
    ap.add_argument("--no-workers", action="store_true", help="skip the 2-worker row")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}; shard shape rule: sweeps.store.shard_shape")
    print(
        "| cells | run | wall s | cells/s | overhead ms/cell | objects | dask chunks/var | "
        "read 1 var s | load() s | done_mask+status s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    client = None
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.cells:
            plan = make_plan(spec(n))
            warm_plan(plan)
            kernel = kernel_loop(plan)
            print(row("kernel", n, kernel, kernel, None), flush=True)
            path = Path(tmp) / f"serial-{n}.zarr"
            t0 = time.perf_counter()
            res = run_sweep(plan, path, serial=True)
            wall = time.perf_counter() - t0
            assert res.complete, res.errors
            print(row("serial", n, wall, kernel, path), flush=True)
            if not args.no_workers:
                if client is None:
                    from distributed import Client, LocalCluster

                    from sweeps.engine import LOCAL_WORKER

                    cluster = LocalCluster(n_workers=2, processes=False, dashboard_address=None, **LOCAL_WORKER)
                    client = Client(cluster)
                path = Path(tmp) / f"dask-{n}.zarr"
                t0 = time.perf_counter()
                res = run_sweep(plan, path, client=client)
                wall = time.perf_counter() - t0
                assert res.complete, res.errors
                print(row("2 workers", n, wall, kernel, path), flush=True)
        for n in args.synthetic:
            plan = make_plan(spec(n))
            warm_plan(plan, plan.grid.cells()[:1])
            path = Path(tmp) / f"synthetic-{n}.zarr"
            wall = synthetic_store(plan, path)
            print(row(f"synthetic ({'×'.join(map(str, store_mod.shard_shape(plan)))})", n, wall, 0.0, path), flush=True)
    if client is not None:
        client.close()
        cluster.close()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
