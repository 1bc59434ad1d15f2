"""What a batched slice would cost: the design measured before it is built (issue 21).

Run: ``python benchmarks/bench_batch.py [--cells 4000] [--slices 8]``. The cells of issue 21's ensemble
(``bench_scale.spec``: 3-link chains, ``rkmk4`` and ``cf4``, 0.1 ms cells), no Dask and no store:

* **kernels**: each cell's own compiled call (``Trajectory.advance``) against one ``nogil`` call per
  stepper kind over the cells' arrays stacked along a leading axis (:func:`drive_rows`: a loop calling
  the family's compiled driver through its addressed entry, the same machine code);
* **collect**: the family's ``collect`` cell by cell against the same stored values computed on the
  stacked arrays with NumPy (:func:`collect_stacked`);
* **threads**: compute only, the cells in ``--slices`` slices on a pool of 1 and of 2 threads:
  ``compute_slice`` as the engine runs it; set-up, one call, ``collect`` per cell; set-up, one call,
  stacked collect.

Every batched value is compared bitwise with the engine's (the script stops on a difference). Nothing
here is used by the engine.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from numba import njit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
warnings.filterwarnings("ignore")

from geosweep.kernels.core import fastcall  # noqa: E402
from geosweep.kernels.core import layout as L  # noqa: E402
from geosweep.kernels.core.addressed import _functions  # noqa: E402
from geosweep.sweeps.engine import compute_slice  # noqa: E402
from geosweep.sweeps.gc_policy import fewer_collections  # noqa: E402
from geosweep.sweeps.store import StoreRef  # noqa: E402

#: a trajectory's arrays in the driver's order (those after ``p`` follow ``red``)
ARRAYS = ("ictl", "fctl", "S", "Sn", "Sd", "work", "iwork", "acc", "info", "sio", "obs", "obs2", "out", "env", "snaps")
NO_LIMIT = np.int64(np.iinfo(np.int64).max)


@njit(nogil=True, error_model="numpy")
def drive_rows(addrs, tref, meth, ictl, fctl, k_stop, t_stop, S, Sn, Sd, p, work, iwork, red, acc, info, sio, obs,
               obs2, out, env, snaps):  # fmt: skip
    """The driver named by ``addrs``/``tref`` on every row of the stacked arrays (one stepper kind)."""
    drive, step, observe, dense, cb = _functions(addrs, tref)
    for k in range(S.shape[0]):
        drive(step, observe, dense, cb, meth, ictl[k], fctl[k], k_stop, t_stop, S[k], Sn[k], Sd[k], p[k], work[k],
              iwork[k], red, acc[k], info[k], sio[k], obs[k], obs2[k], out[k], env[k], snaps[k])  # fmt: skip
    return 0


def advance_stacked(trajs: list) -> None:
    """Advance every trajectory to its end: one :func:`drive_rows` call per stepper kind (same functions,
    method record, reductions and array shapes), the rows copied back into each trajectory."""
    kinds: dict[tuple, list] = {}
    for t in trajs:
        b = fastcall.binding(t.stepper)
        if b is None or b.at is None:
            raise RuntimeError("no addressed driver entry for this stepper")
        sp = t.stepper
        shapes = tuple(getattr(t, n).shape for n in ARRAYS) + (sp.p.shape,)
        kinds.setdefault((id(b.at[1][0]), sp.meth.tobytes(), sp.red.tobytes(), shapes), []).append((t, b))
    for members in kinds.values():
        t0, b0 = members[0]
        st = {n: np.stack([getattr(t, n) for t, _ in members]) for n in ARRAYS}
        p = np.stack([t.stepper.p for t, _ in members])
        addrs, tref = b0.at[1][0], b0.at[1][1]
        c0 = time.perf_counter()
        drive_rows(addrs, tref, t0.stepper.meth, st["ictl"], st["fctl"], NO_LIMIT, np.inf, st["S"], st["Sn"],
                   st["Sd"], p, st["work"], st["iwork"], t0.stepper.red, st["acc"], st["info"], st["sio"], st["obs"],
                   st["obs2"], st["out"], st["env"], st["snaps"])  # fmt: skip
        each = (time.perf_counter() - c0) / len(members)
        for k, (t, _) in enumerate(members):
            for n in ARRAYS:
                setattr(t, n, st[n][k])
            t.wall_time += each


def collect_stacked(trajs: list, models: list) -> dict[str, np.ndarray]:
    """The values the ``ts2`` family stores for Lie group cells (``collect``), for every trajectory at
    once: each value with a leading cell axis."""
    K = len(trajs)
    out, env = np.stack([t.out for t in trajs]), np.stack([t.env for t in trajs])
    acc, info = np.stack([t.acc for t in trajs]), np.stack([t.info for t in trajs])
    snaps, S = np.stack([t.snaps for t in trajs]), np.stack([t.S for t in trajs])
    names, n = trajs[0].stepper.obs_names, models[0].n
    cnt = (info[:, L.I_K] + 1).astype(float)
    steps, failed = info[:, L.I_K], info[:, L.I_STATUS] != 0
    E0, E = acc[:, L.A_E0], out[:, :, 0].copy()
    with np.errstate(invalid="ignore", divide="ignore"):
        rel = (E - E0[:, None]) / np.abs(E0)[:, None]
        den = cnt * acc[:, L.A_STT] - acc[:, L.A_ST] * acc[:, L.A_ST]
        slope = np.where(den > 0, (cnt * acc[:, L.A_STE] - acc[:, L.A_ST] * acc[:, L.A_SE]) / den, 0.0)
        max_rel = np.where(E0 != 0.0, acc[:, L.A_MAX_ABS] / np.abs(E0), np.nan)

    def reduced(name: str, what: str = "max") -> np.ndarray:
        b = L.A_OBS + 3 * names.index(name)
        return acc[:, b + 1].copy() if what == "max" else acc[:, b] / (info[:, L.I_K] + 1)

    values = {
        "energy": E,
        "energy_error": E - E0[:, None],
        "rel_energy_error": rel,
        "energy_error_lower": env[:, :, 0].copy(),
        "energy_error_upper": env[:, :, 1].copy(),
        "step_size": np.where(np.isfinite(E), out[:, :, -1], np.nan),
        "E0": E0.copy(),
        "max_abs_energy_error": acc[:, L.A_MAX_ABS].copy(),
        "mean_abs_energy_error": acc[:, L.A_SUM_ABS] / cnt,
        "max_rel_energy_error": max_rel,
        "energy_drift_slope": slope,
        "fail_step": info[:, L.I_FAIL_STEP].copy(),
        "fail_index": info[:, L.I_FAIL_INDEX].copy(),
        "fail_value": acc[:, L.A_FAIL_VALUE].copy(),
        "fail_time": np.where(failed, acc[:, L.A_T], np.nan),
        "steps": steps.copy(),
        "rejected_steps": info[:, L.I_REJECTED].copy(),
        "f_evals": info[:, L.I_EVALS] + np.maximum(S[:, -1] - 1.0, 0.0).astype(np.int64),
        "solver_iterations": info[:, L.I_ITERS].copy(),
        "solver_iterations_max": info[:, L.I_ITERS_MAX].copy(),
        "h_min_used": np.where(steps > 0, acc[:, L.A_HMIN], np.nan),
        "h_max_used": np.where(steps > 0, acc[:, L.A_HMAX], np.nan),
        "final_state": S[:, : 6 * n].reshape(K, n, 6).copy(),
        "snapshot_state": snaps.reshape(K, snaps.shape[1], n, 6).copy(),
    }
    j = names.index("L_x")
    momentum = out[:, :, j : j + 3].copy()
    conserved = np.array([m.g == 0.0 for m in models])
    with np.errstate(invalid="ignore"):
        drift = np.linalg.norm(momentum - momentum[:, :1, :], axis=-1)
    values.update(
        J=out[:, :, j + 2].copy(),
        momentum=momentum,
        momentum_error=np.where(conserved[:, None], drift, np.nan),
        max_J_error=reduced("L_z"),
        max_momentum_error=np.where(conserved, reduced("L_x"), np.nan),
        mean_unit_error=reduced("unit_error", "mean"),
        casimir_error=np.full(out.shape[:2], np.nan),
        max_casimir_error=np.full(K, np.nan),
        newton_iterations_mean=info[:, L.I_ITERS] / np.maximum(steps, 1),
        global_error=np.full(K, np.nan),
    )
    for name in ("unit_error", "tangency_error"):
        c = names.index(name)
        values[name], values[name + "_upper"] = out[:, :, c].copy(), env[:, :, 2 + c].copy()
        values["max_" + name] = reduced(name)
    return values


def same_values(per_cell: list[dict], stacked: dict[str, np.ndarray]) -> None:
    """Raise unless ``stacked`` holds every cell's values bitwise (names, dtypes, bytes)."""
    for i, values in enumerate(per_cell):
        if set(values) != set(stacked):
            raise AssertionError(f"names differ: {sorted(set(values) ^ set(stacked))}")
        for name, x in values.items():
            a, b = np.asarray(x), np.asarray(stacked[name][i])
            if a.dtype != b.dtype or a.tobytes() != b.tobytes():
                raise AssertionError(f"cell {i}: {name} differs")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cells", type=int, default=4000)
    ap.add_argument("--slices", type=int, default=8)
    args = ap.parse_args()
    from bench_scale import warmed_plan  # benchmarks/ is on the path from here on

    plan = warmed_plan(args.cells)
    fam, cells = plan.famdef, list(plan.grid.cells())
    ref = StoreRef.of(str(Path("/nonexistent") / "unused.zarr"))  # compute_slice(fresh=True) never opens it

    def started(part: list) -> list[tuple]:
        jobs = []
        for cell in part:
            request, options = plan.request(cell)
            integrator, model = plan.grid.coords(cell)["integrator"], plan.model(cell)
            jobs.append((model, integrator, fam.start(model, integrator, request, options), options))
        return jobs

    advance_stacked([j[2] for j in started(cells[:16])])  # compiles drive_rows
    with fewer_collections():
        own = started(cells)
        t0 = time.perf_counter()
        for j in own:
            j[2].advance()
        t_own = time.perf_counter() - t0
        stacked = started(cells)
        t0 = time.perf_counter()
        advance_stacked([j[2] for j in stacked])
        t_stacked = time.perf_counter() - t0
        t0 = time.perf_counter()
        per_cell = [fam.collect(*j).values for j in stacked]
        t_collect = time.perf_counter() - t0
        t0 = time.perf_counter()
        together = collect_stacked([j[2] for j in stacked], [j[0] for j in stacked])
        t_together = time.perf_counter() - t0
        same_values([fam.collect(*j).values for j in own], together)
        same_values(per_cell, together)

    n = len(cells)
    print(f"{n} cells of issue 21's ensemble; every batched value bitwise the engine's\n")
    print("| step | cell by cell, µs per cell | batched, µs per cell |\n|---|---|---|")
    print(f"| kernels (the compiled calls) | {t_own / n * 1e6:.1f} | {t_stacked / n * 1e6:.1f} (with stacking) |")
    print(f"| collect | {t_collect / n * 1e6:.1f} | {t_together / n * 1e6:.1f} (with stacking) |")

    def engine(part: list) -> None:
        compute_slice(plan, part, ref, fresh=True)

    def one_call(part: list) -> None:
        jobs = started(part)
        advance_stacked([j[2] for j in jobs])
        for j in jobs:
            fam.collect(*j)

    def one_call_stacked(part: list) -> None:
        jobs = started(part)
        advance_stacked([j[2] for j in jobs])
        collect_stacked([j[2] for j in jobs], [j[0] for j in jobs])

    slices = [cells[i :: args.slices] for i in range(args.slices)]
    print("\n| a slice's cells (compute only) | 1 thread, µs per cell | 2 threads / 1 thread |\n|---|---|---|")
    for label, fn in (
        ("`compute_slice` as the engine runs it", engine),
        ("set-up, kernels in one call, `collect` per cell", one_call),
        ("set-up, kernels in one call, stacked collect", one_call_stacked),
    ):
        best = {1: np.inf, 2: np.inf}
        with fewer_collections():
            for threads in (1, 2, 1, 2):
                t0 = time.perf_counter()
                with ThreadPoolExecutor(threads) as pool:
                    list(pool.map(fn, slices))
                best[threads] = min(best[threads], time.perf_counter() - t0)
        print(f"| {label} | {best[1] / n * 1e6:.0f} | {best[1] / best[2]:.2f}× |")


if __name__ == "__main__":
    main()
