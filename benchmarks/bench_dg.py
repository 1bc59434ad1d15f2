"""Discrete-gradient family: steps/s and Newton iterations per step, against SciPy at equal error.

For the chaotic quartic system (004 §4.1, N = 13) and the pendulum chain in Lie–Poisson form
(N links, R^{6N}): each discrete gradient at fixed h runs to T on the shared driver (one core,
after a warm-up); its final-state error against a tight DOP853 reference sets the target, and
SciPy ``solve_ivp`` (Radau, DOP853) on the same vector field S(x)∇H(x) is run with
rtol = atol lowered by factors of 10 until its final error is at most the target. Printed (best
of 3): wall time, steps/s, ∇H-and-H evaluations, mean/max Newton iterations, SciPy's time and ``nfev`` at
equal error, and max |ΔH|/|H0|.

``--gearbox T`` instead times the gearbox solves (seed 2, h = 0.1, to T; both forms, the three
discrete gradients; best of 3): µs per step, Newton iterations per step (mean / max) and
max |ΔH|/|H0|.

``--figure STORE`` instead draws the gearbox long run (``sweeps/examples/gearbox_long.toml``)
like 004 Fig. 4: relative energy error and constraint error against time.

    python benchmarks/bench_dg.py [--T 10] [--chain-N 20] [--chain-T 0.5]
    python benchmarks/bench_dg.py --gearbox 5000
    python benchmarks/bench_dg.py --figure STORE [--out benchmarks/dg_gearbox_long.png]
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402
from scipy.integrate import solve_ivp  # noqa: E402

from geosweep.kernels.dg import family as F  # noqa: E402
from geosweep.kernels.dg.chain_lp import chain_lp  # noqa: E402
from geosweep.kernels.dg.systems import quartic  # noqa: E402
from geosweep.kernels.registry import RunRequest  # noqa: E402

REPEATS = 3  # best of


def _scipy_at(model, T, target, ref, method):
    """First rtol = atol in 1e-3, 1e-4, … with final error ≤ target: (tol, seconds, nfev, error)."""
    f = model.f
    for k in range(3, 15):
        tol = 10.0**-k
        dt = np.inf
        for _ in range(REPEATS):
            t0 = time.perf_counter()
            sol = solve_ivp(lambda t, x: f(x), (0.0, T), model.x0, method=method, rtol=tol, atol=tol)
            dt = min(dt, time.perf_counter() - t0)
        err = float(np.abs(sol.y[:, -1] - ref).max())
        if err <= target:
            return tol, dt, sol.nfev, err
    return np.nan, np.nan, -1, np.nan


def bench(label, model, T, h, methods, options):
    sol = solve_ivp(lambda t, x: model.f(x), (0.0, T), model.x0, method="DOP853", rtol=1e-13, atol=1e-13)
    assert sol.status == 0, sol.message
    ref = sol.y[:, -1]
    print(f"\n{label}: N = {model.N}, T = {T}, h = {h} (reference: DOP853 at 1e-13, {sol.nfev} evaluations)")
    print(
        "| method | wall s | steps/s | evals/step | Newton mean / max | max rel ΔH | final err "
        "| Radau tol, s, nfev | DOP853 tol, s, nfev |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name in methods:
        req = RunRequest(T=T, dt_out=T / 10, h=h)
        F.run(model, name, RunRequest(T=2 * h, dt_out=h, h=h), options)  # warm-up (compiled, cached)
        res = min((F.run(model, name, req, options) for _ in range(REPEATS)), key=lambda r: r.wall_time)
        v = res.values
        err = float(np.abs(v["final_state"][0] - ref).max())
        steps = int(v["steps"])
        rad = _scipy_at(model, T, err, ref, "Radau")
        dop = _scipy_at(model, T, err, ref, "DOP853")
        print(
            f"| {name} | {res.wall_time:.3f} | {steps / res.wall_time:,.0f} | {v['f_evals'] / steps:.1f} | "
            f"{v['newton_iterations_mean']:.2f} / {int(v['newton_iterations_max'])} | "
            f"{v['max_rel_energy_error']:.1e} | {err:.1e} | {rad[0]:.0e}, {rad[1]:.3f}, {rad[2]} | "
            f"{dop[0]:.0e}, {dop[1]:.3f}, {dop[2]} |"
        )


def figure(store: str, out: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import xarray as xr

    ds = xr.open_zarr(store)
    t = ds.time.values
    fig, ax = plt.subplots(1, 2, figsize=(11, 4))
    cases = [
        ("dg_gonzalez", "reduced", "GONZALEZ-R"),
        ("dg_gonzalez", "canonical", "GONZALEZ-F"),
        ("implicit_midpoint", "reduced", "implicit midpoint (R)"),
        ("rk4_skew", "reduced", "RK4 (R)"),
        ("rk4_skew", "canonical", "RK4 (canonical)"),
    ]
    for integ, form, label in cases:
        cell = ds.sel(integrator=integ, form=form).isel(h=0, tol=0)
        ax[0].semilogy(t[1:], np.abs(cell.rel_energy_error.values[1:]) + 1e-17, label=label, lw=0.8)
        ax[1].semilogy(t[1:], cell.constraint_error.values[1:] + 1e-17, label=label, lw=0.8)
    ax[0].set(xlabel="t", ylabel="|(H − H0)/H0|", title="relative energy error (h = 0.1)")
    ax[1].set(xlabel="t", ylabel="|p1 + sin(q3) p2|", title="constraint error")
    ax[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def gearbox_solves(T: float) -> None:
    """The discrete gradients on the gearbox's reduced and multiplier forms (GONZALEZ-R/-F, …)."""
    from geosweep.kernels.dg.systems import gearbox

    print(f"gearbox, seed 2, h = 0.1, T = {T:g} ({T / 0.1:.0f} steps), best of {REPEATS}")
    print("| form | method | µs/step | Newton mean / max | max rel ΔH |")
    print("|---|---|---|---|---|")
    req = RunRequest(T=T, dt_out=T / 10, h=0.1)
    for form in ("reduced", "canonical"):
        model = gearbox(form, 2)
        for name in ("dg_gonzalez", "dg_avf", "dg_itoh_abe"):
            F.run(model, name, RunRequest(T=1.0, dt_out=1.0, h=0.1), {})  # compiled / loaded
            best = np.inf
            for _ in range(REPEATS):
                t0 = time.perf_counter()
                v = F.run(model, name, req, {}).values
                best = min(best, time.perf_counter() - t0)
            its = f"{v['newton_iterations_mean']:.2f} / {v['newton_iterations_max']}"
            us = best / (T / 0.1) * 1e6
            print(f"| {form} | `{name}` | {us:.1f} | {its} | {v['max_rel_energy_error']:.1e} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--T", type=float, default=10.0, help="quartic run length")
    ap.add_argument("--chain-N", type=int, default=20)
    ap.add_argument("--chain-T", type=float, default=0.5)
    ap.add_argument("--figure", metavar="STORE", help="draw the gearbox long-run figure from STORE and exit")
    ap.add_argument("--out", default="benchmarks/dg_gearbox_long.png")
    ap.add_argument("--gearbox", type=float, metavar="T", help="time the gearbox solves to T and exit")
    a = ap.parse_args()
    if a.gearbox:
        gearbox_solves(a.gearbox)
        return
    if a.figure:
        figure(a.figure, a.out)
        return
    dgs = ["dg_gonzalez", "dg_avf", "dg_itoh_abe"]
    bench("quartic (004 §4.1)", quartic(), a.T, 0.01, dgs + ["implicit_midpoint", "rk4_skew"], {})
    bench(f"pendulum chain, Lie–Poisson form, N = {a.chain_N}", chain_lp(a.chain_N), a.chain_T, 0.01,
          ["dg_gonzalez", "dg_avf"], {"quad_points": 4})  # fmt: skip


if __name__ == "__main__":
    main()
