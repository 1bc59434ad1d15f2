"""The heartbeat a closing worker breaks is not logged; a running worker's heartbeat failure is."""

from __future__ import annotations

import logging
import sys

from distributed import Client
from distributed.comm.core import CommClosedError

from geosweep.sweeps.execution import local_cluster
from geosweep.sweeps.worker_logs import HEARTBEAT_FAILED, ClosingHeartbeatFilter


def _heartbeat_failure(self) -> logging.LogRecord:
    """The record ``Worker.heartbeat`` logs when its call breaks (``self``: the worker; this frame
    stands for that method's)."""
    try:
        raise CommClosedError("in <TCP (closed) ConnectionPool.heartbeat_worker>: Stream is closed")
    except OSError:
        exc = sys.exc_info()
    return logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, f"{HEARTBEAT_FAILED}.", None, exc)


def _installed() -> list[str]:
    return [type(f).__name__ for f in logging.getLogger("distributed.worker").filters]


def test_a_heartbeat_failure_is_dropped_only_once_its_worker_closes():
    keep = ClosingHeartbeatFilter()
    other = logging.LogRecord("distributed.worker", logging.ERROR, __file__, 1, "Unexpected exception", None, None)
    cluster = local_cluster(2, processes=False)
    try:
        assert "ClosingHeartbeatFilter" in _installed()  # thread workers: installed in this process
        first, second = cluster.workers.values()
        assert keep.filter(_heartbeat_failure(first)) and keep.filter(other)  # running: a real failure, kept
        cluster.sync(first.close)
        assert not keep.filter(_heartbeat_failure(first))  # closed: its broken heartbeat is not news
        assert keep.filter(_heartbeat_failure(second))  # the other one still runs
        assert keep.filter(other)
    finally:
        cluster.close()


def test_local_worker_processes_preload_the_filter():
    cluster = local_cluster(2, processes=True)
    try:
        with Client(cluster) as client:
            assert set(map(tuple, client.run(_installed).values())) == {("ClosingHeartbeatFilter",)}
    finally:
        cluster.close()
