"""What the CLI and the flows print: log levels, progress lines, interruption, store errors.

* :func:`configure` sets geosweep's own level (``--log-level``/``--quiet``), Prefect's and
  keeps ``distributed`` at WARNING (its import resets the level to INFO, so this imports it
  first; worker processes inherit the setting through the environment).
* :func:`progress_reporter` draws a tqdm bar on a terminal and plain lines otherwise (no ``\\r``
  in log files).
* :class:`Interrupts` turns SIGINT/SIGTERM into one ``KeyboardInterrupt`` (so ``finally`` blocks
  close clusters and the Prefect server) and remembers which signal came.
* :func:`store_problem` checks that a URL store's bucket exists and its endpoint answers, for a
  one-line error instead of a traceback from deep inside the first write.
"""

from __future__ import annotations

import logging
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from geosweep import config
from geosweep.flows.entry import MESSAGE

LOG = logging.getLogger("geosweep")
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
#: object stores whose first path component is a bucket (or container) that must exist
BUCKET_PROTOCOLS = {"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss"}
PREFECT_RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


def quiet_distributed(level: int = logging.WARNING) -> None:
    """``distributed`` logs at ``level`` or above, here and in worker processes started later.

    Not imported here when Dask is not yet (a ``--serial`` run never loads it: ~0.25 s): its import
    reads the level from the environment set here. Once Dask's configuration is read, the import
    would set "distributed" to its configured level (INFO), so it is imported and overridden."""
    config.put("DASK_DISTRIBUTED__LOGGING__DISTRIBUTED", logging.getLevelName(level).lower(), replace=True)
    if "dask" in sys.modules and "distributed" not in sys.modules:
        import distributed  # noqa: F401 - sets "distributed" to its configured level: overridden below

    logging.getLogger("distributed").setLevel(level)


class _Stderr(logging.StreamHandler):
    """Writes to the current ``sys.stderr`` (which may be replaced, e.g. under pytest), with the
    credentials of any URL in a line removed (``https://***@host``: :func:`geosweep.sweeps.credentials.scrub`)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)

    def format(self, record: logging.LogRecord) -> str:
        from geosweep.sweeps.credentials import scrub

        return scrub(super().format(record))


def configure(level: str = "INFO", quiet: bool = False) -> int:
    """Set geosweep's log level (``quiet``: warnings only) and Prefect's and distributed's to match."""
    lvl = logging.WARNING if quiet else getattr(logging, level.upper())
    LOG.setLevel(lvl)
    if not any(isinstance(h, _Stderr) for h in LOG.handlers):
        handler = _Stderr()
        handler.setFormatter(logging.Formatter("geosweep: %(message)s"))
        LOG.addHandler(handler)
        LOG.propagate = False
    # Prefect (read when it is imported, and by flow-run processes): the console shows this level,
    # the API still receives every flow-run log
    config.put("PREFECT_LOGGING_HANDLERS_CONSOLE_LEVEL", logging.getLevelName(lvl), replace=True)
    if lvl <= logging.DEBUG:
        config.put("PREFECT_LOGGING_LEVEL", replace=True)
    quiet_distributed(logging.DEBUG if lvl <= logging.DEBUG else logging.WARNING)
    return lvl


def _fmt_seconds(s: float) -> str:
    s = int(round(s))
    return f"{s // 3600}h{s % 3600 // 60:02d}m" if s >= 3600 else f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def progress_line(p: Any) -> str:
    """``cells 3/12 (25%), 0 failed, elapsed 4s, ETA 12s`` (+ integration steps when known)."""
    pct = 100.0 * p.done / max(p.total, 1)
    parts = [f"cells {p.done}/{p.total} ({pct:.0f}%)", f"{p.failed} failed", f"elapsed {_fmt_seconds(p.elapsed)}"]
    steps_done, steps_total = getattr(p, "steps_done", 0) or 0, getattr(p, "steps_total", 0) or 0
    if steps_total:
        parts.insert(1, f"steps {100.0 * steps_done / steps_total:.0f}%")
    if p.eta is not None and p.done < p.total:
        parts.append(f"ETA {_fmt_seconds(p.eta)}")
    return ", ".join(parts)


