"""Growing a finished store to a longer T (:mod:`geosweep.sweeps.extension`): what it costs and what it rewrites.

Run: ``python benchmarks/bench_extend.py [--steps N] [--cells C] [--repeats R]``. Three rows:

* **MD cell**: one sphere-MD cell (642 molecules, explicit VI, h = 0.005) run to N steps, kept
  (its final carry), then continued by N more steps — against the second half of one 2N-step
  run of the same cell (min of R repeats each, interleaved); the continued final state is
  checked bitwise equal to the 2N-step run's.
* **store of C cells**: a C-cell store (pendulum chains, one seed axis) extended to twice its T:
  every object of the store is fingerprinted (bytes and mtime) before and after, and the
  objects of the time-axis arrays that held samples are counted as rewritten or untouched.
* **carry bytes**: bytes of the kept carries per cell for one small store of each family
  (``--carry-scale K``: its T times K), their share of the store's values (chunk objects) and carries on disk.

The machine is shared: the default N (2000 steps) and C (10 000) are small; the issue's row
asks for 10⁶ steps (``--steps 1000000 --repeats 1``, ~20 min of CPU; or the two legs as separate
processes, ``--leg extension|half --out F.npz`` then ``--compare E.npz H.npz``). Each MD leg reports
the CPU time of its process beside the wall time.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

import numpy as np  # noqa: E402

from geosweep.kernels.core.trajectory import Trajectory  # noqa: E402
from geosweep.sweeps.engine import run_sweep  # noqa: E402
from geosweep.sweeps.plan import make_plan  # noqa: E402

MD = {"name": "md", "system": "lj_sphere", "integrators": ["explicit_vi"], "h": [0.005], "dt_out": 0.5}


def _start(T: float) -> Trajectory:
    plan = make_plan({**MD, "T": T})
    cell = plan.grid.first_cell
    request, options = plan.request(cell)
    return plan.famdef.start(plan.model(cell), "explicit_vi", request, options)  # type: ignore[misc]


def _timed(traj: Trajectory, steps: int | None = None) -> tuple[float, float]:
    """Advance ``traj`` (``steps`` accepted steps, or to its T); return (wall s, CPU s of this process)."""
    w0, c0 = time.perf_counter(), time.process_time()
    traj.advance(steps)
    return time.perf_counter() - w0, time.process_time() - c0


def extension_leg(steps: int) -> tuple[tuple[float, float], Trajectory]:
    """An N-step MD cell run to its T, then continued from its final carry by N more steps:
    ((wall s, CPU s) of the continuation, the continued trajectory)."""
    h = MD["h"][0]
    one = _start(steps * h)
    one.advance()
    grown = Trajectory.grown(one.stepper, one.checkpoint(), _start(2 * steps * h))
    return _timed(grown), grown


def half_leg(steps: int) -> tuple[tuple[float, float], Trajectory]:
    """A 2N-step run of the same cell: ((wall s, CPU s) of its second half, the trajectory)."""
    full = _start(2 * steps * MD["h"][0])
    full.advance(steps)
    return _timed(full), full


def _final(traj: Trajectory) -> dict[str, np.ndarray]:
    return {"S": traj.S, "acc": traj.acc, "out": traj.out}


def md_line(steps: int, ext: tuple[float, float], half: tuple[float, float], equal: bool) -> str:
    (ew, ec), (hw, hc) = ext, half
    return (
        f"MD cell (642 molecules, explicit VI): {steps} steps more from the carry {ec:.2f} s CPU ({ew:.2f} s wall); "
        f"second half of a {2 * steps}-step run {hc:.2f} s CPU ({hw:.2f} s wall); ratio {ec / hc:.3f} CPU, "
        f"{ew / hw:.3f} wall; {1e3 * hc / steps:.3f} ms CPU per step; final state, accumulators, samples "
        + ("bitwise equal" if equal else "DIFFER")
    )


def md_row(steps: int, repeats: int) -> str:
    """Continue a finished N-step MD cell by N steps vs the second half of one 2N-step run (min
    over ``repeats`` by CPU time, interleaved). Each leg is timed in wall and in CPU seconds of this
    process (``time.process_time``; the driver runs on this thread only), so a shared machine's
    load shows as wall > CPU."""
    ext, half, equal = [], [], True
    for _ in range(repeats):
        e, grown = extension_leg(steps)
        f, full = half_leg(steps)
        ext.append(e)
        half.append(f)
        equal &= all(
            np.array_equal(a, b, equal_nan=True) for a, b in zip(_final(grown).values(), _final(full).values())
        )
        print(f"  repeat: extension {e}, second half {f} (wall s, CPU s)", flush=True)
    return md_line(steps, min(ext, key=lambda x: x[1]), min(half, key=lambda x: x[1]), equal)


def md_leg(steps: int, leg: str, out: str) -> None:
    """One leg in this process (``--leg extension|half``; two processes run the legs side by side
    on a shared machine), its timing and final arrays saved to ``out`` (``--compare`` reads two)."""
    timing, traj = (extension_leg if leg == "extension" else half_leg)(steps)
    np.savez(out, wall=timing[0], cpu=timing[1], steps=steps, **_final(traj))
    print(f"{leg}: {steps} steps, {timing[0]:.2f} s wall, {timing[1]:.2f} s CPU", flush=True)


def md_compare(ext_file: str, half_file: str) -> str:
    with np.load(ext_file) as e, np.load(half_file) as f:
        equal = all(np.array_equal(e[k], f[k], equal_nan=True) for k in ("S", "acc", "out"))
        return md_line(int(e["steps"]), (float(e["wall"]), float(e["cpu"])), (float(f["wall"]), float(f["cpu"])), equal)


def _fingerprints(store: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(store)): (p.stat().st_mtime_ns, p.stat().st_size) for p in store.rglob("*") if p.is_file()
    }


def _old_rows_only(store: Path, key: str, g, n_old: int) -> bool:
    """Whether the chunk object ``key`` (``NAME/c/i/j/…``) holds only time rows before ``n_old``."""
    name, _, *coords = key.split("/")
    arr = g[name]
    k = list(arr.metadata.dimension_names).index("time")
    return (int(coords[k]) + 1) * arr.chunks[k] <= n_old


def store_row(cells: int, integrators: list[str], T: float = 0.1) -> str:
    """Extend a ``cells``-cell store from ``T`` to twice it; count the objects rewritten, of all it holds."""
    import zarr

    from geosweep import sweeps

    spec = {
        "name": "grow-store",
        "system": "pendulum_chain",
        "integrators": integrators,
        "h": [0.01],
        "T": T,
        "dt_out": 0.05,
        "params": {"N": 2, "ic": "random", "seed": list(range(cells))},
    }
    if any(i != "rkmk4" for i in integrators):
        spec["tol"] = [1e-6]
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "s.zarr"
        run_sweep(spec, store, serial=True)
        before = _fingerprints(store)
        g = zarr.open_group(str(store), mode="r")
        timed = [n for n, a in g.arrays() if "time" in (a.metadata.dimension_names or ())]
        samples = {k for k in before if k.split("/")[0] in timed and "/c/" in k}
        n_old = int(g["time"].shape[0])
        time.sleep(0.01)
        t0 = time.perf_counter()
        sweeps.extend(store, T=2 * T, serial=True)
        wall = time.perf_counter() - t0
        g = zarr.open_group(str(store), mode="r")
        old_only = {k for k in samples if _old_rows_only(store, k, g, n_old)}
        after = _fingerprints(store)
        rewritten = sum(1 for k in old_only if after.get(k) != before[k])
        mixed = sum(1 for k in samples - old_only if after.get(k) != before[k])
        other = sum(1 for k in before if k not in samples and after.get(k) != before[k])
        new = len(set(after) - set(before))
        held = sum(1 for k in before if k in after)
        changed = sum(1 for k in before if after.get(k) != before[k])
    return (
        f"store of {cells} cells ({', '.join(integrators)}), T {T:g} -> {2 * T:g} in {wall:.1f} s: {changed} of "
        f"the {held} objects it held rewritten, of which {rewritten} of "
        f"{len(old_only)} objects holding only samples up to the old T rewritten; {mixed} objects holding the "
        f"sample at the old T and new ones written; {new} new objects; {other} other objects rewritten "
        "(flags, summaries, metadata, carries)"
    )


def _data_bytes(store: Path) -> int:
    """Bytes of the store's chunk objects (``NAME/c/…``): its values without metadata or carries."""
    return sum(p.stat().st_size for p in store.glob("*/c/**/*") if p.is_file())


