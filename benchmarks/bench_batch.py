"""A slice's short cells computed together against one by one (issue 21, ``geosweep.sweeps.together``).

Run: ``python benchmarks/bench_batch.py [--cells 4000] [--slices 8]``. The cells of issue 21's ensemble
(``bench_scale.spec``: 3-link chains, ``rkmk4`` and ``cf4``, 0.1 ms cells), no Dask and no store:

* **steps**: per cell, ``start`` + ``advance`` + ``collect`` one by one against the family's
  ``start_many`` (one stack per method), one ``Stack.advance`` call and ``collect_many``;
* **threads**: compute only, ``compute_slice`` of the cells in ``--slices`` slices on a pool of 1 and of
  2 threads, one by one (``together=False``) and together (``together=True``).

Every value computed together is compared bitwise with the cell's own (the script stops on a difference).
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
warnings.filterwarnings("ignore")

from geosweep.sweeps.engine import compute_slice  # noqa: E402
from geosweep.sweeps.gc_policy import fewer_collections  # noqa: E402
from geosweep.sweeps.store import StoreRef  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=4000)
    ap.add_argument("--slices", type=int, default=8)
    args = ap.parse_args()
    from bench_scale import warmed_plan  # benchmarks/ is on the path from here on

    plan = warmed_plan(args.cells)
    fam, cells = plan.famdef, list(plan.grid.cells())
    ref = StoreRef.of(str(Path("/nonexistent") / "unused.zarr"))  # compute_slice(fresh=True) never opens it
    names = plan.grid.axes[0].values
    methods: dict[tuple, list] = {}
    for cell in cells:
        methods.setdefault(cell[: plan.grid.n_method_axes], []).append(cell)

    def alone() -> list[dict]:
        out = []
        for cell in cells:
            request, options = plan.request(cell)
            model, integrator = plan.model(cell), names[cell[0]]
            traj = fam.start(model, integrator, request, options)
            traj.advance()
            out.append(fam.collect(model, integrator, traj, options).values)
        return out

    def together() -> dict:
        values = {}
        for key, members in methods.items():
            request, options = plan.request(members[0])
            models = [plan.model(c) for c in members]
            for stack in fam.start_many(models, names[key[0]], request, options):
                stack.advance()
                stacked = fam.collect_many([models[i] for i in stack.index], names[key[0]], stack, options)
                for row, i in enumerate(stack.index):
                    values[members[i]] = {n: v[row] for n, v in stacked.items()}
        return values

    together()  # loads the compiled call
    with fewer_collections():
        t0 = time.perf_counter()
        own = alone()
        t_alone = time.perf_counter() - t0
        t0 = time.perf_counter()
        joint = together()
        t_together = time.perf_counter() - t0
    for cell, values in zip(cells, own):
        for name, x in values.items():
            a, b = np.asarray(x), np.asarray(joint[cell][name])
            if a.dtype != b.dtype or a.tobytes() != b.tobytes():
                raise AssertionError(f"{cell}: {name} differs")

    n = len(cells)
    print(f"{n} cells of issue 21's ensemble; every value computed together bitwise the cell's own\n")
    print("| start, advance, collect | µs per cell |\n|---|---|")
    print(f"| one by one | {t_alone / n * 1e6:.1f} |\n| together | {t_together / n * 1e6:.1f} |")

    slices = [cells[i :: args.slices] for i in range(args.slices)]
    print("\n| `compute_slice` (compute only) | 1 thread, µs per cell | 2 threads / 1 thread |\n|---|---|---|")
    for label, joined in (("one by one", False), ("together", True)):
        best = {1: np.inf, 2: np.inf}
        with fewer_collections():
            for threads in (1, 2, 1, 2):
                t0 = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(partial(compute_slice, plan, ref=ref, fresh=True, together=joined), slices))
                best[threads] = min(best[threads], time.perf_counter() - t0)
        print(f"| {label} | {best[1] / n * 1e6:.0f} | {best[1] / best[2]:.2f}× |")


if __name__ == "__main__":
    main()