def progress_reporter(
    *, enabled: bool = True, tty: bool | None = None, every: float = 10.0, stream=None
) -> tuple[Callable[[Any], None], Callable[[], None]]:
    """A ``progress`` callback and its ``close``: a tqdm bar on a terminal, else one plain line
    at most every ``every`` seconds (and at the start and the end)."""
    stream = stream or sys.stderr
    if not enabled:
        return (lambda p: None), (lambda: None)
    if tty is None:
        tty = stream.isatty()
    if tty:
        from tqdm import tqdm

        state: dict = {"bar": None}

        def hook(p) -> None:
            if state["bar"] is None:
                state["bar"] = tqdm(
                    total=p.total, initial=p.done, unit="cell", desc="cells", dynamic_ncols=True, file=stream
                )
                return
            bar = state["bar"]
            postfix = {"failed": p.failed}
            if getattr(p, "steps_total", 0):
                postfix["steps"] = f"{100.0 * p.steps_done / p.steps_total:.0f}%"
            bar.set_postfix(postfix, refresh=False)
            bar.update(p.done - bar.n)

        def close() -> None:
            if state["bar"] is not None:
                state["bar"].close()

        return hook, close

    last = {"t": -float("inf"), "line": None}

    def plain(p) -> None:
        now = time.monotonic()
        final = p.done >= p.total
        if final or now - last["t"] >= every:
            line = progress_line(p)
            if line != last["line"]:
                print(f"geosweep: {line}", file=stream, flush=True)
                last.update(t=now, line=line)

    return plain, lambda: None


def ignore_sigint_in_worker_process() -> None:
    """In a worker process of ``--processes`` (a multiprocessing child, which imports geosweep's main
    module first), ignore SIGINT: a terminal's Ctrl-C reaches the whole process group, and the driver
    stops its workers itself (no traceback from a worker still importing or running a cell)."""
    mp = sys.modules.get("multiprocessing")
    if mp is not None and mp.current_process().name != "MainProcess":
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, signal.SIG_IGN)


# the console script's main module imports this one: a worker process of ``--processes`` runs it first
ignore_sigint_in_worker_process()


def _deliver_again(signum: int, delay: float = 0.01) -> None:
    """Send ``signum`` to the main thread again soon: a real signal, which also wakes it from a blocking
    wait (``_thread.interrupt_main`` would run the handler only once the wait ends)."""
    time.sleep(delay)
    signal.pthread_kill(threading.main_thread().ident, signum)


#: loggers whose ``isEnabledFor`` ignores :func:`logging.disable` (Prefect's ``SafeLogger`` of its services,
#: e.g. the events worker failing to send a heartbeat once the temporary server has stopped)
SELF_ENABLED_LOGGERS = ("prefect._internal",)


def _self_enabled_loggers() -> list[logging.Logger]:
    def ours(name: str) -> bool:
        return any(name == p or name.startswith(p + ".") for p in SELF_ENABLED_LOGGERS)

    loggers = list(logging.root.manager.loggerDict.items())
    return [logger for name, logger in loggers if isinstance(logger, logging.Logger) and ours(name)]


def quiet_logging() -> None:
    """No log record from here on: :func:`logging.disable`, and the loggers that do not heed it disabled."""
    logging.disable(logging.CRITICAL)
    for logger in _self_enabled_loggers():
        logger.disabled = True


def loud_logging() -> None:
    """Undo :func:`quiet_logging` (an in-process command returns to its caller)."""
    logging.disable(logging.NOTSET)
    for logger in _self_enabled_loggers():
        logger.disabled = False


