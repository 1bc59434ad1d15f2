"""Benchmark of the chain kernels (plain script: ``python benchmarks/bench_chain.py``).

1. RKMK4 cost per step for N = 20 and N = 200 (µs/step) and the slope of log(cost) against
   log(N) over N = 10 … 400 (the O(N) RHS should give a slope close to 1).
2. Work–precision at N = 20, T = 3 (paper IC, m = L = 1): RKMK4 (fixed step) and RKMK(5,4)
   (adaptive) against scipy ``solve_ivp(method="DOP853")`` on the same ODE, with two RHS
   implementations: (a) the dense formula of spec §2 vectorised in numpy (assemble R, solve;
   what a plain scipy user would write) and (b) the compiled O(N) field of this package called
   from Python (the most favourable case for scipy). Speed-up at equal global error is read
   off by log-log interpolation of each curve. Target: ≥ 50× (against (a)).
3. Order 8 (issue 15), N = 20, T = 3: adaptive RKMK on DOP853 (``rkmk853``) against scipy
   ``solve_ivp(method="DOP853")`` calling the compiled O(N) field, at equal final error from
   1e-4 to 1e-11 (log-log interpolation of median times), with the constraint errors
   max |‖q_i‖ − 1| and max |q_i·ω_i| of both over every accepted step. Target: ≥ 3×.
   The ambient DOP853 on our driver (``dop853_ambient``) is shown for reference.

4. The fixed cost of one driver call (``Trajectory.advance``), fast call against dispatcher.

``python benchmarks/bench_chain.py [--only cost|wp|order8|fixed] [--repeats R]``
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy.integrate import solve_ivp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from geosweep.kernels.chain.family import reference_solution
from geosweep.kernels.chain.integrate import _integrate, scipy_rhs
from geosweep.kernels.chain.model import build_chain


def _best_of(fn, repeat: int = 5) -> float:
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def cost_per_step() -> None:
    print("== RKMK4 cost per step (paper IC, h = 1e-3, no sampling) ==")
    ns, costs = [], []
    for n in (10, 20, 50, 100, 200, 400):
        model = build_chain(n)
        steps = max(2000, 400_000 // n)
        _integrate(model, "rkmk4", 1e-3, 10, 10)  # compile / load cache
        t = _best_of(lambda m=model, k=steps: _integrate(m, "rkmk4", 1e-3, k, k))
        us = 1e6 * t / steps
        ns.append(n)
        costs.append(us)
        print(f"N = {n:4d}: {us:8.2f} µs/step  ({us / n * 1e3:6.1f} ns per link-step)")
    slope = np.polyfit(np.log(ns), np.log(costs), 1)[0]
    print(f"cost-vs-N slope (log-log, N = 10..400): {slope:.3f}")


def work_precision(n: int = 20, T: float = 3.0) -> None:
    print(f"\n== work-precision, N = {n}, T = {T} (global error ‖y(T) − y_ref‖₂) ==")
    model = build_chain(n)
    ref = reference_solution(model, T, 1e-13)
    rhs_compiled = scipy_rhs(model)

    M = model.inertia
    c_grav = model.mu * model.g * model.L
    e3 = np.array([0.0, 0.0, 1.0])
    off = 1.0 - np.eye(n)

    def rhs_numpy(t, yf):
        y = yf.reshape(n, 6)
        q, w = y[:, :3], y[:, 3:]
        Q = np.zeros((n, 3, 3))
        Q[:, 0, 1], Q[:, 0, 2], Q[:, 1, 2] = -q[:, 2], q[:, 1], -q[:, 0]
        Q[:, 1, 0], Q[:, 2, 0], Q[:, 2, 1] = q[:, 2], -q[:, 1], q[:, 0]
        R = np.einsum("ij,iba,jbc->iajc", M * off, Q, Q)
        R[np.arange(n), :, np.arange(n), :] = np.diag(M)[:, None, None] * np.eye(3)
        cq = np.cross(q[:, None, :], q[None, :, :])
        b = np.einsum("ij,j,ijk->ik", M * off, (w * w).sum(1), cq) - c_grav[:, None] * np.cross(q, e3)
        acc = np.linalg.solve(R.reshape(3 * n, 3 * n), b.ravel()).reshape(n, 3)
        return np.hstack([np.cross(w, q), acc]).ravel()

    curves: dict[str, list[tuple[float, float]]] = {
        "scipy_dop853_numpy": [],
        "scipy_dop853_compiled": [],
        "rkmk4": [],
        "rkmk45": [],
    }
    for label, rhs in (("numpy", rhs_numpy), ("compiled", rhs_compiled)):
        for tol in (1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10, 1e-11):
            sol = None

            def run_scipy(tol=tol, rhs=rhs):
                nonlocal sol
                sol = solve_ivp(rhs, (0.0, T), model.y0.ravel(), method="DOP853", rtol=tol, atol=tol)

            t = _best_of(run_scipy, 2 if label == "compiled" else 1)
            err = float(np.linalg.norm(sol.y[:, -1].reshape(n, 6) - ref))
            curves[f"scipy_dop853_{label}"].append((err, t))
            print(f"scipy DOP853 ({label} RHS) tol={tol:.0e}: err={err:.2e}  time={t * 1e3:9.2f} ms  nfev={sol.nfev}")
    for steps in (300, 600, 1200, 2400, 4800, 9600):
        r = None

        def run_rkmk4(k=steps):
            nonlocal r
            r = _integrate(model, "rkmk4", T / k, k, k)

        t = _best_of(run_rkmk4)
        err = float(np.linalg.norm(r.y - ref))
        curves["rkmk4"].append((err, t))
        print(f"RKMK4 {steps:5d} steps:    err={err:.2e}  time={t * 1e3:9.2f} ms")
    for tol in (1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10):
        r = None

        def run_rkmk45(tol=tol):
            nonlocal r
            r = _integrate(model, "rkmk45", T, 1, adaptive=True, tol=tol)

        t = _best_of(run_rkmk45)
        err = float(np.linalg.norm(r.y - ref))
        curves["rkmk45"].append((err, t))
        print(f"RKMK(5,4) tol={tol:.0e}:   err={err:.2e}  time={t * 1e3:9.2f} ms  steps={r.info['steps']}")

    for label in ("numpy", "compiled"):
        sc = np.array(sorted(curves[f"scipy_dop853_{label}"]))
        for name in ("rkmk4", "rkmk45"):
            ours = np.array(sorted(curves[name]))
            lo, hi = max(ours[0, 0], sc[0, 0]), min(ours[-1, 0], sc[-1, 0])
            ratios = []
            for err, ts in sc:
                if lo <= err <= hi:
                    to = np.exp(np.interp(np.log(err), np.log(ours[:, 0]), np.log(ours[:, 1])))
                    ratios.append((err, ts / to))
            txt = ", ".join(f"{e:.1e}: {q:.1f}x" for e, q in ratios) or "no overlap"
            print(f"speed-up of {name} over scipy DOP853 ({label} RHS) at equal error: {txt}")


def _constraints(y: np.ndarray, n: int) -> tuple[float, float]:
    """max over the given states (columns of ``y``, 6N each) of |‖q_i‖ − 1| and |q_i·ω_i|."""
    Y = y.T.reshape(-1, n, 6)
    q, w = Y[..., :3], Y[..., 3:]
    return float(np.abs(np.linalg.norm(q, axis=2) - 1.0).max()), float(np.abs((q * w).sum(2)).max())


def fixed_cost(n: int = 20, calls: int = 300, rounds: int = 9) -> None:
    """Fixed cost of one driver call: many ``Trajectory.advance(0)`` (no step) and
    ``advance(1)`` (one rkmk853 step) calls, through the fast call (functions typed once per
    stepper, :mod:`geosweep.kernels.core.fastcall`) and through the Numba dispatcher
    (``GEOSWEEP_CHECKED_CALLS=1``), alternating; medians over rounds of the mean per call."""
    import os

    from geosweep.kernels.chain.integrate import chain_stepper
    from geosweep.kernels.core.fastcall import CHECKED_ENV
    from geosweep.kernels.core.trajectory import Trajectory
    from geosweep.kernels.lie.stepper import initial_state

    print(f"\n== fixed cost per Trajectory.advance() (rkmk853, N = {n}, {calls} calls per round) ==")
    model = build_chain(n)
    st = chain_stepper(model, "rkmk853", adaptive=True)

    def per_call(checked: bool, steps: int) -> float:
        os.environ[CHECKED_ENV] = "1" if checked else "0"
        tr = Trajectory(st, initial_state(model.y0), T=3.0, dt_out=3.0, tol=1e-8)
        tr.advance(1)
        t0 = time.perf_counter()
        for _ in range(calls):
            tr.advance(steps)
        return (time.perf_counter() - t0) / calls

    res: dict[tuple[bool, int], list[float]] = {(c, k): [] for c in (True, False) for k in (0, 1)}
    for _ in range(rounds + 1):
        for key in res:
            res[key].append(per_call(*key))
    os.environ.pop(CHECKED_ENV, None)
    for (checked, steps), v in res.items():
        label = "dispatcher" if checked else "fast call "
        print(f"{label} advance({steps}): median {np.median(v[1:]) * 1e6:8.1f} µs, min {min(v[1:]) * 1e6:8.1f} µs")


def order8_vs_scipy(n: int = 20, T: float = 3.0, repeats: int = 7, ic: str = "paper") -> None:
    """``ic = "paper"`` (the E3 setting) moves in a vertical plane, so q_i·ω_i vanishes
    identically for every method; ``ic = "twisted"`` is a 3-D motion where it does not."""
    from geosweep.kernels.lie import tableaux

    print(f"\n== order 8: rkmk853 vs scipy DOP853 (compiled O(N) RHS), N = {n}, T = {T}, ic = {ic} ==")
    model = build_chain(n, ic=ic)
    k_ref = 24000  # rkmk8 at h = 1.25e-4 (error ≈ 1e-15), checked against scipy at 1e-13
    ref = _integrate(model, tableaux.get("rkmk8"), T / k_ref, k_ref, k_ref).y
    d = np.linalg.norm(ref - reference_solution(model, T))
    print(f"reference: rkmk8, {k_ref} steps; ‖ref − DOP853(1e-13)‖ = {d:.1e}")
    rhs = scipy_rhs(model)

    def run(name: str, tol: float):
        if name == "scipy":
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return solve_ivp(rhs, (0.0, T), model.y0.ravel(), method="DOP853", rtol=tol, atol=tol)
        return _integrate(model, name, T, 1, adaptive=True, tol=tol, exponent=0.125, ambient_rhs="fast")

    names = ("scipy", "rkmk853", "dop853_ambient")
    short = [_integrate(model, "rkmk853", 1e-3, 1, adaptive=True, tol=1e-4).wall_time for _ in range(20)]
    print(f"fixed cost of one driver call (1-step run; inside every rkmk853 time): {np.median(short) * 1e3:.2f} ms")
    # 1. the curves: final error, evaluations and constraint errors at each tolerance (deterministic)
    tols = 10.0 ** -np.arange(3.0, 14.5, 0.5)  # scipy raises rtol < 2.2e-14 to 2.2e-14 (it warns)
    rows: dict[str, list] = {k: [] for k in names}
    for tol in tols:
        for k in names:
            r = run(k, tol)
            if k == "scipy":
                e = float(np.linalg.norm(r.y[:, -1].reshape(n, 6) - ref))
                rows[k].append((e, r.nfev, *_constraints(r.y, n)))
            else:
                e = float(np.linalg.norm(r.y - ref))
                rows[k].append((e, r.info["f_evals"], r.core.reduced("unit_error"), r.core.reduced("tangency_error")))
    for k, rr in rows.items():
        print(f"-- {k}")
        for tol, (e, nf, cu, ct) in zip(tols, rr):
            print(f"tol={tol:.0e}  err={e:.2e}  nfev={nf:6d}  max|‖q‖-1|={cu:.1e}  max|q.w|={ct:.1e}")

    def bracket(k: str, err: float):
        """(i, w): log err lies between the runs at tols[i] and tols[i + 1], weight w on the latter."""
        le = np.log([r[0] for r in rows[k]])
        for i in range(len(le) - 1):
            if min(le[i], le[i + 1]) <= np.log(err) <= max(le[i], le[i + 1]) and le[i] != le[i + 1]:
                return i, float((np.log(err) - le[i]) / (le[i + 1] - le[i]))
        return None

    # 2. time at equal error: in every round, the bracketing runs of the three methods back to
    #    back, log-interpolated; the speed-up is the median over rounds of the per-round ratio
    #    (the VM switches between a fast and a slow mode, so only adjacent timings are compared)
    print(
        f"\n| final error | SciPy DOP853 ms | nfev | max abs(‖q‖−1) | max abs(q·ω) | rkmk853 ms | nfev "
        f"| max abs(‖q‖−1) | max abs(q·ω) | speed-up (median of {repeats}) | dop853_ambient ms | speed-up |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for err in 10.0 ** -np.arange(4, 12):
        br = {k: bracket(k, err) for k in names}
        if any(b is None for b in br.values()):
            print(f"| {err:.0e} | not reached by every method |")
            continue
        times: dict[str, list] = {k: [] for k in names}
        for _ in range(repeats + 1):
            for k in names:
                i, w = br[k]
                lt = []
                for tol in (tols[i], tols[i + 1]):
                    t0 = time.perf_counter()
                    run(k, tol)
                    lt.append(np.log(time.perf_counter() - t0))
                times[k].append(np.exp((1 - w) * lt[0] + w * lt[1]))
        tm = {k: np.array(v[1:]) for k, v in times.items()}  # round 0 is a warm-up
        col = {}
        for k in names:
            i, w = br[k]
            a, b = rows[k][i], rows[k][i + 1]
            nf = np.exp((1 - w) * np.log(a[1]) + w * np.log(b[1]))
            near = a if w < 0.5 else b
            col[k] = (float(np.median(tm[k])) * 1e3, nf, near[2], near[3])
        sp = float(np.median(tm["scipy"] / tm["rkmk853"]))
        sa = float(np.median(tm["scipy"] / tm["dop853_ambient"]))
        s_, o_ = col["scipy"], col["rkmk853"]
        print(
            f"| {err:.0e} | {s_[0]:.2f} | {s_[1]:.0f} | {s_[2]:.1e} | {s_[3]:.1e} | {o_[0]:.2f} | {o_[1]:.0f} "
            f"| {o_[2]:.1e} | {o_[3]:.1e} | {sp:.2f}× | {col['dop853_ambient'][0]:.2f} | {sa:.2f}× |"
        )


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("cost", "wp", "order8", "fixed"), default=None)
    ap.add_argument("--repeats", type=int, default=7, help="timed repeats per point of the order-8 comparison")
    ap.add_argument("--ic", default="paper", help="initial condition of the order-8 comparison (paper, twisted)")
    args = ap.parse_args()
    if args.only in (None, "cost"):
        cost_per_step()
    if args.only in (None, "wp"):
        work_precision()
    if args.only in (None, "order8"):
        order8_vs_scipy(repeats=args.repeats, ic=args.ic)
    if args.only in (None, "fixed"):
        fixed_cost()
