"""The ``geosweep`` command's first instructions: SIGINT/SIGTERM handled before the heavy imports.

Importing the CLI takes ~0.1 s (the parser only; a command's module, with Numba, zarr, Dask or
Prefect, is imported when it runs). Until :class:`geosweep.flows.output.Interrupts` takes over in
:func:`geosweep.flows.cli.main`, a signal prints the one line and leaves at once with 130 (SIGINT) or
143 (SIGTERM): nothing is started or written yet, so there is nothing to close (Python's default would
print a traceback or die silently).
Only the command's own process installs this (the console script or ``python -m geosweep.flows.cli``),
never a program that imports geosweep, nor a ``--processes`` worker (it re-imports the command's
module; the driver stops its workers).

:func:`pause` is a test hook: ``GEOSWEEP_TEST_PAUSE=POINT`` makes the command announce
``geosweep-test: paused at POINT`` on stderr and wait there (``GEOSWEEP_TEST_PAUSE_SECONDS``, default
60 s), so that a test can send a signal at that instant; unset, it costs one environment lookup.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time

from geosweep import config

MESSAGE = "interrupted; rerun the same command to resume"
#: the signals the command turns into the one line, and its exit code 128 + signal number
SIGNALS = (signal.SIGINT, signal.SIGTERM)


def started_as_the_command() -> bool:
    """Whether this process is the ``geosweep`` command itself (not a multiprocessing child of it)."""
    orig = list(getattr(sys, "orig_argv", []))
    if "--multiprocessing-fork" in orig:
        return False
    if os.path.basename(sys.argv[0] if sys.argv else "") == "geosweep":
        return True
    return any(a == "-m" and b == "geosweep.flows.cli" for a, b in zip(orig, orig[1:]))


def _leave(signum: int, frame) -> None:
    os.write(2, f"geosweep: {MESSAGE}\n".encode())
    os._exit(128 + signum)


def install() -> None:
    """In the command's main thread: a signal from now on prints the one line and exits 128 + signal."""
    if threading.current_thread() is threading.main_thread() and started_as_the_command():
        for sig in SIGNALS:
            signal.signal(sig, _leave)


def pause(point: str) -> None:
    """The test hook at ``point`` (see the module doc); returns at once unless the environment names it."""
    try:
        if point not in config.TEST_PAUSE.get():
            return
        seconds = config.TEST_PAUSE_SECONDS.get()
    except config.ConfigError:  # the command refuses it in one line before any work (config.check)
        return
    print(f"geosweep-test: paused at {point}", file=sys.stderr, flush=True)
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.05)  # a signal's handler runs in between (and may raise here)
