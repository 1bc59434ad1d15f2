"""``geosweep`` command line: run, demo, extend, serve, validate, status, verify, report, systems.

``run``/``demo`` write to a local path or an fsspec URL (``--store s3://…`` with
``--storage-options``: JSON, or a reference ``env:NAME``/``@FILE``/``profile:NAME`` for credentials,
see :mod:`geosweep.sweeps.credentials`) on a local cluster, a scheduler (``--address``) or a cluster
described in a file (``--cluster FILE``, see :mod:`geosweep.deploy.clusters`); ``extend`` (and ``run --grow``)
continues a finished store to a later T (:mod:`geosweep.sweeps.extension`); ``serve`` serves the
nightly Prefect deployment of a spec (see :mod:`geosweep.flows.deployments`).

Every command takes ``--quiet``, ``--log-level`` and ``--import MODULE`` (custom systems; the
``geosweep.plugins`` entry points are always loaded, see :mod:`geosweep.flows.plugins`).

Exit codes: 0 success (cells whose integration failed are results, not errors), 1 some
slices raised or no Dask worker answered (:mod:`geosweep.sweeps.liveness`) or connected
(:mod:`geosweep.sweeps.first_worker`), 2 the spec, cluster file, options, a plugin, the scheduler address
or the store location were refused, a worker does not see the store (:mod:`geosweep.sweeps.visibility`), the store is
damaged, cannot be written (disk full, read-only) or its ``<store>.lease`` is not a lease file
(one line each), 3 the store belongs to another spec or has
another store format, or another run holds its lease (also ``verify --repair``; a run that lost
its lease to another stops with exit 3, writing nothing more), 130/143 interrupted by
SIGINT/SIGTERM (one line, no traceback; rerun to resume).

One module per command (``flows/cli/run.py`` … ``systems.py``), imported when its command runs
(:data:`COMMANDS`), so that ``--help`` and ``--version`` import only the parser (``parser.py``, its option
types in ``options.py``); helpers in ``common.py``; :mod:`geosweep.flows.cli.exits` is the one table from
exceptions to exit codes.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
from pathlib import Path

from geosweep import config
from geosweep.flows.cli.exits import EXIT_CODES, OptionsError, exit_code
from geosweep.flows.cli.parser import build_parser
from geosweep.flows.output import LOG, Interrupts, configure, loud_logging, quiet_logging
from geosweep.flows.plugins import load_plugins
from geosweep.sweeps.numba_env import numba_env_problem

#: each command's module and function, imported when the command runs: ``--help``, ``--version`` and a
#: command's ``--help`` import none of them (nor xarray, pandas, Dask or Prefect)
COMMANDS = {
    "run": ("geosweep.flows.cli.run", "cmd_run"),
    "demo": ("geosweep.flows.cli.run", "cmd_run"),
    "extend": ("geosweep.flows.cli.extend", "cmd_extend"),
    "serve": ("geosweep.flows.cli.serve", "cmd_serve"),
    "validate": ("geosweep.flows.cli.validate", "cmd_validate"),
    "status": ("geosweep.flows.cli.status", "cmd_status"),
    "systems": ("geosweep.flows.cli.systems", "cmd_systems"),
    "report": ("geosweep.flows.cli.report", "cmd_report"),
    "verify": ("geosweep.flows.cli.verify", "cmd_verify"),
}
#: the names this package re-exports from the modules that define them, read on use (PEP 562)
_LAZY = {
    "DEMO_SPEC": "geosweep.flows.cli.common",
    "StoreProblem": "geosweep.flows.cli.common",
    "_demo_spec_path": "geosweep.flows.cli.common",
    **{name: module for module, name in COMMANDS.values()},
}

__all__ = [
    "COMMANDS",
    "DEMO_SPEC",
    "EXIT_CODES",
    "OptionsError",
    "StoreProblem",
    "build_parser",
    "cmd_extend",
    "cmd_report",
    "cmd_run",
    "cmd_serve",
    "cmd_status",
    "cmd_systems",
    "cmd_validate",
    "cmd_verify",
    "exit_code",
    "main",
]


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_LAZY[name]), name)


def _dispatch(args: argparse.Namespace) -> int:
    """Run the command ``args.command`` (its module imported now); its exit code."""
    module, name = COMMANDS[args.command]
    cmd = getattr(importlib.import_module(module), name)
    if args.command == "run":
        return cmd(args, args.spec)
    if args.command == "demo":
        # read on the package (common's, through __getattr__), where a caller may set its own
        demo_spec = sys.modules[__name__]._demo_spec_path()
        LOG.info(f"demo spec {Path(demo_spec).name}")
        return cmd(args, demo_spec)
    return cmd(args)


def main(argv: list[str] | None = None) -> int:
    # an offline machine cannot send Prefect's telemetry: do not log an error for it
    config.put("PREFECT_SERVER_ANALYTICS_ENABLED")
    if argv is None:  # the console script: every Python process it starts (Dask's spawned workers too)
        # keeps the working directory off sys.path, like firstrun.SAFE_PATH (a multiprocessing.py there
        # must not run in a worker); --import still finds modules there (geosweep.flows.plugins puts it on sys.path)
        config.put("PYTHONSAFEPATH")
    parser = build_parser()
    args = parser.parse_args(argv)
    # the options themselves (dict) for this process; the StorageOptions (reference, or redacted when
    # serialised) for Prefect flow and deployment parameters, which are stored
    args.storage_ref = getattr(args, "storage_options", None)
    args.storage_options = args.storage_ref.options if args.storage_ref is not None else None
    args.exit_on_interrupt = argv is None  # the console script: leave at once after Ctrl-C (see _exit_now)
    if getattr(args, "cluster", None) and (args.address or getattr(args, "serial", False)):
        parser.error("--cluster cannot be combined with --address or --serial")
    with Interrupts(restore=argv is not None) as interrupts:
        try:
            code = _command(args)
        except BaseException as e:
            # a signal may surface as another exception: wrapped by Prefect or pydantic (a
            # PydanticSerializationError of a KeyboardInterrupt), or as a failed flow run
            if interrupts.signum is None and not _interrupted(e):
                raise
            code = None
        if code is None or interrupts.signum is not None:
            code = _say_interrupted(interrupts)
            if argv is not None:  # called in-process (not the console script): logging back on
                loud_logging()
                logging.raiseExceptions = True
                return code
    if argv is None:
        _exit_now(code, interrupts)
    return code


def _command(args: argparse.Namespace) -> int:
    """The command's exit code; a refusal is its one line and its code from :data:`EXIT_CODES`."""
    configure(args.log_level, args.quiet)
    try:
        _check_numba_env()  # before a plugin or a command imports Numba
        for name in load_plugins(args.imports):
            LOG.debug(f"plugin loaded: {name}")
        return _dispatch(args)
    except Exception as e:
        if (code := exit_code(e)) is None:
            raise
        LOG.error(str(e))
        return code


