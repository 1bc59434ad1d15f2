"""Benchmark: the all-pairs Lennard-Jones step on the sphere (spec sphere §3, §5), one core.

Run from the repository root::

    python benchmarks/bench_sphere_step.py            # full table (~1 min)
    python benchmarks/bench_sphere_step.py --quick    # fewer repeats
    python benchmarks/bench_sphere_step.py --pin 1    # also pin the process to CPU 1

Rows (default system ``lj_sphere()``: ε = 0.01, σ from the mesh, Ω = 3.25, h = 0.005):

* ``potential``: one call of ``lj_potential`` (energy + gradient), n = 642 and 2562;
* ``explicit_vi``: ms per step of ``_integrate(..., "explicit_vi", ...)`` (one potential call
  per step plus the O(n) update and the per-step diagnostics E, J, |q|, q·ω);
* ``rk4``: ms per step of the RK4 baseline (four potential calls per step);
* ``reference``: the previous kernel (scalar loop over i < j with Newton's third law,
  re-compiled here from the copy below) for the before/after comparison.

Each figure is the median (and minimum) over ``--repeats`` timed repeats after a warm-up
(compilation / cache load and one untimed run). Unique pairs/s = n(n−1)/2 × potential calls
per step / time per step (the kernel itself evaluates all n(n−1) ordered pairs). The
process runs single-threaded (NUMBA_NUM_THREADS=1, BLAS threads 1); other jobs on the
machine make timings noisy, so compare minima and repeat the run when in doubt.
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import datetime  # noqa: E402
import math  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

# measure the checkout this file lives in, not whatever ``kernels`` is installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numba  # noqa: E402
import numpy as np  # noqa: E402
from llvmlite import binding as llvm_binding  # noqa: E402

from geosweep.kernels._jit import JIT_OPTIONS  # noqa: E402
from geosweep.kernels.s2.integrate import _integrate  # noqa: E402
from geosweep.kernels.s2.model import POTENTIAL_SIG  # noqa: E402
from geosweep.kernels.systems.lj_sphere import lj_potential, lj_sphere  # noqa: E402


def _lj_third_law_scalar(q, p, g):
    """The kernel before 2026-11-22: pairs i < j, j ascending, scatter to g[j] (reference)."""
    eps = p[0]
    sig2 = p[1] * p[1]
    n = q.shape[0]
    for i in range(n):
        g[i, 0] = 0.0
        g[i, 1] = 0.0
        g[i, 2] = 0.0
    V = 0.0
    c24 = 24.0 * eps
    for i in range(n):
        xi = q[i, 0]
        yi = q[i, 1]
        zi = q[i, 2]
        gx = 0.0
        gy = 0.0
        gz = 0.0
        vi = 0.0
        for j in range(i + 1, n):
            dx = xi - q[j, 0]
            dy = yi - q[j, 1]
            dz = zi - q[j, 2]
            ir2 = 1.0 / (dx * dx + dy * dy + dz * dz)
            s2 = sig2 * ir2
            s6 = s2 * s2 * s2
            s12 = s6 * s6
            vi += s12 - s6
            c = -c24 * ir2 * (2.0 * s12 - s6)
            fx = c * dx
            fy = c * dy
            fz = c * dz
            gx += fx
            gy += fy
            gz += fz
            g[j, 0] -= fx
            g[j, 1] -= fy
            g[j, 2] -= fz
        g[i, 0] += gx
        g[i, 1] += gy
        g[i, 2] += gz
        V += vi
    return 4.0 * eps * V


def _compile_uncached(fn):
    """Compile with the kernel options but without the disk cache (so the asm is inspectable)."""
    opts = {k: v for k, v in JIT_OPTIONS.items() if k != "cache"}
    return numba.njit(POTENTIAL_SIG, **opts)(fn)


def _stats(samples: list[float]) -> tuple[float, float]:
    return float(np.median(samples)), float(np.min(samples))


def time_potential(pot, system, calls: int, repeats: int) -> tuple[float, float]:
    """ms per potential call: (median, min) over ``repeats`` blocks of ``calls`` calls."""
    q, _ = system.initial_state()
    g = np.empty_like(q)
    pot(q, system.params, g)
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            pot(q, system.params, g)
        out.append((time.perf_counter() - t0) / calls * 1e3)
    return _stats(out)


def time_steps(system, method: str, steps: int, repeats: int, h: float = 0.005) -> tuple[float, float, float]:
    """ms per step of ``integrate``: (median, min, fixed per-call overhead in ms).

    ``Trajectory.wall_time`` includes a fixed per-call part (the initial potential call and
    diagnostics, and the O(n²) ``system.is_diagonal`` test evaluated in the driver's
    argument list); it is measured with 0-step runs and subtracted, so the figures are the
    marginal cost of one step.
    """
    _integrate(system, method, h, 2, 1)  # warm-up: compilation / cache load
    fixed = float(np.median([_integrate(system, method, h, 0, 1).wall_time for _ in range(repeats)]))
    out = []
    for _ in range(repeats):
        tr = _integrate(system, method, h, steps, steps)
        if tr.info["status"] != 0 or tr.info["steps_done"] != steps:
            raise RuntimeError(f"{system.name} {method}: run failed ({tr.info}); timing invalid")
        out.append((tr.wall_time - fixed) / steps * 1e3)
    med, mn = _stats(out)
    return med, mn, fixed * 1e3


def vector_report() -> str:
    """Whether the potential's pair loop is vectorised (vdivpd on zmm/ymm) and FMA-free."""
    fn = _compile_uncached(lj_potential.py_func)
    asm = fn.inspect_asm(fn.signatures[0])
    lines = [ln for ln in asm.splitlines() if "vdivpd" in ln]
    width = "zmm" if any("zmm" in ln for ln in lines) else ("ymm" if any("ymm" in ln for ln in lines) else "none")
    fma = sum(asm.count(k) for k in ("vfmadd", "vfmsub", "vfnmadd", "vfnmsub"))
    return f"packed divide: {width} ({len(lines)} vdivpd), FMA instructions: {fma}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats per row (default 7)")
    ap.add_argument("--quick", action="store_true", help="3 repeats and shorter runs")
    ap.add_argument("--pin", type=int, default=None, help="pin the process to this CPU")
    ap.add_argument("--no-reference", action="store_true", help="skip the pre-2026-11-22 kernel rows")
    args = ap.parse_args()
    if args.pin is not None:
        os.sched_setaffinity(0, {args.pin})
    reps = 3 if args.quick else args.repeats
    scale = 0.3 if args.quick else 1.0

    s642 = lj_sphere(level=3)
    s2562 = lj_sphere(level=4)
    pairs = {642: 642 * 641 // 2, 2562: 2562 * 2561 // 2}
    rows: list[tuple[str, int, int, tuple[float, float]]] = []

    def steps(k: int) -> int:
        return max(5, int(k * scale))

    fixed: dict[tuple[str, int], float] = {}

    def run(name: str, system, method: str, n_steps: int, evals: int) -> None:
        med, mn, fixed[(name, system.n)] = time_steps(system, method, steps(n_steps), reps)
        rows.append((name, system.n, evals, (med, mn)))

    rows.append(("potential", 642, 1, time_potential(lj_potential, s642, steps(300), reps)))
    run("explicit_vi", s642, "explicit_vi", 400, 1)
    run("rk4", s642, "rk4", 100, 4)
    rows.append(("potential", 2562, 1, time_potential(lj_potential, s2562, steps(20), reps)))
    run("explicit_vi", s2562, "explicit_vi", 40, 1)
    if not args.no_reference:
        ref = _compile_uncached(_lj_third_law_scalar)
        rows.append(("reference potential", 642, 1, time_potential(ref, s642, steps(300), reps)))
        s_ref = dataclasses.replace(s642, potential=ref)
        run("reference explicit_vi", s_ref, "explicit_vi", 400, 1)

    cpu = llvm_binding.get_host_cpu_name()
    print(f"# sphere LJ step benchmark  {datetime.date.today()}  {platform.node()}  cpu {cpu}")
    print(
        f"# python {platform.python_version()}  numba {numba.__version__}  numpy {np.__version__}  "
        f"cpus {os.cpu_count()}  NUMBA_NUM_THREADS={os.environ['NUMBA_NUM_THREADS']}  "
        f"target {numba.config.CPU_NAME or 'host'}  repeats {reps}"
    )
    print(f"# lj_potential: {vector_report()}")
    hdr = f"{'case':<24}{'n':>6}{'pot/step':>9}{'ms/step med':>13}{'ms/step min':>13}{'Mpairs/s med':>14}"
    print(hdr)
    print("-" * len(hdr))
    for name, n, evals, (med, mn) in rows:
        mp = pairs[n] * evals / (med * 1e-3) / 1e6
        print(f"{name:<24}{n:>6}{evals:>9}{med:>13.4f}{mn:>13.4f}{mp:>14.1f}")
    # slope and speed-up from the minima (least disturbed by other jobs on the machine)
    t_small = {name: mn for name, n, _, (_, mn) in rows if n == 642}
    t_large = {name: mn for name, n, _, (_, mn) in rows if n == 2562}
    for name in ("potential", "explicit_vi"):
        if name in t_small and name in t_large:
            slope = math.log(t_large[name] / t_small[name]) / math.log(2562 / 642)
            print(f"# cost slope {name}: t ∝ n^{slope:.2f} (642 → 2562, ×{t_large[name] / t_small[name]:.1f})")
    for (name, n), ms in fixed.items():
        print(f"# fixed per-_integrate() overhead {name} n={n}: {ms:.1f} ms (subtracted above)")
    if "reference explicit_vi" in t_small:
        print(f"# speed-up explicit_vi vs reference: ×{t_small['reference explicit_vi'] / t_small['explicit_vi']:.2f}")


if __name__ == "__main__":
    main()
