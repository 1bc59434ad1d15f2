"""What the ``geosweep`` command and the kernels cost before any work: imports (issue 50 item 5).

Run: ``python benchmarks/bench_imports.py [--rounds R] [--rows ...] [--baseline REV] [--importtime]``.

Each row is one whole process, timed from outside (wall and CPU of the child), after one warm-up:

* ``help``: ``geosweep --help``; ``version``: ``geosweep --version``; ``run-help``: ``geosweep run --help``;
* ``kernels``: ``python -c "import geosweep.kernels"``; ``geosweep``: ``python -c "import geosweep"``;
* ``run``: a warm ``geosweep run --no-prefect`` of a one-cell spec (3-link chain, RKMK4, T = 0.1) into
  its default store ``results/tiny.zarr``, removed before each run (so the store is created every time);
  ``serial``: the same run with ``--serial``;
* ``prefect``: the same run on the default path (the Prefect flow and its temporary server);
* ``systems``: ``geosweep systems``; ``systems-cold``: the same on an empty Numba cache (a fresh
  ``NUMBA_CACHE_DIR`` and geosweep stamp directory each run, so the warm-up warms nothing).

The command runs as ``python -m geosweep.flows.cli`` with ``PYTHONPATH`` set to a checkout: this
working tree and, with ``--baseline REV``, that revision exported (``git archive``) into a directory
under the system's temporary directory that is kept, so its Numba cache stays warm between calls.
The trees alternate A B A B … so that the machine's drift affects both alike; the table gives the
median and minimum of each figure. ``--importtime`` prints where the ``run`` row's imports go
(``python -X importtime``: self time summed per top-level package, geosweep per subpackage).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TINY_SPEC = """name = "tiny"
system = "pendulum_chain"
integrators = ["rkmk4"]
h = [0.025]
T = 0.1
dt_out = 0.05

[params]
N = 3
"""
CLI = ["-m", "geosweep.flows.cli"]
ROWS = {
    "help": [*CLI, "--help"],
    "version": [*CLI, "--version"],
    "run-help": [*CLI, "run", "--help"],
    "kernels": ["-c", "import geosweep.kernels"],
    "geosweep": ["-c", "import geosweep"],
    "run": [*CLI, "run", "--no-prefect", "tiny.toml"],
    "serial": [*CLI, "run", "--serial", "tiny.toml"],
    "prefect": [*CLI, "run", "tiny.toml"],
    "systems": [*CLI, "systems"],
    "systems-cold": [*CLI, "systems"],
}
DEFAULT_ROWS = ("help", "version", "run-help", "kernels", "geosweep", "run", "serial")


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def timed(tree: Path, row: str, work: Path) -> tuple[float, float]:
    """(wall s, CPU s of the child and its helpers) of one run of ``row`` on ``tree``, in ``work``."""
    shutil.rmtree(work / "results", ignore_errors=True)
    env = _env(tree)
    cold = tempfile.mkdtemp(prefix="geosweep-bench-cold-") if row.endswith("-cold") else None
    if cold:
        env.update(NUMBA_CACHE_DIR=f"{cold}/numba", XDG_CACHE_HOME=f"{cold}/xdg")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, *ROWS[row]], cwd=work, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if cold:
        shutil.rmtree(cold, ignore_errors=True)
    if p.returncode != 0:
        raise SystemExit(f"{row} on {tree} exited {p.returncode}: {p.stderr[-2000:]}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def export(rev: str) -> Path:
    """A directory holding ``rev``'s files (made once, kept: its Numba cache stays warm)."""
    sha = subprocess.run(["git", "-C", str(ROOT), "rev-parse", rev], capture_output=True, text=True, check=True)
    tree = Path(tempfile.gettempdir()) / f"geosweep-bench-imports-{sha.stdout.strip()[:12]}"
    if not (tree / "geosweep" / "__init__.py").is_file():
        tree.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", sha.stdout.strip()], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


def importtime(tree: Path, work: Path, top: int = 15) -> None:
    """Self import time of the ``run`` row, summed per top-level package (geosweep per subpackage)."""
    shutil.rmtree(work / "results", ignore_errors=True)
    p = subprocess.run([sys.executable, "-X", "importtime", *ROWS["run"]], cwd=work, env=_env(tree),
                       capture_output=True, text=True)  # fmt: skip
    per: dict[str, int] = defaultdict(int)
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line[len("import time:") :].split("|")
        parts = name.strip().split(".")
        per[".".join(parts[:2]) if parts[0] == "geosweep" else parts[0]] += int(self_us)
    total = sum(per.values())
    print(f"\nimports of `run` on {tree}: {total / 1e6:.2f} s in all (self times, -X importtime)")
    for name, us in sorted(per.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {us / 1e3:8.0f} ms  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--rows", nargs="+", choices=list(ROWS), default=list(DEFAULT_ROWS))
    ap.add_argument("--baseline", metavar="REV", help="a git revision to compare with (alternating)")
    ap.add_argument("--importtime", action="store_true", help="also print where the run's imports go")
    args = ap.parse_args()
    trees = {"this tree": ROOT, **({args.baseline: export(args.baseline)} if args.baseline else {})}
    with tempfile.TemporaryDirectory() as tmp:
        works = {label: Path(tmp) / f"w{i}" for i, label in enumerate(trees)}
        for work in works.values():
            work.mkdir()
            (work / "tiny.toml").write_text(TINY_SPEC)
        results: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        for row in args.rows:
            for label, tree in trees.items():
                timed(tree, row, works[label])  # warm-up (a cold Numba cache compiles here)
            for _ in range(args.rounds):
                for label, tree in trees.items():
                    results[row, label].append(timed(tree, row, works[label]))
        print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores, load average "
              f"{' '.join(f'{x:.1f}' for x in os.getloadavg())}, {args.rounds} rounds")  # fmt: skip
        print("| row | tree | wall median (s) | wall min (s) | CPU median (s) |")
        print("|---|---|---|---|---|")
        for (row, label), runs in results.items():
            wall, cpu = [r[0] for r in runs], [r[1] for r in runs]
            print(
                f"| {row} | {label} | {statistics.median(wall):.3f} | {min(wall):.3f} | {statistics.median(cpu):.3f} |"
            )
        if args.importtime:
            for label, tree in trees.items():
                importtime(tree, works[label])


if __name__ == "__main__":
    main()
