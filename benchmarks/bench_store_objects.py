"""Objects and bytes per cell of a finished store: zarr v3 shards against one chunk object per cell.

Run: ``python benchmarks/bench_store_objects.py [SPEC ...]`` (default: the ``chain_e3`` and
``sphere_demo`` examples). Each spec is run twice on 2 local Dask workers into fresh local
stores — with the default layout (:func:`geosweep.sweeps.store.shard_shape`) and with one cell per shard
(the layout before shards: one object per variable per cell) — and the files are counted:
chunk/shard objects, metadata (``zarr.json``) and all; checkpoints are gone once a store is
complete. Both stores are compared bitwise (the layout changes no value).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import warnings
from importlib import resources
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
warnings.filterwarnings("ignore")

import geosweep.sweeps.store as store_mod  # noqa: E402
from geosweep.sweeps.engine import run_sweep  # noqa: E402
from geosweep.sweeps.plan import make_plan  # noqa: E402
from geosweep.sweeps.store import layout  # noqa: E402


def count(path: Path) -> tuple[int, int, int]:
    """(all files, chunk/shard files, bytes) under a store."""
    files = [p for p in path.rglob("*") if p.is_file()]
    chunks = [p for p in files if "/c/" in p.as_posix() or p.as_posix().endswith("/c")]
    return len(files), len(chunks), sum(p.stat().st_size for p in files)


def main() -> None:
    ap = argparse.ArgumentParser(description="objects and bytes per cell: shards vs one cell per object")
    ap.add_argument("specs", nargs="*", help="spec files or names in sweeps/examples (default: chain_e3, sphere_demo)")
    names = ap.parse_args().specs or ["chain_e3.toml", "sphere_demo.toml"]
    rows = []
    for name in names:
        spec = name if os.path.exists(name) else str(resources.files("geosweep.sweeps").joinpath("examples", name))
        plan = make_plan(spec)
        runnable = sum(1 for c in plan.grid.cells() if plan.grid.applicable(c))
        with tempfile.TemporaryDirectory() as tmp:
            out = {}
            for label, cells in (("shards", layout.SHARD_CELLS), ("one cell per object", 1)):
                saved = layout.SHARD_CELLS, layout.MIN_SHARD_SECONDS
                layout.SHARD_CELLS = cells
                layout.MIN_SHARD_SECONDS = layout.MIN_SHARD_SECONDS if cells > 1 else 0.0
                try:
                    path = Path(tmp) / f"{label.replace(' ', '_')}.zarr"
                    t0 = time.perf_counter()
                    res = run_sweep(plan, path, n_workers=2)
                    wall = time.perf_counter() - t0
                finally:
                    layout.SHARD_CELLS, layout.MIN_SHARD_SECONDS = saved
                assert res.complete, res.errors
                out[label] = (*count(path), wall, path)
            from tests.sweep_util import assert_stores_bitwise_equal

            assert_stores_bitwise_equal(str(out["shards"][4]), str(out["one cell per object"][4]))
        shards = store_mod.shard_shape(plan)
        for label, (files, chunks, size, wall, _) in out.items():
            rows.append(
                f"| {plan.spec.name} | {plan.grid.size} ({runnable}) | {label} "
                f"{'×'.join(map(str, shards)) if label == 'shards' else ''} | {files} | {chunks} | "
                f"{files / plan.grid.size:.2f} | {files / runnable:.2f} | {size / runnable / 1024:.1f} | {wall:.1f} |"
            )
    print(
        "| spec | cells (runnable) | layout | objects | chunk/shard objects | per cell | per runnable cell "
        "| KiB per runnable cell | run s |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
