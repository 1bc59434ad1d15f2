"""A long sphere-MD cell end to end through the service, against the bare kernel (issue: long time).

Run: ``python benchmarks/bench_long_cell.py [--steps N] [--segment-seconds S]``. One core
(``NUMBA_NUM_THREADS=1``), ``lj_sphere`` (n = 642), explicit VI, h = 0.005, samples every 200
steps. Rows, measured one after the other in this process:

* ``kernel``: ``geosweep.kernels.s2.integrate`` alone (steps/s of the bare driver);
* ``service, one segment``: ``run_sweep(serial=True)`` into a fresh local zarr store with
  ``checkpoint_every = T`` (store template, planning, warm-up and the cell write included);
* ``service, default checkpoint interval``: the same with no ``checkpoint_every`` (the engine's
  default: a checkpoint about every two minutes of estimated work);
* ``service, checkpointed``: with ``--segment-seconds S``, a checkpoint about every ``S``
  seconds of measured work.

Wall and CPU time (``time.process_time``, this process: the serial service runs here) are
both reported; on a shared machine the CPU ratio is the robust one.

Targets (issue): the service at ≥ 95 % of the kernel's steps/s for a 10⁶-step cell, and the
checkpoint overhead ≤ 2 % at the default interval (about two minutes of work per segment).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

from geosweep.kernels.s2.integrate import _integrate  # noqa: E402
from geosweep.kernels.systems.lj_sphere import lj_sphere  # noqa: E402
from geosweep.sweeps.engine import run_sweep  # noqa: E402

H = 0.005
DT_OUT = 1.0


def spec(T: float, checkpoint_every: float | None) -> dict:
    out = {
        "name": "bench-long",
        "system": "lj_sphere",
        "integrators": ["explicit_vi"],
        "h": [H],
        "T": T,
        "dt_out": DT_OUT,
    }
    if checkpoint_every is not None:
        out["checkpoint_every"] = checkpoint_every
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=1_000_000)
    ap.add_argument("--segment-seconds", type=float, default=120.0)
    ap.add_argument("--default-only", action="store_true", help="only the kernel and the default-interval rows")
    args = ap.parse_args()
    T = args.steps * H
    model = lj_sphere()
    _integrate(model, "explicit_vi", H, 200, 200)  # compile / load the cache
    c0, t0 = time.process_time(), time.perf_counter()
    tr = _integrate(model, "explicit_vi", H, args.steps, int(DT_OUT / H))
    kernel, kernel_cpu = time.perf_counter() - t0, time.process_time() - c0
    assert tr.info["status"] == 0, tr.info
    rate = args.steps / kernel
    seg_time = max(DT_OUT, round(args.segment_seconds * rate * H / DT_OUT) * DT_OUT)
    rows = [("kernel", kernel, kernel_cpu, 0)]
    runs = [("service, one segment", T), ("service, default checkpoint interval", None)]
    if args.default_only:
        runs = runs[1:]
    if args.segment_seconds != 120.0:
        runs.append((f"service, checkpoint every {seg_time:g} (time)", seg_time))
    for label, ce in runs:
        with tempfile.TemporaryDirectory() as tmp:
            c0, t0 = time.process_time(), time.perf_counter()
            res = run_sweep(spec(T, ce), os.path.join(tmp, "s.zarr"), serial=True)
            rows.append((label, time.perf_counter() - t0, time.process_time() - c0, res.segments))
            assert res.complete
    print(f"# {args.steps} steps, lj_sphere n = 642, explicit VI, one core")
    head = f"{'wall s':>9} {'steps/s':>9} {'vs kernel':>9} {'CPU s':>9} {'vs kernel (CPU)':>15} {'segments':>8}"
    print(f"{'run':44} {head}")
    for label, wall, cpu, segs in rows:
        print(
            f"{label:44} {wall:9.1f} {args.steps / wall:9.0f} {kernel / wall:9.3f} {cpu:9.1f} "
            f"{kernel_cpu / cpu:15.3f} {segs:8d}"
        )


if __name__ == "__main__":
    main()
