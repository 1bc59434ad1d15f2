"""Benchmark of the chain kernels (plain script: ``python benchmarks/bench_chain.py``).

1. RKMK4 cost per step for N = 20 and N = 200 (µs/step) and the slope of log(cost) against
   log(N) over N = 10 … 400 (the O(N) RHS should give a slope close to 1).
2. Work–precision at N = 20, T = 3 (paper IC, m = L = 1): RKMK4 (fixed step) and RKMK(5,4)
   (adaptive) against scipy ``solve_ivp(method="DOP853")`` on the same ODE, with two RHS
   implementations: (a) the dense formula of spec §2 vectorised in numpy (assemble R, solve;
   what a plain scipy user would write) and (b) the compiled O(N) field of this package called
   from Python (the most favourable case for scipy). Speed-up at equal global error is read
   off by log-log interpolation of each curve. Target: ≥ 50× (against (a)).
"""

from __future__ import annotations

import time

import numpy as np
from scipy.integrate import solve_ivp

from kernels.chain.family import reference_solution
from kernels.chain.integrate import integrate
from kernels.chain.model import build_chain
from kernels.chain.rhs import chain_F, work_size


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
        integrate(model, "rkmk4", 1e-3, 10, 10)  # compile / load cache
        t = _best_of(lambda m=model, k=steps: integrate(m, "rkmk4", 1e-3, k, k))
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
    work = np.zeros(work_size(n))
    buf = np.empty((n, 6))
    yb = np.empty((n, 6))

    def rhs_compiled(t, yf):
        yb[:, :] = yf.reshape(n, 6)
        chain_F(yb, model.params, work, buf)
        return buf.ravel().copy()

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
            r = integrate(model, "rkmk4", T / k, k, k)

        t = _best_of(run_rkmk4)
        err = float(np.linalg.norm(r.y - ref))
        curves["rkmk4"].append((err, t))
        print(f"RKMK4 {steps:5d} steps:    err={err:.2e}  time={t * 1e3:9.2f} ms")
    for tol in (1e-5, 1e-6, 1e-7, 1e-8, 1e-9, 1e-10):
        r = None

        def run_rkmk45(tol=tol):
            nonlocal r
            r = integrate(model, "rkmk45", T, 1, adaptive=True, tol=tol)

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


if __name__ == "__main__":
    cost_per_step()
    work_precision()