def _interrupted(exc: BaseException | None) -> bool:
    """Whether ``exc`` is, wraps or was raised while handling a ``KeyboardInterrupt`` or a signal
    exception (Prefect's ``TerminationSignal`` has the signal number in ``signal``)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, KeyboardInterrupt) or getattr(exc, "signal", None) in (signal.SIGINT, signal.SIGTERM):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _say_interrupted(interrupts: Interrupts) -> int:
    """The one line of an interrupted command (nothing logged after it); its exit code, 130 or 143."""
    interrupts.caught()  # a second signal no longer cuts the shutdown short
    quiet_logging()  # no shutdown noise from Dask or Prefect after the one line
    logging.raiseExceptions = False  # nor from Prefect's log worker, whose server stops meanwhile
    if not interrupts.said:
        interrupts.said = True
        print(f"geosweep: {Interrupts.MESSAGE}", file=sys.stderr, flush=True)
    return interrupts.exit_code


def _check_numba_env() -> None:
    """Refuse (one line, exit 2) a bad ``GEOSWEEP_*`` variable (:func:`geosweep.config.check`) or a Numba
    threading environment that would fail inside the run."""
    config.check()
    if problem := numba_env_problem():
        raise OptionsError(problem)


def _shutdown_threads() -> None:
    """What the interpreter does first at exit, before the exit handlers: ``threading._shutdown``, the
    callbacks of ``threading._register_atexit`` (Prefect's services drain there, e.g. the log worker
    sends its last records while Prefect's temporary server, stopped by an exit handler, still answers)
    and the join of every non-daemon thread."""
    import threading

    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()


def _exit_now(code: int, interrupts: Interrupts) -> None:
    """Leave without waiting for worker threads still inside a cell (a Numba kernel cannot be
    interrupted; the cell is not marked done and reruns on resume), and without the interpreter's
    finalisation, which restores the default signal handlers while it frees the heap (a signal in
    that ~0.5 s killed the command without its line). Exit handlers (e.g. stopping Prefect's
    temporary server) still run; a signal meanwhile (ignored: they finish) ends in the one line."""
    import atexit

    sys.stdout.flush()
    sys.stderr.flush()
    if interrupts.signum is None:  # a completed command: as the interpreter's exit
        _shutdown_threads()
    else:  # distributed's exit handlers join the worker threads, i.e. wait for their cells to finish
        waits = (
            ("distributed._concurrent_futures_thread", "_python_exit"),
            ("distributed.deploy.spec", "close_clusters"),
        )
        for module, name in waits:
            if (fn := getattr(sys.modules.get(module), name, None)) is not None:
                atexit.unregister(fn)
    atexit._run_exitfuncs()
    if interrupts.signum is not None:
        code = _say_interrupted(interrupts)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
