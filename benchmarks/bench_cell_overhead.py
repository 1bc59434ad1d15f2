"""Per-cell overhead on the worker (issue 21 item 2): ``run_sweep`` against the bare kernel loop.

Run: ``python benchmarks/bench_cell_overhead.py [--cells 2000] [--long-cells 400] [--repeats 3]
[--no-workers] [--threads]``.

Two sweeps of ``pendulum_chain`` N = 3, ``ic = "random"``, seeds × 2 integrators × 2 h
(:func:`spec`): *short* cells (T = 0.1, about 0.1 ms each) and *long* cells (T = 20, about
10 ms each). For each, repeated ``repeats`` times in alternation (the machine may be busy, so
the ratios of neighbouring runs are what counts; medians printed):

* ``bare``: ``FAMILIES[...].start(model, integrator, request, options).advance()`` over every
  cell (models, requests built beforehand; no store) — as ``benchmarks/bench_scale.py``;
* ``serial``: ``run_sweep(serial=True)`` into a fresh store;
* ``2 workers``: ``run_sweep(client=…)`` on a ``LocalCluster`` of 2 geosweep workers
  (:data:`geosweep.sweeps.engine.LOCAL_WORKER`, worker processes; ``--threads`` for threads) made
  once beforehand, so its start-up is not counted.

Wall times are whole ``run_sweep`` calls into fresh stores (store creation included).

Printed: cells/s of each, serial / bare (target ≥ 0.25 for short cells) and 2 workers / serial
(targets ≥ 1 for short cells, ≥ 1.8 for long ones).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

from geosweep.sweeps.engine import run_sweep, warm_plan  # noqa: E402
from geosweep.sweeps.plan import make_plan  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_scale import kernel_loop as bare  # noqa: E402  (the same bare loop as bench_scale.py)


def spec(cells: int, T: float) -> dict:
    """``cells`` / 4 seeds × 2 integrators × 2 h of the N = 3 chain, integrated to ``T``."""
    return {
        "name": f"overhead-{cells}-{T:g}",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": T,
        "dt_out": 0.01 if T <= 1 else 0.1,
        "params": {"N": 3, "ic": "random", "seed": list(range(max(1, cells // 4)))},
    }


def sweep(plan, path: Path, **kw) -> float:
    """Wall seconds of one ``run_sweep`` into a fresh store (store creation included)."""
    t0 = time.perf_counter()
    res = run_sweep(plan, path, **kw)
    assert res.complete, res.errors
    return time.perf_counter() - t0


def measure(plan, repeats: int, client, tmp: str) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"bare": [], "serial": [], "workers": []}
    for r in range(repeats):
        times["bare"].append(bare(plan))
        times["serial"].append(sweep(plan, Path(tmp) / f"s-{plan.spec.name}-{r}.zarr", serial=True))
        if client is not None:
            times["workers"].append(sweep(plan, Path(tmp) / f"w-{plan.spec.name}-{r}.zarr", client=client))
    return times


def local_client(processes: bool):
    """A client of 2 local geosweep workers (:data:`geosweep.sweeps.engine.LOCAL_WORKER`), made once."""
    from distributed import Client, LocalCluster

    from geosweep.sweeps.engine import LOCAL_WORKER

    cluster = LocalCluster(n_workers=2, processes=processes, dashboard_address=None, **LOCAL_WORKER)
    return Client(cluster)


def main() -> None:
    ap = argparse.ArgumentParser(description="per-cell overhead of run_sweep vs the bare kernel loop")
    ap.add_argument("--cells", type=int, default=2000, help="short (0.1 ms) cells")
    ap.add_argument("--long-cells", type=int, default=400, help="long (~10 ms) cells; 0 skips them")
    ap.add_argument("--long-T", type=float, default=20.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-workers", action="store_true")
    ap.add_argument("--threads", action="store_true", help="a threads LocalCluster instead of processes")
    args = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    cases = [("short", args.cells, 0.1)] + ([("long", args.long_cells, args.long_T)] if args.long_cells else [])
    client = None if args.no_workers else local_client(not args.threads)
    with tempfile.TemporaryDirectory() as tmp:
        for label, n, T in cases:
            plan = make_plan(spec(n, T))
            warm_plan(plan)
            t = measure(plan, args.repeats, client, tmp)
            med = {k: statistics.median(v) for k, v in t.items() if v}
            cells = plan.grid.size
            line = f"{label}: {cells} cells, {1e3 * med['bare'] / cells:.3f} ms/cell bare; cells/s " + ", ".join(
                f"{k} {cells / v:.0f}" for k, v in med.items()
            )
            print(line)
            ratios = [s / b for s, b in zip(t["serial"], t["bare"])]
            print(f"  serial/bare rate: {statistics.median([1 / x for x in ratios]):.3f} (runs: "
                  + ", ".join(f"{1 / x:.3f}" for x in ratios) + ")")  # fmt: skip
            if t["workers"]:
                wr = [s / w for s, w in zip(t["serial"], t["workers"])]
                print(f"  2 workers/serial rate: {statistics.median(wr):.3f} (runs: "
                      + ", ".join(f"{x:.3f}" for x in wr) + ")")  # fmt: skip
            sys.stdout.flush()
    if client is not None:
        client.close()
        client.cluster.close()
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
