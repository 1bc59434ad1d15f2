"""``geosweep demo`` end to end, cold and warm: the figures README.md states.

Each run is the console script in a fresh temporary directory with its own store. A *cold* run
also gets a fresh Numba cache (``NUMBA_CACHE_DIR``), geosweep cache (``XDG_CACHE_HOME``: the
compile stamps) and Prefect home (``PREFECT_HOME``: the temporary server's database and its
migrations), as on a new machine; a *warm* run reuses the caches the previous cold run filled.
Rounds alternate cold, warm, warm; the table gives every run's wall time, its CPU time (the
process and its children: workers, compile helpers, Prefect server) and where the flow began
(the end of compile and server start). Needs the project installed (``geosweep`` on the path).

Run: ``python benchmarks/bench_demo.py [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

_FLOW_BEGIN = re.compile(r"Beginning flow run")


def run_demo(root: Path, caches: Path) -> tuple[float, float, float | None]:
    """(wall s, CPU s, seconds until the flow began) of one ``geosweep demo`` in ``root``."""
    env = {
        **os.environ,
        "NUMBA_CACHE_DIR": str(caches / "numba"),
        "XDG_CACHE_HOME": str(caches / "xdg"),
        "PREFECT_HOME": str(caches / "prefect"),
    }
    env.pop("PREFECT_API_URL", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        ["geosweep", "demo", "--store", str(root / "demo.zarr")],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    began = None
    assert proc.stdout is not None
    for line in proc.stdout:
        if began is None and _FLOW_BEGIN.search(line):
            began = time.perf_counter() - t0
    if proc.wait() != 0:
        raise SystemExit(f"geosweep demo failed (exit {proc.returncode}) in {root}")
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, began


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3, help="cold + 2 warm runs per round (default 3)")
    args = ap.parse_args()
    if shutil.which("geosweep") is None:
        raise SystemExit("geosweep is not on the path: pip install -e . first")
    rows: dict[str, list[tuple[float, float, float | None]]] = {"cold": [], "warm": []}
    print(f"{'run':<6} {'wall s':>7} {'CPU s':>7} {'flow began s':>13}")
    for _ in range(args.rounds):
        caches = Path(tempfile.mkdtemp(prefix="geosweep-bench-demo-caches-"))
        try:
            for kind in ("cold", "warm", "warm"):
                root = Path(tempfile.mkdtemp(prefix="geosweep-bench-demo-"))
                try:
                    wall, cpu, began = run_demo(root, caches)
                finally:
                    shutil.rmtree(root, ignore_errors=True)
                rows[kind].append((wall, cpu, began))
                b = f"{began:13.1f}" if began is not None else f"{'-':>13}"
                print(f"{kind:<6} {wall:7.1f} {cpu:7.1f} {b}", flush=True)
        finally:
            shutil.rmtree(caches, ignore_errors=True)
    print()
    for kind, runs in rows.items():
        walls = [r[0] for r in runs]
        cpus = [r[1] for r in runs]
        print(
            f"{kind}: wall median {statistics.median(walls):.1f} s (min {min(walls):.1f}, max {max(walls):.1f}); "
            f"CPU median {statistics.median(cpus):.1f} s over {len(runs)} runs"
        )


if __name__ == "__main__":
    main()
