"""Durations set by ``GEOSWEEP_*`` environment variables, parsed by :mod:`geosweep.config` (one parser
and one message for all of them). The declared settings (``geosweep.config.WORKER_TIMEOUT`` …) are the
way to read them: ``config.WORKER_TIMEOUT.get()``; this function serves callers not converted yet."""

from __future__ import annotations

from geosweep import config


def env_seconds(name: str, default: float, *, zero: bool, hint: str = "") -> float:
    """The environment variable ``name`` in seconds, or ``default`` when it is unset or blank.
    Raises :class:`geosweep.config.ConfigError` (a ``ValueError``) naming the variable and its value
    when that is not a number >= 0 (``zero=False``: > 0); ``hint`` ends the message."""
    return config.Setting(name, config.SECONDS, default, "", "", positive=not zero, hint=hint).get()
