"""Shared Numba decorator settings for every kernel.

``cache=True`` keeps compiled code on disk, ``nogil=True`` lets Dask threads run kernels
in parallel, and ``error_model="numpy"`` makes a division by zero produce inf/NaN (which
the integrators detect and report as a status) instead of raising inside compiled code.
No ``fastmath``: reassociation would break reversibility and bitwise reproducibility.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from numba import njit
from numba.core.errors import NumbaExperimentalFeatureWarning

# first-class function types carry the family contract (geosweep.kernels.core.signatures); they work
# and are cached, so the "experimental" notice is noise for users
warnings.filterwarnings("ignore", category=NumbaExperimentalFeatureWarning)

JIT_OPTIONS = {"cache": True, "nogil": True, "error_model": "numpy"}


def kjit(*args, **kwargs):
    """``numba.njit`` with the project's kernel options (see module docstring)."""
    opts = dict(JIT_OPTIONS)
    opts.update(kwargs)
    return njit(*args, **opts)


@contextmanager
def watch_compiles(on_first: Callable[[], None] | None = None) -> Iterator[list[int]]:
    """Count the functions Numba really compiles inside the block (a load from the on-disk cache is
    not a compile); ``on_first()`` runs when the first compile starts. Yields ``[count]``."""
    from numba.core import event

    count = [0]

    class _Notice(event.Listener):
        def on_start(self, ev: event.Event) -> None:
            count[0] += 1
            if count[0] == 1 and on_first is not None:
                on_first()

        def on_end(self, ev: event.Event) -> None:
            pass

    with event.install_listener("numba:compile", _Notice()):
        yield count
