"""Waiting for a run's first Dask worker without waiting blind: what the batch system says, then a timeout.

An adaptive or batch cluster starts workers only when its jobs run. While none has connected, the run
logs every :data:`REPORT_EVERY` seconds what the cluster's describer says (for Slurm/PBS jobs:
their ids, state and the scheduler's reason, e.g. ``PENDING (Resources)``, and the paths of their
logs; registered by whoever started the cluster, :func:`describing`). It stops with
:class:`NoWorkerConnected` (one line, exit 1) when the describer reports that no job of the cluster
is left in the queue (refused by the batch system, or ended without a worker connecting: a wrong
Python, a failing prologue — see the job logs), or after ``GEOSWEEP_FIRST_WORKER_TIMEOUT`` seconds
(default :data:`FIRST_WORKER_SECONDS`; ``0`` waits as long as it takes, e.g. for a long queue).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from geosweep import config
from geosweep.sweeps.liveness import WorkersUnresponsive

ENV = config.FIRST_WORKER_TIMEOUT.name
#: default seconds to wait for a first worker
FIRST_WORKER_SECONDS: float = config.FIRST_WORKER_TIMEOUT.default
#: seconds between the lines that say what the cluster's jobs are doing
REPORT_EVERY = 60.0
#: seconds a cluster may have no job in the queue before the run stops (submission takes a moment)
NO_JOB_GRACE = 20.0


class JobsState(NamedTuple):
    """What a describer says: one line, and whether any job of the cluster is still queued or running."""

    line: str
    alive: bool


class NoWorkerConnected(WorkersUnresponsive):
    """No Dask worker connected: the jobs were refused, ended, or waited past the timeout (exit 1)."""


#: process-wide state: the describers of the clusters this process waits on now (:func:`describing`)
_DESCRIBERS: list[Callable[[], JobsState | None]] = []


@contextlib.contextmanager
def describing(describer: Callable[[], JobsState | None]) -> Iterator[None]:
    """Use ``describer`` (say what the cluster's jobs are doing) while waiting for workers in this block."""
    _DESCRIBERS.append(describer)
    try:
        yield
    finally:
        _DESCRIBERS.remove(describer)


def first_worker_seconds() -> float:
    """``GEOSWEEP_FIRST_WORKER_TIMEOUT`` (seconds >= 0; 0: no limit) or :data:`FIRST_WORKER_SECONDS`."""
    return float(config.FIRST_WORKER_TIMEOUT.get())


def _state() -> JobsState | None:
    for describer in reversed(_DESCRIBERS):
        with contextlib.suppress(Exception):
            return describer()
    return None


def wait(client: Any, log: Callable[[str], None]) -> None:
    """Return once a worker is connected to ``client``'s scheduler; raise :class:`NoWorkerConnected` as
    the module docstring says."""
    limit = first_worker_seconds()
    t0 = last = time.monotonic()
    no_job_since: float | None = None
    while True:
        with contextlib.suppress(TimeoutError):
            client.wait_for_workers(1, timeout=2.0)
            return
        now = time.monotonic()
        state = _state()
        if state is not None and not state.alive:
            no_job_since = no_job_since or now
            if now - no_job_since >= NO_JOB_GRACE:
                raise NoWorkerConnected(f"no Dask worker connected and no job of the cluster is left: {state.line}")
        else:
            no_job_since = None
        if limit and now - t0 >= limit:
            said = f": {state.line}" if state is not None else ""
            raise NoWorkerConnected(
                f"no Dask worker connected within {limit:.0f} s ({ENV}){said}; rerun the same command to resume"
            )
        if state is not None and now - last >= REPORT_EVERY:
            log(f"still waiting for a first Dask worker: {state.line}")
            last = now