class Interrupts:
    """SIGINT and SIGTERM raise ``KeyboardInterrupt`` in the main thread and silence logging
    (no shutdown noise); :attr:`signum` says which came. A context manager: on leaving it restores
    the previous handlers (``restore=True``) or ignores later signals, so that the interpreter's
    exit (e.g. stopping Prefect's temporary server) is not cut short.

    No signal is lost: a ``KeyboardInterrupt`` swallowed where Python cannot propagate it (a GC
    callback such as distributed's, a finalizer: "Exception ignored") is raised again at once,
    and every later signal raises again, until the caller calls :meth:`caught` where it handles it."""

    MESSAGE = MESSAGE

    def __init__(self, restore: bool = True) -> None:
        self.signum: int | None = None
        self.said = False  # the one line was printed
        self.restore = restore
        self._previous: dict[int, Any] = {}
        self._previous_hook: Callable[[Any], None] | None = None
        self._closing = False

    def _handle(self, signum: int, frame) -> None:
        self.signum = self.signum or signum
        quiet_logging()
        if not self._closing:
            raise KeyboardInterrupt

    def caught(self) -> None:
        """The interruption reached its handler: later signals no longer cut the shutdown short."""
        self._closing = True

    def _unraisable(self, unraisable: Any) -> None:
        """A swallowed signal exception (ours, or Prefect's ``TerminationSignal``) is not printed but
        delivered again to the main thread: the signal's handler runs again there."""
        exc = unraisable.exc_value
        if isinstance(exc, KeyboardInterrupt) and self.signum is not None:
            signum = self.signum
        elif not isinstance(exc, Exception) and getattr(exc, "signal", None) in (signal.SIGINT, signal.SIGTERM):
            signum = exc.signal
        else:
            (self._previous_hook or sys.__unraisablehook__)(unraisable)
            return
        if not self._closing:  # from another thread: here, in Python code, it would be swallowed again
            threading.Thread(target=_deliver_again, args=(signum,), name="geosweep-signal", daemon=True).start()

    def filter(self, record: logging.LogRecord) -> bool:
        """Prefect's flow engine takes SIGTERM itself during a flow run, logs the crash, then passes the
        signal on to our handler: its crash records are dropped here (the run is still marked Crashed)."""
        if self.signum is None and "termination signal" not in record.getMessage():
            return True
        quiet_logging()
        return False

    def __enter__(self) -> Interrupts:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
            self._previous_hook, sys.unraisablehook = sys.unraisablehook, self._unraisable
        for name in PREFECT_RUN_LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        self._closing = True
        for name in PREFECT_RUN_LOGGERS:
            logging.getLogger(name).removeFilter(self)
        if self.restore:
            for sig, handler in self._previous.items():
                signal.signal(sig, handler)
            if self._previous_hook is not None:
                sys.unraisablehook = self._previous_hook

    @property
    def exit_code(self) -> int:
        return 128 + (self.signum or signal.SIGINT)


class RunFailureFilter(logging.Filter):
    """Drops Prefect's run-log records (and tracebacks) of a failure that geosweep reports itself in one
    line: exceptions of the classes named ``names``. A context manager over :data:`PREFECT_RUN_LOGGERS`."""

    def __init__(self, *names: str) -> None:
        super().__init__()
        self.names = names

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not (type(exc).__name__ in self.names or any(n in record.getMessage() for n in self.names))

    def __enter__(self) -> RunFailureFilter:
        for name in PREFECT_RUN_LOGGERS:
            logging.getLogger(name).addFilter(self)
        return self

    def __exit__(self, *exc) -> None:
        for name in PREFECT_RUN_LOGGERS:
            logging.getLogger(name).removeFilter(self)


def _endpoint_problem(endpoint: str, timeout: float = 5.0) -> str | None:
    """A TCP connection to an object store's endpoint URL, or why it failed (fast, no client retries)."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return None
    except OSError as e:
        return f"cannot reach the store's endpoint {endpoint}: {_short(e)}"


def store_problem(url: str, storage_options: dict | None = None) -> str | None:
    """Why a URL store cannot be used (unreachable endpoint, missing bucket), or None if it can; the
    credentials of a URL in the reason (an ``endpoint_url`` with ``user:password@``) are removed."""
    from geosweep.sweeps.credentials import scrub

    if scrub(url) != url:  # Prefect would record it (the flow's store parameter) and every line print it
        return (
            f"the store URL {scrub(url)} holds credentials (user:password@): pass them by reference in "
            "--storage-options (env:NAME, @file.json), never in the URL"
        )
    problem = _store_problem(url, storage_options)
    return scrub(problem) if problem else None


def _store_problem(url: str, storage_options: dict | None = None) -> str | None:
    if "://" not in url:
        return None
    import fsspec

    so = storage_options or {}
    protocol = url.split("://", 1)[0]
    endpoint = (so.get("client_kwargs") or {}).get("endpoint_url") or so.get("endpoint_url")
    if endpoint and (problem := _endpoint_problem(endpoint)):
        return problem
    where = f" at {endpoint}" if endpoint else ""
    try:
        fs, path = fsspec.core.url_to_fs(url, **so)
        if protocol in BUCKET_PROTOCOLS:
            bucket = path.split("/", 1)[0]
            if not fs.exists(bucket):
                return f"bucket {bucket!r} does not exist{where}, or these credentials cannot see it"
        else:
            fs.exists(path)
    except (ImportError, ValueError) as e:
        return f"cannot use {url}: {_short(e)}"
    except PermissionError as e:
        return f"access to {url}{where} denied: {_short(e)}"
    except Exception as e:  # noqa: BLE001 - any failure to reach the store becomes one line
        return f"cannot reach the store {url}{where}: {_short(e)}"
    return None


def _short(e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else ""
    return f"{type(e).__name__}: {text}"[:300]
