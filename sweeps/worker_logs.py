"""Worker-side log hygiene for geosweep's local clusters: a Dask preload (``dask_setup``) and the filter
it installs.

A closing ``distributed.Worker`` stops its heartbeat callback but not a heartbeat already waiting for
the scheduler's answer; closing its connection pool then breaks that call, and the worker logs
"Failed to communicate with scheduler during heartbeat." at ERROR level with a traceback. After
Ctrl-C with ``--processes`` that traceback reached the terminal before geosweep's one line (1 run
in 2 with the other core busy, tests/test_cli_output.py). It says nothing about the run: the
worker is closing because geosweep closes it. :class:`ClosingHeartbeatFilter` drops exactly that
record, and only when the worker that logged it is closing or closed (named by the record's
traceback; without one, when every worker of this process is); a heartbeat failure of a running
worker is still logged.
"""

from __future__ import annotations

import logging
from typing import Any

#: the message ``distributed.worker`` logs when a heartbeat call fails with an ``OSError``
HEARTBEAT_FAILED = "Failed to communicate with scheduler during heartbeat"
#: this module's name, the ``preload`` of a local cluster's worker processes
PRELOAD = __name__


def _logging_worker(record: logging.LogRecord) -> Any:
    """The ``distributed.Worker`` whose method caught the record's exception (its traceback's first
    frame: ``Worker.heartbeat``), or None."""
    from distributed import Worker

    tb = record.exc_info[2] if record.exc_info else None
    owner = tb.tb_frame.f_locals.get("self") if tb is not None else None
    return owner if isinstance(owner, Worker) else None


def _closing(workers: list[Any]) -> bool:
    """Whether there are ``workers`` and every one of them is closing or closed."""
    from distributed.core import Status

    done = {Status.closing, Status.closed, Status.closing_gracefully, Status.failed}
    return bool(workers) and all(w.status in done for w in workers)


class ClosingHeartbeatFilter(logging.Filter):
    """Drop ``distributed.worker``'s heartbeat-failure record of a closing worker."""

    def filter(self, record: logging.LogRecord) -> bool:
        if HEARTBEAT_FAILED not in str(record.msg):
            return True
        from distributed import Worker

        worker = _logging_worker(record)
        return not _closing([worker] if worker is not None else list(Worker._instances))


def quiet_closing_heartbeats() -> None:
    """Install :class:`ClosingHeartbeatFilter` on ``distributed.worker`` in this process (once)."""
    logger = logging.getLogger("distributed.worker")
    if not any(isinstance(f, ClosingHeartbeatFilter) for f in logger.filters):
        logger.addFilter(ClosingHeartbeatFilter())


def dask_setup(worker: Any) -> None:
    """Dask preload hook: runs in each worker process of a local cluster as it starts."""
    quiet_closing_heartbeats()
