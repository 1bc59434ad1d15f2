"""The first run on a machine: a cold Numba cache and Prefect's temporary server.

Importing a family compiles its kernels (explicit signatures compile eagerly) when the Numba
cache is cold: about 15 s for the (S²)ⁿ family on 2 cores, plus about 5 s for the shared driver
(``warmup``). :func:`prepare` loads only the family of the spec's system (see
:func:`kernels.registry.load_for`) and says so once when it compiles; ``geosweep run`` has it
compile in a helper process while it starts Prefect's temporary server in a thread
(:func:`start_prefect_server`), then waits for it (:func:`finish`). Without a spec (``serve``)
every built-in family is compiled, in parallel helper processes.
A stamp per family in ``~/.cache/geosweep`` records that this kernel source was compiled.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

from flows.output import LOG

#: cold compile, measured on 2 cores: one family (s2: import 12 s + the driver's specialisations 5 s), and
#: every built-in family with the helpers of :func:`compile_families`
COLD_SECONDS = {"family": 17, "all": 25}
#: how long the early start of Prefect's temporary server may take while kernels compile (Prefect's own
#: default, 20 s, is too short on 2 busy cores: the flow would then start a second server)
SERVER_START_TIMEOUT = 120

_prepared: list[str] = []


def _stamp(key: str = "all") -> Path:
    import numba

    import kernels

    root = Path(kernels.__file__).resolve().parent
    h = hashlib.sha256()
    h.update(f"{numba.__version__} {sys.version} {os.environ.get('NUMBA_CACHE_DIR', '')}".encode())
    for src in sorted(root.rglob("*.py")):
        st = src.stat()
        h.update(f"{src.relative_to(root)} {st.st_mtime_ns} {st.st_size}".encode())
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "geosweep"
    return cache / f"kernels-compiled-{h.hexdigest()[:16]}-{key}"


def is_cold(key: str = "all") -> bool:
    """True if geosweep has not compiled ``key`` (a family module, or ``all``) from this kernel source yet."""
    try:
        return not (_stamp(key).exists() or _stamp("all").exists())
    except OSError:
        return True


def mark_warm(key: str | None = None) -> None:
    """Record ``key`` (default: what the last :func:`prepare` loaded) as compiled."""
    for k in [key] if key else _prepared:
        try:
            stamp = _stamp(k)
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
            from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

            timeout = max(SERVER_START_TIMEOUT, PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS.value())
            with temporary_settings({PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: timeout}):
                with get_client(sync_client=True) as client:
                    client.api_healthcheck()
        except Exception as e:  # noqa: BLE001 - the flow starts (and reports) the server itself then
            LOG.debug(f"early Prefect server start failed: {e}")

    # not a daemon: a run refused meanwhile (bad cluster file …) waits for the start to end instead of
    # killing the thread inside an extension module at exit (an abort), and Prefect then stops the server
    thread = threading.Thread(target=start, name="geosweep-prefect-start", daemon=False)
    thread.start()
    return thread


def _spec_names(spec_path: str | os.PathLike) -> tuple[str, list[str]] | None:
    """(system, integrators) of a spec file, read without validation (None if it names none)."""
    from sweeps.spec import SpecError, read_spec_file

    try:
        data = read_spec_file(spec_path)
    except SpecError:
        return None  # make_plan reports it
    system, integrators = data.get("system"), data.get("integrators", [])
    if not isinstance(system, str) or not isinstance(integrators, list):
        return None
    return system, [i for i in integrators if isinstance(i, str)]


#: what a compile helper runs: import a family module (compiling its kernels) and its warmup (the driver)
_COMPILE = "import importlib, sys; importlib.import_module(sys.argv[1]).FAMILY.warmup()"
_pending: list[tuple[subprocess.Popen | None, tuple[str, list[str]]]] = []


def prepare(spec_path: str | os.PathLike | None = None, families: bool = True, wait: bool = True) -> bool:
    """Load what a spec needs (every built-in family without one), saying "compiling kernels" if the
    cache is cold; returns whether it was. Call :func:`mark_warm` after the family's ``warmup``.

    ``wait=False``: return at once; :func:`finish` loads the family. With a cold cache and a built-in
    system the family and its warmup compile meanwhile in a helper process (while the caller starts
    Prefect's server), and :func:`finish` waits for it and loads them from the filled cache. The
    caller must not import the family in between.
    """
    from kernels.registry import BUILTIN_SYSTEMS, load_builtins

    _prepared.clear()
    if not families:
        return False
    names = _spec_names(spec_path) if spec_path is not None else None
    key = "all" if names is None else BUILTIN_SYSTEMS.get(names[0], names[0])
    _prepared.append(key)
    cold = is_cold(key)
    if cold:
        LOG.info(f"compiling kernels (first run only, ~{COLD_SECONDS['all' if names is None else 'family']} s)")
    if names is None:
        if cold:
            compile_families()
        load_builtins()
    elif cold and names[0] in BUILTIN_SYSTEMS:
        env = {**os.environ, "NUMBA_NUM_THREADS": "1"}
        helper = subprocess.Popen(
            [sys.executable, "-c", _COMPILE, key], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        _pending.append((helper, names))
    else:
        _pending.append((None, names))  # loading from a warm cache takes seconds too: in finish()
    if wait:
        finish()
    return cold


def finish() -> None:
    """Wait for the compile helper of :func:`prepare` and load its family (now from the cache)."""
    from kernels.registry import load_for

    while _pending:
        helper, names = _pending.pop()
        if helper is not None:
            try:
                helper.wait()
            finally:
                if helper.poll() is None:  # interrupted while waiting
                    helper.kill()
        load_for(*names)  # compiles here only if the helper failed
