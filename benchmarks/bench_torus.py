"""Single-core cost of the torus kernel: µs per step of map (25) for N_p = 80 … 640.

Run: ``python benchmarks/bench_torus.py [--steps N] [--repeat R]``. The step size scales
like 1/N_p (stability, spec §7) and every run starts 0.05 from the wall so that the timed
interval includes the impact (active contacts). Contacts: all pairs for N_p ≤ 256, Verlet
list above (also timed with all pairs for comparison). Target: ≤ 40 µs/step at N_p = 80.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from geosweep.kernels.torus.integrate import _integrate  # noqa: E402
from geosweep.kernels.torus.model import torus  # noqa: E402


def bench(N_p: int, steps: int, repeat: int, neighbour_list: str = "auto") -> tuple[float, int]:
    """Best-of-``repeat`` µs/step and the number of neighbour-list builds."""
    model = torus(N_p=N_p, g0=0.05, tilt=0.3, neighbour_list=neighbour_list)
    h = 1e-3 * 80 / N_p
    _integrate(model, "v2_newmark", h, 10, 10)  # compile / load cache
    best = float("inf")
    rebuilds = 0
    for _ in range(repeat):
        t0 = time.perf_counter()
        tr = _integrate(model, "v2_newmark", h, steps, 100)
        best = min(best, time.perf_counter() - t0)
        rebuilds = tr.info["nbl_rebuilds"]
        assert tr.info["status"] == 0, tr.info
    return 1e6 * best / steps, rebuilds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'N_p':>5} {'contacts':>10} {'us/step':>9} {'rebuilds':>9}")
    for N_p in (80, 160, 320, 640):
        us, nb = bench(N_p, args.steps, args.repeat)
        kind = "verlet" if N_p > 256 else "all-pairs"
        print(f"{N_p:5d} {kind:>10} {us:9.2f} {nb:9d}")
        if N_p > 256:
            us_ap, _ = bench(N_p, args.steps, 1, "off")
            print(f"{N_p:5d} {'all-pairs':>10} {us_ap:9.2f} {'-':>9}")


if __name__ == "__main__":
    main()
