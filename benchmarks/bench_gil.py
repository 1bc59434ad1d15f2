"""Why two threads in one process cannot run sub-millisecond cells side by side (issue 21).

Run: ``python benchmarks/bench_gil.py [--cells 10000] [--rounds 2]``. The cells of issue 21's ensemble
(``bench_scale.spec``: 3-link chains, 0.1 ms cells), no Dask and no store:

* **one thread against two**: the same cells run by one Python thread, then split between two
  plain ``threading.Thread`` s, for (a) the bare kernel loop ``start(...).advance()`` and (b)
  ``compute_slice`` (what a slice task runs: set-up, kernels, collecting values); ratio > 1 means
  two threads are faster;
* **where a cell's time goes**: microseconds per cell of each step of ``compute_cell`` on its own
  (request, model, ``start``, ``advance``, ``collect``, ``segment_time``, the final carry), and the
  time inside ``advance``'s compiled call as ``Trajectory.wall_time`` measures it.

Everything but the compiled call holds the GIL; the compiled call releases it. This is the path of cells
computed one by one (``compute_slice(together=False)``); a sweep computes such cells together
(``geosweep.sweeps.together``, measured by ``bench_batch.py``).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
warnings.filterwarnings("ignore")


def one_and_two_threads(fn, cells: list) -> tuple[float, float]:
    """Seconds of ``fn(cells)`` on one thread, and of ``fn`` on each half of ``cells`` on two threads."""
    t0 = time.perf_counter()
    fn(cells)
    one = time.perf_counter() - t0
    threads = [threading.Thread(target=fn, args=(cells[i::2],)) for i in range(2)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return one, time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    from bench_scale import preload, warmed_plan

    from geosweep.sweeps.engine import compute_slice, segment_time
    from geosweep.sweeps.store import StoreRef

    plan = warmed_plan(args.cells)
    preload()
    cells = list(plan.grid.cells())
    fam = plan.famdef
    ref = StoreRef.of(tempfile.mkdtemp() + "/unused.zarr")  # fresh=True: never touched

    def kernel_loop(cs: list) -> None:
        for c in cs:
            request, options = plan.request(c)
            fam.start(plan.model(c), plan.grid.coords(c)["integrator"], request, options).advance()

    def slice_task(cs: list) -> None:
        compute_slice(plan, cs, ref, fresh=True)

    print(f"{len(cells)} cells of ~0.1 ms; one thread against two (plain threads, no Dask)\n")
    print("| what | round | 1 thread s | 2 threads s | 1 / 2 |")
    print("|---|---|---|---|---|")
    for name, fn in (("bare kernel loop", kernel_loop), ("compute_slice", slice_task)):
        for r in range(args.rounds):
            one, two = one_and_two_threads(fn, cells)
            print(f"| {name} | {r + 1} | {one:.2f} | {two:.2f} | {one / two:.2f} |")

    parts: dict[str, float] = {}

    def timed(name: str, fn):
        t0 = time.perf_counter()
        out = fn()
        parts[name] = (time.perf_counter() - t0) / len(cells) * 1e6
        return out

    reqs = timed("request", lambda: [plan.request(c) for c in cells])
    models = timed("model", lambda: [plan.model(c) for c in cells])
    ints = [plan.grid.coords(c)["integrator"] for c in cells]
    trajs = timed("start", lambda: [fam.start(m, i, r[0], r[1]) for m, i, r in zip(models, ints, reqs)])
    timed("advance", lambda: [t.advance() for t in trajs])
    timed("collect", lambda: [fam.collect(m, i, t, r[1]) for m, i, t, r in zip(models, ints, trajs, reqs)])
    timed("segment_time", lambda: [segment_time(plan, c) for c in cells])
    timed("final carry", lambda: [t.checkpoint() for t in trajs])
    inside = sum(t.wall_time for t in trajs) / len(cells) * 1e6
    print("\nµs per cell (one thread):\n")
    print("| " + " | ".join(parts) + " | inside advance's compiled call |")
    print("|" + "---|" * (len(parts) + 1))
    print("| " + " | ".join(f"{v:.1f}" for v in parts.values()) + f" | {inside:.1f} |")


if __name__ == "__main__":
    main()