def _zipped(store: Path) -> str:
    """``compressed`` when the store's carry objects are deflated (large cells), else ``uncompressed``."""
    import zipfile

    kinds = {i.compress_type for p in (store / "_carries").iterdir() for i in zipfile.ZipFile(p).infolist()}
    return "compressed" if zipfile.ZIP_DEFLATED in kinds else "uncompressed"


def carry_rows(scale: float = 1.0) -> list[str]:
    """Carry bytes per cell for each family's small test store, its T times ``scale`` (more samples)."""
    from geosweep.sweeps.carries import carry_bytes
    from geosweep.sweeps.store import StoreRef, cell_bytes
    from tests.test_extend import FAMILIES

    rows = []
    for family, spec in sorted(FAMILIES.items()):
        with tempfile.TemporaryDirectory() as tmp:
            store = Path(tmp) / "s.zarr"
            spec = {**spec, "T": spec["T"] * scale}
            run_sweep({"name": f"c-{family}", **spec}, store, serial=True)
            ref = StoreRef.of(store)
            n = int(np.sum(np.asarray(zarr_status(store)) >= 0))
            values = sum(cell_bytes(make_plan({"name": f"c-{family}", **spec})).values())
            per, data = carry_bytes(ref) / n, _data_bytes(store) / n
            rows.append(
                f"carry {family}: {per / 1e3:.1f} kB per cell, {_zipped(store)}; {100 * per / (per + data):.0f} % of "
                f"the store's values and carries ({data / 1e3:.1f} kB per cell of chunk objects beside them) "
                f"(the cell's stored values: {values / 1e3:.1f} kB uncompressed; "
                f"{spec['T'] / spec['dt_out'] + 1:.0f} samples)"
            )
    return rows


