"""What an edit of one kernel module costs to recompile: ``load_builtins()`` (every built-in family
imported, what it compiles at import) cold, warm, and warm after an edit of one module.

Numba's cache is a fresh ``NUMBA_CACHE_DIR``; each edited module gets a comment line appended (its
code is unchanged, its source is not) and is restored afterwards, so the run leaves the tree as it
found it. The stale-callee guard (:func:`geosweep.kernels._jit.drop_stale_cache`) drops the cache
entries of the modules whose import closure holds the edited file; with a fingerprint over the whole
tree every edit cost the cold time. The table gives each run's wall and CPU seconds (the child
process) and the number of cache files the guard dropped before it.

Run: ``python benchmarks/bench_recompile.py [--edit kernels/torus/forces.py ...]``.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EDITS = ["kernels/torus/forces.py", "kernels/s2/steps.py", "kernels/dg/steppers.py", "kernels/linalg.py"]
CHILD = "from geosweep.kernels.registry import load_builtins; load_builtins()"


def _cache_files(cache: Path) -> int:
    return sum(1 for _ in cache.rglob("*.nbi")) + sum(1 for _ in cache.rglob("*.nbc"))


def timed(cache: Path) -> tuple[float, float, int]:
    """(wall s, CPU s, cache files the guard dropped) of one ``load_builtins()`` in a fresh process;
    the guard runs first in a process of its own (``import geosweep.kernels._jit``) to count its drops."""
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    files = _cache_files(cache)
    subprocess.run([sys.executable, "-c", "import geosweep.kernels._jit"], env=env, check=True)
    dropped = files - _cache_files(cache)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", CHILD], env=env, check=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), dropped


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edit", nargs="*", default=EDITS, help="modules to edit, one after another")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="geosweep-bench-recompile-") as tmp:
        cache = Path(tmp) / "numba"
        rows = [("cold", *timed(cache)), ("warm", *timed(cache))]
        for rel in args.edit:
            path = ROOT / rel
            text = path.read_text()
            try:
                path.write_text(text + "\n# bench_recompile edit\n")
                rows.append((f"after editing {rel}", *timed(cache)))
            finally:
                path.write_text(text)
            timed(cache)  # the restore is an edit too: warm again before the next one
        print(f"{'run':48s} {'wall s':>8s} {'CPU s':>8s} {'files dropped':>14s}")
        for name, wall, cpu, files in rows:
            print(f"{name:48s} {wall:8.1f} {cpu:8.1f} {files:14d}")


if __name__ == "__main__":
    main()
