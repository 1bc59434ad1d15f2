"""Waiting for a sweep's Dask futures without waiting forever on a worker that stopped answering.

A cell may run for hours, so progress is not the test: Dask workers send the scheduler a heartbeat
about every second (every few seconds on very large clusters) from their event loop, also while a
kernel runs in a worker thread. A worker whose heartbeat has not arrived for
:func:`unresponsive_seconds` (default :data:`UNRESPONSIVE_SECONDS`; environment variable
``GEOSWEEP_WORKER_TIMEOUT``) is paused (SIGSTOP), swapping or out of memory, or cut off:

* it is named once in a line (``worker tcp://…: no heartbeat for 120 s …``) and the run keeps
  waiting — for it to answer again, or for the scheduler to remove it (its ``worker-ttl``, 5 minutes
  by default) and run its slices on the other workers;
* when every worker of the cluster is silent that long, nothing can progress: the run stops with
  :class:`WorkersUnresponsive` (one line, exit 1; finished cells are kept, a rerun resumes).

With no worker connected (all removed, e.g. a paused one after the scheduler's ``worker-ttl``, or batch
jobs at their walltime) the run says so once and waits for one: an adaptive or batch cluster starts
new workers, maybe after hours in a queue.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from geosweep import config

#: default seconds without a heartbeat after which a worker is reported, and after which a cluster
#: whose workers are all silent stops the run (below the scheduler's default worker-ttl of 300 s)
UNRESPONSIVE_SECONDS: float = config.WORKER_TIMEOUT.default
ENV = config.WORKER_TIMEOUT.name


class WorkersUnresponsive(RuntimeError):
    """No worker of the cluster has sent a heartbeat for the timeout; a rerun resumes the store."""


def unresponsive_seconds() -> float:
    """The timeout: ``GEOSWEEP_WORKER_TIMEOUT`` (seconds, > 0) or :data:`UNRESPONSIVE_SECONDS`."""
    return float(config.WORKER_TIMEOUT.get())


class Heartbeats:
    """The workers' heartbeats as the scheduler records them (``last_seen``), timed on this machine's
    monotonic clock when a value changes (no clock skew between the driver and the scheduler)."""

    def __init__(self, client: Any, timeout: float, log: Callable[[str], None]) -> None:
        self.client, self.timeout, self.log = client, timeout, log
        self._seen: dict[str, tuple[float, float]] = {}  # address → (last_seen value, monotonic time it changed)
        self._reported: set[str] = set()
        self._empty_since: float | None = None

    def check(self) -> None:
        """Report workers silent for the timeout; raise :class:`WorkersUnresponsive` if all are."""
        now = time.monotonic()
        try:
            workers = self.client.scheduler_info(n_workers=-1).get("workers", {})
        except OSError:  # the scheduler's connection is lost: the futures report that
            return
        silent = []
        for addr, info in workers.items():
            last = float(info.get("last_seen") or 0.0)
            old = self._seen.get(addr)
            if old is None or old[0] != last:
                self._seen[addr] = (last, now)
                if addr in self._reported:
                    self._reported.discard(addr)
                    self.log(f"worker {addr} answers again")
            elif now - old[1] >= self.timeout:
                silent.append(addr)
        for addr in set(self._seen) - set(workers):
            del self._seen[addr]
            self._reported.discard(addr)
        for addr in silent:
            if addr not in self._reported:
                self._reported.add(addr)
                self.log(
                    f"worker {addr}: no heartbeat for {self.timeout:.0f} s (paused, out of memory or cut off?); "
                    "its slices wait until it answers or the scheduler removes it"
                )
        self._check_empty(now, workers)
        if workers and len(silent) == len(workers):
            raise WorkersUnresponsive(
                f"no Dask worker has answered for {self.timeout:.0f} s ({', '.join(sorted(silent))}: "
                f"paused, out of memory or cut off?); stopped, finished cells are kept — "
                f"rerun the same command to resume ({ENV} sets this timeout)"
            )

    def _check_empty(self, now: float, workers: dict) -> None:
        """No worker connected: said once, and the run waits (batch jobs at their walltime leave together,
        and their successors may queue for hours)."""
        if workers:
            self._empty_since = None
        elif self._empty_since is None:
            self._empty_since = now
            self.log("no Dask worker connected; waiting for one")


def completed(client: Any, futures: list, log: Callable[[str], None], timeout: float | None = None) -> Iterator:
    """``futures`` as they complete (like ``distributed.as_completed``), checking the workers'
    heartbeats every few seconds meanwhile (:class:`Heartbeats`). Futures the caller appends to
    ``futures`` meanwhile (a resubmitted slice) are waited for too."""
    from distributed import wait
    from distributed.client import FuturesCancelledError

    timeout = unresponsive_seconds() if timeout is None else timeout
    beats = Heartbeats(client, timeout, log)
    poll = min(5.0, timeout / 4)
    left: list = []
    seen = 0
    while True:
        left += futures[seen:]
        seen = len(futures)
        if not left:
            return
        try:
            done, _ = wait(left, timeout=poll, return_when="FIRST_COMPLETED")
        except TimeoutError:
            done = set()
        except FuturesCancelledError:  # cancelled (e.g. the run lost its lease): handed on, as as_completed does
            done = {f for f in left if f.cancelled()}
        if done:
            left = [f for f in left if f not in done]
            yield from done
        beats.check()
