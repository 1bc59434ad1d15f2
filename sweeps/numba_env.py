"""Numba's threading settings in the environment, checked before any work: ``NUMBA_NUM_THREADS`` and
``NUMBA_THREADING_LAYER``.

Numba reads both once, when it is first imported (``NUMBA_NUM_THREADS=0`` makes that import fail) or
when its threading layer starts (an unknown or unloadable layer fails there, in the middle of a run).
:func:`numba_env_problem` names a bad value in one line instead, without importing Numba for the
thread count and loading nothing but the requested layer's library (no kernel is compiled).
"""

from __future__ import annotations

import sys
import warnings

from geosweep import config

#: the values of ``NUMBA_THREADING_LAYER`` Numba knows: a layer, or a property it picks a layer for
LAYERS = ("default", "safe", "forksafe", "threadsafe", "tbb", "omp", "workqueue")
#: the layers Numba may pick for each value, in its order (``workqueue`` is built into Numba: it always loads)
_CANDIDATES = {
    "default": ("tbb", "omp", "workqueue"),
    "safe": ("tbb",),
    "threadsafe": ("tbb", "omp"),
    "forksafe": ("tbb", "workqueue") if sys.platform.startswith("linux") else ("tbb", "omp", "workqueue"),
    "tbb": ("tbb",),
    "omp": ("omp",),
    "workqueue": ("workqueue",),
}


def _loadable(layer: str) -> bool:
    """Whether the library of threading ``layer`` loads in this process (what Numba itself tries)."""
    if layer == "workqueue":
        return True
    import importlib

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # an incompatible TBB is a warning, then an ImportError
            if layer == "tbb":
                from numba.np.ufunc import parallel

                parallel._check_tbb_version_compatible()
            importlib.import_module(f"numba.np.ufunc.{'tbbpool' if layer == 'tbb' else 'omppool'}")
    except ImportError:
        return False
    return True


def _threads_problem() -> str | None:
    raw = config.environ("NUMBA_NUM_THREADS").strip()
    if not raw:
        return None
    try:
        if int(raw) >= 1:
            return None
    except ValueError:
        pass
    return f"NUMBA_NUM_THREADS={raw!r}: must be a whole number of threads >= 1 (or unset: one per core)"


def _layer_problem() -> str | None:
    raw = config.environ("NUMBA_THREADING_LAYER").strip()
    value = raw.lower()
    if not value:
        return None
    if value not in LAYERS:
        return f"NUMBA_THREADING_LAYER={raw!r}: not a Numba threading layer; one of {', '.join(LAYERS)}"
    if "workqueue" in _CANDIDATES[value] or any(_loadable(layer) for layer in _CANDIDATES[value]):
        return None
    missing = " or ".join(_CANDIDATES[value])
    here = [name for name in LAYERS if "workqueue" in _CANDIDATES[name] or any(map(_loadable, _CANDIDATES[name]))]
    return (
        f"NUMBA_THREADING_LAYER={raw!r}: its threading layer ({missing}) cannot be loaded here "
        f"(not installed); use one of {', '.join(here)}"
    )


def numba_env_problem() -> str | None:
    """Why Numba's threading environment cannot run kernels (one line naming the variable), or None."""
    return _threads_problem() or _layer_problem()
