"""Per-step cost of the three families on the shared driver, side by side with another revision.

Run: ``python benchmarks/bench_contract.py [--baseline REV] [--rounds R]``. Each case runs in a
fresh single-threaded subprocess with ``PYTHONPATH`` set to a checkout — this working tree and
``REV`` (checked out into a temporary git worktree) — alternating A B A B … so that machine
drift affects both alike; the table gives the median over rounds of each subprocess's best of
three and the ratio new/baseline. Cases (the kernel-level ``integrate`` APIs, unchanged by the
family contract):

* ``sphere``: explicit VI on ``lj_sphere`` (n = 642), ms/step;
* ``torus``: map (25) on the torus (N_p = 80, 0.05 from the wall, impact inside), µs/step;
* ``rkmk4``: RKMK4 on the 20-link chain, µs/step;
* ``rkmk45``: adaptive RKMK(5,4) on the 20-link chain (tol 1e-8), µs per accepted step;
* ``rkmk853``: the peers' chain case (``benchmarks/peers``: adaptive order 8 to T = 3, tol 1e-10), µs per
  accepted step;
* ``dg``: the Gonzalez discrete gradient on the quartic system (004 §4.1, N = 13, h = 0.01), µs/step.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CASE_CODE = r"""
import json, sys, time, warnings
warnings.filterwarnings("ignore")
case = sys.argv[1]

def kernel_run(module):  # the kernels-alone run: _integrate, or integrate in a revision before its deprecation
    import importlib
    m = importlib.import_module(module)
    return getattr(m, "_integrate", None) or m.integrate

def best(fn, k=3):
    fn()
    return min(fn() for _ in range(k))

if case == "sphere":
    _integrate = kernel_run("geosweep.kernels.s2.integrate")
    from geosweep.kernels.systems.lj_sphere import lj_sphere
    m = lj_sphere()
    _integrate(m, "explicit_vi", 0.005, 2, 1)
    def run():
        t0 = _integrate(m, "explicit_vi", 0.005, 0, 1).wall_time
        t = _integrate(m, "explicit_vi", 0.005, 400, 400).wall_time
        return (t - t0) / 400 * 1e3
elif case == "torus":
    _integrate = kernel_run("geosweep.kernels.torus.integrate")
    from geosweep.kernels.torus.model import torus
    m = torus(N_p=80, g0=0.05, tilt=0.3)
    _integrate(m, "v2_newmark", 1e-3, 10, 10)
    def run():
        t0 = time.perf_counter()
        _integrate(m, "v2_newmark", 1e-3, 4000, 100)
        return (time.perf_counter() - t0) / 4000 * 1e6
elif case == "dg":
    from geosweep.kernels.dg import family as F
    from geosweep.kernels.dg.systems import quartic
    from geosweep.kernels.registry import RunRequest
    m = quartic()
    F.run(m, "dg_gonzalez", RunRequest(T=0.02, dt_out=0.01, h=0.01), {})
    def run():
        r = F.run(m, "dg_gonzalez", RunRequest(T=20.0, dt_out=2.0, h=0.01), {})
        return r.wall_time / int(r.values["steps"]) * 1e6
else:
    _integrate = kernel_run("geosweep.kernels.chain.integrate")
    from geosweep.kernels.chain.model import build_chain
    m = build_chain(20)
    if case == "rkmk4":
        _integrate(m, "rkmk4", 1e-3, 10, 10)
        def run():
            t0 = time.perf_counter()
            _integrate(m, "rkmk4", 1e-3, 20000, 100)
            return (time.perf_counter() - t0) / 20000 * 1e6
    elif case == "rkmk853":  # the peers' chain case (benchmarks/peers/geosweep_side.py): T = 3 in one output
        opts = dict(adaptive=True, tol=1e-10, exponent=0.125, ambient_rhs="fast")
        _integrate(m, "rkmk853", 0.1, 1, **opts)
        def run():
            r = _integrate(m, "rkmk853", 3.0, 1, **opts)
            return r.wall_time / r.info["steps"] * 1e6
    else:
        _integrate(m, "rkmk45", 0.1, 2, adaptive=True, tol=1e-8)
        def run():
            t0 = time.perf_counter()
            r = _integrate(m, "rkmk45", 0.01, 300, adaptive=True, tol=1e-8)
            return (time.perf_counter() - t0) / r.info["steps"] * 1e6
print(json.dumps(best(run)))
"""
UNITS = {
    "sphere": "ms/step",
    "torus": "µs/step",
    "rkmk4": "µs/step",
    "rkmk45": "µs/accepted step",
    "rkmk853": "µs/accepted step",
    "dg": "µs/step",
}


def measure(tree: Path, case: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(tree), "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    out = subprocess.run(
        [sys.executable, "-c", CASE_CODE, case], cwd=tree, env=env, capture_output=True, text=True, check=True
    )
    return float(json.loads(out.stdout.strip().splitlines()[-1]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="a579840", help="git revision to compare with (default: before the contract)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--cases", default="sphere,torus,rkmk4,rkmk45,rkmk853,dg")
    args = ap.parse_args()
    cases = args.cases.split(",")
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "baseline"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline],
                       check=True, capture_output=True)  # fmt: skip
        try:
            res: dict[str, dict[str, list[float]]] = {c: {"new": [], "base": []} for c in cases}
            for r in range(args.rounds):
                for c in cases:
                    for label, tree in (("base", base), ("new", ROOT)) if r % 2 else (("new", ROOT), ("base", base)):
                        res[c][label].append(measure(tree, c))
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)
    print(f"# baseline {args.baseline} vs working tree; median of {args.rounds} rounds (best of 3 each)")
    print(f"{'case':8} {'unit':>17} {'baseline':>10} {'new':>10} {'new/base':>9}")
    for c in cases:
        b = statistics.median(res[c]["base"])
        n = statistics.median(res[c]["new"])
        print(f"{c:8} {UNITS[c]:>17} {b:10.4f} {n:10.4f} {n / b:9.3f}")


if __name__ == "__main__":
    main()
