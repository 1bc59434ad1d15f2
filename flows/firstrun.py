"""The first run on a machine: a cold Numba cache and Prefect's temporary server.

Importing the built-in families compiles their kernels (explicit signatures compile eagerly),
about 30 s on 2 cores when the cache is cold, one family after the other. :func:`prepare`
says so once, and compiles the families in parallel (one helper process per family after the
first, each filling the on-disk cache), while Prefect's temporary server starts in a thread.
A stamp in ``~/.cache/geosweep`` records that this kernel source was compiled.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

from flows.output import LOG

#: cold compile of the built-in families with the helpers, measured on 2 cores (in sequence: s2 10 s + 5 s for
#: the driver's specialisations, se3 9 s, ts2 14 s)
COLD_SECONDS = 25


def _stamp() -> Path:
    import numba

    import kernels

    root = Path(kernels.__file__).resolve().parent
    h = hashlib.sha256()
    h.update(f"{numba.__version__} {sys.version} {os.environ.get('NUMBA_CACHE_DIR', '')}".encode())
    for src in sorted(root.rglob("*.py")):
        st = src.stat()
        h.update(f"{src.relative_to(root)} {st.st_mtime_ns} {st.st_size}".encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "geosweep"
    return cache / f"kernels-compiled-{h.hexdigest()[:16]}"


def is_cold() -> bool:
    """True if this kernel source has not been compiled into the Numba cache yet (by geosweep)."""
    try:
        return not _stamp().exists()
    except OSError:
        return True


def mark_warm() -> None:
    try:
        stamp = _stamp()
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.touch()
    except OSError:
        pass


def compile_families() -> None:
    """Compile every built-in family into the on-disk cache: helpers in parallel, the first family here."""
    from kernels.registry import BUILTIN_FAMILIES

    first, *rest = BUILTIN_FAMILIES
    env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
    helpers = [
        subprocess.Popen([sys.executable, "-c", f"import {m}"], env=env, stdout=subprocess.DEVNULL) for m in rest
    ]
    try:
        __import__(first)
    finally:
        for h in helpers:
            h.wait()


def start_prefect_server() -> threading.Thread | None:
    """Start Prefect's temporary server in a thread when no ``PREFECT_API_URL`` is set (else None).

    The flow finds it running; join the thread before calling a flow.
    """
    from flows.deployments import prefect_api_url

    if prefect_api_url() is not None:
        return None

    def start() -> None:
        try:
            from prefect.client.orchestration import get_client

            with get_client(sync_client=True) as client:
                client.api_healthcheck()
        except Exception as e:  # noqa: BLE001 - the flow starts (and reports) the server itself then
            LOG.debug(f"early Prefect server start failed: {e}")

    thread = threading.Thread(target=start, name="geosweep-prefect-start", daemon=True)
    thread.start()
    return thread


def prepare(families: bool = True) -> bool:
    """Say "compiling kernels" and compile in parallel if the cache is cold; returns whether it was."""
    if not families or not is_cold():
        return False
    LOG.info(f"compiling kernels (first run only, ~{COLD_SECONDS} s)")
    compile_families()
    return True
