"""Benchmark: one (S²)ⁿ cell on several threads (issue 27 item 1), and a scaling model.

Run from the repository root::

    python benchmarks/bench_threads.py              # 642 molecules, 1 vs 2 threads (~1 min)
    python benchmarks/bench_threads.py --quick      # fewer repeats
    python benchmarks/bench_threads.py --omp-wait active   # OpenMP threads spin between steps

Rows:

* ``step n=642``: ms per explicit-VI step of ``lj_sphere()`` (icosphere level 3) on 1 and 2
  threads, timed in alternation (1, 2, 1, 2, …; ``--steps`` steps per timing) on one trajectory
  each; the speed-up is the median of the per-round ratios t1/t2;
* ``potential``: the potential alone (t_pot) on 1 thread, and ``t_rest``, a step of the same
  642 bodies without forces: the O(n) part of the step that stays on one thread (update,
  energy, J, constraint errors);
* ``sync``: the per-step cost of the threads themselves: a step of a system too small to share
  (n = 12, one block of rows) on 2 threads minus on 1 thread — the parallel region's fork and
  join (Numba's OpenMP layer) with nothing to share;
* ``pool``: the alternative of a pool of Python threads each running the nogil row kernel on
  half the rows, per potential call (submit two halves, wait for both) against the ``prange``
  potential on 2 threads. The driver calls the potential from compiled code, so a Python pool
  would also need the driver to return to Python every step; this row prices the pool alone.

Scaling model (printed for p = 2…64): ``t(p) = t_rest + t_pot/p + sync(p)`` (the threaded
potential gives each thread one block of n/p consecutive rows) with ``sync(p) = sync(2) · log2(p)``
(a tree barrier; the linear ``sync(2) · (p − 1)`` as the pessimistic bound); speed-up
``t(1)/t(p)``. The issue's simple form ``t1 / (t1/p + sync(p))`` is the special case t_rest = 0.

Other jobs on the machine make timings noisy (the load average is printed before and after):
a loaded core stalls the thread that waits for it at the join, so a 2-thread figure on a busy
2-core machine is a lower bound; repeat the run when in doubt. Beside wall time each timing
reads every thread's CPU time (``/proc/self/task/*/schedstat``): the busiest thread's CPU time
per step is the step's critical path, what two free cores would take apart from the threads'
wake-up latency — a figure the other jobs do not inflate.
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

# measure the checkout this file lives in, not whatever ``kernels`` is installed
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numba  # noqa: E402
import numpy as np  # noqa: E402

from geosweep.kernels._jit import kjit  # noqa: E402
from geosweep.kernels.core.trajectory import Trajectory  # noqa: E402
from geosweep.kernels.s2.model import POTENTIAL_SIG, S2System, s2_potential, threaded_potential  # noqa: E402
from geosweep.kernels.s2.stepper import initial_state, make_stepper  # noqa: E402
from geosweep.kernels.systems.lj_sphere import _lj_rows, lj_potential, lj_sphere  # noqa: E402

H = 0.005


def _trajectory(system, threads: int, steps: int) -> Trajectory:
    """A trajectory long enough for every timing, warmed up (compiled, one untimed block)."""
    q, w = system.initial_state()
    stepper = make_stepper(system, "explicit_vi", threads=threads)
    assert stepper.threads == threads, "threads unavailable (NUMBA_NUM_THREADS or threading layer)"
    traj = Trajectory(stepper, initial_state(system, q, w), T=10**7 * H, dt_out=H, h=H, n_steps=10**7)
    traj.advance(steps)
    return traj


def thread_cpu() -> dict[str, int]:
    """CPU time (ns) of each thread of this process (Linux ``/proc/self/task/*/schedstat``)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/schedstat") as f:
                out[tid] = int(f.read().split()[0])
        except OSError:
            pass
    return out


#: per thread count: (busiest thread's CPU s per step, all threads' CPU s per step) of every timing
CPU: dict[int, list[tuple[float, float]]] = {}


def _per_step(traj: Trajectory, steps: int) -> float:
    c0 = thread_cpu()
    t0 = time.perf_counter()
    traj.advance(steps)
    wall = (time.perf_counter() - t0) / steps
    c1 = thread_cpu()
    used = [c1[t] - c0.get(t, 0) for t in c1]
    CPU.setdefault(traj.stepper.threads, []).append((1e-9 * max(used) / steps, 1e-9 * sum(used) / steps))
    return wall


def alternate(system, counts: tuple[int, ...], steps: int, rounds: int) -> dict[int, list[float]]:
    """Seconds per step for each thread count, timed in alternation, ``rounds`` times."""
    trajs = {k: _trajectory(system, k, steps) for k in counts}
    out: dict[int, list[float]] = {k: [] for k in counts}
    CPU.clear()
    for _ in range(rounds):
        for k in counts:
            out[k].append(_per_step(trajs[k], steps))
    return out


@kjit
def _call_many(pot, q, p, g, reps):
    V = 0.0
    for _ in range(reps):
        V = pot(q, p, g)
    return V


def potential_time(pot, system, reps: int, rounds: int, threads: int = 1) -> float:
    q = np.ascontiguousarray(system.q0)
    g = np.empty_like(q)
    pot.compile(POTENTIAL_SIG)
    prev = numba.get_num_threads()
    numba.set_num_threads(threads)
    try:
        _call_many(pot, q, system.params, g, 2)
        ts = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            _call_many(pot, q, system.params, g, reps)
            ts.append((time.perf_counter() - t0) / reps)
    finally:
        numba.set_num_threads(prev)
    return float(np.median(ts))


def pool_time(system, reps: int, rounds: int) -> float:
    """Per potential call: two Python threads, each the nogil row kernel on half the rows."""
    q = np.ascontiguousarray(system.q0)
    g = np.empty_like(q)
    e = np.empty(len(q))
    n, p = len(q), system.params
    half = n // 2
    with ThreadPoolExecutor(2) as pool:
        _lj_rows(q, p, g, e, 0, n)
        ts = []
        for _ in range(rounds):
            t0 = time.perf_counter()
            for _ in range(reps):
                a = pool.submit(_lj_rows, q, p, g, e, 0, half)
                b = pool.submit(_lj_rows, q, p, g, e, half, n)
                a.result()
                b.result()
                V = 0.0
                for x in e:  # the ordered sum (a compiled loop in the real kernel)
                    V += x
            ts.append((time.perf_counter() - t0) / reps)
    return float(np.median(ts))


@s2_potential(lazy=True)
def _no_potential(q, p, g):
    """V = 0: a step of it is the O(n) part of the explicit VI step (t_rest)."""
    for i in range(q.shape[0]):
        g[i, 0] = 0.0
        g[i, 1] = 0.0
        g[i, 2] = 0.0
    return 0.0


def model(t_rest: float, t_pot: float, sync2: float, p: int, linear: bool = False) -> float:
    """Modelled speed-up t(1)/t(p) (see the module docstring)."""
    sync = 0.0 if p == 1 else sync2 * ((p - 1) if linear else math.log2(p))
    return (t_rest + t_pot) / (t_rest + t_pot / p + sync)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds")
    ap.add_argument("--rounds", type=int, default=15, help="alternating rounds per figure")
    ap.add_argument("--steps", type=int, default=1000, help="steps per timing of the 642-molecule cell")
    ap.add_argument("--omp-wait", choices=("passive", "active"), help="OMP_WAIT_POLICY (default: geosweep's, passive)")
    args = ap.parse_args()
    if args.omp_wait:
        os.environ["OMP_WAIT_POLICY"] = args.omp_wait  # before the threading layer starts
    rounds = 5 if args.quick else args.rounds
    if numba.config.NUMBA_NUM_THREADS < 2:
        sys.exit("needs NUMBA_NUM_THREADS >= 2")
    load0 = os.getloadavg()
    print(f"# cell threads benchmark  {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC  {platform.node()}")
    print(f"# numba {numba.__version__}  cpus {os.cpu_count()}  NUMBA_NUM_THREADS={numba.config.NUMBA_NUM_THREADS}")
    print(f"# load average before: {load0[0]:.2f} {load0[1]:.2f} {load0[2]:.2f}")

    big = lj_sphere()
    n = big.n
    t = alternate(big, (1, 2), args.steps, rounds)
    print(f"# threading layer: {numba.threading_layer()}  OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}")
    ratios = np.array(t[1]) / np.array(t[2])
    t1, t2 = float(np.median(t[1])), float(np.median(t[2]))
    print(f"step n={n}  1 thread  {1e3 * t1:.4f} ms (min {1e3 * min(t[1]):.4f})")
    print(f"step n={n}  2 threads {1e3 * t2:.4f} ms (min {1e3 * min(t[2]):.4f})")
    print(f"speed-up 2 threads: median of per-round ratios {np.median(ratios):.3f} "
          f"(range {ratios.min():.3f}–{ratios.max():.3f}; ratio of minima {min(t[1]) / min(t[2]):.3f})")  # fmt: skip
    crit = {k: float(np.median([c[0] for c in CPU[k]])) for k in (1, 2)}
    total = {k: float(np.median([c[1] for c in CPU[k]])) for k in (1, 2)}
    print(f"CPU per step: 1 thread {1e3 * total[1]:.4f} ms; 2 threads {1e3 * total[2]:.4f} ms in all, "
          f"busiest thread {1e3 * crit[2]:.4f} ms -> CPU critical-path ratio {crit[1] / crit[2]:.3f} "
          "(the speed-up on two free cores, less the wake-up latency)")  # fmt: skip

    t_pot = potential_time(lj_potential, big, 200, rounds)
    t_pot2 = potential_time(threaded_potential(lj_potential), big, 200, rounds, threads=2)
    t_pool = pool_time(big, 200, rounds)
    rest_system = S2System("no_forces", big.M, _no_potential, [0.0], big.q0, big.w0, symmetry="full")
    t_rest_wall = float(np.median(alternate(rest_system, (1,), args.steps, rounds)[1]))
    t_rest = float(np.median([c[1] for c in CPU[1]]))
    print(f"potential n={n}  1 thread {1e6 * t_pot:.1f} us;  t_rest (step without forces) {1e6 * t_rest_wall:.1f} us, "
          f"CPU {1e6 * t_rest:.1f} us")  # fmt: skip
    print(f"potential n={n}  2 threads: prange {1e6 * t_pot2:.1f} us, pool of 2 Python threads {1e6 * t_pool:.1f} us")

    tiny = lj_sphere(level=0)
    ts = alternate(tiny, (1, 2), 20000, rounds)
    sync2 = max(float(np.median(np.array(ts[2]) - np.array(ts[1]))), 0.0)
    print(f"sync: step n=12  1 thread {1e6 * np.median(ts[1]):.2f} us, 2 threads {1e6 * np.median(ts[2]):.2f} us  "
          f"-> sync(2) = {1e6 * sync2:.2f} us per step")  # fmt: skip

    print("\n# model t(p) = t_rest + t_pot/p + sync(2)*log2(p): columns p, speed-up t(1)/t(p), the same with")
    print("# linear sync(2)*(p-1), and the issue's t1/(t1/p + sync(2)*log2(p)) (no serial part);")
    print("# t_rest and t_pot = t1 − t_rest from the CPU times of the 1-thread steps (load-independent)")
    n4 = 2562  # icosphere level 4: t_pot ∝ n², t_rest ∝ n
    t_pot_cpu = max(total[1] - t_rest, 0.0)
    for nn, tr, tp in ((n, t_rest, t_pot_cpu), (n4, t_rest * n4 / n, t_pot_cpu * (n4 / n) ** 2)):
        print(f"n = {nn}  (t1 = {1e3 * (tr + tp):.3f} ms per step)")
        for p in (2, 4, 8, 16, 32, 64):
            simple = (tr + tp) / ((tr + tp) / p + sync2 * math.log2(p))
            print(f"  p={p:3d}  {model(tr, tp, sync2, p):6.2f}  {model(tr, tp, sync2, p, True):6.2f}  {simple:6.2f}")
    load1 = os.getloadavg()
    print(f"# load average after: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")


if __name__ == "__main__":
    main()
