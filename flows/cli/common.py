"""Helpers the ``geosweep`` commands share: the demo spec, store and scheduler checks, the run's
execution (the option types are in :mod:`geosweep.flows.cli.options`)."""

from __future__ import annotations

import argparse
import logging
from importlib import resources

from geosweep.flows.output import LOG, store_problem
from geosweep.sweeps.execution import Execution, SchedulerUnreachable, cluster_config

DEMO_SPEC = "sphere_demo.toml"


def _demo_spec_path() -> str:
    return str(resources.files("geosweep.sweeps").joinpath("examples", DEMO_SPEC))


def _how_to_open(store: str, storage_options=None) -> str:
    # the options may hold credentials: name them (or their reference), never print them
    extra = ", storage_options=STORAGE_OPTIONS)  # the dict given to --storage-options" if storage_options else ")"
    if getattr(storage_options, "reference", None):
        ref = storage_options.reference
        extra = f", storage_options=resolve({ref!r}))  # from geosweep.sweeps.credentials import resolve"
    return (
        f"\nresults: {store}\n"
        "open them with:\n"
        "    import xarray as xr\n"
        f"    ds = xr.open_zarr({store!r}{extra}\n"
        "    ds.max_rel_energy_error.where(ds.status == 0)   # failed cells dropped explicitly\n"
    )


class StoreProblem(RuntimeError):
    """A URL store that cannot be used (missing bucket, unreachable endpoint)."""


def _check_store(store: str, storage_options: dict | None, write: bool = False) -> None:
    """Refuse (one line, exit 2) a URL store that cannot be reached or a local path that cannot
    hold a store: a file, under a file, a non-zarr directory, damaged root metadata, or (``write``) read-only."""
    from geosweep.sweeps.store import StoreRef

    problem = store_problem(store, storage_options) or StoreRef.of(store).problem(write)
    if problem:
        raise StoreProblem(problem)


#: seconds to wait for a TCP connection to ``--address`` before refusing it
SCHEDULER_CONNECT_TIMEOUT = 5.0


def _check_scheduler(address: str | None) -> None:
    """A TCP connection to a ``tcp://host:port`` scheduler within :data:`SCHEDULER_CONNECT_TIMEOUT`,
    before any work (Dask's own client would retry for its whole timeout, then traceback)."""
    if not address:
        return
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(address if "://" in address else f"tcp://{address}")
    if parts.scheme not in ("tcp", "tls"):
        return  # other comms (inproc, ucx …): the client's own timeout applies
    try:
        port = parts.port or 8786
        with socket.create_connection((parts.hostname or "", port), timeout=SCHEDULER_CONNECT_TIMEOUT):
            return
    except (OSError, ValueError) as e:
        reason = f"{type(e).__name__}: {e}" if str(e) else type(e).__name__
        raise SchedulerUnreachable(f"cannot reach the Dask scheduler at --address {address}: {reason}") from None


def _execution(args: argparse.Namespace) -> Execution:
    """The run's :class:`Execution` from the command line, whole: every choice it leaves open (in the
    driver or on Dask, processes or threads, threads per cell, slicing) is made once by ``run_sweep`` on the
    cells left to run (:func:`geosweep.sweeps.worklist.resolve`), which also starts or connects to its
    cluster (:meth:`Execution.connect`: its dashboard link logged). A ``--cluster`` file is read and
    checked now, before any work."""
    execution = Execution.from_args(
        args,
        dashboard=True,
        quiet_workers=LOG.level > logging.DEBUG,
        exit_on_interrupt=getattr(args, "exit_on_interrupt", False),
    )
    if execution.cluster_file:
        cluster_config(execution.cluster_file)
    return execution


def _read_damaged(ref, read):
    """``read()``, or :class:`StoreDamagedError` naming the damage of a store it cannot read (flag arrays
    missing, undecodable chunks or metadata) and the command that repairs it."""
    from geosweep.sweeps.repair import StoreDamagedError, missing_flags
    from geosweep.sweeps.store import StoreMismatchError

    try:
        missing = missing_flags(ref)
        if not missing:
            return read()
        problem = f"its flag array(s) {', '.join(missing)} are missing"
    except StoreMismatchError:
        raise
    except Exception as e:  # noqa: BLE001 - any damage becomes one line
        problem = f"it cannot be read ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})"[:300]
    raise StoreDamagedError(
        f"store {ref.url} is damaged: {problem}. `geosweep verify {ref.url} --repair` (or rerunning the sweep) "
        f"rebuilds the flags and marks damaged cells for recomputation"
    )
