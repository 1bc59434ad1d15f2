"""Reading back and analysing a large store: seconds per call at a given number of cells.

Run: ``python benchmarks/bench_readback.py --cells 100000 [--store DIR] [--build] [--profile NAME]``.
The store is the issue 21 ensemble of ``benchmarks/bench_scale.py`` (``pendulum_chain`` N = 3,
``ic = "random"``, ``cells``/4 seeds × 2 integrators × 2 h, T = 0.1), computed for real with
``run_sweep(serial=True)`` (``--build``, about 1 ms per cell) into ``--store`` (default
``/tmp/geosweep-readback-<cells>.zarr``), so that classify/order see real values. Then each call
is timed once on a fresh ``xr.open_zarr`` (calls that are lazy today are computed):
``open_zarr(s).load()``, ``ok()``, ``classify()``, ``order()``, ``work_precision()``,
``geosweep report`` (``geosweep.analysis.report.write_report``) and ``geosweep verify``
(``geosweep.sweeps.store.verify``). ``--profile NAME`` runs one call under cProfile and prints the top.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

import xarray as xr  # noqa: E402

import geosweep  # noqa: E402, F401  (registers ds.geosweep)


def spec(cells: int) -> dict:
    """The issue's ensemble: ``cells`` / 4 seeds × 2 integrators × 2 h (as in bench_scale.py)."""
    return {
        "name": f"scale-{cells}",
        "system": "pendulum_chain",
        "integrators": ["rkmk4", "cf4"],
        "h": [0.01, 0.005],
        "T": 0.1,
        "dt_out": 0.01,
        "params": {"N": 3, "ic": "random", "seed": list(range(max(1, cells // 4)))},
    }


def build(cells: int, path: Path) -> float:
    """Compute the store for real (serial, in-process); seconds."""
    from geosweep.sweeps.engine import run_sweep

    t0 = time.perf_counter()
    res = run_sweep(spec(cells), path, serial=True)
    assert res.complete, res.errors
    return time.perf_counter() - t0


def calls(path: Path, out: Path) -> dict:
    """Name → zero-argument callable doing that read/analysis on a fresh ``open_zarr``."""
    from geosweep.analysis.report import write_report
    from geosweep.sweeps.store import StoreRef, verify

    def ds():
        return xr.open_zarr(path)

    return {
        "load": lambda: ds().load(),
        "ok": lambda: ds().geosweep.ok().compute(),
        "classify": lambda: ds().geosweep.classify().compute(),
        "order": lambda: ds().geosweep.order().compute(),
        "work_precision": lambda: ds().geosweep.work_precision(),
        "report": lambda: write_report(path, out / "report"),
        "verify": lambda: verify(StoreRef.of(path)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description="read-back and analysis times of a large store")
    ap.add_argument("--cells", type=int, default=100000)
    ap.add_argument("--store", type=Path, default=None)
    ap.add_argument("--build", action="store_true", help="compute the store first (if absent)")
    ap.add_argument("--only", nargs="*", default=None, help="time only these calls")
    ap.add_argument("--profile", default=None, help="cProfile one call and print the top 30")
    args = ap.parse_args()
    path = args.store or Path(f"/tmp/geosweep-readback-{args.cells}.zarr")
    if args.build and not path.exists():
        print(f"built {path} in {build(args.cells, path):.1f} s", flush=True)
    print(f"load average before: {os.getloadavg()[0]:.2f}; store {path}")
    with tempfile.TemporaryDirectory() as tmp:
        table = calls(path, Path(tmp))
        if args.profile:
            prof = cProfile.Profile()
            prof.enable()
            table[args.profile]()
            prof.disable()
            pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
            return
        print("| cells | call | s |\n|---|---|---|")
        for name, fn in table.items():
            if args.only and name not in args.only:
                continue
            t0 = time.perf_counter()
            fn()
            print(f"| {args.cells} | {name} | {time.perf_counter() - t0:.2f} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
