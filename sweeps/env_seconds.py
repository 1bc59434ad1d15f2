"""Durations set by ``GEOSWEEP_*`` environment variables: one parser and one message for all of them
(:func:`geosweep.sweeps.liveness.unresponsive_seconds`, :func:`geosweep.sweeps.first_worker.first_worker_seconds`,
:func:`geosweep.sweeps.execution.in_driver_seconds`)."""

from __future__ import annotations

import os


def env_seconds(name: str, default: float, *, zero: bool, hint: str = "") -> float:
    """The environment variable ``name`` in seconds, or ``default`` when it is unset or blank.
    Raises ``ValueError`` naming the variable and its value when that is not a number >= 0
    (``zero=False``: > 0); ``hint`` ends the message."""
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value >= 0 if zero else value > 0):  # NaN fails both
        raise ValueError(f"{name}={raw!r}: must be a number of seconds {'>=' if zero else '>'} 0{hint}")
    return value
