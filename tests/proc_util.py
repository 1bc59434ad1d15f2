"""Helpers of the real-process tests (stop/continue, kill, orphaned tasks): the CLI as a child
process, waiting on a condition, a process's stopped state, a free port and a real Dask cluster
of ``dask scheduler`` and ``dask worker`` processes on loopback."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path


def geosweep(*args: str) -> list[str]:
    """The command line of ``geosweep ARGS`` run from this checkout (``python -m geosweep.flows.cli``)."""
    return [sys.executable, "-m", "geosweep.flows.cli", *args]


def wait_until(
    predicate: Callable[[], object], what: str = "", proc: subprocess.Popen | None = None, timeout: float = 240.0
) -> None:
    """Poll ``predicate`` (every 10 ms) until it is true; fail if ``proc`` ends first or after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert proc is None or proc.poll() is None, f"{what}: the process ended ({proc.args})"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def stopped(pid: int) -> bool:
    """True if process ``pid`` is stopped (SIGSTOP: state ``T`` in ``/proc/PID/stat``)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"
    except OSError:
        return False


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dask_cluster(tmp_path: Path, env: dict[str, str], workers: int) -> Iterator[tuple[str, Path]]:
    """A real ``dask scheduler`` and ``workers`` geosweep ``dask worker`` processes (two threads, one
    ``geosweep-slice`` resource each, no nanny) on 127.0.0.1, in sessions of their own: yields the
    scheduler's address and their common log file; every process is killed at the end, workers first."""
    address = f"tcp://127.0.0.1:{free_port()}"
    log_path = tmp_path / "cluster.log"
    procs: list[subprocess.Popen] = []
    with open(log_path, "w") as log:
        start = {"env": env, "stdout": log, "stderr": subprocess.STDOUT, "start_new_session": True}
        try:
            scheduler = [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1"]
            port = address.rsplit(":", 1)[1]
            procs.append(subprocess.Popen([*scheduler, "--port", port, "--dashboard-address", ":0"], **start))
            wait_for_scheduler(address, procs[0])
            worker = [sys.executable, "-m", "distributed.cli.dask_worker", address, "--no-nanny", "--no-dashboard"]
            for _ in range(workers):
                procs.append(subprocess.Popen([*worker, "--nthreads", "2", "--resources", "geosweep-slice=1"], **start))
            yield address, log_path
        finally:
            # workers before the scheduler: a worker outliving it logs its failed heartbeat's traceback
            for p in reversed(procs):
                if p.poll() is None:
                    p.kill()
                    p.wait(10)


def store_files(path: str | os.PathLike) -> dict[str, tuple[int, int]]:
    """Every file under ``path`` as the calling process sees it: relative path -> (mtime_ns, size)."""
    return {
        os.path.relpath(os.path.join(d, f), path): (
            os.stat(os.path.join(d, f)).st_mtime_ns,
            os.path.getsize(os.path.join(d, f)),
        )
        for d, _, files in os.walk(path)
        for f in files
    }


def wait_for_scheduler(address: str, proc: subprocess.Popen, seconds: float = 120) -> None:
    """Until the scheduler process at ``tcp://host:port`` accepts connections: a run started before
    that is refused at once (``geosweep run --address`` checks the address before any work)."""
    import socket

    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    t0 = time.monotonic()
    while True:
        assert proc.poll() is None, "the scheduler exited"
        try:
            with socket.create_connection((host, int(port)), timeout=1):
                return
        except OSError:
            assert time.monotonic() - t0 < seconds, f"no scheduler at {address} after {seconds} s"
            time.sleep(0.1)


def seeded_numba_cache(dest: Path) -> str:
    """``dest`` as a ``NUMBA_CACHE_DIR`` holding this checkout's compiled kernels (copied from their
    ``__pycache__`` folders, which the suite warms first, with the source mark beside them), for a test
    of a cluster whose workers are told to use their own cache: they then load its kernels, not compile
    them again (a cold compile costs tens of CPU seconds per worker)."""
    import shutil

    from numba.core.caching import _CacheLocator

    import geosweep.kernels

    root = Path(geosweep.kernels.__file__).resolve().parent
    for package in sorted({p.parent for p in root.rglob("*.py")}):
        target = dest / _CacheLocator.get_suitable_cache_subpath(str(package / "x.py"))
        target.mkdir(parents=True, exist_ok=True)
        cache = package / "__pycache__"
        for f in [*cache.glob("*.nbi"), *cache.glob("*.nbc"), *cache.glob("*.sha1")]:
            shutil.copy2(f, target / f.name)
    return str(dest)
