"""How geosweep starts its helper processes (Prefect's temporary server, the compile helpers): the
working directory off ``sys.path``, a session of their own, and death with the parent."""

from __future__ import annotations

import sys
from types import MappingProxyType
from typing import Any

#: interpreter flag of every Python process geosweep starts: the working directory is not put on
#: ``sys.path`` (a ``uvicorn.py`` or ``yaml.py`` there must not run); unlike ``-I`` it keeps
#: ``PYTHONPATH`` and the user's site-packages, where plugins (``--import``) may live
SAFE_PATH = ("-P",)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    """Linux: the child gets SIGTERM when geosweep dies (even by SIGKILL), as it would by its process group."""
    if _PRCTL is not None:
        _PRCTL(1, 15)  # PR_SET_PDEATHSIG, SIGTERM


try:
    import ctypes

    _PRCTL = ctypes.CDLL(None, use_errno=True).prctl if sys.platform.startswith("linux") else None
except (ImportError, OSError, AttributeError):
    _PRCTL = None
#: ``Popen`` keywords of geosweep's helper processes (Prefect's temporary server, the compile helper):
#: a session of their own, so that a terminal's Ctrl-C (SIGINT to the foreground process group) reaches
#: only geosweep's main process, which stops them itself; they still die with it
DETACHED: MappingProxyType[str, Any] = MappingProxyType(
    {"start_new_session": True, "preexec_fn": _die_with_parent if _PRCTL is not None else None}
)
