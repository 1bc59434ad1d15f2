"""Named points of the store's metadata phases (``extend``, ``run --grow``) where a test kills the
process: :func:`reached` is a no-op unless ``$GEOSWEEP_TEST_EXIT_AT`` names the point, and then
ends the process at once (``os._exit``: no cleanup, no lease release, as a kill would).
``tests/test_metadata_kills.py`` kills a real process at each point and reruns the same command."""

from __future__ import annotations

import os

from geosweep import config

#: environment variable naming the point to exit at (tests only; its points: geosweep.config.EXIT_POINTS)
ENV = config.TEST_EXIT_AT.name
#: the exit status of a process ended at a named point
EXIT_STATUS = 86


def reached(name: str) -> None:
    """Exit the process now if ``$GEOSWEEP_TEST_EXIT_AT`` is ``name``; otherwise do nothing."""
    if config.TEST_EXIT_AT.get() == name:
        os._exit(EXIT_STATUS)