def zarr_status(store: Path):
    import zarr

    return zarr.open_group(str(store), mode="r")["status"][...]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--cells", type=int, default=10_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--store-integrators", nargs="+", default=["rkmk4"], help="the store row's integrators")
    ap.add_argument("--store-T", type=float, default=0.1, help="the store row's first T (extended to twice it)")
    ap.add_argument("--carry-scale", type=float, default=1.0, help="the carry rows' T, times the test specs' T")
    ap.add_argument("--skip", nargs="*", default=[], choices=["md", "store", "carries"])
    ap.add_argument("--leg", choices=["extension", "half"], help="run one MD leg only, saved to --out")
    ap.add_argument("--out", help="the .npz an MD --leg writes")
    ap.add_argument("--compare", nargs=2, metavar=("EXTENSION_NPZ", "HALF_NPZ"), help="the MD row of two legs")
    args = ap.parse_args()
    if args.leg:
        md_leg(args.steps, args.leg, args.out)
        return
    if args.compare:
        print(md_compare(*args.compare), flush=True)
        return
    if "md" not in args.skip:
        print(md_row(args.steps, args.repeats), flush=True)
    if "store" not in args.skip:
        print(store_row(args.cells, args.store_integrators, args.store_T), flush=True)
    if "carries" not in args.skip:
        for row in carry_rows(args.carry_scale):
            print(row, flush=True)


if __name__ == "__main__":
    main()
